package httpserver_test

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/httpserver"
)

var update = flag.Bool("update", false, "rewrite golden files")

func lab(name, server string) string {
	return `
name: ` + name + `
endpoints:
  client: {kind: client}
  web: {kind: http-server, http: {server: ` + server + `, port: 8080, objects: [1k, 10k, 1M]}}
chains:
  - {name: web, from: client, to: web}
`
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./vnf/httpserver -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n%s", name, path, got)
	}
}

// TestConfigGolden pins the Apache and nginx configurations, with and without access log.
func TestConfigGolden(t *testing.T) {
	dir := "/run/sfclab/labs/t-golden/nodes/web.www"
	for _, server := range []string{httpserver.ServerApache, httpserver.ServerNginx} {
		f := labtest.Plan(t, lab("t-golden", server)).Node("web").Function
		render := func(s httpserver.Server) string {
			if server == httpserver.ServerNginx {
				return s.NginxConfig(f, dir)
			}
			return s.ApacheConfig(f, dir)
		}
		golden(t, server+".conf", render(httpserver.Server{}))
		golden(t, server+".access-log.conf", render(httpserver.Server{AccessLog: true}))
	}
}

// TestContent checks objects are deterministic, the right size, and not all zeros.
func TestContent(t *testing.T) {
	for _, size := range []int64{1, 7, 8, 1024, 10240, 1 << 20} {
		a, _ := io.ReadAll(httpserver.Content(size))
		var b bytes.Buffer
		// Read in odd chunk sizes: the stream must not depend on how it is read.
		r := httpserver.Content(size)
		buf := make([]byte, 13)
		for {
			n, err := r.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if int64(len(a)) != size || !bytes.Equal(a, b.Bytes()) {
			t.Errorf("Content(%d): %d bytes, chunked read equal %v", size, len(a), bytes.Equal(a, b.Bytes()))
		}
		if size >= 8 && bytes.Count(a, []byte{0}) > len(a)/16 {
			t.Errorf("Content(%d) is mostly zeros", size)
		}
	}
	a, _ := io.ReadAll(httpserver.Content(1024))
	b, _ := io.ReadAll(httpserver.Content(1025))
	if bytes.Equal(a, b[:1024]) {
		t.Errorf("objects of different sizes share their bytes")
	}
}

func get(node runtime.Node, u string) (*http.Response, []byte, error) {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = node.Do(func() error {
			c, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}, DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(u)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// TestServers deploys client -> web with Apache and with nginx, fetches every object from the
// client, then tears the server down and checks it is gone.
func TestServers(t *testing.T) {
	for _, server := range []string{httpserver.ServerApache, httpserver.ServerNginx} {
		t.Run(server, func(t *testing.T) {
			l := labtest.Deploy(t, lab("t-www-"+server[:3], server))
			c := l.P.Chains[0]
			client := l.Node(t, "client")
			for _, o := range []string{"1k", "10k", "1M"} {
				size, _ := spec.ParseSize(o)
				want, _ := io.ReadAll(httpserver.Content(size))
				u := "http://" + net.JoinHostPort(c.Target.String(), "8080") + spec.ObjectPath(o)
				resp, body, err := get(client, u)
				if err != nil {
					t.Fatalf("GET %s: %v", u, err)
				}
				if resp.StatusCode != 200 || !bytes.Equal(body, want) {
					t.Errorf("GET %s: %s, %d bytes; want 200 and the %d bytes of Content", u, resp.Status, len(body), size)
				}
				if lm, err := http.ParseTime(resp.Header.Get("Last-Modified")); err != nil || !lm.Equal(httpserver.ObjectTime) {
					t.Errorf("GET %s: Last-Modified %q, want %s", u, resp.Header.Get("Last-Modified"), httpserver.ObjectTime)
				}
			}
			if resp, _, err := get(client, "http://"+net.JoinHostPort(c.Target.String(), "8080")+"/obj-2k"); err != nil || resp.StatusCode != 404 {
				t.Errorf("GET /obj-2k: %v %v; want 404", resp, err)
			}
			env := l.VnfEnv(t, "web")
			for i := 0; i < 2; i++ {
				if err := (httpserver.Server{}).Teardown(context.Background(), env); err != nil {
					t.Fatalf("teardown %d: %v", i+1, err)
				}
			}
			if _, _, err := get(client, "http://"+net.JoinHostPort(c.Target.String(), "8080")+"/obj-1k"); err == nil {
				t.Errorf("%s still serves after teardown", server)
			}
			// Set up again with an access log: requests are logged.
			s := httpserver.Server{AccessLog: true}
			if err := s.Setup(context.Background(), env); err != nil {
				t.Fatal(err)
			}
			if _, _, err := get(client, "http://"+net.JoinHostPort(c.Target.String(), "8080")+"/obj-10k"); err != nil {
				t.Fatal(err)
			}
			// nginx and Apache write the line after the answer: a worker descheduled on a busy
			// host writes it late (stalls of 8-34 ms were seen there), so look for up to 5 s; a
			// server that does not log never writes it.
			var log []byte
			var err error
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				log, err = os.ReadFile(filepath.Join(httpserver.Dir(env), httpserver.AccessFile))
				if err == nil && strings.Contains(string(log), "GET /obj-10k") || time.Now().After(deadline) {
					break
				}
			}
			if err != nil || !strings.Contains(string(log), "GET /obj-10k") {
				t.Errorf("access log: %v\n%s", err, log)
			}
		})
	}
}

// TestPortInUse checks a second server on a taken port fails with the server's own words.
func TestPortInUse(t *testing.T) {
	l := labtest.Deploy(t, lab("t-www-port", httpserver.ServerApache))
	env := l.VnfEnv(t, "web")
	for _, server := range []string{httpserver.ServerApache, httpserver.ServerNginx} {
		dup := env
		p := *env.Plan
		p.Name = "web-dup-" + server
		f := *p.Function
		hp := *f.Params.(*httpserver.HTTPServerParams)
		hp.Server = server
		f.Params = &hp
		p.Function = &f
		dup.Plan = &p
		t0 := time.Now()
		err := httpserver.Server{}.Setup(context.Background(), dup)
		if terr := (httpserver.Server{}).Teardown(context.Background(), dup); terr != nil {
			t.Error(terr)
		}
		if err == nil || !strings.Contains(err.Error(), "in use") {
			t.Errorf("%s on a taken port: %v; want 'Address already in use'", server, err)
		} else {
			t.Logf("%s on a taken port (%s): %v", server, time.Since(t0).Round(time.Millisecond), err)
		}
	}
}
