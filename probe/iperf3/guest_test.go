package iperf3

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/probe"
)

// netstatGuest is busybox netstat -tan as a guest printed it (TestIperf3GuestServerStopped,
// now TestGuestServersStopped/iperf3, in runtime/vm: iperf3 -s listening in a TCG guest),
// with the established lines of a test (IPv4-mapped, as iperf3's dual-stack socket shows
// them) and another port's.
const netstatGuest = `Active Internet connections (servers and established)
Proto Recv-Q Send-Q Local Address           Foreign Address         State       
tcp        0      0 :::5201                 :::*                    LISTEN      
tcp        0      0 ::ffff:198.18.0.6:5201  ::ffff:198.18.0.1:40312 ESTABLISHED 
tcp        0  12345 ::ffff:198.18.0.6:5201  ::ffff:198.18.0.1:40314 ESTABLISHED 
tcp        0      0 198.18.0.6:52010        198.18.0.1:5201         ESTABLISHED 
tcp        0      0 0.0.0.0:22              0.0.0.0:*               LISTEN      
`

func TestNetstatSockets(t *testing.T) {
	for _, tt := range []struct {
		name        string
		out         string
		port        uint16
		listen, est int
	}{
		{"iperf3 under test", netstatGuest, 5201, 1, 2},
		{"only listening", strings.Join(strings.Split(netstatGuest, "\n")[:3], "\n"), 5201, 1, 0},
		{"other port", netstatGuest, 22, 1, 0},
		{"no such port", netstatGuest, 520, 0, 0},
		{"empty", "", 5201, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, e := netstatSockets([]byte(tt.out), tt.port)
			if l != tt.listen || e != tt.est {
				t.Errorf("port %d: %d listening, %d established; want %d, %d", tt.port, l, e, tt.listen, tt.est)
			}
		})
	}
}

// fakeGuest is a VM node as the probe sees it: netstat's output, whether the server's group
// runs, and the stops asked for.
type fakeGuest struct {
	mu      sync.Mutex
	netstat string // "" = not listening yet
	ss      string // ss -Htan's output, when the guest has ss
	hasSS   bool   // ss is in the guest
	noNS    bool   // netstat is not in the guest
	runs    bool
	log     string
	stops   []int
	calls   int
}

func (g *fakeGuest) Output(_ context.Context, _ []byte, argv ...string) ([]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	switch argv[0] {
	case "netstat":
		if g.noNS {
			return nil, errors.New(`exec: "netstat": executable file not found in $PATH`)
		}
		return []byte(g.netstat), nil
	case "ss":
		if !g.hasSS {
			return nil, errors.New(`exec: "ss": executable file not found in $PATH`)
		}
		return []byte(g.ss), nil
	case "tail":
		return []byte(g.log), nil
	}
	return nil, errors.New("unexpected command " + strings.Join(argv, " "))
}
func (*fakeGuest) Daemon([]string, string) (int, error) { return 0, errors.New("not used") }
func (*fakeGuest) Do(func() error) error                { return errors.New("not in a guest") }
func (*fakeGuest) CPU() (cgroup.Usage, error)           { return cgroup.Usage{}, nil }
func (g *fakeGuest) GroupRuns(pgid int, marker string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs && marker == "iperf3"
}
func (g *fakeGuest) StopGroup(pgid int, grace time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stops = append(g.stops, pgid)
	g.runs = false
	return nil
}

// TestGuestServer checks a server in a guest: found listening, or an error with its log when
// it exits or does not listen in time; stopped through the guest (StopGroup with the guest's
// PID), not by the host's kill, unless it has exited by itself.
func TestGuestServer(t *testing.T) {
	listening := strings.Join(strings.Split(netstatGuest, "\n")[:3], "\n")
	for _, tt := range []struct {
		name      string
		g         *fakeGuest
		wantErr   string // "" = listening
		wantStops int
	}{
		{"listens", &fakeGuest{netstat: listening, runs: true}, "", 1},
		{"exited", &fakeGuest{log: "iperf3: error - unable to start listener for connections: Address already in use"},
			"iperf3 server in VM node server exited before it listened on port 5201: iperf3: error - unable to start listener", 0},
		{"never listens", &fakeGuest{runs: true}, "iperf3 server in VM node server does not listen on port 5201 after 300ms (no listening socket)", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// 424242: a number no host process has, so a host kill would fail, not hit one.
			servers := []Server{{node: "server", log: "/tmp/x.log", pid: 424242, port: 5201, guest: tt.g}}
			err := guestsListening(context.Background(), servers, 300*time.Millisecond)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v; want %q", err, tt.wantErr)
			}
			if err := stopServers(servers); err != nil {
				t.Fatal(err)
			}
			if len(tt.g.stops) != tt.wantStops || tt.wantStops > 0 && tt.g.stops[0] != 424242 {
				t.Errorf("stops %v; want %d of group 424242", tt.g.stops, tt.wantStops)
			}
			if tt.g.runs {
				t.Error("the server still runs after stopServers")
			}
		})
	}
}

// A guest's server found in the socket watch of several destination instances.
func TestGuestSockets(t *testing.T) {
	g := &fakeGuest{netstat: netstatGuest, runs: true}
	l, e, err := Server{node: "server", pid: 1, guest: g}.sockets(context.Background(), 5201)
	if err != nil || l != 1 || e != 2 || g.calls != 1 {
		t.Errorf("sockets = %d, %d, %v after %d commands; want 1, 2, nil after 1", l, e, err, g.calls)
	}
}

// ssGuest is `ss -Htan 'sport = :5201'` in a pod while iperf3 serves one test (its control
// and data connections), one earlier connection waiting to close.
const ssGuest = `LISTEN     0      4096         0.0.0.0:5201        0.0.0.0:*
ESTAB      0      0         198.18.2.2:5201     198.18.2.1:40312
ESTAB      0      0         198.18.2.2:5201     198.18.2.1:40318
TIME-WAIT  0      0         198.18.2.2:5201     198.18.2.1:40300
`

// TestSSSockets: in ss's listing (what a kubernetes pod's image has instead of netstat) the
// listening and established sockets are counted, nothing else.
func TestSSSockets(t *testing.T) {
	for _, tt := range []struct {
		name        string
		out         string
		listen, est int
	}{
		{"iperf3 under test", ssGuest, 1, 2},
		{"only listening", strings.SplitAfter(ssGuest, "\n")[0], 1, 0},
		{"empty", "", 0, 0},
	} {
		if l, e := ssSockets([]byte(tt.out)); l != tt.listen || e != tt.est {
			t.Errorf("%s: %d listening, %d established; want %d, %d", tt.name, l, e, tt.listen, tt.est)
		}
	}
}

// listerGuest is a guest that lists its listening sockets itself (vnf.SocketLister): a VM
// guest (whose busybox image has netstat and no ss) or a kubernetes pod on another machine
// (ss, no netstat).
type listerGuest struct{ *fakeGuest }

func (listerGuest) ListeningTCP(context.Context, string) ([]byte, error) { return nil, nil }

// TestGuestSocketsProgram: the server's sockets are read with the program the guest has:
// netstat in a plain guest, ss first in one that lists its sockets, the other when the first
// is missing; both missing is an error naming both failures.
func TestGuestSocketsProgram(t *testing.T) {
	for _, tt := range []struct {
		name    string
		g       probe.Guest
		wantErr bool
	}{
		{"plain guest, netstat", &fakeGuest{netstat: netstatGuest}, false},
		{"plain guest without netstat, ss", &fakeGuest{noNS: true, hasSS: true, ss: ssGuest}, false},
		{"lister with ss (remote pod)", listerGuest{&fakeGuest{noNS: true, hasSS: true, ss: ssGuest}}, false},
		{"lister without ss (busybox VM guest)", listerGuest{&fakeGuest{netstat: netstatGuest}}, false},
		{"neither program", listerGuest{&fakeGuest{noNS: true}}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, e, err := Server{node: "server", pid: 1, guest: tt.g}.sockets(context.Background(), 5201)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), `"ss"`) || !strings.Contains(err.Error(), `"netstat"`) {
					t.Errorf("err = %v; want one naming both programs", err)
				}
				return
			}
			if err != nil || l != 1 || e != 2 {
				t.Errorf("sockets = %d, %d, %v; want 1, 2, nil", l, e, err)
			}
		})
	}
}
