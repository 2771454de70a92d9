// Package sfclab embeds the files the binary ships: the example labs and the experiments
// `sfclab reproduce` runs, so one static binary reproduces every study.
package sfclab

import "embed"

// Files holds examples/*.yaml, experiments/*.yaml and experiments/labs/*.yaml, by their
// repository paths.
//
//go:embed examples/*.yaml experiments/*.yaml experiments/labs/*.yaml experiments/labs/study-c/*.yaml
var Files embed.FS
