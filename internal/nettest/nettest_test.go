package nettest

import (
	"net"
	"testing"
	"time"
)

// TestLinkStats: the loopback's counters in this process's namespace count the traffic sent
// over it (a TCP connection made and closed between two readings).
func TestLinkStats(t *testing.T) {
	before := LinkStats(t, "", "lo")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	after := LinkStats(t, "", "lo")
	if after.TxPackets <= before.TxPackets || after.RxPackets <= before.RxPackets {
		t.Errorf("lo counters before %+v, after a TCP connection %+v: want both packet counts up", before, after)
	}
}
