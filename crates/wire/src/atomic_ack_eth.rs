//! Atomic Acknowledge extended transport header (8 bytes): the original remote value, carried by ATOMIC_ACKNOWLEDGE.

use crate::view::{value_header, U64};

// Bytes laid out by hand.
value_header!(
    an "AtomicAckETH", u64 = U64<0>, 8,
    /// Original remote value (before the atomic operation).
    orig_value / set_orig_value,
    test: [1, 2, 3, 4, 5, 6, 7, 8] => 0x0102_0304_0506_0708
);
