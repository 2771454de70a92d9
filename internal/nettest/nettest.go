// Package nettest holds what tests of several packages do over TCP inside a deployed lab's
// nodes (deploy's, the docker runtime's): listen and dial in a node's network namespace, read
// an interface's counters there, and check the fw example's firewall.
package nettest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/vnf/firewall"
)

// DialFrom opens a TCP connection from inside node n (the socket is created in its
// namespace) and closes it.
func DialFrom(n runtime.Node, addr string, timeout time.Duration) error {
	return n.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// ListenIn accepts and closes TCP connections inside node n until the test ends.
func ListenIn(t testing.TB, n runtime.Node, addr string) {
	t.Helper()
	ServeIn(t, n, addr, func(net.Conn) {})
}

// ServeIn accepts TCP connections inside node n until the test ends, each handled by handle
// in its own goroutine and closed when handle returns.
func ServeIn(t testing.TB, n runtime.Node, addr string, handle func(net.Conn)) {
	t.Helper()
	var l net.Listener
	if err := n.Do(func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}

// LinkStats returns the counters of interface ifname in the network namespace called netns
// ("" for this process's own); failing to open the namespace or to read them fails the test.
//
// Equivalent to: ip -n NETNS -s link show IFNAME
func LinkStats(t testing.TB, netns, ifname string) netdev.LinkStats {
	t.Helper()
	ns, err := netdev.OpenNS(netns)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	s, err := ns.LinkStats(ifname)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// CheckFirewallDrops checks a deployed examples/fw.yaml (client -> fw -> server, fw's first
// rule denying TCP port 9999) on any runtime: a connection from client to the chain's target
// on port 8080 passes, one on 9999 times out, and the deny rule's counter rose. fw is the
// firewall's node, f its function.
func CheckFirewallDrops(t testing.TB, client, server, fw runtime.Node, target string, f *plan.Function) {
	t.Helper()
	ListenIn(t, server, target+":9999")
	ListenIn(t, server, target+":8080")
	if err := DialFrom(client, target+":8080", 2*time.Second); err != nil {
		t.Fatalf("allowed port 8080: %v", err)
	}
	if err := DialFrom(client, target+":9999", 500*time.Millisecond); err == nil {
		t.Fatal("denied port 9999 connected through the firewall")
	}
	counters, err := firewall.Counters(context.Background(), fw, f)
	if err != nil {
		t.Fatal(err)
	}
	var denied uint64
	for _, c := range counters {
		if c.Rule == firewall.RuleName(0) {
			denied = c.Packets
		}
	}
	if denied == 0 {
		t.Errorf("deny rule counter is 0; counters %+v", counters)
	}
}
