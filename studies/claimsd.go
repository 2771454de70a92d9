package studies

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/report"
)

// Study D's drivers here: ebpf-redirect stands in for SR-IOV (absent on this host), macvlan
// for the study's Linux bridge with macvtap.
const (
	driverInPlaceOfSRIOV  = "ebpf-redirect"
	driverAsBridgeMacvtap = "macvlan"
)

// noSRIOV opens the evidence of every claim of study D: the study's comparison needs a VF.
const noSRIOV = "SR-IOV is not available on this host (no PF with sriov_totalvfs > 0), so the study's SR-IOV figure is not measured. This run's own figures, in its place: "

// claimsD are study D's own conclusions (section 5.1). None can be checked without SR-IOV:
// each reports NotShown and gives, labelled as this run's, the same comparison with
// ebpf-redirect in SR-IOV's place and macvlan (and veth) as the bridge.
var claimsD = []report.Claim{
	{Text: "with network load and many background containers, RTT with SR-IOV is about 10-15x lower than with the Linux bridge (macvtap)", Check: rttUnderNetworkLoad},
	{Text: "CPU use is about the same with SR-IOV as with the Linux bridge", Check: cpuAlike},
}

// rttUnderNetworkLoad gives, at the largest count of background nodes with network load, the
// path RTT median of each bridge-like driver over ebpf-redirect's, per host and rate.
func rttUnderNetworkLoad(r *report.Report) report.ClaimResult {
	top := 0
	for _, row := range r.RTT {
		if row.Kind == "network" {
			top = max(top, row.Background)
		}
	}
	if top == 0 {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: noSRIOV + "none either: this run has no cell with network load."}
	}
	byCell := map[string]report.RTTRow{} // base|host|rate -> row
	for _, row := range r.RTT {
		if row.Kind == "network" && row.Background == top {
			base, _, _ := strings.Cut(row.Scenario, ".bg-")
			byCell[base+"|"+row.Side+"|"+row.Rate] = row
		}
	}
	var parts []string
	for _, base := range []string{driverAsBridgeMacvtap, "veth"} {
		var cells []string
		for key, row := range byCell {
			b, cell, _ := strings.Cut(key, "|")
			ref, ok := byCell[driverInPlaceOfSRIOV+"|"+cell]
			if b != base || !ok || !(ref.Path.Median > 0) || math.IsNaN(row.Path.Median) {
				continue
			}
			side, rate, _ := strings.Cut(cell, "|")
			cells = append(cells, fmt.Sprintf("%s× (%s's host, %s)", strconv.FormatFloat(row.Path.Median/ref.Path.Median, 'f', 2, 64), side, rateText(rate)))
		}
		if len(cells) > 0 {
			sort.Strings(cells)
			parts = append(parts, fmt.Sprintf("%s/%s %s", base, driverInPlaceOfSRIOV, strings.Join(cells, ", ")))
		}
	}
	if len(parts) == 0 {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: noSRIOV + fmt.Sprintf("none: no cell with %d network background nodes has both %s and a bridge-like driver with kernel timestamps.", top, driverInPlaceOfSRIOV)}
	}
	return report.ClaimResult{Outcome: report.NotShown, Evidence: noSRIOV + fmt.Sprintf("path RTT median ratio with %d background nodes of network load: %s. Published: about 10-15× (bridge/SR-IOV); %s is the kernel's cheapest path between namespaces, not a NIC's VF.",
		top, strings.Join(parts, "; "), driverInPlaceOfSRIOV)}
}

// rateText is a rate label in words.
func rateText(rate string) string {
	if rate == "max" {
		return "highest rate"
	}
	return rate + " pps"
}

// cpuAlike gives the busy share of each emulated host's cores, mean over every cell of each
// driver, for ebpf-redirect beside the bridge-like drivers.
func cpuAlike(r *report.Report) report.ClaimResult {
	type acc struct {
		sum float64
		n   int
	}
	busy := map[string]*acc{} // base|host
	var hosts []string
	for _, row := range r.HostCPU {
		if math.IsNaN(row.Busy.Mean) {
			continue
		}
		base, _, _ := strings.Cut(row.Scenario, ".bg-")
		k := base + "|" + row.Host
		if busy[k] == nil {
			busy[k] = &acc{}
		}
		busy[k].sum += row.Busy.Mean
		busy[k].n++
		if !slices.Contains(hosts, row.Host) {
			hosts = append(hosts, row.Host)
		}
	}
	var parts []string
	for _, h := range hosts {
		var cells []string
		for _, base := range []string{driverInPlaceOfSRIOV, driverAsBridgeMacvtap, "veth"} {
			if a := busy[base+"|"+h]; a != nil {
				cells = append(cells, fmt.Sprintf("%s %s %%", base, strconv.FormatFloat(a.sum/float64(a.n), 'f', 2, 64)))
			}
		}
		if len(cells) > 0 {
			parts = append(parts, fmt.Sprintf("%s host: %s", h, strings.Join(cells, ", ")))
		}
	}
	if len(parts) == 0 {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: noSRIOV + "none either: this run has no CPU per emulated host (cpu: true with the rtt probe)."}
	}
	return report.ClaimResult{Outcome: report.NotShown, Evidence: noSRIOV + "busy share of each emulated host's cores (user+system+softirq), mean over every cell of the driver: " +
		strings.Join(parts, "; ") + "."}
}
