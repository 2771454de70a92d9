package lb

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The epoll data path (Config.Loop "epoll"): one edge-triggered epoll loop per core, each on
// its own locked OS thread, non-blocking sockets driven by hand instead of goroutines parked
// on Go's netpoller. The balancer, health checks, counters and stats are the Server's, shared
// with the goroutine data path; only the moving of connections differs.
//
// The loops share one listening socket, each waiting on it with EPOLLEXCLUSIVE and accepting
// itself, rather than one SO_REUSEPORT listener per loop: SO_REUSEPORT lets any other process
// of the same user bind the same address (HAProxy sets it on its listeners), so a balancer
// started on a port already served would share it silently instead of failing the deploy with
// "address already in use"; an exclusive wakeup goes to a loop waiting in epoll_wait, an idle
// one, where SO_REUSEPORT's hash hands a busy loop its share regardless; and no loop passes
// descriptors to another, so there is no queue between threads.

// side is one socket of a connection and what epoll last said about it: readable and writable
// are set by events and cleared only when an operation returns EAGAIN (edge-triggered).
type side struct {
	fd                 int
	token              int32 // in the epoll event, to tell a reused descriptor from this one
	readable, writable bool
}

// flow is one direction of a connection: copied through the loop's buffer while reads do not
// fill it, spliced through a pipe from the first read that does (as the goroutine path).
type flow struct {
	from, to *side
	count    *atomic.Uint64
	spliced  bool
	pending  []byte // copied bytes the destination did not take yet
	p        *pipe
	inPipe   int  // bytes in p
	eof      bool // from reached EOF
	done     bool // eof passed on: to's write side is shut
}

// econn is one proxied connection owned by a loop.
type econn struct {
	cli, srv   side
	src        netip.Addr
	b          *backend // the backend connected (or being connected) to
	tried      map[*backend]bool
	connecting bool
	deadline   time.Time // of the connect
	up, down   flow      // client -> server, server -> client
	// moves counts reads and writes that moved bytes; the idle sweep compares it with seen,
	// taken at the previous sweep (marked once a sweep has seen the connection).
	moves, seen uint64
	marked      bool
	closed      bool
	queued      bool // in eloop.again
}

// eloop is one epoll loop and the connections it owns; only its own thread touches them.
type eloop struct {
	s          *Server
	epfd       int
	wake       int // eventfd: the Server asks the loop to stop accepting or to close everything
	tokens     int32
	byFd       []*econn
	conns      map[*econn]struct{}
	connecting map[*econn]struct{}
	pipes      []*pipe // empty pipes kept for reuse
	buf        []byte  // copy-phase buffer, shared by the loop's connections
	// again are connections that spent their budget with bytes maybe left; spare is the
	// other buffer of the pair, swapped each turn.
	again, spare []*econn
	accepting    bool
	nextSweep    time.Time
}

// maxIdlePipes bounds the empty pipes a loop keeps (each holds two descriptors).
const maxIdlePipes = 64

// acceptBatch bounds the connections a loop accepts per wakeup, so a burst is shared with the
// other loops rather than taken by the first awake.
const acceptBatch = 16

// loops is the number of epoll loops: Threads, else one per CPU Go may use (GOMAXPROCS, which
// follows the CPU affinity and the cgroup's CPU limit).
func (c *Config) loops() int {
	if c.Threads > 0 {
		return c.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// sockaddr converts an address for the socket calls.
func sockaddr(ap netip.AddrPort) (int, unix.Sockaddr) {
	if ap.Addr().Is4() || ap.Addr().Is4In6() {
		return unix.AF_INET, &unix.SockaddrInet4{Addr: ap.Addr().Unmap().As4(), Port: int(ap.Port())}
	}
	return unix.AF_INET6, &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
}

// addrOf converts a socket address back; the zero AddrPort for other families.
func addrOf(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// listenFd binds a non-blocking listening socket without SO_REUSEPORT, so a port in use is an
// error (SO_REUSEADDR as Go's net.Listen sets it).
//
// Equivalent to: socket(); setsockopt(SO_REUSEADDR); bind(ADDR); listen()
func listenFd(ap netip.AddrPort) (int, error) {
	family, sa := sockaddr(ap)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("set SO_REUSEADDR: %w", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind: %w", err)
	}
	if err := unix.Listen(fd, 1<<16-1); err != nil { // the kernel caps it at net.core.somaxconn
		unix.Close(fd)
		return -1, fmt.Errorf("listen: %w", err)
	}
	return fd, nil
}

// resetFd closes a socket with an RST (SO_LINGER 0), so the peer sees a refusal at once.
func resetFd(fd int) {
	_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	unix.Close(fd)
}

// admit counts a connection in unless maxconn are open (exact across loops).
func (s *Server) admit() bool {
	for {
		a := s.active.Load()
		if a >= int64(s.cfg.MaxConn) {
			return false
		}
		if s.active.CompareAndSwap(a, a+1) {
			return true
		}
	}
}

// serveEpoll runs the epoll loops until ctx ends or one fails, then drains: every loop stops
// accepting, the listener closes, open connections get cfg.Drain and are closed after that.
func (s *Server) serveEpoll(ctx context.Context) error {
	n := s.cfg.loops()
	errc := make(chan error, n)
	var loops []*eloop
	var running, accepting sync.WaitGroup
	wakeAll := func() {
		for _, l := range loops {
			l.signal()
		}
	}
	var err error
	for range n {
		l, lerr := s.newLoop()
		if lerr != nil {
			err = lerr
			break
		}
		loops = append(loops, l)
		running.Add(1)
		accepting.Add(1)
		go func() {
			defer running.Done()
			errc <- l.run(&accepting)
		}()
	}
	if err == nil {
		select {
		case <-ctx.Done():
		case err = <-errc: // a loop ends before the stop only on a failure
		}
	}
	s.stopping.Store(true)
	wakeAll()
	accepting.Wait()
	unix.Close(s.lfd)
	ended := make(chan struct{})
	go func() { running.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(time.Duration(s.cfg.Drain)):
		s.force.Store(true)
		wakeAll()
		<-ended
	}
	for _, l := range loops {
		unix.Close(l.epfd)
		unix.Close(l.wake)
	}
	return err
}

// newLoop creates a loop's epoll instance and wake eventfd and registers the listener
// (level-triggered: a loop leaving connections in the queue sees it again; exclusive: one
// waiting loop is woken per arrival).
func (s *Server) newLoop() (*eloop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create epoll instance: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("create eventfd: %w", err)
	}
	l := &eloop{s: s, epfd: epfd, wake: wake, conns: map[*econn]struct{}{}, connecting: map[*econn]struct{}{},
		buf: make([]byte, copyBuf), accepting: true, nextSweep: time.Now().Add(time.Duration(s.cfg.TimeoutClient))}
	// Token 0 marks the loop's own descriptors; connections' tokens start at 1.
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		l.closeFds()
		return nil, fmt.Errorf("register eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLEXCLUSIVE, Fd: int32(s.lfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, s.lfd, &ev); err != nil {
		l.closeFds()
		return nil, fmt.Errorf("register listener: %w", err)
	}
	return l, nil
}

func (l *eloop) closeFds() {
	unix.Close(l.epfd)
	unix.Close(l.wake)
}

// signal wakes the loop to look at the Server's stopping and force flags.
func (l *eloop) signal() {
	var one = [8]byte{1}
	_, _ = unix.Write(l.wake, one[:])
}

// run is the loop: wait for events, act on them, run the timers. It returns when the Server
// stops and the loop's connections are gone (or forced closed), or on a failure.
func (l *eloop) run(accepting *sync.WaitGroup) (err error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the loop
	defer func() {
		if l.accepting {
			l.stopAccepting(accepting)
		}
		l.closeAll()
	}()
	events := make([]unix.EpollEvent, 256)
	for {
		if l.s.force.Load() {
			return nil
		}
		if l.accepting && l.s.stopping.Load() {
			l.stopAccepting(accepting)
		}
		if !l.accepting && len(l.conns) == 0 {
			return nil
		}
		timeout := l.timeout(time.Now())
		if len(l.again) > 0 {
			timeout = 0
		}
		n, werr := unix.EpollWait(l.epfd, events, timeout)
		if werr != nil && werr != unix.EINTR {
			return fmt.Errorf("wait for events: %w", werr)
		}
		for _, ev := range events[:max(n, 0)] {
			if ev.Pad == 0 { // the loop's own descriptors
				if int(ev.Fd) == l.wake {
					var b [8]byte
					_, _ = unix.Read(l.wake, b[:])
				} else if l.accepting {
					if err := l.accept(); err != nil {
						return err
					}
				}
				continue
			}
			l.event(ev)
		}
		again := l.again
		l.again = l.spare[:0]
		for _, c := range again {
			c.queued = false
			l.progress(c)
		}
		clear(again)
		l.spare = again[:0]
		l.timers(time.Now())
	}
}

func (l *eloop) stopAccepting(accepting *sync.WaitGroup) {
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, l.s.lfd, nil)
	l.accepting = false
	accepting.Done()
}

// timeout is epoll_wait's timeout in milliseconds: until the next idle sweep or connect
// deadline.
func (l *eloop) timeout(now time.Time) int {
	next := l.nextSweep
	for c := range l.connecting {
		if c.deadline.Before(next) {
			next = c.deadline
		}
	}
	d := next.Sub(now)
	if d <= 0 {
		return 0
	}
	return int(min(d/time.Millisecond+1, 1<<30))
}

// timers closes connections idle over a whole sweep period (so after 1-2 periods, as the
// goroutine path's timer) and redispatches connects past their deadline.
func (l *eloop) timers(now time.Time) {
	for c := range l.connecting {
		if now.After(c.deadline) {
			l.redispatch(c)
		}
	}
	if now.Before(l.nextSweep) {
		return
	}
	l.nextSweep = now.Add(time.Duration(l.s.cfg.TimeoutClient))
	for c := range l.conns {
		if c.connecting {
			continue
		}
		if c.marked && c.moves == c.seen {
			l.s.timedOut.Add(1)
			l.close(c, false)
			continue
		}
		c.seen, c.marked = c.moves, true
	}
}

// accept takes up to acceptBatch connections from the listener.
func (l *eloop) accept() error {
	for range acceptBatch {
		fd, sa, err := unix.Accept4(l.s.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch {
		case err == unix.EAGAIN:
			return nil
		case err == unix.EINTR || err == unix.ECONNABORTED:
			continue
		case err != nil:
			return fmt.Errorf("accept on %s: %w", l.s.cfg.Listen, err)
		}
		l.s.total.Add(1)
		if !l.s.admit() {
			l.s.refused.Add(1)
			resetFd(fd)
			continue
		}
		l.open(fd, addrOf(sa).Addr())
	}
	return nil
}

func (l *eloop) token() int32 {
	l.tokens++
	if l.tokens <= 0 { // wrapped: 0 is the loop's own
		l.tokens = 1
	}
	return l.tokens
}

// register adds a connection's socket to the loop, edge-triggered.
func (l *eloop) register(c *econn, sd *side) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(sd.fd), Pad: sd.token}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, sd.fd, &ev); err != nil {
		return fmt.Errorf("register socket: %w", err)
	}
	for sd.fd >= len(l.byFd) {
		l.byFd = append(l.byFd, nil)
	}
	l.byFd[sd.fd] = c
	return nil
}

// forget closes a connection's socket (which takes it out of the epoll set).
func (l *eloop) forget(sd *side, rst bool) {
	if sd.fd < 0 {
		return
	}
	if sd.fd < len(l.byFd) {
		l.byFd[sd.fd] = nil
	}
	if rst {
		resetFd(sd.fd)
	} else {
		unix.Close(sd.fd)
	}
	*sd = side{fd: -1}
}

// open takes in an accepted client and starts the connect to a backend.
func (l *eloop) open(fd int, src netip.Addr) {
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) // as Go's net does
	c := &econn{cli: side{fd: fd, token: l.token()}, srv: side{fd: -1}, src: src}
	c.up = flow{from: &c.cli, to: &c.srv}
	c.down = flow{from: &c.srv, to: &c.cli}
	l.conns[c] = struct{}{}
	if err := l.register(c, &c.cli); err != nil {
		l.close(c, true)
		return
	}
	l.dial(c)
}

// dial starts a non-blocking connect to the backend the balancer picks, skipping those that
// failed for this client; with none left the client is reset at once.
func (l *eloop) dial(c *econn) {
	for {
		b := l.s.picker.pick(c.src, c.tried)
		if b == nil {
			l.s.noBackend.Add(1)
			l.close(c, true)
			return
		}
		err := l.connect(c, b)
		if err == nil {
			return
		}
		b.failed.Add(1)
		if c.tried == nil {
			c.tried = map[*backend]bool{}
		}
		c.tried[b] = true
	}
}

// connect opens the server socket and starts connecting it to b; epoll reports the outcome.
//
// Equivalent to: socket(O_NONBLOCK); connect(ADDR) = EINPROGRESS
func (l *eloop) connect(c *econn, b *backend) error {
	family, sa := sockaddr(b.Addr)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.Connect(fd, sa); err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		return fmt.Errorf("connect to %s: %w", b.Addr, err)
	}
	c.srv = side{fd: fd, token: l.token()}
	if err := l.register(c, &c.srv); err != nil {
		unix.Close(fd)
		c.srv = side{fd: -1}
		return err
	}
	// Whether connect finished at once or not, the first event (EPOLLOUT) says so.
	c.b, c.connecting = b, true
	c.deadline = time.Now().Add(time.Duration(l.s.cfg.TimeoutConnect))
	l.connecting[c] = struct{}{}
	return nil
}

// redispatch gives up the connect in progress, counted as failed, and tries another backend.
func (l *eloop) redispatch(c *econn) {
	c.b.failed.Add(1)
	if c.tried == nil {
		c.tried = map[*backend]bool{}
	}
	c.tried[c.b] = true
	l.forget(&c.srv, false)
	c.b, c.connecting = nil, false
	delete(l.connecting, c)
	l.dial(c)
}

// connected ends a connect: on success the connection is counted on its backend and bytes
// start to move; on failure another backend is tried.
func (l *eloop) connected(c *econn) {
	if soerr, err := unix.GetsockoptInt(c.srv.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || soerr != 0 {
		l.redispatch(c)
		return
	}
	c.connecting = false
	delete(l.connecting, c)
	c.b.active.Add(1)
	c.b.total.Add(1)
	c.up.count, c.down.count = &c.b.bytesIn, &c.b.bytesOut
	l.progress(c)
}

// event records what epoll says about a socket and moves what can move.
func (l *eloop) event(ev unix.EpollEvent) {
	fd := int(ev.Fd)
	if fd >= len(l.byFd) {
		return
	}
	c := l.byFd[fd]
	if c == nil {
		return
	}
	var sd *side
	switch {
	case c.cli.fd == fd && c.cli.token == ev.Pad:
		sd = &c.cli
	case c.srv.fd == fd && c.srv.token == ev.Pad:
		sd = &c.srv
	default: // an event of a descriptor closed earlier in this batch
		return
	}
	if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		sd.readable = true
	}
	if ev.Events&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		sd.writable = true
	}
	if c.connecting {
		if sd == &c.srv && ev.Events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			l.connected(c)
		}
		return
	}
	l.progress(c)
}

// progress moves both directions as far as the sockets allow; an error in either closes the
// connection, as does the end of both.
func (l *eloop) progress(c *econn) {
	if c.closed || c.connecting {
		return
	}
	moreUp, err := l.move(c, &c.up)
	if err != nil {
		l.close(c, false)
		return
	}
	moreDown, err := l.move(c, &c.down)
	if err != nil {
		l.close(c, false)
		return
	}
	if c.up.done && c.down.done {
		l.close(c, false)
		return
	}
	if (moreUp || moreDown) && !c.queued {
		c.queued = true
		l.again = append(l.again, c)
	}
}

// moveBudget bounds the reads one direction makes per turn, so a connection that always has
// bytes cannot keep the loop from the others; it is queued to go on after the next
// epoll_wait (edge-triggered: no event would come back for bytes already there).
const moveBudget = 8

// move moves bytes of one direction until a socket would block, EOF is passed on, an error,
// or the budget is spent with bytes maybe left (more).
func (l *eloop) move(c *econn, f *flow) (more bool, err error) {
	reads := 0
	for {
		switch {
		case len(f.pending) > 0:
			if !f.to.writable {
				return false, nil
			}
			n, err := unix.Write(f.to.fd, f.pending)
			if err == unix.EAGAIN {
				f.to.writable = false
				return false, nil
			}
			if err != nil && err != unix.EINTR {
				return false, err
			}
			if n > 0 {
				f.pending = f.pending[n:]
				f.count.Add(uint64(n))
				c.moves++
			}
		case f.inPipe > 0:
			if !f.to.writable {
				return false, nil
			}
			n, err := spliceFd(f.p.r, f.to.fd, f.inPipe)
			if err == unix.EAGAIN {
				f.to.writable = false
				return false, nil
			}
			if err != nil {
				return false, err
			}
			f.inPipe -= n
			f.count.Add(uint64(n))
			c.moves++
		case f.eof:
			if !f.done {
				f.done = true
				l.putPipe(f)
				_ = unix.Shutdown(f.to.fd, unix.SHUT_WR)
			}
			return false, nil
		case !f.from.readable:
			return false, nil
		case reads == moveBudget:
			return true, nil
		case !f.spliced:
			reads++
			if err := l.copyOnce(c, f); err != nil {
				return false, err
			}
		default:
			reads++
			if f.p == nil {
				p, err := newPipe(l.s.cfg.PipeSize)
				if n := len(l.pipes); n > 0 {
					p, err = l.pipes[n-1], nil
					l.pipes = l.pipes[:n-1]
				}
				if err != nil {
					return false, err
				}
				f.p = p
			}
			n, err := spliceFd(f.from.fd, f.p.w, spliceChunk)
			switch {
			case err == unix.EAGAIN:
				f.from.readable = false
				return false, nil
			case err != nil:
				return false, err
			case n == 0:
				f.eof = true
			default:
				f.inPipe = n
				c.moves++
			}
		}
	}
}

// copyOnce reads once into the loop's buffer and writes what it read; what the destination
// does not take is kept in the flow. A read that fills the buffer switches the flow to splice.
func (l *eloop) copyOnce(c *econn, f *flow) error {
	n, err := unix.Read(f.from.fd, l.buf)
	switch {
	case err == unix.EAGAIN:
		f.from.readable = false
		return nil
	case err == unix.EINTR:
		return nil
	case err != nil:
		return err
	case n == 0:
		f.eof = true
		return nil
	}
	c.moves++
	f.spliced = n == len(l.buf)
	data := l.buf[:n]
	for len(data) > 0 && f.to.writable {
		m, werr := unix.Write(f.to.fd, data)
		if werr == unix.EAGAIN {
			f.to.writable = false
			break
		}
		if werr != nil && werr != unix.EINTR {
			return werr
		}
		if m > 0 {
			data = data[m:]
			f.count.Add(uint64(m))
		}
	}
	if len(data) > 0 {
		f.pending = append([]byte(nil), data...)
	}
	return nil
}

// putPipe returns a flow's pipe: kept when empty and the loop holds few, else closed.
func (l *eloop) putPipe(f *flow) {
	if f.p == nil {
		return
	}
	if f.inPipe == 0 && len(l.pipes) < maxIdlePipes {
		l.pipes = append(l.pipes, f.p)
	} else {
		unix.Close(f.p.r)
		unix.Close(f.p.w)
	}
	f.p, f.inPipe = nil, 0
}

// close ends a connection: both sockets closed (the client's with an RST if rst), pipes
// returned, counters updated.
func (l *eloop) close(c *econn, rst bool) {
	if c.closed {
		return
	}
	c.closed = true
	l.forget(&c.cli, rst)
	l.forget(&c.srv, false)
	l.putPipe(&c.up)
	l.putPipe(&c.down)
	if c.b != nil && !c.connecting {
		c.b.active.Add(-1)
	}
	delete(l.conns, c)
	delete(l.connecting, c)
	l.s.active.Add(-1)
}

// closeAll closes every connection of the loop and its idle pipes.
func (l *eloop) closeAll() {
	for c := range l.conns {
		l.close(c, false)
	}
	for _, p := range l.pipes {
		unix.Close(p.r)
		unix.Close(p.w)
	}
	l.pipes = nil
}
