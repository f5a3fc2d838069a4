//! The rdma-core provider: real RDMA devices through libibverbs.so.1,
//! loaded with `dlopen` at run time (no link-time dependency, nothing of
//! rdma-core compiled in).
//!
//! * Control path: the exported `ibv_*` entry points ([`library`]).
//! * Data path: `ibv_post_send`, `ibv_post_recv`, `ibv_post_srq_recv`,
//!   `ibv_poll_cq` and `ibv_req_notify_cq` are inline in verbs.h; they are
//!   called through `ibv_context.ops` exactly as the C helpers do, and
//!   `ibv_query_port` through `verbs_context.query_port` when the context is
//!   extended (`abi_compat`, `sz`), like the header's macro. Struct layouts
//!   come from `rdmakit-ibverbs-abi`, checked against rdma-core 44's verbs.h.
//! * A missing library is an error of the library layer naming the file
//!   looked for and the `dlerror` text (verb `dlopen`, `ENOENT`).
//!
//! Which provider the tools use: [`select`] (`RDMAKIT_PROVIDER`).
//!
//! ```no_run
//! use rdmakit_verbs::{ibverbs::IbverbsProvider, Context, Provider};
//! // RDMAKIT_IBVERBS_LIB or libibverbs.so.1, read at the edge:
//! let p = IbverbsProvider::load_from(&rdmakit_verbs::ibverbs::select::library_from_env())?;
//! for name in p.device_names()? {
//!     let ctx = Context::open(&p, &name)?;
//!     let a = ctx.query_device()?;
//!     println!("{name}: max_qp {} max_cq {} max_mr {} max_pd {}", a.max_qp, a.max_cq, a.max_mr, a.max_pd);
//! }
//! # Ok::<(), rdmakit_verbs::Error>(())
//! ```

mod convert;
mod datapath;
mod device;
pub mod library;
pub mod select;
pub mod suite;

use std::ffi::{c_int, CStr};
use std::sync::Arc;

pub use device::IbvDevice;
pub use library::{Library, DEFAULT_LIBRARY, LIBRARY_ENV};

use crate::error::{Errno, Error, Layer, Result};
use crate::provider::{DeviceOps, Provider};
use library::{clear_errno, errno_or, verb_error};
use rdmakit_types::DeviceAttr;

/// Real devices through a loaded libibverbs.
#[derive(Clone, Debug)]
pub struct IbverbsProvider {
    lib: Arc<Library>,
}

/// The limits doctor compares usage against, per device
/// ([`IbverbsProvider::device_limits`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Device name (`rxe0`, `mlx5_0`).
    pub name: String,
    /// `ibv_query_device`'s attributes (max_qp, max_cq, max_mr, max_pd,
    /// max_srq, max_ah, max_cqe, max_qp_wr, ...).
    pub attr: DeviceAttr,
}

impl IbverbsProvider {
    /// Loads the libibverbs at `path` (a path, or a name to search). The
    /// edges choose it ([`select::library_from_env`]: `RDMAKIT_IBVERBS_LIB`,
    /// else [`DEFAULT_LIBRARY`]) and pass it down.
    ///
    /// # Errors
    /// Library layer: `dlopen` failed (`ENOENT`, with the `dlerror` text) or
    /// the file is not a libibverbs (`ENOSYS`).
    pub fn load_from(path: &str) -> Result<IbverbsProvider> {
        Ok(IbverbsProvider {
            lib: Library::load(path)?,
        })
    }

    /// The loaded library.
    pub fn library(&self) -> &Arc<Library> {
        &self.lib
    }

    /// Runs `f` over the device list (`ibv_get_device_list`), freed after.
    fn with_list<T>(
        &self,
        f: impl FnOnce(&[*mut rdmakit_ibverbs_abi::ibv_device]) -> Result<T>,
    ) -> Result<T> {
        let mut n: c_int = 0;
        clear_errno();
        // SAFETY: an exported entry point with a valid out-pointer.
        let list = unsafe { (self.lib.f.get_device_list)(&mut n) };
        if list.is_null() {
            let e = errno_or(Errno::EIO);
            let why = if e == Errno::ENOSYS {
                "the running kernel has no RDMA support for user space (ib_uverbs not \
                 loaded: /sys/class/infiniband_verbs/abi_version is absent)"
                    .to_string()
            } else {
                format!("{} could not list devices", self.lib.path())
            };
            return Err(verb_error(
                "ibv_get_device_list",
                e,
                if e == Errno::ENOSYS {
                    Layer::Kernel
                } else {
                    Layer::Library
                },
                why,
            ));
        }
        let len = usize::try_from(n).unwrap_or(0);
        // SAFETY: the library returned `n` device pointers at `list`.
        let devs = unsafe { std::slice::from_raw_parts(list, len) };
        let r = f(devs);
        // SAFETY: the list from get_device_list, freed once; contexts opened
        // from it keep their own reference to the device.
        unsafe { (self.lib.f.free_device_list)(list) };
        r
    }

    fn dev_name(&self, d: *mut rdmakit_ibverbs_abi::ibv_device) -> String {
        // SAFETY: a device of a live list; the name is a C string inside it.
        let p = unsafe { (self.lib.f.get_device_name)(d) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: non-NULL, NUL-terminated (IBV_SYSFS_NAME_MAX array).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// `ibv_query_device` of every device: what doctor compares resource
    /// usage with (max_qp, max_cq, max_mr, max_pd ...). A device that does
    /// not open is left out and its error returned beside the list.
    ///
    /// # Errors
    /// Listing the devices failed.
    pub fn device_limits(&self) -> Result<(Vec<DeviceLimits>, Vec<Error>)> {
        let mut ok = Vec::new();
        let mut errs = Vec::new();
        for name in self.device_names()? {
            match self.open(&name).and_then(|d| d.query_device()) {
                Ok(attr) => ok.push(DeviceLimits { name, attr }),
                Err(e) => errs.push(e),
            }
        }
        Ok((ok, errs))
    }
}

impl DeviceLimits {
    /// The limits a host bundle records for the device (`max_qp N` ...
    /// one per line, as the doctor's resource-usage rule reads them).
    pub fn text(&self) -> String {
        let a = &self.attr;
        format!(
            "max_qp {}\nmax_cq {}\nmax_mr {}\nmax_pd {}\n",
            a.max_qp, a.max_cq, a.max_mr, a.max_pd
        )
    }
}

/// Device limits by device name through the libibverbs at `library`,
/// loaded and asked once, on the first call (a host without the library
/// or devices answers `None`).
pub fn limits_by_name(library: String) -> impl Fn(&str) -> Option<String> + Send + Sync {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    let cache: OnceLock<Option<HashMap<String, String>>> = OnceLock::new();
    move |dev: &str| {
        cache
            .get_or_init(|| {
                let p = IbverbsProvider::load_from(&library).ok()?;
                let (found, _) = p.device_limits().ok()?;
                Some(
                    found
                        .into_iter()
                        .map(|d| (d.name.clone(), d.text()))
                        .collect(),
                )
            })
            .as_ref()?
            .get(dev)
            .cloned()
    }
}

impl Provider for IbverbsProvider {
    fn kind(&self) -> &'static str {
        "ibverbs"
    }

    fn device_names(&self) -> Result<Vec<String>> {
        self.with_list(|devs| Ok(devs.iter().map(|&d| self.dev_name(d)).collect()))
    }

    fn open(&self, name: &str) -> Result<Arc<dyn DeviceOps>> {
        self.with_list(|devs| {
            let Some(&d) = devs.iter().find(|&&d| self.dev_name(d) == name) else {
                let names: Vec<String> = devs.iter().map(|&d| self.dev_name(d)).collect();
                return Err(Error {
                    verb: "ibv_open_device",
                    errno: Errno::ENODEV,
                    layer: Layer::Library,
                    detail: format!(
                        "{} lists no device named {name:?} (it lists {})",
                        self.lib.path(),
                        select::name_list(&names)
                    ),
                    bad_wr: None,
                });
            };
            // SAFETY: `d` is an entry of the live list.
            let dev = unsafe { IbvDevice::open(Arc::clone(&self.lib), d, name.to_string()) }?;
            Ok(Arc::new(dev) as Arc<dyn DeviceOps>)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_text_per_device_and_none_without_the_library() {
        let soft = rdmakit_soft::Device::open(rdmakit_soft::DeviceConfig {
            shared_registry: false,
            ..rdmakit_soft::DeviceConfig::default()
        })
        .unwrap();
        let d = DeviceLimits {
            name: "soft0".into(),
            attr: soft.attr().clone(),
        };
        let a = &d.attr;
        assert_eq!(
            d.text(),
            format!(
                "max_qp {}\nmax_cq {}\nmax_mr {}\nmax_pd {}\n",
                a.max_qp, a.max_cq, a.max_mr, a.max_pd
            )
        );
        let by_name = limits_by_name("/nonexistent/libibverbs.so.1".into());
        assert_eq!(by_name("soft0"), None);
    }
}
