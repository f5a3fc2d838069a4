//! Running unmodified rdma_cm programs on rdmakit's librdmacm.so.1 and
//! libibverbs.so.1.
//!
//! The programs come from Debian packages (rdmacm-utils, qperf,
//! libfabric-bin; scripts/test installs them). Without one a test skips,
//! saying so, unless `RDMAKIT_REQUIRE_RDMACM_TOOLS=1` (scripts/test sets it)
//! turns that into a failure.
//!
//! Every test binary gets its own soft NIC registry directory, so the
//! rdma_cm port table its programs share is theirs alone (two test runs at
//! once never see each other's listeners).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

fn profile_dir() -> PathBuf {
    // target/<profile>/deps/<test> → target/<profile>
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// A directory laid out as `rdmakit shim install` does: libibverbs.so.1,
/// librdmacm.so.1, and libmlx5.so.1 / libefa.so.1 links.
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let profile = profile_dir();
        let exe = std::env::current_exe().unwrap();
        let name = exe.file_stem().unwrap().to_string_lossy().into_owned();
        let dir = profile.join("rdmacm-test-lib").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for (built, as_) in [
            ("libibverbs.so", "libibverbs.so.1"),
            ("librdmacm.so", "librdmacm.so.1"),
        ] {
            let lib = profile.join(built);
            assert!(
                lib.exists(),
                "{} was not built: `cargo test` does not build a cdylib nothing links; run \
                 `cargo build -p rdmakit-ibverbs-shim -p rdmakit-rdmacm-shim` first (scripts/test \
                 builds the workspace)",
                lib.display()
            );
            std::fs::copy(&lib, dir.join(as_)).unwrap();
        }
        for link in ["libmlx5.so.1", "libefa.so.1"] {
            let _ = std::fs::remove_file(dir.join(link));
            std::os::unix::fs::symlink("libibverbs.so.1", dir.join(link)).unwrap();
        }
        dir
    })
}

/// This test binary's soft NIC registry (and rdma_cm port table).
pub fn registry_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// True when `tool` is installed; otherwise skips (or fails when required).
pub fn have(tool: &str, package: &str) -> bool {
    let found = ["/usr/bin", "/bin", "/usr/local/bin"]
        .iter()
        .any(|d| Path::new(d).join(tool).exists());
    if !found {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_RDMACM_TOOLS").is_none(),
            "{tool} is missing (apt-get install {package})"
        );
        eprintln!("SKIP: {tool} not installed (apt-get install {package})");
    }
    found
}

/// One program pair at a time: they busy-poll and share two cores.
pub fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn command(tool: &str, args: &[&str]) -> Command {
    let mut c = Command::new(tool);
    c.args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("RDMAKIT_SOFT_REGISTRY_DIR", registry_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Waits for `child` at most `limit`; kills it (and says so) past that.
/// Its output is read while it runs (rping -v writes more than a pipe holds).
pub fn wait(mut child: Child, limit: Duration, what: &str) -> Output {
    use std::io::Read;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let end = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            let (o, e) = (out.join().unwrap(), err.join().unwrap());
            panic!(
                "{what} hung for {limit:?}; killed.\nstdout (end):\n{}\nstderr:\n{}",
                tail(&o),
                String::from_utf8_lossy(&e)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The last 2000 bytes of some output, as text.
pub fn tail(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[b.len().saturating_sub(2000)..]).into_owned()
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs a server, then (once it had time to listen) a client, and waits
/// for both. Returns (server, client).
pub fn pair(server: &[&str], client: &[&str], limit: Duration) -> (Output, Output) {
    let s = command(server[0], &server[1..]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let c = wait(
        command(client[0], &client[1..]).spawn().unwrap(),
        limit,
        &format!("{} client", client[0]),
    );
    let s = wait(s, limit, &format!("{} server", server[0]));
    (s, c)
}

/// Asserts both sides exited 0; returns (server, client) text.
pub fn both_ok(what: &str, (s, c): &(Output, Output)) -> (String, String) {
    assert!(
        s.status.success() && c.status.success(),
        "{what}: server {:?}, client {:?}\n--- server\n{}\n--- client\n{}",
        s.status,
        c.status,
        text(s),
        text(c)
    );
    (text(s), text(c))
}

/// True when process `pid` (in whatever network namespace it is) has a socket listening on TCP `port`.
pub fn listening(pid: u32, port: u16) -> bool {
    ["tcp", "tcp6"].iter().any(|f| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{f}")).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                // local_address is ADDR:PORT in hex; st 0A is LISTEN.
                w.len() > 3
                    && w[3] == "0A"
                    && w[1]
                        .rsplit(':')
                        .next()
                        .and_then(|p| u16::from_str_radix(p, 16).ok())
                        == Some(port)
            })
        })
    })
}

/// Waits until `server` listens on its control port (a client that comes
/// earlier fails); fails with its output if it exits first or never does.
pub fn await_listen(mut server: Child, port: u16, limit: Duration) -> Child {
    let end = Instant::now() + limit;
    while !listening(server.id(), port) {
        if server.try_wait().unwrap().is_some() || Instant::now() > end {
            let _ = server.kill();
            let o = server.wait_with_output().unwrap();
            panic!(
                "fi_pingpong server never listened on port {port} ({:?})\n{}",
                o.status,
                text(&o)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

/// A TCP port nothing uses now (fixed ports collide with another run).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Asserts `fi_info -p verbs` output `t` lists soft0's endpoints: MSG,
/// DGRAM (on `soft0-dgram`), RDM over ofi_rxm and RDM over ofi_rxd.
pub fn assert_verbs_endpoints(t: &str) {
    let blocks = fi_info_blocks(t);
    for (prov, dom, ty) in [
        ("verbs", "soft0", "FI_EP_MSG"),
        ("verbs", "soft0-dgram", "FI_EP_DGRAM"),
        ("verbs;ofi_rxm", "soft0", "FI_EP_RDM"),
        ("verbs;ofi_rxd", "soft0-dgram", "FI_EP_RDM"),
    ] {
        let hit = blocks.iter().any(|b| {
            b.starts_with(&format!("{prov}\n"))
                && b.contains(&format!("domain: {dom}\n"))
                && b.contains(&format!("type: {ty}\n"))
        });
        assert!(hit, "no {prov} {ty} endpoint on {dom} in\n{t}");
    }
}

/// The `provider: ...` blocks of `fi_info` output.
pub fn fi_info_blocks(t: &str) -> Vec<&str> {
    t.split("provider: ").skip(1).collect()
}
