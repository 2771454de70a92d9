package docker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/nettest"
	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/lb"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/vnf"
)

// TestSfclabLBOnDocker deploys l4lb impl sfclab on docker: the balancer runs inside the lb
// node's container (the test binary, mounted read-only at SfclabPath, stands in for sfclab),
// carries 1 MiB each way through every backend unchanged, counts the bytes per backend, and
// is gone after destroy.
func TestSfclabLBOnDocker(t *testing.T) {
	requireEngine(t)
	d := deployer(t)
	p := plantest.Decode(t, `name: t-dk-sfclb
runtime: docker
endpoints:
  client: {kind: client}
  web: {kind: server, instances: 2}
functions:
  lb: {kind: l4lb, params: {impl: sfclab, port: 7000, balance: roundrobin, check_interval: 100ms, rise: 1, fall: 2}}
chains:
  - {name: web, from: client, to: web, hops: [lb]}
`)
	deployLab(t, d, p)
	lbPlan := p.Node("lb")
	f := lbPlan.Function
	for _, be := range f.Backends {
		echoIn(t, node(t, d, p, be.Name), fmt.Sprintf("%s:%d", be.Addr, be.Port), be.Name)
	}
	lbNode := node(t, d, p, "lb")
	statsPath := vnf.Env{Plan: lbPlan, StateDir: d.Journal.NodeDir(p.Lab)}.Path(".lb.sock")
	pidData, err := os.ReadFile(vnf.Env{Plan: lbPlan, StateDir: d.Journal.NodeDir(p.Lab)}.Path(".lb.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(pidData), &pid)
	// The balancer is the mounted program (seen at its path inside the container), in the
	// container's namespaces, not a host process.
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatalf("balancer pid %d: %v", pid, err)
	}
	if exe != docker.SfclabPath {
		t.Errorf("balancer pid %d runs %s, want the mounted %s", pid, exe, docker.SfclabPath)
	}
	a, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	b, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", lbNode.PID))
	if a == "" || a != b {
		t.Errorf("balancer pid %d is in mount namespace %s, the container in %s", pid, a, b)
	}
	out, err := lbNode.Output(context.Background(), nil, "sh", "-c", "test -x "+docker.SfclabPath+" && ! test -w "+docker.SfclabPath+" && echo ok")
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("%s in the lb container is not a read-only program: %q, %v", docker.SfclabPath, out, err)
	}

	// Health checks find the backends up once they listen.
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := lb.ReadStats(context.Background(), statsPath)
		if err == nil && len(st.Backends) == 2 && st.Backends[0].Up && st.Backends[1].Up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backends not up 5 s after they listen: %+v, %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before, err := lb.ReadStats(context.Background(), statsPath)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("%s:%d", f.IngressAddr, f.Port)
	const size = 1 << 20
	seen := map[string]bool{}
	for range 2 * len(f.Backends) {
		seen[echoThrough(t, node(t, d, p, "client"), addr, size)] = true
	}
	for _, be := range f.Backends {
		if !seen[be.Name] {
			t.Errorf("backend %s answered no connection of %d (roundrobin): %v", be.Name, 2*len(f.Backends), seen)
		}
	}
	after, err := lb.ReadStats(context.Background(), statsPath)
	if err != nil {
		t.Fatal(err)
	}
	for i, be := range after.Backends {
		// Two connections per backend, 1 MiB each way (the name header is extra).
		if in := be.BytesIn - before.Backends[i].BytesIn; in != 2*size {
			t.Errorf("backend %s: %d bytes in through the balancer, want %d", be.Name, in, 2*size)
		}
		if out := be.BytesOut - before.Backends[i].BytesOut; out < 2*size {
			t.Errorf("backend %s: %d bytes out through the balancer, want >= %d", be.Name, out, 2*size)
		}
	}
	if err := d.Destroy(context.Background(), p.Lab); err != nil {
		t.Fatal(err)
	}
	if processAlive(pid) {
		t.Errorf("balancer pid %d still runs after destroy", pid)
	}
}

// echoIn serves TCP inside a node: each connection gets the server's name (8 bytes), then
// its own bytes back.
func echoIn(t *testing.T, n *docker.Node, addr, name string) {
	t.Helper()
	nettest.ServeIn(t, n, addr, func(c net.Conn) {
		fmt.Fprintf(c, "%-8s", name)
		_, _ = io.Copy(c, c)
	})
}

// echoThrough connects from a node, sends size random bytes, checks they come back unchanged
// and returns the name of the server that answered.
func echoThrough(t *testing.T, n *docker.Node, addr string, size int) string {
	t.Helper()
	var c net.Conn
	if err := n.Do(func() (err error) { c, err = net.DialTimeout("tcp", addr, 3*time.Second); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	data := make([]byte, size)
	rand.Read(data)
	sent := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		c.(*net.TCPConn).CloseWrite()
		sent <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read through %s: %v", addr, err)
	}
	if err := <-sent; err != nil {
		t.Fatalf("write through %s: %v", addr, err)
	}
	if len(got) != 8+size || !bytes.Equal(got[8:], data) {
		t.Fatalf("through %s: got %d bytes back, want 8+%d, equal: %v", addr, len(got), size, len(got) == 8+size && bytes.Equal(got[8:], data))
	}
	return strings.TrimSpace(string(got[:8]))
}
