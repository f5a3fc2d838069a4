//! `rdmakit shim install DIR`: lays out the drop-in libibverbs.so.1 (crate
//! ibverbs-shim) so unmodified programs run on the soft NIC with
//! `LD_LIBRARY_PATH=DIR`.
//!
//! The library is the workspace's `libibverbs.so` build product; cargo puts
//! it next to the rdmakit binary (`cargo build --release --workspace`), the
//! Debian package under /usr/lib/rdmakit, and `--from` names it anywhere
//! (after `cargo install`, which ships binaries only).
//! `libmlx5.so.1` and `libefa.so.1` — which perftest, UCX and libfabric
//! link — are links to the same file: it also exports every `mlx5dv_*` /
//! `efadv_*` symbol (they answer "not this vendor's device"). As root it
//! also creates the device node UCX stats before it uses a device
//! (`/dev/infiniband/rdmakit-soft0` → `/dev/null`, see
//! `rdmakit_soft::devnode`).
//! The drop-in librdmacm.so.1 (crate rdmacm-shim, built beside it as
//! `librdmacm.so`) is installed too when it is there.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use rdmakit_vocab::exit::Exit;
use serde_json::json;

#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// Put libibverbs.so.1, librdmacm.so.1 and the libmlx5.so.1 / libefa.so.1 links in DIR.
    Install {
        /// Target directory (created if missing).
        dir: PathBuf,
        /// The built library (default: libibverbs.so next to this binary, or $RDMAKIT_SHIM_LIB).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    match a {
        Args::Install { dir, from, json } => install(&dir, from, json),
    }
}

/// Where the built library is.
fn locate(from: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let named = match from {
        Some(f) => Some(("--from", f)),
        None => {
            std::env::var_os("RDMAKIT_SHIM_LIB").map(|f| ("RDMAKIT_SHIM_LIB", PathBuf::from(f)))
        }
    };
    if let Some((how, f)) = named {
        let why = match std::fs::metadata(&f) {
            Ok(m) if m.is_file() => return Ok(f),
            Ok(_) => "not a regular file".to_string(),
            Err(e) => rdmakit_vocab::errno::io_text(&e),
        };
        bail!(
            "{how} {}: {why}: name the built drop-in library (target/release/libibverbs.so \
             after `cargo build --release --workspace`)",
            f.display()
        );
    }
    let exe = std::env::current_exe().context("cannot find the rdmakit binary")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for cand in [
        dir.join("libibverbs.so"),
        dir.join("libibverbs.so.1"),
        dir.join("../lib/rdmakit/libibverbs.so.1"),
    ] {
        if cand.is_file() {
            return Ok(cand);
        }
    }
    bail!(
        "the drop-in libibverbs is not next to {} (looked for libibverbs.so, libibverbs.so.1 \
         and ../lib/rdmakit/libibverbs.so.1): build it in a checkout with `cargo build \
         --release -p rdmakit-ibverbs-shim -p rdmakit-rdmacm-shim` and pass `--from \
         target/release/libibverbs.so`, or install the Debian package (scripts/package)",
        exe.display()
    )
}

fn install(dir: &Path, from: Option<PathBuf>, json: bool) -> anyhow::Result<ExitCode> {
    let lib = locate(from)?;
    let name = std::env::var("RDMAKIT_SOFT_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "soft0".to_string());
    let i = rdmakit_soft::install::install(&lib, dir, Some(&name)).map_err(anyhow::Error::msg)?;
    if json {
        let node = i.node.as_ref();
        println!(
            "{}",
            json!({
                "library": i.library,
                "rdmacm": i.rdmacm,
                "links": i.links,
                "ld_library_path": i.dir,
                "rocev2_gid_index": rdmakit_soft::ROCEV2_GID_INDEX,
                "device_node": node.map(|n| &n.path),
                "device_node_status": node.map(|n| &n.status),
            })
        );
    } else {
        print!("{}", i.text());
    }
    Ok(Exit::Ok.into())
}
