//! Immediate Data extended transport header (4 bytes), carried by the ..._WITH_IMMEDIATE opcodes. The value is opaque: it is delivered to the receiver's completion as-is (big-endian on the wire, `imm_data` in verbs is in network order).

use crate::view::{value_header, U32};

// No immediate-data capture in the fixtures: bytes laid out by hand.
value_header!(
    an "ImmDt", u32 = U32<0>, 4,
    /// Immediate data.
    imm / set_imm,
    test: [0x12, 0x34, 0x56, 0x78] => 0x1234_5678
);
