package oracle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestStartStop starts the real server, reads a list from it, stops it and checks that no
// process of its group and none of its files are left.
func TestStartStop(t *testing.T) {
	o, err := Start(context.Background())
	if errors.Is(err, ErrMissing) {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer o.Stop()
	resp, err := http.Get(o.URL + "/v2.0/sfc/port_chains")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"port_chains": []}` {
		t.Fatalf("GET port_chains: %d %s", resp.StatusCode, body)
	}
	pgid := o.cmd.Process.Pid
	o.Stop()
	if out, err := exec.Command("pgrep", "-g", strconv.Itoa(pgid)).Output(); err == nil {
		t.Errorf("processes of the oracle's group %d are left: %s", pgid, out)
	}
	if _, err := os.Stat(o.dir); !os.IsNotExist(err) {
		t.Errorf("the oracle's directory %s is left: %v", o.dir, err)
	}
}
