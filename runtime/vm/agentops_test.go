package vm

import (
	"context"
	"encoding/binary"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inPrivateNet runs fn on a thread of its own in a new network namespace with lo up, so that
// the agent's sockets (bound to all addresses, as in a guest) are nobody else's; the thread
// ends with fn (it stays locked) and the namespace with it.
func inPrivateNet(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread exits with its namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare the network namespace (the tests run as root): %v", err)
			return
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(fd)
		ifr, err := unix.NewIfreq("lo")
		if err != nil {
			t.Error(err)
			return
		}
		ifr.SetUint16(unix.IFF_UP)
		if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
			t.Errorf("bring lo up: %v", err)
			return
		}
		fn()
	}()
	<-done
}

// agentCall answers req as the guest's agent does.
func agentCall(req request) *response { return handle(context.Background(), req, Boot{}) }

// TestAgentUDPEcho: "echo-listen" with udp4 opens the rtt probe's UDP responder in the guest,
// which sends every datagram back to its sender; "echo-close" closes it; bad networks,
// addresses and numbers are refused with the reason.
func TestAgentUDPEcho(t *testing.T) {
	inPrivateNet(t, func() {
		r := agentCall(request{Op: "echo-listen", Net: "udp4", Addr: ":7"})
		if r.Err != "" || r.PID == 0 {
			t.Errorf("echo-listen udp4 :7 = %+v", r)
			return
		}
		c, err := net.DialTimeout("udp4", "127.0.0.1:7", time.Second)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		for _, msg := range []string{"one", strings.Repeat("x", 1400)} {
			if _, err := c.Write([]byte(msg)); err != nil {
				t.Error(err)
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 2048)
			n, err := c.Read(buf)
			if err != nil || string(buf[:n]) != msg {
				t.Errorf("echo of %d bytes: %d bytes back, %v", len(msg), n, err)
			}
		}
		if r := agentCall(request{Op: "echo-close", PID: r.PID}); r.Err != "" {
			t.Errorf("echo-close: %s", r.Err)
		}
		// Closed: nothing answers any more.
		_, _ = c.Write([]byte("late"))
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := c.Read(make([]byte, 64)); err == nil {
			t.Errorf("closed echo server answered %d bytes", n)
		}
		// A TCP echo server still opens beside.
		if r := agentCall(request{Op: "echo-listen", Net: "tcp4", Addr: "127.0.0.1:7"}); r.Err != "" {
			t.Errorf("echo-listen tcp4: %s", r.Err)
		} else {
			agentCall(request{Op: "echo-close", PID: r.PID})
		}
		for _, tt := range []struct {
			req  request
			want string
		}{
			{request{Op: "echo-listen", Net: "sctp", Addr: ":7"}, `echo server network "sctp" is not tcp4, tcp6, udp4 or udp6`},
			{request{Op: "echo-listen", Net: "udp4", Addr: "no-port"}, "missing port"},
			{request{Op: "echo-listen", Net: "udp4", Addr: "198.18.9.9:7"}, "cannot assign requested address"},
			{request{Op: "echo-close", PID: 99999}, "no echo server 99999"},
		} {
			if r := agentCall(tt.req); !strings.Contains(r.Err, tt.want) {
				t.Errorf("%+v: err %q, want %q", tt.req, r.Err, tt.want)
			}
		}
	})
}

// TestAgentCount: "count-listen" starts the ndr probe's receiver in the guest; "count-read"
// returns a trial's datagrams (too short ones and other trials' not counted) and the guest's
// UdpRcvbufErrors; "count-close" closes it; bad ports, numbers and settle times are refused.
func TestAgentCount(t *testing.T) {
	inPrivateNet(t, func() {
		r := agentCall(request{Op: "count-listen", Port: 5201})
		if r.Err != "" || r.PID == 0 {
			t.Errorf("count-listen 5201 = %+v", r)
			return
		}
		id := r.PID
		c, err := net.Dial("udp4", "127.0.0.1:5201")
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		send := func(trial uint32, n, size int) {
			for i := range n {
				b := make([]byte, max(size, 12))
				binary.BigEndian.PutUint32(b, trial)
				binary.BigEndian.PutUint64(b[4:], uint64(i))
				b = b[:size]
				if _, err := c.Write(b); err != nil {
					t.Error(err)
				}
			}
		}
		send(7, 50, 18)
		send(7, 3, 8) // shorter than a trial id and sequence number: not counted
		send(8, 20, 1472)
		for _, tt := range []struct {
			trial uint32
			want  uint64
		}{{7, 50}, {8, 20}, {9, 0}} {
			r := agentCall(request{Op: "count-read", PID: id, Trial: tt.trial, Grace: 100 * time.Millisecond})
			if r.Err != "" || r.Reading == nil || r.Reading.Received != tt.want {
				t.Errorf("count-read trial %d = %+v %+v, want %d received", tt.trial, r, r.Reading, tt.want)
			}
		}
		if r := agentCall(request{Op: "count-read", PID: id, Trial: 7}); r.Reading == nil || r.Reading.Received != 50 {
			t.Errorf("count-read without settling = %+v", r)
		}
		// A second receiver on the same port is refused by the kernel.
		if r := agentCall(request{Op: "count-listen", Port: 5201}); !strings.Contains(r.Err, "address already in use") {
			t.Errorf("second count-listen on 5201: err %q", r.Err)
		}
		for _, tt := range []struct {
			req  request
			want string
		}{
			{request{Op: "count-listen"}, "count-listen: no port"},
			{request{Op: "count-read", PID: 99999, Trial: 1}, "no receiver 99999"},
			{request{Op: "count-read", PID: id, Trial: 1, Grace: -time.Second}, "settle time -1s is not 0-5s"},
			{request{Op: "count-read", PID: id, Trial: 1, Grace: time.Minute}, "settle time 1m0s is not 0-5s"},
		} {
			if r := agentCall(tt.req); !strings.Contains(r.Err, tt.want) {
				t.Errorf("%+v: err %q, want %q", tt.req, r.Err, tt.want)
			}
		}
		if r := agentCall(request{Op: "count-close", PID: id}); r.Err != "" {
			t.Errorf("count-close: %s", r.Err)
		}
		if r := agentCall(request{Op: "count-close", PID: id}); !strings.Contains(r.Err, "no receiver") {
			t.Errorf("second count-close: err %q", r.Err)
		}
		// Closed: the port is free again.
		if r := agentCall(request{Op: "count-listen", Port: 5201}); r.Err != "" {
			t.Errorf("count-listen after close: %s", r.Err)
		} else {
			agentCall(request{Op: "count-close", PID: r.PID})
		}
	})
}
