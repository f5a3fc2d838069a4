//! How long work tells a person where it is, in the three words a progress
//! display has: what is under way (a message), a counter beside it (a
//! prefix), and how far along it is (a position out of a length). The
//! libraries report through a [`Meter`]; the command line draws it
//! (`rdmakit_report::progress`), and a caller that shows nothing passes
//! [`Silent`].
//!
//! ```
//! use rdmakit_vocab::progress::{Meter, Silent};
//! fn work(m: &dyn Meter) {
//!     m.message("reading inputs".into());
//!     m.position(1, Some(2));
//! }
//! work(&Silent);
//! ```

/// Where a piece of work is, as a progress display shows it. Called from any
/// thread the work runs on.
pub trait Meter: Sync {
    /// The phase under way ("collecting host facts", "screening round 2/5").
    fn message(&self, msg: String);
    /// A counter shown beside the message ("12/28 pairs").
    fn prefix(&self, prefix: String);
    /// Step `n` of `len` (`None`: the length is unchanged or not known).
    fn position(&self, n: u64, len: Option<u64>);
}

/// A meter that shows nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl Meter for Silent {
    fn message(&self, _: String) {}
    fn prefix(&self, _: String) {}
    fn position(&self, _: u64, _: Option<u64>) {}
}
