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

SEC("tc")
int bump(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	if (eth->h_dest[0] & 1) // broadcast or multicast
		return TC_ACT_OK;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end)
		return TC_ACT_OK;
	__u32 dst = ip->daddr;
	if ((dst & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000))
		return TC_ACT_OK;
#pragma unroll
	for (int i = 0; i < MAX_OWN; i++) {
		if (own[i] && own[i] == dst)
			return TC_ACT_OK;
	}
	if (ip->ttl <= 1)
		return TC_ACT_OK;
	// ttl is the high byte of the 16-bit word it shares with protocol.
	__u16 old = bpf_htons((__u16)ip->ttl << 8), new = bpf_htons((__u16)(ip->ttl - 1) << 8);
	if (bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), old, new, 2) < 0)
		return TC_ACT_SHOT;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	ip = data + ETH_HLEN;
	if ((void *)(ip + 1) > end)
		return TC_ACT_SHOT;
	ip->ttl--;
	eth = data;
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

char LICENSE[] SEC("license") = "GPL";
