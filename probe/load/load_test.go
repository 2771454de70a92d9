package load_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/internal/nettest"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe/load"
)

const lab = `
name: t-load
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fw: {kind: forwarder}
chains:
  - {name: c, from: client, to: server, hops: [fw]}
`

// gone checks that no process of the load's groups is alive (zombies aside).
func gone(t *testing.T, l *load.Load) {
	t.Helper()
	for _, pgid := range l.PIDs() {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(stat)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			if len(f) >= 3 && f[2] == fmt.Sprint(pgid) && f[0] != "Z" {
				t.Errorf("process %s of load group %d still alive: %s", e.Name(), pgid, s)
			}
		}
	}
}

// TestCPULoad: two busy processes in a node add a core-second to its cgroup (polled for up to
// 10 s, so other work on the host slows the check but cannot fail it: 240 ms in the first second
// was seen beside a build, against > 1 s alone); Stop leaves none.
func TestCPULoad(t *testing.T) {
	labtest.Exclusive(t)
	l := labtest.Deploy(t, lab)
	env := l.ProbeEnv(t, "c")
	node := l.Node(t, "fw")
	before, err := node.CPU()
	if err != nil {
		t.Fatal(err)
	}
	ld, err := load.Start(context.Background(), env, load.Config{Kind: load.KindCPU, Count: 2, Node: "fw", Limit: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ld.Stop() })
	t0 := time.Now()
	var used time.Duration
	for time.Since(t0) < 10*time.Second {
		time.Sleep(100 * time.Millisecond)
		after, err := node.CPU()
		if err != nil {
			t.Fatal(err)
		}
		if used = after.Total() - before.Total(); used >= time.Second {
			break
		}
	}
	elapsed := time.Since(t0)
	t.Logf("2 busy processes: node fw used %s of CPU in %s", used, elapsed.Round(time.Millisecond))
	if used < time.Second {
		t.Errorf("node fw used %s of CPU in %s under 2 busy processes; want 1 s within 10 s", used, elapsed.Round(time.Millisecond))
	}
	if err := ld.Stop(); err != nil {
		t.Fatal(err)
	}
	gone(t, ld)
	if err := ld.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestCPULoadOnHost: placed on the host beside the node, the busy processes run outside the
// node's namespace and cgroup: the node's CPU stays low, and they all stop.
func TestCPULoadOnHost(t *testing.T) {
	labtest.Exclusive(t)
	l := labtest.Deploy(t, lab)
	env := l.ProbeEnv(t, "c")
	node := l.Node(t, "fw")
	before, err := node.CPU()
	if err != nil {
		t.Fatal(err)
	}
	ld, err := load.Start(context.Background(), env, load.Config{Kind: load.KindCPU, Count: 2, Node: "fw", Limit: time.Minute, Host: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ld.Stop() })
	time.Sleep(time.Second)
	after, err := node.CPU()
	if err != nil {
		t.Fatal(err)
	}
	if used := after.Total() - before.Total(); used > 100*time.Millisecond {
		t.Errorf("node fw used %s of CPU in 1 s with the load on the host beside it; want about none", used)
	}
	for _, pid := range ld.PIDs() {
		ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		self, _ := os.Readlink("/proc/self/ns/net")
		if ns != self {
			t.Errorf("load process %d is in network namespace %s, not the host's %s", pid, ns, self)
		}
	}
	if err := ld.Stop(); err != nil {
		t.Fatal(err)
	}
	gone(t, ld)
}

// TestCPULoadEndsWithContext: the load stops when its context ends.
func TestCPULoadEndsWithContext(t *testing.T) {
	labtest.Exclusive(t)
	l := labtest.Deploy(t, strings.Replace(lab, "t-load", "t-load-ctx", 1))
	ctx, cancel := context.WithCancel(context.Background())
	ld, err := load.Start(ctx, l.ProbeEnv(t, "c"), load.Config{Kind: load.KindCPU, Count: 1, Node: "server"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range ld.PIDs() {
		for syscall.Kill(-pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	gone(t, ld)
	if err := ld.Stop(); err != nil {
		t.Error(err)
	}
}

func rxBytes(t *testing.T, p *plan.Plan, node, ifname string) uint64 {
	t.Helper()
	return nettest.LinkStats(t, p.Node(node).Netns, ifname).RxBytes
}

// TestNetworkLoad: streams from a node reach the chain's destination (or its source, when the
// loaded node is the destination) at about the bit rate asked; Stop ends them.
func TestNetworkLoad(t *testing.T) {
	labtest.Exclusive(t)
	l := labtest.Deploy(t, strings.Replace(lab, "t-load", "t-load-net", 1))
	env := l.ProbeEnv(t, "c")
	for _, tc := range []struct{ from, peer, ifname string }{{"client", "server", "eth0"}, {"server", "client", "eth0"}, {"fw", "server", "eth0"}} {
		before := rxBytes(t, l.P, tc.peer, tc.ifname)
		ld, err := load.Start(context.Background(), env, load.Config{Kind: load.KindNetwork, Count: 2, Node: tc.from, Bitrate: "20M", Limit: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		got := rxBytes(t, l.P, tc.peer, tc.ifname) - before
		if err := ld.Stop(); err != nil {
			t.Error(err)
		}
		gone(t, ld)
		// 2 streams x 20 Mbit/s for about a second: 5 MB; allow for start-up.
		t.Logf("network load %s -> %s: %d bytes in 1 s", tc.from, tc.peer, got)
		if got < 2_000_000 || got > 12_000_000 {
			t.Errorf("network load %s -> %s: %d bytes in 1 s, want about 5 MB (2 x 20 Mbit/s)", tc.from, tc.peer, got)
		}
	}
}

func TestBadConfig(t *testing.T) {
	l := labtest.Deploy(t, strings.Replace(lab, "t-load", "t-load-bad", 1))
	env := l.ProbeEnv(t, "c")
	for _, cfg := range []load.Config{
		{Kind: "disk", Count: 1, Node: "fw"},
		{Kind: load.KindCPU, Count: -1, Node: "fw"},
		{Kind: load.KindCPU, Count: 1, Node: "nowhere"},
		{Kind: load.KindNetwork, Count: 500, Node: "fw"},
	} {
		if ld, err := load.Start(context.Background(), env, cfg); err == nil {
			ld.Stop()
			t.Errorf("Start(%+v): no error", cfg)
		} else {
			t.Logf("%+v: %v", cfg, err)
		}
	}
	ld, err := load.Start(context.Background(), env, load.Config{Kind: load.KindCPU, Count: 0, Node: "fw"})
	if err != nil || len(ld.PIDs()) != 0 || ld.Stop() != nil {
		t.Errorf("no load: %v", err)
	}
}
