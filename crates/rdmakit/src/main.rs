//! rdmakit: the RDMA stack's verification and troubleshooting toolchain.
//!
//! A thin binary: argument parsing (raw flags, then validated settings) and glue to
//! the library crates.

mod cmd;

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};
use rdmakit_vocab::exit::Exit;

/// Verifies and troubleshoots an RDMA host layer by layer (hardware, kernel, library,
/// application) and names the layer at fault.
#[derive(Parser)]
#[command(name = "rdmakit", version, about, max_term_width = 100)]
struct Cli {
    /// When to color output: auto (terminal and NO_COLOR unset), always, never.
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    color: cmd::ColorWhen,
    /// The verbs provider devinfo, perf, verbs-test and fleet agent open devices
    /// through: auto (real devices through libibverbs if it lists any, else the soft
    /// NIC), soft, or ibverbs (overrides RDMAKIT_PROVIDER). Given before the
    /// subcommand: rdmakit --provider ibverbs devinfo.
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check every layer of the RDMA stack and report what is wrong, with evidence.
    Doctor(cmd::doctor::Args),
    /// Explain a finding code, an errno, a verb:errno pair or a work completion status.
    Explain(cmd::explain::Args),
    /// Record everything the doctor reads into one replayable bundle file.
    Collect(cmd::collect::Args),
    /// Decode RoCEv2 packets in a pcap/pcapng file, validate every ICRC, flag anomalies.
    Pcap(cmd::pcap::Args),
    /// RDMA devices from the kernel (NETLINK_RDMA), like `rdma dev`.
    Dev(cmd::dev::Args),
    /// Device and port attributes, line-compatible with ibv_devinfo (-v: every limit, GIDs).
    Devinfo(cmd::devinfo::Args),
    /// RDMA ports and their state, like `rdma link`.
    Link(cmd::link::Args),
    /// Tracked RDMA objects (qp, cq, mr, pd, ctx, srq, cm_id) and their owners.
    Res(cmd::res::Args),
    /// Port hardware counters and QP counters, like `rdma statistic`.
    Stat(cmd::stat::Args),
    /// Print RDMA device events until Ctrl-C (live only).
    Monitor(cmd::monitor::Args),
    /// Prometheus metrics: stdout, a textfile for node_exporter (-o), or an exporter (--listen).
    Metrics(cmd::metrics::Args),
    /// perftest-shaped bandwidth/latency tests over RC (server without HOST), with control-path timings.
    Perf(cmd::perf::Args),
    /// The soft NIC's shared resource registry: objects per owner (status), free dead owners' (reclaim).
    #[command(subcommand)]
    Soft(cmd::soft::Args),
    /// Install the drop-in libibverbs.so.1: unmodified ibverbs programs and perftest on the soft NIC.
    #[command(subcommand)]
    Shim(cmd::shim::Args),
    /// The doctor across a cluster: aggregate node reports (report), expected inventory
    /// (baseline), every node of a Slurm partition as one job step (sweep).
    Fleet(cmd::fleet::Args),
    /// Run the verbs conformance suite (loopback RC/UC/UD/SRQ/events) on one device.
    VerbsTest(cmd::verbstest::Args),
    /// Interrupt vectors per RDMA device: the CPUs they land on, the NUMA node, the verdict.
    Irq(cmd::irq::Args),
    /// Print a shell completion script (bash, zsh, fish) generated from this CLI.
    Completions(cmd::surface::CompletionsArgs),
    /// Print the man page, or write one per subcommand with --dir (generated from this CLI).
    Man(cmd::surface::ManArgs),
}

fn main() -> ExitCode {
    rdmakit_host::process::end_quietly_on_closed_pipe();
    let matches = cmd::surface::with_exit_status(Cli::command()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    cli.color.apply();
    if cli.provider.is_some() && !cli.command.opens_devices() {
        eprintln!(
            "rdmakit: error: --provider chooses how devinfo, perf, verbs-test and fleet agent \
             open a device; `rdmakit {}` opens none: leave --provider out",
            cli.command.name()
        );
        return Exit::Failed.into();
    }
    // The provider is read once, here, and passed down: `--provider`, else
    // RDMAKIT_PROVIDER (whose bad value is an error only for a command that
    // opens a device through it).
    let provider = match &cli.provider {
        Some(p) => match rdmakit_verbs::ProviderChoice::parse(p) {
            Ok(c) => Ok(c),
            Err(e) => {
                eprintln!("rdmakit: error: --provider: {}", e.detail);
                return Exit::Failed.into();
            }
        },
        None => rdmakit_verbs::ProviderChoice::from_env(),
    };
    let r = match cli.command {
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Explain(a) => cmd::explain::run(a),
        Command::Collect(a) => cmd::collect::run(a),
        Command::Pcap(a) => cmd::pcap::run(a),
        Command::Dev(a) => cmd::dev::run(a),
        Command::Devinfo(a) => cmd::devinfo::run(a, provider),
        Command::Link(a) => cmd::link::run(a),
        Command::Res(a) => cmd::res::run(a),
        Command::Stat(a) => cmd::stat::run(a),
        Command::Monitor(a) => cmd::monitor::run(a),
        Command::Metrics(a) => cmd::metrics::run(a),
        Command::Perf(a) => cmd::perf::run(a, provider),
        Command::Soft(a) => cmd::soft::run(a),
        Command::Shim(a) => cmd::shim::run(a),
        Command::VerbsTest(a) => cmd::verbstest::run(a, provider),
        Command::Fleet(a) => cmd::fleet::run(a, provider),
        Command::Irq(a) => cmd::irq::run(a),
        Command::Completions(a) => cmd::surface::completions(a, Cli::command()),
        Command::Man(a) => cmd::surface::man(a, Cli::command()),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rdmakit: error: {}", said_once(&e));
            Exit::Failed.into()
        }
    }
}

impl Command {
    /// The subcommand's name, as typed.
    fn name(&self) -> String {
        let id = match self {
            Command::Doctor(_) => "doctor",
            Command::Explain(_) => "explain",
            Command::Collect(_) => "collect",
            Command::Pcap(_) => "pcap",
            Command::Dev(_) => "dev",
            Command::Devinfo(a) if a.replays() => "devinfo --from/--root",
            Command::Devinfo(_) => "devinfo",
            Command::Link(_) => "link",
            Command::Res(_) => "res",
            Command::Stat(_) => "stat",
            Command::Monitor(_) => "monitor",
            Command::Metrics(_) => "metrics",
            Command::Perf(_) => "perf",
            Command::Soft(_) => "soft",
            Command::Shim(_) => "shim",
            Command::VerbsTest(_) => "verbs-test",
            Command::Fleet(a) => return format!("fleet {}", a.name()),
            Command::Irq(_) => "irq",
            Command::Completions(_) => "completions",
            Command::Man(_) => "man",
        };
        id.to_string()
    }

    /// Whether the subcommand opens a device through a verbs provider (the only
    /// ones `--provider` applies to).
    fn opens_devices(&self) -> bool {
        match self {
            Command::Devinfo(a) => !a.replays(),
            Command::Perf(_) | Command::VerbsTest(_) => true,
            Command::Fleet(a) => a.opens_devices(),
            _ => false,
        }
    }
}

/// The error and its causes (as `{:#}` prints them), each said once, in
/// rdmakit's words: a cause whose text is already in the message — an error
/// type that prints its source and also returns it — is not repeated ("…: No
/// such file or directory (os error 2): No such file or directory (os error
/// 2)"), and Rust's "MESSAGE (os error N)" becomes "ENAME (MESSAGE)".
fn said_once(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !out.contains(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    rdmakit_vocab::errno::plain(&out)
}

#[cfg(test)]
mod tests {
    use super::said_once;

    /// An error type that shows its source and also returns it: said once,
    /// and with the errno's name rather than Rust's wording.
    #[derive(Debug)]
    struct Doubling(std::io::Error);
    impl std::fmt::Display for Doubling {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "/nonexistent: {}", self.0)
        }
    }
    impl std::error::Error for Doubling {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn enoent_is_said_once_by_its_name() {
        let io = std::io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(Doubling(io)).context("--baseline x");
        assert_eq!(
            said_once(&e),
            "--baseline x: /nonexistent: ENOENT (No such file or directory)"
        );
        let plain = anyhow::Error::new(std::io::Error::from_raw_os_error(2)).context("reading f");
        assert_eq!(
            said_once(&plain),
            "reading f: ENOENT (No such file or directory)"
        );
    }
}
