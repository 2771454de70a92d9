// Command sfclab-guest is the init and agent of sfclab's VM guests: the same code as the
// sfclab binary runs in a guest (vm.GuestMain), linked without the rest of sfclab. sfclab
// puts it into its guest images when it lies beside the sfclab binary and was built from the
// same source (`make build` builds both): 6 MB instead of sfclab's 36 MB (stripped), which
// every guest's kernel unpacks from its initramfs at boot under emulation.
//
// It also runs the one sfclab command a guest starts from its init: `lb --config FILE`
// (`sfclab lb`, kind l4lb with impl sfclab, started as /init lb in the guest).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sfclab/sfclab/lb"
	"github.com/sfclab/sfclab/runtime/vm"
)

func main() {
	vm.GuestMain() // runs the guest's init or agent and never returns there
	if len(os.Args) == 4 && os.Args[1] == "lb" && os.Args[2] == "--config" {
		if err := lb.Main(context.Background(), os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "sfclab lb:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "sfclab-guest: the init and agent of sfclab's VM guests, and `lb --config FILE` in them; sfclab copies it into their images (it does nothing else on a host)")
	os.Exit(2)
}
