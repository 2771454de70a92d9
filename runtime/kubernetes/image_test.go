package kubernetes

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
)

// TestPodImage: a lab's docker.image runs in its pods; the agent keeps sfclab's node image
// (it is shared by every lab on the cluster).
func TestPodImage(t *testing.T) {
	r := Runtime{Image: "sfclab/node:t"}
	n := &plan.Node{Name: "fw"}
	for _, tc := range []struct{ image, want string }{{"", "sfclab/node:t"}, {"example.org/mine:1", "example.org/mine:1"}} {
		p := &plan.Plan{Lab: "k8simg", Image: tc.image, Nodes: []*plan.Node{n}}
		pod := r.podSpec(p, n, "localhost", "/s/n", "/s/n", "")
		c := pod["spec"].(map[string]any)["containers"].([]map[string]any)[0]
		if c["image"] != tc.want {
			t.Errorf("docker.image %q: pod image %v, want %s", tc.image, c["image"], tc.want)
		}
	}
	ds := r.agentSpec("/opt/sfclab")
	c := ds["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]map[string]any)[0]
	if c["image"] != "sfclab/node:t" {
		t.Errorf("agent image %v, want sfclab's node image", c["image"])
	}
}

// shNode runs commands with the real /bin/sh on this machine, with PATH holding only dir: an
// image whose programs are the files in dir.
type shNode struct {
	runtime.Node
	dir   string
	calls int
}

func (n *shNode) Output(ctx context.Context, _ []byte, argv ...string) ([]byte, error) {
	n.calls++
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + n.dir}
	return cmd.Output()
}

// TestCheckPrograms: the programs a lab's functions and run commands need are looked for in
// one command; the missing ones are named with the nodes needing them and what to do.
func TestCheckPrograms(t *testing.T) {
	dir := t.TempDir()
	for _, prog := range []string{"nft", "iperf3"} {
		if err := os.WriteFile(filepath.Join(dir, prog), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &plan.Plan{Lab: "k8simg", Image: "example.org/mine:1", Nodes: []*plan.Node{
		{Name: "client", Run: []string{"iperf3 -s -D"}},
		{Name: "fw", Run: []string{"nft list ruleset", "haproxy -v"}},
		{Name: "lb", Run: []string{"haproxy -v"}},
	}}
	n := &shNode{dir: dir}
	err := checkPrograms(context.Background(), p, n)
	want := "check programs in image example.org/mine:1: missing: haproxy (needed by fw, lb); add them to the image (and import it on the cluster's nodes) or use sfclab's own (remove docker.image)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	if n.calls != 1 {
		t.Errorf("%d commands in the pod, want 1", n.calls)
	}
	if err := os.WriteFile(filepath.Join(dir, "haproxy"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkPrograms(context.Background(), p, &shNode{dir: dir}); err != nil {
		t.Errorf("every program there: %v", err)
	}
	if err := checkPrograms(context.Background(), p, &shNode{dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "missing: haproxy (needed by fw, lb); iperf3 (needed by client); nft (needed by fw)") {
		t.Errorf("empty image: %v", err)
	}
	if err := checkPrograms(context.Background(), p, failNode{}); err == nil || !strings.Contains(err.Error(), "check programs in image example.org/mine:1: no shell") {
		t.Errorf("a pod where the check cannot run: %v", err)
	}
}

type failNode struct{ runtime.Node }

func (failNode) Output(context.Context, []byte, ...string) ([]byte, error) {
	return nil, errors.New("no shell")
}
