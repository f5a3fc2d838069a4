//! What rdmakit's integration tests share (a dev-dependency only; nothing
//! in a shipped crate depends on it).
//!
//! - **Prerequisites**: [`have`] (a program from a Debian package, found by
//!   [`installed`]) and [`have_file`] (a header). A missing one skips the test, saying so on
//!   stderr, unless the named `RDMAKIT_REQUIRE_*` variable is set (scripts/test
//!   and `.ci/run` set them all): then it is a failure. A test never passes
//!   silently on a machine that lacks what it checks.
//! - **Processes**: [`wait`] with a limit (killed, and its output shown, past
//!   it), [`pair`] a server then a client, [`both_ok`], [`text`], [`tail`].
//! - **Ports**: [`free_port`], [`listening`], [`await_listen`].
//! - **C programs**: [`compile_c`] against the drop-in libraries.
//! - **Libraries**: [`install_libs`] lays out the built cdylibs as
//!   `rdmakit shim install` does, one directory per test binary.
//! - **CPUs**: [`two_cpus`] and [`pin_to_cpu`], for tests of what depends
//!   on where threads run.
//! - **Memory**: [`run_measured`], a child's peak RSS (GNU time), for tests of
//!   inputs meant to exhaust it.
//! - **Held connections**: [`hold::Holder`], idle or trickling connections
//!   kept open against a server, as an attacker keeps them.
//! - **InfiniBand fabric**: [`ibsim::Fabric`], ibsim with unmodified opensm,
//!   and tools or re-executed tests run against it under the umad2sim preload.
//! - **Congestion with ECN**: [`ecn::Dumbbell`], senders, a router and a
//!   receiver in network namespaces, an HTB/bfifo bottleneck and a tc-BPF
//!   marker that sets CE as the queue builds; processes and sockets in each
//!   namespace, the bottleneck's counters, and UDP traffic that reads the
//!   TOS byte ([`ecn::udp`]).
//! - **Layout**: [`ownership::violations`], the files over a size and the
//!   `impl` blocks away from the file that defines their type.
//! - **Fixtures**: [`fixture`], [`fixtures_dir`], [`SLURMD_ARGV`]; with the feature `bundle`,
//!   [`bundle`]: the real captures as bundles, the edits that derive faults
//!   from them and a PCI device built on a real tree; with `fleet`, [`fleet`]:
//!   a test fleet of doctor reports built from them. (These two depend on
//!   `host` and `doctor`: only the crates whose tests need them turn them on.)

#[cfg(feature = "bundle")]
pub mod bundle;
pub mod ecn;
#[cfg(feature = "fleet")]
pub mod fleet;
pub mod hold;
pub mod ibsim;
pub mod lo_capture;
pub mod ownership;
mod rss;
pub mod words;

pub use rss::{run_measured, Measured};

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// True when `tool` is installed. Otherwise the test skips (stderr says
/// which package provides it), or fails when `require` is set.
pub fn have(tool: &str, package: &str, require: &str) -> bool {
    let found = installed(tool).is_some();
    if !found {
        assert!(
            std::env::var_os(require).is_none(),
            "{tool} is missing (apt-get install {package}); {require} is set"
        );
        eprintln!("SKIP: {tool} not installed (apt-get install {package})");
    }
    found
}

/// Where `tool` is installed: the first of Debian's program directories
/// (/usr/bin, /bin, /usr/local/bin, /usr/sbin, /sbin) that has it.
pub fn installed(tool: &str) -> Option<PathBuf> {
    ["/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin"]
        .iter()
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.exists())
}

/// True when `path` (a header, say) exists. Otherwise the test skips, or
/// fails when `require` is set.
pub fn have_file(path: &str, package: &str, require: &str) -> bool {
    let found = Path::new(path).exists();
    if !found {
        assert!(
            std::env::var_os(require).is_none(),
            "{path} is missing (apt-get install {package}); {require} is set"
        );
        eprintln!("SKIP: {path} missing (apt-get install {package})");
    }
    found
}

/// One program pair at a time in a test binary: they busy-poll and the
/// machine may have two cores.
pub fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|p| p.into_inner())
}

/// The last 2000 bytes of some output, as text.
pub fn tail(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[b.len().saturating_sub(2000)..]).into_owned()
}

/// stdout then stderr, as text.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Waits for `child` at most `limit`; past it, kills it and fails showing
/// the end of its output. Its pipes are read while it runs (a program that
/// writes more than a pipe holds never blocks on them).
pub fn wait(child: Child, limit: Duration, what: &str) -> Output {
    wait_or(child, limit, what, |c| {
        let _ = c.kill();
    })
}

/// [`wait`], with `kill` for what it does past `limit` (before it reaps the
/// child and fails).
pub(crate) fn wait_or(
    mut child: Child,
    limit: Duration,
    what: &str,
    kill: impl FnOnce(&mut Child),
) -> Output {
    fn drain<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let end = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > end {
            kill(&mut child);
            let _ = child.wait();
            let (o, e) = (out.join().unwrap(), err.join().unwrap());
            panic!(
                "{what} hung for {limit:?}; killed.\nstdout (end):\n{}\nstderr (end):\n{}",
                tail(&o),
                tail(&e)
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

/// Runs `cmd` (at most `limit`), asserts it exited 0 showing its output
/// when not, and returns its output (stdout then stderr) as text.
pub fn run_ok(
    mut cmd: impl std::borrow::BorrowMut<Command>,
    limit: Duration,
    what: &str,
) -> String {
    let o = wait(cmd.borrow_mut().spawn().unwrap(), limit, what);
    let t = text(&o);
    assert!(o.status.success(), "{what}: {:?}\n{t}", o.status);
    t
}

/// Starts `server`, gives it `head_start` to listen, runs `client`, and
/// waits for both (each at most `limit`). Returns (server, client).
pub fn pair(
    mut server: Command,
    mut client: Command,
    head_start: Duration,
    limit: Duration,
    what: &str,
) -> (Output, Output) {
    let s = server.spawn().unwrap();
    std::thread::sleep(head_start);
    let c = wait(client.spawn().unwrap(), limit, &format!("{what} client"));
    let s = wait(s, limit, &format!("{what} server"));
    (s, c)
}

/// Asserts both sides exited 0, showing both outputs when not; returns
/// (server, client) text.
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

/// A TCP port nothing uses now (fixed ports collide with another run).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// True when process `pid` (in whatever network namespace it is) has a
/// socket listening on TCP `port`, read from its /proc/<pid>/net/tcp{,6}.
pub fn listening(pid: u32, port: u16) -> bool {
    ["tcp", "tcp6"].iter().any(|f| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{f}"))
            .is_ok_and(|t| t.lines().skip(1).any(|l| listens_on(l, port)))
    })
}

/// One /proc/net/tcp row: local_address is ADDR:PORT in hex, st 0A is LISTEN.
fn listens_on(row: &str, port: u16) -> bool {
    let w: Vec<&str> = row.split_whitespace().collect();
    w.len() > 3
        && w[3] == "0A"
        && w[1]
            .rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
            == Some(port)
}

/// Tries `attempt` every `every` until it answers `Ok`, for at most `limit`;
/// then fails with the last `Err`. For what a test waits on another process
/// or the kernel to do in its own time.
pub fn retry<T>(
    limit: Duration,
    every: Duration,
    mut attempt: impl FnMut() -> Result<T, String>,
) -> T {
    let end = Instant::now() + limit;
    loop {
        match attempt() {
            Ok(v) => return v,
            Err(why) => assert!(Instant::now() < end, "{why}"),
        }
        std::thread::sleep(every);
    }
}

/// Waits until `server` listens on TCP `port` (a client that comes earlier
/// fails); fails with its output if it exits first or never does.
pub fn await_listen(mut server: Child, port: u16, limit: Duration) -> Child {
    let end = Instant::now() + limit;
    while !listening(server.id(), port) {
        if server.try_wait().unwrap().is_some() || Instant::now() > end {
            let _ = server.kill();
            let o = server.wait_with_output().unwrap();
            panic!(
                "server never listened on port {port} ({:?})\n{}",
                o.status,
                text(&o)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

/// Runs libfabric's `fi_pingpong`: `server` (given `-B port`) and, once it
/// listens on `port`, `client`; asserts both exit 0 and the client's result
/// row shows all `iterations` messages acknowledged (`=100` in its third
/// column). Returns the client's output.
pub fn fi_pingpong(
    server: Command,
    mut client: Command,
    port: u16,
    iterations: u32,
    limit: Duration,
    what: &str,
) -> String {
    let mut server = server;
    let s = await_listen(server.spawn().unwrap(), port, limit);
    let c = wait(client.spawn().unwrap(), limit, &format!("{what} client"));
    let s = wait(s, limit, &format!("{what} server"));
    let (_, ct) = both_ok(what, &(s, c));
    let row = format!("={iterations}");
    assert!(
        ct.lines()
            .any(|l| l.split_whitespace().nth(2) == Some(row.as_str())),
        "{what}: not every message acknowledged:\n{ct}"
    );
    ct
}

/// True when this process runs as root (the effective uid on
/// /proc/self/status's `Uid:` line is 0).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// The unprivileged uid and gid attacks run as (`nobody` on Debian).
pub const ATTACKER_UID: u32 = 65534;

/// A command that runs `program` as [`ATTACKER_UID`] with no supplementary
/// groups (`setpriv`), for tests that run an attack as an unprivileged user
/// against a root rdmakit. `None` when this process is not root: the test
/// then skips, saying so, unless `RDMAKIT_REQUIRE_ROOT` is set (scripts/test
/// sets it; CI runs as root), when it fails. The attacker's files must be
/// reachable by that uid (a directory of [`attacker_dir`]).
pub fn as_attacker(program: impl AsRef<std::ffi::OsStr>) -> Option<Command> {
    if !is_root() {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_ROOT").is_none(),
            "this attack test needs root (to run the attacker as uid {ATTACKER_UID}); \
             RDMAKIT_REQUIRE_ROOT is set"
        );
        eprintln!("SKIP: not root: cannot run the attacker as uid {ATTACKER_UID}");
        return None;
    }
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid",
        &ATTACKER_UID.to_string(),
        "--regid",
        &ATTACKER_UID.to_string(),
        "--clear-groups",
        "--",
    ])
    .arg(program);
    Some(c)
}

/// A fresh temporary directory owned by [`ATTACKER_UID`] (mode 0755), for
/// the files an attacker prepares; removed when the guard drops.
pub fn attacker_dir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("rdk-attacker-")
        .tempdir()
        .expect("temporary directory");
    let c = std::ffi::CString::new(d.path().as_os_str().as_encoded_bytes()).expect("no NUL");
    // SAFETY: a valid NUL-terminated path; chown(2) reads it only.
    let rc = unsafe { libc::chown(c.as_ptr(), ATTACKER_UID, ATTACKER_UID) };
    assert_eq!(
        rc,
        0,
        "chown {}: {}",
        d.path().display(),
        std::io::Error::last_os_error()
    );
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    d
}

/// The argv the cluster tier starts slurmd with (scripts/cluster/lib.sh's
/// `cl_up`, node 3): its slurm.conf given with `-f`, as the Slurm tests of
/// `host` (what a bundle keeps of it) and `fleet` (where the conf is found)
/// read it.
pub const SLURMD_ARGV: [&str; 6] = [
    "/usr/sbin/slurmd",
    "-D",
    "-N",
    "n3",
    "-f",
    "/tmp/rdkc.1/slurm.conf",
];

/// The repository's `fixtures/<rel>` (real captures, each with its SOURCE
/// note), which must exist: a missing fixture fails the test instead of
/// letting it pass on nothing.
pub fn fixture(rel: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel);
    assert!(
        p.exists(),
        "fixture {} is missing (fixtures/ is part of the repository)",
        p.display()
    );
    p
}

/// The repository's `fixtures/`, which must hold the real captures the test
/// hosts are built from (`healthy`, `real-nics-procfs`).
pub fn fixtures_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    assert!(
        d.join("healthy/root").is_dir() && d.join("real-nics-procfs/root").is_dir(),
        "the real captures are missing from {} (part of the repository)",
        d.display()
    );
    d
}

/// The lines of `text` over `width` columns, each as "N cols: LINE" — but not a
/// line that only a path or URL too long for any line makes longer (without that
/// one word it would fit). For reports that must fit the terminal.
pub fn lines_over(text: &str, width: usize) -> Vec<String> {
    text.lines()
        .filter(|l| {
            let n = l.chars().count();
            let path = l
                .split(' ')
                .filter(|w| w.contains('/'))
                .map(|w| w.chars().count())
                .max()
                .unwrap_or(0);
            n > width && n - path > width
        })
        .map(|l| format!("{} cols: {l}", l.chars().count()))
        .collect()
}

/// The bytes of [`fixture`] `rel`.
pub fn fixture_bytes(rel: &str) -> Vec<u8> {
    let p = fixture(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `target/<profile>` of the running test binary (`target/<profile>/deps/<test>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Lays out the built cdylibs `libs` (`(built name, installed name)`, e.g.
/// `("libibverbs.so", "libibverbs.so.1")`) in `target/<profile>/<kind>/<test>`
/// with libmlx5.so.1 and libefa.so.1 linked to libibverbs.so.1, as `rdmakit
/// shim install` does. Inside the target dir, one per test binary, replaced
/// on every run. Fails, saying what to build, when a library is missing
/// (`cargo test` does not build a cdylib nothing links).
pub fn install_libs(kind: &str, libs: &[(&str, &str)]) -> PathBuf {
    let profile = profile_dir();
    let exe = std::env::current_exe().unwrap();
    let name = exe.file_stem().unwrap().to_string_lossy().into_owned();
    let dir = profile.join(kind).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for (built, as_) in libs {
        let lib = profile.join(built);
        assert!(
            lib.exists(),
            "{} was not built: `cargo test` does not build a cdylib nothing links; run \
             `cargo build --workspace` first (scripts/test does)",
            lib.display()
        );
        std::fs::copy(&lib, dir.join(as_)).unwrap();
    }
    for link in ["libmlx5.so.1", "libefa.so.1"] {
        let _ = std::fs::remove_file(dir.join(link));
        std::os::unix::fs::symlink("libibverbs.so.1", dir.join(link)).unwrap();
    }
    dir
}

/// Spawns `cmd` in a process group of its own, SIGKILLed when the thread
/// that spawned it ends (PR_SET_PDEATHSIG): a test's helper processes
/// (ibsim, opensm, a namespace's traffic) never outlive a panicking test.
///
/// # Errors
/// When the program cannot be started.
pub fn spawn_dying_with_thread(cmd: &mut Command) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt as _;
    cmd.process_group(0);
    // SAFETY: the closure runs between fork and exec and only calls prctl,
    // which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Compiles the C file `src` into `bin` with `$CC` (default `cc`) and
/// `args` after the source (libraries, say); fails showing the compiler's
/// complaint.
pub fn compile_c(src: &Path, bin: &Path, flags: &[&str], args: &[&str]) {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(flags)
        .arg("-o")
        .arg(bin)
        .arg(src)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(
        out.status.success(),
        "{cc} failed on {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `program` to a temporary directory as `<name>.c`, compiles it
/// (see [`compile_c`]), and returns the directory (keep it alive) and the
/// binary.
pub fn compile_c_text(
    program: &str,
    name: &str,
    flags: &[&str],
    args: &[&str],
) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join(format!("{name}.c"));
    let bin = dir.path().join(name);
    std::fs::write(&src, program).unwrap();
    compile_c(&src, &bin, flags, args);
    (dir, bin)
}

/// Runs `cmd` with piped output (stdin closed) and returns it.
pub fn output(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

/// The names of the entries of `dir` that `keep` accepts (panics when `dir`
/// cannot be read: the test expects it).
pub fn file_names(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| keep(n))
        .collect()
}

/// Writes an executable script (mode 755) at `path` for a test to run —
/// without this process ever holding a write descriptor to it.
///
/// A script written with `std::fs::write` and then executed fails now and
/// then with ETXTBSY ("Text file busy") when another test thread forks
/// meanwhile: the child holds a copy of the write descriptor until it execs,
/// and Linux refuses to execute a file open for writing. Here the text goes
/// to a side file and coreutils' `install` (its own process, waited for)
/// writes the script, so no fork of this process can inherit a descriptor
/// open for writing to it.
pub fn write_script(path: &Path, script: &str) {
    let side = path.with_extension("script-text");
    std::fs::write(&side, script).unwrap_or_else(|e| panic!("{}: {e}", side.display()));
    let mut install = Command::new("install");
    install.args(["-m", "755"]).arg(&side).arg(path);
    let out = output(install);
    assert!(
        out.status.success(),
        "install {}: {}",
        path.display(),
        text(&out)
    );
    let _ = std::fs::remove_file(&side);
}

/// Pins the calling thread (and the threads it starts later) to `cpu`.
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET and
    // sched_setaffinity read and write only that set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let rc = libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
        assert_eq!(
            rc,
            0,
            "sched_setaffinity({cpu}): {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Two CPUs the calling thread may run on. A test that needs two fails on
/// a machine (or cgroup) that offers one.
pub fn two_cpus() -> (usize, usize) {
    // SAFETY: as in `pin_to_cpu`.
    let cpus: Vec<usize> = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let rc = libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set);
        assert_eq!(
            rc,
            0,
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    };
    assert!(cpus.len() >= 2, "this test needs 2 CPUs, has {cpus:?}");
    (cpus[0], cpus[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listen_row_is_read_by_port_and_state() {
        let listen = "   0: 0100007F:4A38 00000000:0000 0A 00000000:00000000 00:00000000 00000000";
        assert!(listens_on(listen, 0x4A38));
        assert!(!listens_on(listen, 0x4A39));
        let established = listen.replace(" 0A ", " 01 ");
        assert!(!listens_on(&established, 0x4A38));
        assert!(!listens_on("garbage", 1));
    }

    #[test]
    fn a_child_past_its_limit_is_killed_and_reported() {
        let child = Command::new("sleep")
            .arg("5")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let t = Instant::now();
        let r = std::panic::catch_unwind(|| wait(child, Duration::from_millis(100), "sleep"));
        assert!(r.is_err());
        assert!(t.elapsed() < Duration::from_secs(4));
    }

    #[test]
    fn wait_collects_more_than_a_pipe_holds() {
        let child = Command::new("head")
            .args(["-c", "200000", "/dev/zero"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let o = wait(child, Duration::from_secs(20), "head");
        assert!(o.status.success());
        assert_eq!(o.stdout.len(), 200_000);
    }

    #[test]
    fn a_missing_tool_skips_unless_required() {
        assert!(!have(
            "rdmakit-no-such-tool",
            "nothing",
            "RDMAKIT_TESTKIT_UNSET_VAR"
        ));
        assert!(have("sh", "dash", "RDMAKIT_TESTKIT_UNSET_VAR"));
    }
}
