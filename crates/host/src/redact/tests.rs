//! The real healthy capture with what a production host adds to it (a host name,
//! DMI serials, a ConnectX-style VPD, a PCI config space with a Device Serial
//! Number, /proc/net files, a kernel log naming them): every identifier goes, in
//! every form, and what the collectors read keeps its meaning.

use std::path::Path;

use super::*;
use crate::collect::{collect, CollectOptions};
use crate::source::Source;

const HOST: &str = "gpu-node17.cluster.example.org";
const SERIAL: &str = "MT2033X12345";
const DMI_SERIAL: &str = "CZ2049ABCD";
const UUID: &str = "4c4c4544-0051-3510-8057-b3c04f4e3132";
const BOOT_ID: &str = "fbcc2b86-4c9b-4d1e-9c58-0f4b2a3e5d71";
const DSN: u64 = 0x0002_c903_00a1_b2c3;
const PEER_V4: &str = "10.0.2.77";

fn rich_bundle() -> Bundle {
    let cap = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/healthy");
    let mut b = crate::capture::import_capture(&cap).expect("fixtures/healthy");
    b.write_file("/proc/sys/kernel/hostname", format!("{HOST}\n").as_bytes());
    b.write_file("/etc/hostname", b"gpu-node17\n");
    b.write_file(
        "/proc/sys/kernel/random/boot_id",
        format!("{BOOT_ID}\n").as_bytes(),
    );
    b.write_file(
        "/sys/devices/virtual/infiniband/rxe0/node_desc",
        b"gpu-node17 rxe0\n",
    );
    b.write_file(
        "/sys/class/dmi/id/product_serial",
        format!("{DMI_SERIAL}\n").as_bytes(),
    );
    b.write_file(
        "/sys/class/dmi/id/product_uuid",
        format!("{UUID}\n").as_bytes(),
    );
    b.write_file("/sys/class/dmi/id/chassis_serial", b"Not Specified\n");
    let pci = "/sys/devices/pci0000:00/0000:00:03.0";
    b.write_file(&format!("{pci}/vpd"), &vpd());
    b.write_file(&format!("{pci}/config"), &config());
    b.write_file(
        "/proc/net/route",
        b"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
          eth0\t00000000\t0202000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
          eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n",
    );
    b.write_file(
        "/proc/net/arp",
        format!(
            "IP address       HW type     Flags       HW address            Mask     Device\n\
             {PEER_V4:<16} 0x1         0x2         52:54:00:aa:bb:cc     *        eth0\n"
        )
        .as_bytes(),
    );
    b.write_file(
        "/proc/net/if_inet6",
        b"fe80000000000000505400fffe123456 02 40 20 80     eth0\n",
    );
    b.write_file(
        "/proc/net/tcp",
        b"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
          0: 0F02000A:4A3D 4D02000A:0016 01 00000000:00000000 00:00000000 00000000     0        0 1\n",
    );
    let mut kmsg = match b.get(Op::Probe, "kmsg") {
        Some(Answer::Data(d)) => d.clone(),
        _ => panic!("fixtures/healthy has a kernel log"),
    };
    kmsg.extend_from_slice(
        format!(
            "6,900,1000,-;mlx5_core 0000:00:03.0: serial {SERIAL}, board {DSN:#018x}\n\
             6,901,1001,-;IPv4: martian source {PEER_V4} from 10.0.2.15, on dev eth0 (52:54:00:12:34:56)\n\
             6,902,1002,-;systemd[1]: Hostname set to <{HOST}>.\n"
        )
        .as_bytes(),
    );
    b.set(Op::Probe, "kmsg", Answer::Data(kmsg));
    b
}

/// A VPD as ConnectX adapters carry one: the product name, then PN, EC, SN, V3
/// in VPD-R, the RV checksum, the end tag.
fn vpd() -> Vec<u8> {
    vpd_of(
        b"ConnectX-6 Dx   ",
        &[
            (b"PN", b"MCX623106AN-CDAT"),
            (b"EC", b"A6"),
            (b"SN", SERIAL.as_bytes()),
            (b"V3", b"8a6c3a2f1e0b4d9a"),
        ],
    )
}

/// A VPD image: the ID string `id`, then VPD-R with `fields` (keyword, value)
/// and its RV checksum, then the end tag.
pub(super) fn vpd_of(id: &[u8], fields: &[(&[u8; 2], &[u8])]) -> Vec<u8> {
    let mut b = vec![0x82];
    b.extend_from_slice(&(id.len() as u16).to_le_bytes());
    b.extend_from_slice(id);
    let mut r = Vec::new();
    for (kw, v) in fields {
        r.extend_from_slice(&kw[..]);
        r.push(v.len() as u8);
        r.extend_from_slice(v);
    }
    r.extend_from_slice(b"RV\x01\x00");
    b.push(0x90);
    b.extend_from_slice(&(r.len() as u16).to_le_bytes());
    b.extend_from_slice(&r);
    b.push(0x78);
    let at = b.len() - 2;
    let sum = b[..at].iter().fold(0u8, |s, x| s.wrapping_add(*x));
    b[at] = 0u8.wrapping_sub(sum);
    b
}

fn config() -> Vec<u8> {
    let mut c = vec![0u8; 0x1000];
    c[..4].copy_from_slice(&[0xb3, 0x15, 0x1d, 0x10]);
    c[0x100..0x104].copy_from_slice(&(3u32 | (1 << 16)).to_le_bytes());
    c[0x104..0x108].copy_from_slice(&(DSN as u32).to_le_bytes());
    c[0x108..0x10c].copy_from_slice(&((DSN >> 32) as u32).to_le_bytes());
    c
}

/// Every byte of the bundle as written, and of every record (paths, data).
fn all_bytes(b: &Bundle) -> Vec<u8> {
    let mut all = b.to_json();
    for (op, path) in b.keys() {
        all.extend_from_slice(path.as_bytes());
        if let Some(Answer::Data(d)) = b.get(op, &path) {
            all.extend_from_slice(d);
        }
    }
    all
}

fn has(hay: &[u8], needle: &[u8]) -> bool {
    let hay = hay.to_ascii_lowercase();
    let needle = needle.to_ascii_lowercase();
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn every_identifier_goes_in_every_form() {
    let orig = rich_bundle();
    let r = redact(&orig);
    let before = all_bytes(&orig);
    let after = all_bytes(&r.bundle);
    let text: &[&str] = &[
        HOST,
        "gpu-node17",
        SERIAL,
        DMI_SERIAL,
        UUID,
        BOOT_ID,
        "8a6c3a2f1e0b4d9a",
        PEER_V4,
        "10.0.2.15",
        "0F02000A",
        "4D02000A",
        "52:54:00:12:34:56",
        "52:54:00:aa:bb:cc",
        "5054:00ff:fe12:3456",
        "505400fffe123456",
        "0x0002c90300a1b2c3",
        "0000:0000:0000:0000:0000:ffff:0a00:020f",
    ];
    for t in text {
        assert!(
            has(&before, t.as_bytes()),
            "{t} is not in the original: the test is wrong"
        );
        assert!(!has(&after, t.as_bytes()), "{t} survived redaction");
    }
    // The netlink replies carry the node GUID (host order); the config space
    // the DSN (lower dword first).
    let bytes: &[&[u8]] = &[
        &0x5054_00ff_fe12_3456u64.to_le_bytes(),
        &(DSN as u32).to_le_bytes(),
    ];
    for b in bytes {
        assert!(
            before.windows(b.len()).any(|w| w == *b),
            "{b:02x?} not in the original"
        );
        assert!(
            !after.windows(b.len()).any(|w| w == *b),
            "{b:02x?} survived"
        );
    }
    let c = r.counts;
    assert_eq!((c.hostnames, c.serials, c.board_ids), (2, 5, 0), "{c:?}");
    assert!(c.macs >= 2 && c.guids >= 2 && c.ipv4 >= 1, "{c:?}");
    // The masks, the header line and the placeholder texts are left alone.
    let route = r.bundle.get(Op::Read, "/proc/net/route");
    let Some(Answer::Data(route)) = route else {
        panic!("route gone")
    };
    let route = String::from_utf8_lossy(route);
    assert!(
        route.contains("\t00FFFFFF\t") && route.starts_with("Iface\tDestination"),
        "{route}"
    );
    assert!(has(&after, b"Not Specified"));
}

#[test]
fn the_collectors_read_the_same_facts_with_placeholders() {
    let orig = rich_bundle();
    let r = redact(&orig);
    let opts = CollectOptions::default();
    let (a, b) = (collect(&orig, &opts), collect(&r.bundle, &opts));
    assert_eq!(a.devices.len(), b.devices.len());
    let (da, db) = (&a.devices[0], &b.devices[0]);
    assert_eq!(da.name, db.name);
    let (pa, pb) = (&da.ports[0], &db.ports[0]);
    assert_eq!(pa.state.get(), pb.state.get());
    assert_eq!(pa.gids.len(), pb.gids.len());
    for (ga, gb) in pa.gids.iter().zip(&pb.gids) {
        assert_eq!(ga.index, gb.index);
        assert_eq!(ga.gid_type.get(), gb.gid_type.get());
        assert_eq!(
            ga.gid.to_ipv4_mapped().is_some(),
            gb.gid.to_ipv4_mapped().is_some()
        );
        let ll = |g: &std::net::Ipv6Addr| g.segments()[0] & 0xffc0 == 0xfe80;
        assert_eq!(ll(&ga.gid), ll(&gb.gid), "{} {}", ga.gid, gb.gid);
        assert_eq!(ga.gid.is_unspecified(), gb.gid.is_unspecified());
    }
    // The node GUID's placeholder is the link-local GID's interface id, as the
    // originals were one another's: consistency, not just absence.
    let guid = db.node_guid.get().copied().unwrap();
    let ll = pb
        .gids
        .iter()
        .find(|g| g.gid.segments()[0] == 0xfe80)
        .unwrap();
    assert_eq!(
        u64::from_be_bytes(ll.gid.octets()[8..].try_into().unwrap()),
        guid
    );
    assert_eq!(
        b.node
            .hostname
            .best()
            .map(|(h, _)| h.to_string())
            .as_deref(),
        Some("host1.example.invalid")
    );
    // The binary answers keep their length.
    for (op, path) in orig.keys() {
        if let (Some(Answer::Data(x)), Some(Answer::Data(y))) =
            (orig.get(op, &path), r.bundle.get(op, &path))
        {
            if op == Op::Probe && path.starts_with("netlink:")
                || path.ends_with("/vpd")
                || path.ends_with("/config")
            {
                assert_eq!(x.len(), y.len(), "{path}");
            }
        }
    }
    assert!(r
        .bundle
        .read("/sys/devices/pci0000:00/0000:00:03.0/vpd")
        .is_ok());
}

proptest::proptest! {
    /// Any bytes, under any of the paths that get special handling: no panic,
    /// and binary answers keep their length.
    #[test]
    fn garbage_never_panics_and_binary_keeps_its_length(
        data in proptest::collection::vec(proptest::num::u8::ANY, 0..600),
        which in 0usize..6,
    ) {
        let (op, path) = [
            (Op::Probe, "netlink:10000000011401030000000000000000"),
            (Op::Read, "/sys/devices/pci0000:00/0000:00:03.0/vpd"),
            (Op::Read, "/sys/devices/pci0000:00/0000:00:03.0/config"),
            (Op::Read, "/proc/net/tcp6"),
            (Op::Read, "/proc/sys/kernel/hostname"),
            (Op::Probe, "kmsg"),
        ][which];
        let mut b = Bundle::new(Bundle::header_now("t", Default::default()), Default::default());
        b.set(op, path, Answer::Data(data.clone()));
        // A netlink-shaped prefix makes the walker go deeper than random bytes do.
        let mut nl = ((16 + data.len()) as u32).to_ne_bytes().to_vec();
        nl.extend_from_slice(&((5u16 << 10) | 11).to_ne_bytes());
        nl.extend_from_slice(&[0; 10]);
        nl.extend_from_slice(&data);
        b.set(Op::Probe, "netlink:00", Answer::Data(nl.clone()));
        let r = redact(&b);
        if let Some(Answer::Data(d)) = r.bundle.get(Op::Probe, "netlink:00") {
            proptest::prop_assert_eq!(d.len(), nl.len());
        }
        if which < 3 {
            let Some(Answer::Data(d)) = r.bundle.get(op, path) else {
                return Err(proptest::test_runner::TestCaseError::fail("record gone"));
            };
            proptest::prop_assert_eq!(d.len(), data.len());
        }
    }
}
