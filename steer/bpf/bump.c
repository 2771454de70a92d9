// SPDX-License-Identifier: GPL-2.0
//
// sfclab bump in the wire: a tc (tcx) ingress program on a transparent forwarder's ingress
// port, inside the function's namespace. Whatever IPv4 unicast arrives for someone else leaves
// by the way's egress port without the kernel's L3 forwarding (no route lookup, no neighbour,
// no netfilter, no qdisc, no backlog round): it decrements the TTL (so a steering loop ends,
// as it would with kernel forwarding) and redirects the frame into the peer of the egress
// port's veth, the host-side end, where the steering program takes it on in the same softirq
// pass. Everything else (ARP, IPv6, broadcast and multicast, packets for the function's own
// addresses, TTL about to expire) goes up the function's stack as before, so the kernel's
// forwarding set-up stays the fallback (and sends ICMP time exceeded).

#include "wire.h"

SEC("tc")
int bump(struct __sk_buff *skb)
{
	struct iphdr *ip = wire_ipv4(skb);
	if (!ip)
		return TC_ACT_OK;
	return wire_forward(skb, ip->ttl);
}

char LICENSE[] SEC("license") = "GPL";
