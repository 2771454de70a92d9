package vm

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Lines of a little-endian kernel's /proc/net/tcp and tcp6 (the header, listening sockets, an
// established one that is not listed).
const (
	procTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:AB41 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 286159 1 00000000fa841523 100 0 0 10 0
   1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 287044 2 00000000438f81fd 100 0 0 10 0
   2: 020012C6:0050 010012C6:D431 01 00000000:00000000 00:00000000 00000000     0        0 287045 1 0000000000000000 20 4 30 10 -1
`
	procTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0
   2: 02000120000000000000000002000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0
`
)

func TestParseProcNetTCP(t *testing.T) {
	if !littleEndian() {
		t.Skip("SKIPPED LOUDLY: the sample tables are a little-endian kernel's")
	}
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{"ipv4", procTCP, []string{"127.0.0.1:43841", "0.0.0.0:80"}},
		{"ipv6", procTCP6, []string{"[::]:80", "[::1]:8080", "[2001:2::2]:80"}},
	} {
		socks, err := parseProcNetTCP([]byte(tc.data))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, s := range socks {
			got = append(got, s.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: listening %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := parseProcNetTCP([]byte("hdr\n 0: 0100007F 00000000:0000 0A\n")); err == nil {
		t.Error("a local address without a port was accepted")
	}
}

func littleEndian() bool {
	socks, err := parseProcNetTCP([]byte("hdr\n 0: 0100007F:0001 00000000:0000 0A\n"))
	return err == nil && len(socks) == 1 && socks[0].Addr() == netip.MustParseAddr("127.0.0.1")
}

// TestGuestListening runs the agent's listing on this machine's own tables: a socket the test
// listens on is listed in ss's format (the local address in the fourth column, as vnf.Listens
// reads it), another port is not.
func TestGuestListening(t *testing.T) {
	runtime.LockOSThread() // listen and read in one thread's network namespace
	defer runtime.UnlockOSThread()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	out, err := guestListening(port)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 || len(strings.Fields(lines[0])) < 4 || strings.Fields(lines[0])[3] != "127.0.0.1:"+port {
		t.Errorf("guestListening(%s) = %q, want one line with 127.0.0.1:%s in the fourth column", port, out, port)
	}
	ln.Close()
	if out, err := guestListening(port); err != nil || len(out) != 0 {
		t.Errorf("guestListening(%s) after close = %q, %v; want nothing", port, out, err)
	}
	if _, err := guestListening("http"); err == nil {
		t.Error("guestListening of a port name was accepted")
	}
}

// TestGuestGet: the agent's GET succeeds on 200 and fails on another status, on a connection
// refused and on a server that does not answer within the timeout.
func TestGuestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/obj-1k":
			_, _ = w.Write(make([]byte, 1024))
		case "/slow": // answers only when the client has gone
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	if code, err := guestGet(context.Background(), srv.URL+"/obj-1k", 5*time.Second); err != nil || code != 200 {
		t.Errorf("GET of an object = %d, %v; want 200", code, err)
	}
	if code, err := guestGet(context.Background(), srv.URL+"/missing", 5*time.Second); err == nil || code != 404 {
		t.Errorf("GET of a missing object = %d, %v; want 404 and an error", code, err)
	}
	if _, err := guestGet(context.Background(), srv.URL+"/slow", 200*time.Millisecond); err == nil {
		t.Error("GET of a server that does not answer in time succeeded")
	}
	ln, _ := net.Listen("tcp4", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := guestGet(context.Background(), "http://"+addr+"/", time.Second); err == nil {
		t.Error("GET of a closed port succeeded")
	}
}
