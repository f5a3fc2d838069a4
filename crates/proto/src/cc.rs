//! Congestion control as a RoCE NIC does it: DCQCN.
//!
//! * [`params`] — the parameters under mlx5's names, units and firmware
//!   defaults, set by name ([`Params::set`]) and listed
//!   ([`Params::list`]) like mlx5's `cc_params` files.
//! * [`rp`] — the reaction point of a sending QP: the rate DCQCN keeps
//!   (Rc, Rt, α, stages) and the pacer that holds the QP to it.
//! * [`np`] — the notification point of a receiving QP: which CE-marked
//!   packets are answered with a CNP.
//!
//! Pure: no I/O, no clock, no allocation; time comes in as an
//! [`Instant`](crate::Instant). The engine's requester owns a QP's
//! reaction point and its responder the notification point; see
//! docs/soft-nic.md "Congestion control" for the design and how it
//! compares with mlx5 and the DCQCN reference simulator.

pub mod np;
pub mod params;
pub mod rp;

pub use np::NotificationPoint;
pub use params::{ParamError, Params, Rate};
pub use rp::ReactionPoint;
