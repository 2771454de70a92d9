// SPDX-License-Identifier: GPL-2.0
//
// sfclab firewall flow offload: a tc (tcx) ingress program on a transparent firewall's
// ingress ports, inside its namespace, doing what an nftables flowtable does where the kernel
// has none. A packet of a flow the firewall already let through both ways skips the IP stack,
// conntrack and the ruleset and leaves by the way's egress port as the bump program would hand
// it on (bump.c, the shared wire.h): IPv4 TCP or UDP, no IP options or fragments, no SYN, FIN
// or RST, TTL > 1, not for the firewall itself, and a conntrack entry (bpf_skb_ct_lookup) that
// is ASSURED (for TCP: conntrack saw the handshake complete, ESTABLISHED; for UDP: traffic
// both ways and then more), CONFIRMED and without NAT, sequence adjustment, a helper or
// dying, and for TCP still in conntrack's ESTABLISHED state (after a FIN every packet of the
// flow, the last ACKs too, is the kernel's). Everything else goes up the stack as before, so
// the ruleset decides every new flow and conntrack sees every flow's start and whole end.
//
// What offloaded packets miss, as with a flowtable: the ruleset's counters (the established
// rule's), conntrack's per-packet TCP window tracking and its packet counters. What keeps the
// entry alive: once its timeout has less than half of the protocol's established timeout left,
// a packet puts it back to the full timeout (bpf_ct_change_timeout), not every packet.

#include "wire.h"
#include <linux/tcp.h>

// The kernel's struct nf_conn, the fields read (CO-RE relocates their offsets).
struct ip_ct_tcp {
	__u8 state; // enum tcp_conntrack
} __attribute__((preserve_access_index));

union nf_conntrack_proto {
	struct ip_ct_tcp tcp;
} __attribute__((preserve_access_index));

struct nf_conn {
	__u32 timeout; // jiffies (32 bits) at which the entry expires
	unsigned long status;
	union nf_conntrack_proto proto;
} __attribute__((preserve_access_index));

// TCP_CONNTRACK_ESTABLISHED of enum tcp_conntrack: once either side has sent a FIN the entry
// leaves it, and the rest of the teardown (the last ACKs too) is the kernel's again.
#define TCP_CONNTRACK_ESTABLISHED 3

// struct bpf_ct_opts of the conntrack kfuncs, the first 12 bytes every kernel with them takes.
struct bpf_ct_opts {
	__s32 netns_id;
	__s32 error;
	__u8 l4proto;
	__u8 dir;
	__u8 reserved[2];
};

extern struct nf_conn *bpf_skb_ct_lookup(struct __sk_buff *, struct bpf_sock_tuple *, __u32,
					  struct bpf_ct_opts *, __u32) __ksym;
extern void bpf_ct_release(struct nf_conn *) __ksym;
extern int bpf_ct_change_timeout(struct nf_conn *, __u32) __ksym;

// enum ip_conntrack_status bits.
#define IPS_SEEN_REPLY (1UL << 1)
#define IPS_ASSURED (1UL << 2)
#define IPS_CONFIRMED (1UL << 3)
#define IPS_NAT_MASK ((1UL << 4) | (1UL << 5))
#define IPS_SEQ_ADJUST (1UL << 6)
#define IPS_DYING (1UL << 9)
#define IPS_FIXED_TIMEOUT (1UL << 10)
#define IPS_HELPER (1UL << 13)

#define BPF_F_CURRENT_NETNS (-1)

// Set at load time from the firewall namespace's conntrack sysctls: the established timeouts
// (ms) an offloaded packet restores, and the jiffies left below which it does (half of them).
volatile const __u32 tcp_timeout_ms = 0;
volatile const __u32 udp_timeout_ms = 0;
volatile const __u32 tcp_refresh_below = 0;
volatile const __u32 udp_refresh_below = 0;

// Counters: packets offloaded, timeouts refreshed.
enum { STAT_OFFLOADED, STAT_REFRESHED, STAT_MAX };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} offload_stats SEC(".maps");

static __always_inline void count(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&offload_stats, &what);
	if (v)
		(*v)++;
}

SEC("tc")
int fwoffload(struct __sk_buff *skb)
{
	struct iphdr *ip = wire_ipv4(skb);
	if (!ip)
		return TC_ACT_OK;
	void *end = (void *)(long)skb->data_end;
	if (ip->ihl != 5 || (ip->frag_off & bpf_htons(0x3fff)))
		return TC_ACT_OK;
	__u8 proto = ip->protocol;
	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = (void *)(ip + 1);
		if ((void *)(th + 1) > end)
			return TC_ACT_OK;
		if (th->syn || th->fin || th->rst)
			return TC_ACT_OK;
	} else if (proto == IPPROTO_UDP) {
		if ((void *)(ip + 1) + 8 > end)
			return TC_ACT_OK;
	} else {
		return TC_ACT_OK;
	}
	// Addresses then ports, as in the packet.
	struct bpf_sock_tuple tuple = {};
	tuple.ipv4.saddr = ip->saddr;
	tuple.ipv4.daddr = ip->daddr;
	__u16 *ports = (void *)(ip + 1);
	tuple.ipv4.sport = ports[0];
	tuple.ipv4.dport = ports[1];
	__u8 ttl = ip->ttl;
	struct bpf_ct_opts opts = {.netns_id = BPF_F_CURRENT_NETNS, .l4proto = proto};
	struct nf_conn *ct = bpf_skb_ct_lookup(skb, &tuple, sizeof(tuple.ipv4), &opts, sizeof(opts));
	if (!ct)
		return TC_ACT_OK;
	unsigned long status = ct->status;
	if ((status & (IPS_ASSURED | IPS_SEEN_REPLY | IPS_CONFIRMED)) != (IPS_ASSURED | IPS_SEEN_REPLY | IPS_CONFIRMED) ||
	    (status & (IPS_NAT_MASK | IPS_SEQ_ADJUST | IPS_DYING | IPS_HELPER)) ||
	    (proto == IPPROTO_TCP && ct->proto.tcp.state != TCP_CONNTRACK_ESTABLISHED)) {
		bpf_ct_release(ct);
		return TC_ACT_OK;
	}
	__u32 below = proto == IPPROTO_TCP ? tcp_refresh_below : udp_refresh_below;
	__u32 full = proto == IPPROTO_TCP ? tcp_timeout_ms : udp_timeout_ms;
	__s32 left = (__s32)(ct->timeout - (__u32)bpf_jiffies64());
	if (full && !(status & IPS_FIXED_TIMEOUT) && left < (__s32)below) {
		if (bpf_ct_change_timeout(ct, full) == 0)
			count(STAT_REFRESHED);
	}
	bpf_ct_release(ct);
	count(STAT_OFFLOADED);
	return wire_forward(skb, ttl);
}

char LICENSE[] SEC("license") = "GPL";
