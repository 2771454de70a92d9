package vm

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sfclab/sfclab/vnf"
)

// Readiness checks the agent makes itself, in Go, so that they need no program in the guest
// image: busybox's netstat and wget, which the kinds' checks ran before, are not in a Debian
// root (debootstrap's minbase has neither net-tools nor wget), and a Debian guest's http-server
// failed its readiness check for it. The agent reads the kernel's socket tables and makes the
// GET with Go's HTTP client (already linked into it).

// handleCheck answers the agent's readiness requests; false for another op.
func handleCheck(ctx context.Context, req request, r *response) bool {
	switch req.Op {
	case "listening":
		out, err := guestListening(req.Addr)
		if err != nil {
			r.Err = err.Error()
		}
		r.Stdout = out
	case "http-get":
		code, err := guestGet(ctx, req.Addr, req.Timeout)
		if err != nil {
			r.Err = err.Error()
		}
		r.Code = code
	default:
		return false
	}
	return true
}

// procNetTCP are the kernel's TCP socket tables, IPv4 and IPv6.
// The tables are the calling thread's network namespace's (/proc/thread-self/net), read on
// a thread locked for the call: /proc/net is the thread group leader's, which in a process
// whose threads enter other namespaces (the host's test binary) need not be the caller's.
var procNetTCP = []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"}

// guestListening lists the guest's listening TCP sockets on port as `ss -Htln 'sport =
// :PORT'` prints them (state, queues, local and peer address), from /proc/net/tcp and tcp6 (a
// table that is absent, IPv6 off, is skipped).
func guestListening(port string) ([]byte, error) {
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("listening: port %q: %w", port, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out []byte
	for _, path := range procNetTCP {
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listening: %w", err)
		}
		socks, err := parseProcNetTCP(data)
		if err != nil {
			return nil, fmt.Errorf("listening: %s: %w", path, err)
		}
		for _, s := range socks {
			if s.Port() == uint16(p) {
				out = fmt.Appendf(out, "LISTEN 0 0 %s *:*\n", s)
			}
		}
	}
	return out, nil
}

// tcpListen is the state number of a listening socket in /proc/net/tcp (TCP_LISTEN).
const tcpListen = "0A"

// parseProcNetTCP returns the local addresses of the listening sockets of a /proc/net/tcp or
// tcp6 table. The kernel prints an address as 32-bit words in its own byte order, each as 8
// hex digits, and the port as 4 hex digits.
func parseProcNetTCP(data []byte) ([]netip.AddrPort, error) {
	var socks []netip.AddrPort
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 4 || f[3] != tcpListen {
			continue // the header, an empty line, a socket in another state
		}
		hexAddr, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			return nil, fmt.Errorf("line %d: local address %q", i+1, f[1])
		}
		port, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("line %d: port %q: %w", i+1, hexPort, err)
		}
		raw, err := hex.DecodeString(hexAddr)
		if err != nil || (len(raw) != 4 && len(raw) != 16) {
			return nil, fmt.Errorf("line %d: address %q", i+1, hexAddr)
		}
		for w := 0; w < len(raw); w += 4 { // each word from the kernel's order to the wire's
			binary.BigEndian.PutUint32(raw[w:], binary.NativeEndian.Uint32(raw[w:]))
		}
		addr, _ := netip.AddrFromSlice(raw)
		socks = append(socks, netip.AddrPortFrom(addr.Unmap(), uint16(port)))
	}
	return socks, nil
}

// guestGet makes a GET of url in the guest, reads the whole body and returns the status code;
// an error when no response came within timeout (default agentTimeout) or it is not 200 OK.
func guestGet(ctx context.Context, url string, timeout time.Duration) (int, error) {
	if timeout <= 0 {
		timeout = agentTimeout
	}
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: read the body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.StatusCode, nil
}

// ListeningTCP lists the guest's listening TCP sockets on port, in ss's format, read by the
// agent from the guest kernel's socket tables (vnf.SocketLister: vnf.Listens asks it).
func (n *Node) ListeningTCP(ctx context.Context, port string) ([]byte, error) {
	r, err := n.call(ctx, request{Op: "listening", Addr: port})
	if err != nil {
		return nil, fmt.Errorf("list listening sockets in VM node %s: %w", n.Name, err)
	}
	return r.Stdout, nil
}

// HTTPGet makes a GET of url from inside the guest (its network stack) and reads the whole
// response: an error unless it is 200 OK within timeout.
func (n *Node) HTTPGet(ctx context.Context, url string, timeout time.Duration) error {
	if _, err := n.call(ctx, request{Op: "http-get", Addr: url, Timeout: timeout}); err != nil {
		return fmt.Errorf("in VM node %s: %w", n.Name, err)
	}
	return nil
}

var (
	_ vnf.SocketLister = (*Node)(nil)
	_ vnf.HTTPGetter   = (*Node)(nil)
)
