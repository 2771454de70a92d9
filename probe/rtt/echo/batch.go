package echo

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr: one message of sendmmsg/recvmmsg and the bytes it moved.
// Go's alignment gives it C's size on 64- and 32-bit alike (64 and 32 bytes).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// batch is a set of message buffers for one sendmmsg or recvmmsg call, allocated once so that
// the probe's loop allocates nothing per echo.
type batch struct {
	msgs []mmsghdr
	iovs []unix.Iovec
	bufs [][]byte // one payload buffer per message
	oobs [][]byte // one control buffer per message (nil when none)
}

// newBatch makes n messages of bufLen payload and oobLen control bytes each.
func newBatch(n, bufLen, oobLen int) *batch {
	b := &batch{msgs: make([]mmsghdr, n), iovs: make([]unix.Iovec, n), bufs: make([][]byte, n), oobs: make([][]byte, n)}
	data := make([]byte, n*bufLen)
	var oob []byte
	if oobLen > 0 {
		oob = make([]byte, n*oobLen)
	}
	for i := range n {
		b.bufs[i] = data[i*bufLen : (i+1)*bufLen : (i+1)*bufLen]
		b.iovs[i].Base = &b.bufs[i][0]
		b.iovs[i].SetLen(bufLen)
		b.msgs[i].hdr.Iov = &b.iovs[i]
		b.msgs[i].hdr.SetIovlen(1)
		if oobLen > 0 {
			b.oobs[i] = oob[i*oobLen : (i+1)*oobLen : (i+1)*oobLen]
		}
	}
	return b
}

// setName addresses every message to sa (an unconnected socket's destination).
func (b *batch) setName(sa unsafe.Pointer, salen uint32) {
	for i := range b.msgs {
		b.msgs[i].hdr.Name = (*byte)(sa)
		b.msgs[i].hdr.Namelen = salen
	}
}

// recv reads up to len(msgs) messages without waiting (recvmmsg with MSG_DONTWAIT, plus
// flags: MSG_ERRQUEUE for the error queue) and returns how many it read; 0 when none was
// queued.
//
// Equivalent to: recvmmsg(fd, msgs, n, MSG_DONTWAIT|flags, NULL).
func (b *batch) recv(fd int, flags int) (int, error) {
	for i := range b.msgs {
		h := &b.msgs[i].hdr
		if b.oobs[i] != nil {
			h.Control = &b.oobs[i][0]
			h.SetControllen(len(b.oobs[i]))
		}
		h.Flags = 0
		b.msgs[i].n = 0
	}
	// Never blocks (MSG_DONTWAIT): no need to tell the scheduler, as syscall.Syscall would.
	r, _, e := syscall.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.msgs[0])), uintptr(len(b.msgs)),
		uintptr(unix.MSG_DONTWAIT|flags), 0, 0)
	if e != 0 {
		if e == unix.EAGAIN || e == unix.EINTR {
			return 0, nil
		}
		return 0, e
	}
	return int(r), nil
}

// payload is message i's received bytes; oob its control data.
func (b *batch) payload(i int) []byte { return b.bufs[i][:min(int(b.msgs[i].n), len(b.bufs[i]))] }
func (b *batch) oob(i int) []byte {
	return b.oobs[i][:min(int(b.msgs[i].hdr.Controllen), len(b.oobs[i]))]
}

// send sends messages [0, n) in one call on a non-blocking socket and returns how many left;
// an error only when the first could not (unix.EAGAIN or ENOBUFS: the buffer is full).
//
// Equivalent to: sendmmsg(fd, msgs, n, 0), or sendto(fd, buf, len, 0, name, namelen) for one.
func (b *batch) send(fd int, n int) (int, error) {
	if n == 1 {
		// One echo: sendto, as ping, skips sendmmsg's per-call work and sendmsg's copy of
		// the message header and its iovec.
		h := &b.msgs[0].hdr
		if _, _, e := syscall.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(h.Iov.Base)), uintptr(h.Iov.Len), 0,
			uintptr(unsafe.Pointer(h.Name)), uintptr(h.Namelen)); e != 0 {
			return 0, e
		}
		return 1, nil
	}
	r, _, e := syscall.RawSyscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.msgs[0])), uintptr(n), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// cmsg is one control message of a received message's control data.
type cmsg struct {
	level, typ int32
	data       []byte
}

// nextCmsg splits the first control message off oob, without allocating (as
// unix.ParseSocketControlMessage does per call). ok is false at the end or on malformed data.
func nextCmsg(oob []byte) (c cmsg, rest []byte, ok bool) {
	if len(oob) < unix.SizeofCmsghdr {
		return cmsg{}, nil, false
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	l := int(h.Len)
	if l < unix.CmsgLen(0) || l > len(oob) {
		return cmsg{}, nil, false
	}
	next := min(unix.CmsgSpace(l-unix.CmsgLen(0)), len(oob))
	return cmsg{level: h.Level, typ: h.Type, data: oob[unix.CmsgLen(0):l]}, oob[next:], true
}
