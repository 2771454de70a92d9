// Package load is the http probe's load generator: a client built as ab is (one thread,
// non-blocking sockets, one epoll set), run in the calling thread's network stack. It is
// split from package http (which resolves targets and emits samples) so that the VM guest
// agent, sfclab-guest, can run it in a guest source without linking the probe and results
// packages (runtime/vm's TestGuestAgentDeps).
package load

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The client is built as ab is: one thread, non-blocking sockets, one epoll set, Concurrency
// connections each carrying one request at a time. It runs on an OS thread of its own inside
// the source node's network namespace and makes raw system calls, so it wakes up when ab
// would and costs about what ab costs. (Go's poller, or a thread per connection, wakes up more
// often; on a small virtual machine that made a Go client up to a third slower than ab at
// concurrency 1, and 20 % slower with keep-alive at concurrency 10.)

// maxHead bounds a response's status line and headers.
const maxHead = 32 << 10

// readSize is what one read asks for: ab's buffer. (Like ab, the client reads once per event
// and lets epoll report the rest; draining the socket in 64 KiB reads instead made no
// difference beyond the noise through Squid.)
const readSize = 8192

// pollTick bounds each epoll wait, so that deadlines and cancellation are seen.
const pollTick = 50 * time.Millisecond

// outcome is one finished request.
type outcome struct {
	seq        int64
	status     int // 0: no answer
	bytes      int64
	err        error
	start, end time.Time
	// connected, firstByte and lastByte date the request's phases (see Phases); zero
	// when the request did not get that far.
	connected, firstByte, lastByte time.Time
}

// Phases splits an answered request's time (start to end) into what it waited for:
//   - Connect: the TCP handshake (0 on a kept-alive connection);
//   - Wait: from the request written to the answer's first byte (the proxy's and the
//     origin's work, and the connections the proxy opens);
//   - Body: from the first byte to the last byte of the body;
//   - Close: from the last byte to the server's close (ab without -k waits for it too).
type Phases struct {
	Connect, Wait, Body, Close time.Duration
}

// phases returns o's phases; ok is false unless every phase was dated.
func (o outcome) phases() (Phases, bool) {
	if o.connected.IsZero() || o.firstByte.IsZero() || o.lastByte.IsZero() {
		return Phases{}, false
	}
	return Phases{Connect: o.connected.Sub(o.start), Wait: o.firstByte.Sub(o.connected),
		Body: o.lastByte.Sub(o.firstByte), Close: o.end.Sub(o.lastByte)}, true
}

// conn states.
const (
	stConnecting = iota
	stReading    // waiting for and reading the answer
	stClosing    // answer read, waiting for the server to close (as ab without -k)
)

type conn struct {
	fd    int
	state int
	seq   int64 // request number, -1 when idle
	start time.Time
	// connected, firstByte, lastByte: see outcome.
	connected, firstByte, lastByte time.Time
	deadline                       time.Time
	head                           []byte // status line and headers read so far
	status                         int
	length                         int64 // body length, -1 until the server closes
	got                            int64 // body bytes read
	closing                        bool  // the server closes after this answer
	headDone                       bool
}

// client runs the requests of one run.
type client struct {
	req       []byte
	addr      netip.AddrPort
	size      int64
	keepAlive bool
	timeout   time.Duration
	n         int64

	epfd     int
	next     int64 // next request number
	stopped  bool
	answered bool // some answer's headers came
	conns    map[int]*conn
	buf      []byte
	done     func(outcome) bool // records a finished request; false stops the run
}

// run sends the requests with concurrency connections until all are done, done says stop, or
// ctx ends. It must run on a thread locked inside the source node's namespace.
func (cl *client) run(ctx context.Context, concurrency int) error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return os.NewSyscallError("epoll_create1", err)
	}
	cl.epfd = epfd
	cl.conns = map[int]*conn{}
	cl.buf = make([]byte, readSize)
	defer func() {
		for fd := range cl.conns {
			unix.Close(fd)
		}
		unix.Close(epfd)
	}()
	events := make([]unix.EpollEvent, concurrency)
	for {
		// As ab: one connection until the first answer's headers came, then all of them.
		want := concurrency
		if !cl.answered {
			want = 1
		}
		for !cl.stopped && cl.next < cl.n && len(cl.conns) < want {
			cl.startNext(nil)
		}
		if len(cl.conns) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := pollTick
		now := time.Now()
		for _, c := range cl.conns {
			if d := c.deadline.Sub(now); d < wait {
				wait = max(d, 0)
			}
		}
		k, err := unix.EpollWait(epfd, events, int((wait+time.Millisecond-1)/time.Millisecond))
		if err != nil && err != unix.EINTR {
			return os.NewSyscallError("epoll_wait", err)
		}
		for i := 0; i < k; i++ {
			if c := cl.conns[int(events[i].Fd)]; c != nil {
				cl.event(c, events[i].Events)
			}
		}
		now = time.Now()
		for _, c := range cl.conns {
			if c.seq >= 0 && now.After(c.deadline) {
				cl.finish(c, fmt.Errorf("%s: %w", cl.stage(c), os.ErrDeadlineExceeded))
			}
		}
	}
}

func (cl *client) stage(c *conn) string {
	switch {
	case c.state == stConnecting:
		return "connect " + cl.addr.String()
	case c.state == stClosing:
		return "wait for the server to close"
	case !c.headDone:
		return "wait for the answer"
	}
	return "read the body"
}

// startNext starts the next request: on c when it is kept alive, else on a new connection.
// A request that fails at once is recorded; the run loop starts the next one.
func (cl *client) startNext(c *conn) {
	if cl.stopped || cl.next >= cl.n {
		if c != nil {
			cl.drop(c)
		}
		return
	}
	seq := cl.next
	cl.next++
	now := time.Now()
	if c != nil { // kept alive
		*c = conn{fd: c.fd, seq: seq, start: now, connected: now, deadline: now.Add(cl.timeout), length: -1, state: stReading}
		if err := cl.send(c); err != nil {
			cl.finish(c, err)
		}
		return
	}
	c = &conn{fd: -1, seq: seq, start: now, deadline: now.Add(cl.timeout), length: -1}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		cl.finish(c, os.NewSyscallError("socket", err))
		return
	}
	c.fd = fd
	cl.conns[fd] = c
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: int(cl.addr.Port()), Addr: cl.addr.Addr().As4()})
	switch {
	case err == nil:
		c.state, c.connected = stReading, time.Now()
		if err := cl.watch(c, unix.EPOLL_CTL_ADD, unix.EPOLLIN); err != nil {
			cl.finish(c, err)
		} else if err := cl.send(c); err != nil {
			cl.finish(c, err)
		}
	case err == unix.EINPROGRESS:
		c.state = stConnecting
		if err := cl.watch(c, unix.EPOLL_CTL_ADD, unix.EPOLLOUT); err != nil {
			cl.finish(c, err)
		}
	default:
		cl.finish(c, cl.dialErr(os.NewSyscallError("connect", err)))
	}
}

func (cl *client) dialErr(err error) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(cl.addr), Err: err}
}

func (cl *client) watch(c *conn, op int, events uint32) error {
	if err := unix.EpollCtl(cl.epfd, op, c.fd, &unix.EpollEvent{Events: events, Fd: int32(c.fd)}); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// send writes the request (small enough for any socket buffer).
func (cl *client) send(c *conn) error {
	n, err := unix.Write(c.fd, cl.req)
	if err != nil {
		return os.NewSyscallError("write", err)
	}
	if n != len(cl.req) {
		return fmt.Errorf("write: short write of the request (%d of %d bytes)", n, len(cl.req))
	}
	return nil
}

// event handles what epoll reported for c.
func (cl *client) event(c *conn, ev uint32) {
	if c.seq < 0 {
		return
	}
	switch c.state {
	case stConnecting:
		soerr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && soerr != 0 {
			err = syscall.Errno(soerr)
		}
		if err != nil {
			cl.finish(c, cl.dialErr(os.NewSyscallError("connect", err)))
			return
		}
		if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		c.state, c.connected = stReading, time.Now()
		if err := cl.watch(c, unix.EPOLL_CTL_MOD, unix.EPOLLIN); err != nil {
			cl.finish(c, err)
			return
		}
		if err := cl.send(c); err != nil {
			cl.finish(c, err)
		}
	default:
		cl.read(c)
	}
}

// read reads what c has: one read of up to readSize bytes per event, as ab.
func (cl *client) read(c *conn) {
	for {
		n, err := unix.Read(c.fd, cl.buf)
		if err == unix.EAGAIN {
			return
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			cl.finish(c, fmt.Errorf("%s: %w", cl.stage(c), os.NewSyscallError("read", err)))
			return
		}
		if n == 0 { // the server closed
			switch {
			case c.state == stClosing:
				cl.finish(c, nil)
			case c.headDone && c.length < 0:
				c.lastByte = time.Now()
				cl.finish(c, nil) // body delimited by the close
			case c.headDone:
				cl.finish(c, fmt.Errorf("read the body: closed after %d of %d bytes", c.got, c.length))
			default:
				cl.finish(c, fmt.Errorf("wait for the answer: the server closed the connection"))
			}
			return
		}
		b := cl.buf[:n]
		if c.firstByte.IsZero() {
			c.firstByte = time.Now()
		}
		if c.state == stClosing {
			return // bytes after the answer: ignored, as ab does
		}
		if !c.headDone {
			c.head = append(c.head, b...)
			end := bytes.Index(c.head, []byte("\r\n\r\n"))
			if end < 0 {
				if len(c.head) > maxHead {
					cl.finish(c, fmt.Errorf("wait for the answer: no end of headers in %d bytes", len(c.head)))
				}
				return
			}
			if err := parseHead(c, c.head[:end+2]); err != nil {
				cl.finish(c, err)
				return
			}
			c.headDone, cl.answered = true, true
			b = c.head[end+4:]
			c.head = nil
		}
		c.got += int64(len(b))
		if c.length >= 0 && c.got >= c.length {
			c.lastByte = time.Now()
			if c.got > c.length {
				cl.finish(c, fmt.Errorf("read the body: %d bytes, more than the %d announced", c.got, c.length))
				return
			}
			if cl.keepAlive && !c.closing {
				cl.finish(c, nil)
				return
			}
			c.state = stClosing // as ab: the answer ends when the server closes the connection
		}

	}
}

// parseHead reads the status code and the headers that frame the body from a response's head
// (status line and headers, each ending in CRLF).
func parseHead(c *conn, head []byte) error {
	lines := bytes.Split(head, []byte("\r\n"))
	line := lines[0]
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return fmt.Errorf("malformed status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil || status < 100 {
		return fmt.Errorf("malformed status line %q", line)
	}
	c.status = status
	c.closing = line[7] == '0' // HTTP/1.0 closes unless it says keep-alive
	chunked := false
	for _, l := range lines[1:] {
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("malformed Content-Length %q", value)
			}
			c.length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = !bytes.EqualFold(value, []byte("identity"))
		case bytes.EqualFold(name, []byte("Connection")):
			v := bytes.ToLower(value)
			if bytes.Contains(v, []byte("close")) {
				c.closing = true
			} else if bytes.Contains(v, []byte("keep-alive")) {
				c.closing = false
			}
		}
	}
	switch {
	case status < 200 || status == 204 || status == 304:
		c.length = 0
	case chunked:
		// Counted as bytes up to the server's close, chunk framing included, as ab does.
		c.length, c.closing = -1, true
	case c.length < 0:
		c.closing = true
	}
	return nil
}

// finish ends c's request (err nil: answered in full); a kept-alive connection carries the
// next request at once, others are closed and the run loop opens new ones.
func (cl *client) finish(c *conn, err error) {
	if c.seq < 0 {
		return
	}
	reuse := err == nil && cl.keepAlive && !c.closing && c.state == stReading
	if err == nil && c.status >= 200 && c.status <= 299 && c.got != cl.size {
		err = fmt.Errorf("read the body: %d bytes, want %d", c.got, cl.size)
	}
	o := outcome{seq: c.seq, status: c.status, bytes: c.got, err: err, start: c.start, end: time.Now(),
		connected: c.connected, firstByte: c.firstByte, lastByte: c.lastByte}
	if !c.headDone {
		o.status = 0
	}
	c.seq = -1
	if !cl.done(o) {
		cl.stopped = true
	}
	if reuse && !cl.stopped {
		cl.startNext(c)
		return
	}
	cl.drop(c)
}

func (cl *client) drop(c *conn) {
	if c.fd >= 0 {
		unix.Close(c.fd) // also leaves the epoll set
		delete(cl.conns, c.fd)
		c.fd = -1
	}
	c.seq = -1
}

// request renders the GET request ab sends (HTTP/1.0, asking for keep-alive with -k) for url
// (http://ADDR:PORT/PATH), and the address to connect to: proxy when it is valid (the request
// then names the whole url).
func request(url string, proxy netip.AddrPort, keepAlive bool) ([]byte, netip.AddrPort, error) {
	target, host, ok := cutURL(url)
	if !ok {
		return nil, netip.AddrPort{}, fmt.Errorf("url %s: not http://ADDR:PORT/PATH", url)
	}
	dial, err := netip.ParseAddrPort(host)
	if err != nil {
		return nil, netip.AddrPort{}, fmt.Errorf("url %s: the host is not an address and port: %w", url, err)
	}
	if proxy.IsValid() {
		target, dial = url, proxy
	}
	if !dial.Addr().Is4() {
		return nil, netip.AddrPort{}, fmt.Errorf("dial %s: sfclab labs are IPv4", dial)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.0\r\n", target)
	if keepAlive {
		b.WriteString("Connection: Keep-Alive\r\n")
	}
	fmt.Fprintf(&b, "Host: %s\r\nUser-Agent: sfclab\r\nAccept: */*\r\n\r\n", host)
	return b.Bytes(), dial, nil
}

// cutURL splits http://HOST/PATH into PATH and HOST.
func cutURL(u string) (path, host string, ok bool) {
	rest, ok := bytes.CutPrefix([]byte(u), []byte("http://"))
	if !ok {
		return "", "", false
	}
	i := bytes.IndexByte(rest, '/')
	if i < 0 {
		return "/", string(rest), true
	}
	return string(rest[i:]), string(rest[:i]), true
}
