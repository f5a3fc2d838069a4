//! Running Debian's unmodified rdma-core tools and perftest on the shim.
//!
//! The tools come from Debian's `ibverbs-utils` and `perftest` packages
//! (scripts/test installs them). Without them a test skips, saying so,
//! unless `RDMAKIT_REQUIRE_IBVERBS_TOOLS=1` (scripts/test sets it) turns that
//! into a failure.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// A directory holding libibverbs.so.1 and the libmlx5.so.1 / libefa.so.1
/// links to it, as `rdmakit shim install` lays it out.
pub fn shim_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // target/<profile>/deps/<test> → target/<profile>/libibverbs.so
        let exe = std::env::current_exe().unwrap();
        let profile = exe.parent().unwrap().parent().unwrap();
        let lib = profile.join("libibverbs.so");
        assert!(
            lib.exists(),
            "{} was not built: `cargo test` does not build a cdylib nothing links; run \
             `cargo build -p rdmakit-ibverbs-shim` first (scripts/test does)",
            lib.display()
        );
        // Inside the target dir (not /tmp), one per test binary, replaced
        // on every run: nothing is left behind elsewhere.
        let name = exe.file_stem().unwrap().to_string_lossy().into_owned();
        let dir = profile.join("shim-test-lib").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&lib, dir.join("libibverbs.so.1")).unwrap();
        for link in ["libmlx5.so.1", "libefa.so.1"] {
            let _ = std::fs::remove_file(dir.join(link));
            std::os::unix::fs::symlink("libibverbs.so.1", dir.join(link)).unwrap();
        }
        dir
    })
}

/// True when `tool` is installed; otherwise skips (or fails when required).
pub fn have(tool: &str) -> bool {
    let found = ["/usr/bin", "/bin", "/usr/local/bin"]
        .iter()
        .any(|d| Path::new(d).join(tool).exists());
    if !found {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_IBVERBS_TOOLS").is_none(),
            "{tool} is missing (apt-get install ibverbs-utils perftest)"
        );
        eprintln!("SKIP: {tool} not installed (apt-get install ibverbs-utils perftest)");
    }
    found
}

/// One pair at a time: perftest busy-polls both cores.
pub fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn command(tool: &str, args: &[&str]) -> Command {
    let mut c = Command::new(tool);
    c.args(args)
        .env("LD_LIBRARY_PATH", shim_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Waits for `child` at most `limit`; kills it (and says so) past that.
pub fn wait(mut child: Child, limit: Duration, what: &str) -> Output {
    let end = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > end {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} hung for {limit:?}; killed.\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `tool args` alone.
pub fn run(tool: &str, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = command(tool, args);
    c.envs(envs.iter().copied());
    wait(c.spawn().unwrap(), Duration::from_secs(60), tool)
}

/// A server/client pair: the server with `args`, the client with `args`
/// plus 127.0.0.1. Returns (server, client) output.
pub fn pair(tool: &str, args: &[&str], envs: &[(&str, &str)], limit: Duration) -> (Output, Output) {
    let mut s = command(tool, args);
    s.envs(envs.iter().copied());
    let server = s.spawn().unwrap();
    // The server listens on TCP before it creates anything; a client that
    // comes too early retries (pingpong) or fails to connect (perftest).
    std::thread::sleep(Duration::from_millis(700));
    let mut cargs: Vec<&str> = args.to_vec();
    cargs.push("127.0.0.1");
    let mut c = command(tool, &cargs);
    c.envs(envs.iter().copied());
    let client = wait(c.spawn().unwrap(), limit, &format!("{tool} client"));
    let server = wait(server, limit, &format!("{tool} server"));
    (server, client)
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Asserts both sides exited 0 and returns the client's output.
pub fn both_ok(what: &str, (s, c): &(Output, Output)) -> String {
    assert!(
        s.status.success() && c.status.success(),
        "{what}: server {:?}, client {:?}\n--- server\n{}\n--- client\n{}",
        s.status,
        c.status,
        text(s),
        text(c)
    );
    text(c)
}

/// A TCP port of its own for each pair (tests in one binary run in threads).
pub fn port(n: u16) -> String {
    (19000 + n).to_string()
}
