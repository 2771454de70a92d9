package cli

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestTopPlainLines runs `sfclab top` with standard output not a terminal while a ping crosses
// the lab: it prints plain lines per node and interval, with the traffic seen.
func TestTopPlainLines(t *testing.T) {
	requireRoot(t)
	privateState(t)
	lab := writeLabFile(t, "name: t-telem-top\nendpoints: {client: {}, server: {}}\nfunctions: {f1: {kind: forwarder}}\nchains: [{from: client, to: server, hops: [f1]}]\n")
	code, out, errOut := run(t, "deploy", lab)
	t.Cleanup(func() { run(t, "destroy", "t-telem-top") })
	if code != 0 {
		t.Fatalf("deploy: exit %d\n%s%s", code, out, errOut)
	}
	ping := exec.Command("ip", "netns", "exec", "sfc.t-telem-top.client", "ping", "-n", "-q", "-c", "40", "-i", "0.02", "-W", "1", "198.18.1.2")
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	defer ping.Wait()
	code, out, errOut = run(t, "top", "t-telem-top", "--count", "2", "--interval", "300ms")
	if code != 0 {
		t.Fatalf("top: exit %d\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2*3 {
		t.Errorf("want 2 refreshes x 3 nodes = 6 lines, got %d:\n%s", len(lines), out)
	}
	busy := regexp.MustCompile(`lab=t-telem-top node=(\S+) rx_bps=([1-9]\d*) `)
	if m := busy.FindStringSubmatch(lines[0]); m == nil {
		t.Errorf("first line is not a node with traffic (busiest first):\n%s", out)
	}
	if code, _, errOut := run(t, "top", "t-telem-none", "--count", "1"); code != 1 || !strings.Contains(errOut, "not deployed") {
		t.Errorf("top of a lab not deployed: exit %d %q", code, errOut)
	}
}
