//! Invalidate extended transport header (4 bytes): the R_Key to invalidate, carried by SEND_LAST/ONLY_WITH_INVALIDATE.

use crate::view::{value_header, U32};

// No send-with-invalidate capture in the fixtures: bytes laid out by hand.
value_header!(
    a "IETH", u32 = U32<0>, 4,
    /// R_Key to invalidate.
    rkey / set_rkey,
    test: [0x00, 0x00, 0x04, 0xd6] => 0x4d6
);
