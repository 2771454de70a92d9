package lb

import (
	"bytes"
	"crypto/rand"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketpair returns two connected non-blocking unix stream sockets (no network involved).
func socketpair(t *testing.T) (int, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fds[0], fds[1]
}

// testLoop is a loop without epoll: the test plays epoll by marking every socket ready, which
// edge-triggered code must survive (a spurious readiness costs one EAGAIN).
func testLoop() *eloop {
	s := &Server{cfg: Config{PipeSize: DefaultPipeSize, TimeoutClient: Duration(time.Hour)}}
	return &eloop{s: s, conns: map[*econn]struct{}{}, connecting: map[*econn]struct{}{}, buf: make([]byte, copyBuf)}
}

// TestFlowMoves sends data through one direction of a connection between socket pairs and
// checks it arrives intact, counted, copied or spliced by its size, with EOF passed on.
func TestFlowMoves(t *testing.T) {
	tests := []struct {
		name        string
		size        int
		sndbuf      int // the destination's send buffer; small forces partial writes
		wantSpliced bool
	}{
		{"request below the copy buffer is copied", 100, 0, false},
		{"bulk is spliced", 4 << 20, 0, true},
		{"bulk through a small send buffer (partial writes kept, resumed)", 1 << 20, 4096, true},
		{"exactly the copy buffer switches to splice", copyBuf, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, cliFd := socketpair(t)
			srvFd, server := socketpair(t)
			defer unix.Close(client)
			defer unix.Close(server)
			if tt.sndbuf > 0 {
				if err := unix.SetsockoptInt(srvFd, unix.SOL_SOCKET, unix.SO_SNDBUF, tt.sndbuf); err != nil {
					t.Fatal(err)
				}
			}
			l := testLoop()
			b := &backend{}
			c := &econn{cli: side{fd: cliFd, token: 1}, srv: side{fd: srvFd, token: 2}, b: b}
			c.up = flow{from: &c.cli, to: &c.srv, count: &b.bytesIn}
			c.down = flow{from: &c.srv, to: &c.cli, count: &b.bytesOut}
			l.conns[c] = struct{}{}
			l.s.active.Add(1)
			b.active.Add(1)

			data := make([]byte, tt.size)
			_, _ = rand.Read(data)
			_ = unix.SetNonblock(client, false)
			_ = unix.SetNonblock(server, false)
			send := func() {
				for rest := data; len(rest) > 0; {
					n, err := unix.Write(client, rest)
					if err != nil {
						return
					}
					rest = rest[n:]
				}
				_ = unix.Shutdown(client, unix.SHUT_WR)
			}
			if tt.size <= 64<<10 {
				send() // all queued before the first read: what a read sees does not depend on timing
			} else {
				go send()
			}
			got := make(chan []byte, 1)
			go func() {
				var all []byte
				buf := make([]byte, 64<<10)
				for {
					n, err := unix.Read(server, buf)
					if n <= 0 || err != nil {
						got <- all
						return
					}
					all = append(all, buf[:n]...)
				}
			}()

			spliced := false
			deadline := time.Now().Add(10 * time.Second)
			for !c.up.done {
				if time.Now().After(deadline) {
					t.Fatalf("not done after 10 s: %d of %d bytes counted", b.bytesIn.Load(), tt.size)
				}
				c.cli.readable, c.srv.writable = true, true
				l.progress(c)
				spliced = spliced || c.up.spliced
				if c.closed {
					t.Fatal("connection closed on an error")
				}
				time.Sleep(100 * time.Microsecond)
			}
			// The server side's write is shut: the reader sees EOF.
			var back []byte
			select {
			case back = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the server did not see EOF after the client's")
			}
			if !bytes.Equal(back, data) {
				t.Fatalf("got %d bytes, want %d intact", len(back), len(data))
			}
			if n := b.bytesIn.Load(); n != uint64(tt.size) {
				t.Errorf("bytes_in %d, want %d", n, tt.size)
			}
			if spliced != tt.wantSpliced {
				t.Errorf("spliced %v, want %v", spliced, tt.wantSpliced)
			}
			if tt.wantSpliced && len(l.pipes) != 1 {
				t.Errorf("%d pipes back in the loop's pool after the flow ended, want 1", len(l.pipes))
			}
			if !tt.wantSpliced && len(l.pipes) != 0 {
				t.Errorf("a copied flow made %d pipes", len(l.pipes))
			}
			_ = unix.Shutdown(server, unix.SHUT_WR) // the other direction ends: the connection closes
			for range 100 {
				if c.closed {
					break
				}
				c.srv.readable, c.cli.writable = true, true
				l.progress(c)
				time.Sleep(time.Millisecond)
			}
			if !c.closed || l.s.active.Load() != 0 || b.active.Load() != 0 || len(l.conns) != 0 {
				t.Errorf("after both directions ended: closed %v, active %d, backend active %d, loop conns %d",
					c.closed, l.s.active.Load(), b.active.Load(), len(l.conns))
			}
			l.closeAll()
		})
	}
}

// TestIdleSweep checks a connection is closed at the second sweep without a move, and kept
// while bytes move.
func TestIdleSweep(t *testing.T) {
	l := testLoop()
	mk := func() *econn {
		a, b := socketpair(t)
		c := &econn{cli: side{fd: a}, srv: side{fd: b}, b: &backend{}}
		c.b.active.Add(1)
		l.conns[c] = struct{}{}
		l.s.active.Add(1)
		return c
	}
	idle, busy := mk(), mk()
	now := time.Now()
	for i, want := range []bool{false, true, true} { // idle closed at the second sweep
		busy.moves++
		l.timers(now)
		now = now.Add(time.Hour)
		if idle.closed != want {
			t.Errorf("sweep %d: idle closed %v, want %v", i+1, idle.closed, want)
		}
		if busy.closed {
			t.Errorf("sweep %d: a connection moving bytes was closed", i+1)
		}
	}
	if n := l.s.timedOut.Load(); n != 1 {
		t.Errorf("timed_out %d, want 1", n)
	}
	l.closeAll()
	if n := l.s.active.Load(); n != 0 {
		t.Errorf("active %d after closing all, want 0", n)
	}
}

// TestAdmit checks maxconn is exact: admits up to it, refuses after, admits again on a close.
func TestAdmit(t *testing.T) {
	s := &Server{cfg: Config{MaxConn: 3}}
	var got []bool
	for range 4 {
		got = append(got, s.admit())
	}
	s.active.Add(-1)
	got = append(got, s.admit())
	want := []bool{true, true, true, false, true}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("admits %v, want %v", got, want)
		}
	}
}
