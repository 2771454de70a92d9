package results

import "strings"

// EnvScenarioOrder is the Run.Env key of the order the scenarios ran in, per repetition
// (written by FormatScenarioOrder, read by ScenarioOrder).
const EnvScenarioOrder = "scenario_order"

// FormatScenarioOrder writes the scenario names of every repetition, in the order they ran:
// repetitions separated by ";", names by "," (scenario names hold neither).
func FormatScenarioOrder(perRepetition [][]string) string {
	rows := make([]string, len(perRepetition))
	for i, names := range perRepetition {
		rows[i] = strings.Join(names, ",")
	}
	return strings.Join(rows, ";")
}

// ScenarioOrder returns the order the scenarios ran in, one list per repetition (index 0 is
// repetition 1), from a run's environment; ok is false for a run that did not record it
// (before the order was rotated, every repetition ran in the experiment file's order).
func ScenarioOrder(env map[string]string) (perRepetition [][]string, ok bool) {
	s, ok := env[EnvScenarioOrder]
	if !ok || s == "" {
		return nil, false
	}
	for _, row := range strings.Split(s, ";") {
		perRepetition = append(perRepetition, strings.Split(row, ","))
	}
	return perRepetition, true
}
