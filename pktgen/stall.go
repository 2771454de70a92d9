package pktgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// StallWatch measures how long watched kernel threads (the chain's NAPI threads) wait for
// their CPU after being woken or preempted: from the sched_wakeup of a watched thread, or the
// sched_switch that took its CPU while it could run, to the sched_switch that runs it. Only waits behind another task count; a wait behind another watched thread
// (the forwarder's other NAPI thread, the chain's own work) does not. The longest such wait
// since Reset is kept with the task that ran last before the thread got its CPU, and the
// waits longer than a threshold are counted.
//
// Why: a veth's receive ring holds 256 frames. A NAPI thread that cannot run for longer than
// the ring takes to fill at the offered rate loses frames at the ring, however fast the chain
// is. On a kernel built PREEMPT_NONE, a real-time thread waits until whatever kernel code runs
// on its CPU reaches a preemption point, and other jobs' compilers held CPU 1 for up to 11 ms
// here (docs/packet-rate.md, "Why the one-forwarder NDR is not repeatable"). Such a trial's
// loss is the host's, not the chain's.
//
// The two programs are tracepoint programs written with cilium/ebpf's assembler (no C, so no
// compiler is needed); each hangs on a link owned by this process, so they go when it does.
type StallWatch struct {
	wake, worst *ebpf.Map
	progs       []*ebpf.Program
	links       []link.Link
}

// Stall is what a StallWatch saw since its last Reset.
type Stall struct {
	// Max is the longest wait of a watched thread behind another task.
	Max time.Duration
	// Thread is the watched thread that waited longest; By the task that ran last before it
	// got its CPU (its thread id, and its name when it still exists).
	Thread, By int
	ByName     string
	// Over is how many waits were longer than the threshold given to Reset.
	Over uint64
}

// worst's value: max ns, prev pid, watched tid, threshold ns, count over the threshold.
const (
	offMax, offPrev, offTid, offThreshold, offOver = 0, 8, 12, 16, 24
	worstSize                                      = 32
)

// Offsets in the tracepoints' records (/sys/kernel/tracing/events/sched/*/format): stable
// since the sched tracepoints' formats were fixed.
const (
	wakeupPid     = 24 // sched_wakeup: pid
	switchPrevPid = 24 // sched_switch: prev_pid
	switchNextPid = 56 // sched_switch: next_pid
	// sched_switch's prev_state (a long at 32) is 0 for a task switched out runnable and
	// TASK_REPORT_MAX (0x100) for one preempted; any other value is a task going to sleep.
	switchPrevState = 32
	taskReportMax   = 0x100
)

// NewStallWatch watches the threads tids (kernel thread ids). It fails when tracepoint
// programs cannot be loaded or attached here.
func NewStallWatch(tids []int) (_ *StallWatch, err error) {
	if len(tids) == 0 {
		return nil, errors.New("watch stalls: no thread given")
	}
	w := &StallWatch{}
	defer func() {
		if err != nil {
			_ = w.Close()
		}
	}()
	if w.wake, err = ebpf.NewMap(&ebpf.MapSpec{Name: "sfc_stall_wake", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: uint32(len(tids))}); err != nil {
		return nil, fmt.Errorf("create stall map: %w", err)
	}
	for _, t := range tids {
		if err := w.wake.Put(uint32(t), uint64(0)); err != nil {
			return nil, fmt.Errorf("watch thread %d: %w", t, err)
		}
	}
	if w.worst, err = ebpf.NewMap(&ebpf.MapSpec{Name: "sfc_stall_max", Type: ebpf.Array, KeySize: 4, ValueSize: worstSize, MaxEntries: 1}); err != nil {
		return nil, fmt.Errorf("create stall map: %w", err)
	}
	for _, p := range []struct {
		name string
		ins  asm.Instructions
	}{
		{"sched_wakeup", w.wakeupProg()},
		{"sched_switch", w.switchProg()},
	} {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "sfc_stall_" + strings.TrimPrefix(p.name, "sched_"), Type: ebpf.TracePoint, License: "GPL", Instructions: p.ins})
		if err != nil {
			return nil, fmt.Errorf("load the %s program: %w", p.name, err)
		}
		w.progs = append(w.progs, prog)
		if err := mountTracefs(); err != nil {
			return nil, err
		}
		l, err := link.Tracepoint("sched", p.name, prog, nil)
		if err != nil {
			return nil, fmt.Errorf("attach to tracepoint sched/%s: %w", p.name, err)
		}
		w.links = append(w.links, l)
	}
	return w, nil
}

// wakeupProg stores the wake-up time of a watched thread.
func (w *StallWatch) wakeupProg() asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, wakeupPid, asm.Word),
		asm.StoreMem(asm.RFP, -4, asm.R2, asm.Word),
		asm.LoadMapPtr(asm.R1, w.wake.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.R7, 0, asm.R0, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
}

// switchProg, when a watched thread that was woken gets its CPU, takes the wait unless the
// task it follows is itself watched, and keeps the longest.
func (w *StallWatch) switchProg() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		// A watched thread switched out still runnable (preempted) waits from now.
		asm.LoadMem(asm.R2, asm.R6, switchPrevPid, asm.Word),
		asm.StoreMem(asm.RFP, -4, asm.R2, asm.Word),
		asm.LoadMapPtr(asm.R1, w.wake.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "next"),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.LoadMem(asm.R2, asm.R6, switchPrevState, asm.DWord),
		asm.JEq.Imm(asm.R2, 0, "runnable"),
		asm.And.Imm(asm.R2, taskReportMax),
		asm.JEq.Imm(asm.R2, 0, "next"),
		asm.FnKtimeGetNs.Call().WithSymbol("runnable"),
		asm.StoreMem(asm.R7, 0, asm.R0, asm.DWord),
		asm.LoadMem(asm.R2, asm.R6, switchNextPid, asm.Word).WithSymbol("next"),
		asm.StoreMem(asm.RFP, -4, asm.R2, asm.Word),
		asm.LoadMapPtr(asm.R1, w.wake.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.LoadMem(asm.R8, asm.R7, 0, asm.DWord),
		asm.JEq.Imm(asm.R8, 0, "out"), // not woken since it last ran
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R7, 0, asm.R1, asm.DWord),
		asm.FnKtimeGetNs.Call(),
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.Sub.Reg(asm.R9, asm.R8), // the wait
		// Behind another watched thread: the chain's own work, not a stall.
		asm.LoadMem(asm.R2, asm.R6, switchPrevPid, asm.Word),
		asm.StoreMem(asm.RFP, -8, asm.R2, asm.Word),
		asm.LoadMapPtr(asm.R1, w.wake.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JNE.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, -12, asm.R1, asm.Word),
		asm.LoadMapPtr(asm.R1, w.worst.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -12),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, offThreshold, asm.DWord),
		asm.JLE.Reg(asm.R9, asm.R1, "max"),
		asm.Mov.Reg(asm.R3, asm.R0),
		asm.Add.Imm(asm.R3, offOver),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R3, asm.R1, asm.DWord),
		asm.LoadMem(asm.R1, asm.R0, offMax, asm.DWord).WithSymbol("max"),
		asm.JGE.Reg(asm.R1, asm.R9, "out"),
		asm.StoreMem(asm.R0, offMax, asm.R9, asm.DWord),
		asm.LoadMem(asm.R2, asm.R6, switchPrevPid, asm.Word),
		asm.StoreMem(asm.R0, offPrev, asm.R2, asm.Word),
		asm.LoadMem(asm.R2, asm.R6, switchNextPid, asm.Word),
		asm.StoreMem(asm.R0, offTid, asm.R2, asm.Word),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
}

// Reset forgets what was seen and counts waits longer than threshold from now on.
func (w *StallWatch) Reset(threshold time.Duration) error {
	v := make([]byte, worstSize)
	binary.NativeEndian.PutUint64(v[offThreshold:], uint64(max(threshold, 0)))
	if err := w.worst.Put(uint32(0), v); err != nil {
		return fmt.Errorf("reset stall watch: %w", err)
	}
	return nil
}

// Read says what was seen since the last Reset.
func (w *StallWatch) Read() (Stall, error) {
	v := make([]byte, worstSize)
	if err := w.worst.Lookup(uint32(0), &v); err != nil {
		return Stall{}, fmt.Errorf("read stall watch: %w", err)
	}
	s := Stall{Max: time.Duration(binary.NativeEndian.Uint64(v[offMax:])), By: int(binary.NativeEndian.Uint32(v[offPrev:])),
		Thread: int(binary.NativeEndian.Uint32(v[offTid:])), Over: binary.NativeEndian.Uint64(v[offOver:])}
	if s.Max > 0 {
		s.ByName = "pid " + strconv.Itoa(s.By)
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(s.By) + "/comm"); err == nil {
			s.ByName = strings.TrimSpace(string(b))
		}
	}
	return s, nil
}

// Close detaches and frees the programs and maps.
func (w *StallWatch) Close() error {
	var errs []error
	for _, l := range w.links {
		errs = append(errs, l.Close())
	}
	for _, p := range w.progs {
		errs = append(errs, p.Close())
	}
	for _, m := range []*ebpf.Map{w.wake, w.worst} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// tracefsDir is where tracefs is mounted on systemd hosts (sys-kernel-tracing.mount) and
// where cilium/ebpf looks first for a tracepoint's id.
const tracefsDir = "/sys/kernel/tracing"

// mountTracefs mounts tracefs at tracefsDir when neither it nor debugfs' tracing directory
// is mounted (a host booted without systemd's mounts, as this development VM is), as
// systemd does at boot. It stays mounted: cilium/ebpf settles the path once a process, so an
// unmount would break the next watch in this one, and other processes may have found it.
func mountTracefs() error {
	for _, dir := range []string{tracefsDir, "/sys/kernel/debug/tracing"} {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && (st.Type == unix.TRACEFS_MAGIC || st.Type == unix.DEBUGFS_MAGIC) {
			return nil
		}
	}
	if err := unix.Mount("tracefs", tracefsDir, "tracefs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mount tracefs on %s (the sched tracepoints' ids are read there): %w", tracefsDir, err)
	}
	return nil
}
