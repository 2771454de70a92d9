#!/usr/bin/env bash
# Stops sfclab's test cluster and removes everything start.sh created: its pods (their
# processes, network namespaces and mounts), the daemons, $KUBE_STATE and $KUBE_RUN, the
# bridge sfck0, the kubelet's cgroups, the FORWARD rules tagged "sfclab-kube" and the
# iptables chains the kubelet made. Safe to run when nothing runs; never touches Docker's
# containers, networks or its containerd (only processes recorded in $KUBE_RUN, and shims of
# the cluster's own containerd socket).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=env.sh
. "$here/env.sh"

case $KUBE_STATE$KUBE_RUN in
*//* | *..*) echo "kubecluster: odd KUBE_STATE or KUBE_RUN" >&2; exit 1 ;;
esac
[[ $KUBE_STATE == /*sfclab-kube* && $KUBE_RUN == /*sfclab-kube* ]] || { echo "kubecluster: KUBE_STATE and KUBE_RUN must name sfclab-kube directories" >&2; exit 1; }
pidof_() { [ -f "$KUBE_RUN/$1.pid" ] && cat "$KUBE_RUN/$1.pid"; }
# The second node first (node2.sh), when it runs or left anything.
"$here/node2.sh" stop >/dev/null
# A running cluster deletes its pods itself: the kubelet stops their sandboxes (the CNI
# plugins remove the pods' interfaces and network namespaces). Bounded: 15 s.
if running kubelet && api_ready; then
	kc delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1
	for _ in $(seq 1 150); do
		compgen -G "/var/lib/cni/results/sfclab-kube-*" >/dev/null || break
		sleep 0.1
	done
fi
# Then the kubelet, so that it restarts nothing; then every container of the cluster's
# containerd, killed and deleted (which unmounts their root filesystems).
[ -n "$(pidof_ kubelet)" ] && kill_wait "$(pidof_ kubelet)"
[ -S "$CONTAINERD_SOCK" ] && running containerd && clear_containers "$CONTAINERD_SOCK"
# Shims of the cluster's containerd whose containers outlived the above.
kill_shims "$CONTAINERD_SOCK"
for d in $DAEMONS; do
	p=$(pidof_ "$d") && [ -n "$p" ] && kill_wait "$p"
done
# Processes left in the kubelet's cgroups (a pod's container whose shim was killed).
for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
	[ -d "$c" ] || continue
	find "$c" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | xargs -r kill -9 2>/dev/null
done
sleep 0.2
# What a crashed cluster left of its pods: their network namespaces, made by containerd under
# /run/netns (cni-UUID), each named in the CNI result cache of the cluster's network (the
# interfaces' "sandbox"), and the cache files of that pod (its network's and its loopback's).
for f in /var/lib/cni/results/sfclab-kube-*; do
	[ -f "$f" ] || continue
	id=$(grep -o '"containerId":"[^"]*"' "$f" | head -1 | cut -d'"' -f4)
	ns=$(grep -o '"sandbox":"[^"]*"' "$f" | head -1 | cut -d'"' -f4)
	case $ns in
	/var/run/netns/cni-* | /run/netns/cni-*)
		umount "$ns" 2>/dev/null
		rm -f "$ns"
		;;
	esac
	rm -f "$f"
	[ -n "$id" ] && rm -f /var/lib/cni/results/cni-loopback-"$id"-lo
done
[ -f "$KUBE_STATE/created-var-lib-cni" ] && rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null
# Mounts under the cluster's directories, deepest first.
for root in "$KUBE_RUN" "$KUBE_STATE"; do
	awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null; done
done
ip link del "$BRIDGE" 2>/dev/null
ip link del "$UNDERLAY_BRIDGE" 2>/dev/null
while rule=$(iptables -w -S FORWARD 2>/dev/null | grep -m1 -- '--comment sfclab-kube'); do
	# shellcheck disable=SC2086
	iptables -w ${rule/-A/-D} || break
done
# Chains the kubelet makes even without its utility chains (its canaries, the hint).
for ipt in iptables ip6tables; do
	for table in filter nat mangle; do
		for chain in $($ipt -w -t "$table" -S 2>/dev/null | awk '$1 == "-N" && ($2 ~ /^KUBE-KUBELET-CANARY$|^KUBE-IPTABLES-HINT$|^KUBE-FIREWALL$/) { print $2 }'); do
			$ipt -w -t "$table" -F "$chain" 2>/dev/null
			$ipt -w -t "$table" -X "$chain" 2>/dev/null
		done
	done
done
# The kubelet's cgroups, deepest first (empty by now).
for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
	[ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
done
find /var/log/containers -maxdepth 1 -type l -lname "$KUBE_STATE/*" -delete 2>/dev/null
[ -f "$KUBE_STATE/created-var-log-containers" ] && rmdir /var/log/containers 2>/dev/null
# The BPF file system start.sh mounted, once nothing but the kernel's own entries is in it.
# While other labs' maps are pinned there, the record goes back to sfclab's own mark, so that
# the last unpin (package steer) unmounts it instead of nobody.
if [ -f "$KUBE_STATE/mounted-bpffs" ]; then
	if [ -z "$(ls /sys/fs/bpf | grep -vx -e maps.debug -e progs.debug)" ]; then
		umount /sys/fs/bpf
	else
		mkdir -p /run/sfclab && touch /run/sfclab/bpffs-mounted
	fi
fi
rm -rf "$KUBE_RUN" "$KUBE_STATE"
echo "kubecluster: stopped; removed $KUBE_STATE and $KUBE_RUN"
