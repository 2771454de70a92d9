package cli

import (
	"errors"
	"net"
	"strings"
	"testing"
)

func TestMetricsPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := listenMetrics(ln.Addr().String()); !errors.Is(err, errPortInUse) {
		t.Fatalf("listen on a taken port: got %v, want errPortInUse", err)
	}
	requireRoot(t)
	code, _, stderr := run(t, "metrics", "--listen", ln.Addr().String())
	if code != 1 || !strings.Contains(stderr, "already in use") || !strings.Contains(stderr, "--listen") {
		t.Errorf("exit %d, stderr %q: want exit 1 naming the taken address and --listen", code, stderr)
	}
}
