package docker_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/sfclab/sfclab/runtime/docker"
)

// floorLab names the containers and networks of BenchmarkDockerFloor (removed by label).
const floorLab = "t-floor"

// BenchmarkDockerFloor measures what the engine itself costs here, without sfclab: the floor
// under BenchmarkDockerDeploy.
//   - cli-run: `docker run -d --network none IMAGE sleep infinity` of one container, until the
//     command returns (the CLI's own start included), then `docker rm -f`;
//   - bare-N: N containers with no network created, started and inspected through the API
//     with DefaultParallel requests in flight;
//   - net-N: the same, each on its own internal network created first (a lab of N nodes
//     with one interface each).
//
// Run: flock -o /tmp/sfclab-suite.lock go test -run '^$' -bench DockerFloor -benchtime 3x ./runtime/docker/
func BenchmarkDockerFloor(b *testing.B) {
	if skipReason != "" {
		b.Skip(skipReason)
	}
	ctx := context.Background()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	image := docker.DefaultImage()
	cleanup := func() {
		if err := (docker.Runtime{}).Destroy(ctx, floorLab); err != nil {
			b.Fatal(err)
		}
	}
	cleanup()
	b.Cleanup(cleanup)
	b.Run("cli-run", func(b *testing.B) {
		name := docker.ContainerName(floorLab, "cli")
		var sum time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			out, err := exec.Command("docker", "run", "-d", "--name", name, "--label", docker.LabelManaged+"=true",
				"--label", docker.LabelLab+"="+floorLab, "--network", "none", "--init", image, "sleep", "infinity").CombinedOutput()
			if err != nil {
				b.Fatalf("docker run: %v: %s", err, out)
			}
			sum += time.Since(t0)
			if out, err := exec.Command("docker", "rm", "-f", name).CombinedOutput(); err != nil {
				b.Fatalf("docker rm: %v: %s", err, out)
			}
		}
		b.ReportMetric(sum.Seconds()/float64(b.N), "run-s")
	})
	for _, n := range []int{1, 8, 64} {
		for _, withNet := range []bool{false, true} {
			kind := "bare"
			if withNet {
				kind = "net"
			}
			b.Run(fmt.Sprintf("%s-%d", kind, n), func(b *testing.B) {
				var sum time.Duration
				var busy, total uint64
				for i := 0; i < b.N; i++ {
					var m busyMeter
					m.start(b)
					sum += floorRun(b, cli, image, n, withNet)
					bu, to := m.stop(b)
					busy, total = busy+bu, total+to
					cleanup()
				}
				b.ReportMetric(float64(busy)/float64(total), "host-busy")
				b.ReportMetric(sum.Seconds()/float64(b.N), "s")
				b.ReportMetric(sum.Seconds()/float64(b.N)/float64(n), "s/container")
			})
		}
	}
}

// floorRun creates (with withNet, on a network of its own each) and starts n containers with
// DefaultParallel requests in flight and returns the wall time until all run.
func floorRun(b *testing.B, cli *client.Client, image string, n int, withNet bool) time.Duration {
	ctx := context.Background()
	sem := make(chan struct{}, docker.DefaultParallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	t0 := time.Now()
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := floorContainer(ctx, cli, image, i, withNet); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	return took
}

func floorContainer(ctx context.Context, cli *client.Client, image string, i int, withNet bool) error {
	labels := map[string]string{docker.LabelManaged: "true", docker.LabelLab: floorLab}
	name := docker.ContainerName(floorLab, fmt.Sprintf("n%d", i))
	mode := "none"
	var nc *network.NetworkingConfig
	if withNet {
		mode = docker.NetworkName(floorLab, fmt.Sprintf("s%d", i))
		// 198.19.128.0/17, one /28 per container: away from the labs' default pool.
		subnet := fmt.Sprintf("198.19.%d.%d/28", 128+i/16, (i%16)*16)
		if _, err := cli.NetworkCreate(ctx, mode, client.NetworkCreateOptions{Driver: "bridge", Internal: true,
			IPAM:   &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: netip.MustParsePrefix(subnet)}}},
			Labels: labels}); err != nil {
			return fmt.Errorf("create network %s: %w", mode, err)
		}
		nc = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{mode: {}}}
	}
	yes := true
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name,
		Config:           &container.Config{Image: image, Cmd: []string{"sleep", "infinity"}, Entrypoint: []string{}, User: "0", Labels: labels},
		HostConfig:       &container.HostConfig{NetworkMode: container.NetworkMode(mode), Init: &yes, CapAdd: []string{"NET_ADMIN", "NET_RAW"}},
		NetworkingConfig: nc})
	if err != nil {
		return fmt.Errorf("create container %s: %w", name, err)
	}
	if _, err := cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start container %s: %w", name, err)
	}
	if _, err := cli.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{}); err != nil {
		return fmt.Errorf("inspect container %s: %w", name, err)
	}
	return nil
}

// hostCPU reads the host's busy and total CPU time from /proc/stat (all CPUs, in ticks).
func hostCPU(tb testing.TB) (busy, total uint64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			tb.Fatalf("parse /proc/stat %q: %v", line, err)
		}
		if i >= 8 { // guest times are in user and nice already
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// busyMeter measures the share of the host's CPU time that was busy between start and stop.
type busyMeter struct{ busy, total uint64 }

func (m *busyMeter) start(tb testing.TB) { m.busy, m.total = hostCPU(tb) }

func (m *busyMeter) stop(tb testing.TB) (busy, total uint64) {
	b, t := hostCPU(tb)
	return b - m.busy, t - m.total
}
