package netdev

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
)

// Settings are what a deploy phase writes into one node's network namespace: interface
// addresses (each interface then set up), sysctls, routes, policy rules, in this order. They travel as JSON to the machine that applies them (the sfclab
// agent on a Kubernetes node), so every field is plain data.
type Settings struct {
	Addrs   []IfAddr    `json:"addrs,omitempty"`
	Sysctls [][2]string `json:"sysctls,omitempty"`
	Routes  []Route     `json:"routes,omitempty"`
	Rules   []Rule      `json:"rules,omitempty"`
}

// Empty reports whether s sets nothing.
func (s Settings) Empty() bool {
	return len(s.Addrs) == 0 && len(s.Sysctls) == 0 && len(s.Routes) == 0 && len(s.Rules) == 0
}

// IfAddr is an address of an interface.
type IfAddr struct {
	Link   string       `json:"link"`
	Prefix netip.Prefix `json:"prefix"`
}

// Apply writes s into the namespace: addresses (and links up), sysctls, routes (one batch),
// rules.
//
// Equivalent to: ip addr add P dev L; ip link set L up; sysctl -w K=V...; ip route add ...;
// ip rule add ...
func (n *NS) Apply(s Settings) error {
	for _, a := range s.Addrs {
		if err := n.AddAddr(a.Link, a.Prefix); err != nil {
			return err
		}
		if err := n.SetUp(a.Link); err != nil {
			return err
		}
	}
	if err := n.SetSysctls(s.Sysctls); err != nil {
		return err
	}
	if err := n.AddRoutes(s.Routes); err != nil {
		return err
	}
	for _, r := range s.Rules {
		if err := n.AddRule(r); err != nil {
			return err
		}
	}
	return nil
}

// guard, when set, is asked before this process opens or names a network namespace by name or
// path (OpenNS, OpenNSPath, BindNetns); an error refuses it. Tests set it to prove that a
// deploy never enters namespaces that live on another machine's agent (GuardNamespaces).
var guard struct {
	sync.RWMutex
	refuse []string // name prefixes and path prefixes refused
}

// GuardNamespaces refuses, in this process, every OpenNS, OpenNSPath and BindNetns of a name
// or path that starts with one of prefixes (e.g. "sfc.LAB." and "/proc/"), until the
// returned function is called. It is for tests that prove a runtime's deploy leaves the
// namespaces to its agent.
func GuardNamespaces(prefixes ...string) (release func()) {
	guard.Lock()
	old := guard.refuse
	guard.refuse = append(append([]string(nil), old...), prefixes...)
	guard.Unlock()
	return func() {
		guard.Lock()
		guard.refuse = old
		guard.Unlock()
	}
}

// ErrGuarded is wrapped by the error of an access GuardNamespaces refused.
var ErrGuarded = fmt.Errorf("namespace access refused in this process")

// CheckGuard refuses what (a namespace name or path, /proc/PID/ns/...) when GuardNamespaces
// guards it; code that enters a namespace without OpenNS (nsenter) asks it first.
func CheckGuard(what string) error {
	guard.RLock()
	defer guard.RUnlock()
	for _, p := range guard.refuse {
		if strings.HasPrefix(what, p) {
			return fmt.Errorf("open %s: %w (guarded prefix %q)", what, ErrGuarded, p)
		}
	}
	return nil
}
