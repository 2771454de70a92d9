// Package pktgen is a UDP packet generator and its far-end programs in XDP: the generator
// runs an XDP program in the kernel's live-frame mode (BPF_PROG_RUN with
// BPF_F_TEST_XDP_LIVE_FRAMES), which transmits one frame per repetition out of the sender's
// interface without a socket, a system call per frame or an skb; a counter program on the
// receiver's interface counts the frames per trial before any socket could drop them; a
// reflector program sends them back with addresses swapped, and an echo program at the sender
// hands the round-trip time of every timestamped frame to user space.
//
// Every program is attached through a BPF link owned by this process and never pinned: when
// the process ends, however it ends (kill -9 included), the kernel detaches and frees them.
// Their names start with "sfc_" (bpftool prog show | grep sfc_).
package pktgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Header sizes: 14 Ethernet + 20 IPv4 + 8 UDP; frame sizes count the 4-byte FCS as RFC 2544
// does, which a veth never carries.
const (
	headers = 14 + 20 + 8
	fcs     = 4
	// PayloadLen is the generator's payload: trial id, sequence number, send time.
	PayloadLen = 16
	// MinFrame is the smallest frame (with FCS) that holds the payload: 64 bytes.
	MinFrame = 64
	// MaxFrame is the largest frame (with FCS) the generator sends: a page holds it.
	MaxFrame = 1518
	maxSizes = 16
)

// Flow is the addresses of the generator's frames.
type Flow struct {
	SrcMAC, DstMAC   net.HardwareAddr
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

// ErrUnsupported wraps the reasons this kernel or interface cannot run the generator (no
// live-frame mode, no XDP on the driver, locked-memory limits): callers fall back to another
// method and report the reason.
var ErrUnsupported = errors.New("xdp live-frame generator unsupported")

// ErrNoNeighbour is returned by FlowFrom while the next hop's MAC is not resolved yet.
var ErrNoNeighbour = errors.New("no neighbour entry for the next hop")

// Frame builds the template frame of size bytes (with FCS) for a flow.
func Frame(f Flow, size int) ([]byte, error) {
	if !f.Src.Is4() || !f.Dst.Is4() || len(f.SrcMAC) != 6 || len(f.DstMAC) != 6 {
		return nil, fmt.Errorf("build frame: want IPv4 addresses and Ethernet MACs, got %v %v %v %v", f.Src, f.Dst, f.SrcMAC, f.DstMAC)
	}
	if size < MinFrame || size > MaxFrame {
		return nil, fmt.Errorf("build frame: size %d: want %d to %d bytes", size, MinFrame, MaxFrame)
	}
	b := make([]byte, size-fcs)
	copy(b[0:6], f.DstMAC)
	copy(b[6:12], f.SrcMAC)
	binary.BigEndian.PutUint16(b[12:14], unix.ETH_P_IP)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:4], uint16(len(b)-14))
	ip[6] = 0x40 // don't fragment
	ip[8] = 64
	ip[9] = unix.IPPROTO_UDP
	s, d := f.Src.As4(), f.Dst.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(ip[10:12], ipChecksum(ip))
	udp := b[34:42]
	binary.BigEndian.PutUint16(udp[0:2], f.SrcPort)
	binary.BigEndian.PutUint16(udp[2:4], f.DstPort)
	binary.BigEndian.PutUint16(udp[4:6], uint16(len(b)-34))
	return b, nil
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// xdpMd is struct xdp_md, the context BPF_PROG_RUN takes for an XDP program.
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

func load() (*pktgenObjects, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("%w: raise the locked-memory limit: %v", ErrUnsupported, err)
	}
	var o pktgenObjects
	if err := loadPktgenObjects(&o, nil); err != nil {
		return nil, fmt.Errorf("%w: load programs: %v", ErrUnsupported, err)
	}
	return &o, nil
}

func setConfig(o *pktgenObjects, c pktgenConfig) error {
	if err := o.Cfg.Put(uint32(0), &c); err != nil {
		return fmt.Errorf("configure xdp programs: %w", err)
	}
	return nil
}

// Generator sends UDP frames out of one interface with the sfc_gen program in live-frame
// mode. Make it, run it and close it in the sender's network namespace (ifindex is resolved
// there).
type Generator struct {
	o        *pktgenObjects
	l, keep  link.Link
	ifindex  int
	frame    []byte
	cfg      pktgenConfig
	echoRead *echoReader
	// MaxBurst and MaxLag bound what a paced Send does when its sender was held off and is
	// behind its schedule (see schedule). MaxBurst, when above 0, bounds the frames of one
	// call, but never below 200 µs of the rate's frames, so a high rate is not limited. MaxLag, when above 0, bounds how far behind the schedule the sender catches up
	// (MaxLag of frames, at least MaxBurst of them): older owed frames are skipped, not sent,
	// and counted in LastSkipped. Both 0: everything due is sent at once, up to 16384 frames
	// per call. LastMaxBurst is the most one call of the last Send sent.
	MaxBurst     int
	MaxLag       time.Duration
	LastMaxBurst uint64
	LastSkipped  uint64
	// LastRetries is how many calls of the last Send the kernel refused with ENOSPC.
	LastRetries uint64
	// RealTime, when above 0, runs the sending thread under SCHED_FIFO at that priority for
	// the length of each Send (and back to its old policy when Send returns, whichever way):
	// a sender at normal priority on a shared CPU is held off for milliseconds and falls
	// behind its schedule (docs/packet-rate.md). While it paces, the thread spins between
	// calls, so for the Send's duration it takes its CPU from every task of normal priority,
	// except for the share the kernel reserves for them (sched_rt_runtime_us; on kernels
	// with the fair server, 50 ms per second). LastRealTime says whether the last Send ran
	// so, or why not (the Send then ran at normal priority).
	RealTime     int
	LastRealTime error
	// CallPeriod, when above 50 µs, makes a paced call carry the frames of that period (at
	// most callFrames of them, never fewer than 50 µs of frames) instead of 50 µs of frames:
	// fewer calls per second. Every call is one BPF_PROG_RUN with a page pool of its own,
	// registered in the kernel's table of XDP memory allocators and removed from it by a
	// walk of the whole table; when the frames are still in flight on another CPU when the
	// call returns (the ndr probe's placement), the pool lingers for at least a second
	// (page_pool_release_retry). At 20,000 calls per second the table grew to about 10,000
	// pools, a kernel worker on the sender's CPU walked it without pause and every call
	// waited for that walk: the sender skipped 70-90 % of its frames at any rate
	// (docs/packet-rate.md, perf).
	CallPeriod time.Duration
	// raw, while a real-time Send runs, makes its calls and sleeps keep the P (rawRunner).
	raw *rawRunner
}

// ErrNoRealTime is LastRealTime when RealTime is 0.
var ErrNoRealTime = errors.New("real-time priority not asked for")

// NewGenerator loads the programs, attaches sfc_echo to the interface (live-frame XDP_TX needs
// a program there; it takes a reflector's echoes) and sfc_gen to the namespace's loopback in
// generic mode, where it passes everything: live-frame mode is fast only while the program it
// runs is attached somewhere. frames is the
// cycle of frame sizes (with FCS, 64-1518, at most 16); sampleEvery stamps every n-th frame
// with its send time (0: none). It must run in the sender's namespace.
func NewGenerator(ifindex int, f Flow, frames []int, sampleEvery int) (*Generator, error) {
	if len(frames) == 0 || len(frames) > maxSizes {
		return nil, fmt.Errorf("make generator: %d frame sizes: want 1 to %d", len(frames), maxSizes)
	}
	c := pktgenConfig{Nsizes: uint32(len(frames)), Port: f.DstPort, Sport: f.SrcPort, SampleEvery: uint32(max(sampleEvery, 0))}
	top := 0
	for i, s := range frames {
		if s < MinFrame || s > MaxFrame {
			return nil, fmt.Errorf("make generator: frame size %d: want %d to %d bytes", s, MinFrame, MaxFrame)
		}
		c.Sizes[i] = uint16(s - fcs)
		top = max(top, s)
	}
	frame, err := Frame(f, top)
	if err != nil {
		return nil, err
	}
	c.Ifindex = uint32(ifindex)
	copy(c.Hdr[:], frame[:headers])
	o, err := load()
	if err != nil {
		return nil, err
	}
	g := &Generator{o: o, ifindex: ifindex, frame: frame, cfg: c}
	if err := setConfig(o, c); err != nil {
		g.Close()
		return nil, err
	}
	if g.l, err = link.AttachXDP(link.XDPOptions{Program: o.SfcEcho, Interface: ifindex}); err != nil {
		g.Close()
		return nil, fmt.Errorf("%w: attach sfc_echo to interface %d: %v", ErrUnsupported, ifindex, err)
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("make generator: %w", err)
	}
	if g.keep, err = link.AttachXDP(link.XDPOptions{Program: o.SfcGen, Interface: lo.Index, Flags: link.XDPGenericMode}); err != nil {
		g.Close()
		return nil, fmt.Errorf("%w: attach sfc_gen to lo (generic): %v", ErrUnsupported, err)
	}
	return g, nil
}

// EchoGeneric moves sfc_echo to generic (skb) mode on the generator's interface. A node
// whose replies arrive by bpf_redirect_peer (driver ebpf-redirect) needs it: such a packet
// enters the interface's receive path directly, past the veth's native XDP hook, but the
// generic hook still runs for it.
func (g *Generator) EchoGeneric() error {
	if g.l != nil {
		if err := g.l.Close(); err != nil {
			return fmt.Errorf("detach sfc_echo: %w", err)
		}
		g.l = nil
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: g.o.SfcEcho, Interface: g.ifindex, Flags: link.XDPGenericMode})
	if err != nil {
		return fmt.Errorf("%w: attach sfc_echo to interface %d (generic): %v", ErrUnsupported, g.ifindex, err)
	}
	g.l = l
	return nil
}

// Sent is how many frames the generator has sent in total.
func (g *Generator) Sent() (uint64, error) {
	var per []uint64
	if err := g.o.Sent.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("read generator count: %w", err)
	}
	var t uint64
	for _, v := range per {
		t += v
	}
	return t, nil
}

// Send sends frames stamped with the trial id at pps frames per second (0: as fast as it
// can) for d, on the calling thread, pinned to cpu when cpu >= 0. It returns how many frames
// the program sent and how long it took. The rate is kept by a schedule checked before every
// call (each call sends what came due, see schedule), so the achieved rate is off the request
// only by the last 50 µs share left unsent when the time is up, and by the frames skipped
// behind the schedule when MaxLag is set (LastSkipped).
//
// With RealTime set, the thread runs under SCHED_FIFO for the Send (see RealTime); if its
// old policy cannot be restored, the thread stays locked and Go ends it with its goroutine
// (when that goroutine ends locked), so no other goroutine inherits the priority.
func (g *Generator) Send(trial uint32, pps float64, d time.Duration, cpu int) (sent uint64, took time.Duration, err error) {
	runtime.LockOSThread()
	unlock := true
	defer func() {
		if unlock {
			runtime.UnlockOSThread()
		}
	}()
	if cpu >= 0 {
		var old, set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err == nil {
			set.Set(cpu)
			if unix.SchedSetaffinity(0, &set) == nil {
				defer unix.SchedSetaffinity(0, &old) //nolint:errcheck // best effort
			}
		}
	}
	g.LastRealTime = ErrNoRealTime
	count := g.Sent
	if g.RealTime > 0 {
		raw, rerr := newRawRunner(g)
		var restore func() error
		if rerr == nil {
			restore, rerr = realTime(g.RealTime)
		}
		g.LastRealTime = rerr
		if rerr == nil {
			g.raw, count = raw, raw.sent
			defer func() {
				g.raw = nil
				if rerr := restore(); rerr != nil {
					unlock = false
					err = errors.Join(err, rerr)
				}
			}()
		}
	}
	g.cfg.Trial = trial
	if err := setConfig(g.o, g.cfg); err != nil {
		return 0, 0, err
	}
	return g.pace(pps, d, count)
}

// pace sends at pps for d on the calling thread, counting sent frames with count.
func (g *Generator) pace(pps float64, d time.Duration, count func() (uint64, error)) (uint64, time.Duration, error) {
	sent, took, st, err := g.paced(pps, d, count)
	g.LastMaxBurst, g.LastSkipped, g.LastRetries = st.burst, st.skipped, st.retries
	return sent, took, err
}

// maxCall is the most frames one BPF_PROG_RUN sends (unpaced, or catching up uncapped).
const maxCall = 1 << 14

// callFrames bounds the frames of a call on schedule with CallPeriod: half a veth's 256-frame
// ring, which a receiving side on another CPU drains while the call fills it.
const callFrames = 128

// schedule is the pacing arithmetic of a paced Send, apart from the clock and the kernel so
// that it can be tested alone. One call costs about 15 µs more than the frames it sends, so
// on schedule a call sends chunk frames, what comes due in 50 µs (at least one): bursts stay
// short (a veth ring holds 256 frames) and calls few enough to reach a few Mpps.
//
// A sender held off the CPU (other work on a shared host) owes many frames when it runs
// again. Sent at once, they are a burst of the generator's full speed (about 5 Mpps for
// 256 frames held off 8.5 ms at 30 kpps), and a chain whose receiving side runs on another
// CPU loses part of it in its veth ring: that loss is the generator's, not the chain's at
// the requested rate (docs/packet-rate.md: 0 frames lost once capped, 1-38 of 60,000 not).
// So, with limits set, a call carries at most maxCall frames: MaxBurst, but never fewer than
// 200 µs of the rate's frames (four chunks), because near the generator's ceiling a sender
// keeps up only with calls larger than its chunk (at 4 Mpps a call of n frames takes
// 15 + 0.18 n µs, so it needs n >= 214). More calls follow back to back while frames are
// owed. And the sender catches up at most lag frames beyond its chunk: frames
// owed for longer are skipped, never sent, and counted, so the trial's offered rate (sent
// over time) is what really went out and a skipped share shows as the generator's shortfall.
type schedule struct {
	pps                 float64
	chunk, maxCall, lag uint64
}

// newSchedule is the schedule for pps (0: unpaced) with Generator.MaxBurst and MaxLag.
func newSchedule(pps float64, maxBurst int, maxLag time.Duration) schedule {
	return newSchedulePeriod(pps, maxBurst, maxLag, 0)
}

// newSchedulePeriod is newSchedule with Generator.CallPeriod: a call on schedule carries the
// frames of period, at most callFrames, never fewer than 50 µs of frames.
func newSchedulePeriod(pps float64, maxBurst int, maxLag, period time.Duration) schedule {
	if pps <= 0 {
		return schedule{chunk: maxCall, maxCall: maxCall, lag: math.MaxUint64}
	}
	s := schedule{pps: pps, chunk: max(uint64(pps*50e-6), 1), maxCall: maxCall, lag: math.MaxUint64}
	if period > 50*time.Microsecond {
		s.chunk = max(s.chunk, min(uint64(pps*period.Seconds()), callFrames))
	}
	if maxBurst > 0 {
		s.maxCall = min(max(4*s.chunk, uint64(maxBurst)), maxCall)
	}
	if maxLag > 0 {
		s.lag = max(uint64(pps*maxLag.Seconds()), uint64(max(maxBurst, 0)))
	}
	return s
}

// next says what to do elapsed after the start with done frames sent or skipped so far:
// send frames now (skipping skip of the owed ones first), or, with send 0, wait that long.
func (s schedule) next(elapsed time.Duration, done uint64) (send, skip uint64, wait time.Duration) {
	if s.pps <= 0 {
		return s.chunk, 0, 0
	}
	due := uint64(s.pps * elapsed.Seconds())
	if due < done+s.chunk {
		return 0, 0, time.Duration(float64(done+s.chunk-due) / s.pps * float64(time.Second))
	}
	owed := due - done
	if s.lag != math.MaxUint64 && owed > s.chunk+s.lag {
		skip = owed - s.chunk - s.lag
		owed -= skip
	}
	return min(owed, s.maxCall), skip, 0
}

// paceStats is what one paced Send did beside sending: its largest call, the frames it
// skipped behind its schedule, the calls the kernel refused with ENOSPC.
type paceStats struct{ burst, skipped, retries uint64 }

// paced is pace, also returning its paceStats.
func (g *Generator) paced(pps float64, d time.Duration, count func() (uint64, error)) (uint64, time.Duration, paceStats, error) {
	var st paceStats
	base, err := count()
	if err != nil {
		return 0, 0, st, err
	}
	md := xdpMd{DataEnd: uint32(len(g.frame)), IngressIfindex: uint32(g.ifindex)}
	opts := ebpf.RunOptions{Data: g.frame, Context: md, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES, BatchSize: 64}
	sch := newSchedulePeriod(pps, g.MaxBurst, g.MaxLag, g.CallPeriod)
	start := time.Now()
	end := start.Add(d)
	var sent uint64
	retries := 0
	for {
		now := time.Now()
		if !now.Before(end) {
			break
		}
		n, skip, wait := sch.next(now.Sub(start), sent+st.skipped)
		st.skipped += skip
		if n == 0 {
			if wait > 60*time.Microsecond {
				if g.raw != nil {
					rawSleep(min(wait, end.Sub(now)))
				} else {
					time.Sleep(min(wait, end.Sub(now)))
				}
			}
			continue
		}
		st.burst = max(st.burst, n)
		opts.Repeat = uint32(n)
		var err error
		if g.raw != nil {
			err = g.raw.runGen(uint32(n))
		} else {
			_, err = g.o.SfcGen.Run(&opts)
		}
		if err != nil {
			// ENOSPC: the kernel could not set up the run's page pool while pages of earlier
			// runs are still in flight in the chain; it passes within milliseconds.
			if errors.Is(err, unix.ENOSPC) && retries < 1000 {
				retries++
				st.retries++
				if g.raw != nil {
					rawSleep(time.Millisecond)
				} else {
					time.Sleep(time.Millisecond)
				}
				continue
			}
			return sent, time.Since(start), st, fmt.Errorf("run generator (%d retries): %w", retries, err)
		}
		if sent, err = count(); err != nil {
			return 0, 0, st, err
		}
		sent -= base
	}
	return sent, time.Since(start), st, nil
}

// Echoes is what came back to the sender of one trial: frames, reordered frames.
func (g *Generator) Echoes(trial uint32) (Counts, error) { return readCounts(g.o, trial) }

// Close detaches and frees the programs.
func (g *Generator) Close() error {
	var errs []error
	if g.echoRead != nil {
		errs = append(errs, g.echoRead.close())
	}
	for _, l := range []link.Link{g.l, g.keep} {
		if l != nil {
			errs = append(errs, l.Close())
		}
	}
	errs = append(errs, g.o.Close())
	return errors.Join(errs...)
}

// Counts is what a counter, reflector or echo program saw of one trial.
type Counts struct {
	Packets, Bytes, Reordered uint64
}

func readCounts(o *pktgenObjects, trial uint32) (Counts, error) {
	var per []pktgenCounts
	if err := o.Seen.Lookup(trial, &per); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return Counts{}, nil
		}
		return Counts{}, fmt.Errorf("read counts of trial %d: %w", trial, err)
	}
	var c Counts
	for _, v := range per {
		c.Packets += v.Packets
		c.Bytes += v.Bytes
		c.Reordered += v.Reordered
	}
	return c, nil
}

// Mode is what a far-end program does with the generator's frames.
type Mode int

const (
	// Count counts and drops them (the receiver of a throughput search).
	Count Mode = iota
	// Reflect counts them and sends them back with addresses and ports swapped (RTT).
	Reflect
	// Pass passes everything: on a veth of a node between the ends it gives the veth the
	// NAPI instance live-frame transmission into it needs.
	Pass
)

// Far is a counter or reflector on the receiving node's interfaces. Make and close it in
// that node's namespace.
type Far struct {
	o  *pktgenObjects
	ls []link.Link
	// Generic lists the interfaces where the driver had no native XDP and the program runs
	// in generic (skb) mode.
	Generic []int
}

// NewFar attaches sfc_count (Count) or sfc_reflect (Reflect) to each interface for frames to
// port, natively where the driver can, else in generic mode. Counts are summed over them.
func NewFar(ifindexes []int, port uint16, m Mode) (*Far, error) {
	return newFar(ifindexes, port, m, false)
}

// NewFarGeneric is NewFar in generic (skb) mode on every interface: for a node that packets
// reach by bpf_redirect_peer (driver ebpf-redirect), past a veth's native XDP hook.
func NewFarGeneric(ifindexes []int, port uint16, m Mode) (*Far, error) {
	return newFar(ifindexes, port, m, true)
}

func newFar(ifindexes []int, port uint16, m Mode, generic bool) (*Far, error) {
	if len(ifindexes) == 0 {
		return nil, errors.New("attach xdp counter: no interface")
	}
	o, err := load()
	if err != nil {
		return nil, err
	}
	f := &Far{o: o}
	if err := setConfig(o, pktgenConfig{Port: port, Nsizes: 1}); err != nil {
		f.Close()
		return nil, err
	}
	prog := o.SfcCount
	switch m {
	case Reflect:
		prog = o.SfcReflect
	case Pass:
		prog = o.SfcPass
	}
	for _, ifindex := range ifindexes {
		if generic {
			l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPGenericMode})
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%w: attach %s to interface %d (generic): %v", ErrUnsupported, prog, ifindex, err)
			}
			f.Generic = append(f.Generic, ifindex)
			f.ls = append(f.ls, l)
			continue
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex})
		if err != nil {
			var gerr error
			if l, gerr = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPGenericMode}); gerr != nil {
				f.Close()
				return nil, fmt.Errorf("%w: attach %s to interface %d: %v (generic: %v)", ErrUnsupported, prog, ifindex, err, gerr)
			}
			f.Generic = append(f.Generic, ifindex)
		}
		f.ls = append(f.ls, l)
	}
	return f, nil
}

// Counts is what the program saw of one trial.
func (f *Far) Counts(trial uint32) (Counts, error) { return readCounts(f.o, trial) }

// Close detaches and frees the program.
func (f *Far) Close() error {
	var errs []error
	for _, l := range f.ls {
		errs = append(errs, l.Close())
	}
	return errors.Join(append(errs, f.o.Close())...)
}
