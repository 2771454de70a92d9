package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Labels sfclab puts on everything it creates in the engine; Destroy and Leftovers find a
// lab's containers and networks by them and never touch anything without them.
const (
	// LabelManaged is "true" on every container, network and image sfclab created.
	LabelManaged = "sfclab.managed"
	// LabelLab is the lab a container or network belongs to.
	LabelLab = "sfclab.lab"
	// LabelNode is the node a container is.
	LabelNode = "sfclab.node"
	// LabelSegment is the segment a network is.
	LabelSegment = "sfclab.segment"
	// LabelState is the journal root of the sfclab that created the object, so that
	// `destroy --all` of one journal (a user's, or a test's private one) never reaches the labs
	// of another.
	LabelState = "sfclab.state"
	// LabelImage is "node" on the node images `sfclab images build` makes.
	LabelImage = "sfclab.image"
	// LabelPackages lists the Debian packages of a node image (comma-separated).
	LabelPackages = "sfclab.packages"
)

// Prefix starts the name of every container and network sfclab creates (as plan.NetnsPrefix
// starts namespace names): sfc.LAB.NODE, sfc.LAB.SEGMENT.
const Prefix = "sfc."

// ContainerName is the container of a lab's node.
// Equivalent to: docker run --name sfc.LAB.NODE ...
func ContainerName(lab, node string) string { return Prefix + lab + "." + node }

// NetworkName is the Docker network of a lab's segment.
// Equivalent to: docker network create sfc.LAB.SEGMENT ...
func NetworkName(lab, segment string) string { return Prefix + lab + "." + segment }

// ErrUnreachable is returned when the Docker Engine does not answer.
var ErrUnreachable = errors.New("Docker Engine not reachable")

// ErrNameClash is returned by Preflight when a container or network with a name sfclab needs
// exists and sfclab did not create it.
var ErrNameClash = errors.New("name taken by something sfclab did not create")

// ErrNotFound is returned for a lab's container that does not exist or does not run.
var ErrNotFound = errors.New("not found")

// PingTimeout bounds the first contact with the engine.
const PingTimeout = 5 * time.Second

// clients caches one API client per engine address: a client keeps a pool of connections,
// and Node is called often (inspect, bench) without a way to close what it returns.
var clients sync.Map // host -> *client.Client

// host returns the engine address r talks to.
func (r Runtime) host() string {
	if r.Host != "" {
		return r.Host
	}
	if h := os.Getenv(client.EnvOverrideHost); h != "" {
		return h
	}
	return client.DefaultDockerHost
}

// client returns the API client of r's engine, checking once per process that the engine
// answers (and negotiating the API version down to the engine's, 1.41 for Docker 20.10).
func (r Runtime) client(ctx context.Context) (*client.Client, error) {
	host := r.host()
	if c, ok := clients.Load(host); ok {
		return c.(*client.Client), nil
	}
	c, err := client.New(client.FromEnv, client.WithHost(host))
	if err != nil {
		return nil, fmt.Errorf("connect to Docker Engine at %s: %w", host, err)
	}
	pctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	if _, err := c.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w at %s: start it (systemctl start docker or dockerd): %w", ErrUnreachable, host, err)
	}
	if prev, loaded := clients.LoadOrStore(host, c); loaded {
		c.Close()
		return prev.(*client.Client), nil
	}
	return c, nil
}

// Reachable checks that the engine answers.
// Equivalent to: docker version
func (r Runtime) Reachable(ctx context.Context) error {
	_, err := r.client(ctx)
	return err
}

// labels returns the owner labels of a lab's object, plus kv pairs.
func labels(lab string, kv ...string) map[string]string {
	m := map[string]string{LabelManaged: "true", LabelLab: lab}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// ours reports whether an object's labels say sfclab created it for lab.
func ours(l map[string]string, lab string) bool {
	return l[LabelManaged] == "true" && l[LabelLab] == lab
}

// labFilter selects a lab's objects by label.
func labFilter(lab string) client.Filters {
	return make(client.Filters).Add("label", LabelManaged+"=true", LabelLab+"="+lab)
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// cleanupCtx is the context undo and teardown steps run with: the deploy's own context may be
// cancelled (Ctrl-C) and the removal must still happen.
func cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// createCtx is the context of a request that makes something on the engine (a network, a
// container, an endpoint, a start): the engine of API 1.41 carries such a request out even when
// its client goes away, so a deploy cancelled meanwhile (Ctrl-C) waits for the answer, at most
// as long as cleanupCtx allows, and its undo then knows every object that exists. Without
// this, an object whose request was cancelled in flight could appear after the undo's last
// look for the lab's objects. Callers check ctx first, so nothing new starts once it is done.
func createCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
}
