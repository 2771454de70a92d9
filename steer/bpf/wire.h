// SPDX-License-Identifier: GPL-2.0
//
// sfclab: what a program at a transparent function's ingress port needs to hand an IPv4
// packet on as the kernel's forwarding would, without it (bump.c: every packet of a
// forwarder; fwoffload.c: a firewall's established flows). Each program's object has its own
// copy of the load-time constants below.

#ifndef SFCLAB_WIRE_H
#define SFCLAB_WIRE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_OWN 8

// Set at load time: the egress port's ifindex in the function's namespace (the way's out),
// whether to hand the frame to the peer directly (1) or transmit it on the egress port (0),
// the function's own IPv4 addresses (network order, 0: unused slot), and the MACs the kernel's
// forwarding would have written: the egress port's as source, the placeholder neighbour's as
// destination (steering at the egress port rewrites it; with no flow state there, a frame
// for a placeholder MAC takes the bridge, as it did, instead of bouncing back in).
volatile const __u32 out_ifindex = 0;
volatile const __u32 peer = 1;
volatile const __u32 own[MAX_OWN] = {};
volatile const __u8 src_mac[ETH_ALEN] = {};
volatile const __u8 dst_mac[ETH_ALEN] = {};

// wire_ipv4 returns the IPv4 header of a frame the kernel would forward and the program may
// hand on itself (unicast IPv4 for someone else, TTL > 1), or NULL for what goes up the
// function's stack: ARP, IPv6, broadcast and multicast, packets for the function's own
// addresses, TTL about to expire (the kernel sends ICMP time exceeded).
static __always_inline struct iphdr *wire_ipv4(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return NULL;
	if (eth->h_dest[0] & 1) // broadcast or multicast
		return NULL;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end)
		return NULL;
	__u32 dst = ip->daddr;
	if ((dst & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000))
		return NULL;
#pragma unroll
	for (int i = 0; i < MAX_OWN; i++) {
		if (own[i] && own[i] == dst)
			return NULL;
	}
	if (ip->ttl <= 1)
		return NULL;
	return ip;
}

// wire_forward decrements the TTL of a frame wire_ipv4 accepted (fixing the header checksum),
// writes the MACs and redirects it to the egress port's peer (or out of the egress port).
static __always_inline int wire_forward(struct __sk_buff *skb, __u8 ttl)
{
	// ttl is the high byte of the 16-bit word it shares with protocol.
	__u16 old = bpf_htons((__u16)ttl << 8), new = bpf_htons((__u16)(ttl - 1) << 8);
	if (bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), old, new, 2) < 0)
		return TC_ACT_SHOT;
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct iphdr *ip = data + ETH_HLEN;
	if ((void *)(ip + 1) > end)
		return TC_ACT_SHOT;
	ip->ttl--;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return TC_ACT_SHOT;
#pragma unroll
	for (int i = 0; i < ETH_ALEN; i++) {
		eth->h_dest[i] = dst_mac[i];
		eth->h_source[i] = src_mac[i];
	}
	if (peer)
		return bpf_redirect_peer(out_ifindex, 0);
	return bpf_redirect(out_ifindex, 0);
}

#endif
