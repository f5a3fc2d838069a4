//! ICRC throughput over 4 KiB-payload RoCEv2 packets, against a plain
//! `crc32fast::hash` over the same bytes (the ICRC adds the masked header copies
//! and a few extra `update` calls).
//!
//! Also the 8-byte SEND of the soft NIC's ping-pong through the generic
//! `compute_reprs` and the IPv4 fast path `compute_ipv4`.
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
            ident: 0x1234,
            ..ipv4::Repr::udp(
                Ipv4Addr::new(192, 168, 100, 2),
                Ipv4Addr::new(192, 168, 100, 1),
                0,
            )
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

    // The per-packet path of the soft NIC's 8-byte ping-pong: a SEND_ONLY
    // with 8 payload bytes, its ICRC from the addressing (the UDP socket
    // hides the headers), through the generic Reprs and the IPv4 fast path.
    let mut small = [0u8; 20];
    small[0] = 0x04; // RC SEND_ONLY
    small[2..4].copy_from_slice(&[0xff, 0xff]);
    small[7] = 0x11;
    let flow = icrc::Ipv4Flow {
        src: Ipv4Addr::new(127, 1, 2, 3),
        dst: Ipv4Addr::new(127, 4, 5, 6),
        sport: 0xc123,
        dport: 4791,
        ident: 0,
        dont_frag: true,
    };
    let (ip, u) = flow.reprs(small.len());
    let mut g = c.benchmark_group("icrc_send_8B");
    g.bench_function("icrc::compute_reprs (baseline)", |b| {
        b.iter(|| icrc::compute_reprs(black_box(&ip), black_box(&u), black_box(&small)))
    });
    g.bench_function("icrc::compute_ipv4", |b| {
        b.iter(|| icrc::compute_ipv4(black_box(&flow), black_box(&small)))
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
