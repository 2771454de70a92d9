package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/runtime/vm"
)

const inspectVMLab = `name: t-vminspect
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fw:
    kind: firewall
    vm: {cpus: 1, memory: 512}
    params: {rules: [{action: deny, protocol: tcp, port: 9999}]}
  lb:
    kind: l4lb
    vm: {cpus: 1, memory: 512}
    params: {impl: sfclab, port: 5201}
chains:
  - {name: web, from: client, to: server, classifier: {protocol: tcp}, hops: [fw, lb]}
`

// TestInspectVMGuestCounters deploys client -> firewall (VM) -> sfclab balancer (VM) -> server
// with the command line, sends an iperf3 transfer through both guests and a connection to the
// denied port, and checks what `sfclab inspect` shows: the VMs' rows are the guests' own
// counters (SEEN BY guest), moved by the traffic, with their host sides beside them; the
// firewall's deny rule counted in its guest; the balancer's counters read in its guest. Then
// the firewall's QEMU is stopped (SIGSTOP: the guest hangs, QEMU's process stays): inspect
// returns, the firewall down with the reason and its host side shown; continued, its guest is
// read again; killed, it is down because its QEMU is gone.
func TestInspectVMGuestCounters(t *testing.T) {
	requireVMLab(t)
	const lab = "t-vminspect"
	qemuOf := func(node string) int {
		for _, pid := range vm.QEMUPids(lab) {
			if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(cmd), "\x00"+lab+"."+node+",") {
				return pid
			}
		}
		return 0
	}
	t.Cleanup(func() {
		if pid := qemuOf("fw"); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		if code, out, errOut := run(t, "destroy", lab); code != 0 {
			t.Errorf("destroy: exit %d\n%s%s", code, out, errOut)
		}
		if pids := vm.QEMUPids(lab); len(pids) > 0 {
			t.Errorf("QEMU left: %v", pids)
		}
		if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), lab) {
			t.Errorf("namespaces left:\n%s", out)
		}
	})
	if code, out, errOut := run(t, "deploy", writeLabFile(t, inspectVMLab)); code != 0 {
		t.Fatalf("deploy: exit %d\n%s%s", code, out, errOut)
	}
	p, err := newDeployer(io.Discard).ReadPlan(lab)
	if err != nil {
		t.Fatal(err)
	}
	vip := p.Node("lb").Function.IngressAddr.String()
	if code, out, errOut := run(t, "exec", lab, "server", "--", "iperf3", "-s", "-D", "-p", "5201"); code != 0 {
		t.Fatalf("iperf3 server: exit %d\n%s%s", code, out, errOut)
	}
	var code int
	var out, errOut string
	for i := range 30 { // the server binds within milliseconds, the balancer's health check within seconds
		if code, out, errOut = run(t, "exec", lab, "client", "--", "iperf3", "-c", vip, "-p", "5201", "-t", "1"); code == 0 || i == 29 {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if code != 0 {
		t.Fatalf("iperf3 through the VM firewall and balancer: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run(t, "exec", lab, "client", "--", "iperf3", "-c", vip, "-p", "9999", "-t", "1", "--connect-timeout", "300"); code == 0 {
		t.Errorf("a connection to the denied port went through the VM firewall:\n%s", out)
	} else {
		t.Logf("iperf3 to the denied port: exit %d: %s%s", code, out, errOut)
	}

	table := inspectTable(t, lab)
	t.Logf("sfclab inspect %s:\n%s", lab, table)
	var info []deploy.LabInfo
	if code, js, errOut := run(t, "inspect", "--format", "json", lab); code != 0 || json.Unmarshal([]byte(js), &info) != nil || len(info) != 1 {
		t.Fatalf("inspect --format json: exit %d\n%s%s", code, js, errOut)
	}
	for _, n := range info[0].Nodes {
		if n.Error != "" || n.Down != "" {
			t.Errorf("node %s: error %q, down %q", n.Name, n.Error, n.Down)
		}
		for _, f := range n.Interfaces {
			want := deploy.SeenHost
			if n.Machine != "" {
				want = deploy.SeenGuest
				if f.HostSide == nil || f.HostSide.RxPackets == 0 || f.HostSide.TxPackets == 0 {
					t.Errorf("%s/%s: host side %+v, want its counters, moved", n.Name, f.Name, f.HostSide)
				}
			}
			if f.SeenBy != want || f.Stats.RxPackets == 0 || f.Stats.TxPackets == 0 || !f.Up || len(f.Addrs) == 0 {
				t.Errorf("%s/%s: seen by %q (want %q), up %v, addresses %v, counters %+v: want them moved", n.Name, f.Name, f.SeenBy, want, f.Up, f.Addrs, f.Stats)
			}
		}
	}
	// The table shows the same: each VM row is the guest's, with moved counters.
	for _, row := range []string{`fw\s+function\s+firewall\s+ingress`, `lb\s+function\s+l4lb\s+ingress`} {
		if m := regexp.MustCompile(`(?m)^` + row + `\s+\S+\s+\S+\s+up\s+([1-9]\d*)\s+\d+\s+([1-9]\d*)\s+\d+\s+guest$`).FindStringSubmatch(table); m == nil {
			t.Errorf("inspect shows no row %q with the guest's moved counters", row)
		}
	}
	if !regexp.MustCompile(`(?m)^  rule-1\s+[1-9]\d* pkts`).MatchString(table) {
		t.Error("inspect shows no packet on the guest's deny rule for port 9999")
	}
	if m := regexp.MustCompile(`(?m)^balancer lb on \S+ \(\S+\): \d+ active, (\d+) total`).FindStringSubmatch(table); m == nil || m[1] == "0" {
		t.Errorf("inspect shows no connection counted by the balancer in its guest (%q)", m)
	}
	if !regexp.MustCompile(`(?m)^  \S+\s+\S+:5201\s+\d+\s+up\s+\d+\s+[1-9]\d*\s+\d+\s+[1-9]\d*\s+\d+$`).MatchString(table) {
		t.Error("inspect shows no backend that took connections and bytes")
	}

	// A hung guest (QEMU stopped): inspect returns, within a generous bound, with the reason.
	pid := qemuOf("fw")
	if pid == 0 {
		t.Fatal("no QEMU for fw")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	table = inspectTable(t, lab)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("sfclab inspect %s, fw's QEMU stopped:\n%s", lab, table)
	if !strings.Contains(table, "function fw DOWN: list the interfaces of VM node fw in its guest: its guest agent did not answer within") ||
		!regexp.MustCompile(`(?m)^fw\s+function\s+firewall\s+ingress\s.*host side$`).MatchString(table) {
		t.Error("inspect of a stopped guest does not show it down with the reason and its host side")
	}
	if !regexp.MustCompile(`(?m)^lb\s+function\s+l4lb\s+ingress\s.*guest$`).MatchString(table) {
		t.Error("the other guest was not read while fw's was stopped")
	}
	table = inspectTable(t, lab)
	if strings.Contains(table, "DOWN") || !regexp.MustCompile(`(?m)^fw\s+function\s+firewall\s+ingress\s.*guest$`).MatchString(table) {
		t.Errorf("inspect after the guest was continued does not read it again:\n%s", table)
	}

	// A dead guest: down because its QEMU is gone, its host side shown, no error.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); qemuOf("fw") != 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	table = inspectTable(t, lab)
	if !strings.Contains(table, "function fw DOWN: its QEMU process is not running") || strings.Contains(table, "error:") ||
		!regexp.MustCompile(`(?m)^fw\s+function\s+firewall\s+ingress\s.*host side$`).MatchString(table) {
		t.Errorf("inspect of a dead guest:\n%s", table)
	}
	if !regexp.MustCompile(`(?m)^lab ` + lab + ` \(\w+; 1 node down: fw\)$`).MatchString(table) {
		t.Errorf("inspect's status line does not name the dead guest:\n%s", table)
	}
	// Destroyed so, the dead guest's teardown (its nft rules) is skipped with the reason,
	// not attempted and warned about.
	code, out, errOut = run(t, "destroy", lab)
	if code != 0 || strings.Contains(errOut, "warning") ||
		!strings.Contains(errOut, "skipped the teardown of fw (firewall) in its guest: its QEMU process is not running") {
		t.Errorf("destroy of a lab with a dead guest: exit %d\n%s%s", code, out, errOut)
	}
}

// inspectTable runs `sfclab inspect LAB` and returns its table; it fails the test when the
// command fails or does not return within 2 minutes (a guest's reads are bounded far below).
func inspectTable(t *testing.T, lab string) string {
	t.Helper()
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.code, r.out, r.errOut = run(t, "inspect", lab)
		done <- r
	}()
	select {
	case r := <-done:
		if r.code != 0 {
			t.Fatalf("inspect: exit %d\n%s%s", r.code, r.out, r.errOut)
		}
		return r.out
	case <-time.After(2 * time.Minute):
		t.Fatal("sfclab inspect did not return within 2 minutes")
	}
	return ""
}

// A lab with one VM function between namespace endpoints; %s is its name.
const inspectHungLab = `name: %s
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fwd: {kind: forwarder, vm: {cpus: 1, memory: 512}}
chains:
  - {name: c, from: client, to: server, hops: [fwd]}
`

// TestInspectListHungGuests deploys two labs with a VM each and stops both QEMUs (SIGSTOP: the
// guests hang, their agents answer nothing): `sfclab inspect` without a lab name reads the
// guests concurrently, so it returns in about one guest's bound (vm.InspectTimeout), not
// one per hung guest, and names each lab's guest down, the labs in the journal's order.
func TestInspectListHungGuests(t *testing.T) {
	requireVMLab(t)
	labs := []string{"t-goinsp-a", "t-goinsp-b"}
	var stopped []int
	t.Cleanup(func() {
		for _, pid := range stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		for _, lab := range labs {
			if code, out, errOut := run(t, "destroy", lab); code != 0 && !strings.Contains(errOut, "not deployed") {
				t.Errorf("destroy %s: exit %d\n%s%s", lab, code, out, errOut)
			}
			if pids := vm.QEMUPids(lab); len(pids) > 0 {
				t.Errorf("QEMU of %s left: %v", lab, pids)
			}
		}
	})
	for _, lab := range labs {
		if code, out, errOut := run(t, "deploy", writeLabFile(t, fmt.Sprintf(inspectHungLab, lab))); code != 0 {
			t.Fatalf("deploy %s: exit %d\n%s%s", lab, code, out, errOut)
		}
	}
	for _, lab := range labs {
		pids := vm.QEMUPids(lab)
		if len(pids) != 1 {
			t.Fatalf("QEMU of %s: %v, want one", lab, pids)
		}
		if err := syscall.Kill(pids[0], syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		stopped = append(stopped, pids[0])
	}
	start := time.Now()
	code, out, errOut := run(t, "inspect")
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("inspect: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("sfclab inspect with both guests stopped, %s:\n%s", took.Round(10*time.Millisecond), out)
	// Read one after another, the two would take two bounds and more.
	if took >= 2*vm.InspectTimeout {
		t.Errorf("inspect took %s with two hung guests; want less than two bounds (%s): their reads did not overlap", took, 2*vm.InspectTimeout)
	}
	rows := regexp.MustCompile(`(?m)^(t-goinsp-[ab])\s+\w+; 1 node down: fwd\s`).FindAllStringSubmatch(out, -1)
	if len(rows) != 2 || rows[0][1] != labs[0] || rows[1][1] != labs[1] {
		t.Errorf("inspect's list does not name both labs' guest down, in order: %q", rows)
	}
	var infos []deploy.LabInfo
	if code, js, errOut := run(t, "inspect", "--format", "json"); code != 0 || json.Unmarshal([]byte(js), &infos) != nil || len(infos) != 2 {
		t.Fatalf("inspect --format json: exit %d\n%s%s", code, js, errOut)
	}
	for k, info := range infos {
		var fwd *deploy.NodeInfo
		for i := range info.Nodes {
			if info.Nodes[i].Name == "fwd" {
				fwd = &info.Nodes[i]
			}
		}
		if info.Lab != labs[k] || fwd == nil || !strings.Contains(fwd.Down, "did not answer within") {
			t.Errorf("inspect --format json, lab %d: %s, fwd %+v; want %s with fwd down, its agent not answering", k, info.Lab, fwd, labs[k])
		}
	}
}
