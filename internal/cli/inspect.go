package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/deploy"
	"github.com/spf13/cobra"
)

func newInspect() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "inspect [LAB]",
		Short: "List labs, or show a lab's nodes, interfaces, addresses, chains and live counters",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" {
				return fmt.Errorf("format %q is not one of table, json", format)
			}
			if err := deploy.CheckRoot(); err != nil {
				return err
			}
			d := newDeployer(cmd.ErrOrStderr())
			labs := args
			if len(labs) == 0 {
				var err error
				if labs, err = d.Journal.Labs(); err != nil {
					return err
				}
			}
			// Every lab's VM guests are read concurrently (deploy.InspectGuests at once): a
			// guest that does not answer holds the listing one bound, not one per guest.
			infos, err := d.InspectLabs(cmd.Context(), labs)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(infos)
			}
			if len(infos) == 0 {
				fmt.Fprintln(out, "no labs deployed")
				return nil
			}
			if len(args) == 0 {
				return writeLabList(out, infos)
			}
			if err := writeLab(out, infos[0]); err != nil {
				return err
			}
			return writeAPIChains(out, d.Journal, infos[0].Lab)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

func writeLabList(w io.Writer, infos []*deploy.LabInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LAB\tSTATUS\tNODES\tCHAINS\tFILE")
	for _, i := range infos {
		var chains []string
		for _, c := range i.Chains {
			chains = append(chains, c.Name+": "+strings.Join(c.Path, ">"))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", i.Lab, labStatus(i), len(i.Nodes), strings.Join(chains, "; "), i.File)
	}
	return tw.Flush()
}

// labStatus is the lab's journal status, and when nodes of it are down or cannot be read,
// which ("ready; 1 node down: fw"): a lab with a dead guest is deployed but does not forward
// through it. Inspect still exits 0: it read and showed the lab; a node's state is what it
// reports (docs/vm.md, "A guest that dies").
func labStatus(i *deploy.LabInfo) string {
	var down []string
	for _, n := range i.Nodes {
		if n.Down != "" || n.Error != "" {
			down = append(down, n.Name)
		}
	}
	if len(down) == 0 {
		return i.Status
	}
	return fmt.Sprintf("%s; %d %s down: %s", i.Status, len(down), map[bool]string{true: "node", false: "nodes"}[len(down) == 1], strings.Join(down, ", "))
}

func writeLab(w io.Writer, i *deploy.LabInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "lab %s (%s)\n\n", i.Lab, labStatus(i))
	fmt.Fprintln(tw, "NODE\tROLE\tKIND\tIF\tADDRESS\tSEGMENT\tSTATE\tRX PKTS\tRX BYTES\tTX PKTS\tTX BYTES\tSEEN BY")
	for _, n := range i.Nodes {
		if n.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\terror: %s\n", n.Name, n.Role, n.Kind, n.Error)
			continue
		}
		for k, f := range n.Interfaces {
			name, role, kind := n.Name, n.Role, n.Kind
			if k > 0 {
				name, role, kind = "", "", ""
			}
			var addrs []string
			for _, a := range f.Addrs {
				addrs = append(addrs, a.String())
			}
			state := "down"
			if f.Up {
				state = "up"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", name, role, kind, f.Name, strings.Join(addrs, ","), f.Segment, state,
				f.Stats.RxPackets, f.Stats.RxBytes, f.Stats.TxPackets, f.Stats.TxBytes, f.SeenBy)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeMachines(tw, i)
	for _, n := range i.Nodes {
		if n.Down != "" {
			what := "function"
			if n.Role != "function" {
				what = "node"
			}
			fmt.Fprintf(tw, "\n%s %s DOWN: %s\n", what, n.Name, n.Down)
		}
		if b := n.Balancer; b != nil {
			fmt.Fprintf(tw, "\nbalancer %s on %s (%s): %d active, %d total, %d refused over maxconn, %d without backend, %d idle timed out\n",
				n.Name, b.Listen, b.Balance, b.Active, b.Total, b.Refused, b.NoBackend, b.TimedOut)
			fmt.Fprintln(tw, "  BACKEND\tADDRESS\tWEIGHT\tSTATE\tACTIVE\tTOTAL\tFAILED\tBYTES IN\tBYTES OUT")
			for _, be := range b.Backends {
				state := "down"
				if be.Up {
					state = "up"
				}
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\n", be.Name, be.Addr, be.Weight, state,
					be.Active, be.Total, be.Failed, be.BytesIn, be.BytesOut)
			}
		}
	}
	for _, n := range i.Nodes {
		if len(n.Rules) == 0 {
			continue
		}
		fmt.Fprintf(tw, "\n%s %s rules:\n", n.Kind, n.Name)
		for _, r := range n.Rules {
			fmt.Fprintf(tw, "  %s\t%d pkts\t%d bytes\n", r.Rule, r.Packets, r.Bytes)
		}
	}
	writeShaping(tw, i)
	if st := i.Steering; st != nil {
		return writeSteering(tw, st)
	}
	fmt.Fprintln(tw, "\nCHAIN\tPATH\tHOPS\tTARGET")
	for _, c := range i.Chains {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, strings.Join(c.Path, " -> "), strings.Join(c.Hops, " "), c.Target)
	}
	return tw.Flush()
}

// writeMachines says what each VM node is and lists its ports' host-side counters beside the
// guest's in the table, after a legend of the table's SEEN BY column.
func writeMachines(tw *tabwriter.Writer, i *deploy.LabInfo) {
	legend := false
	for _, n := range i.Nodes {
		if n.Machine == "" {
			continue
		}
		if !legend {
			fmt.Fprintln(tw, "\nSEEN BY: host = the host's kernel (the node's namespace); guest = the VM's own kernel, read in the guest by its agent;")
			fmt.Fprintln(tw, "host side = a VM's port as the host sees it (the device in its namespace carrying the guest's frames), shown when the guest cannot be read")
			legend = true
		}
		fmt.Fprintf(tw, "\nVM %s: %s\n", n.Name, n.Machine)
		header := false
		for _, f := range n.Interfaces {
			if f.HostSide == nil {
				continue
			}
			if !header {
				fmt.Fprintln(tw, "  HOST SIDE\tRX PKTS\tRX BYTES\tTX PKTS\tTX BYTES")
				header = true
			}
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\n", f.Name, f.HostSide.RxPackets, f.HostSide.RxBytes, f.HostSide.TxPackets, f.HostSide.TxBytes)
		}
	}
}

// writeSteering prints a transparent lab's classifiers, per-hop counters and group picks.
func writeSteering(tw *tabwriter.Writer, st *deploy.SteeringInfo) error {
	fmt.Fprintln(tw, "\nflow classifiers:")
	for _, c := range st.Classifiers {
		fmt.Fprintf(tw, "  %s\n", c)
	}
	if st.Error != "" {
		fmt.Fprintf(tw, "\nsteering maps: %s\n", st.Error)
		return tw.Flush()
	}
	fmt.Fprintln(tw, "\nCHAIN\tPATH\tDIRECTION\tHOP\tGROUP\tPACKETS\tBYTES")
	for _, p := range st.Paths {
		for h := range p.Hops {
			chain, id, dir := p.Chain, fmt.Sprint(p.ID), p.Dir
			if h > 0 {
				chain, id, dir = "", "", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\n", chain, id, dir, h, p.Hops[h], p.Packets[h], p.Bytes[h])
		}
	}
	fmt.Fprintf(tw, "\ngroup picks (last flows, at most %d):\n", deploy.MaxPicksShown)
	fmt.Fprintln(tw, "GROUP\tFLOW\tINSTANCE")
	for _, p := range st.Picks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Group, p.Flow, p.Instance)
	}
	return tw.Flush()
}

// writeShaping lists the shaped interfaces with their queueing disciplines as the kernel has them.
func writeShaping(w io.Writer, i *deploy.LabInfo) {
	first := true
	for _, n := range i.Nodes {
		for _, f := range n.Interfaces {
			if f.Shaping == "" {
				continue
			}
			if first {
				fmt.Fprintln(w, "\nshaping:")
				first = false
			}
			fmt.Fprintf(w, "  %s/%s\t%s\t%s\n", n.Name, f.Name, f.Segment, f.Shaping)
		}
	}
}

// writeAPIChains lists the port chains created over the networking-sfc API (sfclab serve).
func writeAPIChains(w io.Writer, j api.Journal, lab string) error {
	chains, err := api.StoredChains(j, lab)
	if err != nil || len(chains) == 0 {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nAPI PORT CHAIN\tID\tGROUPS\tCLASSIFIERS")
	for _, c := range chains {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.ID, strings.Join(c.Groups, " -> "), strings.Join(c.Classifiers, ","))
	}
	return tw.Flush()
}
