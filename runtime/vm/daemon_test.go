package vm_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/httpproxy"
	"github.com/sfclab/sfclab/vnf/httpserver"
	"github.com/sfclab/sfclab/vnf/kinds"
)

const squidLab = `
name: t-vmsquid
endpoints:
  client: {kind: client}
  web: {kind: http-server, vm: {}, http: {objects: [1k, 100k]}}
functions:
  proxy:
    kind: http-proxy
    vm: {cpus: 1}
    params: {port: 3128}
chains:
  - {name: web, from: client, to: web, hops: [proxy]}
`

// proxyClient is an HTTP client whose connections are made in node (a namespace), every
// request sent through the proxy at addr.
func proxyClient(node runtime.Node, addr string) *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr}),
		DialContext: func(ctx context.Context, network, a string) (c net.Conn, err error) {
			err = node.Do(func() error {
				c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, a)
				return err
			})
			return c, err
		},
		DisableKeepAlives: true,
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// TestVMSquid deploys Squid in a VM (the http-proxy kind's own Setup: its configuration
// written on the host into the node directory the guest mounts, Squid started and
// health-checked in the guest through the agent) between a namespace client and an Apache
// origin in a second VM (the http-server kind's readiness check made in its guest), fetches
// objects through it, then tears both down and checks that Squid and Apache are gone from
// their guests.
func TestVMSquid(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	t0 := time.Now()
	l := labtest.Deploy(t, squidLab)
	t.Logf("deploy %.2fs", time.Since(t0).Seconds())
	if rec, err := vm.ReadBoot(l.P.Lab, "proxy"); err == nil {
		t.Logf("boot: %s", rec.Phases())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	env := l.VnfEnv(t, "proxy")
	dir := httpproxy.Dir(env)
	data, err := os.ReadFile(filepath.Join(dir, httpproxy.DaemonFile))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	// The daemon runs in the guest, not on the host: its number is the guest's.
	out, err := env.Node.Output(ctx, nil, "cat", "/proc/"+strconv.Itoa(pid)+"/cmdline")
	if err != nil || !strings.Contains(string(out), "squid") {
		t.Fatalf("guest process %d: %q, %v; want squid", pid, out, err)
	}
	// Squid wrote its log as its own user on the shared directory, seen on the host.
	if st, err := os.Stat(filepath.Join(dir, httpproxy.CacheLogFile)); err != nil || st.Size() == 0 {
		t.Fatalf("squid's cache.log on the host: %v", err)
	}

	f := l.P.Node("proxy").Function
	proxy := net.JoinHostPort(f.IngressAddr.String(), strconv.Itoa(int(f.Port)))
	c := proxyClient(l.Node(t, "client"), proxy)
	origin := l.P.Node("web").Interfaces[0].Address.Addr().String()
	for _, obj := range []struct {
		name string
		size int64
	}{{"1k", 1 << 10}, {"100k", 100 << 10}} {
		u := "http://" + origin + spec.ObjectPath(obj.name)
		for i := range 3 {
			start := time.Now()
			resp, err := c.Get(u)
			if err != nil {
				t.Fatalf("GET %s through the VM's Squid: %v", u, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Via"), "squid") {
				t.Fatalf("GET %s: %s, Via %q; want 200 through squid", u, resp.Status, resp.Header.Get("Via"))
			}
			want, _ := io.ReadAll(httpserver.Content(obj.size))
			if !bytes.Equal(body, want) {
				t.Fatalf("GET %s: %d bytes differ from the origin's %d", u, len(body), len(want))
			}
			t.Logf("GET %s #%d through the VM's Squid: %.1f ms", obj.name, i+1, time.Since(start).Seconds()*1000)
		}
	}

	// The origin is Apache in its own guest, started and checked there by the kind's Setup.
	webEnv := l.VnfEnv(t, "web")
	data, err = os.ReadFile(filepath.Join(httpserver.Dir(webEnv), httpserver.DaemonFile))
	if err != nil {
		t.Fatal(err)
	}
	webPid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if out, err := webEnv.Node.Output(ctx, nil, "cat", "/proc/"+strconv.Itoa(webPid)+"/cmdline"); err != nil || !strings.Contains(string(out), "apache2") {
		t.Fatalf("guest process %d of web: %q, %v; want apache2", webPid, out, err)
	}
	if err := (httpserver.Server{}).Teardown(ctx, webEnv); err != nil {
		t.Fatal(err)
	}
	if vnf.Runs(webEnv.Node, webPid) {
		t.Errorf("apache2 (guest process %d) still runs after Teardown", webPid)
	}

	// Teardown stops Squid in the guest, by the kind's own code.
	if err := (httpproxy.Proxy{}).Teardown(ctx, env); err != nil {
		t.Fatal(err)
	}
	if vnf.GroupRuns(env.Node, pid, "squid") {
		t.Errorf("squid (guest process group %d) still runs after Teardown", pid)
	}
	if err := vnf.CheckDial(ctx, env.Node, proxy, time.Second); err == nil {
		t.Errorf("%s still accepts connections after Teardown", proxy)
	}
}

const haproxyLab = `
name: t-vmlb
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  lb:
    kind: l4lb
    vm: {cpus: 1}
    params: {impl: haproxy, port: 5201, threads: 1}
chains:
  - {name: c, from: client, to: server, classifier: {protocol: tcp, destination_port: 5201}, hops: [lb]}
`

const sfclbLab = `
name: t-vmslb
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  lb:
    kind: l4lb
    vm: {cpus: 1}
    params: {impl: sfclab, port: 5201, balance: source}
chains:
  - {name: c, from: client, to: server, classifier: {protocol: tcp, destination_port: 5201}, hops: [lb]}
`

// TestVMSfclabLB deploys sfclab's own balancer (l4lb impl sfclab) in a VM: the guest's init,
// the sfclab binary, started as `sfclab lb` by the kind's Setup and found ready by its
// listening socket in the guest; an iperf3 transfer goes through it, the kind's Check finds it
// running and its Teardown stops it in the guest.
func TestVMSfclabLB(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	l := labtest.Deploy(t, sfclbLab)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bps := iperfThrough(ctx, t, l)
	t.Logf("TCP through sfclab lb in the VM (TCG: not comparable): %.2f Gbit/s", bps/1e9)
	env := l.VnfEnv(t, "lb")
	data, err := os.ReadFile(env.Path(".lb.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if out, err := env.Node.Output(ctx, nil, "cat", "/proc/"+strconv.Itoa(pid)+"/cmdline"); err != nil || !strings.Contains(string(out), "lb") {
		t.Fatalf("guest process %d: %q, %v; want the balancer", pid, out, err)
	}
	k, err := kinds.Get("l4lb")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.(interface {
		Check(context.Context, vnf.Env) error
	}).Check(ctx, env); err != nil {
		t.Fatalf("Check of the running balancer: %v", err)
	}
	if err := k.Teardown(ctx, env); err != nil {
		t.Fatal(err)
	}
	if vnf.Runs(env.Node, pid) {
		t.Errorf("sfclab lb (guest pid %d) still runs after Teardown", pid)
	}
}

// iperfThrough runs an iperf3 server in the lab's server namespace, waits until it accepts,
// and returns the bit rate of a 2 s TCP transfer from the client to lb's address.
func iperfThrough(ctx context.Context, t *testing.T, l *labtest.Lab) float64 {
	t.Helper()
	client, server := l.Node(t, "client"), l.Node(t, "server")
	srv := exec.Command("iperf3", "-s", "-p", "5201")
	srvNode, ok := server.(interface{ Start(*exec.Cmd) error })
	if !ok {
		t.Fatalf("server node %T cannot start a process", server)
	}
	if err := srvNode.Start(srv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	srvAddr := net.JoinHostPort(l.P.Node("server").Interfaces[0].Address.Addr().String(), "5201")
	for deadline := time.Now().Add(10 * time.Second); vnf.CheckDial(ctx, server, srvAddr, time.Second) != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("iperf3 server does not accept on %s", srvAddr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f := l.P.Node("lb").Function
	out, err := client.Output(ctx, nil, "iperf3", "-c", f.IngressAddr.String(), "-p", "5201", "-t", "2", "-J")
	if err != nil {
		t.Fatalf("iperf3 through the VM's balancer: %v", err)
	}
	res, err := iperf3.Parse(out)
	if err != nil || res.ReceivedBPS <= 0 {
		t.Fatalf("iperf3 result %v: %.200s", err, out)
	}
	return res.ReceivedBPS
}

// TestVMHAProxy deploys HAProxy (l4lb) in a VM, started and health-checked in the guest by the
// kind's own Setup, carries an iperf3 transfer through it, and checks that Teardown stops it.
func TestVMHAProxy(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	l := labtest.Deploy(t, haproxyLab)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, server := l.Node(t, "client"), l.Node(t, "server")
	srv := exec.Command("iperf3", "-s", "-p", "5201")
	srvNode, ok := server.(interface{ Start(*exec.Cmd) error })
	if !ok {
		t.Fatalf("server node %T cannot start a process", server)
	}
	if err := srvNode.Start(srv); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	// HAProxy closes a client's connection when the server does not accept: wait until it does.
	srvAddr := net.JoinHostPort(l.P.Node("server").Interfaces[0].Address.Addr().String(), "5201")
	for deadline := time.Now().Add(10 * time.Second); vnf.CheckDial(ctx, server, srvAddr, time.Second) != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("iperf3 server does not accept on %s", srvAddr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f := l.P.Node("lb").Function
	out, err := client.Output(ctx, nil, "iperf3", "-c", f.IngressAddr.String(), "-p", "5201", "-t", "2", "-J")
	if err != nil {
		t.Fatalf("iperf3 through the VM's HAProxy: %v", err)
	}
	res, err := iperf3.Parse(out)
	if err != nil || res.ReceivedBPS <= 0 {
		t.Fatalf("iperf3 result %v: %.200s", err, out)
	}
	t.Logf("TCP through HAProxy in the VM (TCG: not comparable): %.2f Gbit/s", res.ReceivedBPS/1e9)
	env := l.VnfEnv(t, "lb")
	data, err := os.ReadFile(env.Path(".haproxy.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if !vnf.Runs(env.Node, pid) {
		t.Fatalf("haproxy (guest pid %d) does not run", pid)
	}
	lb, err := kinds.Get("l4lb")
	if err != nil {
		t.Fatal(err)
	}
	if err := lb.Teardown(ctx, env); err != nil {
		t.Fatal(err)
	}
	if vnf.Runs(env.Node, pid) {
		t.Errorf("haproxy (guest pid %d) still runs after Teardown", pid)
	}
}
