// SPDX-License-Identifier: GPL-2.0 OR MIT
//
// uwarp's XDP program for an interface the kernel keeps (AF_XDP beside
// the kernel's own stack). It hands uwarp's TCP segments to the AF_XDP
// socket bound to the receive queue they came in on, and everything else
// to the kernel: ARP, ICMP, the kernel's own TCP connections, every
// other protocol and port, and uwarp's ports on a queue without a socket.
//
// uwarp's segments are the IPv4 TCP segments to uwarp's address on the
// interface (`uwarp_addr`) whose destination port is a key of
// `uwarp_ports`, which the uwarp process fills and empties as it listens
// and opens connections (a port it holds in the kernel too, with a bound
// socket, so that the kernel's TCP never takes it). Segments to the
// interface's other addresses, or to addresses routed through it, are
// the kernel's whatever their port. The maps are not pinned: each load
// has its own, found through the program attached to the interface.
//
// The Ethernet destination is not checked: a frame to another MAC address
// reaches the program only where the interface is promiscuous, and the
// kernel would drop it as not its own as uwarp does (its TCP takes only
// frames to the interface's MAC address), so steering it takes nothing
// from the kernel.
//
// The DPDK af_xdp driver loads this object (its `xdp_prog` argument),
// puts its sockets into `xsks_map` by queue index and attaches the
// program to the interface.
//
// Built by the uwarp-dataplane crate's build.rs with clang's BPF target.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

// The AF_XDP sockets, by receive queue index (the name the DPDK driver
// looks for).
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

// uwarp's TCP ports, in host order; the value is unused.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u16);
	__type(value, __u8);
} uwarp_ports SEC(".maps");

// uwarp's IPv4 address on the interface, in network order, at index 0.
// The process that owns the port sets it as it finds the map, before it
// adds any port; until then it is 0, and no port is in `uwarp_ports`.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __be32);
} uwarp_addr SEC(".maps");

SEC("xdp")
int uwarp_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;

	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_TCP || ip->ihl < 5)
		return XDP_PASS;
	// A fragment other than the first has no TCP header where it would be.
	if (ip->frag_off & bpf_htons(0x1fff))
		return XDP_PASS;

	struct tcphdr *tcp = (void *)ip + ip->ihl * 4;
	if ((void *)(tcp + 1) > end)
		return XDP_PASS;

	__u32 index = 0;
	__be32 *addr = bpf_map_lookup_elem(&uwarp_addr, &index);
	// The lookup of an array's index 0 never fails; the verifier wants
	// the check.
	if (!addr || ip->daddr != *addr)
		return XDP_PASS;

	__u16 port = bpf_ntohs(tcp->dest);
	if (!bpf_map_lookup_elem(&uwarp_ports, &port))
		return XDP_PASS;
	// XDP_PASS when no socket is bound to this queue.
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "Dual MIT/GPL";
