package docker

// ConnectBeforeStart lets benchmarks compare connecting a container's other networks before
// its start (the default) with connecting them once it runs.
var ConnectBeforeStart = &connectBeforeStart
