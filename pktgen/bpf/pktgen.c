// SPDX-License-Identifier: GPL-2.0
//
// sfclab packet generator, receiver counter and reflector (XDP).
//
// sfc_gen runs under BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES: the kernel hands it a frame
// built from a template (Ethernet, IPv4, UDP, payload) once per repetition, the program
// rewrites what changes per frame (size for IMIX, IPv4 length and checksum, UDP length, the
// trial id, a sequence number, a timestamp in every sample_every-th frame) and returns XDP_TX,
// which live-frame mode turns into a transmission out of the interface it was given. Frame
// contents persist between repetitions of one page, so every field is written every time.
//
// sfc_count sits on the receiving node's interface (XDP) and counts the generator's frames
// per trial before any socket sees them, then drops them: a socket buffer never poses as
// chain loss. sfc_reflect sits on the far end of an RTT measurement and sends the generator's
// frames back (addresses and ports swapped, XDP_TX). sfc_echo sits on the sender's interface:
// it counts returning frames, notes reordering, and hands the RTT of every timestamped one to
// user space through a ring buffer. Everything else passes untouched.
//
// Payload (network order for trial and seq): trial id (4), sequence number (4), send time in
// ns from bpf_ktime_get_ns (8, host order; 0 in frames not sampled).

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_SIZES 16

struct config {
	__u32 trial;
	__u32 sample_every; // timestamp every n-th frame; 0: none
	__u32 nsizes;       // frame sizes in the cycle (on the wire, without FCS)
	__u16 port;         // UDP destination port of the generator's frames
	__u16 sport;        // and their source port
	__u16 sizes[MAX_SIZES];
	__u32 ifindex;    // the interface live-frame runs are given: only those generate
	__u8 hdr[44];     // Ethernet, IPv4, UDP headers of every frame (42 bytes used)
};

struct payload {
	__u32 trial;
	__u32 seq;
	__u64 ts;
};

struct rtt_event {
	__u32 seq;
	__u32 pad;
	__u64 rtt_ns;
};

struct counts {
	__u64 packets;
	__u64 bytes;
	__u64 reordered; // frames whose sequence number is below the highest seen before
	__u64 max_seq;
};

// One configuration for every program of this object: index 0.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} cfg SEC(".maps");

// Frames generated, per CPU (each sending thread runs on its own CPU).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sent SEC(".maps");

// Frames counted per trial id (receiver, reflector or echo end).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct counts);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} rtts SEC(".maps");

static __always_inline __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

static __always_inline void ip_csum(struct iphdr *ip)
{
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;
	ip->check = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	ip->check = csum_fold(sum);
}

// parse returns the payload of a generator frame for port (as destination, or as source when
// reflected), or NULL.
static __always_inline struct payload *parse(struct xdp_md *ctx, struct config *c, int reflected)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return NULL;
	struct udphdr *udp = (void *)(ip + 1);
	struct payload *p = (void *)(udp + 1);
	if ((void *)(p + 1) > end)
		return NULL;
	if ((reflected ? udp->source : udp->dest) != bpf_htons(c->port))
		return NULL;
	return p;
}

static __always_inline void count(struct payload *p, __u64 bytes)
{
	__u32 trial = bpf_ntohl(p->trial), seq = bpf_ntohl(p->seq);
	struct counts *v = bpf_map_lookup_elem(&seen, &trial);
	if (!v) {
		struct counts fresh = {};
		bpf_map_update_elem(&seen, &trial, &fresh, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&seen, &trial);
		if (!v)
			return;
	}
	v->packets++;
	v->bytes += bytes;
	if (seq < v->max_seq)
		v->reordered++;
	else
		v->max_seq = seq;
}

SEC("xdp")
int sfc_count(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c)
		return XDP_PASS;
	struct payload *p = parse(ctx, c, 0);
	if (!p)
		return XDP_PASS;
	count(p, ctx->data_end - ctx->data);
	return XDP_DROP;
}

SEC("xdp")
int sfc_reflect(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c)
		return XDP_PASS;
	struct payload *p = parse(ctx, c, 0);
	if (!p)
		return XDP_PASS;
	count(p, ctx->data_end - ctx->data);
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end)
		return XDP_PASS;
	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	__u32 a = ip->saddr; // swapping the addresses leaves the IPv4 checksum as it is
	ip->saddr = ip->daddr;
	ip->daddr = a;
	__u16 port = udp->source;
	udp->source = udp->dest;
	udp->dest = port;
	udp->check = 0;
	return XDP_TX;
}

static __always_inline int generate(struct xdp_md *ctx, struct config *c)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&sent, &zero);
	if (!n)
		return XDP_ABORTED;
	__u64 seq = *n;
	*n = seq + 1;
	__u32 nsizes = c->nsizes;
	if (nsizes == 0 || nsizes > MAX_SIZES)
		return XDP_ABORTED;
	__u32 want = c->sizes[(seq % nsizes) & (MAX_SIZES - 1)];
	int have = (int)(ctx->data_end - ctx->data);
	if ((int)want < have && bpf_xdp_adjust_tail(ctx, (int)want - have))
		return XDP_ABORTED;
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	struct payload *p = (void *)(udp + 1);
	if ((void *)(p + 1) > end)
		return XDP_ABORTED;
	// Pages come back to live-frame mode from wherever the frames went (a forwarder rewrote
	// MACs and TTL, a reflector swapped addresses): every header byte is written again.
	__builtin_memcpy(data, c->hdr, sizeof(*eth) + sizeof(*ip) + sizeof(*udp));
	__u16 len = (__u16)(end - data);
	ip->tot_len = bpf_htons(len - sizeof(*eth));
	ip_csum(ip);
	udp->len = bpf_htons(len - sizeof(*eth) - sizeof(*ip));
	udp->check = 0;
	p->trial = bpf_htonl(c->trial);
	p->seq = bpf_htonl((__u32)seq);
	p->ts = 0;
	if (c->sample_every && seq % c->sample_every == 0)
		p->ts = bpf_ktime_get_ns();
	return XDP_TX;
}

// sfc_gen generates when live-frame mode runs it for cfg.ifindex. It is also attached, in
// generic mode, to the sender's loopback, where it passes everything: live-frame mode is only
// fast while the program it runs is attached somewhere (otherwise every run adds it to and
// removes it from the kernel's XDP dispatcher, an RCU grace period each time).
SEC("xdp")
int sfc_gen(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c || ctx->ingress_ifindex != c->ifindex)
		return XDP_PASS;
	return generate(ctx, c);
}

// sfc_echo sits on the sender's interface and takes the frames a reflector sent back (from
// port to sport): it counts them and hands the RTT of every timestamped one to user space.
SEC("xdp")
int sfc_echo(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c)
		return XDP_PASS;
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	struct payload *p = (void *)(udp + 1);
	if ((void *)(p + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	if (udp->source != bpf_htons(c->port) || udp->dest != bpf_htons(c->sport))
		return XDP_PASS;
	count(p, end - data);
	__u64 ts = p->ts;
	if (ts) {
		struct rtt_event *e = bpf_ringbuf_reserve(&rtts, sizeof(*e), 0);
		if (e) {
			e->seq = bpf_ntohl(p->seq);
			e->pad = 0;
			e->rtt_ns = bpf_ktime_get_ns() - ts;
			bpf_ringbuf_submit(e, 0);
		}
	}
	return XDP_DROP;
}

// sfc_pass passes everything. Attached to a veth it gives the veth a NAPI instance of its
// own (veth only has one with XDP or GRO), which live-frame transmission into it needs and
// which threaded NAPI can move to another CPU.
SEC("xdp")
int sfc_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
