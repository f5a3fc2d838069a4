//! One `rdmakit res` for every device: the kernel's tracked RDMA objects (RDMA netlink,
//! read through [`rdmakit_host::netlink`]) and the soft NIC's objects (its
//! cross-process registry, [`rdmakit_soft::registry`]), as the lines
//! `rdma resource show` prints and the objects `rdma -j` prints, each with its owner's
//! state so objects a dead process left behind stand out.
//!
//! - [`row`]: a [`Row`] is one object; `human()` and [`json`] render it.
//! - [`kernel`]: rows from [`rdmakit_host::netlink::NetlinkFacts`] (pure).
//! - [`show`]: the rows of `rdmakit dev`, `link` and `stat` (pure).
//! - [`view`]: which of those views (or `res`) a command asks for, its
//!   arguments checked before anything is read.
//! - [`devinfo`]: `rdmakit devinfo --from`: the ibv_devinfo fields a recorded
//!   source holds, and the ones it does not (pure).
//! - [`soft`]: [`soft::read`] reads the registries and `/proc`; the row builders
//!   are pure.
//! - [`softstat`]: the soft NIC's device-wide counters as `rdmakit stat`
//!   rows (pure).
//! - [`registry`]: `rdmakit soft status|reclaim|leaky`, read and rendered;
//!   [`install`]: `rdmakit shim install --json`.
//!
//! ```
//! use rdmakit_res::soft::{rows, SoftDevice, SoftObject};
//! use rdmakit_host::netlink::ResKind;
//! use rdmakit_soft::registry::{Kind, OwnerState};
//! let d = SoftDevice {
//!     name: "soft0".into(),
//!     base: "/dev/shm".into(),
//!     objects: Ok(vec![SoftObject {
//!         kind: Kind::Qp, handle: 17, pid: 4242, owner: OwnerState::Dead, comm: None,
//!     }]),
//!     notes: Vec::new(),
//!     counters: Ok(Default::default()),
//! };
//! assert_eq!(rows(ResKind::Qp, &d, None)[0].human(), "link soft0/1 lqpn 17 pid 4242 owner-state dead");
//! ```

pub mod devinfo;
pub mod install;
pub mod kernel;
pub mod listing;
pub mod registry;
pub mod row;
pub mod show;
pub mod soft;
pub mod softstat;
pub mod view;

pub use row::{json, Field, Row};
