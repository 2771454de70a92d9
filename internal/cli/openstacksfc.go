package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/sfclab/sfclab"
	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/api/sfcclient"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
	"github.com/spf13/cobra"
)

// openstackSFC is the name of study C's deploy-time reproduction.
const openstackSFC = "openstack-sfc"

// openstackSFCLab is the lab the experiment deploys (embedded).
const openstackSFCLab = "experiments/labs/openstack-sfc.yaml"

// runOpenStackSFC reproduces study C's deploy-time figure: it deploys the ten-function lab,
// serves the networking-sfc API over it on a loopback port, and times the four REST steps at
// the client over HTTP for chains of 1..10 functions, then writes report.md and samples.csv.
func runOpenStackSFC(cmd *cobra.Command, quick bool, out string, repetitions int) (err error) {
	if err := deploy.CheckRoot(); err != nil {
		return err
	}
	data, err := fs.ReadFile(sfclab.Files, openstackSFCLab)
	if err != nil {
		return fmt.Errorf("read %s: %w", openstackSFCLab, err)
	}
	lab, err := spec.Decode(data, openstackSFCLab, kinds.Spec())
	if err != nil {
		return err
	}
	p, err := plan.Build(lab)
	if err != nil {
		return err
	}
	e := &sfcclient.DeployTime{Lab: p.Lab, Source: "client", Destination: "server",
		MatchFields: map[string]any{"protocol": "udp"}, Repetitions: 10}
	for _, h := range p.Chains[0].Hops {
		e.Functions = append(e.Functions, h.Group)
	}
	if quick {
		e.Repetitions, e.Functions = 2, e.Functions[:3]
	}
	if repetitions > 0 {
		e.Repetitions = repetitions
	}
	if out == "" {
		out = filepath.Join("out", openstackSFC+"-"+time.Now().Format("20060102-150405"))
	}
	errOut := cmd.ErrOrStderr()
	ctx := cmd.Context()
	d := deploy.New()
	d.Log = func(f string, a ...any) { fmt.Fprintf(errOut, f+"\n", a...) }
	if _, err := d.Deploy(ctx, p, openstackSFCLab); err != nil {
		return err
	}
	defer func() {
		if derr := d.Destroy(context.WithoutCancel(ctx), p.Lab); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	rec := &api.Recorder{}
	s, err := api.New(ctx, api.Config{Journal: d.Journal, DataPlane: rec, Log: d.Log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen on loopback: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	c := &sfcclient.Client{Endpoint: "http://" + ln.Addr().String()}
	fmt.Fprintf(errOut, "study C deploy time: chains of 1..%d functions x %d repetitions over %s\n", len(e.Functions), e.Repetitions, c.Endpoint)
	if isTerminal(errOut) {
		e.Progress = func(rep, n int, dd *sfcclient.Deployed) {
			fmt.Fprintf(errOut, "\r\033[Krepetition %d/%d, %2d functions: %8.3f ms", rep, e.Repetitions, n, float64(dd.Total().Microseconds())/1000)
		}
	}
	samples, runErr := e.Run(ctx, c)
	if e.Progress != nil {
		fmt.Fprintln(errOut)
	}
	if len(samples) == 0 {
		return runErr
	}
	var rep bytes.Buffer
	fmt.Fprintf(&rep, "# Study C: deploy time of a port chain over the networking-sfc REST API\n\n")
	fmt.Fprintf(&rep, "sfclab %s, `sfclab serve` on loopback, lab %s (%d forwarders), %d repetitions, flow classifier protocol udp from client-eth0 to server-eth0. ",
		Version, p.Lab, len(e.Functions), e.Repetitions)
	fmt.Fprintf(&rep, "Each step is timed at the client over HTTP (the sum of its requests: 1 flow classifier, n port pairs, n port pair groups, 1 port chain).\n\n")
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Fprintf(&rep, "Host: Linux %s, %d CPUs, journal %s; run %s.\n\n", strings.TrimSpace(string(kernel)), goruntime.NumCPU(), d.Journal.Root, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&rep, "Data plane: **recorder** — the API validated, stored and handed each chain to a recording data plane; the transparent eBPF data plane is not wired yet, so the port-chain step here does not include installing steering, and the time until the first packet crosses a new chain is not measured.\n\n")
	if runErr != nil {
		fmt.Fprintf(&rep, "**Incomplete**: %v\n\n", runErr)
	}
	if err := sfcclient.Table(&rep, samples); err != nil {
		return err
	}
	fmt.Fprintf(&rep, "\nPublished (study C, Borsatti et al., OpenStack with networking-sfc on CloudLab, OVS, section V and Fig. 5): a few seconds per chain, growing by about 0.5 s per added function, most of it in the port-chain step. The figure's bars are not given as numbers, so only the slope is compared.\n")
	var csv bytes.Buffer
	if err := sfcclient.CSV(&csv, samples); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "report.md"), rep.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "samples.csv"), csv.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write samples: %w", err)
	}
	if _, err := cmd.OutOrStdout().Write(rep.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(errOut, "report: %s\n", filepath.Join(out, "report.md"))
	if n := len(rec.Installed()); n != 0 {
		return errors.Join(runErr, fmt.Errorf("%d chains were left in the data plane", n))
	}
	return runErr
}
