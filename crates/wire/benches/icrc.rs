//! ICRC throughput over 4 KiB-payload RoCEv2 packets, against a plain
//! `crc32fast::hash` over the same bytes (the ICRC adds the masked header copies
//! and a few extra `update` calls).
//!
//! `cargo bench -p rdmakit-wire --bench icrc`

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rdmakit_wire::frame::{Datagram, IpRepr, UdpChecksum};
use rdmakit_wire::opcode::OpCode;
use rdmakit_wire::{icrc, ipv4, reth, roce, udp};

/// An IPv4 RC RDMA_WRITE_ONLY with a 4096-byte payload, ICRC included.
fn packet() -> Vec<u8> {
    let payload: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let d = Datagram {
        ip: IpRepr::Ipv4(ipv4::Repr {
            src_addr: Ipv4Addr::new(192, 168, 100, 2),
            dst_addr: Ipv4Addr::new(192, 168, 100, 1),
            next_header: 17,
            payload_len: 0,
            hop_limit: 64,
            dscp_ecn: 0,
            ident: 0x1234,
            dont_frag: true,
        }),
        udp: udp::Repr {
            src_port: 0xc123,
            dst_port: 4791,
            payload_len: 0,
        },
        udp_checksum: UdpChecksum::None,
        roce: roce::Repr {
            reth: Some(reth::Repr {
                va: 0x5576_8b60_0000,
                rkey: 0x4d6,
                dma_len: 4096,
            }),
            payload: &payload,
            ..roce::Repr::new(OpCode::RC_RDMA_WRITE_ONLY, 0x13, 1)
        },
    };
    let mut buf = vec![0; d.buffer_len()];
    d.emit(&mut buf).expect("a valid packet");
    buf
}

fn bench(c: &mut Criterion) {
    let pkt = packet();
    let mut g = c.benchmark_group("icrc_4k");
    g.throughput(Throughput::Bytes(pkt.len() as u64));
    g.bench_function("icrc::compute", |b| {
        b.iter(|| icrc::compute(black_box(&pkt)))
    });
    g.bench_function("icrc::verify", |b| b.iter(|| icrc::verify(black_box(&pkt))));
    g.bench_function("crc32fast::hash (baseline)", |b| {
        b.iter(|| crc32fast::hash(black_box(&pkt)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
