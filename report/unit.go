package report

import "github.com/sfclab/sfclab/results"

// sectionUnit is one part of a report that stands on its own: it reads the samples it knows,
// keeps what it derived, and renders its sections. Build runs every unit of newUnits over the
// samples of the successful trials, and the document places each unit's sections after the
// part of the report it belongs to (after). A new part of the report is a new unit in its own
// file and one line in newUnits; the report's other parts do not change.
type sectionUnit interface {
	// reads reports whether the unit reads sample x, which the report's own collection
	// then leaves alone.
	reads(x results.Sample) bool
	// build derives the unit's figures from the samples it reads (those of failed trials
	// are left out before) and the report built so far.
	build(r *Report, samples []results.Sample)
	// after names the section the unit's sections follow ("cpu").
	after() string
	// sections renders the unit; none when it has nothing to show.
	sections(r *Report) []section
}

// newUnits returns the report's units in display order.
func newUnits() []sectionUnit {
	return []sectionUnit{&memoryUnit{}}
}

// readByUnit reports whether a unit of r reads x.
func (r *Report) readByUnit(x results.Sample) bool {
	for _, u := range r.units {
		if u.reads(x) {
			return true
		}
	}
	return false
}

// buildUnits runs every unit over the samples of the successful trials.
func (r *Report) buildUnits(samples []results.Sample, failed map[trialKey]*FailedTrial) {
	var ok []results.Sample
	for _, x := range samples {
		if failed[trialKey{x.Scenario, x.Trial}] == nil && r.readByUnit(x) {
			ok = append(ok, x)
		}
	}
	for _, u := range r.units {
		var mine []results.Sample
		for _, x := range ok {
			if u.reads(x) {
				mine = append(mine, x)
			}
		}
		u.build(r, mine)
	}
}

// unitSections returns the sections of the units placed after the section with id.
func (r *Report) unitSections(id string) []section {
	var out []section
	for _, u := range r.units {
		if u.after() == id {
			out = append(out, u.sections(r)...)
		}
	}
	return out
}
