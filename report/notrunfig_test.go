package report

import "testing"

// TestNoFigureOfPublishedOnly: a study figure none of whose scenarios ran in this run (each
// left out with a reason, as `reproduce single-host-chain --runtime vm` leaves out the
// study's own scenarios) is not drawn on the first screen: it would show the published marks
// alone. A figure with one scenario of this run beside them still is.
func TestNoFigureOfPublishedOnly(t *testing.T) {
	const why = "not run: --runtime vm runs only the VM scenarios and the scenarios they are compared with"
	for _, tt := range []struct {
		name    string
		rename  bool // the run's scenarios are not the study's (its own left out)
		figures bool
	}{
		{"the study's scenarios ran", false, true},
		{"none of them ran", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := sampleInput()
			if tt.rename {
				for i := range in.Scenarios {
					in.Scenarios[i] = "netns-" + in.Scenarios[i]
				}
				for i := range in.Trials {
					in.Trials[i].Scenario = "netns-" + in.Trials[i].Scenario
				}
				for i := range in.Samples {
					in.Samples[i].Scenario = "netns-" + in.Samples[i].Scenario
				}
				for _, s := range []string{"baseline", "fw", "fw-lb"} {
					in.Run.Env[EnvNotRun+s] = why
				}
			}
			r, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Comparison.Rows) == 0 {
				t.Fatal("no published rows")
			}
			var got []string
			for _, f := range r.figures() {
				got = append(got, f.Name)
			}
			if (len(got) > 0) != tt.figures {
				t.Errorf("study figures %q; want some: %v", got, tt.figures)
			}
		})
	}
}
