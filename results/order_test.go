package results

import (
	"reflect"
	"testing"
)

func TestScenarioOrderRoundTrip(t *testing.T) {
	in := [][]string{{"a", "b", "c"}, {"b", "c", "a"}}
	env := map[string]string{EnvScenarioOrder: FormatScenarioOrder(in)}
	if env[EnvScenarioOrder] != "a,b,c;b,c,a" {
		t.Errorf("formatted %q", env[EnvScenarioOrder])
	}
	got, ok := ScenarioOrder(env)
	if !ok || !reflect.DeepEqual(got, in) {
		t.Errorf("ScenarioOrder = %v, %v; want %v", got, ok, in)
	}
	if _, ok := ScenarioOrder(map[string]string{}); ok {
		t.Error("a run without the key reports an order")
	}
}
