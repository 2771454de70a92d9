package netdev

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/testroot"
)

// testPrefix is the namespace prefix of this test process; every namespace
// a test creates starts with it, and TestMain removes any left over.
var testPrefix = fmt.Sprintf("sfctest.nd%d.", os.Getpid())

func TestMain(m *testing.M) {
	code := m.Run()
	if os.Geteuid() == 0 {
		left, err := ListNetns(testPrefix)
		if err != nil {
			fmt.Fprintln(os.Stderr, "list leftover namespaces:", err)
			code = 1
		}
		for _, name := range left {
			fmt.Fprintln(os.Stderr, "leftover namespace (deleting):", name)
			_ = DeleteNetns(name)
			code = 1
		}
	}
	os.Exit(code)
}

func requireRoot(tb testing.TB) { testroot.Require(tb, "this test creates network namespaces") }

// newTestNS creates the namespace testPrefix+suffix, opens it and registers
// cleanups that close and delete it, even if the test fails.
func newTestNS(tb testing.TB, suffix string) *NS {
	tb.Helper()
	name := testPrefix + suffix
	if err := CreateNetns(name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := DeleteNetns(name); err != nil {
			tb.Error(err)
		}
	})
	ns, err := OpenNS(name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ns.Close() })
	return ns
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func mustAddr(s string) netip.Addr     { return netip.MustParseAddr(s) }

func nsExec(t *testing.T, ns *NS, argv ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := append([]string{"netns", "exec", ns.Name()}, argv...)
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	return string(out), err
}

func TestNetnsLifecycle(t *testing.T) {
	requireRoot(t)
	name := testPrefix + "life"
	if err := CreateNetns(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = DeleteNetns(name) })

	if err := CreateNetns(name); !errors.Is(err, os.ErrExist) {
		t.Errorf("second CreateNetns = %v, want os.ErrExist", err)
	}
	names, err := ListNetns(testPrefix + "li")
	if err != nil || !slices.Equal(names, []string{name}) {
		t.Errorf("ListNetns = %v, %v; want [%s]", names, err, name)
	}

	ns, err := OpenNS(name)
	if err != nil {
		t.Fatal(err)
	}
	links, err := ns.Links()
	ns.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 || links[0].Name != "lo" || !links[0].Up || links[0].Kind != "device" {
		t.Errorf("new namespace links = %+v, want only lo, up, kind device", links)
	}

	if err := DeleteNetns(name); err != nil {
		t.Fatal(err)
	}
	if err := DeleteNetns(name); err != nil {
		t.Errorf("second DeleteNetns = %v, want nil", err)
	}
	if _, err := OpenNS(name); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenNS of deleted = %v, want ErrNotFound", err)
	}
}

func TestDoSwitchesBack(t *testing.T) {
	requireRoot(t)
	ns := newTestNS(t, "do")
	host, err := OpenNS("")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	hostFwd, err := host.GetSysctl("net.ipv4.ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	want := "1"
	if hostFwd == "1" {
		want = "0"
	}
	// Many rounds so that the thread pool gets reused: a thread left in the
	// namespace would show up as a wrong host value.
	for i := 0; i < 50; i++ {
		if err := ns.SetSysctl("net/ipv4/ip_forward", want); err != nil {
			t.Fatal(err)
		}
		got, err := ns.GetSysctl("net.ipv4.ip_forward")
		if err != nil || got != want {
			t.Fatalf("ns ip_forward = %q, %v; want %q", got, err, want)
		}
		if h, err := host.GetSysctl("net.ipv4.ip_forward"); err != nil || h != hostFwd {
			t.Fatalf("host ip_forward = %q, %v; want unchanged %q", h, err, hostFwd)
		}
	}
	if _, err := ns.GetSysctl("net.ipv4.no_such_key"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetSysctl(missing) = %v, want ErrNotFound", err)
	}
	if err := ns.SetUp("nosuch0"); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetUp(missing) = %v, want ErrNotFound", err)
	}
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want boom", p)
			}
		}()
		_ = ns.Do(func() error { panic("boom") })
	}()
}

// TestTopology builds
//
//	a ==(a0-b0, a1-b1)== b          c --(c0-pc)-- [br: br0] --(pd-d0)-- d
//
// and checks what netlink reads back and that traffic flows.
func TestTopology(t *testing.T) {
	requireRoot(t)
	a := newTestNS(t, "a")
	b := newTestNS(t, "b")
	br := newTestNS(t, "br")
	c := newTestNS(t, "c")
	d := newTestNS(t, "d")

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.AddVeth("a0", b, "b0", 1400))
	must(a.AddVeth("a1", b, "b1", 0))
	must(b.AddVeth("x0", b, "x1", 0)) // both ends in one namespace
	must(br.AddBridge("br0"))
	must(c.AddVeth("c0", br, "pc", 0))
	must(d.AddVeth("d0", br, "pd", 0))
	must(br.SetMaster("pc", "br0"))
	must(br.SetMaster("pd", "br0"))
	for ns, links := range map[*NS][]string{
		a: {"a0", "a1"}, b: {"b0", "b1", "x0", "x1"}, br: {"br0", "pc", "pd"}, c: {"c0"}, d: {"d0"},
	} {
		for _, l := range links {
			must(ns.SetUp(l))
		}
	}
	for _, x := range []struct {
		ns   *NS
		link string
		p    string
	}{
		{a, "a0", "198.18.1.1/24"}, {b, "b0", "198.18.1.2/24"},
		{a, "a1", "198.18.3.1/24"}, {b, "b1", "198.18.3.2/24"},
		{b, "lo", "198.19.0.1/32"},
		{c, "c0", "198.18.2.1/24"}, {d, "d0", "198.18.2.2/24"},
	} {
		must(x.ns.AddAddr(x.link, mustPrefix(x.p)))
	}
	multipath := Route{
		Dst: mustPrefix("198.19.0.0/24"),
		NextHops: []NextHop{
			{Via: mustAddr("198.18.1.2"), Dev: "a0", Weight: 1},
			{Via: mustAddr("198.18.3.2"), Dev: "a1", Weight: 3},
		},
	}
	must(a.AddRoute(multipath))
	plain := Route{Dst: mustPrefix("198.19.0.0/24"), Table: 100,
		NextHops: []NextHop{{Via: mustAddr("198.18.1.2"), Dev: "a0"}}}
	must(a.AddRoute(plain))
	devRoute := Route{Dst: mustPrefix("198.19.9.0/24"), Dev: "a1"}
	must(a.AddRoute(devRoute))
	rule := Rule{Priority: 1000, Table: 100, IPProto: 6, DstPort: PortRange{8000, 8080},
		Dst: mustPrefix("198.19.0.0/24")}
	must(a.AddRule(rule))
	rule2 := Rule{Priority: 1001, Table: 100, IPProto: 17, SrcPort: PortRange{From: 53}, IifName: "a0"}
	must(a.AddRule(rule2))

	t.Run("routes", func(t *testing.T) {
		for _, tc := range []struct {
			table int
			want  Route
		}{
			{0, multipath},
			{100, Route{Dst: plain.Dst, Table: 100, Dev: "a0", NextHops: plain.NextHops}},
			{0, Route{Dst: devRoute.Dst, Dev: "a1"}},
		} {
			got, err := a.Routes(tc.table)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(got, func(r Route) bool { return r.Dst == tc.want.Dst })
			if i < 0 {
				t.Errorf("table %d: no route to %s in %v", tc.table, tc.want.Dst, got)
				continue
			}
			if g := got[i]; g.String() != tc.want.String() || g.Table != tc.want.Table {
				t.Errorf("table %d: route = %s (table %d), want %s", tc.table, g, g.Table, tc.want)
			}
		}
		// The same, as iproute2 sees it.
		out, err := nsExec(t, a, "ip", "route", "show", "198.19.0.0/24")
		if err != nil || !strings.Contains(out, "weight 3") {
			t.Errorf("ip route show = %q, %v; want weight 3", out, err)
		}
	})

	t.Run("rules", func(t *testing.T) {
		got, err := a.Rules()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []Rule{rule, {Priority: 1001, Table: 100, IPProto: 17,
			SrcPort: PortRange{53, 53}, IifName: "a0"}} {
			if !slices.Contains(got, want) {
				t.Errorf("rule %s not in %v", want, got)
			}
		}
		out, err := nsExec(t, a, "ip", "rule", "show", "pref", "1000")
		if err != nil || !strings.Contains(out, "ipproto tcp") || !strings.Contains(out, "dport 8000-8080") {
			t.Errorf("ip rule show = %q, %v", out, err)
		}
	})

	t.Run("links", func(t *testing.T) {
		for _, tc := range []struct {
			ns                 *NS
			name, kind, master string
			mtu                int
			addr               string
		}{
			{a, "lo", "device", "", 65536, "127.0.0.1/8"},
			{a, "a0", "veth", "", 1400, "198.18.1.1/24"},
			{b, "b0", "veth", "", 1400, "198.18.1.2/24"},
			{b, "x1", "veth", "", 1500, ""},
			{br, "br0", "bridge", "", 1500, ""},
			{br, "pc", "veth", "br0", 1500, ""},
			{br, "pd", "veth", "br0", 1500, ""},
		} {
			links, err := tc.ns.Links()
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(links, func(l LinkInfo) bool { return l.Name == tc.name })
			if i < 0 {
				t.Errorf("%s: no link %s in %+v", tc.ns.Name(), tc.name, links)
				continue
			}
			l := links[i]
			if l.Kind != tc.kind || l.Master != tc.master || l.MTU != tc.mtu || !l.Up || l.Index == 0 || (l.MAC == "") != (tc.name == "lo") {
				t.Errorf("%s: link = %+v, want kind %s master %q mtu %d up", tc.ns.Name(), l, tc.kind, tc.master, tc.mtu)
			}
			if tc.addr != "" && !slices.Contains(l.Addrs, mustPrefix(tc.addr)) {
				t.Errorf("%s: %s addrs = %v, want %s", tc.ns.Name(), tc.name, l.Addrs, tc.addr)
			}
			for _, host := range []string{"eth0", "docker0"} {
				if slices.ContainsFunc(links, func(l LinkInfo) bool { return l.Name == host }) {
					t.Errorf("%s: host link %s visible", tc.ns.Name(), host)
				}
			}
		}
		out, err := nsExec(t, br, "ip", "-d", "-j", "link", "show", "br0")
		if err != nil {
			t.Fatalf("ip link show br0: %v: %s", err, out)
		}
		var info []struct {
			LinkInfo struct {
				InfoData struct {
					ForwardDelay *int `json:"forward_delay"`
					STPState     *int `json:"stp_state"`
				} `json:"info_data"`
			} `json:"linkinfo"`
		}
		if err := json.Unmarshal([]byte(out), &info); err != nil || len(info) != 1 {
			t.Fatalf("parse %q: %v", out, err)
		}
		if fd, stp := info[0].LinkInfo.InfoData.ForwardDelay, info[0].LinkInfo.InfoData.STPState; fd == nil || *fd != 0 || stp == nil || *stp != 0 {
			t.Errorf("bridge forward_delay/stp_state = %v/%v, want 0/0 (%s)", fd, stp, out)
		}
	})

	t.Run("ping", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			from     *NS
			to       string
			counters map[*NS][]string // links whose counters must rise
			anyOf    bool             // one of the links is enough (multipath)
		}{
			{"veth", a, "198.18.1.2", map[*NS][]string{a: {"a0"}, b: {"b0"}}, false},
			{"multipath", a, "198.19.0.1", map[*NS][]string{a: {"a0", "a1"}}, true},
			// The bridge device itself only counts frames for its own stack (ARP broadcasts,
			// absent once neighbours are cached); its ports show forwarded traffic.
			{"bridge", c, "198.18.2.2", map[*NS][]string{br: {"pc", "pd"}, d: {"d0"}}, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := map[string]LinkStats{}
				for ns, links := range tc.counters {
					for _, l := range links {
						s, err := ns.LinkStats(l)
						if err != nil {
							t.Fatal(err)
						}
						before[ns.Name()+"/"+l] = s
					}
				}
				if out, err := nsExec(t, tc.from, "ping", "-n", "-c", "2", "-W", "1", "-i", "0.2", tc.to); err != nil {
					t.Fatalf("ping %s from %s: %v\n%s", tc.to, tc.from.Name(), err, out)
				}
				var stale []string
				rose := 0
				for ns, links := range tc.counters {
					for _, l := range links {
						s, err := ns.LinkStats(l)
						if err != nil {
							t.Fatal(err)
						}
						b := before[ns.Name()+"/"+l]
						if s.RxPackets > b.RxPackets && s.TxPackets > b.TxPackets &&
							s.RxBytes > b.RxBytes && s.TxBytes > b.TxBytes {
							rose++
						} else {
							stale = append(stale, fmt.Sprintf("%s/%s %+v -> %+v", ns.Name(), l, b, s))
						}
					}
				}
				if (tc.anyOf && rose == 0) || (!tc.anyOf && len(stale) > 0) {
					t.Errorf("counters did not rise: %s", strings.Join(stale, "; "))
				}
			})
		}
	})
}

func TestSysctlPath(t *testing.T) {
	for _, tc := range []struct{ key, want, err string }{
		{"net.ipv4.ip_forward", "/proc/sys/net/ipv4/ip_forward", ""},
		{"net/ipv4/ip_forward", "/proc/sys/net/ipv4/ip_forward", ""},
		{"net/ipv4/conf/eth0.10/rp_filter", "/proc/sys/net/ipv4/conf/eth0.10/rp_filter", ""},
		{"", "", "empty"},
		{"net/../../etc/passwd", "", "invalid"},
		{"net..ipv4", "", "invalid"},
	} {
		got, err := sysctlPath(tc.key)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("sysctlPath(%q) = %q, %v; want error %q", tc.key, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("sysctlPath(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct {
		got  fmt.Stringer
		want string
	}{
		{Route{Dst: mustPrefix("198.19.0.0/24"), Dev: "a0"}, "198.19.0.0/24 dev a0"},
		{Route{Dst: mustPrefix("0.0.0.0/0"), Table: 7, NextHops: []NextHop{{Via: mustAddr("198.18.0.1")}}},
			"0.0.0.0/0 table 7 via 198.18.0.1"},
		{Route{Dst: mustPrefix("198.19.0.0/24"), Dev: "e0", NextHops: []NextHop{
			{Via: mustAddr("198.18.0.1")}, {Via: mustAddr("198.18.0.2"), Dev: "e1", Weight: 4}}},
			"198.19.0.0/24 nexthop via 198.18.0.1 dev e0 weight 1 nexthop via 198.18.0.2 dev e1 weight 4"},
		{Rule{Priority: 10, IPProto: 6, DstPort: PortRange{80, 80}, SrcPort: PortRange{1000, 2000},
			Src: mustPrefix("198.18.0.0/16"), IifName: "in0", Table: 5},
			"pref 10 ipproto 6 sport 1000-2000 dport 80 from 198.18.0.0/16 iif in0 lookup 5"},
		{Rule{}, "lookup 254"},
	} {
		if s := tc.got.String(); s != tc.want {
			t.Errorf("String() = %q, want %q", s, tc.want)
		}
	}
}

func TestValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"rule reversed ports", func() error { _, err := toNetlinkRule(Rule{DstPort: PortRange{9, 1}}); return err }()},
		{"rule mixed family", func() error {
			_, err := toNetlinkRule(Rule{Src: mustPrefix("198.18.0.0/15"), Dst: mustPrefix("2001:db8::/32")})
			return err
		}()},
		{"ifname too long", checkIfname("abcdefghijklmnop")},
		{"ifname slash", checkIfname("a/b")},
		{"netns name slash", checkNetnsName("a/b")},
		{"netns name dotdot", checkNetnsName("..")},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	nr, err := toNetlinkRule(Rule{Src: mustPrefix("198.18.1.7/24"), DstPort: PortRange{From: 80}})
	if err != nil || nr.Src.String() != "198.18.1.0/24" || nr.Dport.End != 80 || nr.Priority != -1 || nr.Table != MainTable {
		t.Errorf("toNetlinkRule = %+v, %v", nr, err)
	}
}

// BenchmarkCreateNS measures the cost of one lab node: create a namespace,
// a veth into a shared hub namespace, an address on each end, links up,
// then delete the namespace.
func BenchmarkCreateNS(b *testing.B) {
	requireRoot(b)
	hub := newTestNS(b, "hub")
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("%sbn%d", testPrefix, i)
		if err := CreateNetns(name); err != nil {
			b.Fatal(err)
		}
		err := func() error {
			ns, err := OpenNS(name)
			if err != nil {
				return err
			}
			defer ns.Close()
			peer := fmt.Sprintf("h%d", i)
			if err := ns.AddVeth("eth0", hub, peer, 1500); err != nil {
				return err
			}
			ip := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8 & 0x7f), byte(i)})
			if err := ns.AddAddr("eth0", netip.PrefixFrom(ip, 15)); err != nil {
				return err
			}
			if err := ns.SetUp("eth0"); err != nil {
				return err
			}
			return hub.SetUp(peer)
		}()
		if derr := DeleteNetns(name); derr != nil {
			b.Fatal(derr)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// TestBindNetns names the namespace of a process that is not sfclab's (a sleep started by
// unshare, as a container's init is): the name opens the process's namespace, a second bind
// of the name is refused, the name outlives the process, and DeleteNetns removes it.
func TestBindNetns(t *testing.T) {
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--net", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start unshare: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	path := fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)
	// unshare switches namespaces before it execs sleep: wait until it has.
	self, _ := os.Readlink("/proc/self/ns/net")
	for i := 0; i < 100; i++ {
		if l, _ := os.Readlink(path); l != "" && l != self {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	want, err := os.Readlink(path)
	if err != nil || want == self {
		t.Fatalf("process namespace %q (%v), the test's is %q", want, err, self)
	}
	name := testPrefix + "bind"
	if err := BindNetns(name, path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = DeleteNetns(name) })
	if err := BindNetns(name, path); !errors.Is(err, os.ErrExist) {
		t.Errorf("second BindNetns = %v, want os.ErrExist", err)
	}
	ns, err := OpenNS(name)
	if err != nil {
		t.Fatal(err)
	}
	// The named namespace is the process's: a veth made through the name is seen there.
	ns.Close()
	if out, err := exec.Command("ip", "-n", name, "link", "add", "bindprobe", "type", "veth", "peer", "name", "bindprobe2").CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s link add: %s %v", name, out, err)
	}
	out, err := exec.Command("nsenter", "--net="+path, "ip", "-o", "link", "show", "bindprobe").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "bindprobe") {
		t.Errorf("veth made through %s not in the process's namespace: %s %v", name, out, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := OpenNS(name); err != nil {
		t.Errorf("OpenNS after the process exited = %v, want the named namespace", err)
	}
	if err := DeleteNetns(name); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenNS(name); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenNS after DeleteNetns = %v, want ErrNotFound", err)
	}
	if err := BindNetns(testPrefix+"bind2", "/proc/self/ns/nonexistent"); err == nil {
		_ = DeleteNetns(testPrefix + "bind2")
		t.Error("BindNetns of a missing path succeeded")
	}
	if left, _ := ListNetns(testPrefix + "bind2"); len(left) > 0 {
		t.Errorf("failed BindNetns left %v", left)
	}
}
