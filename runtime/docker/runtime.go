// Package docker is the docker runtime: every node of a lab is a container on the local
// Docker Engine (sfc.LAB.NODE) and every segment a Docker bridge network (sfc.LAB.SEGMENT)
// with the plan's subnet and addresses, so the same plan, steering and function kinds run as
// they do in network namespaces. Containers run sfclab's node image (built locally with
// debootstrap, no registry: see BuildImage) or the lab's own, with NET_ADMIN and NET_RAW, the
// lab's journal node directory bind-mounted at the same path, `sleep infinity` under
// docker-init and no restart policy. Everything created carries the labels
// sfclab.managed=true and sfclab.lab=LAB, which is all Destroy ever removes.
//
// Two attachment modes (study B compared them): "routed" reaches containers at their own
// addresses over internal networks; "nat" publishes the chain's service port on the host
// address of the source's network (a non-internal network) as a default Docker user would.
// In both modes every default route inside the containers is deleted: lab traffic never leaves
// the lab.
package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/pool"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// Runtime is the docker runtime. The zero value talks to $DOCKER_HOST or the local socket and
// bind-mounts node directories under journal.StateRoot().
type Runtime struct {
	// Host is the engine's address, e.g. unix:///var/run/docker.sock ("" = $DOCKER_HOST or
	// the default socket).
	Host string
	// StateRoot is the journal root of the Deployer using this runtime ("" =
	// journal.StateRoot()); the lab's node directory StateRoot/LAB/nodes is bind-mounted into
	// every container at the same path, so that function configuration and logs written on
	// the host are read and written at the same path inside.
	StateRoot string
	// Progress receives the steps of an image build Preflight starts; nil means silent.
	Progress func(BuildProgress)
	// Parallel bounds how many engine requests (networks and containers created, started,
	// connected, removed) are in flight at once (0 = DefaultParallel).
	Parallel int
	// Executable is the sfclab program bind-mounted read-only at SfclabPath into the
	// containers of nodes whose function runs sfclab (vnf.SelfRunner: l4lb impl sfclab);
	// "" = the running executable.
	Executable string
	// Trace, when set, receives how long each engine request and stage of a deploy or destroy
	// took (Step* and Stage* names); benchmarks set it to find where the time goes.
	Trace func(step string, took time.Duration)
	// Machines boots the lab's VM nodes (vm: on a node) in their containers' namespaces: see
	// machines.go. The zero value builds guest images under vm.DefaultImageRoot.
	Machines vm.Runtime
}

var _ runtime.Runtime = Runtime{}

// Name is "docker".
func (Runtime) Name() string { return spec.RuntimeDocker }

// Attachment modes of the plan (spec.AttachRouted, spec.AttachNAT).
const (
	// AttachRouted reaches containers at their own addresses over internal networks.
	AttachRouted = spec.AttachRouted
	// AttachNAT publishes the chain's port at the gateway of the source's network.
	AttachNAT = spec.AttachNAT
)

// DefaultMTU is the MTU of lab networks when the plan has none (the engine's own default may
// be lower, e.g. "mtu": 1400 in daemon.json; labs use the same MTU on every runtime).
const DefaultMTU = 1500

func (r Runtime) stateRoot() string {
	if r.StateRoot != "" {
		return r.StateRoot
	}
	return journal.StateRoot()
}

// NodeDir is the directory bind-mounted into a lab's containers (the journal's node directory).
func (r Runtime) NodeDir(lab string) string {
	return journal.Journal{Root: r.stateRoot()}.NodeDir(lab)
}

// Image is the image a plan's containers run.
func Image(p *plan.Plan) string {
	if p.Image != "" {
		return p.Image
	}
	return DefaultImage()
}

func mtu(p *plan.Plan) int {
	if p.MTU > 0 {
		return p.MTU
	}
	return DefaultMTU
}

// published reports whether a segment is the network a port is published on (attach nat):
// that network must not be internal, the engine forwards the published port into it.
func published(p *plan.Plan, s *plan.Segment) bool {
	for _, pub := range p.Publish {
		if pub.HostIP == s.Gateway {
			return true
		}
	}
	return false
}

// Preflight checks that the engine answers, that no container or network sfclab did not
// create holds one of the lab's names, that no other Docker network overlaps a segment's
// subnet, and that the image is there: sfclab's own is built when missing (minutes, reported
// to r.Progress), another one is pulled.
func (r Runtime) Preflight(ctx context.Context, p *plan.Plan) error {
	if err := runtime.CheckHostCPUs(p, cgroup.CheckCPUs); err != nil { // the engine would refuse each container later
		return err
	}
	if err := r.Machines.CheckMachines(ctx, p); err != nil { // QEMU, a kernel, the VMs' sizes
		return err
	}
	cli, err := r.client(ctx)
	if err != nil {
		return err
	}
	// The image is looked for while the names are checked; a missing one is built or pulled
	// only once the names are free.
	ref := Image(p)
	type found struct {
		ok  bool
		err error
	}
	fc := make(chan found, 1)
	go func() {
		defer r.trace(StepImage, time.Now())
		ok, err := r.ImageExists(ctx, ref)
		fc <- found{ok, err}
	}()
	t0 := time.Now()
	err = r.checkNames(ctx, cli, p)
	f := <-fc
	if err != nil {
		return err
	}
	r.trace(StepCheckNames, t0)
	if f.err != nil || f.ok {
		return f.err
	}
	return r.EnsureImage(ctx, p.Image)
}

func (r Runtime) checkNames(ctx context.Context, cli *client.Client, p *plan.Plan) error {
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	want := map[string]bool{}
	for _, n := range p.Nodes {
		want[ContainerName(p.Lab, n.Name)] = true
	}
	var clashes []string
	for _, c := range cs.Items {
		for _, name := range c.Names {
			name = strings.TrimPrefix(name, "/")
			if want[name] && !ours(c.Labels, p.Lab) {
				clashes = append(clashes, fmt.Sprintf("container %s (image %s, %s)", name, c.Image, c.State))
			}
		}
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return fmt.Errorf("list networks: %w", err)
	}
	segs := map[string]*plan.Segment{}
	for _, s := range p.Segments {
		segs[NetworkName(p.Lab, s.Name)] = s
	}
	var overlaps []string
	for _, n := range nets.Items {
		if ours(n.Labels, p.Lab) {
			continue
		}
		if segs[n.Name] != nil {
			clashes = append(clashes, "network "+n.Name)
			continue
		}
		for _, cfg := range n.IPAM.Config {
			for _, s := range p.Segments {
				if cfg.Subnet.IsValid() && cfg.Subnet.Overlaps(s.Subnet) {
					overlaps = append(overlaps, fmt.Sprintf("segment %s (%s) overlaps Docker network %s (%s)", s.Name, s.Subnet.Masked(), n.Name, cfg.Subnet))
				}
			}
		}
	}
	if len(clashes) > 0 {
		return fmt.Errorf("check names of lab %q: %w: %s; sfclab leaves them alone: remove or rename them (docker rm -f NAME, docker network rm NAME) or rename the lab",
			p.Lab, ErrNameClash, strings.Join(clashes, "; "))
	}
	if len(overlaps) > 0 {
		return fmt.Errorf("check subnets of lab %q: %s; give the lab another addressing.pool (the engine refuses overlapping networks)", p.Lab, strings.Join(overlaps, "; "))
	}
	return nil
}

// lockedUndo lets parallel steps push their undo.
type lockedUndo struct {
	mu sync.Mutex
	u  runtime.Undo
}

// Push records an undo step.
func (l *lockedUndo) Push(what string, fn func() error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.u.Push(what, fn)
}

// parallel runs fn(0..n-1) with at most r.Parallel at once; it stops starting new ones after
// the first error or when ctx is done, waits for the running ones and returns every error.
func (r Runtime) parallel(ctx context.Context, n int, fn func(i int) error) error {
	limit := r.Parallel
	if limit <= 0 {
		limit = DefaultParallel
	}
	return pool.Run(ctx, n, limit, fn)
}

// SfclabPath is where a container finds the sfclab program when its function runs it: the
// host's executable, bind-mounted read-only (the node image does not contain sfclab; a build
// of the image per sfclab build would be minutes each time).
const SfclabPath = "/usr/local/bin/sfclab"

// RunsSfclab reports whether a node's function runs the sfclab program in its node (then its
// container, or its pod on kubernetes, mounts the program at SfclabPath).
func RunsSfclab(n *plan.Node) bool {
	if n.Function == nil {
		return false
	}
	k, err := kinds.Get(n.Function.Kind)
	if err != nil {
		return false
	}
	sr, ok := k.(vnf.SelfRunner)
	return ok && sr.RunsSfclab(n.Function)
}

// executable is the sfclab program to mount into containers.
func (r Runtime) executable() (string, error) {
	if r.Executable != "" {
		return r.Executable, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the sfclab program to mount at %s: %w", SfclabPath, err)
	}
	return exe, nil
}

// DefaultParallel is how many engine requests a deploy or destroy keeps in flight when
// Runtime.Parallel is 0.
const DefaultParallel = 4

// segmentsReady tells a node's container when the networks it needs exist.
type segmentsReady struct {
	done map[string]chan struct{} // closed when the segment's network exists or failed
	mu   sync.Mutex
	ok   map[string]bool
	left int // networks not done yet
}

func newSegmentsReady(p *plan.Plan) *segmentsReady {
	s := &segmentsReady{done: map[string]chan struct{}{}, ok: map[string]bool{}, left: len(p.Segments)}
	for _, seg := range p.Segments {
		s.done[seg.Name] = make(chan struct{})
	}
	return s
}

// finish records a segment's network as created (ok) or failed and reports whether it was the
// last one.
func (s *segmentsReady) finish(seg string, ok bool) (last bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ok[seg] = ok
	close(s.done[seg])
	s.left--
	return s.left == 0
}

// needs lists the segments whose networks a node's container needs before it is created: all
// of them, since a container is connected to its other networks while it is created, not yet
// started, so that the start sets up every endpoint at once and Link has no engine request
// left to make.
func needs(n *plan.Node) []string {
	out := make([]string, len(n.Interfaces))
	for i, ifc := range n.Interfaces {
		out[i] = ifc.Segment
	}
	return out
}

// wait waits until the networks of segs exist; false when one failed or ctx is done (the
// cause is reported by the network's own task, or is ctx's).
func (s *segmentsReady) wait(ctx context.Context, segs []string) bool {
	for _, seg := range segs {
		select {
		case <-s.done[seg]:
		case <-ctx.Done():
			return false
		}
		s.mu.Lock()
		ok := s.ok[seg]
		s.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// createOrder interleaves a plan's networks and containers for one pool of workers: each
// container right after the last network it needs, so that containers are created while the
// engine still creates networks. A container waits only for networks earlier in the order,
// which the pool has started before it: no worker waits for a network no worker runs.
func createOrder(p *plan.Plan) ([]any, error) {
	idx := map[string]int{}
	for i, s := range p.Segments {
		idx[s.Name] = i
	}
	after := make([][]*plan.Node, len(p.Segments))
	for _, n := range p.Nodes {
		last := -1
		for _, seg := range needs(n) {
			i, ok := idx[seg]
			if !ok {
				return nil, fmt.Errorf("create container %s: no segment %q in the plan", ContainerName(p.Lab, n.Name), seg)
			}
			last = max(last, i)
		}
		after[last] = append(after[last], n)
	}
	order := make([]any, 0, len(p.Segments)+len(p.Nodes))
	for i, s := range p.Segments {
		order = append(order, s)
		for _, n := range after[i] {
			order = append(order, n)
		}
	}
	return order, nil
}

// CreateNodes creates a Docker network per segment and a container per node, attached to its
// segments' networks with its plan addresses, started, and returns each container's network
// namespace (/proc/PID/ns/net of its init). Networks and containers share one bound of
// concurrent requests (Runtime.Parallel): a container is created as soon as its networks
// exist, while the engine still creates others.
// Equivalent to: docker network create --internal --subnet S --gateway G sfc.LAB.SEG ...;
// docker create --name sfc.LAB.NODE --network sfc.LAB.SEG0 --ip A --cap-add NET_ADMIN
// --cap-add NET_RAW -v DIR:DIR --init IMAGE sleep infinity;
// docker network connect --ip A2 sfc.LAB.SEG1 sfc.LAB.NODE ...; docker start sfc.LAB.NODE
func (r Runtime) CreateNodes(ctx context.Context, p *plan.Plan, undo runtime.Undo) (map[string]*netdev.NS, error) {
	cli, err := r.client(ctx)
	if err != nil {
		return nil, err
	}
	u := &lockedUndo{u: undo}
	nodeDir := r.NodeDir(p.Lab)
	if st, err := os.Stat(nodeDir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("find node directory %s to bind-mount (Runtime.StateRoot must be the Deployer's journal root): %w", nodeDir, err)
	}
	for _, n := range p.Nodes {
		if len(n.Interfaces) == 0 && !p.HostPorts() {
			return nil, fmt.Errorf("create container %s: node %s has no interface", ContainerName(p.Lab, n.Name), n.Name)
		}
	}
	// The VMs' guest images are built (or found) before any container exists.
	if err := r.Machines.PrepareMachines(ctx, p, u); err != nil {
		return nil, err
	}
	var order []any
	if p.HostPorts() {
		// Package hosts gives the containers their ports: no Docker network, no bridge rules.
		for _, n := range p.Nodes {
			order = append(order, n)
		}
	} else if order, err = createOrder(p); err != nil {
		return nil, err
	}
	// Undone last: whatever the engine created although its request was cancelled (the
	// container or network exists, its undo was never pushed) is found by label.
	u.Push("docker objects of lab "+p.Lab, func() error {
		cctx, cancel := cleanupCtx()
		defer cancel()
		return r.Destroy(cctx, p.Lab)
	})
	// The containers and networks created are undone as Destroy removes them: containers
	// first, all at once (Runtime.Parallel in flight), then networks; one by one, a failed
	// deploy of 14 containers spent 6 s unwinding.
	made := &madeObjects{}
	u.Push("networks of lab "+p.Lab, func() error {
		cctx, cancel := cleanupCtx()
		defer cancel()
		return r.removeAll(made.list(true), func(id, name string) error { return removeNetwork(cctx, cli, id, name) })
	})
	u.Push("containers of lab "+p.Lab, func() error {
		cctx, cancel := cleanupCtx()
		defer cancel()
		return r.removeAll(made.list(false), func(id, name string) error { return removeContainer(cctx, cli, id, name) })
	})
	// Whether the engine manages iptables is asked while the first networks are created.
	fwc := make(chan bool, 1)
	go func() { fwc <- userChainExists(ctx) }()
	ready := newSegmentsReady(p)
	out := map[string]*netdev.NS{}
	var mu sync.Mutex
	var internal []string          // bridges of internal networks
	bridges := map[string]string{} // segment -> bridge
	image := Image(p)
	start := time.Now()
	err = r.parallel(ctx, len(order), func(i int) error {
		if s, ok := order[i].(*plan.Segment); ok {
			br, isInternal, err := r.createNetwork(ctx, cli, p, s, made)
			mu.Lock()
			if err == nil {
				bridges[s.Name] = br
				if isInternal {
					internal = append(internal, br)
				}
			}
			mu.Unlock()
			if !ready.finish(s.Name, err == nil) || err != nil {
				return err
			}
			r.trace(StageNetworks, start)
			// The last network: accept the lab's traffic on every internal bridge and DNAT the
			// source's connections to published ports while the containers are being created.
			mu.Lock()
			brs := slices.Clone(internal)
			nat, err := natRules(p, bridges)
			mu.Unlock()
			if err != nil {
				return err
			}
			if len(brs)+len(nat) == 0 || !<-fwc {
				return nil
			}
			t0 := time.Now()
			u.Push("host iptables rules of lab "+p.Lab, func() error {
				cctx, cancel := cleanupCtx()
				defer cancel()
				return dropLabRules(cctx, p.Lab)
			})
			defer r.trace(StepBridgeRules, t0)
			return addHostRules(ctx, brs, nat, p.Lab)
		}
		n := order[i].(*plan.Node)
		if !p.HostPorts() && !ready.wait(ctx, needs(n)) {
			return ctx.Err() // a failed network reports itself
		}
		ns, err := r.createContainer(ctx, cli, p, n, image, nodeDir, made, u)
		if err != nil {
			return err
		}
		mu.Lock()
		out[n.Name] = ns
		mu.Unlock()
		return nil
	})
	r.trace(StageContainers, start)
	if err == nil && p.Image != "" {
		err = r.checkPrograms(ctx, cli, p)
	}
	if err != nil {
		for _, ns := range out {
			ns.Close()
		}
		return nil, err
	}
	return out, nil
}

// madeObjects records the containers and networks a deploy created, for its undo.
type madeObjects struct {
	mu                   sync.Mutex
	containers, networks []engineObject
}

// engineObject is a container or network by ID, with its name for errors.
type engineObject struct{ id, name string }

// add records a container, or a network.
func (m *madeObjects) add(network bool, id, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if network {
		m.networks = append(m.networks, engineObject{id, name})
	} else {
		m.containers = append(m.containers, engineObject{id, name})
	}
}

// list returns the networks, or the containers, recorded so far.
func (m *madeObjects) list(networks bool) []engineObject {
	m.mu.Lock()
	defer m.mu.Unlock()
	if networks {
		return slices.Clone(m.networks)
	}
	return slices.Clone(m.containers)
}

// removeAll removes objects with at most Runtime.Parallel requests in flight, every one of
// them whatever fails, and joins the errors.
func (r Runtime) removeAll(objs []engineObject, remove func(id, name string) error) error {
	limit := r.Parallel
	if limit <= 0 {
		limit = DefaultParallel
	}
	return pool.All(len(objs), limit, func(i int) error { return remove(objs[i].id, objs[i].name) })
}

// createNetwork creates a segment's network: a bridge with the plan's subnet, the segment's
// gateway address on the host side and the lab's MTU; internal unless a port is published on
// it. It returns the network's host bridge and whether the network is internal; the network
// is recorded in made for the deploy's undo.
func (r Runtime) createNetwork(ctx context.Context, cli *client.Client, p *plan.Plan, s *plan.Segment, made *madeObjects) (string, bool, error) {
	name := NetworkName(p.Lab, s.Name)
	internal := !published(p, s)
	if err := ctx.Err(); err != nil {
		return "", false, fmt.Errorf("create network %s (%s): %w", name, s.Subnet.Masked(), err)
	}
	cctx, cancel := createCtx(ctx)
	defer cancel()
	t0 := time.Now()
	res, err := cli.NetworkCreate(cctx, name, client.NetworkCreateOptions{
		Driver:   "bridge",
		Internal: internal,
		IPAM: &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{
			Subnet: s.Subnet.Masked(), Gateway: s.Gateway,
		}}},
		Options: map[string]string{"com.docker.network.driver.mtu": strconv.Itoa(mtu(p))},
		Labels:  labels(p.Lab, LabelSegment, s.Name, LabelState, r.stateRoot()),
	})
	if err != nil {
		return "", false, fmt.Errorf("create network %s (%s): %w", name, s.Subnet.Masked(), err)
	}
	r.trace(StepNetworkCreate, t0)
	made.add(true, res.ID, name)
	return bridgeName(res.ID), internal, nil
}

// staleEndpointWait bounds how long removeNetwork waits for the engine to release the
// endpoints of containers that are already removed.
const staleEndpointWait = 10 * time.Second

// removeNetwork removes a network whose containers sfclab has already removed. Docker Engine
// 20.10 can answer "has active endpoints" for a moment after a forced container removal (the
// endpoint's release runs after the removal returns; seen in CI on stop 27's
// TestTransparentOnDocker). removeNetwork retries for up to staleEndpointWait, force-
// disconnecting the endpoints the network still lists (as `docker network disconnect -f`
// does), and then reports the last error with the endpoints left.
func removeNetwork(ctx context.Context, cli *client.Client, id, name string) error {
	deadline := time.Now().Add(staleEndpointWait)
	for {
		_, err := cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
		if err == nil || isNotFound(err) {
			return nil
		}
		if !strings.Contains(err.Error(), "active endpoints") || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("remove network %s: %w", name, err)
		}
		if in, ierr := cli.NetworkInspect(ctx, id, client.NetworkInspectOptions{}); ierr == nil {
			for cid := range in.Network.Containers {
				// Best effort: the next NetworkRemove says whether it worked.
				_, _ = cli.NetworkDisconnect(ctx, id, client.NetworkDisconnectOptions{Container: cid, Force: true})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// bridgeName is the host bridge the engine makes for a network (br- and 12 hex digits).
func bridgeName(id string) string { return "br-" + id[:min(12, len(id))] }

// createContainer creates and starts a node's container on its first segment's network; the
// container is recorded in made for the deploy's undo, the undo of what follows in u.
func (r Runtime) createContainer(ctx context.Context, cli *client.Client, p *plan.Plan, n *plan.Node, image, nodeDir string, made *madeObjects, u runtime.Undo) (*netdev.NS, error) {
	name := ContainerName(p.Lab, n.Name)
	// Without interfaces of the engine's (Plan.HostPorts) the container starts in a namespace
	// of its own with only lo, and package hosts gives it its ports.
	netName, nc := "none", &network.NetworkingConfig{}
	if !p.HostPorts() {
		first := n.Interfaces[0]
		netName = NetworkName(p.Lab, first.Segment)
		nc.EndpointsConfig = map[string]*network.EndpointSettings{
			netName: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: first.Address.Addr()}},
		}
	}
	cfg := &container.Config{
		Hostname: n.Name,
		Image:    image,
		Cmd:      []string{"sleep", "infinity"},
		// A lab's own image may have an entrypoint or a non-root user: nodes need neither.
		Entrypoint: []string{},
		User:       "0",
		Labels:     labels(p.Lab, LabelNode, n.Name, LabelState, r.stateRoot()),
	}
	yes := true
	hc := &container.HostConfig{
		NetworkMode:   container.NetworkMode(netName),
		CapAdd:        []string{"NET_ADMIN", "NET_RAW"},
		Binds:         []string{nodeDir + ":" + nodeDir},
		Init:          &yes,
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
	}
	if h := p.HostOf(n.Name); h != nil && h.CPUs != "" {
		hc.Resources.CpusetCpus = h.CPUs // the emulated host's cores
	}
	if RunsSfclab(n) {
		exe, err := r.executable()
		if err != nil {
			return nil, fmt.Errorf("create container %s: %w", name, err)
		}
		hc.Binds = append(hc.Binds, exe+":"+SfclabPath+":ro")
	}
	for _, pub := range p.Publish {
		if pub.Node != n.Name {
			continue
		}
		port, err := network.ParsePort(fmt.Sprintf("%d/%s", pub.Port, pub.Protocol))
		if err != nil {
			return nil, fmt.Errorf("create container %s: publish %d/%s: %w", name, pub.Port, pub.Protocol, err)
		}
		if cfg.ExposedPorts == nil {
			cfg.ExposedPorts = network.PortSet{}
			hc.PortBindings = network.PortMap{}
		}
		cfg.ExposedPorts[port] = struct{}{}
		hc.PortBindings[port] = append(hc.PortBindings[port], network.PortBinding{HostIP: pub.HostIP, HostPort: strconv.Itoa(int(pub.HostPort))})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create container %s: %w", name, err)
	}
	cctx, cancel := createCtx(ctx)
	defer cancel()
	t0 := time.Now()
	res, err := cli.ContainerCreate(cctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc, NetworkingConfig: nc})
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", name, err)
	}
	r.trace(StepCreate, t0)
	made.add(false, res.ID, name)
	if !p.HostPorts() {
		// The engine of API 1.41 takes one network at create; the others are added before
		// the start, which then sets up every endpoint in one go.
		for _, ifc := range n.Interfaces[1:] {
			if err := r.connect(ctx, cli, p, res.ID, name, ifc); err != nil {
				return nil, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start container %s: %w", name, err)
	}
	t0 = time.Now()
	if _, err := cli.ContainerStart(cctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return nil, fmt.Errorf("start container %s: %w", name, err)
	}
	r.trace(StepStart, t0)
	t0 = time.Now()
	insp, err := cli.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", name, err)
	}
	r.trace(StepInspect, t0)
	st := insp.Container.State
	if st == nil || !st.Running || st.Pid == 0 {
		msg := "not running"
		if st != nil && st.Error != "" {
			msg = st.Error
		}
		return nil, fmt.Errorf("start container %s: %s", name, msg)
	}
	t0 = time.Now()
	defer r.trace(StepOpenNS, t0)
	nsPath := fmt.Sprintf("/proc/%d/ns/net", st.Pid)
	if p.HostPorts() || n.VM != nil {
		// Package hosts and steering find a node's namespace by its name, as a netns node's;
		// so does runtime vm, which starts a VM node's QEMU in it (machines.go).
		u.Push("netns "+n.Netns, func() error { return netdev.DeleteNetns(n.Netns) })
		if err := netdev.BindNetns(n.Netns, nsPath); err != nil {
			return nil, fmt.Errorf("name the namespace of container %s: %w", name, err)
		}
	}
	if n.VM != nil {
		// The container is the VM's host side: QEMU's threads are accounted in the node's
		// cgroup (machines.go).
		if err := vm.HostSide(p, n, u); err != nil {
			return nil, fmt.Errorf("create container %s: %w", name, err)
		}
	}
	if p.HostPorts() {
		return netdev.OpenNS(n.Netns)
	}
	return netdev.OpenNSPath(nsPath, name)
}

// connect attaches a container to the network of one of its node's interfaces, with the
// interface's plan address.
// Equivalent to: docker network connect --ip A sfc.LAB.SEG sfc.LAB.NODE
func (r Runtime) connect(ctx context.Context, cli *client.Client, p *plan.Plan, id, name string, ifc *plan.Interface) error {
	netName := NetworkName(p.Lab, ifc.Segment)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("connect container %s to network %s: %w", name, netName, err)
	}
	cctx, cancel := createCtx(ctx)
	defer cancel()
	t0 := time.Now()
	_, err := cli.NetworkConnect(cctx, netName, client.NetworkConnectOptions{Container: id,
		EndpointConfig: &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ifc.Address.Addr()}}})
	if err != nil {
		return fmt.Errorf("connect container %s to network %s: %w", name, netName, err)
	}
	r.trace(StepConnect, t0)
	return nil
}

// removeContainer removes a container and whatever runs in it; a missing one is not an error.
// Equivalent to: docker rm -f NAME
func removeContainer(ctx context.Context, cli *client.Client, id, name string) error {
	if _, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove container %s: %w", name, err)
	}
	return nil
}

// checkPrograms verifies that a lab's own image has every program the functions and run
// commands of its containers need (a VM node's run in its guest), before anything runs in it.
func (r Runtime) checkPrograms(ctx context.Context, cli *client.Client, p *plan.Plan) error {
	needs, err := kinds.Needs(p)
	if err != nil {
		return err
	}
	who := map[string][]string{}
	for _, n := range needs {
		// A VM node's programs come from the host, into its guest image (runtime vm).
		nodes := slices.DeleteFunc(slices.Clone(n.Nodes), func(name string) bool {
			pn := p.Node(name)
			return pn != nil && pn.VM != nil
		})
		if len(nodes) > 0 {
			who[n.Program] = nodes
		}
	}
	if len(who) == 0 {
		return nil
	}
	node, err := r.openNode(ctx, cli, p.Lab, p.Nodes[0].Name)
	if err != nil {
		return err
	}
	return runtime.CheckImagePrograms(ctx, node, p.Image, who, "")
}

// Link names every interface as the plan does (matched by address: the engine calls them
// eth0, eth1, ... in its own order) and deletes every default route in the containers
// (internal networks still get one on this engine). CreateNodes has connected the containers
// to all their networks already (see needs).
// Equivalent to: ip link set ethN name IFNAME; ip route del default
func (r Runtime) Link(ctx context.Context, p *plan.Plan, ns map[string]*netdev.NS, _ runtime.Undo) error {
	if p.HostPorts() {
		return nil // package hosts gives the containers their ports
	}
	start := time.Now()
	err := r.parallel(ctx, len(p.Nodes), func(i int) error {
		n := p.Nodes[i]
		h := ns[n.Name]
		if h == nil {
			return fmt.Errorf("link node %s: no namespace handle", n.Name)
		}
		t0 := time.Now()
		defer r.trace(StepRename, t0)
		if err := nameInterfaces(h, n); err != nil {
			return err
		}
		return h.DelDefaultRoutes()
	})
	r.trace(StageLink, start)
	if err != nil {
		return err
	}
	if p.Transparent != nil {
		return nil // its VMs boot in the steering step (BootOnPorts)
	}
	// The VMs boot once their containers' interfaces have the plan's names (machines.go).
	return r.Machines.BootMachines(ctx, p, ns)
}

// nameInterfaces renames a container's interfaces to the plan's names, finding each by its
// address; names that are taken are freed through a temporary name first.
func nameInterfaces(h *netdev.NS, n *plan.Node) error {
	links, err := h.Links()
	if err != nil {
		return fmt.Errorf("name interfaces of node %s: %w", n.Name, err)
	}
	current := map[string]bool{}
	for _, l := range links {
		current[l.Name] = true
	}
	var moves []move
	for _, ifc := range n.Interfaces {
		found := ""
		for _, l := range links {
			if slices.ContainsFunc(l.Addrs, func(a netip.Prefix) bool { return a == ifc.Address }) {
				found = l.Name
			}
		}
		if found == "" {
			return fmt.Errorf("name interfaces of node %s: no interface has address %s", n.Name, ifc.Address)
		}
		if found != ifc.Name {
			moves = append(moves, move{found, ifc.Name})
		}
	}
	steps, err := renames(current, moves)
	if err != nil {
		return fmt.Errorf("name interfaces of node %s: %w", n.Name, err)
	}
	for _, m := range steps {
		if err := h.RenameLink(m.from, m.to); err != nil {
			return err
		}
	}
	return nil
}

// move is one link rename.
type move struct{ from, to string }

// renames orders the renames that carry out moves among links named current (true = taken):
// a link whose new name is taken moves to a temporary name first, then every link takes its
// name as soon as that name is free (eth0 and eth1 swapped: eth1 -> sfctmp0, eth0 -> eth1,
// sfctmp0 -> eth0).
func renames(current map[string]bool, moves []move) ([]move, error) {
	current = maps.Clone(current)
	moves = slices.Clone(moves)
	var steps []move
	for i, m := range moves {
		if current[m.to] {
			tmp := fmt.Sprintf("sfctmp%d", i)
			steps = append(steps, move{m.from, tmp})
			current[m.from], current[tmp] = false, true
			moves[i].from = tmp
		}
	}
	for len(moves) > 0 {
		var blocked []move
		for _, m := range moves {
			if current[m.to] {
				blocked = append(blocked, m)
				continue
			}
			steps = append(steps, m)
			current[m.from], current[m.to] = false, true
		}
		if len(blocked) == len(moves) {
			return nil, fmt.Errorf("names %v stay taken", blocked)
		}
		moves = blocked
	}
	return steps, nil
}

// Node returns the running container of a deployed lab's node.
func (r Runtime) Node(ctx context.Context, p *plan.Plan, name string) (runtime.Node, error) {
	pn := p.Node(name)
	if pn == nil {
		return nil, fmt.Errorf("find node %q in lab %q: no such node", name, p.Lab)
	}
	if pn.VM != nil {
		return r.Machines.Node(ctx, p, name) // its guest, through the agent
	}
	cli, err := r.client(ctx)
	if err != nil {
		return nil, err
	}
	return r.openNode(ctx, cli, p.Lab, name)
}

// OpenNode returns the running container of a lab's node without the lab's plan (for probes).
func (r Runtime) OpenNode(ctx context.Context, lab, name string) (*Node, error) {
	cli, err := r.client(ctx)
	if err != nil {
		return nil, err
	}
	return r.openNode(ctx, cli, lab, name)
}

func (r Runtime) openNode(ctx context.Context, cli *client.Client, lab, name string) (*Node, error) {
	cname := ContainerName(lab, name)
	res, err := cli.ContainerInspect(ctx, cname, client.ContainerInspectOptions{})
	if isNotFound(err) {
		return nil, fmt.Errorf("find container %s of node %s: %w", cname, name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", cname, err)
	}
	c := res.Container
	if c.Config == nil || !ours(c.Config.Labels, lab) {
		return nil, fmt.Errorf("open container %s: %w", cname, ErrNameClash)
	}
	if c.State == nil || !c.State.Running || c.State.Pid == 0 {
		return nil, fmt.Errorf("open container %s of node %s: not running: %w", cname, name, ErrNotFound)
	}
	n := &Node{Name: name, Lab: lab, Container: cname, ID: c.ID, PID: c.State.Pid, cli: cli}
	for _, m := range c.Mounts {
		if m.Type == "bind" && m.Source == m.Destination {
			n.mounts = append(n.mounts, m.Destination)
		}
		if m.Type == "bind" && m.Destination == SfclabPath {
			n.sfclab = SfclabPath
		}
	}
	return n, nil
}

// Labs lists the labs of this runtime's journal root that have containers or networks in the
// engine (found by label), and the labs whose host iptables rules name a bridge that is gone
// (orphanLabs), for `sfclab destroy --all` after a crash that lost the journal.
// Equivalent to: docker ps -a --filter label=sfclab.managed=true --filter label=sfclab.state=ROOT --format '{{.Label "sfclab.lab"}}'
func (r Runtime) Labs(ctx context.Context) ([]string, error) {
	orphans := orphanLabs(ctx)
	cli, err := r.client(ctx)
	if err != nil {
		return orphans, err
	}
	f := make(client.Filters).Add("label", LabelManaged+"=true").Add("label", LabelState+"="+r.stateRoot())
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	labs := orphans
	for _, c := range cs.Items {
		labs = append(labs, c.Labels[LabelLab])
	}
	for _, n := range nets.Items {
		labs = append(labs, n.Labels[LabelLab])
	}
	sort.Strings(labs)
	labs = slices.Compact(labs)
	return slices.DeleteFunc(labs, func(s string) bool { return s == "" }), nil
}

// labUsesDocker reports whether the journal says a lab runs on this runtime.
func (r Runtime) labUsesDocker(lab string) bool {
	p, err := journal.Journal{Root: r.stateRoot(), Kinds: kinds.Spec()}.ReadPlan(lab)
	return err == nil && p.Runtime == spec.RuntimeDocker
}

// unreachable turns an engine that does not answer into "nothing here" for labs that do not
// run on docker (destroying a netns lab must not need the engine), and into the error for
// labs that do.
func (r Runtime) unreachable(lab string, err error) error {
	if errors.Is(err, ErrUnreachable) && !r.labUsesDocker(lab) {
		return nil
	}
	return err
}

// Leftovers lists a lab's containers, networks and host iptables rules (DOCKER-USER, nat).
// Equivalent to: docker ps -a --filter label=sfclab.lab=LAB; docker network ls --filter label=sfclab.lab=LAB
func (r Runtime) Leftovers(ctx context.Context, lab string) (out []string, err error) {
	// iptables runs while the engine answers; its rules come first.
	rc := make(chan []hostRule, 1)
	go func() {
		rules, _ := labRules(ctx, lab)
		rc <- rules
	}()
	defer func() {
		var rs []string
		for _, rl := range <-rc {
			rs = append(rs, rl.String())
		}
		out = append(rs, out...)
	}()
	cli, err := r.client(ctx)
	if err != nil {
		return out, r.unreachable(lab, err)
	}
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labFilter(lab)})
	if err != nil {
		return out, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs.Items {
		if ours(c.Labels, lab) && len(c.Names) > 0 {
			out = append(out, "container "+strings.TrimPrefix(c.Names[0], "/"))
		}
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: labFilter(lab)})
	if err != nil {
		return out, fmt.Errorf("list networks: %w", err)
	}
	for _, n := range nets.Items {
		if ours(n.Labels, lab) {
			out = append(out, "network "+n.Name)
		}
	}
	vms, _ := r.Machines.Leftovers(ctx, lab) // the VMs' run directory
	return append(out, vms...), nil
}

// Destroy removes the lab's containers (with everything running in them), then its networks,
// then its host iptables rules (DOCKER-USER and nat PREROUTING): only objects labelled sfclab.managed=true and sfclab.lab=LAB.
// Equivalent to: docker rm -f $(docker ps -aq --filter label=sfclab.lab=LAB);
// docker network rm $(docker network ls -q --filter label=sfclab.lab=LAB)
func (r Runtime) Destroy(ctx context.Context, lab string) error {
	defer r.trace(StageDestroy, time.Now())
	var errs []error
	cli, err := r.client(ctx)
	if err != nil {
		if err := dropLabRules(ctx, lab); err != nil {
			errs = append(errs, err)
		}
		if err := r.unreachable(lab, err); err != nil {
			errs = append(errs, err)
		}
		return joinDestroy(lab, errs)
	}
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labFilter(lab)})
	if err != nil {
		return fmt.Errorf("destroy containers of lab %q: %w", lab, err)
	}
	var mine []container.Summary
	for _, c := range cs.Items {
		if ours(c.Labels, lab) {
			mine = append(mine, c)
		}
	}
	if err := r.parallel(context.WithoutCancel(ctx), len(mine), func(i int) error {
		name := mine[i].ID
		if len(mine[i].Names) > 0 {
			name = strings.TrimPrefix(mine[i].Names[0], "/")
		}
		defer r.trace(StepRemove, time.Now())
		return removeContainer(ctx, cli, mine[i].ID, name)
	}); err != nil {
		errs = append(errs, err)
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: labFilter(lab)})
	if err != nil {
		errs = append(errs, fmt.Errorf("list networks: %w", err))
	}
	var mynets []network.Summary
	for _, n := range nets.Items {
		if ours(n.Labels, lab) {
			mynets = append(mynets, n)
		}
	}
	if err := r.parallel(context.WithoutCancel(ctx), len(mynets), func(i int) error {
		n := mynets[i]
		defer r.trace(StepNetworkRemove, time.Now())
		return removeNetwork(ctx, cli, n.ID, n.Name)
	}); err != nil {
		errs = append(errs, err)
	}
	if err := dropLabRules(ctx, lab); err != nil {
		errs = append(errs, err)
	}
	return joinDestroy(lab, errs)
}

func joinDestroy(lab string, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("destroy docker objects of lab %q: %w", lab, errors.Join(errs...))
}

// TakenSubnets lists the subnets of every network on the engine (runtime.SubnetHolder).
// Equivalent to: docker network inspect $(docker network ls -q) --format '{{range .IPAM.Config}}{{.Subnet}}{{end}}'
func (r Runtime) TakenSubnets(ctx context.Context) ([]netip.Prefix, error) {
	cli, err := r.client(ctx)
	if err != nil {
		return nil, err
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	var out []netip.Prefix
	for _, n := range nets.Items {
		for _, cfg := range n.IPAM.Config {
			if cfg.Subnet.IsValid() {
				out = append(out, cfg.Subnet)
			}
		}
	}
	return out, nil
}
