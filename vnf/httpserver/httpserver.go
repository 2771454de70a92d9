// Package httpserver is the origin of an http-server endpoint: Apache (as study B) or nginx
// serving objects of chosen sizes at /obj-SIZE (spec.ObjectPath), from files sfclab generates
// in the node's state directory. Objects hold deterministic pseudo-random bytes and are dated
// ObjectTime, so that a caching proxy sees the same, old (hence fresh by Squid's heuristic)
// object in every run.
//
// Apache's children run as www-data, so the state directory's parents must be searchable by
// others (they are under /run/sfclab); nginx runs as root.
package httpserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
)

// ReadyTimeout bounds the wait for the server to answer its first request.
const ReadyTimeout = 10 * time.Second

// ApacheUser is the account Apache's children run as (Apache refuses root).
const ApacheUser = "www-data"

// ApacheModules is where Debian keeps Apache's loadable modules.
const ApacheModules = "/usr/lib/apache2/modules"

// ObjectTime is the modification time of every object: old enough that a cache's heuristic
// freshness (20 % of the object's age, capped at three days) keeps it fresh.
var ObjectTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Files of an instance directory (see Dir).
const (
	ObjectsSubdir = "objects"
	ApacheConf    = "httpd.conf"
	NginxConf     = "nginx.conf"
	RunSubdir     = "run"        // pid file, Apache's runtime files, nginx's temp directories
	LogFile       = "server.log" // standard output and error, and the error log
	AccessFile    = "access.log"
	DaemonFile    = "daemon.pid" // the process group sfclab started, for Teardown
)

// Server implements vnf.Function for the endpoint kind "http-server". The zero value is what
// labs deploy.
type Server struct {
	// AccessLog makes the server log every request to access.log in its directory (off by
	// default: logging costs).
	AccessLog bool
}

func params(f *plan.Function) *HTTPServerParams { return f.Params.(*HTTPServerParams) }

// NewParams returns the kind's empty parameters (HTTPServerParams) for the decoder.
func (Server) NewParams() any { return &HTTPServerParams{} }

// Requires lists apache2 or nginx.
func (Server) Requires(f *plan.Function) []string {
	if params(f).Server == ServerNginx {
		return []string{"nginx"}
	}
	return []string{"apache2"}
}

// Dir is the directory of one server instance under the state directory.
func Dir(env vnf.Env) string { return env.Path(".www") }

// Setup generates the objects, writes and checks the server's configuration, starts the
// server in the foreground and waits until it answers GET of its first object with 200 from
// inside the node.
//
// Equivalent to:
//
//	apache2 -t -f DIR/httpd.conf && ip netns exec NETNS apache2 -f DIR/httpd.conf -DFOREGROUND
//	nginx -t -p DIR/ -e stderr -c DIR/nginx.conf && ip netns exec NETNS nginx -p DIR/ -e stderr -c DIR/nginx.conf -g 'daemon off;'
func (s Server) Setup(ctx context.Context, env vnf.Env) error {
	f := env.Plan.Function
	hp := params(f)
	dir := Dir(env)
	for _, d := range []string{dir, filepath.Join(dir, ObjectsSubdir), filepath.Join(dir, RunSubdir)} {
		if err := vnf.MkdirAll(env.Node, d, 0o755); err != nil {
			return vnf.Errorf(env, "create server directory: %w", err)
		}
	}
	if len(hp.Objects) == 0 {
		return vnf.Errorf(env, "no objects to serve")
	}
	for _, o := range hp.Objects {
		size, err := spec.ParseSize(o)
		if err != nil {
			return vnf.Errorf(env, "%w", err)
		}
		path := filepath.Join(dir, ObjectsSubdir, strings.TrimPrefix(spec.ObjectPath(o), "/"))
		if err := writeObject(ctx, env.Node, path, size); err != nil {
			return vnf.Errorf(env, "%w", err)
		}
	}
	var conf string
	var check, argv []string
	switch hp.Server {
	case ServerNginx:
		conf = filepath.Join(dir, NginxConf)
		if err := vnf.WriteFile(env.Node, conf, []byte(s.NginxConfig(f, dir)), 0o644); err != nil {
			return vnf.Errorf(env, "write nginx config: %w", err)
		}
		base := []string{"nginx", "-p", dir + "/", "-e", "stderr", "-c", conf}
		check = append(append([]string(nil), base...), "-t", "-q")
		argv = append(append([]string(nil), base...), "-g", "daemon off;")
	default:
		conf = filepath.Join(dir, ApacheConf)
		if err := vnf.WriteFile(env.Node, conf, []byte(s.ApacheConfig(f, dir)), 0o644); err != nil {
			return vnf.Errorf(env, "write apache config: %w", err)
		}
		first := filepath.Join(dir, ObjectsSubdir, strings.TrimPrefix(spec.ObjectPath(hp.Objects[0]), "/"))
		// On a node with files of its own (vnf.Files) the lab directory is made there,
		// searchable by others: this machine's permissions say nothing about it.
		if err := canRead(first, ApacheUser); err != nil && vnf.FilesOf(env.Node) == nil {
			return vnf.Errorf(env, "apache serves as user %s, which cannot read %s (%w): make the state directory's parents searchable by others (chmod o+x)", ApacheUser, first, err)
		}
		check = []string{"apache2", "-t", "-f", conf}
		argv = []string{"apache2", "-f", conf, "-DFOREGROUND"}
	}
	if _, err := env.Node.Output(ctx, nil, check...); err != nil {
		return vnf.Errorf(env, "%s rejects its config %s: %w", hp.Server, conf, err)
	}
	log := filepath.Join(dir, LogFile)
	logStart, _ := vnf.FileSize(env.Node, log) // 0 when there is no log yet
	pid, err := env.Node.Daemon(argv, log)
	if err != nil {
		return vnf.Errorf(env, "start %s: %w", hp.Server, err)
	}
	if err := vnf.WriteFile(env.Node, filepath.Join(dir, DaemonFile), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return vnf.Errorf(env, "write %s pid file: %w", hp.Server, err)
	}
	if err := waitServing(ctx, env.Node, hp, pid, log, logStart); err != nil {
		return vnf.Errorf(env, "%s does not serve: %w; log %s: %s", hp.Server, err, log, vnf.LogTail(env.Node, log, logStart))
	}
	return nil
}

// waitServing waits until the process sfclab started listens on the port (another server
// answering there is not this one being ready) and GET of the first object on the loopback
// address gets 200 from inside the node; it fails when the server exits or logs that its port
// is taken, and after ReadyTimeout.
func waitServing(ctx context.Context, node vnf.Node, hp *HTTPServerParams, pid int, log string, logStart int64) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(hp.Port)))
	path := spec.ObjectPath(hp.Objects[0])
	deadline := time.Now().Add(ReadyTimeout)
	// A node that keeps its own processes and cannot be entered from here (a VM guest, a pod
	// on another machine) is checked from inside; one that can be entered (a pod on this
	// machine too) the namespace way, whose ss and GET need nothing in the node's image.
	_, keeps := node.(vnf.Processes)
	guest := keeps && node.Do(func() error { return nil }) != nil
	for {
		var err error
		if guest {
			err = guestServes(ctx, node, hp.Port, addr, path)
		} else if err = listensOn(ctx, node, hp.Port, pid); err == nil {
			err = get(node, addr, path)
		}
		if err == nil {
			return nil
		}
		if !vnf.Runs(node, pid) {
			return fmt.Errorf("it exited (%v)", err)
		}
		if strings.Contains(vnf.LogTail(node, log, logStart), "Address already in use") { // nginx retries for 2.5 s
			return fmt.Errorf("its port is taken (%v)", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GET http://%s%s: %w after %s", addr, path, err, ReadyTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// listensOn checks that process pid holds a listening TCP socket on port in the node.
//
// Equivalent to: ip netns exec NETNS ss -Htlnp sport = :PORT | grep pid=PID,
//
// ss runs on the host inside the node's network namespace (node.Do), so it reports host PIDs
// on every runtime: inside a container's own PID namespace Apache would have another number
// than the host PID Daemon returned.
func listensOn(ctx context.Context, node vnf.Node, port uint16, pid int) error {
	var out []byte
	err := node.Do(func() (err error) {
		out, err = exec.CommandContext(ctx, "ss", "-Htlnp", "sport = :"+strconv.Itoa(int(port))).Output()
		return err
	})
	if err != nil {
		return fmt.Errorf("run ss in the node: %w", err)
	}
	if !strings.Contains(string(out), "pid="+strconv.Itoa(pid)+",") {
		if len(strings.TrimSpace(string(out))) > 0 {
			return fmt.Errorf("port %d is held by another process: %s", port, strings.TrimSpace(string(out)))
		}
		return fmt.Errorf("nothing listens on port %d yet", port)
	}
	return nil
}

// guestServes is the readiness check in a VM guest, whose network stack the host cannot
// enter: a socket listens on port in the guest (vnf.Listens: the guest's agent reads its
// kernel's socket tables) and a GET of url gets 200 from inside it (vnf.HTTPGetter: the agent
// makes it), so the guest's image needs no netstat or wget (a Debian root has neither). A
// node that cannot make the GET itself is asked for busybox wget (2xx). The listener is not
// matched to pid, as on a namespace: a guest's socket table names no process; the caller
// checks that pid still runs, and the guest runs nothing else on the port.
//
// A node that exchanges bytes over a connection itself (vnf.Exchanger: a kubernetes pod on
// another machine, whose image has no wget) is sent the GET and its status line is read.
//
// Equivalent to: ss -Htln 'sport = :PORT' | grep . && wget -q -O /dev/null URL (in the guest)
func guestServes(ctx context.Context, node vnf.Node, port uint16, addr, path string) error {
	url := "http://" + addr + path
	ok, err := vnf.Listens(ctx, node, net.JoinHostPort("0.0.0.0", strconv.Itoa(int(port))))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("nothing listens on port %d yet", port)
	}
	if g, ok := node.(vnf.HTTPGetter); ok {
		if err := g.HTTPGet(ctx, url, 2*time.Second); err != nil {
			return fmt.Errorf("GET %s in the guest: %w", url, err)
		}
		return nil
	}
	if x, ok := node.(vnf.Exchanger); ok {
		reply, err := x.Exchange(ctx, addr, []byte("GET "+path+" HTTP/1.0\r\n\r\n"), 256, 2*time.Second)
		if err != nil {
			return fmt.Errorf("GET %s in the node: %w", url, err)
		}
		if status, _, _ := strings.Cut(string(reply), "\r\n"); !okStatus.MatchString(status) {
			return fmt.Errorf("GET %s in the node: %q", url, status)
		}
		return nil
	}
	if _, err := node.Output(ctx, nil, "wget", "-q", "-O", "/dev/null", url); err != nil {
		return fmt.Errorf("GET %s in the guest: %w", url, err)
	}
	return nil
}

// okStatus is the status line of a 2xx response.
var okStatus = regexp.MustCompile(`^HTTP/1\.[01] 2[0-9][0-9]( |$)`)

// get requests path from addr over a connection made inside the node and reads the response.
func get(node vnf.Node, addr, path string) error {
	var conn net.Conn
	if err := node.Do(func() (err error) { conn, err = net.DialTimeout("tcp", addr, 200*time.Millisecond); return err }); err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	req.Close = true
	if err := req.Write(conn); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return nil
}

// Teardown stops the server: SIGTERM to the process group it started, SIGKILL after two
// seconds. It works after a partial Setup and twice in a row.
//
// Equivalent to: kill -TERM -PGID; sleep 2; kill -KILL -PGID
func (Server) Teardown(ctx context.Context, env vnf.Env) error {
	conf := filepath.Join(Dir(env), ApacheConf)
	if params(env.Plan.Function).Server == ServerNginx {
		conf = filepath.Join(Dir(env), NginxConf)
	}
	return vnf.StopDaemon(env, "server", filepath.Join(Dir(env), DaemonFile), conf, 2*time.Second)
}

// ApacheConfig renders a standalone httpd.conf: the event MPM with Debian's default sizing,
// keep-alive on, sendfile on, no access log (unless the Server asks for one), no .htaccess
// files and symbolic links followed (as Debian's stock configuration), everything under dir.
//
// Its error log is the instance's LogFile, the file Setup appends the server's standard
// output and error to, named by its path: not /dev/stderr, which is /proc/self/fd/2 and
// resolves only where /proc is of the server's own PID namespace. In a Kubernetes pod the
// agent enters the pod's mount namespace but not its PID namespace (a daemon's PID is the
// node's), so the pod's /proc does not know Apache and /dev/stderr names nothing (apache2:
// could not open error log file /dev/stderr: No such file or directory).
func (s Server) ApacheConfig(f *plan.Function, dir string) string {
	return s.apacheConfig(f, dir, filepath.Join(dir, LogFile))
}

// apacheConfig is ApacheConfig with the error log at errorLog.
func (s Server) apacheConfig(f *plan.Function, dir, errorLog string) string {
	hp := params(f)
	var b strings.Builder
	b.WriteString("# generated by sfclab: Apache origin\n")
	fmt.Fprintf(&b, "ServerRoot %q\nServerName sfclab\nListen 0.0.0.0:%d\n", dir, hp.Port)
	for _, m := range []string{"mpm_event", "authz_core"} {
		fmt.Fprintf(&b, "LoadModule %s_module %s/mod_%s.so\n", m, ApacheModules, m)
	}
	fmt.Fprintf(&b, "User %s\nGroup %s\n", ApacheUser, ApacheUser)
	fmt.Fprintf(&b, "PidFile %q\nDefaultRuntimeDir %q\n", filepath.Join(dir, RunSubdir, "httpd.pid"), filepath.Join(dir, RunSubdir))
	fmt.Fprintf(&b, "ErrorLog %q\nLogLevel warn\n", errorLog)
	if s.AccessLog {
		b.WriteString("LogFormat \"%h %l %u %t \\\"%r\\\" %>s %b\" common\n")
		fmt.Fprintf(&b, "CustomLog %q common\n", filepath.Join(dir, AccessFile))
	}
	b.WriteString("\nStartServers 2\nMinSpareThreads 25\nMaxSpareThreads 75\nThreadLimit 64\nThreadsPerChild 25\nMaxRequestWorkers 150\nMaxConnectionsPerChild 0\n")
	b.WriteString("Timeout 60\nKeepAlive On\nMaxKeepAliveRequests 100\nKeepAliveTimeout 5\nEnableSendfile On\nEnableMMAP On\n\n")
	objects := filepath.Join(dir, ObjectsSubdir)
	// As Debian's stock apache2.conf: no .htaccess anywhere and symbolic links followed.
	// Without AllowOverride None from / Apache tries to open .htaccess in every directory
	// above the document root on every request (7 failed opens per request here, seen with
	// strace); without FollowSymLinks it lstats every directory of the path instead (7
	// stats). The study's stock Apache did neither, and on a Docker engine with
	// fuse-overlayfs each such walk through the container's root costs Apache's user 28-71
	// us instead of 3-4 (see studies/httpproxy.go).
	b.WriteString("<Directory />\n\tOptions FollowSymLinks\n\tAllowOverride None\n\tRequire all denied\n</Directory>\n")
	fmt.Fprintf(&b, "DocumentRoot %q\n<Directory %q>\n\tOptions FollowSymLinks\n\tAllowOverride None\n\tRequire all granted\n</Directory>\n", objects, objects)
	return b.String()
}

// NginxConfig renders a standalone nginx.conf: one worker per core, sendfile, keep-alive, no
// access log (unless the Server asks for one), pid and temporary paths under dir.
func (s Server) NginxConfig(f *plan.Function, dir string) string {
	hp := params(f)
	run := filepath.Join(dir, RunSubdir)
	var b strings.Builder
	b.WriteString("# generated by sfclab: nginx origin\n")
	b.WriteString("user root;\nworker_processes auto;\n")
	fmt.Fprintf(&b, "pid %s;\nerror_log stderr warn;\n", filepath.Join(run, "nginx.pid"))
	b.WriteString("events {\n\tworker_connections 4096;\n}\n")
	b.WriteString("http {\n")
	if s.AccessLog {
		fmt.Fprintf(&b, "\taccess_log %s;\n", filepath.Join(dir, AccessFile))
	} else {
		b.WriteString("\taccess_log off;\n")
	}
	b.WriteString("\tsendfile on;\n\ttcp_nopush on;\n\tkeepalive_timeout 65;\n\tkeepalive_requests 1000;\n")
	b.WriteString("\tdefault_type application/octet-stream;\n")
	for _, t := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&b, "\t%s_temp_path %s;\n", t, filepath.Join(run, t))
	}
	fmt.Fprintf(&b, "\tserver {\n\t\tlisten 0.0.0.0:%d;\n\t\troot %s;\n\t}\n}\n", hp.Port, filepath.Join(dir, ObjectsSubdir))
	return b.String()
}

// writeObject writes an object of size bytes at path in the node's file system: WriteObject,
// or on a node with files of its own (vnf.Files) the same bytes sent there, dated ObjectTime
// by touch in the node (which sees the file at the same path).
//
// Equivalent to (vnf.Files): cat >PATH; touch -d 2000-01-01T00:00:00Z PATH
func writeObject(ctx context.Context, node vnf.Node, path string, size int64) error {
	if vnf.FilesOf(node) == nil {
		return WriteObject(path, size)
	}
	data, err := io.ReadAll(Content(size))
	if err == nil {
		err = vnf.WriteFile(node, path, data, 0o644)
	}
	if err == nil {
		_, err = node.Output(ctx, nil, "touch", "-d", ObjectTime.Format(time.RFC3339), path)
	}
	if err != nil {
		return fmt.Errorf("write object %s: %w", path, err)
	}
	return nil
}

// WriteObject writes an object of size bytes at path (Content), dated ObjectTime.
func WriteObject(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write object: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	_, err = io.Copy(w, Content(size))
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(path, ObjectTime, ObjectTime)
	}
	if err != nil {
		return fmt.Errorf("write object %s: %w", path, err)
	}
	return nil
}

// Content returns the bytes of an object of the given size: a xorshift64 stream seeded by the
// size, the same in every run and on every host.
func Content(size int64) io.Reader {
	return &content{left: size, x: uint64(size)*0x9e3779b97f4a7c15 | 1}
}

type content struct {
	left int64
	x    uint64
	buf  [8]byte
	n    int // bytes of buf not yet handed out
}

// Read fills p with the next bytes of the object.
func (c *content) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n := 0
	for n < len(p) {
		if c.n == 0 {
			c.x ^= c.x << 13
			c.x ^= c.x >> 7
			c.x ^= c.x << 17
			for i := range c.buf {
				c.buf[i] = byte(c.x >> (8 * i))
			}
			c.n = 8
		}
		k := copy(p[n:], c.buf[8-c.n:])
		c.n -= k
		n += k
	}
	c.left -= int64(n)
	return n, nil
}

// canRead checks that user name can read path, by asking a shell running as that user.
//
// Equivalent to: runuser -u USER -- test -r PATH
func canRead(path, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("look up user %s: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd := exec.Command("/bin/sh", "-c", `test -r "$0"`, path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	if err := cmd.Run(); err != nil {
		return errors.New("test -r failed")
	}
	return nil
}

// ImagePackages are both origins (vnf.ImagePackager).
func (Server) ImagePackages() []string { return []string{"apache2", "nginx"} }

// ComposeDir is the instance directory of an exported origin node.
const ComposeDir = "/var/lib/sfclab/www"

// Compose creates the objects (zeros of each size, dated ObjectTime: the same sizes as Setup
// writes, not the same bytes), writes the server's configuration into ComposeDir, checks it and
// runs the server in the foreground, as Setup does (vnf.Composer). There Apache is the
// container's own process and logs its errors to /dev/stderr, which `docker logs` shows.
func (s Server) Compose(f *plan.Function) ([]vnf.ComposeStep, string, error) {
	hp := params(f)
	objects := filepath.Join(ComposeDir, ObjectsSubdir)
	steps := []vnf.ComposeStep{{Cmd: fmt.Sprintf("mkdir -p %s %s", objects, filepath.Join(ComposeDir, RunSubdir))}}
	for _, o := range hp.Objects {
		size, err := spec.ParseSize(o)
		if err != nil {
			return nil, "", fmt.Errorf("export http-server: %w", err)
		}
		path := filepath.Join(objects, strings.TrimPrefix(spec.ObjectPath(o), "/"))
		steps = append(steps, vnf.ComposeStep{Cmd: fmt.Sprintf("head -c %d /dev/zero >%s && touch -d %s %s",
			size, path, ObjectTime.Format(time.RFC3339), path)})
	}
	if hp.Server == ServerNginx {
		conf := filepath.Join(ComposeDir, NginxConf)
		base := fmt.Sprintf("nginx -p %s/ -e stderr -c %s", ComposeDir, conf)
		steps = append(steps, vnf.ComposeStep{Cmd: "cat >" + conf, Stdin: s.NginxConfig(f, ComposeDir)},
			vnf.ComposeStep{Cmd: base + " -t -q"})
		return steps, "exec " + base + ` -g "daemon off;"`, nil
	}
	conf := filepath.Join(ComposeDir, ApacheConf)
	steps = append(steps, vnf.ComposeStep{Cmd: "cat >" + conf, Stdin: s.apacheConfig(f, ComposeDir, "/dev/stderr")},
		vnf.ComposeStep{Cmd: "apache2 -t -f " + conf})
	return steps, "exec apache2 -f " + conf + " -DFOREGROUND", nil
}
