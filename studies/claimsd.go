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
const noSRIOV = "The grid has no SR-IOV driver, so the study's SR-IOV figure is not measured (whether this host has SR-IOV: the environment's sriov line). This run's own figures, in its place: "

// claimsD are study D's own conclusions (section 5.1). None can be checked without SR-IOV:
// each reports NotShown and gives, labelled as this run's, the same comparison with
// ebpf-redirect in SR-IOV's place and macvlan (and veth) as the bridge.
var claimsD = []report.Claim{
	{Text: "with network load and many background containers, RTT with SR-IOV is about 10-15x lower than with the Linux bridge (macvtap)", Check: rttUnderNetworkLoad, Rule: ruleNoSRIOV},
	{Text: "CPU use is about the same with SR-IOV as with the Linux bridge", Check: cpuAlike, Rule: ruleNoSRIOV},
	{Text: "giving every background container a VF too does not harm the main pair's RTT; the highest RTT is with every container on the bridge (section 5.2, Figs. 8-10)", Check: backgroundDriver, Rule: ruleNoSRIOV},
}

// ruleNoSRIOV is the rule of every study D claim: none is decided without an SR-IOV driver.
const ruleNoSRIOV = "not decided: the claim compares SR-IOV VFs, which the grid cannot offer; the stand-in comparison is given as this run's figures and decides nothing."

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
	byCell := map[string]report.RTTRow{} // base|host|rate|cap|bg driver -> row
	for _, row := range r.RTT {
		if row.Kind == "network" && row.Background == top {
			base, _, _ := strings.Cut(row.Scenario, ".bg-")
			byCell[base+"|"+row.Side+"|"+row.Rate+"|"+row.Bitrate+"|"+row.BgDriver] = row
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
			f := strings.Split(cell, "|")
			side, rate, extra := f[0], f[1], ""
			if f[2] == "max" {
				extra += ", unthrottled"
			} else if f[2] != "" {
				extra += ", " + f[2] + " per pair"
			}
			switch f[3] {
			case "":
			case "same":
				extra += ", background on the main pair's driver"
			default:
				extra += ", background on " + f[3]
			}
			if row.Short() || ref.Short() {
				extra += fmt.Sprintf(", achieved %.0f and %.0f pps: below %.2f of the rate", row.Achieved, ref.Achieved, report.HighRateShare)
			}
			cells = append(cells, fmt.Sprintf("%s× (%s's host, %s%s)", strconv.FormatFloat(row.Path.Median/ref.Path.Median, 'f', 2, 64), side, rateText(rate), extra))
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

// backgroundDriver compares, at the largest background count, the main pair's path RTT with
// the background nodes on the fast path and on the bridge (the grid's background driver
// factor): per series (main driver, background driver), the median over cells of the cell's
// median path RTT, and the series with the highest.
func backgroundDriver(r *report.Report) report.ClaimResult {
	top := 0
	for _, row := range r.RTT {
		if row.BgDriver != "" {
			top = max(top, row.Background)
		}
	}
	if top == 0 {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: noSRIOV + "none either: this run has no background-driver factor (background: {driver: [same, ebpf-redirect]} gives the study's §5.2 cells)."}
	}
	meds := map[string][]float64{}
	var series []string
	for _, row := range r.RTT {
		if row.Background != top || row.BgDriver == "" || math.IsNaN(row.Path.Median) || row.Path.N == 0 {
			continue
		}
		base, _, _ := strings.Cut(row.Scenario, ".bg-")
		bg := row.BgDriver
		if bg == "same" {
			bg = base
		}
		name := fmt.Sprintf("main %s, background %s", base, bg)
		if _, ok := meds[name]; !ok {
			series = append(series, name)
		}
		meds[name] = append(meds[name], row.Path.Median)
	}
	if len(series) == 0 {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: noSRIOV + fmt.Sprintf("none: no cell with %d background nodes has kernel timestamps.", top)}
	}
	sort.Strings(series)
	var parts []string
	hi, hiName := math.Inf(-1), ""
	for _, s := range series {
		xs := slices.Clone(meds[s])
		slices.Sort(xs)
		m := xs[len(xs)/2]
		if len(xs)%2 == 0 {
			m = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
		}
		if m > hi {
			hi, hiName = m, s
		}
		parts = append(parts, fmt.Sprintf("%s %s µs (%d cells)", s, strconv.FormatFloat(m*1000, 'f', 1, 64), len(xs)))
	}
	return report.ClaimResult{Outcome: report.NotShown, Evidence: noSRIOV + fmt.Sprintf("path RTT with %d background nodes, median over cells of each cell's median: %s; highest: %s. %s stands in for SR-IOV, %s for the bridge.",
		top, strings.Join(parts, "; "), hiName, driverInPlaceOfSRIOV, driverAsBridgeMacvtap)}
}
