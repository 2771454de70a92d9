package echo

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// magic opens the payload of every echo the probe sends, so that replies to other programs'
// echoes (a raw ICMP socket sees every ICMP message of its namespace) are left out.
var magic = [4]byte{'s', 'f', 'c', 'R'}

// payloadLen is what the probe needs in every payload: magic, run id, 64-bit sequence number.
const payloadLen = 16

// header is the ICMP or UDP header in front of the payload.
const header = 8

// MinSize is the smallest echo message the probe sends (header + its own 16 bytes).
const MinSize = header + payloadLen

// MaxSize is the largest echo message: no fragmentation on a 9000-byte MTU.
const MaxSize = 8972

// tsFlags asks the kernel for software timestamps: when the driver hands a packet to the
// device (TX; taken only by drivers that call skb_tx_timestamp, as veth does and macvlan does
// not), when the packet entered the device layer (TX_SCHED: the fallback), and when a packet
// enters the stack (RX); each TX timestamp keyed by a per-socket counter and carrying no copy
// of the packet. The probe stops asking for TX_SCHED once the driver's stamp came.
const tsFlags = unix.SOF_TIMESTAMPING_TX_SOFTWARE | unix.SOF_TIMESTAMPING_TX_SCHED | unix.SOF_TIMESTAMPING_RX_SOFTWARE |
	unix.SOF_TIMESTAMPING_SOFTWARE | unix.SOF_TIMESTAMPING_OPT_ID | unix.SOF_TIMESTAMPING_OPT_TSONLY

// rcvBuf is the receive buffer the probe forces (replies and TX timestamps share it).
const rcvBuf = 8 << 20

// sock is the probe's socket: a raw ICMP socket or a connected UDP socket, non-blocking,
// created inside the source node's namespace. It is deliberately not registered with Go's
// poller: the probe's own thread waits on it (ppoll), and a registered socket would wake the
// runtime's poller thread for every reply and timestamp as well.
type sock struct {
	fd    int
	proto string
	// name is the destination of an unconnected (ICMP) socket as sendmmsg takes it; nil for
	// a connected one.
	name *unix.RawSockaddrInet4
	v6   bool
}

// openSocket opens the probe's socket. Call it inside the source node's Do: the socket belongs
// to the namespace of the calling thread.
//
// Equivalent to (icmp): socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), as ping does as root;
// (udp): socket(AF_INET, SOCK_DGRAM, 0) + connect(DST:PORT). Both with
// setsockopt(SO_TIMESTAMPING, TX_SOFTWARE|TX_SCHED|RX_SOFTWARE|SOFTWARE|OPT_ID|OPT_TSONLY).
func openSocket(proto string, dst netip.AddrPort) (*sock, error) {
	s := &sock{proto: proto, v6: dst.Addr().Is6() && !dst.Addr().Is4In6()}
	family := unix.AF_INET
	if s.v6 {
		family = unix.AF_INET6
	}
	var typ, p int
	switch proto {
	case ProtoICMP:
		if s.v6 {
			return nil, fmt.Errorf("open icmp socket to %s: %w", dst.Addr(), ErrICMPv6)
		}
		typ, p = unix.SOCK_RAW, unix.IPPROTO_ICMP
	case ProtoUDP:
		typ = unix.SOCK_DGRAM
	default:
		return nil, fmt.Errorf("open socket: %w: %q", ErrProtocol, proto)
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, p)
	if err != nil {
		return nil, fmt.Errorf("open %s socket: %w", proto, err)
	}
	s.fd = fd
	fail := func(what string, err error) (*sock, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s on %s socket: %w", what, proto, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, tsFlags); err != nil {
		return fail("set SO_TIMESTAMPING", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf); err != nil {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf); err != nil {
			return fail("set SO_RCVBUF", err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, rcvBuf); err != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, rcvBuf)
	}
	switch {
	case proto == ProtoICMP:
		s.name = &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst.Addr().Unmap().As4()}
	case s.v6:
		if err := unix.Connect(fd, &unix.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}); err != nil {
			return fail("connect", err)
		}
	default:
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().Unmap().As4()}); err != nil {
			return fail("connect", err)
		}
	}
	return s, nil
}

// onlyEchoID makes a raw ICMP socket queue only echo replies with ICMP id id, and every
// other ICMP message (errors quoting an echo; parse sorts them out). A raw ICMP socket sees
// every reply of its namespace: without the filter each lane's thread would be woken for, and
// read, every other lane's replies too.
//
// Equivalent to: setsockopt(SO_ATTACH_FILTER) with the classic BPF program
//
//	ldxb 4*([0]&0xf); ldb [x+0]; jne #0, accept; ldh [x+4]; jne #ID, drop; accept: ret #-1; drop: ret #0
func (s *sock) onlyEchoID(id uint16) error {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH, K: 0},        // X = IPv4 header length
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_IND, K: 0},         // A = ICMP type
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0, Jf: 2}, // not an echo reply: accept
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_IND, K: 4},         // A = ICMP id
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: uint32(id), Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff}, // accept the whole datagram
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},          // drop
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.SetsockoptSockFprog(s.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp); err != nil {
		return fmt.Errorf("filter echo id %d on %s socket: %w", id, s.proto, err)
	}
	return nil
}

// Close closes the socket.
func (s *sock) Close() error { return unix.Close(s.fd) }

// message returns the buffer for echoes of size bytes above IP: ICMP header and payload for
// icmp, the payload alone for udp (the kernel adds the UDP header).
func message(proto string, size int) []byte {
	if proto == ProtoUDP {
		return make([]byte, size-header)
	}
	return make([]byte, size)
}

// encode writes echo seq of run id into msg (from message).
func encode(msg []byte, proto string, id uint32, seq uint64) {
	p := msg
	if proto == ProtoICMP {
		p = msg[header:]
	}
	copy(p[0:4], magic[:])
	binary.BigEndian.PutUint32(p[4:8], id)
	binary.BigEndian.PutUint64(p[8:16], seq)
	if proto != ProtoICMP {
		return
	}
	msg[0], msg[1] = 8, 0 // echo request
	msg[2], msg[3] = 0, 0
	binary.BigEndian.PutUint16(msg[4:6], uint16(id))
	binary.BigEndian.PutUint16(msg[6:8], uint16(seq))
	binary.BigEndian.PutUint16(msg[2:4], checksum(msg))
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// reply is what parse found in a received datagram.
type reply int

const (
	replyOther reply = iota // not ours
	replyEcho               // our echo came back
	replyError              // an ICMP error about one of our echoes
)

// parse reads a received datagram: a raw ICMP socket's includes the IPv4 header, a UDP
// socket's is the payload alone. It returns what the datagram is and, for echoes and errors,
// the sequence number.
func parse(b []byte, proto string, id uint32) (reply, uint64) {
	if proto == ProtoUDP {
		if seq, ok := ours(b, id); ok {
			return replyEcho, seq
		}
		return replyOther, 0
	}
	if len(b) < 20 {
		return replyOther, 0
	}
	ihl := int(b[0]&0x0f) * 4
	if len(b) < ihl+header {
		return replyOther, 0
	}
	icmp := b[ihl:]
	switch icmp[0] {
	case 0: // echo reply
		if binary.BigEndian.Uint16(icmp[4:6]) != uint16(id) {
			return replyOther, 0
		}
		if seq, ok := ours(icmp[header:], id); ok {
			return replyEcho, seq
		}
	case 3, 11, 12: // unreachable, time exceeded, parameter problem: quote our echo request
		inner := icmp[header:]
		if len(inner) < 20 {
			return replyOther, 0
		}
		iihl := int(inner[0]&0x0f) * 4
		if len(inner) >= iihl+header && inner[9] == unix.IPPROTO_ICMP && inner[iihl] == 8 &&
			binary.BigEndian.Uint16(inner[iihl+4:iihl+6]) == uint16(id) {
			return replyError, uint64(binary.BigEndian.Uint16(inner[iihl+6 : iihl+8]))
		}
	}
	return replyOther, 0
}

// ours checks the probe's own payload and returns its sequence number.
func ours(p []byte, id uint32) (uint64, bool) {
	if len(p) < payloadLen || [4]byte(p[0:4]) != magic || binary.BigEndian.Uint32(p[4:8]) != id {
		return 0, false
	}
	return binary.BigEndian.Uint64(p[8:16]), true
}

// rxStamp returns the software RX timestamp (ns since the epoch) in a received message's
// control data, or 0.
func rxStamp(oob []byte) int64 {
	for c, rest, ok := nextCmsg(oob); ok; c, rest, ok = nextCmsg(rest) {
		if c.level == unix.SOL_SOCKET && c.typ == unix.SCM_TIMESTAMPING {
			if ts, ok := timestamping(c.data); ok {
				return ts
			}
		}
	}
	return 0
}

// txStamp reads one message of the error queue: a TX timestamp with its key (the number of
// the send on this socket, counted from 0) and whether it is the device-layer (SCHED) stamp
// rather than the driver's. ok is false for anything else.
func txStamp(oob []byte) (key uint32, ns int64, sched, ok bool) {
	var haveKey bool
	for c, rest, more := nextCmsg(oob); more; c, rest, more = nextCmsg(rest) {
		switch {
		case c.level == unix.SOL_SOCKET && c.typ == unix.SCM_TIMESTAMPING:
			ns, ok = timestamping(c.data)
		case (c.level == unix.SOL_IP && c.typ == unix.IP_RECVERR) ||
			(c.level == unix.SOL_IPV6 && c.typ == unix.IPV6_RECVERR):
			if len(c.data) < int(unsafe.Sizeof(unix.SockExtendedErr{})) {
				continue
			}
			ee := (*unix.SockExtendedErr)(unsafe.Pointer(&c.data[0]))
			if ee.Origin == unix.SO_EE_ORIGIN_TIMESTAMPING && ee.Errno == uint32(unix.ENOMSG) &&
				(ee.Info == unix.SCM_TSTAMP_SND || ee.Info == unix.SCM_TSTAMP_SCHED) {
				key, sched, haveKey = ee.Data, ee.Info == unix.SCM_TSTAMP_SCHED, true
			}
		}
	}
	return key, ns, sched, ok && haveKey
}

// timestamping reads struct scm_timestamping: the software stamp is the first of three.
func timestamping(b []byte) (int64, bool) {
	if len(b) < int(unsafe.Sizeof(unix.ScmTimestamping{})) {
		return 0, false
	}
	ts := (*unix.ScmTimestamping)(unsafe.Pointer(&b[0]))
	ns := ts.Ts[0].Nano()
	return ns, ns != 0
}
