package pktgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf/ringbuf"
)

// Echo is the round trip of one timestamped frame, measured by sfc_gen at the sender's
// interface: bpf_ktime_get_ns when it came back less the stamp sfc_gen wrote when it left.
type Echo struct {
	Seq uint32
	RTT time.Duration
}

type echoReader struct {
	r    *ringbuf.Reader
	mu   sync.Mutex
	got  []Echo
	done chan struct{}
	err  error
}

// StartEchoes starts collecting the RTT of every timestamped frame that comes back; Echoes
// since the last call are returned by TakeEchoes.
func (g *Generator) StartEchoes() error {
	if g.echoRead != nil {
		return nil
	}
	r, err := ringbuf.NewReader(g.o.Rtts)
	if err != nil {
		return fmt.Errorf("read echo ring: %w", err)
	}
	e := &echoReader{r: r, done: make(chan struct{})}
	g.echoRead = e
	go e.loop()
	return nil
}

func (e *echoReader) loop() {
	defer close(e.done)
	var rec ringbuf.Record
	for {
		if err := e.r.ReadInto(&rec); err != nil {
			if !errors.Is(err, os.ErrClosed) && !errors.Is(err, ringbuf.ErrClosed) {
				e.err = err
			}
			return
		}
		if len(rec.RawSample) < 16 {
			continue
		}
		ev := Echo{Seq: binary.LittleEndian.Uint32(rec.RawSample[0:4]), RTT: time.Duration(binary.LittleEndian.Uint64(rec.RawSample[8:16]))}
		e.mu.Lock()
		e.got = append(e.got, ev)
		e.mu.Unlock()
	}
}

// TakeEchoes returns the echoes collected since the last call, waiting up to wait for the
// ring to be drained.
func (g *Generator) TakeEchoes(wait time.Duration) ([]Echo, error) {
	e := g.echoRead
	if e == nil {
		return nil, errors.New("take echoes: StartEchoes was not called")
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) && e.r.AvailableBytes() > 0 {
		time.Sleep(time.Millisecond)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.got
	e.got = nil
	return out, e.err
}

func (e *echoReader) close() error {
	err := e.r.Close()
	<-e.done
	return err
}
