//! Two processes, each with its own soft device on an auto-picked
//! 127.x.y.z address, doing RC SEND + WRITE + READ over UDP loopback. The
//! parent spawns this test binary again as the child (only the
//! `child_role` test, selected by an environment variable); the two exchange
//! endpoints over the child's stdin/stdout.

use std::io::{BufRead, Write};
use std::process::Command;
use std::time::Duration;

use rdmakit_verbs::{Access, ConnectOpts, Context, DeviceConfig, Endpoint, RemoteBuf, WcStatus};

mod common;

const ROLE: &str = "RDMAKIT_TWO_PROCESS_CHILD";
const T: Duration = Duration::from_secs(20);

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

/// The child side; a no-op unless spawned by the parent test.
#[test]
fn child_role() {
    if std::env::var_os(ROLE).is_none() {
        return;
    }
    let ctx = Context::open_soft(DeviceConfig::default()).unwrap();
    let (pd, cq, qp) = common::rc_qp(&ctx, ConnectOpts::default());
    let buf = pd.alloc_buf(8192, Access::all()).unwrap();
    qp.qp().recv(1, &buf, 0..1024).unwrap();
    qp.qp().recv(2, &buf, 1024..2048).unwrap();
    buf.write(4096, &pattern(0x5a, 100)).unwrap();
    let ep = qp.endpoint().unwrap();
    let r = buf.remote(0);
    println!("@@EP {} {:x} {:x}", ep.to_wire(), r.addr, r.rkey);
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    let peer = Endpoint::from_wire(line.trim().strip_prefix("EP ").unwrap()).unwrap();
    let qp = qp.connect(&peer).unwrap().ready_to_send().unwrap();
    let w = cq.wait(1, T).unwrap();
    assert_eq!(w[0].status, WcStatus::Success);
    assert_eq!(
        buf.to_vec(0..w[0].byte_len as usize).unwrap(),
        b"hello from parent"
    );
    println!("@@READY");
    let w = cq.wait(1, T).unwrap();
    assert_eq!(
        buf.to_vec(1024..1024 + w[0].byte_len as usize).unwrap(),
        b"done"
    );
    assert_eq!(buf.to_vec(2048..2148).unwrap(), pattern(0xa5, 100));
    println!("@@CHILD-OK {}", ctx.query_gid(1, 0).unwrap());
    drop(qp);
}

#[test]
fn rc_send_write_read_between_two_processes_over_udp_loopback() {
    let (mut child, mut stdin, rx) = common::spawn_child(ROLE, "1");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let next = || rx.recv_timeout(T).expect("child went silent");
        let ctx = Context::open_soft(DeviceConfig::default()).unwrap();
        let (pd, cq, qp) = common::rc_qp(&ctx, ConnectOpts::default());
        let (peer, remote) = common::parse_ep(&next());
        let me = qp.endpoint().unwrap();
        // One device for the host: the same GID in both processes, the QPN
        // tells the QPs apart (issue 20).
        assert_eq!(me.gid, peer.gid, "one GID table for every process");
        assert_ne!(me.qpn, peer.qpn);
        assert_eq!(
            peer.gid.to_ipv4(),
            Some(rdmakit_soft::net::host_device_addr())
        );
        writeln!(stdin, "EP {}", me.to_wire()).unwrap();
        stdin.flush().unwrap();
        let qp = qp.connect(&peer).unwrap().ready_to_send().unwrap();
        let buf = pd.alloc_buf(8192, Access::all()).unwrap();
        buf.write(0, b"hello from parent").unwrap();
        qp.send(1, &buf, 0..17).unwrap();
        assert_eq!(cq.wait(1, T).unwrap()[0].status, WcStatus::Success);
        assert_eq!(next(), "READY");
        buf.write(1000, &pattern(0xa5, 100)).unwrap();
        qp.write(
            2,
            &buf,
            1000..1100,
            RemoteBuf {
                addr: remote.addr + 2048,
                ..remote
            },
        )
        .unwrap();
        qp.read(
            3,
            &buf,
            3000..3100,
            RemoteBuf {
                addr: remote.addr + 4096,
                ..remote
            },
        )
        .unwrap();
        let w = cq.wait(2, T).unwrap();
        assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
        assert_eq!(buf.to_vec(3000..3100).unwrap(), pattern(0x5a, 100));
        buf.write(0, b"done").unwrap();
        qp.send(4, &buf, 0..4).unwrap();
        assert_eq!(cq.wait(1, T).unwrap()[0].status, WcStatus::Success);
        assert!(next().starts_with("CHILD-OK"));
    }));
    if result.is_err() {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    assert!(status.success(), "child failed: {status}");
}

const ENV_ROLE: &str = "RDMAKIT_ENV_ADDR_CHILD";

/// Child of `rdmakit_soft_addr_env_selects_the_address`; a no-op otherwise.
#[test]
fn env_child_role() {
    if std::env::var_os(ENV_ROLE).is_none() {
        return;
    }
    // A program's edge: the environment configures its soft NIC.
    let ctx = Context::open_soft(DeviceConfig::from_env().unwrap()).unwrap();
    println!(
        "@@GID {} {}",
        ctx.name(),
        ctx.query_gid(1, 0).unwrap().to_ipv4().unwrap()
    );
}

#[test]
fn rdmakit_soft_addr_env_selects_the_address() {
    let pid = std::process::id();
    let addr = format!("127.201.{}.{}", (pid >> 8) as u8, (pid as u8).max(1));
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "env_child_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ENV_ROLE, "1")
        .env("RDMAKIT_SOFT_ADDR", &addr)
        .env("RDMAKIT_SOFT_NAME", "soft7")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.find("@@GID ").map(|i| &l[i + 6..]))
        .unwrap();
    assert_eq!(line, format!("soft7 {addr}"));
}
