package flows

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/bench/probe"
)

// packetCounter counts the bytes of the frames an interface inside a node receives, with an
// AF_PACKET socket opened in the node. A tap's copies arrive by bpf_redirect_peer when they
// come through the steering tunnel, which bypasses veth_xmit and so the veth's own counters;
// a packet socket sees every frame the node's stack receives, however it got there.
//
// Equivalent to: ip netns exec NODE tcpdump -i IFNAME -Q in
type packetCounter struct {
	fd    int
	bytes atomic.Uint64
	stop  atomic.Bool
	done  chan struct{}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openPacketCounter starts counting what ifname receives inside node.
func openPacketCounter(node probe.Node, ifname string) (*packetCounter, error) {
	c := &packetCounter{fd: -1, done: make(chan struct{})}
	err := node.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		c.fd = fd
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			return err
		}
		tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	if err != nil {
		if c.fd >= 0 {
			unix.Close(c.fd)
		}
		return nil, fmt.Errorf("count frames received on %s: %w", ifname, err)
	}
	go c.loop()
	return c, nil
}

func (c *packetCounter) loop() {
	defer close(c.done)
	buf := make([]byte, 2048)
	for {
		n, from, err := unix.Recvfrom(c.fd, buf, unix.MSG_TRUNC)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			if c.closed() {
				return
			}
			continue
		case err != nil:
			return
		}
		if sa, ok := from.(*unix.SockaddrLinklayer); ok && sa.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		c.bytes.Add(uint64(n))
	}
}

func (c *packetCounter) closed() bool { return c.stop.Load() }

// Bytes returns the bytes received so far.
func (c *packetCounter) Bytes() uint64 { return c.bytes.Load() }

// Close stops counting.
func (c *packetCounter) Close() {
	c.stop.Store(true)
	<-c.done
	unix.Close(c.fd)
}
