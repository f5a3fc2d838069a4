//! A congested link with ECN marking, in network namespaces: the test bed
//! for congestion control (the soft NIC's CNPs and DCQCN), as a fixture.
//!
//! # What it builds
//!
//! [`Dumbbell::up`] makes one namespace per sender (1 to 4), a router and a
//! receiver, joined by veth pairs:
//!
//! ```text
//!  sender 1  10.77.1.2 ──┐
//!  sender 2  10.77.2.2 ──┤ router ══ bottleneck ══> receiver 10.77.100.2
//!  sender i  10.77.i.2 ──┘ (10.77.i.1 toward sender i, 10.77.100.1 toward the receiver)
//! ```
//!
//! - **Addresses** exist only inside the namespaces (every dumbbell has the
//!   same ones; namespaces keep them apart). Sender i is `10.77.i.2/24` with
//!   a default route via the router's `10.77.i.1`; the receiver is
//!   `10.77.100.2/24` via `10.77.100.1`. [`Dumbbell::addr`] gives them.
//! - **The bottleneck** is the router's egress toward the receiver
//!   ([`Dumbbell::bottleneck_if`]): HTB `1:` with class `1:10` at
//!   [`Config::rate_mbit`] (rate = ceil), and a bfifo `10:` of
//!   [`Config::limit_bytes`] under it, so overload is tail drop. The reverse
//!   path (ACKs, NAKs, CNPs) and the senders' links are not shaped.
//! - **The marker** (with [`Config::marking`]): crates/testkit/bpf/ecn_vq.bpf.c,
//!   a tc-BPF program on clsact egress of that interface, compiled for this
//!   dumbbell with clang-14 in its temporary directory. It models the queue:
//!   a byte backlog that drains at the bottleneck rate, capped at the bfifo
//!   limit; while it is over [`Config::k_bytes`], ECT(0) and ECT(1) become CE
//!   (IPv4 checksum fixed). Not-ECT and CE are never touched. Marking is on
//!   enqueue, DCTCP-style step marking at K, as a RoCE switch does.
//! - **Quiet links**: IPv6 is off in every namespace and the neighbours are
//!   static (fixed MAC addresses), so no ND, MLD or ARP crosses the
//!   bottleneck: its counters are the test's traffic alone, and the bfifo's
//!   drops equal the datagrams a receiver misses (the tests check exactly that).
//!
//! # Why a BPF virtual queue
//!
//! The kernel this project builds on has no qdisc that sets CE (no red,
//! codel, fq_codel, pie, fq, netem: built without modules), so the mark must
//! come from a program. The team's measurements
//! (shared reference "ecn-testbed", recipe B) compared two: this virtual
//! queue marked 89–97 % at 6+6 Mbit/s into 10 Mbit/s and 0 % below
//! capacity — the marks follow the queue. An nftables rate-limit marker
//! marked 9–11 % at the same load and its byte form almost nothing: a
//! policer, not tied to occupancy. DCQCN reacts to queue build-up, so the
//! queue model is the one that tests it. Its limit: BPF cannot read the
//! qdisc's backlog, so the model is exact only while all traffic through the
//! interface shares the one HTB class (here it does); the marker counts the
//! drops its model predicts ([`MarkerStats::model_drops`]) so a test can
//! compare them with the bfifo's.
//!
//! # Names and cleanup
//!
//! Namespaces are `rkecn-<pid>-<n>-{s1..s4,r,rx}` and interfaces
//! `e<pid base 36>x<n base 36>-{s1,r1,..,rx,xr}` (at most 15 characters), `n`
//! counting dumbbells of this process, so tests in one `cargo test` and two
//! processes at once never collide. Dropping the [`Dumbbell`] SIGKILLs every
//! process in its namespaces, deletes them (and so the veths, the qdiscs and
//! the BPF program) and removes its temporary directory; it never panics. A
//! dumbbell whose process was killed first is cleared by the next
//! [`Dumbbell::up`] (namespaces and directories of dead pids).
//!
//! # What it needs
//!
//! Root (namespaces, tc, BPF), `ip` and `tc` (Debian iproute2); for marking
//! also clang-14, libbpf-dev (bpf_helpers.h), linux-libc-dev and bpftool (to
//! read the marker's map). scripts/test installs them. A missing one is an
//! [`Error`] naming its Debian package and not running as root is
//! [`Error::NotRoot`]: the test fails saying so; it never skips.
//!
//! # Using it
//!
//! A test with two senders from the start and a third joining mid-run, each
//! a process of its own (here: `#[ignore]`d tests of the same binary, run
//! alone in a namespace by [`Dumbbell::test_command`]; any program works
//! with [`Dumbbell::command`]). Everything started with [`Dumbbell::spawn`]
//! dies with the dumbbell.
//!
//! ```no_run
//! use std::time::Duration;
//! use rdmakit_testkit::ecn::{Config, Dumbbell, Node};
//!
//! let mut d = Dumbbell::up(Config::default()).unwrap(); // 10 Mbit/s, 60 kB, K 20 kB
//! let mut cmd = d.test_command(Node::Receiver, "receiver_role");
//! cmd.env("RDMAKIT_SOFT_ADDR", d.addr(Node::Receiver).to_string());
//! let receiver = d.spawn(&mut cmd).unwrap();
//! let before = d.stats().unwrap();
//! let mut senders = Vec::new();
//! for n in [Node::Sender(1), Node::Sender(2)] {
//!     let mut cmd = d.test_command(n, "sender_role");
//!     cmd.env("RDMAKIT_SOFT_ADDR", d.addr(n).to_string())
//!         .env("PEER", d.addr(Node::Receiver).to_string());
//!     senders.push(d.spawn(&mut cmd).unwrap());
//! }
//! std::thread::sleep(Duration::from_secs(2));
//! let third = d.add_sender().unwrap(); // Node::Sender(3), 10.77.3.2
//! let mut cmd = d.test_command(third, "sender_role");
//! cmd.env("RDMAKIT_SOFT_ADDR", d.addr(third).to_string());
//! senders.push(d.spawn(&mut cmd).unwrap());
//! for s in senders {
//!     let out = s.wait(Duration::from_secs(30), "a sender"); // its Output
//!     assert!(out.status.success());
//! }
//! let run = d.stats().unwrap().since(&before);
//! println!("{run}"); // bfifo sent .. dropped ..; marker seen .. marked ..
//! # drop(receiver);
//! ```
//!
//! A test can also make sockets inside a namespace ([`Dumbbell::udp_socket`],
//! [`Dumbbell::in_netns`]) and use them from its own threads: the dumbbell's
//! own tests drive [`udp`]'s paced sender and TOS-reading receiver that way.
//!
//! # What its tests measure here
//!
//! crates/testkit/tests/ecn_dumbbell.rs, 1000-byte UDP payloads (1042 bytes
//! on the wire), the default bottleneck: 3+3 Mbit/s ECT(0) for 2 s loses
//! nothing and arrives all ECT(0); 6+6 Mbit/s for 2.5 s arrives 96–97 % CE
//! and loses 16 %, exactly the bfifo's drops (the model predicts them within
//! a few packets); with marking off, no CE and 15 % lost, again the bfifo's
//! drops; a Not-ECT flow through the congested queue is never marked. The
//! whole file takes about 7 s and 1.3 s of CPU (user + system, with its
//! children).

mod marker;
pub mod stats;
mod sys;
pub mod udp;

use std::ffi::OsStr;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub use stats::{Bottleneck, ClassStats, MarkerStats, ParseError, QdiscStats};

/// The most senders a dumbbell has.
pub const MAX_SENDERS: u8 = 4;

/// The third byte of the receiver's subnet, 10.77.100.0/24.
const RX_NET: u8 = 100;

/// The HTB class the bottleneck's traffic goes through.
pub const CLASS: &str = "1:10";

/// A dumbbell's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The bottleneck's rate in Mbit/s (1 ..= 10000; default 10).
    pub rate_mbit: u32,
    /// The bfifo's limit in bytes (1600 ..= 64 MiB; default 60000).
    pub limit_bytes: u32,
    /// The marking threshold K in bytes (below the limit; default 20000).
    pub k_bytes: u32,
    /// Whether the marker runs (default on); off is plain tail drop.
    pub marking: bool,
    /// Senders at start (1 ..= 4; default 2); [`Dumbbell::add_sender`] adds more.
    pub senders: u8,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            rate_mbit: 10,
            limit_bytes: 60_000,
            k_bytes: 20_000,
            marking: true,
            senders: 2,
        }
    }
}

impl Config {
    /// Checks the bounds on each field.
    ///
    /// # Errors
    /// [`Error::Config`] saying which bound is broken.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if !(1..=10_000).contains(&self.rate_mbit) {
            return bad(format!(
                "rate {} Mbit/s is not in 1..=10000",
                self.rate_mbit
            ));
        }
        if !(1600..=64 << 20).contains(&self.limit_bytes) {
            return bad(format!(
                "bfifo limit {} bytes is not in 1600..=67108864",
                self.limit_bytes
            ));
        }
        if self.k_bytes >= self.limit_bytes {
            return bad(format!(
                "K {} bytes is not below the limit {}",
                self.k_bytes, self.limit_bytes
            ));
        }
        if !(1..=MAX_SENDERS).contains(&self.senders) {
            return bad(format!(
                "{} senders is not in 1..={MAX_SENDERS}",
                self.senders
            ));
        }
        Ok(())
    }
}

/// A namespace of the dumbbell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// Sender 1 ..= 4 (`10.77.i.2`).
    Sender(u8),
    /// The router (the bottleneck is its egress toward the receiver).
    Router,
    /// The receiver (`10.77.100.2`).
    Receiver,
}

/// Why a dumbbell could not be built or read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not running as root.
    #[error(
        "the ECN dumbbell needs root (network namespaces, tc, BPF): run the tests as root, \
         as CI does"
    )]
    NotRoot,
    /// A tool or header is not installed.
    #[error("{what} is missing: apt-get install {package} (scripts/test installs it)")]
    Missing {
        /// The program or file.
        what: String,
        /// Its Debian package.
        package: &'static str,
    },
    /// A [`Config`] out of bounds, or a 5th sender.
    #[error("ECN dumbbell: {0}")]
    Config(String),
    /// A tool exited non-zero or overran its time.
    #[error("{what} failed ({status}): {stderr}")]
    Command {
        /// The tool and its arguments.
        what: String,
        /// Its exit status, or why it was killed.
        status: String,
        /// What it said.
        stderr: String,
    },
    /// A file or system call failed.
    #[error("{what}: {source}")]
    Io {
        /// The path or call.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A tool's output did not read.
    #[error(transparent)]
    Parse(#[from] ParseError),
}

impl Error {
    fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            what: path.display().to_string(),
            source,
        }
    }
}

/// A running dumbbell; dropping it removes everything it made.
#[derive(Debug)]
pub struct Dumbbell {
    config: Config,
    tools: sys::Tools,
    /// `rkecn-<pid>-<n>`.
    prefix: String,
    /// `e<pid36>x<n36>`.
    tag: String,
    senders: u8,
    /// Namespaces made so far, deleted in reverse on drop.
    made: Vec<String>,
    map: Option<u32>,
    dir: tempfile::TempDir,
}

impl Dumbbell {
    /// Builds the dumbbell `config` describes (see the module's page),
    /// first clearing what killed earlier runs left behind.
    ///
    /// # Errors
    /// A bad `config`, not root, a missing tool (naming its Debian package),
    /// or a step that failed (with the tool's complaint). What was made so
    /// far is removed.
    pub fn up(config: Config) -> Result<Dumbbell, Error> {
        config.validate()?;
        if !sys::root() {
            return Err(Error::NotRoot);
        }
        let tools = sys::Tools::find(config.marking)?;
        sys::clear_stale(&tools);
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let (pid, n) = (std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}{pid}-", sys::DIR_PREFIX))
            .tempdir()
            .map_err(|e| Error::io(&std::env::temp_dir(), e))?;
        let mut d = Dumbbell {
            config,
            tools,
            prefix: format!("{}{pid}-{n}", sys::NS_PREFIX),
            tag: format!("e{}x{}", base36(pid), base36(n)),
            senders: 0,
            made: Vec::new(),
            map: None,
            dir,
        };
        if d.tag.len() + 3 > 15 {
            return Err(Error::Config(format!(
                "interface names of tag {} would be over 15 characters",
                d.tag
            )));
        }
        let obj = match config.marking {
            true => Some(marker::build(
                &d.tools,
                d.dir.path(),
                u64::from(config.rate_mbit) * 1_000_000,
                config.k_bytes,
                config.limit_bytes,
            )?),
            false => None,
        };
        d.namespace(Node::Router)?;
        sys::sysctl(&d.ns(Node::Router), "net/ipv4/ip_forward", "1")?;
        d.namespace(Node::Receiver)?;
        d.link(RX_NET, &d.bottleneck_if(), Node::Receiver)?;
        let (r, bif) = (d.ns(Node::Router), d.bottleneck_if());
        let rate = format!("{}mbit", config.rate_mbit);
        d.tc(&[
            &r, "qdisc", "add", "dev", &bif, "root", "handle", "1:", "htb", "default", "10",
        ])?;
        d.tc(&[
            &r, "class", "add", "dev", &bif, "parent", "1:", "classid", CLASS, "htb", "rate",
            &rate, "ceil", &rate,
        ])?;
        d.tc(&[
            &r,
            "qdisc",
            "add",
            "dev",
            &bif,
            "parent",
            CLASS,
            "handle",
            "10:",
            "bfifo",
            "limit",
            &config.limit_bytes.to_string(),
        ])?;
        if let Some(obj) = obj {
            d.map = Some(marker::attach(&d.tools, &r, &bif, &obj)?);
        }
        for _ in 0..config.senders {
            d.add_sender()?;
        }
        Ok(d)
    }

    /// Adds the next sender (a namespace, its link to the router, routes):
    /// for a sender that joins mid-run. Traffic already flowing is not
    /// disturbed. Returns it.
    ///
    /// # Errors
    /// With [`MAX_SENDERS`] already, or a step failed.
    pub fn add_sender(&mut self) -> Result<Node, Error> {
        if self.senders >= MAX_SENDERS {
            return Err(Error::Config(format!(
                "already {MAX_SENDERS} senders, the most a dumbbell has"
            )));
        }
        let node = Node::Sender(self.senders + 1);
        self.namespace(node)?;
        self.senders += 1;
        self.link(
            self.senders,
            &format!("{}-r{}", self.tag, self.senders),
            node,
        )?;
        Ok(node)
    }

    /// The configuration it was built with.
    pub fn config(&self) -> Config {
        self.config
    }

    /// The senders it has now.
    pub fn senders(&self) -> u8 {
        self.senders
    }

    /// `node`'s namespace name (for `ip netns exec`, `ip -n`, `tc -n`).
    ///
    /// # Panics
    /// When this dumbbell has no such node (a sender beyond [`Dumbbell::senders`]).
    pub fn ns(&self, node: Node) -> String {
        self.check(node);
        self.ns_name(node)
    }

    fn ns_name(&self, node: Node) -> String {
        match node {
            Node::Sender(i) => format!("{}-s{i}", self.prefix),
            Node::Router => format!("{}-r", self.prefix),
            Node::Receiver => format!("{}-rx", self.prefix),
        }
    }

    /// `node`'s address: a sender's or the receiver's own; for the router,
    /// its address toward the receiver.
    ///
    /// # Panics
    /// As [`Dumbbell::ns`].
    pub fn addr(&self, node: Node) -> Ipv4Addr {
        self.check(node);
        match node {
            Node::Sender(i) => Ipv4Addr::new(10, 77, i, 2),
            Node::Router => Ipv4Addr::new(10, 77, RX_NET, 1),
            Node::Receiver => Ipv4Addr::new(10, 77, RX_NET, 2),
        }
    }

    /// `node`'s interface in its namespace (a sender's or the receiver's
    /// veth end; for the router, the bottleneck interface).
    ///
    /// # Panics
    /// As [`Dumbbell::ns`].
    pub fn ifname(&self, node: Node) -> String {
        self.check(node);
        match node {
            Node::Sender(i) => format!("{}-s{i}", self.tag),
            Node::Router => self.bottleneck_if(),
            Node::Receiver => format!("{}-xr", self.tag),
        }
    }

    /// Gives the receiver a further address, `10.77.100.last` (3..=254),
    /// behind the same bottleneck (the router's neighbour entry for it is
    /// static, as the others): for a second endpoint that needs an address
    /// of its own there (a soft NIC binds one address per context).
    ///
    /// # Errors
    /// `last` outside 3..=254, or `ip` failing (the address already there).
    pub fn add_receiver_address(&self, last: u8) -> Result<Ipv4Addr, Error> {
        if !(3..=254).contains(&last) {
            return Err(Error::Config(format!(
                "receiver address 10.77.{RX_NET}.{last}: the last byte must be 3..=254"
            )));
        }
        let a = Ipv4Addr::new(10, 77, RX_NET, last);
        let (rx, r) = (self.ns(Node::Receiver), self.ns(Node::Router));
        self.ip(&[
            "-n",
            &rx,
            "addr",
            "add",
            &format!("{a}/24"),
            "dev",
            &self.ifname(Node::Receiver),
        ])?;
        self.ip(&[
            "-n",
            &r,
            "neigh",
            "replace",
            &a.to_string(),
            "lladdr",
            &link_mac(RX_NET, 2),
            "dev",
            &self.bottleneck_if(),
            "nud",
            "permanent",
        ])?;
        Ok(a)
    }

    /// The router's interface toward the receiver, where the HTB, the bfifo
    /// and the marker are.
    pub fn bottleneck_if(&self) -> String {
        format!("{}-rx", self.tag)
    }

    /// The dumbbell's temporary directory (the marker's source and object;
    /// a place for a test's files), removed on drop.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A command running `program` in `node`'s namespace (`ip netns exec`,
    /// which also shows it the namespace's /sys), stdin closed. Add
    /// arguments and environment as to any command; start it with
    /// [`Dumbbell::spawn`] so it dies with the dumbbell.
    ///
    /// # Panics
    /// As [`Dumbbell::ns`].
    pub fn command(&self, node: Node, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new(&self.tools.ip);
        c.args(["netns", "exec"])
            .arg(self.ns(node))
            .arg(program)
            .stdin(Stdio::null());
        c
    }

    /// A command re-running this test binary's `#[ignore]`d test `test`
    /// alone in `node`'s namespace (`--exact test --ignored --nocapture
    /// --test-threads=1`): the usual way to run a program of one's own there
    /// (a soft-NIC endpoint, a traffic source). Give it its settings with
    /// `.env(..)`; its output is piped.
    ///
    /// # Panics
    /// As [`Dumbbell::ns`], or when the running binary's path is unknown.
    pub fn test_command(&self, node: Node, test: &str) -> Command {
        let exe = std::env::current_exe().expect("the running test binary's path");
        let mut c = self.command(node, exe);
        c.args([
            "--exact",
            test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        c
    }

    /// Starts `cmd` (from [`Dumbbell::command`]) in its own process group,
    /// SIGKILLed when the calling thread ends, when the [`Running`] drops,
    /// and when the dumbbell drops (everything in its namespaces is).
    ///
    /// # Errors
    /// When it cannot be started.
    pub fn spawn(&self, cmd: &mut Command) -> Result<Running, Error> {
        let child = crate::spawn_dying_with_thread(cmd).map_err(|e| Error::Io {
            what: format!("start {:?}", cmd.get_args().collect::<Vec<_>>()),
            source: e,
        })?;
        Ok(Running { child: Some(child) })
    }

    /// Runs `f` on a thread inside `node`'s namespace and returns what it
    /// returns: sockets it makes belong to the namespace and can be used
    /// from any thread afterwards.
    ///
    /// # Errors
    /// When the namespace cannot be entered.
    ///
    /// # Panics
    /// As [`Dumbbell::ns`], or when `f` panics.
    pub fn in_netns<T: Send>(&self, node: Node, f: impl FnOnce() -> T + Send) -> Result<T, Error> {
        sys::in_netns(&self.ns(node), f)
    }

    /// A UDP socket bound to `node`'s address and `port` (0: any) inside its
    /// namespace.
    ///
    /// # Errors
    /// When the namespace cannot be entered or the bind fails.
    ///
    /// # Panics
    /// As [`Dumbbell::ns`].
    pub fn udp_socket(&self, node: Node, port: u16) -> Result<UdpSocket, Error> {
        let at = SocketAddrV4::new(self.addr(node), port);
        self.in_netns(node, || UdpSocket::bind(at))?
            .map_err(|e| Error::Io {
                what: format!("bind UDP {at} in {}", self.ns(node)),
                source: e,
            })
    }

    /// The bottleneck's counters now: the HTB and bfifo (`tc -s -j qdisc
    /// show`), the class (`tc -s class show`) and the marker's map (bpftool)
    /// when marking. Take one before and one after a run and use
    /// [`Bottleneck::since`].
    ///
    /// # Errors
    /// A tool failed or its output did not read.
    pub fn stats(&self) -> Result<Bottleneck, Error> {
        let (r, bif) = (self.ns(Node::Router), self.bottleneck_if());
        let q = self.tc(&[&r, "-s", "-j", "qdisc", "show", "dev", &bif])?;
        let (htb, bfifo) = stats::bottleneck_qdiscs(&stats::parse_qdiscs(&q)?, CLASS)?;
        let c = self.tc(&[&r, "-s", "class", "show", "dev", &bif])?;
        let class = stats::parse_classes(&c)?
            .into_iter()
            .find(|c| c.classid == CLASS)
            .ok_or_else(|| ParseError::Missing {
                what: "tc -s class show",
                missing: format!("class {CLASS}"),
            })?;
        let marker = self.marker()?;
        Ok(Bottleneck {
            htb,
            bfifo,
            class,
            marker,
        })
    }

    /// The marker's counters now (`None` when marking is off).
    ///
    /// # Errors
    /// bpftool failed or its output did not read.
    pub fn marker(&self) -> Result<Option<MarkerStats>, Error> {
        self.map.map(|m| marker::read(&self.tools, m)).transpose()
    }

    fn check(&self, node: Node) {
        if let Node::Sender(i) = node {
            assert!(
                (1..=self.senders).contains(&i),
                "this dumbbell has senders 1..={}, not {i}",
                self.senders
            );
        }
    }

    /// Makes `node`'s namespace with lo up and IPv6 off.
    fn namespace(&mut self, node: Node) -> Result<(), Error> {
        let ns = self.ns_name(node);
        self.ip(&["netns", "add", &ns])?;
        self.made.push(ns.clone());
        self.ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        sys::sysctl(&ns, "net/ipv6/conf/all/disable_ipv6", "1")?;
        sys::sysctl(&ns, "net/ipv6/conf/default/disable_ipv6", "1")?;
        Ok(())
    }

    /// The veth pair `near` (in the router) to `node` (a sender or the
    /// receiver) on 10.77.`net`.0/24, its addresses, static neighbours and
    /// routes.
    fn link(&self, net: u8, near: &str, node: Node) -> Result<(), Error> {
        let (r, ns, far) = (self.ns(Node::Router), self.ns(node), self.ifname(node));
        let mac = |end: u8| link_mac(net, end);
        let addr = |end: u8| format!("10.77.{net}.{end}");
        self.ip(&[
            "-n",
            &r,
            "link",
            "add",
            near,
            "address",
            &mac(1),
            "type",
            "veth",
            "peer",
            "name",
            &far,
            "address",
            &mac(2),
            "netns",
            &ns,
        ])?;
        self.ip(&[
            "-n",
            &r,
            "addr",
            "add",
            &format!("{}/24", addr(1)),
            "dev",
            near,
        ])?;
        self.ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{}/24", addr(2)),
            "dev",
            &far,
        ])?;
        self.ip(&["-n", &r, "link", "set", near, "up"])?;
        self.ip(&["-n", &ns, "link", "set", &far, "up"])?;
        for (n, a, m, dev) in [(&r, addr(2), mac(2), near), (&ns, addr(1), mac(1), &*far)] {
            self.ip(&[
                "-n",
                n,
                "neigh",
                "replace",
                &a,
                "lladdr",
                &m,
                "dev",
                dev,
                "nud",
                "permanent",
            ])?;
        }
        self.ip(&["-n", &ns, "route", "add", "default", "via", &addr(1)])?;
        Ok(())
    }

    fn ip(&self, args: &[&str]) -> Result<String, Error> {
        sys::run(Command::new(&self.tools.ip).args(args), "ip")
    }

    /// `tc -n NS args...` (`args[0]` is the namespace).
    fn tc(&self, args: &[&str]) -> Result<String, Error> {
        sys::run(Command::new(&self.tools.tc).arg("-n").args(args), "tc")
    }
}

/// The fixed MAC address of end `end` (1: the router's, 2: the node's) of
/// the link on 10.77.`net`.0/24.
fn link_mac(net: u8, end: u8) -> String {
    format!("02:77:{net:02x}:00:00:{end:02x}")
}

impl Drop for Dumbbell {
    fn drop(&mut self) {
        for ns in self.made.iter().rev() {
            sys::delete_netns(&self.tools, ns);
        }
    }
}

/// A process started by [`Dumbbell::spawn`]: SIGKILLed (its whole process
/// group) when dropped unless waited for.
#[derive(Debug)]
pub struct Running {
    child: Option<Child>,
}

impl Running {
    /// Its pid (that of the program: `ip netns exec` execs it).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Waits at most `limit` for it to exit and returns its output (piped
    /// streams are read while it runs).
    ///
    /// # Panics
    /// Past `limit`: it is killed and the test fails showing its output.
    pub fn wait(mut self, limit: Duration, what: &str) -> Output {
        let child = self
            .child
            .take()
            .expect("a Running holds its child until waited");
        crate::wait(child, limit, what)
    }

    /// Whether it has exited (without reaping what it said).
    pub fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .map_or(true, |c| c.try_wait().map_or(true, |s| s.is_some()))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: plain syscall; the group is the one spawn created
            // (the child is unreaped, so its pid cannot be reused).
            unsafe { libc::kill(-(c.id() as libc::pid_t), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

fn base36(mut v: u32) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(v % 36) as usize]);
        v /= 36;
        if v == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_fit_for_any_pid() {
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
        // pid_max is at most 2^22; 1296 dumbbells in one process.
        let tag = format!("e{}x{}", base36(1 << 22), base36(1295));
        assert!(tag.len() + 3 <= 15, "{tag}");
    }

    #[test]
    fn bad_configurations_are_errors_saying_which_bound() {
        let d = Config::default();
        assert!(d.validate().is_ok());
        for (c, word) in [
            (Config { rate_mbit: 0, ..d }, "rate"),
            (
                Config {
                    limit_bytes: 1000,
                    ..d
                },
                "limit",
            ),
            (
                Config {
                    k_bytes: 60_000,
                    ..d
                },
                "K",
            ),
            (Config { senders: 0, ..d }, "senders"),
            (Config { senders: 5, ..d }, "senders"),
        ] {
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(word), "{e}");
        }
    }
}
