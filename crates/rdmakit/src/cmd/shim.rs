//! `rdmakit shim install DIR`: lays out the drop-in libibverbs.so.1 (crate
//! ibverbs-shim) so unmodified programs run on the soft NIC with
//! `LD_LIBRARY_PATH=DIR`; `rdmakit_soft::install` says where the library is
//! found and what is installed beside it. As root it also creates the device
//! node UCX stats before it uses a device (`/dev/infiniband/rdmakit-soft0` →
//! `/dev/null`, see `rdmakit_soft::devnode`).

use std::path::PathBuf;

use rdmakit_soft::install;
use rdmakit_vocab::exit::Exit;

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

pub fn run(a: Args) -> anyhow::Result<Exit> {
    let Args::Install { dir, from, json } = a;
    let shim_lib = std::env::var_os("RDMAKIT_SHIM_LIB");
    let lib =
        install::locate(from, shim_lib, std::env::current_exe()).map_err(anyhow::Error::msg)?;
    let name = std::env::var("RDMAKIT_SOFT_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "soft0".to_string());
    let i = install::install(&lib, &dir, Some(&name)).map_err(anyhow::Error::msg)?;
    match json {
        true => println!("{}", rdmakit_res::install::json(&i)),
        false => print!("{}", i.text()),
    }
    Ok(Exit::Ok)
}
