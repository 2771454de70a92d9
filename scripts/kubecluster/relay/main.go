// Command relay joins the test cluster's second node, whose containerd and kubelet run in a
// network namespace of their own (node2.sh), to the control plane on 127.0.0.1 of the root
// namespace, without any server listening beyond 127.0.0.1:
//
//	relay -netns /run/netns/sfclab-kn2 -into 127.0.0.1:10351 -out 127.0.0.1:16443
//
// -into ADDR listens on ADDR in the relay's own namespace and forwards each connection to
// ADDR inside -netns (the apiserver reaching node 2's kubelet: exec, logs); -out ADDR
// listens on ADDR inside -netns and forwards to ADDR in the relay's namespace (node 2's
// kubelet and pods reaching the apiserver). A socket belongs to the namespace its thread was
// in when it was created, so one process serves both ways: it enters -netns on a locked
// thread only to create the listener or the outgoing socket there. Both flags repeat.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

type addrs []string

func (a *addrs) String() string     { return strings.Join(*a, ",") }
func (a *addrs) Set(s string) error { *a = append(*a, s); return nil }

func main() {
	var into, out addrs
	nsPath := flag.String("netns", "", "the other network namespace (a file under /run/netns)")
	flag.Var(&into, "into", "listen here on `ADDR`, forward to ADDR inside -netns (repeats)")
	flag.Var(&out, "out", "listen on `ADDR` inside -netns, forward to ADDR here (repeats)")
	flag.Parse()
	if *nsPath == "" || len(into)+len(out) == 0 {
		log.Fatal("relay: name -netns and at least one -into or -out")
	}
	for _, a := range append(append(addrs{}, into...), out...) {
		if h, _, err := net.SplitHostPort(a); err != nil || h != "127.0.0.1" {
			log.Fatalf("relay: %s: only 127.0.0.1:PORT is served", a)
		}
	}
	var wg sync.WaitGroup
	for _, a := range into {
		l, err := net.Listen("tcp", a)
		if err != nil {
			log.Fatalf("relay: listen on %s: %v", a, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(l, func() (net.Conn, error) {
				var c net.Conn
				err := inNetns(*nsPath, func() (err error) {
					c, err = net.DialTimeout("tcp", a, 5*time.Second)
					return err
				})
				return c, err
			})
		}()
	}
	for _, a := range out {
		var l net.Listener
		if err := inNetns(*nsPath, func() (err error) { l, err = net.Listen("tcp", a); return err }); err != nil {
			log.Fatalf("relay: listen on %s in %s: %v", a, *nsPath, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(l, func() (net.Conn, error) { return net.DialTimeout("tcp", a, 5*time.Second) })
		}()
	}
	fmt.Fprintf(os.Stderr, "relay: serving %d way(s) with %s\n", len(into)+len(out), *nsPath)
	wg.Wait()
}

// serve accepts connections on l and copies each both ways to one dial makes.
func serve(l net.Listener, dial func() (net.Conn, error)) {
	for {
		c, err := l.Accept()
		if err != nil {
			log.Printf("relay: accept on %s: %v", l.Addr(), err)
			return
		}
		go func() {
			defer c.Close()
			d, err := dial()
			if err != nil {
				log.Printf("relay: forward %s: %v", l.Addr(), err)
				return
			}
			defer d.Close()
			done := make(chan struct{}, 2)
			cp := func(dst, src net.Conn) {
				io.Copy(dst, src)
				if t, ok := dst.(*net.TCPConn); ok {
					t.CloseWrite()
				}
				done <- struct{}{}
			}
			go cp(d, c)
			go cp(c, d)
			<-done
			<-done
		}()
	}
}

// inNetns runs fn on a thread that is in the network namespace at path, then returns the
// thread to the process's namespace. Sockets fn creates stay in the namespace at path.
func inNetns(path string, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
	if err != nil {
		return err
	}
	defer self.Close()
	target, err := os.Open(path)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := setns(target); err != nil {
		return fmt.Errorf("enter %s: %w", path, err)
	}
	fnErr := fn()
	if err := setns(self); err != nil {
		log.Fatalf("relay: return to the relay's namespace: %v", err) // never serve from a wrong one
	}
	return fnErr
}

func setns(f *os.File) error {
	if _, _, e := syscall.RawSyscall(sysSetns, f.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
		return e
	}
	return nil
}

// sysSetns is setns(2) on linux/amd64 (the syscall package has no name for it).
const sysSetns = 308
