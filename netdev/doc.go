// Package netdev configures network namespaces and the devices, addresses,
// routes, rules and sysctls inside them, through netlink rather than by
// spawning ip(8).
//
// A named namespace lives at /run/netns/NAME, exactly as `ip netns add`
// creates it, so iproute2 and sfclab see the same namespaces. All work inside
// one namespace goes through a single netlink handle opened in that
// namespace (see [OpenNS]); the calling goroutine never has to switch
// namespaces for netlink operations. Operations that must run with the
// thread inside the namespace (sysctls, forking a process) use [NS.Do],
// which locks an OS thread, switches it and switches it back.
//
// Interface names are limited to 15 bytes (IFNAMSIZ-1) by the kernel.
package netdev

import "errors"

// ErrNotFound reports that a namespace, link or other object does not exist.
var ErrNotFound = errors.New("not found")
