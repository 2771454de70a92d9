// Package firstpacket measures when traffic first crosses a newly created chain: a sender in
// the chain's source namespace sends paced UDP probes (bounded in count and time) to a
// receiver in the destination namespace, and the first probe that arrives with its TTL
// lowered by exactly the chain's length went through every function of the chain (each
// forwarding function decrements the TTL; a probe that went straight to the destination, as
// traffic does before the chain is steered, arrives with the TTL it was sent with).
package firstpacket

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Doer runs a function inside a network namespace (netdev.NS does).
type Doer interface {
	Do(fn func() error) error
}

// SendTTL is the TTL probes leave with.
const SendTTL = 64

// Defaults bound every measurement.
const (
	DefaultInterval  = 100 * time.Microsecond
	DefaultMaxProbes = 20000
	DefaultTimeout   = 2 * time.Second
)

// ErrNoCrossing says no probe crossed the chain within the bounds.
var ErrNoCrossing = errors.New("no probe crossed the chain")

// Probe is a sender socket in the source namespace and a receiver socket in the destination.
type Probe struct {
	send, recv *net.UDPConn
	dst        netip.AddrPort
	// Interval paces the probes; MaxProbes and Timeout bound one Run.
	Interval  time.Duration
	MaxProbes int
	Timeout   time.Duration
}

// Open binds the receiver to dst in the destination's namespace and opens the sender in the
// source's. Only addresses of the lab (198.18.0.0/15) are accepted.
func Open(src, dstNS Doer, dst netip.AddrPort) (*Probe, error) {
	if !netip.MustParsePrefix("198.18.0.0/15").Contains(dst.Addr()) {
		return nil, fmt.Errorf("open first-packet probe: %s is outside 198.18.0.0/15, the lab range", dst.Addr())
	}
	p := &Probe{dst: dst, Interval: DefaultInterval, MaxProbes: DefaultMaxProbes, Timeout: DefaultTimeout}
	if err := dstNS.Do(func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		p.recv = c
		return setInt(c, unix.IPPROTO_IP, unix.IP_RECVTTL, 1)
	}); err != nil {
		p.Close()
		return nil, fmt.Errorf("open first-packet receiver on %s: %w", dst, err)
	}
	if err := src.Do(func() error {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		p.send = c
		return setInt(c, unix.IPPROTO_IP, unix.IP_TTL, SendTTL)
	}); err != nil {
		p.Close()
		return nil, fmt.Errorf("open first-packet sender to %s: %w", dst, err)
	}
	return p, nil
}

func setInt(c *net.UDPConn, level, opt, v int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, v) }); err != nil {
		return err
	}
	return serr
}

// Close closes both sockets.
func (p *Probe) Close() error {
	var errs []error
	if p.send != nil {
		errs = append(errs, p.send.Close())
	}
	if p.recv != nil {
		errs = append(errs, p.recv.Close())
	}
	return errors.Join(errs...)
}

// Result is one measurement.
type Result struct {
	// Arrived is when the first probe that crossed the chain was read at the destination.
	Arrived time.Time
	// Sent is how many probes were sent, Direct how many arrived without crossing it.
	Sent, Direct int
}

// Run sends probes from now on, every Interval, until one arrives having crossed hops
// forwarding functions (TTL SendTTL-hops), at most MaxProbes probes and Timeout.
func (p *Probe) Run(ctx context.Context, hops int) (*Result, error) {
	if hops < 1 || hops >= SendTTL {
		return nil, fmt.Errorf("first packet: chain length %d out of range 1..%d", hops, SendTTL-1)
	}
	run := rand.Uint64()
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	type arrival struct {
		at     time.Time
		direct int
		err    error
	}
	got := make(chan arrival, 1)
	go func() { got <- p.receive(ctx, run, SendTTL-hops) }()
	res := &Result{}
	buf := make([]byte, 16)
	binary.BigEndian.PutUint64(buf, run)
	start := time.Now()
	for seq := 0; seq < p.MaxProbes; seq++ {
		binary.BigEndian.PutUint64(buf[8:], uint64(seq))
		if _, err := p.send.Write(buf); err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
			cancel()
			<-got
			return res, fmt.Errorf("send probe: %w", err)
		}
		res.Sent++
		next := start.Add(time.Duration(seq+1) * p.Interval)
		for {
			select {
			case a := <-got:
				res.Arrived, res.Direct = a.at, a.direct
				return res, a.err
			default:
			}
			if ctx.Err() != nil || !time.Now().Before(next) {
				break
			}
			time.Sleep(min(time.Until(next), 20*time.Microsecond))
		}
		if ctx.Err() != nil {
			break
		}
	}
	a := <-got
	res.Arrived, res.Direct = a.at, a.direct
	if a.err == nil {
		return res, nil
	}
	return res, fmt.Errorf("%w: %d probes in %s, %d arrived straight (TTL %d): %v", ErrNoCrossing, res.Sent, time.Since(start).Round(time.Millisecond), res.Direct, SendTTL, a.err)
}

// receive reads probes of this run until one arrives with TTL want.
func (p *Probe) receive(ctx context.Context, run uint64, want int) (a struct {
	at     time.Time
	direct int
	err    error
}) {
	buf := make([]byte, 64)
	oob := make([]byte, unix.CmsgSpace(4)*2)
	for {
		dl, _ := ctx.Deadline()
		if err := p.recv.SetReadDeadline(dl); err != nil {
			a.err = err
			return a
		}
		n, oobn, _, _, err := p.recv.ReadMsgUDP(buf, oob)
		now := time.Now()
		if err != nil {
			a.err = err
			return a
		}
		if n < 16 || binary.BigEndian.Uint64(buf) != run {
			continue // a probe of an earlier run
		}
		ttl := ttlOf(oob[:oobn])
		if ttl == want {
			a.at = now
			return a
		}
		a.direct++
	}
}

// ttlOf reads the IP_TTL control message (-1 if absent).
func ttlOf(oob []byte) int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return -1
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TTL && len(m.Data) >= 4 {
			return int(binary.NativeEndian.Uint32(m.Data))
		}
	}
	return -1
}
