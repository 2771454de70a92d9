package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sfclab/sfclab/bench"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"github.com/sfclab/sfclab/studies"
	"github.com/spf13/cobra"
)

// overrides are the command-line knobs that shorten or lengthen an experiment.
type overrides struct {
	out         string
	repetitions int
	duration    time.Duration
}

func (o *overrides) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.out, "out", "", "output directory (default out/EXPERIMENT-TIME)")
	cmd.Flags().IntVar(&o.repetitions, "repetitions", 0, "override the experiment's repetitions")
	cmd.Flags().DurationVar(&o.duration, "duration", 0, "override the iperf3 duration")
}

func (o *overrides) apply(e *experiment.Experiment) error {
	if o.repetitions < 0 || o.duration < 0 {
		return errors.New("--repetitions and --duration must be positive")
	}
	if o.repetitions > 0 {
		e.Repetitions = o.repetitions
	}
	if o.duration > 0 && e.Probes.Iperf3 != nil {
		if o.duration < time.Second {
			return fmt.Errorf("--duration %s is below iperf3's 1s", o.duration)
		}
		e.Probes.Iperf3.Duration.Duration = o.duration
	}
	if o.out == "" {
		o.out = filepath.Join("out", e.Name+"-"+time.Now().Format("20060102-150405"))
	}
	return nil
}

func newBench() *cobra.Command {
	var o overrides
	cmd := &cobra.Command{
		Use:   "bench EXPERIMENT.yaml",
		Short: "Run an experiment: deploy each scenario, run the probes N times, write samples and a report",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := experiment.Load(args[0])
			if err != nil {
				return err
			}
			inputs := bench.Files{}
			if data, err := os.ReadFile(args[0]); err == nil {
				inputs["experiment.yaml"] = data
			}
			for _, s := range e.Scenarios {
				if data, err := os.ReadFile(s.LabPath); err == nil {
					inputs["labs/"+s.Name+".yaml"] = data
				}
			}
			return runExperiment(cmd, e, &o, inputs)
		},
	}
	o.flags(cmd)
	return cmd
}

// runExperiment runs an experiment, writes its report, and prints it.
func runExperiment(cmd *cobra.Command, e *experiment.Experiment, o *overrides, inputs bench.Files) error {
	if err := o.apply(e); err != nil {
		return err
	}
	if err := deploy.CheckRoot(); err != nil {
		return err
	}
	errOut := cmd.ErrOrStderr()
	r := &bench.Runner{Deployer: newDeployer(errOut), Version: buildVersion(),
		Progress: newProgress(errOut).update,
		Log: func(f string, a ...any) {
			if isTerminal(errOut) {
				fmt.Fprint(errOut, "\r\033[K") // over the progress line, which redraws after
			}
			fmt.Fprintf(errOut, f+"\n", a...)
		}}
	fmt.Fprintf(errOut, "running %s: %d scenarios x %d repetitions into %s\n", e.Name, len(e.Scenarios), e.Repetitions, o.out)
	outcome, runErr := r.Run(cmd.Context(), e, o.out, inputs)
	if outcome == nil {
		return runErr
	}
	var names []string
	for _, s := range e.Scenarios {
		names = append(names, s.Name)
	}
	rep, err := bench.WriteReport(o.out, studies.Published(e.Study), names, e.Baseline)
	if err != nil {
		return errors.Join(runErr, err)
	}
	if err := rep.Markdown(cmd.OutOrStdout()); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "\nraw samples, report and inputs: %s (report.md, report.html, results.db)\n", o.out)
	if outcome.Failed > 0 && runErr == nil {
		fmt.Fprintf(errOut, "%d of %d trials failed; see the report's failed trials\n", outcome.Failed, outcome.Trials)
	}
	return runErr
}

func newReport() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Recompute statistics and the report of a bench run from its stored samples",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			run, err := bench.ReadRun(dir)
			if err != nil {
				return err
			}
			var scenarios []string
			if s := run.Env["scenarios"]; s != "" {
				scenarios = strings.Split(s, ",")
			}
			rep, err := bench.WriteReport(dir, studies.Published(run.Study), scenarios, run.Env["baseline"])
			if err != nil {
				return err
			}
			if err := rep.Markdown(cmd.OutOrStdout()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nwrote %s in %s\n", strings.Join(bench.ReportFiles, ", "), dir)
			return nil
		},
	}
}

func newReproduce() *cobra.Command {
	var o overrides
	var quick, standard, allowTCG, vmFuncs bool
	var scenarios []string
	var runtime, part string
	cmd := &cobra.Command{
		Use:   "reproduce STUDY",
		Short: "Re-run a published study and print our figures beside the published ones (studies: " + strings.Join(studies.Names(), ", ") + ")",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if part != "" && args[0] != studies.OpenStackSFC {
				return fmt.Errorf("reproduce %s: --part is for %s only", args[0], studies.OpenStackSFC)
			}
			if len(scenarios) > 0 && (args[0] != studies.OpenStackSFC || vmFuncs) {
				return fmt.Errorf("reproduce %s: --scenario is for %s's data plane only (without --vm)", args[0], studies.OpenStackSFC)
			}
			if vmFuncs && args[0] != studies.OpenStackSFC {
				return fmt.Errorf("reproduce %s: --vm is for %s only (its functions were VMs); %s has --runtime vm", args[0], studies.OpenStackSFC, args[0])
			}
			if args[0] == studies.OpenStackSFC {
				if vmFuncs {
					return reproduceOpenStackSFCVM(cmd, &o, part, quick, standard, runtime, allowTCG)
				}
				return reproduceOpenStackSFC(cmd, &o, part, quick, standard, runtime, scenarios)
			}
			st, err := studies.Get(args[0])
			if err != nil {
				return err
			}
			scale := studies.Full
			switch {
			case quick && standard:
				return fmt.Errorf("reproduce %s: --quick and --standard exclude each other; pick one", args[0])
			case quick:
				scale = studies.Quick
			case standard:
				scale = studies.Standard
			}
			e, inputs, err := st.Load(scale, runtime)
			if err != nil {
				return err
			}
			if err := st.VMScenarios(e, runtime, allowTCG, accel.Host()); err != nil {
				return err
			}
			return runExperiment(cmd, e, &o, bench.Files(inputs))
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&quick, "quick", false, "a short smoke version (fewer, shorter repetitions)")
	cmd.Flags().BoolVar(&standard, "standard", false, "the study's scale reduced to fit a sitting, one to two hours on two cores (http-proxy: 10,000 requests up to 100k objects, fewer for 1M and 10M, 3 repetitions); the report says what was reduced")
	cmd.Flags().StringVar(&runtime, "runtime", "", "run every scenario that does not name a runtime on this one (netns, docker, kubernetes, vm); refused where every scenario names its own, except vm on the studies with VM scenarios: single-host-chain --runtime vm runs its netns scenarios and its VM chains, http-proxy --runtime vm runs only its KVM column and the native baselines")
	cmd.Flags().BoolVar(&allowTCG, "allow-tcg", false, "run the study's VM scenarios (http-proxy: the KVM column) under TCG where KVM is not usable; every figure of them is marked \"emulated CPU (TCG): not comparable\"")
	cmd.Flags().BoolVar(&vmFuncs, "vm", false, "openstack-sfc only: every function a VM, as the study's VNFs were: the data plane's transparent and routed scenarios, and the deploy-time lab's functions booted before the API is served (under TCG only with --allow-tcg, every figure marked)")
	cmd.Flags().StringVar(&part, "part", "", "openstack-sfc only: run only its data-plane or deploy-time part (default both: the data plane's report in --out, the deploy time in --out/deploy-time)")
	cmd.Flags().StringSliceVar(&scenarios, "scenario", nil, "openstack-sfc only: run only these data-plane scenarios (repeatable or comma-separated, e.g. c1,c1-routed; the deploy-time part, without --part, runs as ever); the report says which ran")
	return cmd
}
