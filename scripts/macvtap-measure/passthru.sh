#!/bin/bash
# A macvtap in passthru mode on a node's veth end (vm: {backend: macvtap} in a transparent or
# docker lab): does it take the veth's MAC, and do the guest's frames cross the veth (so tc on
# the veth's host end, where steering sits, sees them)? Run as root under the suite lock from
# this directory: flock -o /tmp/sfclab-suite.lock ./passthru.sh
set -u
N=vmmt-n; H=vmmt-h; D=
cleanup() { ip netns del $N 2>/dev/null; ip netns del $H 2>/dev/null; [ -n "$D" ] && rm -rf "$D"; }
trap cleanup EXIT; cleanup
D=$(mktemp -d)
go build -o $D/tcxcount ./tcxcount || exit 1
for n in $N $H; do ip netns add $n; ip netns exec $n sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; done
ip -n $N link add eth0 type veth peer name hp0 netns $H
ip -n $N link set eth0 up; ip -n $H link set hp0 up; ip -n $H addr add 198.18.201.1/24 dev hp0
ip -n $N link add mvt0 link eth0 type macvtap mode passthru
ip -n $N link set mvt0 up
echo "veth eth0: $(ip -n $N -br link show eth0 | awk '{print $3}')  macvtap mvt0 (passthru): $(ip -n $N -br link show mvt0 | awk '{print $3}')"
VMAC=$(ip -n $N -br link show eth0 | awk '{print $3}')
DEV=$(ip netns exec $N sh -c 'cat /sys/class/net/mvt0/macvtap/tap*/dev'); mknod $D/tapdev2 c ${DEV%:*} ${DEV#*:}
ip -n $H neigh add 198.18.201.2 lladdr $VMAC dev hp0
$D/tcxcount $H/hp0 $N/eth0 $N/mvt0 > $D/tcx2.out 2>&1 & TCX=$!
for i in $(seq 100); do grep -q attached $D/tcx2.out 2>/dev/null && break; sleep 0.1; done; grep -q attached $D/tcx2.out || { cat $D/tcx2.out; exit 1; }
python3 - $D/tapdev2 <<'PY' &
import os, sys, time, select
fd = os.open(sys.argv[1], os.O_RDWR | os.O_NONBLOCK); got = 0; end = time.time() + 2.5
while time.time() < end:
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        b = os.read(fd, 65536)[10:]
        if len(b) > 34 and b[12:14] == b'\x08\x00' and b[23] == 1: got += 1
print("guest read %d ICMP frames" % got, flush=True)
PY
PY=$!
sleep 0.3; ip netns exec $H ping -c 4 -i 0.2 -W 1 198.18.201.2 | grep transmitted
wait $PY; kill -TERM $TCX; wait $TCX; cat $D/tcx2.out | grep tcx
