package deploy

import "testing"

// TestTransparentRuntimes pins which runtimes carry transparent steering (every known one,
// vm included since its ports are veths spliced to taps) and the message listing them.
func TestTransparentRuntimes(t *testing.T) {
	for _, tt := range []struct {
		name string
		want bool
	}{{"", true}, {"netns", true}, {"docker", true}, {"kubernetes", true}, {"vm", true}, {"nope", false}} {
		if got := transparentRuntime(tt.name); got != tt.want {
			t.Errorf("transparentRuntime(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got, want := transparentRuntimes(), "netns, docker, kubernetes or vm"; got != want {
		t.Errorf("transparentRuntimes() = %q, want %q", got, want)
	}
}
