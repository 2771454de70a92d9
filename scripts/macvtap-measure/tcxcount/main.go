// Command tcxcount counts the frames tcx ingress and egress see on devices given as
// NETNS/IFNAME (a counting program attached at both hooks of each), until SIGTERM or SIGINT,
// then prints the counts. A measurement aid of scripts/macvtap-measure (docs/vm.md).
//
// Usage: tcxcount NETNS/IFNAME... (prints "attached" once the programs are on)
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// counter adds 1 to slot idx of m and passes the frame on (TCX_NEXT).
func counter(m *ebpf.Map, idx int32) (*ebpf.Program, error) {
	ins := asm.Instructions{
		asm.StoreImm(asm.R10, -4, int64(idx), asm.Word),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, -1).WithSymbol("out"), // TCX_NEXT
		asm.Return(),
	}
	return ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, Instructions: ins, License: "GPL"})
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tcxcount:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	runtime.LockOSThread() // the thread enters each device's namespace to attach
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer netns.Set(orig)
	var maps []*ebpf.Map
	for _, a := range args {
		nsName, ifname, _ := strings.Cut(a, "/")
		h, err := netns.GetFromName(nsName)
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		err = netns.Set(h)
		h.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 2})
		if err != nil {
			return err
		}
		for i, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			p, err := counter(m, int32(i))
			if err != nil {
				return err
			}
			lk, err := link.AttachTCX(link.TCXOptions{Interface: l.Attrs().Index, Program: p, Attach: at})
			if err != nil {
				return fmt.Errorf("%s %v: %w", a, at, err)
			}
			defer lk.Close()
		}
		if err := netns.Set(orig); err != nil {
			return err
		}
		maps = append(maps, m)
	}
	fmt.Println("attached")
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
	for i, m := range maps {
		var in, out uint64
		_ = m.Lookup(uint32(0), &in)
		_ = m.Lookup(uint32(1), &out)
		fmt.Printf("%s tcx ingress %d egress %d\n", args[i], in, out)
	}
	return nil
}
