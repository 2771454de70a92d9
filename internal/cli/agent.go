package cli

import (
	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/spf13/cobra"
)

// newAgent is `sfclab agent`, the program of the kubernetes runtime's agent DaemonSet; sfclab
// runs it on a Kubernetes node through the API server's exec, users do not.
func newAgent() *cobra.Command {
	return &cobra.Command{
		Use:   "agent [REQUEST]",
		Short: "The sfclab agent on a Kubernetes node (run by the kubernetes runtime's DaemonSet, not by hand)",
		Long: `agent is the program of the sfclab agent DaemonSet (namespace sfclab-system) that the
kubernetes runtime creates. Without an argument it waits (the DaemonSet's process); with a
request (attach, link, hosts, steer, configure, bump, tables, counters, ports, node, destroy)
it reads a JSON request on stdin, does it on this node (the lab's pods' namespaces, emulated
hosts, steering maps, commands in the pods) and answers JSON on stdout; with serve it takes
any number of them on stdin until its end, a session (answers matched by ID).
docs/kubernetes.md lists what each does.`,
		Hidden: true,
		Args:   cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return kubernetes.AgentMain(args, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}
