// Package httpproxy is the HTTP forward proxy function (kind "http-proxy"): Squid, forwarding
// only (cache off, the default) or caching in memory and optionally on disk, as study B ran it.
// Clients send proxy requests (absolute URLs) to the proxy's ingress address; Squid fetches
// from the chain's origin over its egress side.
//
// Squid refuses to run as root, so it runs as the Debian user "proxy": everything it writes
// (cache.log, the optional access log and cache directory) is in a directory of the node's state
// directory that user owns, and the state directory's parents must be searchable by others
// (they are under /run/sfclab).
package httpproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/vnf"
)

// ReadyTimeout bounds the wait for Squid to accept connections after it starts.
const ReadyTimeout = 10 * time.Second

// User is the account Squid drops to (cache_effective_user); Debian's squid package creates it.
const User = "proxy"

// LabPrefix is the source prefix allowed to use the proxy: RFC 2544's benchmarking range, where
// lab addresses come from.
var LabPrefix = netip.MustParsePrefix("198.18.0.0/15")

// Files Squid's instance directory holds (see Dir).
const (
	ConfFile     = "squid.conf"
	PidFile      = "squid.pid"  // written by Squid
	DaemonFile   = "daemon.pid" // the process group sfclab started, for Teardown
	CacheLogFile = "cache.log"
	AccessFile   = "access.log"
	OutFile      = "squid.out" // Squid's standard output and error
	CacheSubdir  = "cache"
)

// Proxy implements vnf.Function for kind "http-proxy". The zero value is what labs deploy.
type Proxy struct {
	// AccessLog makes Squid log every request to access.log in its directory (result codes
	// such as TCP_MISS, TCP_MEM_HIT). Off by default: logging costs, and study B's figures are
	// for the proxy's forwarding path.
	AccessLog bool
}

func params(f *plan.Function) *HTTPProxyParams { return f.Params.(*HTTPProxyParams) }

// NewParams returns the kind's empty parameters (HTTPProxyParams) for the decoder.
func (Proxy) NewParams() any { return &HTTPProxyParams{} }

// Requires lists squid.
func (Proxy) Requires(*plan.Function) []string { return []string{"squid"} }

// Dir is the directory of one proxy instance under the state directory: configuration, logs,
// pid files and cache, owned by User.
func Dir(env vnf.Env) string { return env.Path(".squid") }

// ServiceName is the Squid service name (squid -n) of a node: it names the instance's shared
// memory segments (/dev/shm/NAME-*.shm) and SMP sockets (/run/squid/NAME-*.ipc), so that
// proxies in several labs never share them. Squid accepts letters and digits only.
func ServiceName(netns string) string {
	h := fnv.New64a()
	h.Write([]byte(netns))
	return fmt.Sprintf("sfc%016x", h.Sum64())
}

// Setup writes squid.conf, checks it (squid -k parse), creates the cache directories when
// there is an on-disk cache (squid -z), starts Squid in the foreground and waits until it
// accepts connections on its ingress address and port.
//
// Equivalent to:
//
//	squid -k parse -f DIR/squid.conf && squid -N -z -n NAME -f DIR/squid.conf &&
//	ip netns exec NETNS squid -N -n NAME -f DIR/squid.conf
func (p Proxy) Setup(ctx context.Context, env vnf.Env) error {
	f := env.Plan.Function
	pp := params(f)
	dir := Dir(env)
	conf := filepath.Join(dir, ConfFile)
	if err := vnf.MkdirAll(env.Node, dir, 0o755); err != nil {
		return vnf.Errorf(env, "create squid directory: %w", err)
	}
	if pp.CacheDir > 0 {
		if err := vnf.MkdirAll(env.Node, filepath.Join(dir, CacheSubdir), 0o755); err != nil {
			return vnf.Errorf(env, "create squid cache directory: %w", err)
		}
	}
	if err := giveToSquid(ctx, env, dir); err != nil {
		return err
	}
	hosts := filepath.Join(dir, HostsFile)
	if err := vnf.WriteFile(env.Node, hosts, []byte(HostsText(env.Plan)), 0o644); err != nil {
		return vnf.Errorf(env, "write squid hosts file: %w", err)
	}
	if err := vnf.WriteFile(env.Node, conf, []byte(p.Config(f, dir)+"hosts_file "+hosts+"\n"), 0o644); err != nil {
		return vnf.Errorf(env, "write squid config: %w", err)
	}
	if out, err := env.Node.Output(ctx, nil, "squid", "-k", "parse", "-f", conf); err != nil {
		return vnf.Errorf(env, "squid rejects its config %s: %s", conf, squidProblems(err.Error(), string(out)))
	}
	name := ServiceName(env.Plan.Netns)
	mode := "-N"
	if pp.Workers > 1 {
		mode = "--foreground" // -N would disable SMP workers
	}
	if pp.CacheDir > 0 {
		zctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := env.Node.Output(zctx, nil, "squid", mode, "-z", "-n", name, "-f", conf)
		cancel()
		removeIPC(name) // squid -z leaves its SMP segments behind
		if err != nil {
			return vnf.Errorf(env, "create squid cache directories (squid -z): %s", squidProblems(err.Error(), string(readFrom(env.Node, filepath.Join(dir, CacheLogFile), 0))))
		}
	}
	cacheLog := filepath.Join(dir, CacheLogFile)
	logStart, _ := vnf.FileSize(env.Node, cacheLog) // cache.log may hold an earlier run's lines
	pid, err := env.Node.Daemon([]string{"squid", mode, "-n", name, "-f", conf}, filepath.Join(dir, OutFile))
	if err != nil {
		return vnf.Errorf(env, "start squid: %s", squidProblems(err.Error(), string(readFrom(env.Node, cacheLog, logStart))))
	}
	if err := vnf.WriteFile(env.Node, filepath.Join(dir, DaemonFile), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return vnf.Errorf(env, "write squid pid file: %w", err)
	}
	addr := net.JoinHostPort(f.IngressAddr.String(), strconv.Itoa(int(f.Port)))
	if err := waitReady(ctx, env.Node, addr, pid, cacheLog, logStart); err != nil {
		return vnf.Errorf(env, "squid does not accept on %s: %w (log: %s)", addr, err, cacheLog)
	}
	return nil
}

// fatalMarks are the cache.log phrases of a Squid that will not serve.
var fatalMarks = []string{"FATAL", "Cannot bind", "cannot bind", "Address already in use", "Cannot assign requested address"}

// readyMark is what Squid logs once it listens on an http_port.
const readyMark = "Accepting HTTP Socket connections"

// waitReady waits until this Squid says in cache.log (after logStart) that it listens and addr
// accepts connections from inside the node; it fails as soon as Squid dies or logs a fatal
// problem (a port in use: another process answering on addr is not this Squid being ready),
// and after ReadyTimeout.
func waitReady(ctx context.Context, node vnf.Node, addr string, pid int, cacheLog string, logStart int64) error {
	deadline := time.Now().Add(ReadyTimeout)
	for {
		log := readFrom(node, cacheLog, logStart)
		if containsAny(log, fatalMarks) {
			return errors.New(squidProblems(string(log)))
		}
		err := errors.New("squid has not logged that it listens")
		if bytes.Contains(log, []byte(readyMark)) {
			err = vnf.CheckDial(ctx, node, addr, 200*time.Millisecond)
			if err == nil {
				return nil
			}
		}
		if !vnf.Runs(node, pid) {
			return fmt.Errorf("squid exited: %s", squidProblems(string(readFrom(node, cacheLog, logStart))))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %s: %s", err, ReadyTimeout, squidProblems(string(log)))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Teardown stops Squid: it kills the process group it started (master, workers, helpers) and
// removes the shared memory segments and SMP sockets of its service name. It works after a
// partial Setup and twice in a row.
//
// Equivalent to: kill -KILL -PGID; rm -f /dev/shm/NAME-*.shm /run/squid/NAME-*.ipc
func (Proxy) Teardown(ctx context.Context, env vnf.Env) error {
	dir := Dir(env)
	// Squid's orderly shutdown takes over a second even with shutdown_lifetime 0; nothing it
	// would save matters to a lab, so the whole group is killed at once.
	if err := vnf.StopDaemon(env, "squid", filepath.Join(dir, DaemonFile), filepath.Join(dir, ConfFile), 0); err != nil {
		return err
	}
	removeIPC(ServiceName(env.Plan.Netns))
	return nil
}

// removeIPC removes what a Squid service leaves when killed: its shared memory segments and
// its SMP coordinator and kid sockets.
func removeIPC(name string) {
	for _, pattern := range []string{"/dev/shm/" + name + "-*", "/run/squid/" + name + "-*"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
}

// Config renders squid.conf for the function with this Proxy's options; dir is the instance
// directory (Dir) that holds Squid's logs, pid file and cache.
func (p Proxy) Config(f *plan.Function, dir string) string {
	pp := params(f)
	var b strings.Builder
	mode := "off: forwarding only"
	if pp.Cache {
		mode = "on"
	}
	fmt.Fprintf(&b, "# generated by sfclab: Squid forward proxy, cache %s\n", mode)
	fmt.Fprintf(&b, "http_port %s:%d\n", f.IngressAddr, f.Port)
	fmt.Fprintf(&b, "acl sfclab_lab src %s\n", strings.Join(sources(f.IngressAddr), " "))
	b.WriteString("http_access allow sfclab_lab\nhttp_access deny all\n")
	b.WriteString("\n# Origins are addresses: no DNS, ICMP pinger, ICP, HTCP or netdb.\n")
	b.WriteString("dns_nameservers 127.0.0.1\npinger_enable off\nicp_port 0\nhtcp_port 0\nnetdb_filename none\n")
	b.WriteString("visible_hostname sfclab\n")
	fmt.Fprintf(&b, "cache_effective_user %s\nworkers %d\n", User, pp.Workers)
	b.WriteString("\n")
	if !pp.Cache {
		b.WriteString("cache deny all\ncache_mem 0 MB\n")
	} else {
		fmt.Fprintf(&b, "cache_mem %d MB\n", pp.CacheMem)
		fmt.Fprintf(&b, "maximum_object_size %d MB\n", pp.MaxObject)
		fmt.Fprintf(&b, "maximum_object_size_in_memory %d MB\n", pp.MaxObject)
		fmt.Fprintf(&b, "memory_replacement_policy %s\n", pp.Policy)
		fmt.Fprintf(&b, "cache_replacement_policy %s\n", pp.Policy)
		if pp.CacheDir > 0 {
			cd := filepath.Join(dir, CacheSubdir)
			if pp.Workers > 1 {
				// ufs is not SMP-aware (Squid 5.7 asserts in Controller.cc with a ufs
				// directory per worker): SMP workers share a rock store.
				fmt.Fprintf(&b, "cache_dir rock %s %d\n", cd, pp.CacheDir)
			} else {
				fmt.Fprintf(&b, "cache_dir ufs %s %d 16 256\n", cd, pp.CacheDir)
			}
		}
		// Squid's default heuristic: fresh for 20 % of the object's age, at most three days
		// (the origin's objects are dated 2000-01-01, so they stay fresh).
		b.WriteString("refresh_pattern . 0 20% 4320\n")
	}
	b.WriteString("\n")
	if p.AccessLog {
		fmt.Fprintf(&b, "access_log stdio:%s squid\n", filepath.Join(dir, AccessFile))
	} else {
		b.WriteString("access_log none\n")
	}
	fmt.Fprintf(&b, "cache_log %s\n", filepath.Join(dir, CacheLogFile))
	fmt.Fprintf(&b, "pid_filename %s\n", filepath.Join(dir, PidFile))
	fmt.Fprintf(&b, "coredump_dir %s\n", dir)
	b.WriteString("logfile_rotate 0\nshutdown_lifetime 0 seconds\n")
	return b.String()
}

// HostsFile is the hosts file Setup writes beside squid.conf (HostsText).
const HostsFile = "hosts"

// maxHostsEntries bounds HostsText: Squid loads a hosts file into its caches at start, and one
// naming a whole /15 (131,070 lines) kept it from starting within 10 s here.
const maxHostsEntries = 4096

// HostsText names every address of the node's subnets and of the prefixes it routes to (each
// up to a /22), for Squid's hosts_file. Squid looks up the reverse name of every client
// connection's address; with no DNS server in a lab each query waits in its DNS queue for
// dns_timeout (30 s), and at thousands of connections per second the queue's ID scan took
// most of Squid's CPU and stalled it for up to 26 s (docs/experiment-file.md). Named here, the
// lookups are answered from memory.
func HostsText(n *plan.Node) string {
	var b strings.Builder
	b.WriteString("# generated by sfclab: the lab's addresses, so Squid's reverse lookups need no DNS\n")
	seen := map[netip.Addr]bool{}
	count := 0
	add := func(p netip.Prefix) {
		p = p.Masked()
		if !p.Addr().Is4() || p.Bits() < 22 {
			return
		}
		// Every address but the network's and the broadcast's.
		for a := p.Addr().Next(); p.Contains(a.Next()) && count < maxHostsEntries; a = a.Next() {
			if seen[a] {
				continue
			}
			seen[a] = true
			count++
			fmt.Fprintf(&b, "%s sfclab-%s\n", a, strings.ReplaceAll(a.String(), ".", "-"))
		}
	}
	for _, i := range n.Interfaces {
		add(i.Address)
	}
	for _, r := range n.Routes {
		add(r.Dst)
	}
	return b.String()
}

// SquidConfig renders squid.conf for an http-proxy function as labs deploy it (Proxy{}): dir
// is the instance directory (Dir) for Squid's logs, pid file and cache.
func SquidConfig(f *plan.Function, dir string) string { return Proxy{}.Config(f, dir) }

// sources lists the prefixes allowed to use the proxy: the lab range, plus the ingress
// address's /16 when a lab file moved its addressing pool out of it.
func sources(ingress netip.Addr) []string {
	out := []string{LabPrefix.String()}
	if ingress.IsValid() && ingress.Is4() && !LabPrefix.Contains(ingress) {
		p, _ := ingress.Prefix(16)
		out = append(out, p.String())
	}
	return out
}

// Counters returns Squid's cache manager counters (client_http.requests, client_http.hits,
// server.all.requests, ...), fetched from inside the node.
//
// Equivalent to: ip netns exec NETNS curl http://INGRESS:PORT/squid-internal-mgr/counters
func Counters(ctx context.Context, node vnf.Node, f *plan.Function) (map[string]float64, error) {
	addr := net.JoinHostPort(f.IngressAddr.String(), strconv.Itoa(int(f.Port)))
	url := "http://" + addr + "/squid-internal-mgr/counters"
	var conn net.Conn
	if err := node.Do(func() (err error) { conn, err = net.DialTimeout("tcp", addr, 2*time.Second); return err }); err != nil {
		return nil, fmt.Errorf("read squid counters: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("read squid counters: %w", err)
	}
	req.Close = true
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("read squid counters: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return nil, fmt.Errorf("read squid counters: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read squid counters: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read squid counters: %s", resp.Status)
	}
	return ParseCounters(body), nil
}

// ParseCounters parses the cache manager's "key = value" lines; values that are not numbers
// are skipped.
func ParseCounters(body []byte) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			continue
		}
		out[strings.TrimSpace(k)] = x
	}
	return out
}

// squidProblems keeps what matters of Squid's chatter: the FATAL, ERROR and WARNING lines of
// the texts (the end of the first non-empty text when there are none).
func squidProblems(texts ...string) string {
	var keep []string
	for _, t := range texts {
		for _, line := range strings.Split(t, "\n") {
			if containsAny([]byte(line), []string{"FATAL", "ERROR", "WARNING", "Bungled", "Cannot", "cannot"}) &&
				!strings.Contains(line, "BCP 177") {
				keep = append(keep, strings.TrimSpace(line))
			}
		}
	}
	if len(keep) > 0 {
		return strings.Join(keep, "; ")
	}
	for _, t := range texts {
		if t = strings.TrimSpace(t); t != "" {
			if len(t) > 1024 {
				t = "..." + t[len(t)-1024:]
			}
			return t
		}
	}
	return "(no message)"
}

func containsAny(b []byte, subs []string) bool {
	for _, s := range subs {
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// readFrom returns what a file of the node holds after offset, at most its last 16 KiB
// (nothing when it is missing).
func readFrom(node vnf.Node, path string, offset int64) []byte {
	b, _, _ := vnf.ReadFrom(node, path, offset, 16<<10)
	return b
}

// giveToSquid gives the instance directory to User and checks that Squid can write it. On a
// node with files of its own (vnf.Files) chown runs in the node (its User, its file system).
//
// Equivalent to: chown -R proxy:proxy DIR (in the node when it has files of its own)
func giveToSquid(ctx context.Context, env vnf.Env, dir string) error {
	if vnf.FilesOf(env.Node) != nil {
		if _, err := env.Node.Output(ctx, nil, "chown", "-R", User+":"+User, dir); err != nil {
			return vnf.Errorf(env, "give squid directory to user %s: %w", User, err)
		}
		return nil
	}
	uid, gid, err := lookupUser(User)
	if err != nil {
		return vnf.Errorf(env, "%w", err)
	}
	if err := chownTree(dir, uid, gid); err != nil {
		return vnf.Errorf(env, "give squid directory to user %s: %w", User, err)
	}
	if err := canWrite(dir, uid, gid); err != nil {
		return vnf.Errorf(env, "squid runs as user %s, which cannot write %s (%w): make the state directory's parents searchable by others (chmod o+x)", User, dir, err)
	}
	return nil
}

func lookupUser(name string) (uid, gid int, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("look up user %s (created by the squid package): %w", name, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// chownTree gives dir and everything below it to uid:gid.
func chownTree(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// canWrite checks that uid:gid can create files in dir, by asking a shell running as them.
//
// Equivalent to: setpriv --reuid UID --regid GID --clear-groups test -w DIR
func canWrite(dir string, uid, gid int) error {
	cmd := exec.Command("/bin/sh", "-c", `test -d "$0" && test -w "$0" && test -x "$0"`, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	if err := cmd.Run(); err != nil {
		return errors.New("test -w failed")
	}
	return nil
}

// ImagePackages is Squid (vnf.ImagePackager).
func (Proxy) ImagePackages() []string { return []string{"squid"} }

// ComposeDir is the instance directory of an exported proxy node.
const ComposeDir = "/var/lib/sfclab/squid"

// Compose writes squid.conf into ComposeDir (without Setup's hosts file: an exported service has
// no node plan to name the addresses from), gives the directory to Squid's user, checks the
// configuration, creates the cache directories when there is an on-disk cache and runs Squid
// in the foreground, as Setup does (vnf.Composer).
func (p Proxy) Compose(f *plan.Function) ([]vnf.ComposeStep, string, error) {
	pp := params(f)
	conf := filepath.Join(ComposeDir, ConfFile)
	mkdir := "mkdir -p " + ComposeDir
	if pp.CacheDir > 0 {
		mkdir += " " + filepath.Join(ComposeDir, CacheSubdir)
	}
	mode := "-N"
	if pp.Workers > 1 {
		mode = "--foreground" // -N would disable SMP workers
	}
	steps := []vnf.ComposeStep{
		{Cmd: mkdir},
		{Cmd: "cat >" + conf, Stdin: p.Config(f, ComposeDir)},
		{Cmd: fmt.Sprintf("chown -R %s:%s %s", User, User, ComposeDir)},
		{Cmd: "squid -k parse -f " + conf},
	}
	if pp.CacheDir > 0 {
		steps = append(steps, vnf.ComposeStep{Cmd: fmt.Sprintf("squid %s -z -f %s", mode, conf)})
	}
	return steps, fmt.Sprintf("exec squid %s -f %s", mode, conf), nil
}
