package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sfclab/sfclab/api/sfcclient"
	"github.com/spf13/cobra"
)

// newChainGraph offers the service graph verbs Debian's OpenStack client lacks: its
// python-neutronclient 8.1.0 resolves a graph's name or id with list_service_graphs, a method
// it does not have, so `openstack sfc service graph show|set|delete` fail before sending any
// request, against any server.
func newChainGraph() *cobra.Command {
	var endpoint, tokenFile string
	cmd := &cobra.Command{
		Use:   "graph",
		Short: "Show, change or delete a networking-sfc service graph (what `openstack sfc service graph show|set|delete` cannot do with Debian's client)",
		Long: `graph talks REST to any networking-sfc endpoint ('sfclab serve' or a real Neutron with
networking-sfc). Debian 12's OpenStack client (python-neutronclient 8.1.0) fails on
'openstack sfc service graph show|set|delete' with "'Client' object has no attribute
'list_service_graphs'" before any request is sent; create and list work. A graph is named by
its id or its name, as the OpenStack client does. The endpoint defaults to $OS_ENDPOINT when
set, else http://` + DefaultListen + `.`,
	}
	def := "http://" + DefaultListen
	if e := os.Getenv("OS_ENDPOINT"); e != "" {
		def = e
	}
	cmd.PersistentFlags().StringVar(&endpoint, "endpoint", def, "the networking-sfc API ($OS_ENDPOINT when set, else sfclab serve's address)")
	cmd.PersistentFlags().StringVar(&tokenFile, "token-file", "", "file with the X-Auth-Token to send")
	client := func() (*sfcclient.Client, error) {
		c := &sfcclient.Client{Endpoint: endpoint}
		if tokenFile != "" {
			data, err := os.ReadFile(tokenFile)
			if err != nil {
				return nil, fmt.Errorf("read token file: %w", err)
			}
			c.Token = strings.TrimSpace(string(data))
		}
		return c, nil
	}
	// find is the client and the service graph ref names (name or id), as every verb starts.
	find := func(ctx context.Context, ref string) (*sfcclient.Client, *sfcclient.ServiceGraph, error) {
		c, err := client()
		if err != nil {
			return nil, nil, err
		}
		g, err := c.FindServiceGraph(ctx, ref)
		return c, g, err
	}

	var format string
	show := &cobra.Command{
		Use:   "show GRAPH",
		Short: "Show a service graph (name or id)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, g, err := find(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printGraph(cmd.OutOrStdout(), g, format)
		},
	}
	show.Flags().StringVarP(&format, "format", "f", "table", "output format: table or json (the OpenStack client's columns)")

	var name, description string
	set := &cobra.Command{
		Use:   "set GRAPH [--name NAME] [--description TEXT]",
		Short: "Change a service graph's name or description (name or id)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			attrs := map[string]any{}
			if cmd.Flags().Changed("name") {
				attrs["name"] = name
			}
			if cmd.Flags().Changed("description") {
				attrs["description"] = description
			}
			if len(attrs) == 0 {
				return fmt.Errorf("set service graph %s: nothing to change: give --name or --description", args[0])
			}
			c, g, err := find(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if _, err := c.UpdateServiceGraph(cmd.Context(), g.ID, attrs); err != nil {
				return fmt.Errorf("update service graph %s: %w", args[0], err)
			}
			return nil
		},
	}
	set.Flags().StringVar(&name, "name", "", "new name")
	set.Flags().StringVar(&description, "description", "", "new description")

	del := &cobra.Command{
		Use:   "delete GRAPH",
		Short: "Delete a service graph (name or id); its chains stay",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, g, err := find(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := c.Delete(cmd.Context(), "service_graphs", g.ID); err != nil {
				return fmt.Errorf("delete service graph %s: %w", args[0], err)
			}
			return nil
		},
	}
	cmd.AddCommand(show, set, del)
	return cmd
}

// printGraph writes a service graph with the OpenStack client's column names: as JSON
// (`-f json`) or as a two-column table.
func printGraph(w io.Writer, g *sfcclient.ServiceGraph, format string) error {
	chains := g.PortChains
	if chains == nil {
		chains = map[string][]string{}
	}
	switch format {
	case "json":
		data, err := json.MarshalIndent(map[string]any{
			"ID": g.ID, "Name": g.Name, "Description": g.Description,
			"Branching Points": chains, "Project": g.ProjectID,
		}, "", "  ")
		if err != nil {
			return fmt.Errorf("print service graph: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case "table":
		rows := [][2]string{{"Branching Points", strings.Join(g.BranchingPoints(), "\n")},
			{"Description", g.Description}, {"ID", g.ID}, {"Name", g.Name}, {"Project", g.ProjectID}}
		width := 0
		for _, r := range rows {
			width = max(width, len(r[0]))
		}
		for _, r := range rows {
			lines := strings.Split(r[1], "\n")
			for i, l := range lines {
				k := r[0]
				if i > 0 {
					k = ""
				}
				fmt.Fprintf(w, "%-*s  %s\n", width, k, l)
			}
		}
		return nil
	}
	return fmt.Errorf("print service graph: unknown format %q (table or json)", format)
}
