package pktgen

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/sfclab/sfclab/internal/vethpair"
)

// holdEnv makes the test binary a child that attaches the generator and the reflector in the
// namespaces named in it ("A,B,indexA,indexB,macs..."), says "ready" and waits to be killed.
const holdEnv = "SFCLAB_PKTGEN_HOLD"

func TestMain(m *testing.M) {
	if v := os.Getenv(holdEnv); v != "" {
		os.Exit(hold(v))
	}
	os.Exit(m.Run())
}

func hold(v string) int {
	var p vethpair.Pair
	f := strings.Split(v, ",")
	p.A, p.B = f[0], f[1]
	var idxA, idxB int
	_ = p.Do(p.A, func() error { idxA = ifindex("va"); return nil })
	_ = p.Do(p.B, func() error { idxB = ifindex("vb"); return nil })
	if err := p.Do(p.B, func() error { _, err := NewFar([]int{idxB}, 9, Reflect); return err }); err != nil {
		println(err.Error())
		return 1
	}
	flow := Flow{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), Src: p.AddrA, Dst: p.AddrB, SrcPort: 1, DstPort: 9}
	flow.Src, flow.Dst = mustAddr("198.18.250.1"), mustAddr("198.18.250.2")
	if err := p.Do(p.A, func() error { _, err := NewGenerator(idxA, flow, []int{64}, 0); return err }); err != nil {
		println(err.Error())
		return 1
	}
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
	return 0
}

// sfcPrograms lists the ids of loaded programs whose names this package gives.
func sfcPrograms(t *testing.T) []ebpf.ProgramID {
	ids, err := Loaded()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestKilledHolderLeavesNoProgram: a process that attached the generator, its echo program
// and a reflector is killed with SIGKILL; the kernel detaches everything (unpinned links die
// with their last file descriptor), so no sfc_ program stays loaded or attached.
func TestKilledHolderLeavesNoProgram(t *testing.T) {
	setupRoot(t)
	p := vethpair.New(t)
	before := len(sfcPrograms(t))
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+p.A+","+p.B)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("holder said %q", line)
	}
	attached := func() string {
		a, _ := exec.Command("ip", "-n", p.A, "link", "show").CombinedOutput()
		b, _ := exec.Command("ip", "-n", p.B, "link", "show").CombinedOutput()
		return string(a) + string(b)
	}
	if during := len(sfcPrograms(t)); during < before+4 || !strings.Contains(attached(), "xdp") {
		t.Fatalf("holder's programs not seen: %d sfc_ programs (before %d), links:\n%s", during, before, attached())
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := len(sfcPrograms(t)) - before
		links := attached()
		if left <= 0 && !strings.Contains(links, "xdp") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after kill -9: %d sfc_ programs left, links:\n%s", left, links)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
