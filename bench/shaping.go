package bench

import (
	"strings"

	"github.com/sfclab/sfclab/experiment"
)

// addShaping records in a run's environment how each scenario's links were shaped, one key
// "shaping SCENARIO" per scenario with shaped segments: "SEGMENT SHAPE; ...".
func addShaping(env map[string]string, e *experiment.Experiment) {
	for _, s := range e.Scenarios {
		if s.Plan == nil {
			continue
		}
		var parts []string
		for _, seg := range s.Plan.Segments {
			if seg.Shape != nil {
				parts = append(parts, seg.Name+" "+seg.Shape.String())
			}
		}
		if len(parts) > 0 {
			env["shaping "+s.Name] = strings.Join(parts, "; ")
		}
	}
}
