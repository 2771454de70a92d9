package cli

import (
	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/spf13/cobra"
)

// newAgent is `sfclab agent`, the program of the kubernetes runtime's agent DaemonSet; sfclab
// runs it on a Kubernetes node through the API server's exec, users do not.
func newAgent() *cobra.Command {
	return &cobra.Command{
		Use:   "agent [attach]",
		Short: "The sfclab agent on a Kubernetes node (run by the kubernetes runtime's DaemonSet, not by hand)",
		Long: `agent is the program of the sfclab agent DaemonSet (namespace sfclab-system) that the
kubernetes runtime creates. Without an argument it waits (the DaemonSet's process); "attach"
reads a JSON request on stdin (a lab's pods on this node), names each pod's network namespace
sfc.LAB.NODE, deletes its pod-network interface and answers the pods' PIDs as JSON.`,
		Hidden: true,
		Args:   cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return kubernetes.AgentMain(args, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}
