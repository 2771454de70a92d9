// Command pause is the sandbox process of the test cluster's pods: it holds the pod's
// namespaces, reaps the children it inherits and exits on SIGINT or SIGTERM. The cluster
// builds it locally (no registry) and imports it into its containerd as sfclab/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
