// SPDX-License-Identifier: GPL-2.0
//
// sfclab rtt probe: one clock point for the start and the end of every echo's path, the same
// for every attachment driver. Two tc (tcx) programs on the sender's own interface, inside its
// namespace: at egress (in dev_queue_xmit, before the qdisc) an echo of the probe's run gets
// its departure time, at ingress (in __netif_receive_skb_core, when the reply reaches the
// sender's interface, whichever way it came: a veth's netif_rx, a macvlan's rx handler, a
// bpf_redirect_peer) its arrival time. The socket's software stamps are taken elsewhere per
// driver (see docs/experiment-file.md); these are not. Both times are CLOCK_TAI
// (bpf_ktime_get_tai_ns, kernel 6.1+): it differs from the wall clock the socket stamps use by
// whole seconds only, and NTP slews both alike, so user space lines them up exactly. Every
// packet passes unchanged (TC_ACT_UNSPEC: the next program or the stack decides).
//
// An echo is recognised by the probe's payload after the 8-byte ICMP or UDP header: magic
// "sfcR", the run id (u32, big endian) and the sequence number (u64, big endian), over IPv4
// or IPv6 (no extension headers). Egress takes ICMP echo requests and UDP to port; ingress
// ICMP echo replies and UDP from port.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

// Set at load time: the UDP responder's port.
volatile const __u16 udp_port = 7;

#define SLOTS (1 << 18)

// stamp is one echo's slot (index: seq modulo SLOTS); seq tells which echo wrote it last.
struct stamp {
	__u64 seq;
	__u64 out; // egress, ns CLOCK_MONOTONIC (0: not seen)
	__u64 in;  // ingress of the first reply (0: none)
	__u32 id;
	__u32 dups; // further replies seen at ingress
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, struct stamp);
} stamps SEC(".maps");

// echo finds the probe's payload in an echo of this run; returns 1 with id and seq set.
static __always_inline int echo(struct __sk_buff *skb, int egress, __u32 *id, __u64 *seq)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return 0;
	__u8 proto;
	void *l4;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || ip->ihl < 5)
			return 0;
		if (ip->frag_off & bpf_htons(0x3fff)) // a fragment: no header to read
			return 0;
		proto = ip->protocol;
		l4 = (void *)ip + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return 0;
		proto = ip6->nexthdr;
		l4 = ip6 + 1;
	} else {
		return 0;
	}
	__u8 *h = l4;
	if ((void *)(h + 8 + 16) > end)
		return 0;
	if (proto == IPPROTO_ICMP) {
		if (h[0] != (egress ? 8 : 0) || h[1] != 0)
			return 0;
	} else if (proto == IPPROTO_UDP) {
		__u16 port = egress ? *(__u16 *)(h + 2) : *(__u16 *)h;
		if (port != bpf_htons(udp_port))
			return 0;
	} else {
		return 0;
	}
	__u8 *p = h + 8;
	if (p[0] != 's' || p[1] != 'f' || p[2] != 'c' || p[3] != 'R')
		return 0;
	*id = bpf_ntohl(*(__u32 *)(p + 4)); // user space keeps its run's ids only
	*seq = ((__u64)bpf_ntohl(*(__u32 *)(p + 8)) << 32) | bpf_ntohl(*(__u32 *)(p + 12));
	return 1;
}

SEC("tc")
int tcstamp_out(struct __sk_buff *skb)
{
	__u32 id;
	__u64 seq;
	if (!echo(skb, 1, &id, &seq))
		return TC_ACT_UNSPEC;
	__u64 now = bpf_ktime_get_tai_ns();
	__u32 slot = seq & (SLOTS - 1);
	struct stamp *s = bpf_map_lookup_elem(&stamps, &slot);
	if (!s)
		return TC_ACT_UNSPEC;
	s->seq = seq;
	s->id = id;
	s->out = now;
	s->in = 0;
	s->dups = 0;
	return TC_ACT_UNSPEC;
}

SEC("tc")
int tcstamp_in(struct __sk_buff *skb)
{
	__u32 id;
	__u64 seq;
	if (!echo(skb, 0, &id, &seq))
		return TC_ACT_UNSPEC;
	__u64 now = bpf_ktime_get_tai_ns();
	__u32 slot = seq & (SLOTS - 1);
	struct stamp *s = bpf_map_lookup_elem(&stamps, &slot);
	if (!s || s->seq != seq || s->id != id || !s->out)
		return TC_ACT_UNSPEC;
	if (s->in)
		s->dups++;
	else
		s->in = now;
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
