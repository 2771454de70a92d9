package cli

import (
	"errors"

	"github.com/sfclab/sfclab/lb"
	"github.com/spf13/cobra"
)

func newLB() *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use:   "lb --config FILE",
		Short: "Run sfclab's TCP load balancer (l4lb impl: sfclab) in the foreground; deploy starts it in the function's node",
		Long: "Run sfclab's own TCP-terminating load balancer from a JSON configuration (written by the\n" +
			"l4lb function with impl: sfclab): splice(2) between client and backend sockets, balance\n" +
			"roundrobin, leastconn or source (weighted), TCP-connect health checks, maxconn, idle\n" +
			"timeout, per-backend counters on a stats socket. SIGTERM drains open connections.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if config == "" {
				return errors.New("give the configuration with --config FILE")
			}
			return lb.Main(cmd.Context(), config)
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the balancer's JSON configuration")
	return cmd
}
