//! Which provider the tools use: a [`Choice`] of `auto` (default), `soft`
//! or `ibverbs`, passed explicitly. The edges read it once: the CLI from
//! `--provider`, else `RDMAKIT_PROVIDER` ([`Choice::from_env`]). Selecting
//! by name is itself an edge for the soft NIC: its configuration is
//! [`SoftProvider::from_env`].
//!
//! * `soft`: the built-in software NIC only.
//! * `ibverbs`: rdma-core's libibverbs only (`RDMAKIT_IBVERBS_LIB` names
//!   another library, e.g. the rdmakit shim); its errors are reported, never
//!   hidden by a fallback.
//! * `auto`: real devices when libibverbs loads and lists at least one,
//!   the soft NIC otherwise; a soft NIC name (`soft0`) still opens the soft
//!   NIC when real devices exist.

use std::sync::Arc;

use super::{IbverbsProvider, DEFAULT_LIBRARY, LIBRARY_ENV};
use crate::error::{Errno, Error, Layer, Result};
use crate::objects::Context;
use crate::provider::{Provider, SoftProvider};

/// The environment variable choosing the provider.
pub const PROVIDER_ENV: &str = "RDMAKIT_PROVIDER";

/// A provider choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Real devices if libibverbs has any, else the soft NIC.
    Auto,
    /// The soft NIC.
    Soft,
    /// libibverbs.
    Ibverbs,
}

impl Choice {
    /// Parses `auto`, `soft` or `ibverbs` (also `rdma-core`).
    ///
    /// # Errors
    /// `EINVAL` (application layer) for anything else.
    pub fn parse(s: &str) -> Result<Choice> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Choice::Auto),
            "soft" => Ok(Choice::Soft),
            "ibverbs" | "rdma-core" | "libibverbs" => Ok(Choice::Ibverbs),
            other => Err(Error::application(
                "provider selection",
                Errno::EINVAL,
                format!("{PROVIDER_ENV}={other:?}: expected auto, soft or ibverbs"),
            )),
        }
    }

    /// The choice in `RDMAKIT_PROVIDER` (unset: auto).
    ///
    /// # Errors
    /// As [`Choice::parse`].
    pub fn from_env() -> Result<Choice> {
        Choice::parse(&std::env::var(PROVIDER_ENV).unwrap_or_default())
    }

    /// The choice for a subcommand: as [`Choice::from_flag_or_env`], but
    /// `flag` is refused when the subcommand opens no device (`opens`), the
    /// message naming it as typed (`typed`).
    ///
    /// # Errors
    /// The message to print: `flag` given to a subcommand that opens no
    /// device, or naming no provider.
    pub fn for_subcommand(
        flag: Option<&str>,
        opens: bool,
        typed: &dyn Fn() -> String,
    ) -> std::result::Result<Result<Choice>, String> {
        if flag.is_some() && !opens {
            return Err(format!(
                "--provider chooses how devinfo, perf, verbs-test and fleet agent open a \
                 device; `rdmakit {}` opens none: leave --provider out",
                typed()
            ));
        }
        Choice::from_flag_or_env(flag).map_err(|e| format!("--provider: {}", e.detail))
    }

    /// The choice `flag` (`--provider`) makes, else the environment's
    /// ([`Choice::from_env`]). A bad flag is an error now; a bad
    /// `RDMAKIT_PROVIDER` is kept as the inner error, which only a command
    /// that opens a device through the provider reports.
    ///
    /// # Errors
    /// `flag` is not a provider ([`Choice::parse`]).
    pub fn from_flag_or_env(flag: Option<&str>) -> Result<Result<Choice>> {
        match flag {
            Some(p) => Choice::parse(p).map(Ok),
            None => Ok(Choice::from_env()),
        }
    }
}

/// The libibverbs the tools load, read once at the edge:
/// `RDMAKIT_IBVERBS_LIB` (e.g. the rdmakit shim), else [`DEFAULT_LIBRARY`].
pub fn library_from_env() -> String {
    library_from(std::env::var(LIBRARY_ENV).ok())
}

/// The library `value` (the variable's) names: an unset or empty value is
/// [`DEFAULT_LIBRARY`].
pub fn library_from(value: Option<String>) -> String {
    value
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_LIBRARY.to_string())
}

/// The real-device provider and its device names, when libibverbs loads
/// and lists at least one device.
fn real() -> Option<(IbverbsProvider, Vec<String>)> {
    let p = IbverbsProvider::load_from(&library_from_env()).ok()?;
    let names = p.device_names().ok()?;
    (!names.is_empty()).then_some((p, names))
}

/// The provider whose devices the tools list under `choice`.
///
/// # Errors
/// With `ibverbs`, the library failing to load.
pub fn default_provider(choice: Choice) -> Result<Arc<dyn Provider>> {
    Ok(match choice {
        Choice::Soft => Arc::new(SoftProvider::from_env()?),
        Choice::Ibverbs => Arc::new(IbverbsProvider::load_from(&library_from_env())?),
        Choice::Auto => match real() {
            Some((p, _)) => Arc::new(p),
            None => Arc::new(SoftProvider::from_env()?),
        },
    })
}

/// Device names of the provider `choice` selects.
///
/// # Errors
/// As [`default_provider`], and its listing errors.
pub fn devices(choice: Choice) -> Result<Vec<String>> {
    default_provider(choice)?.device_names()
}

/// Opens `name`: through the provider `choice` selects, or in `auto` mode through
/// libibverbs when it lists `name` and the soft NIC when that is its name.
///
/// # Errors
/// `ENODEV` (library layer) when no provider has `name`; open errors.
pub fn open_device(choice: Choice, name: &str) -> Result<Arc<Context>> {
    let mut tried = Vec::new();
    if choice != Choice::Soft {
        match IbverbsProvider::load_from(&library_from_env()) {
            Ok(p) => match p.device_names() {
                Ok(names) if names.iter().any(|n| n == name) => return Context::open(&p, name),
                Ok(names) => tried.push(format!("libibverbs lists {}", name_list(&names))),
                Err(e) if choice == Choice::Ibverbs => return Err(e),
                Err(e) => tried.push(format!("libibverbs: {e}")),
            },
            Err(e) if choice == Choice::Ibverbs => return Err(e),
            Err(e) => tried.push(format!("libibverbs: {e}")),
        }
    }
    if choice != Choice::Ibverbs {
        let soft = SoftProvider::from_env()?;
        let names = soft.device_names()?;
        if names.iter().any(|n| n == name) {
            return Context::open(&soft, name);
        }
        tried.push(format!("the soft NIC is {}", name_list(&names)));
    }
    Err(Error {
        verb: "ibv_open_device",
        errno: Errno::ENODEV,
        layer: Layer::Library,
        detail: format!("no device named {name:?} ({})", tried.join("; ")),
        bad_wr: None,
    })
}

/// `mlx5_0, mlx5_1`, or `no device`: names as a person reads them.
pub(crate) fn name_list(names: &[String]) -> String {
    if names.is_empty() {
        "no device".to_string()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_the_variables_else_the_default() {
        assert_eq!(library_from(None), DEFAULT_LIBRARY);
        assert_eq!(library_from(Some(String::new())), DEFAULT_LIBRARY);
        assert_eq!(
            library_from(Some("/opt/shim/libibverbs.so.1".into())),
            "/opt/shim/libibverbs.so.1"
        );
    }

    #[test]
    fn choices_parse_and_bad_values_are_application_errors() {
        assert_eq!(Choice::parse("").unwrap(), Choice::Auto);
        assert_eq!(Choice::parse("Soft").unwrap(), Choice::Soft);
        assert_eq!(Choice::parse("rdma-core").unwrap(), Choice::Ibverbs);
        let e = Choice::parse("mlx5").unwrap_err();
        assert_eq!((e.errno, e.layer), (Errno::EINVAL, Layer::Application));
        assert!(e.detail.contains("mlx5"), "{e}");
    }
}
