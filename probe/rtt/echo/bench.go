package echo

import (
	"fmt"
	"net/netip"
	goruntime "runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Hooks for package rtt's benchmarks, which measure this package's costs on deployed labs:
// this package's own tests cannot deploy one (package deploy links runtime/vm, which links
// this package for its guest agent).

// ForceLanes, when set (by benchmarks only, before a run), overrides laneCount, so that one
// binary compares one sending thread with several at the same rate.
var ForceLanes int

// LoopCost sends count ICMP echoes to dst one after another from a locked thread (created in
// the calling thread's namespace), each followed by the read of its reply (and, with
// stamps, of its TX timestamps), and returns the thread's CPU per echo and the mean CPU of
// the sendto call alone (the thread's CPU clock read around it, so it includes about one
// clock read), which bounds what one sending thread can reach.
func LoopCost(dst netip.Addr, stamps bool, count int) (time.Duration, time.Duration, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(fd)
	if stamps {
		// The probe's flags once the driver's TX stamp came (veth stamps; see readTX).
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, tsFlags&^unix.SOF_TIMESTAMPING_TX_SCHED); err != nil {
			return 0, 0, err
		}
	}
	var per, inSend time.Duration
	done := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // not unlocked: the thread ends with the goroutine
		sa := &unix.SockaddrInet4{Addr: dst.As4()}
		msg := message(ProtoICMP, 64)
		buf, oob := make([]byte, 256), make([]byte, 512)
		var r0, r1 unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &r0)
		got := 0
		for seq := range count {
			encode(msg, ProtoICMP, 1, uint64(seq))
			var c0, c1 unix.Timespec
			_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c0)
			if err := unix.Sendto(fd, msg, 0, sa); err != nil {
				done <- err
				return
			}
			_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c1)
			inSend += time.Duration(c1.Nano() - c0.Nano())
			for try := 0; try < 1000; try++ { // the reply is there at once on a veth path
				if _, _, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_DONTWAIT); err == nil {
					got++
					break
				}
			}
			for stamps {
				if _, _, _, _, err := unix.Recvmsg(fd, buf[:1], oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT); err != nil {
					break
				}
			}
		}
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &r1)
		per = time.Duration((r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()) / int64(count))
		inSend /= time.Duration(count)
		if got < count*9/10 {
			done <- fmt.Errorf("%d replies of %d", got, count)
			return
		}
		done <- nil
	}()
	err = <-done
	return per, inSend, err
}

// WakeCost is the CPU of one timer sleep of a locked thread with no timer slack (the probe's
// sleep: clock_nanosleep), waking n times 1 ms apart.
func WakeCost(n int) time.Duration {
	var per time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		goruntime.LockOSThread()
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		m := &measurement{rawWait: goruntime.GOMAXPROCS(0) > 1}
		var r0, r1 unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &r0)
		start := time.Now()
		for i := 1; i <= n; i++ {
			for d := time.Duration(i)*time.Millisecond - time.Since(start); d > 0; d = time.Duration(i)*time.Millisecond - time.Since(start) {
				m.sleep(d)
			}
		}
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &r1)
		per = time.Duration((r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()) / int64(n))
	}()
	<-done
	return per
}
