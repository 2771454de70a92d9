#!/bin/bash
# What a namespace's own stack gets on a macvtap (driver: macvtap for an endpoint), against a
# macvlan, with nobody on the macvtap's character device and with a reader on it. Run as root
# under the suite lock: flock -o /tmp/sfclab-suite.lock ./namespace.sh
set -u
H=vmmt-h; P=vmmt-p; M=vmmt-m; D=
cleanup() { for n in $H $P $M; do ip netns del $n 2>/dev/null; done; [ -n "$D" ] && rm -rf "$D"; }
trap cleanup EXIT; cleanup
D=$(mktemp -d)
for n in $H $P $M; do ip netns add $n; ip netns exec $n sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; done
ip -n $H link add br0 type bridge; ip -n $H link set br0 up
ip -n $P link add p0 type veth peer name hp0 netns $H
ip -n $H link set hp0 master br0 up; ip -n $P link set p0 up; ip -n $P addr add 198.18.200.1/24 dev p0
stats() { ip -n $M -s link show $1 | awk '/RX:/{getline; r=$2" pkts, dropped "$4} /TX:/{getline; t=$2" pkts"} END{print "rx " r "; tx " t}'; }
echo "1. macvtap mv1 (bridge mode on br0) in namespace $M with 198.18.200.3/24, nobody on its character device:"
ip -n $H link add mv1 link br0 netns $M type macvtap mode bridge
ip -n $M link set mv1 up; ip -n $M addr add 198.18.200.3/24 dev mv1
echo "   ping -c 5 from p0: $(ip netns exec $P ping -c 5 -i 0.2 -W 1 198.18.200.3 | grep transmitted)"
echo "   mv1: $(stats mv1)"
echo "2. the same macvtap with a reader on its character device (as QEMU would be):"
DEV=$(ip netns exec $M sh -c 'cat /sys/class/net/mv1/macvtap/tap*/dev'); mknod $D/tapdev3 c ${DEV%:*} ${DEV#*:}
python3 -c '
import os, sys, time, select
fd = os.open(sys.argv[1], os.O_RDWR | os.O_NONBLOCK); n = 0; end = time.time() + 2.5
while time.time() < end:
    if select.select([fd], [], [], 0.2)[0]: os.read(fd, 65536); n += 1
print("   the reader got %d frames" % n)' $D/tapdev3 &
R=$!; sleep 0.3
echo "   ping -c 5 from p0: $(ip netns exec $P ping -c 5 -i 0.2 -W 1 198.18.200.3 | grep transmitted)"
wait $R
echo "   mv1: $(stats mv1)"
ip -n $M link del mv1; ip -n $P neigh flush dev p0
echo "3. a macvlan mv2 (bridge mode on br0) in its place, p0's neighbour cache flushed:"
ip -n $H link add mv2 link br0 netns $M type macvlan mode bridge
ip -n $M link set mv2 up; ip -n $M addr add 198.18.200.3/24 dev mv2
echo "   ping -c 5 from p0: $(ip netns exec $P ping -c 5 -i 0.2 -W 1 198.18.200.3 | grep transmitted)"
echo "   mv2: $(stats mv2)"
