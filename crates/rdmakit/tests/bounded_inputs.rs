//! Inputs without bounds: each attack found with the release build of
//! main, run against the real binary. Each must now end within 10 s with a clear
//! error (exit 2) or a finding, and the memory attacks must leave rdmakit under
//! 500 MB of resident memory (measured by GNU time: crates/testkit's
//! `run_measured`, which fails when `time` is missing).
//!
//! The hostile files are made here, as an attacker would leave them: a FIFO in a
//! capture directory or named by `--from` or `--token-file`, /dev/zero named as
//! an input, a gzip bomb, one host name repeated 50,000 times.

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use rdmakit_testkit::{run_measured, Measured};

/// What an attack may take, from start to exit.
const LIMIT: Duration = Duration::from_secs(10);
/// The most resident memory any input may cost.
const RSS_MB: u64 = 500;

fn cmd(args: &[&str]) -> Command {
    let mut c = bin();
    c.args(args);
    c
}

/// Runs `rdmakit ARGS` under GNU time: fails when it takes LIMIT or more.
fn attack(args: &[&str]) -> Measured {
    let what = format!("rdmakit {}", args.join(" "));
    let t = Instant::now();
    let m = run_measured(&cmd(args), LIMIT, &what);
    assert!(t.elapsed() < LIMIT, "{what}: {:?}", t.elapsed());
    m
}

fn stderr(m: &Measured) -> String {
    text(&m.output.stderr)
}

fn stdout(m: &Measured) -> String {
    text(&m.output.stdout)
}

/// `rdmakit ARGS` ends with exit 2 saying `says`, within LIMIT and RSS_MB.
fn refused(args: &[&str], says: &str) -> Measured {
    let m = attack(args);
    let err = stderr(&m);
    assert_eq!(m.output.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
    m.assert_rss_under(RSS_MB, &args.join(" "));
    m
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo")
        .args(["-m", "600"])
        .arg(p)
        .status()
        .expect("mkfifo runs");
    assert!(st.success(), "mkfifo {}", p.display());
}

/// A copy of fixtures/healthy whose port state file is a FIFO no one writes:
/// every read of it used to block for ever.
fn capture_with_a_fifo(dir: &Path) -> PathBuf {
    let cap = dir.join("cap");
    let st = Command::new("cp")
        .arg("-a")
        .arg(fixture("healthy"))
        .arg(&cap)
        .status()
        .expect("cp runs");
    assert!(st.success());
    let state = cap.join("root/sys/devices/virtual/infiniband/rxe0/ports/1/state");
    std::fs::remove_file(&state).expect("the capture has rxe0's port state");
    mkfifo(&state);
    cap
}

/// The entries of `root`/sys/class/*/ that the repository stores as files
/// holding a link target, made symlinks again (as scripts/cluster/hosttree.py
/// does), so `--root` reads the tree as a host.
fn unflatten_class_links(root: &Path) {
    for class in std::fs::read_dir(root.join("sys/class")).unwrap().flatten() {
        for e in std::fs::read_dir(class.path()).unwrap().flatten() {
            let p = e.path();
            if !std::fs::symlink_metadata(&p).unwrap().file_type().is_file() {
                continue;
            }
            let t = std::fs::read_to_string(&p).unwrap_or_default();
            if t.starts_with("../") && !t.ends_with('\n') {
                std::fs::remove_file(&p).unwrap();
                std::os::unix::fs::symlink(&t, &p).unwrap();
            }
        }
    }
}

#[test]
fn a_fifo_in_a_capture_directory_hangs_no_reader() {
    let d = tempfile::tempdir().unwrap();
    let cap = capture_with_a_fifo(d.path());
    let cap = cap.display().to_string();

    // The doctor: the port state is unreadable, so that check is "not checked".
    let m = attack(&["doctor", "--from", &cap, "--verbose"]);
    assert!(
        matches!(m.output.status.code(), Some(0 | 1)),
        "{}",
        stderr(&m)
    );
    let out = stdout(&m);
    assert!(
        out.contains("not checked  port.state") && out.contains("no port state could be read"),
        "{out}"
    );

    // collect records the FIFO as a read error (EINVAL), not its content.
    let bundle = d.path().join("b.json");
    let m = attack(&[
        "collect",
        "--from",
        &cap,
        "-o",
        &bundle.display().to_string(),
    ]);
    assert_eq!(m.output.status.code(), Some(0), "{}", stderr(&m));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&bundle).unwrap()).unwrap();
    let rec = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "/sys/devices/virtual/infiniband/rxe0/ports/1/state")
        .unwrap_or_else(|| panic!("no record of the FIFO"));
    assert_eq!(rec["error"], "EINVAL", "{rec}");

    let m = attack(&["metrics", "--from", &cap]);
    assert_eq!(m.output.status.code(), Some(0), "{}", stderr(&m));
    assert!(
        stdout(&m).contains("node_infiniband_info"),
        "{}",
        stdout(&m)
    );

    let m = attack(&["fleet", "report", &cap]);
    assert!(
        matches!(m.output.status.code(), Some(0 | 1)),
        "{}",
        stderr(&m)
    );

    // The same tree as a --root (its class entries made the symlinks the
    // capture stores as files): regular files only there too.
    unflatten_class_links(Path::new(&format!("{cap}/root")));
    let m = attack(&["doctor", "--root", &format!("{cap}/root")]);
    assert!(
        matches!(m.output.status.code(), Some(0 | 1)),
        "{}",
        stderr(&m)
    );
}

#[test]
fn from_naming_a_fifo_fails_at_its_deadline_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("bundle.json");
    mkfifo(&f);
    let f = f.display().to_string();
    for args in [
        vec!["doctor", "--from", &f],
        vec!["collect", "--from", &f, "-o", "/dev/null"],
    ] {
        refused(
            &args,
            &format!("{f}: a pipe that did not end within 5 s (0 bytes read)"),
        );
    }
}

#[test]
fn token_file_naming_a_fifo_fails_at_its_deadline_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("token");
    mkfifo(&f);
    let f = f.display().to_string();
    refused(
        &[
            "fleet",
            "agent",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            &f,
        ],
        &format!("token file {f}: a pipe that did not end within 5 s"),
    );
}

#[test]
fn dev_zero_is_refused_by_every_reader() {
    let healthy = fixture("healthy");
    let says = "/dev/zero: a character device, not a regular file or a pipe: refused";
    for args in [
        vec!["doctor", "--from", "/dev/zero"],
        vec!["collect", "--from", "/dev/zero", "-o", "/dev/null"],
        vec!["metrics", "--from", "/dev/zero"],
        vec!["pcap", "/dev/zero"],
        vec!["doctor", "--from", &healthy, "--baseline", "/dev/zero"],
        vec!["fleet", "report", "--expect", "/dev/zero", &healthy],
        vec![
            "fleet",
            "agent",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            "/dev/zero",
        ],
    ] {
        let m = refused(&args, "/dev/zero");
        let err = stderr(&m);
        assert!(
            err.contains(says) || err.contains("a character device, not a regular file or a pipe"),
            "{args:?}: {err}"
        );
        // Refused before reading: nothing near the cap was held.
        m.assert_rss_under(100, &args.join(" "));
    }
    // An input of fleet report: an error entry, the rest still reported.
    let m = attack(&["fleet", "report", "/dev/zero", &healthy]);
    assert_eq!(m.output.status.code(), Some(2), "{}", stderr(&m));
    assert!(stdout(&m).contains(says), "{}", stdout(&m));
    assert!(stdout(&m).contains("1 node"), "{}", stdout(&m));
    // A kernel log named on the command line: refused before anything is
    // read, naming the flag and why (exit 2).
    let m = attack(&[
        "doctor",
        "--from",
        &healthy,
        "--kernel-log",
        "/dev/zero",
        "--verbose",
    ]);
    assert_eq!(m.output.status.code(), Some(2), "{}", stderr(&m));
    assert!(
        stderr(&m).contains("--kernel-log /dev/zero: a character device"),
        "{}",
        stderr(&m)
    );
}

#[test]
fn a_pcap_over_its_cap_is_refused_before_it_is_read() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("huge.pcap");
    // Sparse: 10 GB on no disk, as `pcap /dev/zero` read 10 GB in 30 s.
    std::fs::File::create(&p)
        .unwrap()
        .set_len(10 << 30)
        .unwrap();
    let p = p.display().to_string();
    let m = refused(
        &["pcap", &p],
        &format!("{p} is over 128 MiB (the cap for pcap files)"),
    );
    m.assert_rss_under(100, "pcap of 10 GB");
}

/// A pcap of `frames` RoCE ACK frames of 62 bytes (the smallest RoCE
/// packet: the most frames and records per byte).
fn small_frames_pcap(path: &std::path::Path, frames: usize) {
    let mut pkt = vec![0u8; 12];
    pkt.extend_from_slice(&[0x08, 0x00]);
    pkt.extend_from_slice(&[
        0x45, 0, 0, 48, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    pkt.extend_from_slice(&[0xc3, 0x50, 0x12, 0xb7, 0, 28, 0, 0]);
    pkt.extend_from_slice(&[0x11, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0, 0, 0, 1, 0, 0, 0, 1]);
    pkt.extend_from_slice(&[0; 4]);
    let mut rec = Vec::new();
    for v in [0u32, 0, pkt.len() as u32, pkt.len() as u32] {
        rec.extend_from_slice(&v.to_le_bytes());
    }
    rec.extend_from_slice(&pkt);
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(&0xa1b2_c3d4u32.to_le_bytes()).unwrap();
    f.write_all(&[
        2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0,
    ])
    .unwrap();
    for _ in 0..frames {
        f.write_all(&rec).unwrap();
    }
}

/// The worst a pcap within its cap can do: 127 MiB of the smallest RoCE
/// frames (1.7 M of them), decoded up to the packet budget with `--json`,
/// saying where it stopped and how to decode the rest.
#[test]
fn a_pcap_at_its_cap_of_the_smallest_frames_stays_under_500_mb() {
    let _one = rdmakit_testkit::serial();
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("cap.pcap");
    small_frames_pcap(&p, (127 << 20) / 78);
    let what = "rdmakit pcap --json (127 MiB of 62-byte frames)";
    let m = run_measured(
        &cmd(&["pcap", "--json", &p.display().to_string()]),
        Duration::from_secs(120),
        what,
    );
    let out = stdout(&m);
    let head = &out[..out.len().min(2000)];
    let frames = (127 << 20) / 78;
    assert!(out.contains("\"decoded_frames\": 100000"), "{head}");
    assert!(
        out.contains(&format!("decoded the first 100000 of {frames} frames"))
            && out.contains(&format!("editcap -r FILE part.pcap 100001-{frames}")),
        "{head}"
    );
    // Every frame here has a bad ICRC (all zero): a finding, 1, wins over
    // 3 (frames left undecoded).
    assert_eq!(m.output.status.code(), Some(1), "{}", stderr(&m));
    m.assert_rss_under(RSS_MB, what);
}

/// gzip of `zeros` zero bytes, made once and repeated: gzip members
/// concatenated are one stream.
fn gzip_bomb(members: usize) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&vec![0u8; 1 << 20]).unwrap();
    let one = e.finish().unwrap();
    one.repeat(members)
}

#[test]
fn a_gzip_bomb_stops_at_the_cap() {
    let d = tempfile::tempdir().unwrap();
    // 600 MiB of zeros in about 600 KB, as the 520 KB bomb that reached 597 MB.
    let bomb = gzip_bomb(600);
    assert!(bomb.len() < 1 << 20, "{}", bomb.len());
    let p = d.path().join("bomb.json.gz");
    std::fs::write(&p, &bomb).unwrap();
    let p = p.display().to_string();
    let says = format!("--from {p}: decompresses to over 64 MiB (the cap for bundles)");
    for args in [
        vec!["doctor", "--from", &p],
        vec!["metrics", "--from", &p],
        vec!["collect", "--from", &p, "-o", "/dev/null"],
    ] {
        refused(&args, &says);
    }
    // A fleet input: past one document's cap it can only be JSON lines, and its
    // first "line" is over a report's cap: an error entry naming it.
    let m = attack(&["fleet", "report", &p]);
    assert_eq!(m.output.status.code(), Some(2), "{}", stderr(&m));
    assert!(
        stdout(&m).contains(&format!(
            "{p}:1: longer than 16 MiB (the cap for doctor reports)"
        )),
        "{}",
        stdout(&m)
    );
    m.assert_rss_under(RSS_MB, "fleet report of a gzip bomb");
}

/// One doctor report per line, `n` times, all of host node17.
fn one_host_repeated(dir: &Path, n: usize) -> String {
    let line = r#"{"schema":"rdmakit.doctor/v1","findings":[{"code":"RDK-H010","severity":"warning","layer":"hardware","subject":"mlx5_0 port 1","message":"symbol_error = 12","evidence":[{"path":"/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error","value":"12"}]}],"inventory":{"hostname":"node17","kernel":"6.1.0-57-amd64","rdma_core":"44.0-2","memlock":"unlimited","devices":[{"name":"mlx5_0","kind":"pci","driver":"mlx5_core","fw_ver":"28.39.1002","board_id":"MT_0000000838","hca_type":"MT4129","ports":[{"num":1,"state":"ACTIVE","rate_gbps":400.0,"link_layer":"InfiniBand","counters":{"symbol_error":12}}]}]}}"#;
    let p = dir.join(format!("sweep{n}.jsonl"));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    for _ in 0..n {
        writeln!(f, "{line}").unwrap();
    }
    f.flush().unwrap();
    p.display().to_string()
}

#[test]
fn fleet_report_on_50000_copies_of_one_hostname_is_linear() {
    let d = tempfile::tempdir().unwrap();
    let small = one_host_repeated(d.path(), 1_000);
    let big = one_host_repeated(d.path(), 50_000);

    // Human: one node, one duplicate line; the same size for 1,000 and 50,000
    // copies (main: 19 MB at 1,000, 316 MB at 4,000, OOM-killed at 50,000).
    let m1 = attack(&["fleet", "report", &small]);
    let m50 = attack(&["fleet", "report", &big]);
    for m in [&m1, &m50] {
        assert_eq!(m.output.status.code(), Some(2), "{}", stderr(m));
        m.assert_rss_under(RSS_MB, "fleet report of one host 50,000 times");
    }
    let out = stdout(&m50);
    assert!(out.contains("1 node (0 ok, 1 warning"), "{out}");
    assert!(
        out.contains(&format!(
            "node17 appears in 50000 inputs ({big}:1, {big}:2, {big}:3 and 49996 more); \
             the last read, {big}:50000, was used"
        )),
        "{out}"
    );
    assert_eq!(out.matches("appears in").count(), 2, "{out}");
    let (n1, n50) = (m1.output.stdout.len(), m50.output.stdout.len());
    assert!(n50 < n1 + 200 && n50 < 4_000, "{n1} → {n50} bytes");

    // JSON: one node, one duplicate entry listing every origin once: linear.
    let m1 = attack(&["fleet", "report", "--json", &small]);
    let m50 = attack(&["fleet", "report", "--json", &big]);
    m50.assert_rss_under(RSS_MB, "fleet report --json of one host 50,000 times");
    let v: serde_json::Value = serde_json::from_slice(&m50.output.stdout).unwrap();
    assert_eq!(v["summary"]["nodes"], 1);
    assert_eq!(v["nodes"].as_array().unwrap().len(), 1);
    let dups = v["duplicates"].as_array().unwrap();
    assert_eq!(dups.len(), 1);
    assert_eq!(dups[0]["count"], 50_000);
    assert_eq!(dups[0]["used"], format!("{big}:50000"));
    let (j1, j50) = (m1.output.stdout.len(), m50.output.stdout.len());
    // 50 times the copies: about 50 times the bytes (the origins), never 2,500.
    assert!(j50 < j1 * 60, "{j1} → {j50} bytes");
}

#[test]
fn enoent_is_said_once_by_its_name() {
    for (args, says) in [
        (
            vec!["doctor", "--from", "/nonexistent"],
            "rdmakit: error: --from /nonexistent: ENOENT (No such file or directory): name a \
             bundle written by `rdmakit collect -o FILE`, or a capture directory\n",
        ),
        (
            vec!["pcap", "/nonexistent"],
            "rdmakit: error: /nonexistent: ENOENT (No such file or directory)\n",
        ),
        (
            vec!["fleet", "agent", "--listen", "127.0.0.1:0", "--token-file", "/nonexistent"],
            "rdmakit fleet agent: error: token file /nonexistent: ENOENT (No such file or directory)\n",
        ),
    ] {
        let o = rdmakit(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(text(&o.stderr), says, "{args:?}");
    }
}
