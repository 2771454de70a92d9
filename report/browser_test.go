package report

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFirstScreenInBrowser opens synthetic study reports in headless Chromium at 1300 px
// and checks, with scripts/report-first-screen.sh, that the conclusions end inside the first
// screen: five conclusions with evidence as long as the studies' verdict rules write.
func TestFirstScreenInBrowser(t *testing.T) {
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("SKIP: no chromium on this machine (./scripts/install-deps.sh --browser installs it)")
	}
	long := "throughput 0.85× baseline (geometric mean of 6 paired repetitions, 95 % CI [0.80, 0.91], Wilcoxon signed-rank p = 0.031); " +
		"published 0.67×; rule: equivalence when the ratio lies in the published ratio ±25 % and its CI in ±40 %, the band from the study's own spread"
	in := sampleInput()
	in.Published.Claims = nil
	for _, text := range []string{"adding the L3 firewall reduces throughput by about 33 %", "adding the L4 load balancer reduces throughput by about 92 %",
		"the L3 firewall nearly doubles latency", "the kernel-space firewall adds almost no CPU of its own",
		"the user-space L4 load balancer is the bottleneck (the main source of CPU saturation)"} {
		in.Published.Claims = append(in.Published.Claims, Claim{Text: text, Check: func(*Report) ClaimResult {
			return ClaimResult{Outcome: HoldsDirection, Evidence: long}
		}})
	}
	in.Run.Env["docker"], in.Run.Env["docker_storage_driver"], in.Run.Env["cgroup"] = "20.10.24+dfsg1", "fuse-overlayfs", "v1 (hybrid: v2 also at unified)"
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := r.HTML(&page); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	html := filepath.Join(dir, "report.html")
	if err := os.WriteFile(html, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("../scripts/report-first-screen.sh", html, filepath.Join(dir, "first.png")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all in view") {
		t.Errorf("first screen: %v\n%s", err, out)
	}
}
