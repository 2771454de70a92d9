#!/bin/bash
# What tcx sees on a macvtap in bridge mode (its lower device a bridge, as vm: {backend:
# macvtap} in a routed lab), on the bridge and on a bridge port, for the frames a "guest" (a
# reader and writer of the macvtap's character device, as QEMU is) receives and sends.
# Run as root under the suite lock from this directory: flock -o /tmp/sfclab-suite.lock ./bridge-mode.sh
# (docs/vm.md, "Measured: what tc and a namespace see on a macvtap").
set -u
H=vmmt-h; N=vmmt-n; P=vmmt-p; D=
cleanup() { for n in $H $N $P; do ip netns del $n 2>/dev/null; done; [ -n "$D" ] && rm -rf "$D"; }
trap cleanup EXIT
cleanup
D=$(mktemp -d)
go build -o $D/tcxcount ./tcxcount || exit 1
for n in $H $N $P; do ip netns add $n; ip -n $n link set lo up; ip netns exec $n sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; done
ip -n $H link add br0 type bridge; ip -n $H link set br0 up
ip -n $P link add p0 type veth peer name hp0 netns $H
ip -n $H link set hp0 master br0 up
ip -n $P link set p0 up; ip -n $P addr add 198.18.200.1/24 dev p0
ip -n $H link add mv0 link br0 netns $N type macvtap mode bridge
ip -n $N link set mv0 up
MVMAC=$(ip -n $N -br link show mv0 | awk '{print $3}'); P0MAC=$(ip -n $P -br link show p0 | awk '{print $3}')
DEV=$(ip netns exec $N sh -c 'cat /sys/class/net/mv0/macvtap/tap*/dev')
mknod $D/tapdev c ${DEV%:*} ${DEV#*:}
echo "macvtap mv0 $MVMAC dev $DEV; peer p0 $P0MAC"
$D/tcxcount $N/mv0 $H/br0 $H/hp0 > $D/tcx.out 2>&1 &
TCX=$!
for i in $(seq 100); do grep -q attached $D/tcx.out 2>/dev/null && break; sleep 0.1; done; grep -q attached $D/tcx.out || { cat $D/tcx.out; exit 1; }
ip -n $P neigh add 198.18.200.2 lladdr $MVMAC dev p0
# The guest: read frames from the character device for 3 s while p0 pings it, counting ICMP
# echo requests from p0; then write 5 ICMP echo requests from the guest's MAC to p0's MAC.
python3 - $D/tapdev $MVMAC $P0MAC <<'PY' &
import os, sys, time, select, struct
dev, mv, p0 = sys.argv[1:]
fd = os.open(dev, os.O_RDWR | os.O_NONBLOCK)
# macvtap prepends a virtio-net header (10 bytes by default, IFF_VNET_HDR set at open)
HDR = 10
got = 0; end = time.time() + 3
while time.time() < end:
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        b = os.read(fd, 65536)[HDR:]
        if len(b) >= 34 and b[12:14] == b'\x08\x00' and b[23] == 1 and b[34] == 8: got += 1
print("guest read %d ICMP echo requests from its character device" % got, flush=True)
mac = lambda s: bytes(int(x, 16) for x in s.split(':'))
def csum(b):
    if len(b) % 2: b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b)//2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return (~s) & 0xffff
for i in range(5):
    icmp = struct.pack('!BBHHH', 8, 0, 0, 0x4242, i) + b'x'*32
    icmp = icmp[:2] + struct.pack('!H', csum(icmp)) + icmp[4:]
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20+len(icmp), i, 0, 64, 1, 0, bytes([198,18,200,2]), bytes([198,18,200,1]))
    ip = ip[:10] + struct.pack('!H', csum(ip)) + ip[12:]
    os.write(fd, b'\0'*HDR + mac(p0) + mac(mv) + b'\x08\x00' + ip + icmp)
print("guest wrote 5 ICMP echo requests to its character device", flush=True)
time.sleep(1)
PY
GUEST=$!
sleep 0.3
ip netns exec $P ping -c 5 -i 0.2 -W 1 198.18.200.2 >/dev/null
wait $GUEST
echo "p0 received (ip -s link): $(ip -n $P -s link show p0 | awk '/RX:/{getline; print $2" packets"}')"
kill -TERM $TCX; wait $TCX 2>/dev/null
echo "--- frames each tcx hook saw (towards the guest: p0's 5 echo requests and its replies to the guest's 5; from the guest: the 5 it wrote):"
grep tcx $D/tcx.out
echo "mv0 counters: $(ip -n $N -s link show mv0 | awk '/RX:/{getline; r=$0} /TX:/{getline; t=$0} END{print "rx [" r "] tx [" t "]"}')"

