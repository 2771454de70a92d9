package lb

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// conn is one proxied client connection and its backend connection.
type conn struct {
	client, server *net.TCPConn
	// moves counts splice calls that moved bytes, in either direction; the idle timer compares
	// it between two firings.
	moves     atomic.Uint64
	closeOnce sync.Once
	// backend is the one server connects to; sm and accel are set when accel sockmap moves
	// the bytes.
	backend *backend
	sm      *smConn
	accel   *sockmapAccel
}

// progress is what the idle timer compares between two firings.
func (c *conn) progress() uint64 {
	if c.sm != nil {
		return c.accel.progress(c.sm)
	}
	return c.moves.Load()
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		if c.sm != nil {
			c.accel.release(c.sm)
			return
		}
		c.client.Close()
		if c.server != nil {
			c.server.Close()
		}
	})
}

// handle connects a client to a backend and splices both directions until both ends closed,
// the client idled out, or drain closed it.
func (s *Server) handle(client *net.TCPConn) {
	defer s.wg.Done()
	defer s.active.Add(-1)
	src := client.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
	var tried map[*backend]bool
	var b *backend
	var server *net.TCPConn
	d := net.Dialer{Timeout: time.Duration(s.cfg.TimeoutConnect)}
	for {
		b = s.picker.pick(src, tried)
		if b == nil {
			s.noBackend.Add(1)
			reset(client)
			return
		}
		c, err := d.Dial("tcp", b.Addr.String())
		if err == nil {
			server = c.(*net.TCPConn)
			break
		}
		// Redispatch: a backend that refuses is skipped for this client (health checks take
		// it out for everyone).
		b.failed.Add(1)
		if tried == nil {
			tried = map[*backend]bool{}
		}
		tried[b] = true
	}
	cn := &conn{client: client, server: server, backend: b}
	// Handed to the kernel before anything else can see cn (drain, the idle timer, stats).
	accelerated := s.accel != nil && s.sockmap(cn)
	s.mu.Lock()
	s.conns[cn] = struct{}{}
	s.mu.Unlock()
	b.active.Add(1)
	b.total.Add(1)

	idle := time.Duration(s.cfg.TimeoutClient)
	var last uint64
	var timer *time.Timer
	timer = time.AfterFunc(idle, func() {
		if m := cn.progress(); m != last {
			last = m
			timer.Reset(idle)
			return
		}
		s.timedOut.Add(1)
		cn.close()
	})

	if accelerated {
		<-cn.sm.done
	} else {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			cn.pump(server, client, &b.bytesIn, s.cfg.PipeSize)
		}()
		cn.pump(client, server, &b.bytesOut, s.cfg.PipeSize)
		wg.Wait()
	}
	timer.Stop()
	cn.close()
	b.active.Add(-1)
	s.mu.Lock()
	delete(s.conns, cn)
	s.mu.Unlock()
}

// pipe is a kernel pipe that spliced bytes pass through; empty when it goes back to the pool.
type pipe struct{ r, w int }

// maxIdleSharedPipes bounds the empty pipes the goroutine path keeps for reuse (two descriptors
// each); more are closed.
const maxIdleSharedPipes = 256

// pipes holds empty pipes for reuse. A channel, not a sync.Pool: a pool drops what it holds at
// garbage collection without closing it, which leaked both descriptors of every dropped pipe.
var pipes = make(chan *pipe, maxIdleSharedPipes)

func getPipe(size int) (*pipe, error) {
	select {
	case p := <-pipes:
		return p, nil
	default:
		return newPipe(size)
	}
}

// newPipe opens a non-blocking pipe of size bytes (0 or less: the kernel's default).
//
// Equivalent to: pipe2(O_CLOEXEC|O_NONBLOCK); fcntl(F_SETPIPE_SZ, SIZE)
func newPipe(size int) (*pipe, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, fmt.Errorf("open pipe: %w", err)
	}
	if size > 0 {
		_, _ = unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, size)
	}
	return &pipe{r: fds[0], w: fds[1]}, nil
}

func (p *pipe) release(empty bool) {
	if empty {
		select {
		case pipes <- p:
			return
		default:
		}
	}
	unix.Close(p.r)
	unix.Close(p.w)
}

// spliceChunk is the most one splice call asks for; the pipe's size bounds what it moves.
const spliceChunk = 1 << 20

// spliceFd moves up to n bytes from fd in to fd out, retrying on EINTR.
//
// Equivalent to: splice(in, NULL, out, NULL, n, SPLICE_F_MOVE|SPLICE_F_NONBLOCK)
func spliceFd(in, out, n int) (int, error) {
	for {
		m, err := unix.Splice(in, nil, out, nil, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		if err != unix.EINTR {
			return int(m), err
		}
	}
}

// copyBuf is the buffer of a direction's copy phase: exchanges that fit it (a request, its
// answer) go through read(2)/write(2); the first read that fills it switches the direction
// to splice(2), as a bulk transfer has begun (HAProxy's splice-auto heuristic). Short
// connections then never create pipes, and the few bytes they copy cost less than two
// splice calls and a pipe would.
const copyBuf = 16 << 10

var bufs = sync.Pool{New: func() any { b := make([]byte, copyBuf); return &b }}

// pump moves bytes from src to dst until src reaches EOF (then dst's write side is shut, so
// half-closes pass through) or an error: copied while exchanges are small, spliced — socket
// to pipe, pipe to socket, all in the kernel — once a read fills the copy buffer.
func (c *conn) pump(dst, src *net.TCPConn, count *atomic.Uint64, pipeSize int) {
	bp := bufs.Get().(*[]byte)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c.moves.Add(1)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				bufs.Put(bp)
				c.close()
				return
			}
			count.Add(uint64(n))
		}
		if err != nil {
			bufs.Put(bp)
			if errors.Is(err, io.EOF) {
				_ = dst.CloseWrite()
			} else {
				c.close()
			}
			return
		}
		if n == len(buf) {
			break
		}
	}
	bufs.Put(bp)
	c.splice(dst, src, count, pipeSize)
}

// splice moves bytes from src to dst through a pipe, never through user space, until EOF on
// src or an error.
func (c *conn) splice(dst, src *net.TCPConn, count *atomic.Uint64, pipeSize int) {
	p, err := getPipe(pipeSize)
	if err != nil {
		c.close()
		return
	}
	empty := false
	defer func() { p.release(empty) }()
	srcRC, err := src.SyscallConn()
	if err != nil {
		return
	}
	dstRC, err := dst.SyscallConn()
	if err != nil {
		return
	}
	for {
		var n int
		var serr error
		err := srcRC.Read(func(fd uintptr) bool {
			n, serr = spliceFd(int(fd), p.w, spliceChunk)
			return !errors.Is(serr, syscall.EAGAIN)
		})
		if err != nil || serr != nil {
			empty = true // nothing was moved into the pipe by the failed call
			c.close()
			return
		}
		if n == 0 {
			empty = true
			_ = dst.CloseWrite()
			return
		}
		c.moves.Add(1)
		for n > 0 {
			var m int
			var werr error
			err := dstRC.Write(func(fd uintptr) bool {
				m, werr = spliceFd(p.r, int(fd), n)
				return !errors.Is(werr, syscall.EAGAIN)
			})
			if err != nil || werr != nil {
				c.close()
				return
			}
			n -= m
			count.Add(uint64(m))
		}
		c.moves.Add(1)
	}
}
