package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sfclab/sfclab/api/sfcclient"
	"github.com/spf13/cobra"
)

func newChain() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chain",
		Short: "Deploy study C's JSON chain descriptions over the networking-sfc API of a running sfclab serve",
	}
	cmd.AddCommand(newChainApply(), newChainGraph())
	return cmd
}

func newChainApply() *cobra.Command {
	var endpoint, tokenFile, name string
	cmd := &cobra.Command{
		Use:   "apply FILE.json",
		Short: "Create a chain in study C's four REST steps (FC, PP, PPG, PC) and print each step's time",
		Long: `apply reads study C's chain description:

  {"source": "client", "destination": "server",
   "match_fields": {"protocol": "udp"},
   "chain": [{"name": "f1", "direction": "out"}, {"name": "f2", "direction": "tap"}],
   "lab": "optional: the lab, when several have these node names"}

and creates, against a running 'sfclab serve', a flow classifier from the source's port to the
destination's port with the match fields (networking-sfc's flow classifier fields), a port
pair and a port pair group per function (in/out: NODE-ingress -> NODE-egress; same and tap:
NODE-ingress both ways; a tap's group only receives a copy), and the port chain. Each step's
time is measured at this client over HTTP, as the study did.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := sfcclient.LoadChainFile(args[0])
			if err != nil {
				return err
			}
			c := &sfcclient.Client{Endpoint: endpoint}
			if tokenFile != "" {
				data, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("read token file: %w", err)
				}
				c.Token = strings.TrimSpace(string(data))
			}
			if name == "" {
				name = strings.TrimSuffix(filepath.Base(args[0]), filepath.Ext(args[0]))
			}
			d, err := c.Apply(cmd.Context(), f, name)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for i, s := range sfcclient.Steps {
				fmt.Fprintf(out, "%-4s %10.3f ms\n", s, float64(d.Times[i].Microseconds())/1000)
			}
			fmt.Fprintf(out, "%-4s %10.3f ms\n", "all", float64(d.Total().Microseconds())/1000)
			fmt.Fprintf(out, "port chain %s (%s): flow classifier %s, port pairs %s, port pair groups %s\n",
				name, d.Chain, d.FlowClassifier, strings.Join(d.PortPairs, ","), strings.Join(d.Groups, ","))
			return nil
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "http://"+DefaultListen, "the networking-sfc API (sfclab serve)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file with the X-Auth-Token to send")
	cmd.Flags().StringVar(&name, "name", "", "name of the port chain (default: the file's base name)")
	return cmd
}
