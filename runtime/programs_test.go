package runtime

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// shNode runs commands with the real /bin/sh on this machine, with PATH holding only dir: an
// image whose programs are the files in dir.
type shNode struct {
	Node
	dir   string
	calls int
	argv  []string
}

func (n *shNode) Output(ctx context.Context, _ []byte, argv ...string) ([]byte, error) {
	n.calls++
	n.argv = argv
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + n.dir}
	return cmd.Output()
}

// failNode is a node where nothing runs.
type failNode struct{ Node }

func (failNode) Output(context.Context, []byte, ...string) ([]byte, error) {
	return nil, errors.New("no shell")
}

// TestCheckImagePrograms: the script looks every program up in one command, sorted; the
// message names the image, each missing program with its nodes in order, and what to do,
// with the runtime's own words on how the image reaches it.
func TestCheckImagePrograms(t *testing.T) {
	needs := map[string][]string{"nft": {"fw"}, "haproxy": {"fw", "lb"}, "iperf3": {"client"}, "my prog": {"m"}}
	const image = "example.org/mine:1"
	for _, tc := range []struct {
		name      string
		has       []string
		needs     map[string][]string
		also      string
		want      string // "" is no error
		wantCalls int
	}{
		{name: "every program there", has: []string{"nft", "haproxy", "iperf3", "my prog"}, needs: needs, wantCalls: 1},
		{name: "one missing", has: []string{"nft", "iperf3", "my prog"}, needs: needs, wantCalls: 1,
			want: "check programs in image example.org/mine:1: missing: haproxy (needed by fw, lb); add them to the image or use sfclab's own (remove docker.image)"},
		{name: "kubernetes words", has: []string{"nft", "iperf3", "my prog"}, needs: needs, also: "(and import it on the cluster's nodes)", wantCalls: 1,
			want: "check programs in image example.org/mine:1: missing: haproxy (needed by fw, lb); add them to the image (and import it on the cluster's nodes) or use sfclab's own (remove docker.image)"},
		{name: "empty image", needs: map[string][]string{"nft": {"fw"}, "haproxy": {"fw", "lb"}, "iperf3": {"client"}}, wantCalls: 1,
			want: "check programs in image example.org/mine:1: missing: haproxy (needed by fw, lb); iperf3 (needed by client); nft (needed by fw); add them to the image or use sfclab's own (remove docker.image)"},
		{name: "nothing needed", needs: nil, wantCalls: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, prog := range tc.has {
				if err := os.WriteFile(filepath.Join(dir, prog), []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			n := &shNode{dir: dir}
			err := CheckImagePrograms(context.Background(), n, image, tc.needs, tc.also)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("err = %v\nwant %s", err, tc.want)
			}
			if n.calls != tc.wantCalls {
				t.Errorf("%d commands in the node, want %d", n.calls, tc.wantCalls)
			}
			if n.calls == 1 {
				wantArgv := "/bin/sh|-c|" + programsScript + "|sh"
				for _, p := range []string{"haproxy", "iperf3", "my prog", "nft"} {
					if _, ok := tc.needs[p]; ok {
						wantArgv += "|" + p
					}
				}
				if got := strings.Join(n.argv, "|"); got != wantArgv {
					t.Errorf("command %q, want %q (one shell, programs sorted)", got, wantArgv)
				}
			}
		})
	}
	err := CheckImagePrograms(context.Background(), failNode{}, image, needs, "")
	if err == nil || err.Error() != "check programs in image example.org/mine:1: no shell" {
		t.Errorf("a node where the check cannot run: %v", err)
	}
}
