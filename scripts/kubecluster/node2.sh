#!/usr/bin/env bash
# node2.sh start|stop|silence: a second node of the test cluster on this machine, for labs whose
# segments cross nodes (start.sh's cluster must run). Node 2 ($NODE2) is a containerd and a
# kubelet of their own (roots, sockets, ports, cgroup root /$NODE2_CGROUP, so that neither
# kubelet removes the other's pod cgroups) started inside the network namespace $NODE2_NS:
# its pods' hostNetwork (the sfclab agent) is that namespace, so the two nodes' VXLAN
# devices never share one. A veth joins the namespace ($NODE2_IP) to the underlay bridge of
# the root namespace ($NODE1_IP): the nodes' InternalIPs, which the agents' VXLAN uses.
# Nothing listens beyond 127.0.0.1: a relay (relay/) listens on 127.0.0.1:$API_PORT inside
# the namespace for the apiserver, and on 127.0.0.1:$NODE2_KUBELET_PORT here for the
# kubelet, which the apiserver reaches by the name $NODE2 (127.0.0.1 in its own hosts file,
# start.sh). Images are copied from node 1's containerd.
#
# stop removes everything start made: the node object, its pods (processes, network
# namespaces, mounts), the daemons, the namespace with the veth, the cgroups, the
# certificates and $NODE2_STATE, $NODE2_RUN. stop.sh runs it first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=env.sh
. "$here/env.sh"
t0=$(date +%s.%N)
since() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
nspath=/run/netns/$NODE2_NS
innet() { nsenter --net="$nspath" "$@"; }
ctr2() { ctr -a "$NODE2_SOCK" -n k8s.io "$@"; }
pid2() { [ -f "$NODE2_RUN/$1.pid" ] && cat "$NODE2_RUN/$1.pid"; }
running2() { local p; p=$(pid2 "$1") && kill -0 "$p" 2>/dev/null; }
node2_ready() { node_ready "$NODE2"; }
node2_untainted() { untainted "$NODE2"; }
# The cgroup directories of node 2's root, one per v1 hierarchy (or the v2 one).
cgroups2() {
	if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
		echo "/sys/fs/cgroup/$NODE2_CGROUP"
		return
	fi
	local c
	for c in /sys/fs/cgroup/*/; do
		[ -f "$c/cgroup.procs" ] && [ ! -L "${c%/}" ] && echo "${c}$NODE2_CGROUP"
	done
}

start() {
	healthy || { echo "kubecluster: node localhost is not running; run $here/start.sh first" >&2; exit 1; }
	if running2 kubelet && running2 containerd && running2 relay && node2_ready && node2_untainted; then
		echo "kubecluster: node $NODE2 already running"
		return
	fi
	(stop) >/dev/null
	mkdir -p "$NODE2_STATE"/{containerd,cni,cni-ipam,kubelet,pod-logs,opt} "$NODE2_RUN"

	# The node's network namespace and its underlay address.
	ip netns add "$NODE2_NS"
	ip -n "$NODE2_NS" link set lo up
	ip link add "sfc$NODE2" type veth peer name ul0 netns "$NODE2_NS"
	ip link set "sfc$NODE2" master "$UNDERLAY_BRIDGE" up
	ip -n "$NODE2_NS" addr add "$NODE2_IP/24" dev ul0
	ip -n "$NODE2_NS" link set ul0 up

	# The kubelet's cgroup root, in every hierarchy (cpuset needs its CPUs and memory nodes).
	local c
	for c in $(cgroups2); do
		mkdir -p "$c"
		if [ -f "$c/cpuset.cpus" ]; then
			cat "$(dirname "$c")/cpuset.cpus" >"$c/cpuset.cpus"
			cat "$(dirname "$c")/cpuset.mems" >"$c/cpuset.mems"
		fi
	done

	cert "kubelet-$NODE2" "system:node:$NODE2" system:nodes
	cert "kubelet-$NODE2-serving" "system:node:$NODE2" system:nodes "IP:127.0.0.1,DNS:$NODE2"
	kubeconfig "kubelet-$NODE2" "system:node:$NODE2"

	daemon2() { spawn "$KUBE_STATE/log/$NODE2-$1.log" "$NODE2_RUN/$1.pid" "${@:2}"; } # name argv...
	(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$NODE2_STATE/relay" ./relay)
	daemon2 relay "$NODE2_STATE/relay" -netns "$nspath" \
		-into "127.0.0.1:$NODE2_KUBELET_PORT" -out "127.0.0.1:$API_PORT"

	containerd_conf "$NODE2_STATE/containerd.toml" "$NODE2_STATE/containerd" "$NODE2_RUN/containerd" "$NODE2_SOCK" \
		"$NODE2_STATE/opt" "$NODE2_STATE/cni"
	cni_conf "$NODE2_STATE/cni/10-sfclab-kube.conflist" "sfclab-kube-$NODE2" "$NODE2_POD_CIDR" "$NODE2_STATE/cni-ipam"
	daemon2 containerd nsenter --net="$nspath" containerd --config "$NODE2_STATE/containerd.toml"
	for _ in $(seq 1 100); do [ -S "$NODE2_SOCK" ] && break; sleep 0.1; done
	# Node 1's images (the pause image, sfclab's node image), copied.
	local refs
	refs=$(ctr -a "$CONTAINERD_SOCK" -n k8s.io images ls -q | grep -v -e '^sha256:' -e '@')
	# shellcheck disable=SC2086
	ctr -a "$CONTAINERD_SOCK" -n k8s.io images export "$NODE2_STATE/images.tar" $refs
	ctr2 images import "$NODE2_STATE/images.tar" >/dev/null
	rm -f "$NODE2_STATE/images.tar"
	echo "kubecluster: node $NODE2: namespace, containerd and images $(since) s"

	kubelet_conf "$NODE2_STATE/kubelet.yaml" "$NODE2_KUBELET_PORT" "$NODE2_KUBELET_HEALTHZ_PORT" "kubelet-$NODE2-serving" \
		"$NODE2_SOCK" "$NODE2_STATE/pod-logs" "$NODE2_STATE/kubelet/volume-plugins" "/$NODE2_CGROUP"
	daemon2 kubelet nsenter --net="$nspath" "$KUBE_BIN/kubelet" --config="$NODE2_STATE/kubelet.yaml" \
		--kubeconfig="$KUBE_STATE/kubelet-$NODE2.kubeconfig" --hostname-override="$NODE2" --node-ip="$NODE2_IP" \
		--root-dir="$NODE2_STATE/kubelet" --cert-dir="$NODE2_STATE/kubelet/pki"
	wait_for "node $NODE2 Ready" 120 node2_ready
	wait_for "node $NODE2 without taints" 60 node2_untainted
	echo "kubecluster: node $NODE2 Ready after $(since) s (underlay $NODE2_IP, namespace $NODE2_NS)"
}

stop() {
	set +e
	# Node 2's pods, deleted through its kubelet (which tears their networks down).
	if running2 kubelet && api_ready; then
		kc delete pods --all-namespaces --field-selector "spec.nodeName=$NODE2" --grace-period=0 --force --wait=false >/dev/null 2>&1
		for _ in $(seq 1 150); do
			compgen -G "/var/lib/cni/results/sfclab-kube-$NODE2-*" >/dev/null || break
			sleep 0.1
		done
	fi
	local p
	p=$(pid2 kubelet) && kill_wait "$p"
	[ -S "$NODE2_SOCK" ] && running2 containerd && clear_containers "$NODE2_SOCK"
	kill_shims "$NODE2_SOCK"
	for d in containerd relay; do p=$(pid2 "$d") && kill_wait "$p"; done
	local c
	for c in $(cgroups2); do
		[ -d "$c" ] && find "$c" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | xargs -r kill -9 2>/dev/null
	done
	sleep 0.2
	# Pod network namespaces left by a crash (as stop.sh does for node 1's network).
	local f id ns
	for f in /var/lib/cni/results/sfclab-kube-"$NODE2"-*; do
		[ -f "$f" ] || continue
		id=$(grep -o '"containerId":"[^"]*"' "$f" | head -1 | cut -d'"' -f4)
		ns=$(grep -o '"sandbox":"[^"]*"' "$f" | head -1 | cut -d'"' -f4)
		case $ns in
		/var/run/netns/cni-* | /run/netns/cni-*) umount "$ns" 2>/dev/null; rm -f "$ns" ;;
		esac
		rm -f "$f"
		[ -n "$id" ] && rm -f /var/lib/cni/results/cni-loopback-"$id"-lo
	done
	local root m
	for root in "$NODE2_RUN" "$NODE2_STATE"; do
		awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
			while read -r m; do umount -l "$m" 2>/dev/null; done
	done
	ip netns del "$NODE2_NS" 2>/dev/null
	ip link del "sfc$NODE2" 2>/dev/null
	for c in $(cgroups2); do
		[ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	# The node object, then what is still bound to it: the DaemonSet controller recreated its
	# agent pod when the pods above were deleted, and it recounts its desired pods (it does
	# not on a node's deletion) only when a pod of it changes: without this the DaemonSet
	# would wait for an agent on kn2 until its pod is garbage-collected. Bounded: 15 s.
	if api_ready; then
		kc delete node "$NODE2" --ignore-not-found >/dev/null 2>&1
		for _ in $(seq 1 30); do
			[ -z "$(kc get pods -A --field-selector "spec.nodeName=$NODE2" -o name 2>/dev/null)" ] && break
			kc delete pods -A --field-selector "spec.nodeName=$NODE2" --grace-period=0 --force --wait=false >/dev/null 2>&1
			sleep 0.5
		done
	fi
	rm -f "$KUBE_STATE/pki/kubelet-$NODE2".* "$KUBE_STATE/pki/kubelet-$NODE2-serving".* "$KUBE_STATE/kubelet-$NODE2.kubeconfig"
	case $NODE2_STATE$NODE2_RUN in *sfclab-kube/"$NODE2"*sfclab-kube/"$NODE2") rm -rf "$NODE2_STATE" "$NODE2_RUN" ;; esac
	echo "kubecluster: node $NODE2 stopped"
}

# silence: node 2 as a node that crashed or lost its network: its kubelet is killed (no
# goodbye to the API server), its pods' processes keep running, and its Ready condition is set
# to Unknown as the node lifecycle controller sets it (reason NodeStatusUnknown), which that
# controller does by itself only after its grace period (50 s) without news from the kubelet.
# The node object stays; stop removes the rest.
silence() {
	local p
	p=$(pid2 kubelet) || { echo "kubecluster: node $NODE2 is not running" >&2; exit 1; }
	kill -9 "$p"
	for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	rm -f "$NODE2_RUN/kubelet.pid"
	kc patch node "$NODE2" --subresource=status --type=strategic -p \
		'{"status":{"conditions":[{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status (node2.sh silence)."}]}}' >/dev/null
	echo "kubecluster: node $NODE2 silenced (kubelet killed, Ready=Unknown)"
}

case ${1:-} in
start) start ;;
stop) stop ;;
silence) silence ;;
*) echo "usage: $0 start|stop|silence" >&2; exit 2 ;;
esac
