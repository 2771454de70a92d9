// Package custom is the function that runs whatever the lab file says: setup commands once,
// long-running commands for the life of the lab, teardown commands at the end.
package custom

import (
	"context"
	"fmt"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/vnf"
)

// Custom implements vnf.Function.
type Custom struct{}

func params(f *plan.Function) *CustomParams { return f.Params.(*CustomParams) }

// NewParams returns the kind's empty parameters (CustomParams) for the decoder.
func (Custom) NewParams() any { return &CustomParams{} }

// Requires lists the declared programs and the first word of every command.
func (Custom) Requires(f *plan.Function) []string {
	p := params(f)
	out := append([]string{"sh"}, p.Requires...)
	for _, cmds := range [][]string{p.Setup, p.Run, p.Teardown} {
		for _, c := range cmds {
			if w := vnf.FirstWord(c); w != "" {
				out = append(out, w)
			}
		}
	}
	return out
}

// Setup runs the setup commands in order, then starts the run commands.
func (Custom) Setup(ctx context.Context, env vnf.Env) error {
	p := params(env.Plan.Function)
	for _, c := range p.Setup {
		if _, err := env.Node.Output(ctx, nil, vnf.Shell(c)...); err != nil {
			return vnf.Errorf(env, "setup command %q: %w", c, err)
		}
	}
	for i, c := range p.Run {
		if _, err := env.Node.Daemon(vnf.ShellDaemon(c), env.Path(fmt.Sprintf(".run%d.log", i))); err != nil {
			return vnf.Errorf(env, "start %q: %w", c, err)
		}
	}
	return nil
}

// Teardown runs the teardown commands; the run commands' processes are stopped with the node.
func (Custom) Teardown(ctx context.Context, env vnf.Env) error {
	var first error
	for _, c := range params(env.Plan.Function).Teardown {
		if _, err := env.Node.Output(ctx, nil, vnf.Shell(c)...); err != nil && first == nil {
			first = vnf.Errorf(env, "teardown command %q: %w", c, err)
		}
	}
	return first
}

// Compose runs the setup commands, then starts the run commands in the background
// (vnf.Composer).
func (Custom) Compose(f *plan.Function) ([]vnf.ComposeStep, string, error) {
	p := params(f)
	var steps []vnf.ComposeStep
	for _, c := range p.Setup {
		steps = append(steps, vnf.ComposeStep{Cmd: c})
	}
	for _, c := range p.Run {
		steps = append(steps, vnf.ComposeStep{Cmd: "( " + c + " ) &"})
	}
	return steps, "", nil
}
