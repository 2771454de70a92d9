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
# The nodes' underlay (their InternalIPs, which the sfclab agents' VXLAN devices use): a
# bridge in the root namespace holding node 1's address; node2.sh plugs node 2's namespace
# into it with a veth.
UNDERLAY_BRIDGE=sfcku0
UNDERLAY_PREFIX=198.19.253
NODE1_IP=$UNDERLAY_PREFIX.1
# The second node (node2.sh): its containerd and kubelet run in network namespace $NODE2_NS,
# reach the apiserver through a relay, and the apiserver reaches its kubelet by the name
# $NODE2 (127.0.0.1 in the apiserver's own hosts file) on port $NODE2_KUBELET_PORT.
NODE2=kn2
NODE2_NS=sfclab-kn2
NODE2_IP=$UNDERLAY_PREFIX.2
NODE2_POD_CIDR=198.19.252.0/24
NODE2_KUBELET_PORT=10351
NODE2_KUBELET_HEALTHZ_PORT=10349
NODE2_STATE=$KUBE_STATE/$NODE2
NODE2_RUN=$KUBE_RUN/$NODE2
NODE2_SOCK=$NODE2_RUN/containerd.sock
NODE2_CGROUP=sfclab-$NODE2
PAUSE_IMAGE=docker.io/sfclab/pause:1
KUBECONFIG_ADMIN=$KUBE_STATE/admin.kubeconfig
DAEMONS="kubelet kube-scheduler kube-controller-manager kube-apiserver containerd etcd"
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost

# cert NAME CN O [SANs]: a key and a certificate signed by the cluster's CA in $KUBE_STATE/pki.
cert() {
	local pki=$KUBE_STATE/pki name=$1 cn=$2 o=$3 san=${4:-}
	openssl genrsa -out "$pki/$name.key" 2048 2>/dev/null
	local ext=$pki/$name.ext
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"; else echo "extendedKeyUsage=clientAuth"; fi
	} >"$ext"
	local subj="/CN=$cn"
	[ -n "$o" ] && subj="/O=$o$subj"
	openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
	openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
		-days 30 -extfile "$ext" -out "$pki/$name.crt" 2>/dev/null
}
# kubeconfig NAME USER: $KUBE_STATE/NAME.kubeconfig with the certificate NAME, for $SERVER.
kubeconfig() {
	local pki=$KUBE_STATE/pki b64ca b64crt b64key
	b64ca=$(base64 -w0 <"$pki/ca.crt")
	b64crt=$(base64 -w0 <"$pki/$1.crt")
	b64key=$(base64 -w0 <"$pki/$1.key")
	cat >"$KUBE_STATE/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sfclab-kube
  cluster: {server: "$SERVER", certificate-authority-data: $b64ca}
users:
- name: $2
  user: {client-certificate-data: $b64crt, client-key-data: $b64key}
contexts:
- name: sfclab-kube
  context: {cluster: sfclab-kube, user: $2}
current-context: sfclab-kube
EOF
	chmod 600 "$KUBE_STATE/$1.kubeconfig"
}
# containerd_conf FILE ROOT STATE SOCK OPT CNI_CONF_DIR: a private containerd's configuration
# (runc through the wrapper start.sh writes, the pause image, the CNI configuration).
containerd_conf() {
	cat >"$1" <<EOF
version = 2
root = "$2"
state = "$3"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$4"
[ttrpc]
  address = "$4.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$5"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$KUBE_STATE/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$6"
    max_conf_num = 1
EOF
}
# cni_conf FILE NETWORK SUBNET IPAM_DIR: the pods' own network, a bridge $BRIDGE (in the
# node's network namespace) with no gateway and no masquerade (lab traffic never takes it;
# sfclab wires its segments itself).
cni_conf() {
	cat >"$1" <<EOF
{"cniVersion": "0.4.0", "name": "$2", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "ipMasq": false, "hairpinMode": false,
   "ipam": {"type": "host-local", "dataDir": "$4", "ranges": [[{"subnet": "$3"}]]}},
  {"type": "loopback"}
]}
EOF
}
# kubelet_conf FILE PORT HEALTHZ_PORT CERT_NAME SOCK PODLOGS PLUGINS [CGROUP_ROOT]: a
# kubelet's configuration, serving on 127.0.0.1 only.
kubelet_conf() {
	local pki=$KUBE_STATE/pki
	cat >"$1" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $2
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $3
tlsCertFile: $pki/$4.crt
tlsPrivateKeyFile: $pki/$4.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: "${8:-}"
containerRuntimeEndpoint: unix://$5
failSwapOn: false
failCgroupV1: false
makeIPTablesUtilChains: false
podLogsDir: $6
volumePluginDir: $7
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
rotateCertificates: false
localStorageCapacityIsolation: false
EOF
}
kc() { "$KUBE_BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
api_ready() {
	[ -f "$KUBECONFIG_ADMIN" ] && curl -fsS --max-time 2 --cacert "$KUBE_STATE/pki/ca.crt" \
		--cert "$KUBE_STATE/pki/admin.crt" --key "$KUBE_STATE/pki/admin.key" "$SERVER/readyz" >/dev/null 2>&1
}
node_ready() { # [node]
	[ "$(kc get node "${1:-localhost}" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
untainted() { [ -z "$(kc get node "${1:-localhost}" -o 'jsonpath={.spec.taints}' 2>/dev/null)" ]; }
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
# spawn LOG PIDFILE argv...: starts a daemon in a session of its own, its output in LOG, its
# PID in PIDFILE. It keeps none of the caller's other open files: one inherited from the
# caller, such as the host-wide test lock of `flock /tmp/sfclab-suite.lock go test ...`, would
# stay held for as long as the cluster runs.
spawn() {
	local log=$1 pidfile=$2
	shift 2
	(
		for fd in /proc/$BASHPID/fd/*; do
			fd=${fd##*/}
			((fd > 2)) && eval "exec $fd>&-"
		done
		exec setsid nohup "$@" >>"$log" 2>&1 </dev/null
	) &
	echo $! >"$pidfile"
}
kill_wait() { # pid...: SIGTERM, then SIGKILL after 2 s
	local p
	for p in "$@"; do kill "$p" 2>/dev/null; done
	for _ in $(seq 1 20); do
		local alive=0
		for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
		((alive)) || return 0
		sleep 0.1
	done
	for p in "$@"; do kill -9 "$p" 2>/dev/null; done
	sleep 0.2
}
# clear_containers SOCK: kills and deletes every container of the (running) containerd at
# SOCK, which unmounts their root filesystems.
clear_containers() {
	local sock=$1 id
	c_() { ctr -a "$sock" -n k8s.io "$@"; }
	for id in $(c_ tasks ls -q 2>/dev/null); do c_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1; done
	for _ in $(seq 1 30); do
		[ -z "$(c_ tasks ls 2>/dev/null | awk 'NR>1 && $3!="STOPPED"')" ] && break
		sleep 0.1
	done
	for id in $(c_ tasks ls -q 2>/dev/null); do c_ tasks delete -f "$id" >/dev/null 2>&1; done
	for id in $(c_ containers ls -q 2>/dev/null); do c_ containers delete "$id" >/dev/null 2>&1; done
}
# kill_shims SOCK: kills the shims of the containerd at SOCK (by the socket in their command
# line) whose containers outlived clear_containers or their containerd.
kill_shims() {
	local p
	for p in $(pgrep -f -- "containerd-shim-runc-v2 .*-address $1" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
}
