package docker

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/internal/labgen"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

func TestImageTagStable(t *testing.T) {
	a := ImageTag("bookworm", []string{"iperf3", "haproxy"})
	if a != ImageTag("bookworm", []string{"haproxy", "iperf3"}) {
		t.Error("tag depends on package order")
	}
	if a == ImageTag("bookworm", []string{"iperf3"}) || a == ImageTag("trixie", []string{"iperf3", "haproxy"}) {
		t.Error("tag ignores packages or suite")
	}
	if len(a) != 12 {
		t.Errorf("tag %q", a)
	}
}

func TestSplitQuoted(t *testing.T) {
	got, err := splitQuoted(`-A DOCKER-USER -i br-0123 -o br-0123 -m comment --comment "sfclab lab=t-1" -j ACCEPT`)
	want := []string{"-A", "DOCKER-USER", "-i", "br-0123", "-o", "br-0123", "-m", "comment", "--comment", "sfclab lab=t-1", "-j", "ACCEPT"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := splitQuoted(`a "b`); err == nil {
		t.Error("unterminated quote accepted")
	}
}

// The rules written through iptables-restore read back from `iptables -S` as labRules parses
// them: what addHostRules inserts, dropLabRules finds and deletes.
func TestRestoreInput(t *testing.T) {
	user := func(args ...string) hostRule { return hostRule{table: tableFilter, chain: UserChain, args: args} }
	pub := plan.Publish{Node: "proxy", Protocol: "tcp", Port: 3128, HostIP: netip.MustParseAddr("198.18.0.254"), HostPort: 3128}
	for _, tc := range []struct {
		name  string
		op    string
		rules []hostRule
		want  string
	}{
		{"insert two bridges", "-I", []hostRule{user(bridgeRule("br-0123", "t-1")...), user(bridgeRule("br-4567", "t-1")...)},
			"*filter\n" +
				`-I DOCKER-USER -i br-0123 -o br-0123 -m comment --comment "sfclab lab=t-1" -j ACCEPT` + "\n" +
				`-I DOCKER-USER -i br-4567 -o br-4567 -m comment --comment "sfclab lab=t-1" -j ACCEPT` + "\n" +
				"COMMIT\n"},
		{"nat after filter", "-I", []hostRule{
			{table: tableNAT, chain: PreroutingChain, args: natRule("br-0123", pub, netip.MustParseAddr("198.18.0.2"), "t-1")},
			user(bridgeRule("br-4567", "t-1")...)},
			"*filter\n" +
				`-I DOCKER-USER -i br-4567 -o br-4567 -m comment --comment "sfclab lab=t-1" -j ACCEPT` + "\n" +
				"COMMIT\n*nat\n" +
				`-I PREROUTING -i br-0123 -d 198.18.0.254/32 -p tcp -m tcp --dport 3128 -m comment --comment "sfclab lab=t-1" -j DNAT --to-destination 198.18.0.2:3128` + "\n" +
				"COMMIT\n"},
		{"delete quotes and backslashes", "-D", []hostRule{user("--comment", `a "b" \c`)},
			"*filter\n" + `-D DOCKER-USER --comment "a \"b\" \\c"` + "\nCOMMIT\n"},
		{"empty word", "-D", []hostRule{user("-m", "")}, "*filter\n-D DOCKER-USER -m \"\"\nCOMMIT\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := restoreInput(tc.op, tc.rules)
			if got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			// Every rule line splits back into the words it was made of.
			words := map[string][]string{}
			for _, line := range strings.Split(got, "\n") {
				if w, err := splitQuoted(line); err == nil && len(w) > 2 && w[0] == tc.op {
					words[strings.Join(w[2:], "\x00")] = w
				}
			}
			for _, r := range tc.rules {
				if words[strings.Join(r.args, "\x00")] == nil {
					t.Errorf("no line of\n%s\nsplits into %q", got, r.args)
				}
			}
		})
	}
}

// natRules DNATs every published port, on the bridge of the network whose gateway publishes
// it, to the target's own address on that network.
func TestNATRules(t *testing.T) {
	p := &plan.Plan{Lab: "t-1",
		Segments: []*plan.Segment{
			{Name: "web.0", Gateway: netip.MustParseAddr("198.18.0.254")},
			{Name: "web.1", Gateway: netip.MustParseAddr("198.18.1.254")},
		},
		Nodes: []*plan.Node{{Name: "proxy", Interfaces: []*plan.Interface{
			{Name: "eth1", Segment: "web.1", Address: netip.MustParsePrefix("198.18.1.1/24")},
			{Name: "eth0", Segment: "web.0", Address: netip.MustParsePrefix("198.18.0.2/24")},
		}}},
		Publish: []plan.Publish{{Node: "proxy", Protocol: "tcp", Port: 3128, HostIP: netip.MustParseAddr("198.18.0.254"), HostPort: 8080}},
	}
	got, err := natRules(p, map[string]string{"web.0": "br-0", "web.1": "br-1"})
	want := [][]string{{"-i", "br-0", "-d", "198.18.0.254/32", "-p", "tcp", "-m", "tcp", "--dport", "8080",
		"-m", "comment", "--comment", "sfclab lab=t-1", "-j", "DNAT", "--to-destination", "198.18.0.2:3128"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("natRules = %q, %v; want %q", got, err, want)
	}
	if _, err := natRules(p, map[string]string{"web.1": "br-1"}); err == nil {
		t.Error("no bridge for the published network accepted")
	}
	p.Publish[0].Node = "ghost"
	if _, err := natRules(p, map[string]string{"web.0": "br-0"}); err == nil {
		t.Error("unknown node accepted")
	}
}

// An engine that does not answer is reported clearly; destroying a lab that does not run on
// docker does not need it, destroying one that does fails.
func TestUnreachableEngine(t *testing.T) {
	root := t.TempDir()
	r := Runtime{Host: "unix://" + filepath.Join(root, "no-docker.sock"), StateRoot: root}
	ctx := context.Background()
	err := r.Reachable(ctx)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "Docker Engine not reachable at unix://") ||
		!strings.Contains(err.Error(), "systemctl start docker or dockerd") {
		t.Errorf("Reachable: %v", err)
	}
	if left, err := r.Leftovers(ctx, "t-nolab"); err != nil || len(left) > 0 {
		t.Errorf("Leftovers of a lab unknown here: %v, %v", left, err)
	}
	if err := r.Destroy(ctx, "t-nolab"); err != nil {
		t.Errorf("Destroy of a netns/unknown lab needs the engine: %v", err)
	}
	j := journal.Journal{Root: root}
	os.MkdirAll(j.Dir("t-dklab"), 0o755)
	if err := j.WritePlan(&plan.Plan{Lab: "t-dklab", Runtime: "docker"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Destroy(ctx, "t-dklab"); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Destroy of a docker lab without the engine: %v", err)
	}
}

// createOrder puts every network once and every container once, each container after every
// network it needs and right after the last of them.
func TestCreateOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
	}{
		{"chain of 6", labgen.Big("t-o6", 1, 6, 0)},
		{"two chains with fan-out", labgen.Big("t-of", 2, 3, 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab, err := spec.Decode([]byte(tc.yaml), "t.yaml", kinds.Spec())
			if err != nil {
				t.Fatal(err)
			}
			p, err := plan.Build(lab)
			if err != nil {
				t.Fatal(err)
			}
			order, err := createOrder(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(order) != len(p.Segments)+len(p.Nodes) {
				t.Fatalf("%d steps for %d networks and %d containers", len(order), len(p.Segments), len(p.Nodes))
			}
			at := map[string]int{}
			for i, o := range order {
				switch o := o.(type) {
				case *plan.Segment:
					at["seg "+o.Name] = i
				case *plan.Node:
					at["node "+o.Name] = i
				}
			}
			if len(at) != len(order) {
				t.Fatalf("a network or container appears twice: %v", at)
			}
			for _, n := range p.Nodes {
				last := -1
				for _, seg := range needs(n) {
					if at["seg "+seg] > at["node "+n.Name] {
						t.Errorf("container %s at %d before its network %s at %d", n.Name, at["node "+n.Name], seg, at["seg "+seg])
					}
					last = max(last, at["seg "+seg])
				}
				// Between its last network and it come only other containers.
				for i := last + 1; i < at["node "+n.Name]; i++ {
					if _, ok := order[i].(*plan.Segment); ok {
						t.Errorf("container %s waits behind network %s it does not need", n.Name, order[i].(*plan.Segment).Name)
					}
				}
				if len(needs(n)) != len(n.Interfaces) {
					t.Errorf("container %s needs %v before its start, want all its networks", n.Name, needs(n))
				}
			}
		})
	}
}

// renames gives every link its plan name whatever order the engine named them in: applied in
// order to the links, no step takes a name in use and every link ends with its name.
func TestRenames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links []string
		moves []move
	}{
		{"already named", []string{"lo", "eth0", "eth1"}, nil},
		{"swapped", []string{"lo", "eth0", "eth1"}, []move{{"eth1", "eth0"}, {"eth0", "eth1"}}},
		{"swapped, listed the other way", []string{"lo", "eth0", "eth1"}, []move{{"eth0", "eth1"}, {"eth1", "eth0"}}},
		{"three in a cycle", []string{"eth0", "eth1", "eth2"}, []move{{"eth0", "eth1"}, {"eth1", "eth2"}, {"eth2", "eth0"}}},
		{"chain into a free name", []string{"eth0", "eth1"}, []move{{"eth0", "eth1"}, {"eth1", "in"}}},
		{"plan names", []string{"eth0", "eth1"}, []move{{"eth0", "out"}, {"eth1", "in"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			current := map[string]bool{}
			ids := map[string]int{} // name -> link
			for i, l := range tc.links {
				current[l], ids[l] = true, i
			}
			steps, err := renames(current, tc.moves)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range steps {
				id, ok := ids[s.from]
				if !ok {
					t.Fatalf("step %v renames a link that is not there (%v)", s, ids)
				}
				if _, taken := ids[s.to]; taken {
					t.Fatalf("step %v takes a name in use (%v)", s, ids)
				}
				delete(ids, s.from)
				ids[s.to] = id
			}
			for _, m := range tc.moves {
				want := slices.Index(tc.links, m.from)
				if ids[m.to] != want {
					t.Errorf("%s ends on link %d, want link %d (was %s); steps %v", m.to, ids[m.to], want, m.from, steps)
				}
			}
		})
	}
}

// TestComposeRefusesTransparent: a transparent lab has no compose form.
func TestComposeRefusesTransparent(t *testing.T) {
	lab, err := spec.Load("../../examples/transparent-fw.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	lab.Runtime = spec.RuntimeDocker
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compose(io.Discard, p); !errors.Is(err, ErrTransparentExport) {
		t.Fatalf("Compose = %v, want ErrTransparentExport", err)
	}
}
