// Package oracle runs the real networking-sfc server on this machine, for differential
// tests of `sfclab serve`: Debian's neutron-server with the flow classifier and SFC service
// plugins and networking-sfc's dummy drivers (control plane only: nothing is steered), ML2
// with the local and flat type drivers and no mechanism driver, no Keystone (noauth), no
// message broker (fake://), its database an SQLite file whose schema is created from the
// models' table definitions with foreign keys enforced. It binds 127.0.0.1 on a free port;
// its configuration, database and log live in a temporary directory that Stop removes.
package oracle

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"
)

// Python is the interpreter the server runs with: Debian's, where python3-neutron and
// python3-networking-sfc install (another python3 may come first on PATH).
const Python = "/usr/bin/python3"

// Packages are the Debian packages the oracle needs (scripts/install-deps.sh installs them).
var Packages = []string{"neutron-server", "python3-networking-sfc"}

// StartTimeout bounds how long Start waits for the server's first answer.
const StartTimeout = 90 * time.Second

//go:embed boot.py
var bootPy []byte

//go:embed neutron.conf.tmpl
var confTmpl string

// ErrMissing says this machine lacks what the oracle needs.
var ErrMissing = errors.New("the real networking-sfc server is not installed")

// Available reports whether the oracle can run here: nil, or an error wrapping ErrMissing
// that names the packages to install. The answer is found once per process (importing
// neutron takes Python 2-3 s of CPU here) and kept: Start asks again.
func Available() error {
	available.Do(func() { available.err = findAvailable() })
	return available.err
}

// available is Available's answer, found once.
var available struct {
	sync.Once
	err error
}

func findAvailable() error {
	if _, err := os.Stat("/etc/neutron/api-paste.ini"); err != nil {
		return fmt.Errorf("%w: no /etc/neutron/api-paste.ini (apt-get install %s)", ErrMissing, strings.Join(Packages, " "))
	}
	out, err := exec.Command(Python, "-c", "import neutron.cmd.eventlet.server, networking_sfc.db.sfc_db").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s cannot import neutron and networking_sfc (apt-get install %s): %s",
			ErrMissing, Python, strings.Join(Packages, " "), strings.TrimSpace(string(out)))
	}
	return nil
}

// Version is the installed networking-sfc and neutron, as Debian's package versions say
// ("networking-sfc 15.0.0-1, neutron 2:21.0.0-7+deb12u1"), or "unknown versions".
func Version() string {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}\\n", "python3-networking-sfc", "python3-neutron").Output()
	v := strings.Fields(string(out))
	if err != nil || len(v) != 2 {
		return "unknown versions"
	}
	return "networking-sfc " + v[0] + ", neutron " + v[1]
}

// Oracle is a running networking-sfc server.
type Oracle struct {
	// URL is the server's endpoint, http://127.0.0.1:PORT (its API is under /v2.0).
	URL string

	dir  string
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
	once sync.Once
}

// Start writes the configuration to a new temporary directory, starts the server in a
// process group of its own and waits until it answers GET /v2.0/ports with 200. On any
// failure it stops what it started and removes the directory.
func Start(ctx context.Context) (*Oracle, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sfclab-oracle-")
	if err != nil {
		return nil, fmt.Errorf("start oracle: %w", err)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start oracle: %w", err)
	}
	if err := writeFiles(dir, port); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start oracle: %w", err)
	}
	o := &Oracle{URL: "http://127.0.0.1:" + strconv.Itoa(port), dir: dir, log: &lockedBuffer{}, done: make(chan struct{})}
	o.cmd = exec.Command(Python, filepath.Join(dir, "boot.py"), filepath.Join(dir, "neutron.conf"), filepath.Join(dir, "neutron.db"))
	o.cmd.Dir = dir
	o.cmd.Stdout, o.cmd.Stderr = o.log, o.log
	// Its own process group, so Stop ends the workers it forks too; killed with the test
	// binary should that die first.
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := o.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start oracle: %w", err)
	}
	go func() { _ = o.cmd.Wait(); close(o.done) }()
	if err := o.wait(ctx); err != nil {
		o.Stop()
		return nil, err
	}
	return o, nil
}

func writeFiles(dir string, port int) error {
	if err := os.Mkdir(filepath.Join(dir, "lock"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "boot.py"), bootPy, 0o600); err != nil {
		return err
	}
	var conf bytes.Buffer
	t := template.Must(template.New("conf").Parse(confTmpl))
	if err := t.Execute(&conf, struct {
		Port int
		Dir  string
	}{port, dir}); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "neutron.conf"), conf.Bytes(), 0o600)
}

// wait polls the server until it answers, it exits, or StartTimeout passes.
func (o *Oracle) wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, o.URL+"/v2.0/ports", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-o.done:
			return fmt.Errorf("start oracle: neutron-server exited: %s", o.tail())
		case <-ctx.Done():
			return fmt.Errorf("start oracle: no answer from %s within %s: %s", o.URL, StartTimeout, o.tail())
		case <-tick.C:
		}
	}
}

// Log is what the server wrote so far.
func (o *Oracle) Log() string { return o.log.String() }

// tail is the end of the server's log, for error messages.
func (o *Oracle) tail() string {
	s := o.log.String()
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

// Stop ends the server's process group (SIGTERM, then SIGKILL after 5 s), waits for it and
// removes its directory. It is safe to call more than once.
func (o *Oracle) Stop() {
	o.once.Do(func() {
		pgid := o.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-o.done:
		case <-time.After(5 * time.Second):
		}
		// The workers neutron-server forks share the group; whatever is left goes now.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-o.done
		os.RemoveAll(o.dir)
	})
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer collects the server's output from two pipes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
