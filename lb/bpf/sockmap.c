// SPDX-License-Identifier: GPL-2.0
//
// sfclab lb sockmap acceleration: an sk_skb stream-verdict program that hands every skb arriving
// on a proxied socket straight to the egress of the connection's other socket, so the balancer
// makes no system call per chunk (accel: sockmap). User space, per connection, after it has
// accepted the client and connected to the backend:
//
//   1. bytes[key(c)] = bytes[key(s)] = 0       counters of what each socket received
//   2. peers[key(c)] = s, peers[key(s)] = c     redirect targets; no program on this map, so a
//                                              socket in it alone is not intercepted
//   3. socks[key(c)] = c, socks[key(s)] = s     the verdict program is attached to this map: from
//                                              here on each socket's bytes go to its peer,
//                                              which step 2 has made findable already
//   4. SO_RCVLOWAT on both                     runs the verdict on bytes queued before step 3
//
// A key is a socket's own 4-tuple as the verdict program sees it: family, local and remote
// address (network byte order, IPv4 in the first word), ports in host byte order.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2

struct sock_key {
	__u32 family;
	__u32 lport;
	__u32 rport;
	__u32 pad;
	__u32 laddr[4];
	__u32 raddr[4];
};

// peers maps a socket's key to the socket its bytes go to. Sizes are set by the loader.
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 8192);
	__type(key, struct sock_key);
	__type(value, __u32);
} peers SEC(".maps");

// socks holds the sockets the verdict program runs on, each under its own key.
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 8192);
	__type(key, struct sock_key);
	__type(value, __u32);
} socks SEC(".maps");

// bytes counts, per socket, the bytes that arrived on it and went to its peer.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sock_key);
	__type(value, __u64);
} bytes SEC(".maps");

SEC("sk_skb/stream_verdict")
int verdict(struct __sk_buff *skb)
{
	struct sock_key k = {};

	// A FIN without data reaches the verdict as an empty skb; sent to the peer it would
	// count as a failed send (0 bytes) and break the peer's pipe (EPIPE, no more redirects).
	// User space passes the FIN on itself (shutdown), once all bytes before it are through.
	if (skb->len == 0)
		return SK_DROP;
	k.family = skb->family;
	k.lport = skb->local_port;
	// remote_port holds the network-order port in its upper half (the kernel shifts it there).
	k.rport = bpf_ntohl(skb->remote_port);
	if (k.family == AF_INET) {
		k.laddr[0] = skb->local_ip4;
		k.raddr[0] = skb->remote_ip4;
	} else {
		k.laddr[0] = skb->local_ip6[0];
		k.laddr[1] = skb->local_ip6[1];
		k.laddr[2] = skb->local_ip6[2];
		k.laddr[3] = skb->local_ip6[3];
		k.raddr[0] = skb->remote_ip6[0];
		k.raddr[1] = skb->remote_ip6[1];
		k.raddr[2] = skb->remote_ip6[2];
		k.raddr[3] = skb->remote_ip6[3];
	}
	__u64 *n = bpf_map_lookup_elem(&bytes, &k);
	if (n)
		__sync_fetch_and_add(n, skb->len);
	// flags 0: to the egress of the peer socket, sent as if written to it.
	return bpf_sk_redirect_hash(skb, &peers, &k, 0);
}

char __license[] SEC("license") = "GPL";
