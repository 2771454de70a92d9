#!/usr/bin/env bash
# Installs what sfclab needs on a Debian machine (as root): the programs its functions, probes
# and runtimes run, a reachable Docker Engine, and the Go modules it builds from. Installs only
# what is missing; never leaves the servers it installs (squid, apache2, nginx, haproxy)
# running as host services — sfclab runs them inside lab namespaces and containers.
set -euo pipefail
need=()
check() { command -v "$1" >/dev/null 2>&1 || need+=("$2"); }
# --bpf: only what `make generate` needs to rebuild the committed eBPF objects (steer/bpf).
if [ "${1:-}" = "--bpf" ]; then
  check clang clang
  check llvm-strip llvm
  [ -f /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
  if [ "${#need[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  exit 0
fi
# --browser: only a headless browser to look at report.html (chromium --headless
# --screenshot=OUT.png file://.../report.html); neither `make test` nor `make run` needs it.
if [ "${1:-}" = "--browser" ]; then
  check chromium chromium
  if [ "${#need[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  exit 0
fi
check ip iproute2
check ss iproute2
check nft nftables
check iptables iptables
check iptables-restore iptables
check haproxy haproxy
check iperf3 iperf3
check ping iputils-ping
check squid squid
check apache2 apache2
check nginx nginx
check ab apache2-utils
check stress-ng stress-ng
check tcpdump tcpdump
# The ndr probe moves the chain's receive processing to another CPU (threaded NAPI, pinned, SCHED_FIFO).
check pgrep procps
check taskset util-linux
check chrt util-linux
check unshare util-linux
check debootstrap debootstrap
# The vm runtime: QEMU, a kernel to boot guests with (booted uncompressed, from the image
# sfclab builds), busybox for the guests' shell and xz to unpack the kernel.
check qemu-system-x86_64 qemu-system-x86
check busybox busybox-static
check xz xz-utils
check depmod kmod
compgen -G '/boot/vmlinuz-*' >/dev/null || need+=(linux-image-amd64)
check docker docker.io
check dockerd docker.io
check docker-compose docker-compose
# The kubernetes runtime's test cluster (scripts/kubecluster): Debian's etcd, a private
# containerd with runc, the CNI plugins; nsenter runs commands in pods.
check etcd etcd-server
check containerd containerd
check runc runc
check ctr containerd
check openssl openssl
check nsenter util-linux
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
# The OpenStack client and its networking-sfc commands (`openstack sfc ...`), to test
# `sfclab serve` with the client users drive networking-sfc with.
check openstack python3-openstackclient
/usr/bin/python3 -c 'import networking_sfc' >/dev/null 2>&1 || need+=(python3-networking-sfc)  # Debian's python, where the package installs
# The real networking-sfc server, the oracle of api's differential conformance suite
# (internal/oracle runs it: no agents, no broker, no Keystone, bound to 127.0.0.1).
[ -x /usr/bin/neutron-server ] && [ -f /etc/neutron/api-paste.ini ] || need+=(neutron-server)
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages ${need[*]}; run as root: apt-get install ${need[*]}" >&2
    exit 1
  fi
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  echo "install-deps: installing ${need[*]}"
  # Keep package scripts from starting the servers as host services.
  cleanup_policy() { rm -f /usr/sbin/policy-rc.d; }
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap cleanup_policy EXIT
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  cleanup_policy
  trap - EXIT
fi
# A reachable Docker Engine for the docker runtime and its tests.
if ! docker info >/dev/null 2>&1; then
  echo "install-deps: starting the Docker Engine"
  if ! service docker start >/dev/null 2>&1; then
    nohup dockerd >/var/log/sfclab-dockerd.log 2>&1 &
  fi
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { echo "install-deps: the Docker Engine did not come up; see /var/log/sfclab-dockerd.log" >&2; exit 1; }
fi
go mod download
# The test cluster's Kubernetes binaries are built by `make cluster` (which `make test` runs),
# not here: `make run` does not need them.
