#!/usr/bin/env bash
# Starts sfclab's single-node test cluster on 127.0.0.1 and waits until its node is Ready:
# etcd (Debian's), kube-apiserver, kube-controller-manager, kube-scheduler and a kubelet
# (built by build.sh) over a private containerd (its own root, state and socket: never
# Docker's), runc behind a wrapper, and the CNI bridge plugin. Idempotent: a running, healthy
# cluster is left as it is. Everything it creates is under $KUBE_STATE and $KUBE_RUN, plus
# the bridge sfck0, the kubelet's cgroups (kubepods), two FORWARD accept rules tagged
# "sfclab-kube" and the BPF file system on /sys/fs/bpf when none was mounted, all of which
# stop.sh removes.
#
# Environment: KUBE_BIN (binaries, default /var/cache/sfclab-kube/bin), KUBE_STATE (default
# /var/lib/sfclab-kube), KUBE_RUN (default /run/sfclab-kube), KUBE_IMPORT (image archives to
# import into the node's containerd, space-separated, e.g. from `docker save`).
# The admin kubeconfig is $KUBE_STATE/admin.kubeconfig.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=env.sh
. "$here/env.sh"
t0=$(date +%s.%N)
since() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

if healthy; then
	echo "kubecluster: already running (kubeconfig $KUBECONFIG_ADMIN)"
	import_images
	exit 0
fi
# A half-started or crashed cluster is cleared first: start from nothing.
"$here/stop.sh" >/dev/null
[ -x "$KUBE_BIN/kube-apiserver" ] || { echo "kubecluster: no binaries in $KUBE_BIN; run $here/build.sh" >&2; exit 1; }
for p in etcd containerd runc openssl /usr/lib/cni/bridge; do
	command -v "$p" >/dev/null || { echo "kubecluster: $p is missing; run scripts/install-deps.sh" >&2; exit 1; }
done
mkdir -p "$KUBE_STATE"/{pki,log,etcd,containerd,cni,cni-ipam,kubelet,pod-logs,opt,cm,sched,images} "$KUBE_RUN"
[ -d /var/log/containers ] || { mkdir -p /var/log/containers; touch "$KUBE_STATE/created-var-log-containers"; }
[ -d /var/lib/cni ] || { mkdir -p /var/lib/cni; touch "$KUBE_STATE/created-var-lib-cni"; }
# The node's BPF file system, as systemd mounts it at boot: the sfclab agent pins transparent
# labs' steering maps there (a mount of its own in its pod would hide them from the node).
# Mounted here only when absent (recorded; stop.sh unmounts it); one sfclab mounted itself is
# taken over, so that sfclab's last unpin does not unmount it under the agent.
if [ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" != bpf_fs ]; then
	mount -t bpf bpf /sys/fs/bpf -o mode=0700 && touch "$KUBE_STATE/mounted-bpffs"
elif [ -f /run/sfclab/bpffs-mounted ]; then
	rm -f /run/sfclab/bpffs-mounted && touch "$KUBE_STATE/mounted-bpffs"
fi

# --- certificates (openssl): one CA, the apiserver's serving cert, client certs -------------
pki=$KUBE_STATE/pki
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 30 \
	-subj "/CN=sfclab-kube-ca" 2>/dev/null
cert apiserver kube-apiserver "" "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,IP:$SERVICE_IP"
cert kubelet-serving system:node:localhost system:nodes "IP:127.0.0.1,DNS:localhost"
cert admin sfclab-admin system:masters
cert apiserver-kubelet kube-apiserver-kubelet-client system:masters
cert controller-manager system:kube-controller-manager ""
cert scheduler system:kube-scheduler ""
cert kubelet system:node:localhost system:nodes
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
kubeconfig admin sfclab-admin
kubeconfig controller-manager system:kube-controller-manager
kubeconfig scheduler system:kube-scheduler
kubeconfig kubelet system:node:localhost
echo "kubecluster: certificates and kubeconfigs $(since) s"

# The nodes' underlay: node 1's InternalIP on a bridge that node2.sh's nodes plug into.
ip link add "$UNDERLAY_BRIDGE" type bridge
ip addr add "$NODE1_IP/24" dev "$UNDERLAY_BRIDGE"
ip link set "$UNDERLAY_BRIDGE" up
# The apiserver reaches kubelets by node name: node 2's ($NODE2) is 127.0.0.1 in a hosts file
# of its own, bind-mounted on /etc/hosts in the apiserver's private mount namespace (the
# machine's /etc/hosts is never edited); the relay there leads to node 2's kubelet.
{ cat /etc/hosts; echo "127.0.0.1 $NODE2"; } >"$KUBE_STATE/hosts"

# --- daemons -------------------------------------------------------------------------------
daemon() { spawn "$KUBE_STATE/log/$1.log" "$KUBE_RUN/$1.pid" "${@:2}"; } # name argv...
daemon etcd etcd --name sfclab-kube --data-dir "$KUBE_STATE/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster "sfclab-kube=http://127.0.0.1:$ETCD_PEER_PORT"

# This VM refuses a negative oom_score_adj even to root, which the kubelet asks for its pods'
# sandboxes and guaranteed containers: the wrapper clamps it to 0 in the OCI spec runc reads.
cat >"$KUBE_STATE/runc" <<'EOF'
#!/bin/sh
# runc behind sfclab's test cluster: a negative oomScoreAdj becomes 0 (see start.sh).
prev=
for a in "$@"; do
	case $prev in
	--bundle | -b) [ -f "$a/config.json" ] && sed -i -E 's/"oomScoreAdj": *-[0-9]+/"oomScoreAdj":0/' "$a/config.json" ;;
	--process | -p) [ -f "$a" ] && sed -i -E 's/"oomScoreAdj": *-[0-9]+/"oomScoreAdj":0/' "$a" ;;
	esac
	prev=$a
done
exec runc "$@"
EOF
chmod +x "$KUBE_STATE/runc"
containerd_conf "$KUBE_STATE/containerd.toml" "$KUBE_STATE/containerd" "$KUBE_RUN/containerd" "$CONTAINERD_SOCK" \
	"$KUBE_STATE/opt" "$KUBE_STATE/cni"
cni_conf "$KUBE_STATE/cni/10-sfclab-kube.conflist" sfclab-kube "$POD_CIDR" "$KUBE_STATE/cni-ipam"
daemon containerd containerd --config "$KUBE_STATE/containerd.toml"

# Debian's etcd 3.4 cannot answer the watch cache's progress requests, so reads the cache
# serves wait for it to time out (3 s each: deleting a namespace took minutes). Without the
# watch cache every read goes to etcd.
daemon kube-apiserver unshare -m --propagation private sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$KUBE_STATE/hosts" \
	"$KUBE_BIN/kube-apiserver" --bind-address=127.0.0.1 --secure-port="$API_PORT" \
	--advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
	--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
	--client-ca-file="$pki/ca.crt" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
	--kubelet-client-certificate="$pki/apiserver-kubelet.crt" --kubelet-client-key="$pki/apiserver-kubelet.key" \
	--kubelet-preferred-address-types=Hostname \
	--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$pki/sa.pub" \
	--service-account-signing-key-file="$pki/sa.key" --service-cluster-ip-range="$SERVICE_CIDR" \
	--authorization-mode=Node,RBAC --allow-privileged=true --profiling=false \
	--watch-cache=false

# Images: the pause image (built here, no registry) and any archives handed in.
for _ in $(seq 1 100); do [ -S "$CONTAINERD_SOCK" ] && break; sleep 0.1; done
build_pause() {
	local d=$KUBE_STATE/images/pause
	rm -rf "$d" && mkdir -p "$d/rootfs" "$d/img"
	(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$d/rootfs/pause" ./pause)
	tar -C "$d/rootfs" --owner=0 --group=0 --numeric-owner -cf "$d/layer.tar" pause
	local lsha csha
	lsha=$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
	mkdir -p "$d/img/$lsha" && mv "$d/layer.tar" "$d/img/$lsha/layer.tar"
	printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$lsha" >"$d/config.json"
	csha=$(sha256sum "$d/config.json" | cut -d' ' -f1)
	mv "$d/config.json" "$d/img/$csha.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$csha" "$PAUSE_IMAGE" "$lsha" >"$d/img/manifest.json"
	tar -C "$d/img" -cf "$KUBE_STATE/images/pause.tar" .
	rm -rf "$d"
}
build_pause
ctr -a "$CONTAINERD_SOCK" -n k8s.io images import "$KUBE_STATE/images/pause.tar" >/dev/null
import_images
echo "kubecluster: containerd and images $(since) s"

wait_for "apiserver ready" 60 api_ready
daemon kube-controller-manager "$KUBE_BIN/kube-controller-manager" --kubeconfig="$KUBE_STATE/controller-manager.kubeconfig" \
	--authentication-kubeconfig="$KUBE_STATE/controller-manager.kubeconfig" \
	--authorization-kubeconfig="$KUBE_STATE/controller-manager.kubeconfig" \
	--bind-address=127.0.0.1 --secure-port="$CM_PORT" --cert-dir="$KUBE_STATE/cm" --leader-elect=false \
	--service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
	--use-service-account-credentials=true --profiling=false
daemon kube-scheduler "$KUBE_BIN/kube-scheduler" --kubeconfig="$KUBE_STATE/scheduler.kubeconfig" \
	--authentication-kubeconfig="$KUBE_STATE/scheduler.kubeconfig" \
	--authorization-kubeconfig="$KUBE_STATE/scheduler.kubeconfig" \
	--bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --cert-dir="$KUBE_STATE/sched" --leader-elect=false --profiling=false

kubelet_conf "$KUBE_STATE/kubelet.yaml" "$KUBELET_PORT" "$KUBELET_HEALTHZ_PORT" kubelet-serving "$CONTAINERD_SOCK" \
	"$KUBE_STATE/pod-logs" "$KUBE_STATE/kubelet/volume-plugins"
daemon kubelet "$KUBE_BIN/kubelet" --config="$KUBE_STATE/kubelet.yaml" --kubeconfig="$KUBE_STATE/kubelet.kubeconfig" \
	--hostname-override=localhost --node-ip="$NODE1_IP" --root-dir="$KUBE_STATE/kubelet" --cert-dir="$KUBE_STATE/kubelet/pki"

# Docker's FORWARD policy drops bridged traffic when br_netfilter is loaded: accept the pod
# bridge's (tagged, removed by stop.sh).
for dir in -i -o; do
	iptables -w -I FORWARD "$dir" "$BRIDGE" -m comment --comment sfclab-kube -j ACCEPT
done
wait_for "node localhost Ready" 120 node_ready
# Usable means pods are admitted: the not-ready taint is gone, the default account exists.
wait_for "node localhost without taints" 60 untainted
wait_for "service account default" 60 default_sa
echo "kubecluster: node localhost Ready after $(since) s; kubeconfig $KUBECONFIG_ADMIN, server $SERVER"
