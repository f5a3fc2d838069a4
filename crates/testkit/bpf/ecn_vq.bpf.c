// SPDX-License-Identifier: GPL-2.0
// testkit::ecn's ECN marker: a tc clsact egress program on the router's
// interface toward the receiver (it runs before the HTB enqueue). It keeps a
// "virtual queue": a byte backlog that drains at the bottleneck rate and is
// capped at the bfifo limit (a packet that would overflow it is one the real
// bfifo tail-drops). While the backlog is over K bytes, ECT(0) and ECT(1)
// packets become CE, with the IPv4 header checksum fixed; Not-ECT and CE
// packets are never touched. The kernel this runs on has no qdisc that marks
// (no red, codel, fq_codel, pie), and BPF cannot read a qdisc's occupancy:
// hence the model (crates/testkit/src/ecn/mod.rs explains the choice).
//
// Built per dumbbell by testkit (clang-14 -O2 -g -target bpf
// -I/usr/include/x86_64-linux-gnu -DRATE_BPS=.. -DK_BYTES=.. -DLIMIT_BYTES=..);
// the counters in `vq` are read with bpftool by field name (BTF), so names
// here are the parser's (src/ecn/stats.rs, MarkerStats).
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <stddef.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef RATE_BPS
#error "RATE_BPS (the bottleneck rate in bit/s) must be defined"
#endif
#ifndef K_BYTES
#error "K_BYTES (the marking threshold) must be defined"
#endif
#ifndef LIMIT_BYTES
#error "LIMIT_BYTES (the bfifo limit) must be defined"
#endif

struct vq {
	struct bpf_spin_lock lock;
	__u64 last_ns;      /* when the backlog was last drained */
	__u64 backlog;      /* the model's backlog in bytes, after the last packet */
	__u64 peak_backlog; /* its largest value */
	__u64 seen;         /* every packet through the egress hook */
	__u64 model_drops;  /* packets the model would have tail-dropped */
	__u64 marked;       /* ECT(0)/ECT(1) packets rewritten to CE */
	__u64 mark_failed;  /* rewrites the kernel refused */
	__u64 notect_over;  /* Not-ECT IPv4 packets seen while over K (left alone) */
	__u64 ce_in;        /* IPv4 packets that arrived already CE */
	/* Per sender, by the third byte of the IPv4 source (sender i is
	 * 10.77.i.2; 0 and 5..7 take anything else, masked to 0..7): bytes and
	 * packets offered to the bottleneck, dropped or not. A flow's rate. */
	__u64 src_bytes[8];
	__u64 src_packets[8];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct vq);
} vqmap SEC(".maps");

SEC("tc")
int ecn_vq(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	int ipv4 = (void *)(eth + 1) <= end && eth->h_proto == bpf_htons(ETH_P_IP) &&
		   (void *)(ip + 1) <= end;
	__u8 vihl = 0, tos = 0, src = 0;
	if (ipv4) {
		vihl = *(__u8 *)ip;
		tos = ip->tos;
		src = ((__u8 *)&ip->saddr)[2] & 7;
	}
	__u32 k = 0;
	struct vq *v = bpf_map_lookup_elem(&vqmap, &k);
	if (!v)
		return TC_ACT_OK;
	__u64 now = bpf_ktime_get_ns(), len = skb->len, b;
	int mark = 0;
	bpf_spin_lock(&v->lock);
	__u64 dt = now - v->last_ns;
	if (dt > 1000000000ULL) /* idle for over a second: empty anyway, and no overflow */
		dt = 1000000000ULL;
	__u64 drained = dt * (RATE_BPS / 8) / 1000000000ULL;
	b = v->backlog > drained ? v->backlog - drained : 0;
	v->last_ns = now;
	if (b + len <= LIMIT_BYTES) /* the real bfifo accepts it */
		b += len;
	else
		v->model_drops++;
	v->backlog = b;
	if (b > v->peak_backlog)
		v->peak_backlog = b;
	v->seen++;
	v->src_bytes[src] += len;
	v->src_packets[src]++;
	if (ipv4) {
		if ((tos & 3) == 3)
			v->ce_in++;
		else if (b > K_BYTES && (tos & 3) == 0)
			v->notect_over++;
		else if (b > K_BYTES) {
			v->marked++;
			mark = 1;
		}
	}
	bpf_spin_unlock(&v->lock);
	if (!mark)
		return TC_ACT_OK;
	__u8 ntos = tos | 3;
	/* The checksum covers the 16-bit word (version/IHL, TOS). */
	__u16 oldw = bpf_htons(((__u16)vihl << 8) | tos);
	__u16 neww = bpf_htons(((__u16)vihl << 8) | ntos);
	if (bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), oldw, neww, 2) ||
	    bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct iphdr, tos), &ntos, 1, 0)) {
		v = bpf_map_lookup_elem(&vqmap, &k); /* the helpers may have moved the packet */
		if (v)
			__sync_fetch_and_add(&v->mark_failed, 1);
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
