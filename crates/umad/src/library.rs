//! libibumad.so.3 loaded at run time: the entry points as typed function
//! pointers and the C structures they fill. The only module with `unsafe`
//! FFI declarations; [`crate::port`] calls through [`Library`].

use std::ffi::{c_char, c_int, c_long, c_uint, c_void};
use std::sync::Arc;

use crate::error::{Error, Layer};

/// The library name looked for when no path is given.
pub const DEFAULT_LIBRARY: &str = "libibumad.so.3";

/// Environment variable naming the libibumad to load (a path or a name).
pub const LIBRARY_ENV: &str = "RDMAKIT_IBUMAD_LIB";

/// `UMAD_CA_NAME_LEN`.
pub(crate) const CA_NAME_LEN: usize = 20;
/// `UMAD_CA_MAX_PORTS`.
pub(crate) const CA_MAX_PORTS: usize = 10;
/// `UMAD_MAX_DEVICES`.
pub(crate) const MAX_DEVICES: usize = 32;

/// `umad_port_t` (rdma-core's umad.h).
#[repr(C)]
pub(crate) struct UmadPort {
    pub ca_name: [c_char; CA_NAME_LEN],
    pub portnum: c_int,
    pub base_lid: c_uint,
    pub lmc: c_uint,
    pub sm_lid: c_uint,
    pub sm_sl: c_uint,
    pub state: c_uint,
    pub phys_state: c_uint,
    pub rate: c_uint,
    pub capmask: u32,
    pub gid_prefix: u64,
    pub port_guid: u64,
    pub pkeys_size: c_uint,
    pub pkeys: *mut u16,
    pub link_layer: [c_char; CA_NAME_LEN],
}

/// `umad_ca_t` (rdma-core's umad.h).
#[repr(C)]
pub(crate) struct UmadCa {
    pub ca_name: [c_char; CA_NAME_LEN],
    pub node_type: c_uint,
    pub numports: c_int,
    pub fw_ver: [c_char; 20],
    pub ca_type: [c_char; 40],
    pub hw_ver: [c_char; 20],
    pub node_guid: u64,
    pub system_guid: u64,
    pub ports: [*mut UmadPort; CA_MAX_PORTS],
}

type Init = unsafe extern "C" fn() -> c_int;
type GetCasNames = unsafe extern "C" fn(*mut [c_char; CA_NAME_LEN], c_int) -> c_int;
type GetCa = unsafe extern "C" fn(*const c_char, *mut UmadCa) -> c_int;
type ReleaseCa = unsafe extern "C" fn(*mut UmadCa) -> c_int;
type OpenPort = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type ClosePort = unsafe extern "C" fn(c_int) -> c_int;
type Register = unsafe extern "C" fn(c_int, c_int, c_int, u8, *mut c_long) -> c_int;
type Unregister = unsafe extern "C" fn(c_int, c_int) -> c_int;
type Size = unsafe extern "C" fn() -> usize;
type GetMad = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type SetAddr = unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, c_int) -> c_int;
type Send = unsafe extern "C" fn(c_int, c_int, *mut c_void, c_int, c_int, c_int) -> c_int;
type Recv = unsafe extern "C" fn(c_int, *mut c_void, *mut c_int, c_int) -> c_int;
type Status = unsafe extern "C" fn(*mut c_void) -> c_int;

/// The entry points rdmakit calls; every libibumad.so.3 since rdma-core's
/// first release exports them all.
pub(crate) struct Fns {
    pub init: Init,
    pub get_cas_names: GetCasNames,
    pub get_ca: GetCa,
    pub release_ca: ReleaseCa,
    pub open_port: OpenPort,
    pub close_port: ClosePort,
    pub register: Register,
    pub unregister: Unregister,
    pub size: Size,
    pub get_mad: GetMad,
    pub set_addr: SetAddr,
    pub send: Send,
    pub recv: Recv,
    pub status: Status,
}

/// A loaded libibumad. Shared (`Arc`) by every [`crate::Port`] opened
/// through it, so its code stays mapped while a port is open.
pub struct Library {
    path: String,
    pub(crate) f: Fns,
    // Declared last: unloaded after nothing can call `f` any more.
    _lib: libloading::Library,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library").field("path", &self.path).finish()
    }
}

impl Library {
    /// Loads the libibumad named by `RDMAKIT_IBUMAD_LIB`, or
    /// `libibumad.so.3` from the dynamic linker's search path.
    ///
    /// # Errors
    /// As [`Library::load`].
    pub fn load_default() -> Result<Arc<Library>, Error> {
        let path = std::env::var(LIBRARY_ENV).unwrap_or_else(|_| DEFAULT_LIBRARY.to_string());
        Library::load(&path)
    }

    /// Loads `path` (a file name searched as `dlopen` does, or a path).
    ///
    /// Loading with `dlopen` (rather than opening `/dev/infiniband/umad*`
    /// from Rust) is what makes the umad2sim preload work: libibumad's
    /// `open`, `read`, `write`, `ioctl`, `poll` and `scandir` are the symbols
    /// the shim interposes, while Rust's std calls `open64`/`openat`.
    ///
    /// # Errors
    /// `dlopen` failing (`ENOENT`, with the `dlerror` text) or a library
    /// without an entry point (`ENOSYS`): library layer, "install libibumad3".
    pub fn load(path: &str) -> Result<Arc<Library>, Error> {
        // SAFETY: loading libibumad runs its constructors, which only set up
        // its own state (no Rust invariants involved).
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| load_error(path, ENOENT, e.to_string()))?;
        macro_rules! sym {
            ($name:literal) => {{
                // SAFETY: the symbol is looked up by its C name and given the
                // C signature of rdma-core's umad.h (the type alias above).
                let s = unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| load_error(path, ENOSYS, format!("{}: {e}", $name)))?;
                *s
            }};
        }
        let f = Fns {
            init: sym!("umad_init"),
            get_cas_names: sym!("umad_get_cas_names"),
            get_ca: sym!("umad_get_ca"),
            release_ca: sym!("umad_release_ca"),
            open_port: sym!("umad_open_port"),
            close_port: sym!("umad_close_port"),
            register: sym!("umad_register"),
            unregister: sym!("umad_unregister"),
            size: sym!("umad_size"),
            get_mad: sym!("umad_get_mad"),
            set_addr: sym!("umad_set_addr"),
            send: sym!("umad_send"),
            recv: sym!("umad_recv"),
            status: sym!("umad_status"),
        };
        Ok(Arc::new(Library {
            path: path.to_string(),
            f,
            _lib: lib,
        }))
    }

    /// The path or name it was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }
}

const ENOENT: i32 = 2;
const ENOSYS: i32 = 38;

fn load_error(path: &str, errno: i32, what: String) -> Error {
    Error {
        verb: "dlopen",
        errno,
        layer: Layer::Library,
        detail: format!(
            "cannot use libibumad: looked for {path:?} ({}): {what}; install libibumad3 \
             (Debian/Ubuntu; rdma-core's libibumad on RHEL and SUSE), or set {LIBRARY_ENV} \
             to its path",
            if path.contains('/') {
                "that path"
            } else {
                "the dynamic linker's search path"
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structures_match_rdma_core_umad_h() {
        // Offsets from rdma-core 44's umad.h on LP64.
        assert_eq!(std::mem::size_of::<UmadPort>(), 112);
        assert_eq!(std::mem::offset_of!(UmadPort, gid_prefix), 56);
        assert_eq!(std::mem::offset_of!(UmadPort, pkeys), 80);
        assert_eq!(std::mem::offset_of!(UmadPort, link_layer), 88);
        assert_eq!(std::mem::offset_of!(UmadCa, node_guid), 112);
        assert_eq!(std::mem::offset_of!(UmadCa, ports), 128);
        assert_eq!(std::mem::size_of::<UmadCa>(), 208);
    }
}
