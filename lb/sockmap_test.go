package lb

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// netnsEnv marks the child test process that runs inside a network namespace of its own.
const netnsEnv = "SFCLAB_LB_TEST_NETNS"

// Addresses on the loopback of the test's own network namespace.
var (
	lbAddr      = netip.MustParseAddr("198.18.0.1")
	backendAddr = netip.MustParseAddr("198.18.0.2")
	clientAddr  = netip.MustParseAddr("198.18.0.3")
)

// inOwnNetns reports whether the test runs in its own network namespace. Called first, it
// reruns the test as a child process in a new network namespace (lo up, with the test's
// addresses) and returns false, the parent's outcome being the child's: the balancer's
// traffic stays in a namespace the test made and gone when the child exits.
func inOwnNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(netnsEnv) != "" {
		for _, args := range [][]string{{"link", "set", "lo", "up"},
			{"addr", "add", lbAddr.String() + "/32", "dev", "lo"},
			{"addr", "add", backendAddr.String() + "/32", "dev", "lo"},
			{"addr", "add", clientAddr.String() + "/32", "dev", "lo"}} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				t.Fatalf("ip %v: %v: %s", args, err, out)
			}
		}
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs in a network namespace of its own and loads BPF")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	t.Logf("in its own network namespace:\n%s", out)
	if err != nil {
		t.Fatalf("test in its own network namespace: %v", err)
	}
	return false
}

// startSockmapLB starts a balancer with accel sockmap over one backend address.
func startSockmapLB(t *testing.T, backendPort uint16) (*Server, string, func()) {
	t.Helper()
	cfg := Config{Listen: netip.AddrPortFrom(lbAddr, 7000),
		Backends: []Backend{{Name: "b", Addr: netip.AddrPortFrom(backendAddr, backendPort)}},
		Accel:    AccelSockmap, Drain: Duration(time.Second)}
	s, err := Listen(cfg)
	if errors.Is(err, ErrNoSockmap) {
		t.Skipf("no sockmap here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	return s, s.Addr().String(), func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
}

// sumServer accepts on addr; per connection it writes banner, reads to EOF (the client's
// half-close must arrive), answers with what it read, in reverse order of 64 KiB blocks
// so an answer is not the request replayed, and closes.
func sumServer(t *testing.T, addr string, banner []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := c.Write(banner); err != nil {
					return
				}
				data, err := io.ReadAll(c)
				if err != nil {
					return
				}
				_, _ = c.Write(answer(data))
			}()
		}
	}()
}

func answer(data []byte) []byte {
	const block = 64 << 10
	var out []byte
	for end := len(data); end > 0; end -= block {
		out = append(out, data[max(0, end-block):end]...)
	}
	return out
}

// exchange sends size random bytes from the client address, half-closes, and checks the
// banner and the answer arrive intact, then EOF.
func exchange(addr string, banner []byte, size int) error {
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(clientAddr, 0)), Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	data := make([]byte, size)
	_, _ = rand.Read(data)
	// The request goes out at once (the balancer may not have attached the sockets yet);
	// the half-close only once the banner came through, so the balancer had attached them
	// while both were open, as sockmap needs.
	bannerIn := make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		<-bannerIn
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	got := make([]byte, len(banner))
	_, err = io.ReadFull(c, got)
	close(bannerIn)
	if err != nil {
		return fmt.Errorf("read banner: %w", err)
	}
	rest, err := io.ReadAll(c)
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	got = append(got, rest...)
	if err := <-werr; err != nil {
		return fmt.Errorf("send: %w", err)
	}
	want := append(append([]byte{}, banner...), answer(data)...)
	if !bytes.Equal(got, want) {
		return fmt.Errorf("got %d bytes (sha256 %x), want %d (sha256 %x)", len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
	}
	return nil
}

// mapKeys counts the entries of a map.
func mapKeys(t *testing.T, m *ebpf.Map) int {
	t.Helper()
	var k sockmapSockKey
	n := 0
	it := m.Iterate()
	for it.Next(&k, nil) {
		n++
	}
	return n
}

// waitIdle waits until the balancer has no open connection (its side of the close runs after
// the client saw EOF).
func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.active.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open 5 s after the exchanges ended", s.active.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSockmapMovesBytes checks accel sockmap end to end in a namespace of its own: bytes
// intact both ways (including a banner the backend sends before the balancer attached the
// sockets, and a client's request queued before it), half-closes passed on both ways,
// per-backend byte counters from the verdict program's map, and no map entry left once the
// connections closed.
func TestSockmapMovesBytes(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	tests := []struct {
		name   string
		banner string
		size   int
		conns  int
	}{
		{"request and answer below a segment", "hello", 100, 1},
		{"bulk both ways", "b", 16 << 20, 1},
		{"nothing sent, only half-closes", "b", 0, 1},
		{"many connections at once", "b", 256 << 10, 32},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := uint16(9000 + i)
			sumServer(t, netip.AddrPortFrom(backendAddr, port).String(), []byte(tt.banner))
			s, addr, stop := startSockmapLB(t, port)
			defer stop()
			var wg sync.WaitGroup
			errs := make(chan error, tt.conns)
			for range tt.conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := exchange(addr, []byte(tt.banner), tt.size); err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			waitIdle(t, s)
			st := s.Stats()
			if st.AccelFailed != 0 {
				t.Errorf("%d connections were spliced, not accelerated", st.AccelFailed)
			}
			b := st.Backends[0]
			wantIn, wantOut := uint64(tt.conns*tt.size), uint64(tt.conns*(tt.size+len(tt.banner)))
			if b.BytesIn != wantIn || b.BytesOut != wantOut {
				t.Errorf("backend counted %d bytes in, %d out, want %d, %d", b.BytesIn, b.BytesOut, wantIn, wantOut)
			}
			for name, m := range map[string]*ebpf.Map{"socks": s.accel.objs.Socks, "peers": s.accel.objs.Peers, "bytes": s.accel.objs.Bytes} {
				if n := mapKeys(t, m); n != 0 {
					t.Errorf("%d entries left in %s after the connections closed", n, name)
				}
			}
		})
	}
}

// TestAccelConfig: accel defaults to splice, loop epoll (removed) is refused, anything else
// is refused with the reason.
func TestAccelConfig(t *testing.T) {
	tests := []struct {
		accel, loop string
		want        string // "" = refused
	}{
		{"", "", AccelSplice},
		{AccelSplice, "epoll", ""},
		{AccelSockmap, "", AccelSockmap},
		{AccelSockmap, LoopGoroutines, AccelSockmap},
		{"zerocopy", "", ""},
	}
	for _, tt := range tests {
		c := Config{Listen: netip.AddrPortFrom(lbAddr, 7000), Accel: tt.accel, Loop: tt.loop,
			Backends: []Backend{{Name: "b", Addr: netip.AddrPortFrom(backendAddr, 80)}}}
		err := c.Validate()
		switch {
		case tt.want == "" && !errors.Is(err, ErrConfig):
			t.Errorf("accel %q loop %q: %v, want ErrConfig", tt.accel, tt.loop, err)
		case tt.want != "" && (err != nil || c.Accel != tt.want):
			t.Errorf("accel %q loop %q: accel %q, %v; want %q", tt.accel, tt.loop, c.Accel, err, tt.want)
		}
	}
}

// TestSockmapFallsBackToSplice: a client that sends its request and half-closes at once may
// be half-closed before the balancer attaches its socket, which the kernel refuses (sockmap
// takes established sockets only); such a connection is spliced, its bytes intact.
func TestSockmapFallsBackToSplice(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	sumServer(t, netip.AddrPortFrom(backendAddr, 9100).String(), nil)
	s, addr, stop := startSockmapLB(t, 9100)
	defer stop()
	const conns = 20
	for range conns {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(clientAddr, 0)), Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 1000)
		_, _ = rand.Read(data)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(data); err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).CloseWrite()
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil || !bytes.Equal(got, answer(data)) {
			t.Fatalf("got %d bytes, %v; want the %d-byte answer", len(got), err, len(data))
		}
	}
	waitIdle(t, s)
	st := s.Stats()
	t.Logf("%d of %d connections spliced", st.AccelFailed, conns)
	if b := st.Backends[0]; b.BytesIn != conns*1000 || b.BytesOut != conns*1000 {
		t.Errorf("backend counted %d bytes in, %d out, want %d each", b.BytesIn, b.BytesOut, conns*1000)
	}
	if n := mapKeys(t, s.accel.objs.Bytes) + mapKeys(t, s.accel.objs.Peers) + mapKeys(t, s.accel.objs.Socks); n != 0 {
		t.Errorf("%d map entries left", n)
	}
}
