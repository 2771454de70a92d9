package studies

import (
	"fmt"
	"math"
	"strings"

	"github.com/sfclab/sfclab/report"
)

// kvmRule is how study B's KVM claim is judged. The study gives no threshold for "much", so
// the rule asks for the direction the study's own table shows in every cell (KVM slower than
// Docker in each), decided on the paired ratios' CIs.
const kvmRule = "per cell (cache setting, object size, concurrency), KVM's paired ratio of total time to native's is compared with Docker routed's (geometric means over the repetitions, 95 % t CIs of the log ratios). Holds when in every cell with both KVM's CI lies wholly above Docker's; does not hold when in some cell KVM's CI lies wholly below Docker's; not shown otherwise, and not shown when the KVM column ran under TCG (" + report.EmulatedMark + ": an emulated CPU's cost says nothing about KVM's) or was not run. The study's slides give no figure for \"much\": the threshold is its direction, KVM slower than Docker in every cell of its table."

// kvmCostsMore checks study B's KVM claim (kvmRule).
func kvmCostsMore(r *report.Report) report.ClaimResult {
	type key struct {
		cache, object string
		conc          int
	}
	kvm, docker := map[key]report.Ratio{}, map[key]report.Ratio{}
	var emulated []string
	for _, row := range r.HTTP {
		cache := "cache"
		if strings.HasSuffix(row.Scenario, "-nocache") {
			cache = "nocache"
		}
		platform := strings.TrimSuffix(row.Scenario, "-"+cache)
		if platform != "kvm" && platform != "docker-routed" {
			continue
		}
		if platform == "kvm" && r.Emulated(row.Scenario) {
			emulated = append(emulated, row.Scenario)
			continue
		}
		q, ok := r.HTTPRatio(row)
		if !ok || math.IsNaN(q.Value) {
			continue
		}
		k := key{cache, row.Object, row.Concurrency}
		if platform == "kvm" {
			kvm[k] = q
		} else {
			docker[k] = q
		}
	}
	if len(emulated) > 0 {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: fmt.Sprintf(
			"the KVM column ran under TCG (%s): its guest's CPU was emulated by binary translation, so its cost says nothing about KVM's; the environment's kvm line says why this host has no usable KVM", report.EmulatedMark)}
	}
	if len(kvm) == 0 {
		why := "the KVM column is not in this run"
		for _, s := range []string{"kvm-nocache", "kvm-cache"} {
			if n := r.NotRun(s); n != "" {
				why = "the KVM column is " + n
				break
			}
		}
		return report.ClaimResult{Outcome: report.NotShown, Evidence: why}
	}
	var above, below, cells int
	var example string
	for k, kq := range kvm {
		dq, ok := docker[k]
		if !ok || kq.Pairs < 2 || dq.Pairs < 2 {
			continue
		}
		cells++
		name := fmt.Sprintf("%s, %s objects at concurrency %d: KVM %s, Docker %s", k.cache, k.object, k.conc, kq.Text(), dq.Text())
		switch {
		case kq.Low > dq.High:
			above++
			example = name
		case kq.High < dq.Low:
			below++
			example = name
		}
	}
	switch {
	case cells == 0:
		return report.ClaimResult{Outcome: report.NotShown, Evidence: "no cell has both a KVM and a Docker routed ratio to native over at least 2 repetitions"}
	case below > 0:
		return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: fmt.Sprintf("in %d of %d cells KVM's CI lies wholly below Docker's; e.g. %s", below, cells, example)}
	case above == cells:
		return report.ClaimResult{Outcome: report.Holds, Evidence: fmt.Sprintf("in every one of %d cells KVM's CI lies wholly above Docker's; e.g. %s", cells, example)}
	}
	return report.ClaimResult{Outcome: report.NotShown, Evidence: fmt.Sprintf("in %d of %d cells the CIs of KVM and Docker overlap, so this run cannot tell; more repetitions narrow them", cells-above, cells)}
}
