//! rdmakit: the RDMA stack's verification and troubleshooting toolchain.
//!
//! A thin binary: argument parsing (raw flags, then validated settings) and glue to
//! the library crates. Here, the command line itself, and `rdmakit completions
//! SHELL` and `rdmakit man`: shell completions and man pages generated from it
//! (crates/manual), so they never drift from the flags; the Debian package ships
//! both (scripts/package).

mod cmd;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};
use rdmakit_verbs::ProviderChoice;
use rdmakit_vocab::exit::Exit;

/// Verifies and troubleshoots an RDMA host layer by layer (hardware, kernel, library,
/// application) and names the layer at fault.
#[derive(Parser)]
#[command(name = "rdmakit", version, about, max_term_width = 100)]
struct Cli {
    /// When to color output: auto (terminal and NO_COLOR unset), always, never.
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    color: clap::ColorChoice,
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
    Explain(cmd::doctor::ExplainArgs),
    /// Record everything the doctor reads into one replayable bundle file.
    Collect(cmd::collect::Args),
    /// Decode RoCEv2 packets in a pcap/pcapng file, validate every ICRC, flag anomalies.
    Pcap(cmd::pcap::Args),
    /// RDMA devices from the kernel (NETLINK_RDMA), like `rdma dev`.
    Dev(cmd::res::DevArgs),
    /// Device and port attributes, line-compatible with ibv_devinfo (-v: every limit, GIDs).
    Devinfo(cmd::verbs::Args),
    /// RDMA ports and their state, like `rdma link`.
    Link(cmd::res::LinkArgs),
    /// Tracked RDMA objects (qp, cq, mr, pd, ctx, srq, cm_id) and their owners.
    Res(cmd::res::Args),
    /// Port hardware counters and QP counters, like `rdma statistic`.
    Stat(cmd::res::StatArgs),
    /// Print RDMA device events until Ctrl-C (live only).
    Monitor(cmd::res::MonitorArgs),
    /// Prometheus metrics: stdout, a textfile for node_exporter (-o), or an exporter (--listen).
    Metrics(cmd::metrics::Args),
    /// perftest-shaped bandwidth/latency tests over RC (server without HOST), with control-path timings.
    Perf(cmd::perf::Args),
    /// The soft NIC's shared resource registry: objects per owner (status), free dead owners' (reclaim).
    #[command(subcommand)]
    Soft(cmd::soft::Args),
    /// Install the drop-in libibverbs.so.1: unmodified ibverbs programs and perftest on the soft NIC.
    #[command(subcommand)]
    Shim(cmd::soft::ShimArgs),
    /// The doctor across a cluster: aggregate node reports (report), expected inventory
    /// (baseline), every node of a Slurm partition as one job step (sweep).
    Fleet(cmd::fleet::Args),
    /// The InfiniBand subnet through a local port: its nodes and links (discover), every port's counters (counters), what is wrong with it (check).
    #[command(subcommand)]
    Fabric(cmd::fabric::Args),
    /// Run the verbs conformance suite (loopback RC/UC/UD/SRQ/events) on one device.
    VerbsTest(cmd::verbs::VerbsTestArgs),
    /// Interrupt vectors per RDMA device: the CPUs they land on, the NUMA node, the verdict.
    Irq(cmd::doctor::IrqArgs),
    /// Print a shell completion script (bash, zsh, fish) generated from this CLI.
    Completions(CompletionsArgs),
    /// Print the man page, or write one per subcommand with --dir (generated from this CLI).
    Man(ManArgs),
}

fn main() -> ExitCode {
    rdmakit_host::process::end_quietly_on_closed_pipe();
    let matches = rdmakit_manual::with_exit_status(Cli::command()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    cmd::apply_color(cli.color);
    // The provider is read once, here, and passed down: `--provider`, else
    // RDMAKIT_PROVIDER (whose bad value is an error only for a command that
    // opens a device through it).
    let replays = matches!(&cli.command, Command::Devinfo(a) if a.replays());
    let typed = || rdmakit_manual::typed(&matches) + if replays { " --from/--root" } else { "" };
    let opens = cli.command.opens_devices();
    let provider = match ProviderChoice::for_subcommand(cli.provider.as_deref(), opens, &typed) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rdmakit: error: {e}");
            return Exit::Failed.into();
        }
    };
    let r = match cli.command {
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Explain(a) => cmd::doctor::explain(a),
        Command::Collect(a) => cmd::collect::run(a),
        Command::Pcap(a) => cmd::pcap::run(a),
        Command::Dev(a) => cmd::res::dev(a),
        Command::Devinfo(a) => cmd::verbs::devinfo(a, provider),
        Command::Link(a) => cmd::res::link(a),
        Command::Res(a) => cmd::res::run(a),
        Command::Stat(a) => cmd::res::stat(a),
        Command::Monitor(a) => cmd::res::monitor(a),
        Command::Metrics(a) => cmd::metrics::run(a),
        Command::Perf(a) => cmd::perf::run(a, provider),
        Command::Soft(a) => cmd::soft::run(a),
        Command::Shim(a) => cmd::soft::shim(a),
        Command::VerbsTest(a) => cmd::verbs::verbs_test(a, provider),
        Command::Fleet(a) => cmd::fleet::run(a, provider),
        Command::Fabric(a) => cmd::fabric::run(a),
        Command::Irq(a) => cmd::doctor::irq(a),
        Command::Completions(a) => completions(a, Cli::command()),
        Command::Man(a) => man(a, Cli::command()),
    };
    match r {
        Ok(exit) => exit.into(),
        Err(e) => {
            let said = rdmakit_vocab::errno::said_once(e.as_ref());
            eprintln!("rdmakit: error: {said}");
            Exit::Failed.into()
        }
    }
}

impl Command {
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

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish (also elvish, powershell).
    #[arg(value_name = "SHELL")]
    shell: rdmakit_manual::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Write rdmakit.1 and one page per subcommand (rdmakit-doctor.1, rdmakit-soft-status.1,
    /// ...) into DIR; without it, print rdmakit.1 to stdout.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the completion script for the shell to stdout.
pub fn completions(a: CompletionsArgs, cmd: clap::Command) -> anyhow::Result<Exit> {
    rdmakit_manual::completions(a.shell, cmd, &mut std::io::stdout());
    Ok(Exit::Ok)
}

/// Prints the man page, or writes every page into `--dir`.
pub fn man(a: ManArgs, cmd: clap::Command) -> anyhow::Result<Exit> {
    match &a.dir {
        None => std::io::stdout().write_all(rdmakit_manual::page(cmd)?.as_bytes())?,
        Some(dir) => {
            let n = rdmakit_manual::write_pages(cmd, dir)?;
            eprintln!("rdmakit: wrote {n} man pages to {}", dir.display());
        }
    }
    Ok(Exit::Ok)
}
