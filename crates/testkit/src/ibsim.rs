//! A simulated InfiniBand fabric for tests: Debian's `ibsim` with unmodified
//! `opensm` as its subnet manager, and unmodified infiniband-diags (or any
//! program, a re-executed test binary included) run against it under the
//! umad2sim preload.
//!
//! [`Fabric::start`] writes the topology into a fresh temporary directory,
//! starts `ibsim -s` on it with a console fed from a FIFO whose write end the
//! [`Fabric`] holds open (a console at EOF makes ibsim spin at 100 % CPU),
//! waits for "Network simulator ready", then starts opensm under the preload
//! and waits for `SUBNET UP`. Each fabric has its own `IBSIM_SOCKNAME`, so
//! fabrics of parallel tests (and of other people on the machine) never meet.
//!
//! Every child runs in its own process group with `PR_SET_PDEATHSIG`
//! (SIGKILL): dropping the [`Fabric`] kills them all and removes the
//! directory, and a test process that dies leaves nothing running. The death
//! signal follows the *thread* that started the fabric, so keep a fabric in
//! the test that started it (not in a static shared across test threads).
//!
//! A missing `ibsim`, `opensm` or preload library is a panic naming the
//! Debian packages: the tests that use this are required (scripts/test
//! installs the packages).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The umad2sim preload library (Debian package libumad2sim0).
pub const PRELOAD: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

/// The Debian packages the simulated fabric needs.
pub const PACKAGES: &str = "ibsim-utils libumad2sim0 opensm infiniband-diags libibumad3";

/// How long [`Fabric::start`] waits for ibsim and for `SUBNET UP`.
pub const START_LIMIT: Duration = Duration::from_secs(10);

/// How long [`Fabric::tool`] lets a tool run (`timeout`'s argument).
pub const TOOL_LIMIT: Duration = Duration::from_secs(20);

/// ibsim's client slots (`IBSIM_MAX_CLIENTS`).
pub const CLIENT_SLOTS: usize = 10;

/// A line of `switches` switches ("S1" … of `ports` ports each), two hosts
/// ("H1" …, one port) on ports 1 and 2 of each, and between neighbours
/// `isl[i]`'s two cables (the same port numbers at both ends), in ibsim's net
/// format, 4X QDR, the hosts first (ibsim attaches clients to the first node).
pub fn line(switches: usize, ports: u8, isl: &[[u8; 2]]) -> String {
    const LINK: &str = "w=2 s=4";
    let mut out = String::new();
    for h in 1..=2 * switches {
        let (sw, port) = (h.div_ceil(2), 2 - h % 2);
        out += &format!("Hca\t1 \"H{h}\"\n[1]\t\"S{sw}\"[{port}]\t{LINK}\n\n");
    }
    for sw in 1..=switches {
        out += &format!("Switch\t{ports} \"S{sw}\"\n");
        for port in 1..=2 {
            out += &format!("[{port}]\t\"H{}\"[1]\t{LINK}\n", 2 * (sw - 1) + port);
        }
        let before = (sw > 1).then(|| (sw - 1, isl[sw - 2]));
        let after = (sw < switches).then(|| (sw + 1, isl[sw - 1]));
        for (peer, pair) in before.into_iter().chain(after) {
            for p in pair {
                out += &format!("[{p}]\t\"S{peer}\"[{p}]\t{LINK}\n");
            }
        }
        if sw < switches {
            out.push('\n');
        }
    }
    out
}

/// Two switches ("S1", "S2", 8 ports) cabled by ports 7 and 8, two hosts
/// each ("H1" … "H4" on ports 1 and 2): the reference page's dumbbell.
/// opensm gives H1=1, S1=2, S2=3, H2=4, H3=5, H4=6.
pub fn dumbbell() -> String {
    line(2, 8, &[[7, 8]])
}

const OPENSM_CONF: &str = "sweep_interval 2\nforce_log_flush TRUE\nlog_flags 0x03\n";

/// A running simulated fabric: ibsim, its console, and (unless stopped)
/// opensm. Dropping it kills every process it started and removes its
/// directory.
pub struct Fabric {
    dir: tempfile::TempDir,
    sockname: String,
    console: File,
    ibsim: Option<Child>,
    sm: Option<Child>,
    sm_starts: u32,
}

impl Fabric {
    /// Starts ibsim on the topology `net_text` (ibsim's net file format, the
    /// first node is where clients attach unless `SIM_HOST` says otherwise),
    /// then opensm, and waits for `SUBNET UP`.
    ///
    /// # Panics
    /// When ibsim, opensm or the preload library is missing (naming the
    /// Debian packages), or the subnet is not up within [`START_LIMIT`]
    /// (with both logs).
    pub fn start(net_text: &str) -> Fabric {
        require_installed();
        let dir = tempfile::Builder::new()
            .prefix("rdmakit-ibsim-")
            .tempdir()
            .expect("create the fabric's temporary directory");
        std::fs::write(dir.path().join("net"), net_text).expect("write the topology");
        std::fs::write(dir.path().join("opensm.conf"), OPENSM_CONF).expect("write opensm.conf");
        for d in ["scratch", "osm"] {
            std::fs::create_dir(dir.path().join(d)).expect("create a fabric directory");
        }
        let fifo = dir.path().join("console");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("no NUL");
        // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
        let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(
            rc,
            0,
            "mkfifo {}: {}",
            fifo.display(),
            std::io::Error::last_os_error()
        );
        // Read-write: never blocks (there is a reader: ourselves) and holds a
        // write end open for the fabric's life, so ibsim never sees EOF.
        let console = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&fifo)
            .expect("open the console FIFO");
        let stdin = File::open(&fifo).expect("open the console FIFO for ibsim");
        let log = File::create(dir.path().join("ibsim.log")).expect("create ibsim.log");

        static NEXT: AtomicU32 = AtomicU32::new(0);
        let sockname = format!(
            "rdmakit-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut cmd = Command::new("ibsim");
        cmd.arg("-s")
            .arg("net")
            .current_dir(dir.path())
            .env("IBSIM_SOCKNAME", &sockname)
            .env_remove("LD_PRELOAD")
            .stdin(stdin)
            .stdout(log.try_clone().expect("dup ibsim.log"))
            .stderr(log);
        let ibsim = spawn_owned(&mut cmd, "ibsim");
        let mut f = Fabric {
            dir,
            sockname,
            console,
            ibsim: Some(ibsim),
            sm: None,
            sm_starts: 0,
        };
        let deadline = Instant::now() + START_LIMIT;
        while !f.ibsim_log().contains("Network simulator ready") {
            f.check_ibsim_alive();
            if Instant::now() > deadline {
                panic!("ibsim not ready within {START_LIMIT:?}\n{}", f.logs());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        f.start_sm();
        f
    }

    /// The `IBSIM_SOCKNAME` of this fabric.
    pub fn sockname(&self) -> &str {
        &self.sockname
    }

    /// The process ids of ibsim and, while it runs, opensm.
    pub fn pids(&self) -> Vec<u32> {
        self.ibsim
            .iter()
            .chain(self.sm.iter())
            .map(Child::id)
            .collect()
    }

    /// The fabric's directory (topology, logs, scratch).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Sends one console command (`Error "S1"[7] 100`, `PerformanceSet ...`)
    /// and returns ibsim's output after it: the new log text, collected until
    /// ibsim has been quiet for 30 ms after its prompt (at most 2 s).
    ///
    /// # Panics
    /// If the command holds a newline, or ibsim has exited.
    pub fn console(&mut self, cmd: &str) -> String {
        assert!(!cmd.contains('\n'), "one console command at a time");
        self.check_ibsim_alive();
        let start = self.ibsim_log_len();
        self.console
            .write_all(format!("{cmd}\n").as_bytes())
            .expect("write to the ibsim console");
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut last_len = start;
        let mut quiet_since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(10));
            let len = self.ibsim_log_len();
            if len != last_len {
                last_len = len;
                quiet_since = Instant::now();
            }
            let text = self.log_from(start);
            let prompted = text.contains("sim> ");
            if (prompted && quiet_since.elapsed() >= Duration::from_millis(30))
                || Instant::now() > deadline
            {
                return text;
            }
        }
    }

    /// Runs an unmodified tool under the preload, with `timeout`
    /// ([`TOOL_LIMIT`]), in the fabric's scratch directory (the shim writes
    /// `./sys-<pid>` there), attached at the first node of the topology.
    pub fn tool(&mut self, program: &str, args: &[&str]) -> Output {
        self.tool_at(None, program, args)
    }

    /// [`Fabric::tool`] attached at node `sim_host` (`SIM_HOST`) when given.
    /// A tool killed by `timeout` leaks its ibsim slot: it is freed here.
    pub fn tool_at(&mut self, sim_host: Option<&str>, program: &str, args: &[&str]) -> Output {
        let mut cmd = self.command("timeout");
        cmd.arg("-s")
            .arg("KILL")
            .arg(TOOL_LIMIT.as_secs().to_string())
            .arg(program)
            .args(args);
        if let Some(h) = sim_host {
            cmd.env("SIM_HOST", h);
        }
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("run {program} under the preload: {e}"));
        // timeout -s KILL exits 137 when it had to kill.
        if out.status.code() == Some(137) {
            self.free_leaked_slots();
        }
        out
    }

    /// A command for `program` set up like [`Fabric::tool`] (preload,
    /// `IBSIM_SOCKNAME`, scratch directory) but without `timeout`: for
    /// rdmakit's binaries and re-executed test binaries. Set `SIM_HOST` on it
    /// to attach elsewhere. The caller bounds its run time (e.g. with
    /// [`crate::wait`]); after killing one, call
    /// [`Fabric::free_leaked_slots`].
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(self.scratch())
            .env("LD_PRELOAD", PRELOAD)
            .env("IBSIM_SOCKNAME", &self.sockname)
            .env_remove("SIM_HOST")
            .stdin(Stdio::null());
        cmd
    }

    /// Stops opensm (SIGTERM, then SIGKILL after 2 s) and frees its client
    /// slot if it leaked one. The fabric keeps its LIDs and routes.
    pub fn stop_sm(&mut self) {
        if let Some(sm) = self.sm.take() {
            stop(sm, libc::SIGTERM);
        }
        self.free_leaked_slots();
    }

    /// Starts opensm (again) and waits for `SUBNET UP` in its fresh log.
    ///
    /// # Panics
    /// If the subnet is not up within [`START_LIMIT`] (with both logs).
    pub fn start_sm(&mut self) {
        assert!(self.sm.is_none(), "opensm is already running");
        self.free_leaked_slots();
        self.sm_starts += 1;
        let osm = self.dir.path().join("osm");
        let log = osm.join(format!("osm-{}.log", self.sm_starts));
        let out = File::create(osm.join("opensm.out")).expect("create opensm.out");
        let mut cmd = Command::new("opensm");
        cmd.arg("-F")
            .arg(self.dir.path().join("opensm.conf"))
            .arg("-f")
            .arg(&log)
            .current_dir(&osm)
            .env("LD_PRELOAD", PRELOAD)
            .env("IBSIM_SOCKNAME", &self.sockname)
            .env("OSM_TMP_DIR", &osm)
            .env("OSM_CACHE_DIR", &osm)
            .env_remove("SIM_HOST")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup opensm.out"))
            .stderr(out);
        self.sm = Some(spawn_owned(&mut cmd, "opensm"));
        let deadline = Instant::now() + START_LIMIT;
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("SUBNET UP") {
                return;
            }
            if let Some(Ok(Some(st))) = self.sm.as_mut().map(|c| c.try_wait()) {
                panic!("opensm exited ({st}) before SUBNET UP\n{}", self.logs());
            }
            self.check_ibsim_alive();
            if Instant::now() > deadline {
                panic!("no SUBNET UP within {START_LIMIT:?}\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Frees every client slot whose process is gone (a client killed by a
    /// signal keeps its slot, and ibsim has only [`CLIENT_SLOTS`]). Returns
    /// how many it freed.
    pub fn free_leaked_slots(&mut self) -> usize {
        let text = self.console("Attached");
        let mut freed = 0;
        for (slot, pid) in attached(&text) {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                self.console(&format!("X {slot}"));
                freed += 1;
            }
        }
        freed
    }

    /// ibsim's log and opensm's, for a failure message.
    pub fn logs(&self) -> String {
        let osm = self.dir.path().join("osm");
        let mut s = format!(
            "--- ibsim.log\n{}",
            crate::tail(self.ibsim_log().as_bytes())
        );
        for i in 1..=self.sm_starts {
            let t = std::fs::read(osm.join(format!("osm-{i}.log"))).unwrap_or_default();
            s.push_str(&format!("--- osm-{i}.log\n{}", crate::tail(&t)));
        }
        let out = std::fs::read(osm.join("opensm.out")).unwrap_or_default();
        s.push_str(&format!("--- opensm.out\n{}", crate::tail(&out)));
        s
    }

    fn scratch(&self) -> PathBuf {
        self.dir.path().join("scratch")
    }

    fn ibsim_log(&self) -> String {
        String::from_utf8_lossy(
            &std::fs::read(self.dir.path().join("ibsim.log")).unwrap_or_default(),
        )
        .into_owned()
    }

    fn ibsim_log_len(&self) -> u64 {
        std::fs::metadata(self.dir.path().join("ibsim.log"))
            .map(|m| m.len())
            .unwrap_or(0)
    }

    fn log_from(&self, start: u64) -> String {
        let mut f = match File::open(self.dir.path().join("ibsim.log")) {
            Ok(f) => f,
            Err(_) => return String::new(),
        };
        let mut buf = Vec::new();
        use std::io::Seek;
        if f.seek(std::io::SeekFrom::Start(start)).is_ok() {
            // Bounded: the log grows only by what ibsim prints.
            let _ = f.take(1 << 20).read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    }

    fn check_ibsim_alive(&mut self) {
        if let Some(Ok(Some(st))) = self.ibsim.as_mut().map(|c| c.try_wait()) {
            panic!("ibsim exited ({st})\n{}", self.logs());
        }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        if let Some(sm) = self.sm.take() {
            stop(sm, libc::SIGKILL);
        }
        if let Some(sim) = self.ibsim.take() {
            stop(sim, libc::SIGKILL);
        }
    }
}

/// `(slot, pid)` of every `Client N: pid P connected ...` line of an
/// `Attached` reply.
pub fn attached(text: &str) -> Vec<(usize, u32)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("sim> ").unwrap_or(l.trim());
            let rest = rest.strip_prefix("Client ")?;
            let (slot, rest) = rest.split_once(": pid ")?;
            let pid = rest.split_whitespace().next()?;
            Some((slot.trim().parse().ok()?, pid.parse().ok()?))
        })
        .collect()
}

fn require_installed() {
    for (what, path) in [
        ("ibsim", "/usr/bin/ibsim"),
        ("opensm", "/usr/sbin/opensm"),
        ("the umad2sim preload", PRELOAD),
    ] {
        let found = Path::new(path).exists()
            || (!path.contains("umad2sim")
                && ["/usr/bin", "/usr/sbin", "/bin", "/sbin"]
                    .iter()
                    .any(|d| Path::new(d).join(what).exists()));
        assert!(
            found,
            "{what} is missing ({path}): the simulated fabric tests need the Debian packages \
             {PACKAGES} (apt-get install {PACKAGES}; scripts/test installs them)"
        );
    }
}

/// Spawns `cmd` in its own process group, killed when this thread dies.
fn spawn_owned(cmd: &mut Command, what: &str) -> Child {
    crate::spawn_dying_with_thread(cmd)
        .unwrap_or_else(|e| panic!("start {what}: {e} (Debian packages: {PACKAGES})"))
}

/// Signals `child`'s process group, waits up to 2 s, then SIGKILLs it.
fn stop(mut child: Child, sig: libc::c_int) {
    let pgid = child.id() as libc::pid_t;
    // SAFETY: plain syscall; the group is the one spawn_owned created.
    unsafe { libc::kill(-pgid, sig) };
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => break,
            Ok(None) if Instant::now() > deadline => {
                // SAFETY: as above.
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
                let _ = child.wait();
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    // Anything left in the group (a tool's helper) goes too.
    // SAFETY: as above; ESRCH when the group is empty is fine.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attached_reply_is_parsed_into_slots_and_pids() {
        let text = "Attached\nsim> Client 0: pid 5628 connected at \"H1\" port 0x100001, lid 1, \
                    qp 0 SM\nClient 1: pid 5672 connected at \"H1\" port 0x100001, lid 1, qp 0 \nsim> ";
        assert_eq!(attached(text), vec![(0, 5628), (1, 5672)]);
        assert!(attached("sim> # field X cannot be found").is_empty());
    }

    /// Every cable of a generated line is listed at both of its ends, the
    /// hosts come first, and neighbours are joined by the ports asked for.
    #[test]
    fn a_line_lists_each_cable_at_both_ends() {
        let net = line(3, 12, &[[9, 10], [11, 12]]);
        assert!(net.starts_with("Hca\t1 \"H1\""), "{net}");
        let mut ends = std::collections::BTreeSet::new();
        let mut node = String::new();
        for l in net.lines() {
            if let Some(rest) = l
                .strip_prefix("Switch\t")
                .or_else(|| l.strip_prefix("Hca\t"))
            {
                node = rest.split('"').nth(1).unwrap().to_string();
            } else if let Some(rest) = l.strip_prefix('[') {
                let (port, rest) = rest.split_once(']').unwrap();
                let peer = rest.split('"').nth(1).unwrap();
                let pport = rest.rsplit_once('[').unwrap().1.split(']').next().unwrap();
                ends.insert((
                    (node.clone(), port.to_string()),
                    (peer.to_string(), pport.to_string()),
                ));
            }
        }
        assert_eq!(ends.len(), 2 * (6 + 4), "{ends:?}");
        for (a, b) in &ends {
            assert!(
                ends.contains(&(b.clone(), a.clone())),
                "{a:?} - {b:?} listed once"
            );
        }
        let s2_s3 = (
            ("S2".to_string(), "11".to_string()),
            ("S3".to_string(), "11".to_string()),
        );
        assert!(ends.contains(&s2_s3));
        assert_eq!(dumbbell().matches("Switch\t8").count(), 2);
    }
}
