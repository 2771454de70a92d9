package pktgen

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// PassPeers attaches sfc_pass to the peer of every veth in ifindexes (interfaces of the
// calling thread's namespace) that has no XDP program yet, in whichever namespace that peer
// is: a frame sent with XDP_TX out of a veth (the generator's, the reflector's) is put on its
// peer's ring only when the peer has a NAPI instance, which a veth has with an XDP program;
// without one the frame is dropped and counted nowhere but in the peer's statistics. A lab's
// node attached to a bridge has its peer in a host's namespace, found here among the named
// namespaces (/run/netns) and the initial one by the namespace id the veth reports. Like
// every program here the links die with the process. The returned Far may hold no link
// (every peer had a program); it is never nil without an error.
func PassPeers(ifindexes []int, port uint16) (*Far, error) {
	type peer struct{ nsid, index int }
	var peers []peer
	for _, ix := range ifindexes {
		l, err := netlink.LinkByIndex(ix)
		if err != nil {
			return nil, fmt.Errorf("read interface %d: %w", ix, err)
		}
		if l.Type() != "veth" || l.Attrs().ParentIndex == 0 {
			continue
		}
		peers = append(peers, peer{l.Attrs().NetNsID, l.Attrs().ParentIndex})
	}
	o, err := load()
	if err != nil {
		return nil, err
	}
	f := &Far{o: o}
	if err := setConfig(o, pktgenConfig{Port: port, Nsizes: 1}); err != nil {
		f.Close()
		return nil, err
	}
	for _, p := range peers {
		ns, err := nsByID(p.nsid)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("find the namespace of the peer of a veth (id %d): %w", p.nsid, err)
		}
		l, err := attachIn(ns, p.index, f.o)
		ns.Close()
		if err != nil {
			f.Close()
			return nil, err
		}
		if l != nil {
			f.ls = append(f.ls, l)
		}
	}
	return f, nil
}

// nsByID opens the network namespace the calling thread's namespace knows by id (-1: its
// own).
func nsByID(id int) (*os.File, error) {
	if id < 0 {
		return os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
	}
	named, _ := filepath.Glob("/run/netns/*")
	for _, path := range append([]string{"/proc/1/ns/net"}, named...) {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if got, err := netlink.GetNetNsIdByFd(int(f.Fd())); err == nil && got == id {
			return f, nil
		}
		f.Close()
	}
	return nil, errors.New("not among /run/netns and the initial namespace")
}

// attachIn attaches sfc_pass to interface index in namespace ns, unless it has an XDP
// program already (then it returns no link). The work runs on a thread of its own that
// enters ns and is never returned to the Go scheduler.
func attachIn(ns *os.File, index int, o *pktgenObjects) (link.Link, error) {
	type res struct {
		l   link.Link
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{err: fmt.Errorf("enter the peer's namespace: %w", err)}
			return
		}
		l, err := netlink.LinkByIndex(index)
		if err != nil {
			ch <- res{err: fmt.Errorf("read the peer interface %d: %w", index, err)}
			return
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			ch <- res{}
			return
		}
		xl, err := link.AttachXDP(link.XDPOptions{Program: o.SfcPass, Interface: index})
		if err != nil {
			err = fmt.Errorf("%w: attach sfc_pass to the peer %s: %v", ErrUnsupported, l.Attrs().Name, err)
		}
		ch <- res{xl, err}
	}()
	r := <-ch
	return r.l, r.err
}
