# Settings and helpers shared by start.sh and stop.sh (sourced, not run).
KUBE_BIN=${KUBE_BIN:-/var/cache/sfclab-kube/bin}
KUBE_STATE=${KUBE_STATE:-/var/lib/sfclab-kube}
KUBE_RUN=${KUBE_RUN:-/run/sfclab-kube}
# Ports on 127.0.0.1, away from the defaults so that no other etcd or Kubernetes clashes.
ETCD_PORT=23790
ETCD_PEER_PORT=23800
API_PORT=16443
CM_PORT=10357
SCHED_PORT=10359
KUBELET_PORT=10350
KUBELET_HEALTHZ_PORT=10348
SERVER=https://127.0.0.1:$API_PORT
CONTAINERD_SOCK=$KUBE_RUN/containerd.sock
# The cluster's own ranges (pods' eth0, services): in the benchmarking range labs use, at its
# top end, which sfclab's allocator reaches last.
POD_CIDR=198.19.254.0/24
SERVICE_CIDR=198.19.255.0/24
SERVICE_IP=198.19.255.1
BRIDGE=sfck0
PAUSE_IMAGE=docker.io/sfclab/pause:1
KUBECONFIG_ADMIN=$KUBE_STATE/admin.kubeconfig
DAEMONS="kubelet kube-scheduler kube-controller-manager kube-apiserver containerd etcd"
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost

kc() { "$KUBE_BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
api_ready() {
	[ -f "$KUBECONFIG_ADMIN" ] && curl -fsS --max-time 2 --cacert "$KUBE_STATE/pki/ca.crt" \
		--cert "$KUBE_STATE/pki/admin.crt" --key "$KUBE_STATE/pki/admin.key" "$SERVER/readyz" >/dev/null 2>&1
}
node_ready() {
	[ "$(kc get node localhost -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
untainted() { [ -z "$(kc get node localhost -o 'jsonpath={.spec.taints}' 2>/dev/null)" ]; }
default_sa() { kc get serviceaccount default -n default >/dev/null 2>&1; }
running() { # name: its recorded process is alive
	local f=$KUBE_RUN/$1.pid
	[ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}
healthy() {
	for d in $DAEMONS; do running "$d" || return 1; done
	api_ready && node_ready && untainted
}
wait_for() { # what seconds check
	local what=$1 n=$(($2 * 10)) check=$3
	for _ in $(seq 1 "$n"); do
		"$check" && return 0
		sleep 0.1
	done
	echo "kubecluster: timed out waiting for $what; logs in $KUBE_STATE/log" >&2
	exit 1
}
import_images() {
	for a in ${KUBE_IMPORT:-}; do
		ctr -a "$CONTAINERD_SOCK" -n k8s.io images import "$a" >/dev/null
		echo "kubecluster: imported $a"
	done
}
