#!/usr/bin/env bash
# Installs what sfclab needs on a Debian machine (as root): the programs its functions and
# probes run, and the Go modules it builds from. Installs only what is missing.
set -euo pipefail
need=()
check() { command -v "$1" >/dev/null 2>&1 || need+=("$2"); }
check ip iproute2
check nft nftables
check iptables iptables
check iptables-restore iptables
check haproxy haproxy
check iperf3 iperf3
check ping iputils-ping
check ss iproute2
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages ${need[*]}; run as root: apt-get install ${need[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
go mod download
