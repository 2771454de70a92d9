// SPDX-License-Identifier: GPL-2.0
//
// sfclab transparent steering: one tc (clsact) ingress program on the host-side end of every
// port's veth (and on a host's steering VXLAN device). networking-sfc semantics:
//
//   source port:   classify (rules per logical source port, first match; overlaps are refused
//                  before load) -> path id, hop 0.
//   function port: the packet's path comes from the `expect` LRU map, keyed by (5-tuple, host,
//                  ifindex of the port), written when the packet was redirected into the function;
//                  the hop index comes from `hop_of` (path, egress port) -> index, so inserting or
//                  removing a hop is a map update that takes effect on the next packet.
//   hop:           group -> weight table slot chosen by a hash of the group's lb_fields -> port
//                  pair -> rewrite dst MAC -> bpf_redirect_peer into the function (same host) or
//                  set the tunnel key (VNI = path << 8 | index) and redirect to the host's
//                  collect_md VXLAN device (other host).
//   tap group:     bpf_clone_redirect of a copy to the tap's port; anything a tap port sends is
//                  dropped.
//   end:           service graph edge (classify again, key GRAPH|path) or delivery to the port
//                  owning the destination MAC; for a symmetric chain the reverse 5-tuple is
//                  written into `expect` at the destination port, so replies take the reverse
//                  path; the reverse path hashes swapped fields (addresses, ports, and the
//                  flow's end-to-end MACs for eth_src/eth_dst), so it picks the same instances.
//
// Flow cache (the fast path): the walk above costs a dozen hash lookups per packet and hop,
// which on a chain of forwarders cost as much as the kernel's own forwarding. Its outcome
// depends only on the tables, the 5-tuple and the port, so when it ends in one local
// bpf_redirect_peer (no tap copy, no tunnel, at most one counter) the decision is stored in the
// flow's `expect` entry at that port (an entry marked CLASSIFIED when the flow came from a
// classifier), stamped with the tables' epoch. Every later packet of the flow at that port
// costs one LRU lookup, one counter and the redirect. Apply bumps `epoch` after writing the
// tables, so a chain change invalidates every cached decision at once: the next packet walks
// the tables again. One thing the walk did per packet that the cache does not: rewrite the
// flow state at the next function's egress port if the LRU map evicted it. So a packet that
// arrives at a function's port (PORT_EXPECT) with no flow state bumps the epoch itself (once
// per flow: a flow the function sends on its own is remembered), and the previous hop's next
// packet walks and writes it again. (Replies need no such care: a symmetric chain classifies
// them at its logical destination port anyway.)
//
// IPv4 and IPv6 are steered (dual stack). The walk's flow key (struct flowkey) holds 128-bit
// addresses, IPv4 mapped (::ffff:a.b.c.d), and says which family it is; a classifier rule
// matches one family. Flow state stays per family: IPv4's in `expect` under its compact
// 5-tuple (so the IPv4 fast path's lookup is what it was before IPv6), IPv6's in `expect6`.
// Everything else passes to the bridge unchanged: ARP, and for IPv6 neighbour discovery
// (ICMPv6 133-137), multicast and link-local destinations, the IPv6 twin of ARP. IP in no
// chain goes straight to the port owning its destination address (or MAC), as the bridge
// would have sent it.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_RULES 16
#define barrier() asm volatile("" ::: "memory")
#define MAX_STEPS 8
#define MAX_EXT_HDRS 4 // IPv6 extension headers parsed before the transport header
#define GRAPH_KEY 0x80000000u

#define PORT_TAP 1
#define PORT_EXPECT 2 // a function's port where packets come back: flow state is expected here

#define PATH_REVERSE 1
#define PATH_GRAPH 2
#define PATH_SYMMETRIC 4 // a forward path whose reverse is path ^ 1

#define LB_IP_SRC (1 << 0)
#define LB_IP_DST (1 << 1)
#define LB_IP_PROTO (1 << 2)
#define LB_TCP_SRC (1 << 3)
#define LB_TCP_DST (1 << 4)
#define LB_UDP_SRC (1 << 5)
#define LB_UDP_DST (1 << 6)
#define LB_ETH_SRC (1 << 7)
#define LB_ETH_DST (1 << 8)

// host_id is the emulated host this copy of the program runs on; set at load time.
volatile const __u32 host_id = 0;

struct port_key {
	__u32 host;
	__u32 ifindex;
};

struct port {
	__u32 host;
	__u32 ifindex;
	__u8 mac[6];
	__u8 flags;
	__u8 pad;
};

struct mac_key {
	__u8 mac[6];
	__u16 pad;
};

// addr is an IPv6 address, or an IPv4 address mapped (::ffff:a.b.c.d), in network order.
struct addr {
	__u32 w[4];
};

struct rule {
	__u32 path; // 0: empty slot
	struct addr src;
	struct addr dst;
	struct addr src_mask;
	struct addr dst_mask;
	__u16 sport_min, sport_max;
	__u16 dport_min, dport_max;
	__u8 proto; // 0: any
	__u8 v6;    // the rule matches IPv6 flows (1) or IPv4 flows (0)
	__u8 pad[2];
};

struct rules {
	struct rule r[MAX_RULES];
};

struct path {
	__u32 nhops;
	__u32 flags;
};

struct path_idx {
	__u32 path;
	__u32 idx;
};

struct group {
	__u32 nslots;
	__u32 lb_fields;
	__u32 tap;
};

struct slot_key {
	__u32 group;
	__u32 slot;
};

struct pair {
	__u32 ingress;
	__u32 egress;
};

struct path_port {
	__u32 path;
	__u32 port;
};

// tuple is an IPv4 flow's 5-tuple, the key of its flow state (`expect`): the fast path keeps
// IPv4's key this small.
struct tuple {
	__u32 src;
	__u32 dst;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

// flowkey is a flow's 5-tuple as the table walk sees it, of either family: IPv4 addresses
// mapped (::ffff:a.b.c.d), IPv6 ones as they are.
struct flowkey {
	struct addr src;
	struct addr dst;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 v6; // 1: an IPv6 flow
	__u8 pad[2];
};

struct expect_key {
	struct tuple t;
	__u32 host;
	__u32 ifindex; // the port's host-side ifindex on that host
};

// expect6_key keys an IPv6 flow's state (`expect6`).
struct expect6_key {
	struct flowkey t;
	__u32 host;
	__u32 ifindex;
};

#define FLOW_CLASSIFIED 1 // made at classification, not by a previous hop
#define FLOW_COUNT 2      // the cached decision bumps counter (cpath, cidx)

// flow is an `expect` value: the path and hop a previous hop sent the flow on, and the
// decision cached for packets of the flow arriving at this port.
struct flow {
	__u32 path;
	__u32 idx;
	__u32 epoch;   // the cached decision holds while the tables' epoch is this; 0: none
	__u32 ifindex; // bpf_redirect_peer target
	__u32 cpath, cidx;
	__u8 mac[6];   // destination MAC to write
	__u8 flags;
	__u8 pad;
};

// decision collects what the table walk did, so steer_port can cache it.
struct decision {
	__u32 ifindex;
	__u32 cpath, cidx;
	__u8 mac[6];
	__u8 ncount;
	__u8 nocache;
	__u8 pad[2];
	__u32 from_tunnel; // the sending host counted the first hop already
};

struct pick_key {
	__u32 group;
	struct flowkey t;
};

struct counter {
	__u64 packets;
	__u64 bytes;
};

struct tunnel {
	__u32 underlay; // host order, as bpf_tunnel_key wants
	__u32 vxlan;    // ifindex of the host's steering VXLAN device, in the host's namespace
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct port_key);
	__type(value, __u32);
} port_by_if SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct port);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct mac_key);
	__type(value, __u32);
} macs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct addr); // a port's IPv4 (mapped) or IPv6 address
	__type(value, __u32);
} ips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct rules);
} classifiers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct path);
} paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct path_idx);
	__type(value, __u32);
} hops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct group);
} groups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct slot_key);
	__type(value, __u32);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct pair);
} pairs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct path_port);
	__type(value, __u32);
} hop_of SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct expect_key);
	__type(value, struct flow);
} expect SEC(".maps");

// expect6 is expect for IPv6 flows (their keys hold 128-bit addresses).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct expect6_key);
	__type(value, struct flow);
} expect6 SEC(".maps");

// epoch[0] is bumped by every Apply; cached decisions of another epoch are stale.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} epoch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct pick_key);
	__type(value, __u32);
} picks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct path_idx);
	__type(value, struct counter);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct tunnel);
} tunnels SEC(".maps");

__noinline int count(__u32 path, __u32 idx, __u32 len)
{
	struct path_idx k = {.path = path, .idx = idx};
	struct counter *c = bpf_map_lookup_elem(&stats, &k);
	if (c) {
		c->packets++;
		c->bytes += len;
		return 0;
	}
	struct counter init = {.packets = 1, .bytes = len};
	bpf_map_update_elem(&stats, &k, &init, BPF_NOEXIST);
	return 0;
}

// counted counts a hop and remembers it for the flow cache.
static __always_inline void counted(struct decision *d, __u32 path, __u32 idx, __u32 len)
{
	count(path, idx, len);
	d->cpath = path;
	d->cidx = idx;
	d->ncount++;
}

// redirected sends the frame to the local port ifindex with mac as its destination and
// remembers both for the flow cache.
static __always_inline int redirected(struct decision *d, __u32 ifindex, const __u8 *mac)
{
	d->ifindex = ifindex;
	__builtin_memcpy(d->mac, mac, ETH_ALEN);
	return bpf_redirect_peer(ifindex, 0);
}

static __always_inline __u32 mix(__u32 h, __u32 v)
{
	v *= 0xcc9e2d51;
	v = (v << 15) | (v >> 17);
	v *= 0x1b873593;
	h ^= v;
	h = (h << 13) | (h >> 19);
	return h * 5 + 0xe6546b64;
}

static __always_inline __u32 fmix(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

// lb_hash hashes a group's lb_fields; reverse hashes the swapped fields (source for
// destination: addresses, ports and MACs), so both directions of a symmetric chain pick the
// same instance (networking-sfc's symmetric hashing). eth_src and eth_dst are the flow's
// end-to-end MACs (flow_macs), not the MACs of the frame at this hop.
__noinline __u32 lb_hash(const struct flowkey *t, __u64 eth_src, __u64 eth_dst, __u32 fields, int reverse)
{
	if (!t)
		return 0;
	const struct addr *src = reverse ? &t->dst : &t->src, *dst = reverse ? &t->src : &t->dst;
	__u16 sport = reverse ? t->dport : t->sport, dport = reverse ? t->sport : t->dport;
	__u64 esrc = reverse ? eth_dst : eth_src, edst = reverse ? eth_src : eth_dst;
	__u32 h = 0x5fc1ab;
	if (t->v6) {
		// All four words; IPv4 hashes its address alone (the mapped prefix is constant).
		if (fields & LB_IP_SRC)
			h = mix(mix(mix(mix(h, src->w[0]), src->w[1]), src->w[2]), src->w[3]);
		if (fields & LB_IP_DST)
			h = mix(mix(mix(mix(h, dst->w[0]), dst->w[1]), dst->w[2]), dst->w[3]);
	} else {
		if (fields & LB_IP_SRC)
			h = mix(h, src->w[3]);
		if (fields & LB_IP_DST)
			h = mix(h, dst->w[3]);
	}
	if (fields & LB_IP_PROTO)
		h = mix(h, t->proto);
	if (t->proto == IPPROTO_TCP) {
		if (fields & LB_TCP_SRC)
			h = mix(h, sport);
		if (fields & LB_TCP_DST)
			h = mix(h, dport);
	}
	if (t->proto == IPPROTO_UDP) {
		if (fields & LB_UDP_SRC)
			h = mix(h, sport);
		if (fields & LB_UDP_DST)
			h = mix(h, dport);
	}
	if (fields & LB_ETH_SRC)
		h = mix(mix(h, (__u32)esrc), (__u32)(esrc >> 32));
	if (fields & LB_ETH_DST)
		h = mix(mix(h, (__u32)edst), (__u32)(edst >> 32));
	return fmix(h);
}

// mac_of returns the MAC of the lab port owning address ip, 0 if no port does.
static __always_inline __u64 mac_of(const struct addr *ip)
{
	__u32 *pid = bpf_map_lookup_elem(&ips, ip);
	if (!pid)
		return 0;
	struct port *p = bpf_map_lookup_elem(&ports, pid);
	if (!p)
		return 0;
	__u64 mac = 0;
	__builtin_memcpy(&mac, p->mac, ETH_ALEN);
	return mac;
}

// flow_macs gives lb_hash the flow's eth_src and eth_dst: the MACs of the ports owning its
// source and destination address, which is what the frame carried when the source endpoint
// sent it on their shared network. The frame's own MACs at a later hop are the previous
// function's and the placeholder neighbour's (functions are L3 forwarders here), and a reply
// would see other ones, so hashing those could send replies through another instance. An
// address no lab port owns keeps the frame's MAC. Only looked up when the group hashes a MAC.
__noinline int flow_macs(struct __sk_buff *skb, const struct flowkey *t, __u32 fields, __u64 *esrc, __u64 *edst)
{
	if (!skb || !t || !esrc || !edst)
		return -1;
	*esrc = 0;
	*edst = 0;
	if (!(fields & (LB_ETH_SRC | LB_ETH_DST)))
		return 0;
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return -1;
	*esrc = mac_of(&t->src);
	*edst = mac_of(&t->dst);
	if (!*esrc)
		__builtin_memcpy(esrc, eth->h_source, ETH_ALEN);
	if (!*edst)
		__builtin_memcpy(edst, eth->h_dest, ETH_ALEN);
	return 0;
}

static __always_inline int rule_match(const struct rule *r, const struct flowkey *t)
{
	if (r->path == 0)
		return 0;
	if (r->v6 != t->v6)
		return 0;
	if (r->proto && r->proto != t->proto)
		return 0;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		if ((t->src.w[i] & r->src_mask.w[i]) != r->src.w[i])
			return 0;
		if ((t->dst.w[i] & r->dst_mask.w[i]) != r->dst.w[i])
			return 0;
	}
	if (r->sport_max && (t->sport < r->sport_min || t->sport > r->sport_max))
		return 0;
	if (r->dport_max && (t->dport < r->dport_min || t->dport > r->dport_max))
		return 0;
	return 1;
}

// classify returns the path of the first rule at key matching t, 0 if none.
__noinline __u32 classify(__u32 key, const struct flowkey *t)
{
	if (!t)
		return 0;
	struct rules *rs = bpf_map_lookup_elem(&classifiers, &key);
	if (!rs)
		return 0;
#pragma unroll
	for (int i = 0; i < MAX_RULES; i++) {
		if (rule_match(&rs->r[i], t))
			return rs->r[i].path;
	}
	return 0;
}

struct frag6 {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off; // offset << 3 | flags
	__be32 id;
};

// parse6 fills t from an IPv6 frame: addresses, the transport protocol behind up to
// MAX_EXT_HDRS hop-by-hop, routing, destination-options or fragment headers, and TCP or UDP
// ports (0 in a later fragment, as for IPv4). It returns -1 for what the bridge carries
// unclassified: neighbour discovery (ICMPv6 133-137), multicast and link-local destinations.
// Its own function, so IPv4's inline parse does not grow.
__noinline int parse6(struct __sk_buff *skb, struct flowkey *t)
{
	if (!skb || !t)
		return -1;
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);
	if ((void *)(ip6 + 1) > end)
		return -1;
	__u8 d0 = ip6->daddr.in6_u.u6_addr8[0], d1 = ip6->daddr.in6_u.u6_addr8[1];
	if (d0 == 0xff || (d0 == 0xfe && (d1 & 0xc0) == 0x80))
		return -1;
	__builtin_memcpy(&t->src, &ip6->saddr, sizeof(t->src));
	__builtin_memcpy(&t->dst, &ip6->daddr, sizeof(t->dst));
	t->v6 = 1;
	t->sport = 0;
	t->dport = 0;
	__u8 nh = ip6->nexthdr;
	void *p = ip6 + 1;
#pragma unroll
	for (int i = 0; i < MAX_EXT_HDRS; i++) {
		if (nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_DSTOPTS) {
			struct ipv6_opt_hdr *o = p;
			if ((void *)(o + 1) > end)
				break;
			nh = o->nexthdr;
			p += (o->hdrlen + 1) * 8;
		} else if (nh == IPPROTO_FRAGMENT) {
			struct frag6 *f = p;
			if ((void *)(f + 1) > end)
				break;
			nh = f->nexthdr;
			p = f + 1;
			if (f->frag_off & bpf_htons(0xfff8)) { // a later fragment: no L4 header
				t->proto = nh;
				return 0;
			}
		} else {
			break;
		}
	}
	t->proto = nh;
	if (nh == IPPROTO_TCP || nh == IPPROTO_UDP) {
		__u16 *ports = p;
		if ((void *)(ports + 2) > end)
			return 0;
		t->sport = bpf_ntohs(ports[0]);
		t->dport = bpf_ntohs(ports[1]);
	} else if (nh == IPPROTO_ICMPV6) {
		__u8 *type = p;
		if ((void *)(type + 1) > end)
			return 0;
		if (*type >= 133 && *type <= 137) // router/neighbour solicitation, advertisement, redirect
			return -1;
	}
	return 0;
}

// parse fills t from an IPv4 frame; it returns 1 for an IPv6 frame (parse6's), -1 for what is
// not IP.
static __always_inline int parse(struct __sk_buff *skb, struct tuple *t)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return -1;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return eth->h_proto == bpf_htons(ETH_P_IPV6) ? 1 : -1;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end)
		return -1;
	t->src = ip->saddr;
	t->dst = ip->daddr;
	t->proto = ip->protocol;
	t->sport = 0;
	t->dport = 0;
	if (ip->frag_off & bpf_htons(0x1fff)) // a later fragment: no L4 header
		return 0;
	void *l4 = (void *)ip + ip->ihl * 4;
	if (ip->protocol == IPPROTO_TCP || ip->protocol == IPPROTO_UDP) {
		__u16 *p = l4;
		if ((void *)(p + 2) > end)
			return 0;
		t->sport = bpf_ntohs(p[0]);
		t->dport = bpf_ntohs(p[1]);
	}
	return 0;
}

// widen gives an IPv4 flow's tuple as the walk's flow key (k zeroed by the caller).
static __always_inline void widen(const struct tuple *t, struct flowkey *k)
{
	k->src.w[2] = bpf_htonl(0xffff); // IPv4-mapped: ::ffff:a.b.c.d
	k->src.w[3] = t->src;
	k->dst.w[2] = bpf_htonl(0xffff);
	k->dst.w[3] = t->dst;
	k->sport = t->sport;
	k->dport = t->dport;
	k->proto = t->proto;
}

// Flow state is kept per family: `expect` keys an IPv4 flow by its compact tuple (the fast
// path's key stays as small as it was before IPv6), `expect6` an IPv6 flow by its flow key.
// flow_lookup and flow_update pick the map; swap: the key of the reverse flow (replies).
// One key per scope, so the compiler may give both the same stack slots.
#define KEY6(ek, k, host, ifindex, swap)                                                       \
	struct expect6_key ek = {.host = host, .ifindex = ifindex};                           \
	ek.t.src = swap ? k->dst : k->src;                                                    \
	ek.t.dst = swap ? k->src : k->dst;                                                    \
	ek.t.sport = swap ? k->dport : k->sport;                                              \
	ek.t.dport = swap ? k->sport : k->dport;                                              \
	ek.t.proto = k->proto;                                                                \
	ek.t.v6 = 1;
#define KEY4(ek, k, host, ifindex, swap)                                                       \
	struct expect_key ek = {.host = host, .ifindex = ifindex};                            \
	ek.t.src = swap ? k->dst.w[3] : k->src.w[3];                                          \
	ek.t.dst = swap ? k->src.w[3] : k->dst.w[3];                                          \
	ek.t.sport = swap ? k->dport : k->sport;                                              \
	ek.t.dport = swap ? k->sport : k->dport;                                              \
	ek.t.proto = k->proto;

static __always_inline struct flow *flow_lookup(const struct flowkey *k, __u32 host, __u32 ifindex, int swap)
{
	if (k->v6) {
		KEY6(ek, k, host, ifindex, swap)
		return bpf_map_lookup_elem(&expect6, &ek);
	}
	KEY4(ek, k, host, ifindex, swap)
	return bpf_map_lookup_elem(&expect, &ek);
}

static __always_inline int flow_update(const struct flowkey *k, __u32 host, __u32 ifindex, int swap,
				       const struct flow *f, __u64 flags)
{
	if (k->v6) {
		KEY6(ek, k, host, ifindex, swap)
		return bpf_map_update_elem(&expect6, &ek, f, flags);
	}
	KEY4(ek, k, host, ifindex, swap)
	return bpf_map_update_elem(&expect, &ek, f, flags);
}

// flow_at is flow_lookup in a frame of its own (for callers whose stack is on the deepest
// call chain).
static __noinline struct flow *flow_at(const struct flowkey *k, __u32 host, __u32 ifindex)
{
	return flow_lookup(k, host, ifindex, 0);
}

// set_dst writes mac as the frame's destination.
static __always_inline int set_dst(struct __sk_buff *skb, const __u8 *mac)
{
	return bpf_skb_store_bytes(skb, 0, mac, ETH_ALEN, 0);
}

#define VNI_END 0xff
#define VNI_TAP 0x80 // a copy for the tap of hop (index & 0x7f), not to be forwarded on

// to_port sends the frame into the namespace behind port p: straight into the peer on this
// host, or through the steering tunnel (VNI = vni) to the host that owns the port.
static __always_inline int to_port(struct __sk_buff *skb, const struct port *p, __u32 vni, struct decision *d)
{
	if (p->host == host_id)
		return redirected(d, p->ifindex, p->mac);
	d->nocache = 1;
	__u32 me = host_id, there = p->host;
	struct tunnel *local = bpf_map_lookup_elem(&tunnels, &me);
	struct tunnel *remote = bpf_map_lookup_elem(&tunnels, &there);
	if (!local || !remote)
		return TC_ACT_SHOT;
	struct bpf_tunnel_key key = {};
	key.remote_ipv4 = remote->underlay;
	key.tunnel_id = vni;
	key.tunnel_ttl = 64;
	if (bpf_skb_set_tunnel_key(skb, &key, sizeof(key), BPF_F_ZERO_CSUM_TX) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(local->vxlan, 0);
}


// tap_remote clones the frame through the steering tunnel to the host of a tap.
static __always_inline void tap_remote(struct __sk_buff *skb, __u32 host, __u32 vni)
{
	__u32 me = host_id;
	struct tunnel *local = bpf_map_lookup_elem(&tunnels, &me);
	struct tunnel *remote = bpf_map_lookup_elem(&tunnels, &host);
	if (!local || !remote)
		return;
	struct bpf_tunnel_key key = {};
	key.remote_ipv4 = remote->underlay;
	key.tunnel_id = vni;
	key.tunnel_ttl = 64;
	if (bpf_skb_set_tunnel_key(skb, &key, sizeof(key), BPF_F_ZERO_CSUM_TX) < 0)
		return;
	bpf_clone_redirect(skb, local->vxlan, 0);
}

// tap_only hands a tap copy that came through the tunnel to the tap instance of hop idx.
__noinline int tap_only(struct __sk_buff *skb, __u32 path, __u32 idx, const struct flowkey *t)
{
	if (!skb || !t)
		return TC_ACT_SHOT;
	struct path *pa = bpf_map_lookup_elem(&paths, &path);
	if (!pa)
		return TC_ACT_SHOT;
	struct path_idx hk = {.path = path, .idx = idx};
	__u32 *gid = bpf_map_lookup_elem(&hops, &hk);
	if (!gid)
		return TC_ACT_SHOT;
	struct group *g = bpf_map_lookup_elem(&groups, gid);
	if (!g || g->nslots == 0)
		return TC_ACT_SHOT;
	__u64 esrc = 0, edst = 0;
	if (flow_macs(skb, t, g->lb_fields, &esrc, &edst) < 0)
		return TC_ACT_SHOT;
	struct slot_key sk = {.group = *gid};
	sk.slot = lb_hash(t, esrc, edst, g->lb_fields, pa->flags & PATH_REVERSE) % g->nslots;
	__u32 *ppid = bpf_map_lookup_elem(&slots, &sk);
	if (!ppid)
		return TC_ACT_SHOT;
	struct pair *pp = bpf_map_lookup_elem(&pairs, ppid);
	if (!pp)
		return TC_ACT_SHOT;
	__u32 in_id = pp->ingress;
	struct port *in = bpf_map_lookup_elem(&ports, &in_id);
	if (!in || in->host != host_id)
		return TC_ACT_SHOT;
	if (set_dst(skb, in->mac) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect_peer(in->ifindex, 0);
}

// reverse_entry makes replies of flow t arriving at the destination port (host, ifindex) take
// the reverse path (path ^ 1) from hop 0.
static __always_inline void reverse_entry(const struct flowkey *t, __u32 path, __u32 host, __u32 ifindex)
{
	struct flow *have = flow_lookup(t, host, ifindex, 1);
	if (!have || have->path != (path ^ 1) || have->idx != 0 || (have->flags & FLOW_CLASSIFIED)) {
		struct flow want = {.path = path ^ 1, .idx = 0};
		flow_update(t, host, ifindex, 1, &want, BPF_ANY);
	}
}


// deliver hands the frame to the port owning its destination IP (Neutron's fixed IP) or MAC,
// rewriting the destination MAC (a function's egress frame carries a placeholder), or leaves it
// to the bridge when neither is a lab port.
__noinline int deliver(struct __sk_buff *skb, __u32 path, const struct flowkey *t, int symmetric_fwd, struct decision *d)
{
	if (!skb || !t || !d)
		return TC_ACT_SHOT;
	__u32 *pid = bpf_map_lookup_elem(&ips, &t->dst);
	if (!pid) {
		void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
		struct ethhdr *eth = data;
		if ((void *)(eth + 1) > end)
			return TC_ACT_SHOT;
		struct mac_key mk = {};
		__builtin_memcpy(mk.mac, eth->h_dest, ETH_ALEN);
		pid = bpf_map_lookup_elem(&macs, &mk);
		if (!pid)
			return TC_ACT_OK;
	}
	__u32 port = *pid;
	struct port *p = bpf_map_lookup_elem(&ports, &port);
	if (!p)
		return TC_ACT_OK;
	if (symmetric_fwd)
		reverse_entry(t, path, p->host, p->ifindex);
	if (set_dst(skb, p->mac) < 0)
		return TC_ACT_SHOT;
	return to_port(skb, p, (path << 8) | VNI_END, d);
}

// note_pick records the instance (port pair) group picked for flow t. Its own function (as
// expect_hop): the keys hold a flow's 128-bit addresses, and on steer's stack they would
// push the deepest call chain past the verifier's 512 bytes.
__noinline int note_pick(__u32 group, const struct flowkey *t, __u32 pair)
{
	if (!t)
		return 0;
	struct pick_key pk = {.group = group, .t = *t};
	__u32 *old = bpf_map_lookup_elem(&picks, &pk);
	if (!old || *old != pair)
		bpf_map_update_elem(&picks, &pk, &pair, BPF_ANY);
	return 0;
}

// expect_hop writes where flow t reappears: at port (host, ifindex), on path after hop idx-1.
__noinline int expect_hop(const struct flowkey *t, __u32 host, __u32 ifindex, __u32 path, __u32 idx)
{
	if (!t)
		return 0;
	struct flow *have = flow_lookup(t, host, ifindex, 0);
	if (!have || have->path != path || have->idx != idx || (have->flags & FLOW_CLASSIFIED)) {
		struct flow want = {.path = path, .idx = idx};
		flow_update(t, host, ifindex, 0, &want, BPF_ANY);
	}
	return 0;
}

// steer moves the packet on along path from hop next; from_tunnel: the sending host has
// counted hop next already.
__noinline int steer(struct __sk_buff *skb, __u32 path, __u32 next, struct flowkey *t, struct decision *d)
{
	if (!skb || !t || !d)
		return TC_ACT_OK;
	__u32 len = skb->len;
#pragma clang loop unroll(disable)
	for (int step = 0; step < MAX_STEPS; step++) {
		struct path *pa = bpf_map_lookup_elem(&paths, &path);
		if (!pa)
			return TC_ACT_OK;
		if (next >= pa->nhops) {
			counted(d, path, pa->nhops, len);
			if (pa->flags & PATH_GRAPH) {
				__u32 np = classify(GRAPH_KEY | path, t);
				if (np) {
					path = np;
					next = 0;
					continue;
				}
			}
			return deliver(skb, path, t, pa->flags & PATH_SYMMETRIC, d);
		}
		struct path_idx hk = {.path = path, .idx = next};
		__u32 *gid = bpf_map_lookup_elem(&hops, &hk);
		if (!gid)
			return TC_ACT_OK;
		struct group *g = bpf_map_lookup_elem(&groups, gid);
		if (!g || g->nslots == 0)
			return TC_ACT_OK;
		void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
		struct ethhdr *eth = data;
		if ((void *)(eth + 1) > end)
			return TC_ACT_SHOT;
		int reverse = pa->flags & PATH_REVERSE;
		struct slot_key sk = {.group = *gid};
		__u64 esrc = 0, edst = 0;
		if (flow_macs(skb, t, g->lb_fields, &esrc, &edst) < 0)
			return TC_ACT_SHOT;
		sk.slot = lb_hash(t, esrc, edst, g->lb_fields, reverse) % g->nslots;
		__u32 *ppid = bpf_map_lookup_elem(&slots, &sk);
		if (!ppid)
			return TC_ACT_OK;
		struct pair *pp = bpf_map_lookup_elem(&pairs, ppid);
		if (!pp)
			return TC_ACT_OK;
		__u32 in_id = reverse ? pp->egress : pp->ingress;
		__u32 out_id = reverse ? pp->ingress : pp->egress;
		struct port *in = bpf_map_lookup_elem(&ports, &in_id);
		if (!in)
			return TC_ACT_OK;
		if (!d->from_tunnel || step > 0)
			counted(d, path, next, len);

		note_pick(*gid, t, *ppid);

		if (g->tap) {
			// A copy to the tap; the original goes on to the next hop. Not cacheable: the
			// copy is made per packet.
			d->nocache = 1;
			__u8 orig[ETH_ALEN];
			__builtin_memcpy(orig, eth->h_dest, ETH_ALEN);
			if (in->host == host_id) {
				set_dst(skb, in->mac);
				bpf_clone_redirect(skb, in->ifindex, 0);
				set_dst(skb, orig);
			} else {
				// The tap is on another host: send a copy marked tap-only there.
				tap_remote(skb, in->host, (path << 8) | VNI_TAP | next);
			}
			next++;
			continue;
		}
		// Remember where this packet reappears: the instance's egress port.
		struct port *out = in;
		if (out_id != in_id)
			out = bpf_map_lookup_elem(&ports, &out_id);
		if (!out)
			return TC_ACT_OK;
		expect_hop(t, out->host, out->ifindex, path, next + 1);
		if (set_dst(skb, in->mac) < 0)
			return TC_ACT_SHOT;
		return to_port(skb, in, (path << 8) | next, d);
	}
	return TC_ACT_OK;
}

// remember adds a CLASSIFIED entry for a flow at a port (no decision cached yet) unless the
// flow has one there. Its own function: its stack is not on the deepest call chain.
__noinline int remember(const struct expect_key *ek, __u32 path)
{
	if (!ek)
		return 0;
	struct flow f = {.path = path, .flags = FLOW_CLASSIFIED};
	return bpf_map_update_elem(&expect, ek, &f, BPF_NOEXIST);
}

// remember_at is remember for a flow key of either family at port (host, ifindex).
__noinline int remember_at(const struct flowkey *k, __u32 host, __u32 ifindex, __u32 path)
{
	if (!k)
		return 0;
	struct flow f = {.path = path, .flags = FLOW_CLASSIFIED};
	return flow_update(k, host, ifindex, 0, &f, BPF_NOEXIST);
}

// walk steers a packet the flow cache could not: the full table walk. e is the flow's
// `expect` (or `expect6`) entry at this port (NULL: none); what the walk did is left in d.
static __always_inline int walk(struct __sk_buff *skb, struct flowkey *t, struct flow *e, __u32 *from,
				struct decision *d, __u32 *ep)
{
	struct port_key pk = {.host = host_id, .ifindex = skb->ingress_ifindex};
	__u32 *pid = bpf_map_lookup_elem(&port_by_if, &pk);
	if (!pid)
		return TC_ACT_OK;
	__u32 port = *pid;
	struct port *p = bpf_map_lookup_elem(&ports, &port);
	if (p && (p->flags & PORT_TAP))
		return TC_ACT_SHOT; // whatever a tap sends back is dropped
	if (!e && p && (p->flags & PORT_EXPECT) && ep) {
		// A packet leaving a function with no flow state: either the function sends a flow
		// of its own, or the LRU map evicted the entry the previous hop wrote. The previous
		// hop's cached decision would never write it again, so invalidate every cached
		// decision (the previous hop walks and rewrites it on its next packet), and remember
		// the flow here (no decision cached), so a flow of the function's own does this once.
		__sync_fetch_and_add(ep, 1);
		remember_at(t, host_id, skb->ingress_ifindex, 0);
		e = flow_at(t, host_id, skb->ingress_ifindex);
	}

	// A packet leaving a function: which path, which hop.
	if (e && !(e->flags & FLOW_CLASSIFIED)) {
		__u32 path = e->path, next = e->idx;
		struct path_port hp = {.path = path, .port = port};
		__u32 *idx = bpf_map_lookup_elem(&hop_of, &hp);
		if (idx)
			next = *idx + 1; // the chain may have changed since: trust its current order
		else if (next != 0)
			return TC_ACT_OK; // this port left the path: plain L2
		return steer(skb, path, next, t, d);
	}
	// A packet from a logical source port: classify.
	__u32 path = classify(port, t);
	*from = path;
	if (path)
		return steer(skb, path, 0, t, d);
	// Not in a chain: straight to the port owning the destination (as the bridge would, one
	// hop cheaper; also delivers what a function sends with the placeholder MAC when its flow
	// state is gone).
	return deliver(skb, 0, t, 0, d);
}

SEC("tc")
int steer_port(struct __sk_buff *skb)
{
	// The IPv4 flow's key, until a walk needs the flow key k (of either family) in its place.
	union {
		struct expect_key ek;
		struct flowkey k;
	} key;
	key.ek = (struct expect_key){.host = host_id, .ifindex = skb->ingress_ifindex};
	int family = parse(skb, &key.ek.t);
	if (family < 0)
		return TC_ACT_OK;
	__u32 zero = 0;
	__u32 *ep = bpf_map_lookup_elem(&epoch, &zero);
	__u32 now = ep ? *ep : 0;
	struct flow *e;
	if (family > 0) {
		__builtin_memset(&key.k, 0, sizeof(key.k));
		if (parse6(skb, &key.k) < 0)
			return TC_ACT_OK;
		e = flow_at(&key.k, host_id, skb->ingress_ifindex);
	} else {
		e = bpf_map_lookup_elem(&expect, &key.ek);
	}
	if (e && now && e->epoch == now) {
		// The flow cache: the walk's decision for this flow at this port.
		if (e->flags & FLOW_COUNT)
			count(e->cpath, e->cidx, skb->len);
		if (set_dst(skb, e->mac) < 0)
			return TC_ACT_SHOT;
		return bpf_redirect_peer(e->ifindex, 0);
	}

	struct decision d = {};
	__u32 classified = 0;
	if (family == 0) {
		struct tuple t = key.ek.t;
		__builtin_memset(&key.k, 0, sizeof(key.k));
		widen(&t, &key.k);
	}
	int ret = walk(skb, &key.k, e, &classified, &d, ep);
	if (ret != TC_ACT_REDIRECT || d.nocache || d.ncount > 1 || !d.ifindex || !now)
		return ret;
	if (!e) {
		// A classified flow, or one walk remembered: its entry (unless a previous hop made
		// one meanwhile) gets the decision below.
		remember_at(&key.k, host_id, skb->ingress_ifindex, classified);
		e = flow_at(&key.k, host_id, skb->ingress_ifindex);
		if (!e)
			return ret;
	}
	// Fill in place; the epoch last, so a reader that sees it sees the rest.
	e->ifindex = d.ifindex;
	e->cpath = d.cpath;
	e->cidx = d.cidx;
	__builtin_memcpy(e->mac, d.mac, ETH_ALEN);
	e->flags = (e->flags & FLOW_CLASSIFIED) | (d.ncount ? FLOW_COUNT : 0);
	barrier();
	e->epoch = now;
	return ret;
}

// steer_tunnel runs on a host's steering VXLAN device: the VNI says which path and hop.
SEC("tc")
int steer_tunnel(struct __sk_buff *skb)
{
	struct bpf_tunnel_key key = {};
	if (bpf_skb_get_tunnel_key(skb, &key, sizeof(key), 0) < 0)
		return TC_ACT_SHOT;
	struct tuple t4 = {};
	struct flowkey t = {};
	int family = parse(skb, &t4);
	if (family < 0 || (family > 0 && parse6(skb, &t) < 0))
		return TC_ACT_SHOT;
	if (family == 0)
		widen(&t4, &t);
	__u32 path = key.tunnel_id >> 8, idx = key.tunnel_id & 0xff;
	struct decision d = {.from_tunnel = 1};
	if (idx == VNI_END)
		return deliver(skb, path, &t, 0, &d);
	if (idx & VNI_TAP)
		return tap_only(skb, path, idx & 0x7f, &t);
	return steer(skb, path, idx, &t, &d);
}

char LICENSE[] SEC("license") = "GPL";
