//! Bundles and frames carry no secrets. A token in the environment of
//! the collecting process and of a Slurm step's process above it (a fake
//! `slurmstepd: [12.0]` whose environment and command line hold them) must not
//! reach a bundle (`rdmakit collect`), a sweep's frames (`doctor --frame
//! --frame-bundle`) or the health check's output: not one occurrence, searched in
//! the raw bytes, the decompressed JSON and every record's decoded content.

mod common;

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Output};

use common::*;
use rdmakit_fleet::slurm::frame::{self, Line};
use rdmakit_host::bundle::Bundle;

/// Secrets that differ on every run, so no other byte on the host matches them.
fn secrets() -> Vec<(&'static str, String)> {
    let nonce = format!(
        "{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    vec![
        ("RDMAKIT_PAIRWISE_TOKEN", format!("pairwise-{nonce}")),
        ("RDMAKIT_FLEET_TOKEN", format!("fleet-{nonce}")),
        ("AWS_SECRET_ACCESS_KEY", format!("aws-{nonce}")),
    ]
}

/// Runs rdmakit ARGS under a fake step: bash renamed `slurmstepd: [12.0]` (with
/// `exec -a`), holding the secrets and SLURM_CONF in its environment; its child
/// rdmakit inherits the secrets but not SLURM_CONF, which it must find in the
/// step's environment (as under a real slurmstepd).
fn under_fake_step(
    dir: &Path,
    args: &[&str],
    secrets: &[(&str, String)],
    extra: &[(&str, &str)],
) -> Output {
    let step = dir.join("fake-step");
    rdmakit_testkit::write_script(
        &step,
        "#!/bin/bash\n# argv[0] becomes slurmstepd's; the command after rdmakit keeps bash\n\
         # alive as its parent.\n\
         exec -a 'slurmstepd: [12.0]' /bin/bash -c 'env -u SLURM_CONF \"$@\"; rc=$?; exit $rc' sh \"$@\"\n",
    );
    let mut c = Command::new(&step);
    c.arg(env!("CARGO_BIN_EXE_rdmakit")).args(args);
    c.env("NO_COLOR", "1")
        .env("SLURM_CONF", dir.join("slurm.conf"));
    for (k, v) in secrets {
        c.env(k, v);
    }
    for (k, v) in extra {
        c.env(k, v);
    }
    c.output().expect("the fake step runs")
}

/// Every byte sequence a reader of `blob` could see: the bytes, gunzipped when
/// gzip, and when it is a bundle every record's content decoded.
fn readable(blob: &[u8]) -> Vec<u8> {
    let mut all = blob.to_vec();
    let json = if blob.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(blob)
            .read_to_end(&mut out)
            .expect("gzip");
        all.extend_from_slice(&out);
        out
    } else {
        blob.to_vec()
    };
    if let Ok(b) = Bundle::from_bytes("under test", &json) {
        for (op, path) in b.keys() {
            if let Some(rdmakit_host::source::Answer::Data(d)) = b.get(op, &path) {
                all.extend_from_slice(d);
            }
        }
    }
    all
}

fn assert_no_secret(what: &str, bytes: &[u8], secrets: &[(&str, String)]) {
    for (name, value) in secrets {
        assert!(
            !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
            "{what}: the value of {name} leaked"
        );
    }
}

#[test]
fn a_live_bundle_carries_no_secret_of_the_collector_or_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s = secrets();
    let out = d.join("live.json.gz");
    let o = under_fake_step(d, &["collect", "-o", out.to_str().unwrap()], &s, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let blob = std::fs::read(&out).unwrap();
    let all = readable(&blob);
    // It is a real collection of this host (its /proc was read)...
    let b = Bundle::from_bytes("live", &readable_json(&blob)).unwrap();
    assert!(
        b.keys().iter().any(|(_, p)| p == "/proc/self/limits"),
        "not a live collection"
    );
    // ... and holds none of the secrets, in any form.
    assert_no_secret("bundle", &all, &s);
    assert_no_secret(
        "collect's stdout/stderr",
        &[o.stdout, o.stderr].concat(),
        &s,
    );
}

fn readable_json(blob: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(blob)
        .read_to_end(&mut out)
        .expect("gzip");
    out
}

#[test]
fn sweep_frames_carry_no_secret_of_the_collector_or_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s = secrets();
    let o = under_fake_step(
        d,
        &["doctor", "--frame", "--frame-bundle", "--no-probe"],
        &s,
        &[("SLURMD_NODENAME", "n3")],
    );
    let stdout = text(&o.stdout);
    // Both frames arrived whole (report, bundle) and decode.
    let mut payloads: Vec<Vec<u8>> = Vec::new();
    let mut open: Option<(u64, String, usize)> = None;
    for l in stdout.lines() {
        match (frame::classify(l), open.as_mut()) {
            (Line::Begin { bytes, .. }, None) => open = Some((bytes, String::new(), 0)),
            (Line::End { lines, .. }, Some(_)) => {
                let (bytes, body, got) = open.take().unwrap();
                payloads.push(frame::decode(&body, got, lines, bytes).unwrap());
            }
            (Line::Other(b), Some(o)) => {
                o.1.push_str(b);
                o.2 += 1;
            }
            _ => {}
        }
    }
    assert_eq!(payloads.len(), 2, "{stdout}");
    let mut all = o.stdout.clone();
    all.extend_from_slice(&o.stderr);
    for p in &payloads {
        all.extend(readable(p));
    }
    assert!(
        all.windows(b"/proc/self/limits".len())
            .any(|w| w == b"/proc/self/limits"),
        "the bundle frame is not a live collection"
    );
    assert_no_secret("frames", &all, &s);
}

/// The health check reads the processes above it (for SLURM_CONF); its output
/// names the slurm.conf it found there, and nothing else of their environment.
#[test]
fn the_health_check_reads_only_slurm_conf_of_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s = secrets();
    rdmakit_testkit::write_script(
        &d.join("scontrol"),
        "#!/bin/sh\necho 'slurm_load_node error: Unable to contact slurm controller' >&2\nexit 1\n",
    );
    let path = format!("{}:/usr/bin:/bin", d.display());
    let cap = fixture("healthy");
    let o = under_fake_step(
        d,
        &[
            "doctor",
            "--from",
            &cap,
            "--slurm-health-check",
            "--dry-run",
        ],
        &s,
        &[("PATH", &path), ("SLURMD_NODENAME", "n3")],
    );
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{out}");
    // It found SLURM_CONF in the step's environment (its own had none) ...
    assert!(
        out.contains("slurm.conf (slurmstepd: [12.0] (pid ") && out.contains(") has SLURM_CONF)"),
        "{out}"
    );
    assert_no_secret("health check output", &[o.stdout, o.stderr].concat(), &s);
}

/// Root's `collect -o` in a directory another user controls: a symlink planted
/// there does not make root write through it (the target keeps its bytes), and a
/// file of that user does not receive the bundle (it would be theirs to read).
#[test]
fn collect_output_is_not_redirected_by_another_user() {
    let Some(mut ln) = rdmakit_testkit::as_attacker("ln") else {
        return;
    };
    let target_dir = tempfile::tempdir().unwrap();
    let target = target_dir.path().join("precious");
    std::fs::write(&target, "root's file\n").unwrap();
    let attacker = rdmakit_testkit::attacker_dir();
    let link = attacker.path().join("node17.json.gz");
    let st = ln.arg("-s").arg(&target).arg(&link).status().unwrap();
    assert!(st.success());
    let cap = fixture("healthy");
    let o = rdmakit(&["collect", "--from", &cap, "-o", link.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("refusing to write there: it is a symbolic link"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "root's file\n");

    let theirs = attacker.path().join("theirs.json");
    let mut touch = rdmakit_testkit::as_attacker("touch").unwrap();
    assert!(touch.arg(&theirs).status().unwrap().success());
    let o = rdmakit(&["collect", "--from", &cap, "-o", theirs.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("belongs to uid 65534"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(
        std::fs::metadata(&theirs).unwrap().len(),
        0,
        "the bundle went to their file"
    );

    // In a directory of ours the bundle is written, readable by its owner alone.
    let ours = target_dir.path().join("ours.json.gz");
    let o = rdmakit(&["collect", "--from", &cap, "-o", ours.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    use std::os::unix::fs::MetadataExt as _;
    assert_eq!(std::fs::metadata(&ours).unwrap().mode() & 0o777, 0o600);
}
