#!/usr/bin/env bash
# The main job until the measurement engine lands: deploy study A's 2-VNF chain
# (client -> iptables firewall with NAT -> HAProxy -> server), push a short iperf3 through it,
# print what it measured, and destroy the lab whatever happens.
set -euo pipefail
bin=${SFCLAB:-bin/sfclab}
lab=examples/fw-lb.yaml
trap '"$bin" destroy "$lab" >/dev/null' EXIT
"$bin" deploy "$lab"
target=$("$bin" inspect fw-lb --format json | sed -n 's/.*"target": "\([0-9.]*\):\([0-9]*\)".*/\1/p' | head -1)
echo "iperf3 through the chain to $target (5 s):"
for i in 1 2 3 4 5; do
  if "$bin" exec fw-lb client -- iperf3 -c "$target" -t 5 -f g; then break; fi
  sleep 0.2
done
"$bin" inspect fw-lb
