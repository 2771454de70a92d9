package rtt

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
)

// Responder echoes every UDP datagram back to its sender, from inside a node: the far end of
// the UDP echo (ICMP echoes are answered by the node's kernel).
type Responder struct {
	conn *net.UDPConn
	wg   sync.WaitGroup
}

// responderBuf is the responder socket's receive buffer: the probe's own sockets' (package echo).
const responderBuf = 8 << 20

// StartResponder listens on port (all of node n's addresses; udp6 when v6) inside the node's
// namespace and echoes in the background until Close.
//
// Equivalent to: ip netns exec NODE socat UDP-RECVFROM:PORT,fork EXEC:cat
func StartResponder(n Doer, port uint16, v6 bool) (*Responder, error) {
	network := "udp4"
	if v6 {
		network = "udp6"
	}
	r := &Responder{}
	err := n.Do(func() (err error) {
		r.conn, err = net.ListenUDP(network, &net.UDPAddr{Port: int(port)})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("start udp echo responder on port %d: %w", port, err)
	}
	_ = r.conn.SetReadBuffer(responderBuf)
	r.wg.Go(r.serve)
	return r, nil
}

func (r *Responder) serve() {
	buf := make([]byte, 65536)
	for {
		n, from, err := r.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		_, _ = r.conn.WriteToUDPAddrPort(buf[:n], from)
	}
}

// Addr is the address the responder listens on.
func (r *Responder) Addr() netip.AddrPort { return r.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Close stops the responder and waits for it.
func (r *Responder) Close() error {
	err := r.conn.Close()
	r.wg.Wait()
	return err
}
