package lb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// ErrNoSockmap is returned when accel sockmap cannot be used here (no BPF, no privilege).
var ErrNoSockmap = errors.New("sockmap acceleration unavailable")

// sockmapSndbuf is the send buffer of an accelerated socket (see attach).
const sockmapSndbuf = 8 << 20

// sockmapAccel moves the bytes of accelerated connections in the kernel: the verdict program of
// bpf/sockmap.c redirects each skb arriving on one socket of a connection to the egress of
// the other, so user space makes no call per chunk. User space only notices ends: a watcher
// goroutine waits on an epoll set asking for EPOLLRDHUP alone (no EPOLLIN, so the wakeups of
// arriving data never reach it), and when one side has sent FIN and all it sent has been
// handed to the other socket, shuts the other socket's write side, as the splice path does.
type sockmapAccel struct {
	objs sockmapObjects
	epfd int
	wake int // eventfd that stops the watcher

	mu   sync.Mutex
	byFd map[int32]*smConn
	// pending are connections with a side at EOF whose bytes are not all with the peer yet;
	// only the watcher touches it.
	pending map[*smConn]struct{}
	stopped chan struct{}
}

// smConn is the accelerated state of one connection: side 0 is the client socket, 1 the
// backend's, each a descriptor of our own (the net.TCPConn it came from is closed, so Go's
// netpoller no longer watches it).
type smConn struct {
	c    *conn
	fds  [2]int
	keys [2]sockmapSockKey
	// eof: side i sent FIN; shut: all side i sent went out through the other socket, whose
	// write side is shut.
	eof, shut [2]bool
	mu        sync.Mutex // held while using fds; closed under it
	closed    bool
	done      chan struct{}
	counted   [2]uint64 // final byte counts, read as the connection closes
}

// newSockmapAccel loads and attaches the verdict program, sized for maxConn connections, and
// starts the watcher.
func newSockmapAccel(maxConn int) (*sockmapAccel, error) {
	spec, err := loadSockmap()
	if err != nil {
		return nil, fmt.Errorf("load sockmap program: %w", err)
	}
	for _, m := range spec.Maps {
		m.MaxEntries = uint32(2 * maxConn)
	}
	a := &sockmapAccel{byFd: map[int32]*smConn{}, pending: map[*smConn]struct{}{}, epfd: -1, wake: -1,
		stopped: make(chan struct{})}
	if err := spec.LoadAndAssign(&a.objs, nil); err != nil {
		return nil, fmt.Errorf("%w: load sockmap program: %w", ErrNoSockmap, err)
	}
	err = link.RawAttachProgram(link.RawAttachProgramOptions{Target: a.objs.Socks.FD(),
		Program: a.objs.Verdict, Attach: ebpf.AttachSkSKBStreamVerdict})
	if err != nil {
		a.objs.Close()
		return nil, fmt.Errorf("%w: attach stream verdict to sockmap: %w", ErrNoSockmap, err)
	}
	if a.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		a.objs.Close()
		return nil, fmt.Errorf("create epoll: %w", err)
	}
	if a.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		unix.Close(a.epfd)
		a.objs.Close()
		return nil, fmt.Errorf("create eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(a.wake)}
	if err := unix.EpollCtl(a.epfd, unix.EPOLL_CTL_ADD, a.wake, &ev); err != nil {
		unix.Close(a.wake)
		unix.Close(a.epfd)
		a.objs.Close()
		return nil, fmt.Errorf("watch eventfd: %w", err)
	}
	go a.watch()
	return a, nil
}

// close stops the watcher and releases the program and maps (closing the maps detaches it).
// Connections must be closed first.
func (a *sockmapAccel) close() {
	_, _ = unix.Write(a.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	<-a.stopped
	unix.Close(a.wake)
	unix.Close(a.epfd)
	a.objs.Close()
}

// keyOf is the key the verdict program computes for the socket fd: its own 4-tuple.
func keyOf(fd int) (sockmapSockKey, error) {
	var k sockmapSockKey
	la, err := unix.Getsockname(fd)
	if err != nil {
		return k, fmt.Errorf("read socket address: %w", err)
	}
	ra, err := unix.Getpeername(fd)
	if err != nil {
		return k, fmt.Errorf("read peer address: %w", err)
	}
	fill := func(a unix.Sockaddr, addr *[4]uint32, port *uint32) {
		switch a := a.(type) {
		case *unix.SockaddrInet4:
			k.Family = unix.AF_INET
			addr[0] = binary.NativeEndian.Uint32(a.Addr[:])
			*port = uint32(a.Port)
		case *unix.SockaddrInet6:
			k.Family = unix.AF_INET6
			for i := range addr {
				addr[i] = binary.NativeEndian.Uint32(a.Addr[4*i:])
			}
			*port = uint32(a.Port)
		}
	}
	fill(la, &k.Laddr, &k.Lport)
	fill(ra, &k.Raddr, &k.Rport)
	return k, nil
}

// dupFd takes a descriptor of c's socket of our own.
func dupFd(c *net.TCPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd := -1
	var derr error
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	return nfd, derr
}

// attach hands cn's two sockets to the verdict program (see bpf/sockmap.c for the order) and
// to the watcher, and closes cn's net.TCPConns. On an error nothing is left in the maps and
// cn still works as before.
func (a *sockmapAccel) attach(cn *conn) (err error) {
	sm := &smConn{c: cn, fds: [2]int{-1, -1}, done: make(chan struct{})}
	released := false
	defer func() {
		if err != nil && !released {
			a.unmap(sm)
			for _, fd := range sm.fds {
				if fd >= 0 {
					unix.Close(fd)
				}
			}
		}
	}()
	for i, c := range []*net.TCPConn{cn.client, cn.server} {
		if sm.fds[i], err = dupFd(c); err != nil {
			return fmt.Errorf("take socket: %w", err)
		}
		if sm.keys[i], err = keyOf(sm.fds[i]); err != nil {
			return err
		}
	}
	var zero uint64
	for i := range 2 {
		if err := a.objs.Bytes.Update(&sm.keys[i], &zero, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("add byte counter: %w", err)
		}
	}
	for i := range 2 {
		fd := uint32(sm.fds[1-i])
		if err := a.objs.Peers.Update(&sm.keys[i], &fd, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("add socket to peers: %w", err)
		}
	}
	for i := range 2 {
		fd := uint32(sm.fds[i])
		if err := a.objs.Socks.Update(&sm.keys[i], &fd, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("add socket to socks: %w", err)
		}
	}
	// Bytes queued before the verdict was attached wait for the next arrival; setting the
	// receive low-water mark runs the socket's data-ready callback (tcp_set_rcvlowat), which
	// now is the verdict's.
	// When the peer's send buffer is full the kernel retries the redirect a jiffy later
	// (sk_psock_backlog), and the write-space wakeup does not bring that retry forward: with
	// the autotuned buffer a single stream through the 2-VNF chain moved 4.5-5.2 Gbit/s,
	// with 8 MiB 8-10 (docs/sfclab-lb.md). Best effort: without CAP_NET_ADMIN the kernel's
	// autotuning stays.
	for _, fd := range sm.fds {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sockmapSndbuf)
	}
	for _, fd := range sm.fds {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, 1); err != nil {
			return fmt.Errorf("kick socket: %w", err)
		}
	}
	// Set before the watcher can see sm (a.mu orders the two); the watcher itself only ever
	// touches sm, never cn.
	cn.sm = sm
	a.mu.Lock()
	for _, fd := range sm.fds {
		a.byFd[int32(fd)] = sm
	}
	a.mu.Unlock()
	for _, fd := range sm.fds {
		ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(fd)}
		if err := unix.EpollCtl(a.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			a.release(sm) // out of the watcher and the maps, our descriptors closed
			released = true
			cn.sm = nil
			return fmt.Errorf("watch socket: %w", err)
		}
	}
	cn.client.Close()
	cn.server.Close()
	return nil
}

// unmap takes sm's sockets and counters out of the maps (a socket also leaves them when
// closed; the counters do not).
func (a *sockmapAccel) unmap(sm *smConn) {
	for i := range 2 {
		_ = a.objs.Socks.Delete(&sm.keys[i])
	}
	for i := range 2 {
		_ = a.objs.Peers.Delete(&sm.keys[i])
		_ = a.objs.Bytes.Delete(&sm.keys[i])
	}
}

// bytes is what side i of sm received and redirected so far.
func (a *sockmapAccel) bytes(sm *smConn, i int) uint64 {
	var n uint64
	if err := a.objs.Bytes.Lookup(&sm.keys[i], &n); err != nil {
		return sm.counted[i]
	}
	return n
}

// release closes sm: out of the watcher and the maps, its counters into the backend's, its
// sockets closed. Idempotent; cn.close and the watcher call it.
func (a *sockmapAccel) release(sm *smConn) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.closed {
		return
	}
	for i := range 2 {
		sm.counted[i] = a.bytes(sm, i)
	}
	if b := sm.c.backend; b != nil {
		b.bytesIn.Add(sm.counted[0])
		b.bytesOut.Add(sm.counted[1])
	}
	a.mu.Lock()
	for _, fd := range sm.fds {
		delete(a.byFd, int32(fd))
	}
	a.mu.Unlock()
	for _, fd := range sm.fds {
		_ = unix.EpollCtl(a.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
	a.unmap(sm)
	for _, fd := range sm.fds {
		unix.Close(fd)
	}
	sm.closed = true
	close(sm.done)
}

// flushed tells whether all side i received (it sent FIN) went out through the other socket:
// the verdict counted every byte the socket received (TCP_INFO bytes_received, which counts
// the FIN as one), and the other socket has taken them all into its send queue (bytes sent
// once, plus not yet sent).
func (a *sockmapAccel) flushed(sm *smConn, i int) bool {
	src, err := unix.GetsockoptTCPInfo(sm.fds[i], unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return true // nothing more will come from it
	}
	n := a.bytes(sm, i)
	if src.Bytes_received > n+1 {
		return false
	}
	dst, err := unix.GetsockoptTCPInfo(sm.fds[1-i], unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return true
	}
	return dst.Bytes_sent-dst.Bytes_retrans+uint64(dst.Notsent_bytes) >= n
}

// watch is the watcher: it notes the sides that sent FIN, shuts the other socket's write
// side once their bytes are through (checking every millisecond while any wait), and closes
// a connection when both sides are through or a socket failed.
func (a *sockmapAccel) watch() {
	runtime.LockOSThread()
	defer close(a.stopped)
	events := make([]unix.EpollEvent, 128)
	for {
		timeout := -1
		if len(a.pending) > 0 {
			timeout = 1
		}
		n, err := unix.EpollWait(a.epfd, events, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		for _, ev := range events[:max(n, 0)] {
			if ev.Fd == int32(a.wake) {
				return
			}
			a.mu.Lock()
			sm := a.byFd[ev.Fd]
			a.mu.Unlock()
			if sm == nil {
				continue
			}
			i := 0
			if int32(sm.fds[1]) == ev.Fd {
				i = 1
			}
			// The event may be stale: its socket closed meanwhile and the descriptor number
			// taken by a new connection. Ask the socket now.
			pfd := []unix.PollFd{{Fd: ev.Fd, Events: unix.POLLRDHUP}}
			if n, err := unix.Poll(pfd, 0); err != nil || n == 0 {
				continue
			}
			if pfd[0].Revents&unix.POLLERR != 0 {
				a.release(sm) // reset or failure: as the splice path, close both
				continue
			}
			if pfd[0].Revents&(unix.POLLRDHUP|unix.POLLHUP) != 0 {
				sm.eof[i] = true
				a.pending[sm] = struct{}{}
			}
		}
		for sm := range a.pending {
			if a.advance(sm) {
				delete(a.pending, sm)
			}
		}
	}
}

// advance shuts write sides whose peer's bytes are through; true when sm waits for nothing
// more (both through and closed, or closed meanwhile, or the other side still sending).
func (a *sockmapAccel) advance(sm *smConn) bool {
	sm.mu.Lock()
	if sm.closed {
		sm.mu.Unlock()
		return true
	}
	waiting := false
	for i := range 2 {
		if !sm.eof[i] || sm.shut[i] {
			continue
		}
		if !a.flushed(sm, i) {
			waiting = true
			continue
		}
		_ = unix.Shutdown(sm.fds[1-i], unix.SHUT_WR)
		sm.shut[i] = true
	}
	both := sm.shut[0] && sm.shut[1]
	sm.mu.Unlock()
	if both {
		a.release(sm)
		return true
	}
	return !waiting
}

// progress is the bytes both sides of sm moved so far (for the idle timer).
func (a *sockmapAccel) progress(sm *smConn) uint64 { return a.bytes(sm, 0) + a.bytes(sm, 1) }

// liveBytes adds the bytes of open accelerated connections to a backend's counters.
func (a *sockmapAccel) liveBytes(sm *smConn) (in, out uint64) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.closed {
		return 0, 0 // already in the backend's counters
	}
	return a.bytes(sm, 0), a.bytes(sm, 1)
}
