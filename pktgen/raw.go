package pktgen

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// rawRunner runs sfc_gen and reads the sent counter with raw system calls, which keep the
// goroutine's P (Go's processor slot) while in the kernel, and sleeps with clock_nanosleep
// the same way, woken by the kernel's timer directly. A sender under SCHED_FIFO needs this:
// through Go's ordinary system-call and sleep paths, a call that lasts beyond a sysmon tick
// may lose its P, and a time.Sleep is woken by a timer that another (normal-priority) Go
// thread fires; on a loaded host those threads wait for a CPU for milliseconds, and the
// real-time sender with them (docs/packet-rate.md: a FIFO sender at load 8 still skipped
// 3-12 % of 5 kpps and 88 % of 670 kpps). The cost: while a call runs (at most maxCall
// frames, about 3 ms) the process's garbage collector cannot stop this goroutine.
type rawRunner struct {
	run     progRunAttr
	lookup  mapLookupAttr
	md      xdpMd
	key     uint32
	values  []uint64
	frame   []byte
	ncpu    int
	progFD  int
	countFD int
}

// progRunAttr is union bpf_attr for BPF_PROG_TEST_RUN.
type progRunAttr struct {
	progFD, retval, dataSizeIn, dataSizeOut uint32
	dataIn, dataOut                         uint64
	repeat, duration, ctxSizeIn, ctxSizeOut uint32
	ctxIn, ctxOut                           uint64
	flags, cpu, batchSize                   uint32
	_                                       uint32
}

// mapLookupAttr is union bpf_attr for BPF_MAP_LOOKUP_ELEM.
type mapLookupAttr struct {
	mapFD uint32
	_     uint32
	key   uint64
	value uint64
	flags uint64
}

func newRawRunner(g *Generator) (*rawRunner, error) {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("count possible cpus: %w", err)
	}
	r := &rawRunner{frame: g.frame, ncpu: ncpu, values: make([]uint64, ncpu),
		progFD: g.o.SfcGen.FD(), countFD: g.o.Sent.FD()}
	r.md = xdpMd{DataEnd: uint32(len(g.frame)), IngressIfindex: uint32(g.ifindex)}
	return r, nil
}

// runGen runs sfc_gen n times in live-frame mode.
func (r *rawRunner) runGen(n uint32) error {
	r.run = progRunAttr{progFD: uint32(r.progFD), dataSizeIn: uint32(len(r.frame)),
		dataIn: uint64(uintptr(unsafe.Pointer(&r.frame[0]))), repeat: n,
		ctxSizeIn: uint32(unsafe.Sizeof(r.md)), ctxIn: uint64(uintptr(unsafe.Pointer(&r.md))),
		flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES, batchSize: 64}
	_, _, errno := unix.RawSyscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&r.run)), unsafe.Sizeof(r.run))
	runtime.KeepAlive(r)
	switch errno {
	case 0, unix.EINTR:
		// EINTR: a signal (Go's preemption) ended the run early; the sent counter says how
		// many went out, and the schedule sends the rest.
		return nil
	}
	return fmt.Errorf("run sfc_gen: %w", errno)
}

// sent reads the generator's sent counter, summed over the CPUs.
func (r *rawRunner) sent() (uint64, error) {
	r.lookup = mapLookupAttr{mapFD: uint32(r.countFD), key: uint64(uintptr(unsafe.Pointer(&r.key))),
		value: uint64(uintptr(unsafe.Pointer(&r.values[0])))}
	_, _, errno := unix.RawSyscall(unix.SYS_BPF, unix.BPF_MAP_LOOKUP_ELEM, uintptr(unsafe.Pointer(&r.lookup)), unsafe.Sizeof(r.lookup))
	runtime.KeepAlive(r)
	if errno != 0 {
		return 0, fmt.Errorf("read generator count: %w", errno)
	}
	var t uint64
	for _, v := range r.values {
		t += v
	}
	return t, nil
}

// rawSleep sleeps d in the kernel without giving up the P.
func rawSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	_, _, _ = unix.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
}
