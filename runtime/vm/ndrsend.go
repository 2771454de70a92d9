package vm

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/sfclab/sfclab/probe/ndr/send"
	"golang.org/x/sys/unix"
)

// The ndr probe's sender in a VM source. On a namespace the probe opens its sending socket
// in the source's network stack (Do) and sends from a thread of sfclab's, which a guest's own
// kernel does not allow; the agent runs the same sender (package send: paced sendmmsg)
// instead. "send-open" connects a UDP socket to the target in the guest, calibrates the
// sender there (unpaced into a socket of the guest's own, per frame size) and answers with
// its number and the calibration; "send-trial" sends one trial (bounded by send.MaxTrial,
// stopped sooner when the host cancels it) and answers with the datagrams the guest's kernel
// took and how long it sent, both by the guest's clock; "send-close" closes it (a guest that
// dies takes it with it). The XDP generator is not used there: its program would have to be
// attached in the guest's kernel.

// senders are the guest's open ndr senders by number (the agent's side).
var senders = struct {
	sync.Mutex
	next int
	open map[int]*guestSendSock
}{open: map[int]*guestSendSock{}}

// guestSendSock is one sender's socket; mu keeps its trials one at a time.
type guestSendSock struct {
	mu sync.Mutex
	fd int
}

// handleSend answers the agent's ndr sender requests; false for another op.
func handleSend(ctx context.Context, req request, r *response) bool {
	switch req.Op {
	case "send-open":
		dst, err := netip.ParseAddrPort(req.Addr)
		if err != nil || !dst.Addr().Is4() {
			r.Err = fmt.Sprintf("send-open: target %q is not an IPv4 address and port", req.Addr)
			return true
		}
		for _, f := range req.Frames {
			if _, err := send.Frames(f); err != nil {
				r.Err = "send-open: " + err.Error()
				return true
			}
		}
		fd, err := send.Socket(netip.AddrPort{}, dst)
		if err != nil {
			r.Err = err.Error()
			return true
		}
		calib, err := send.Calibrate(func(f func() error) error { return f() }, req.Frames)
		if err != nil {
			unix.Close(fd)
			r.Err = err.Error()
			return true
		}
		senders.Lock()
		senders.next++
		id := senders.next
		senders.open[id] = &guestSendSock{fd: fd}
		senders.Unlock()
		r.PID, r.Calib = id, calib
	case "send-trial":
		senders.Lock()
		s, ok := senders.open[req.PID]
		senders.Unlock()
		if !ok {
			r.Err = fmt.Sprintf("no sender %d", req.PID)
			return true
		}
		if req.Send == nil {
			r.Err = "send-trial: no trial"
			return true
		}
		if err := req.Send.Validate(); err != nil {
			r.Err = err.Error()
			return true
		}
		cycle, _ := send.Frames(req.Send.Frame)
		s.mu.Lock()
		n, took, err := send.NewSender(s.fd, cycle).SendContext(ctx, req.Send.ID, req.Send.Rate, req.Send.Duration)
		s.mu.Unlock()
		r.Sent = &send.Sent{Datagrams: n, Took: took}
		if err != nil {
			r.Err = err.Error()
		}
	case "send-close":
		senders.Lock()
		s, ok := senders.open[req.PID]
		delete(senders.open, req.PID)
		senders.Unlock()
		if !ok {
			r.Err = fmt.Sprintf("no sender %d", req.PID)
			return true
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := unix.Close(s.fd); err != nil {
			r.Err = err.Error()
		}
	default:
		return false
	}
	return true
}

// OpenSender connects the ndr probe's sender to dst in the guest and calibrates it there for
// frames (send.Guest), run by its agent.
func (n *Node) OpenSender(ctx context.Context, dst netip.AddrPort, frames []string) (send.Remote, error) {
	ctx, cancel := context.WithTimeout(ctx, agentTimeout+send.CalibrationTime*time.Duration(len(frames)))
	defer cancel()
	r, err := n.call(ctx, request{Op: "send-open", Addr: dst.String(), Frames: frames})
	if err != nil {
		return nil, fmt.Errorf("open the ndr sender to %s in VM node %s: %w", dst, n.Name, err)
	}
	return &guestSender{n: n, id: r.PID, dst: dst, calib: r.Calib}, nil
}

type guestSender struct {
	n     *Node
	id    int
	dst   netip.AddrPort
	calib map[string]float64
}

// Calibrated is the sender's calibration in the guest (packets/s per frame size).
func (s *guestSender) Calibrated() map[string]float64 { return s.calib }

// Send sends one trial in the guest; the host waits its duration and agentTimeout more.
func (s *guestSender) Send(ctx context.Context, t send.Trial) (send.Sent, error) {
	ctx, cancel := context.WithTimeout(ctx, t.Duration+agentTimeout)
	defer cancel()
	r, err := s.n.call(ctx, request{Op: "send-trial", PID: s.id, Send: &t})
	if err != nil {
		return send.Sent{}, fmt.Errorf("send ndr trial %d to %s in VM node %s: %w", t.ID, s.dst, s.n.Name, err)
	}
	if r.Sent == nil {
		return send.Sent{}, fmt.Errorf("send ndr trial %d to %s in VM node %s: the agent returned no count", t.ID, s.dst, s.n.Name)
	}
	return *r.Sent, nil
}

// Close closes the sender in the guest. A guest that is gone has nothing left to close.
func (s *guestSender) Close() error {
	_, err := s.n.call(context.Background(), request{Op: "send-close", PID: s.id})
	if err != nil && qemuRunning(s.n.Lab, s.n.Name) {
		return fmt.Errorf("close the ndr sender to %s in VM node %s: %w", s.dst, s.n.Name, err)
	}
	return nil
}
