//! NodeDescription (attribute 0x0010, IBTA Vol 1 §14.2.5.2): 64 bytes of text
//! naming the node, NUL-padded. Nothing promises UTF-8 or a terminating NUL;
//! [`Repr::text`] stops at the first NUL and replaces invalid sequences.
//!
//! ```text
//! bytes 0-63   NodeString
//! ```

use core::fmt;
use std::borrow::Cow;

use crate::view::layout;

/// Length of the attribute.
pub const LEN: usize = 64;

layout! {
    a "NodeDescription", LEN, "64 bytes";
    fields {}
    bytes {
        /// The 64 raw bytes of NodeString.
        bytes / bytes_mut: [0; LEN];
    }
}

crate::mad::attribute!(SmpAttribute, super::attr::NODE_DESCRIPTION);

impl Repr {
    /// A description holding `text`, cut at 64 bytes (on a character boundary)
    /// and NUL-padded.
    pub fn from_text(text: &str) -> Repr {
        let mut end = text.len().min(LEN);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut bytes = [0; LEN];
        bytes[..end].copy_from_slice(&text.as_bytes()[..end]);
        Repr { bytes }
    }

    /// The text up to the first NUL (all 64 bytes if there is none), invalid
    /// UTF-8 replaced by U+FFFD.
    /// Borrows when the bytes are valid UTF-8.
    pub fn text(&self) -> Cow<'_, str> {
        let end = self.bytes.iter().position(|&c| c == 0).unwrap_or(LEN);
        String::from_utf8_lossy(&self.bytes[..end])
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "NodeDescription {:?}", self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::{attr_data, mad_fixture};

    // `smpquery nodedesc 2` printed `Node Description:....S1`:
    // fixtures/mad/smp-nodedesc-lid2.resp.hex.
    fn data() -> [u8; 64] {
        attr_data(&mad_fixture!("smp-nodedesc-lid2.resp.hex"))
    }

    #[test]
    fn parse_and_emit_smpquery_nodedesc() {
        let d = data();
        let repr = Repr::parse(&Packet::new_checked(&d[..]).unwrap()).unwrap();
        assert_eq!(repr.text(), "S1");
        assert_eq!(repr, Repr::from_text("S1"));
        let mut b = [0xa5u8; 64];
        repr.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, d);
    }

    #[test]
    fn unterminated_and_invalid_utf8() {
        let mut bytes = [b'x'; 64];
        bytes[3] = 0xff;
        let t = Repr { bytes }.text().into_owned();
        assert_eq!(t.chars().count(), 64);
        assert!(t.starts_with("xxx\u{fffd}x"));
    }

    #[test]
    fn from_text_cuts_on_a_char_boundary() {
        let long = "é".repeat(40); // 80 bytes
        let r = Repr::from_text(&long);
        assert_eq!(r.text(), "é".repeat(32));
        assert_eq!(
            Packet::new_checked(&[0u8; 63][..]).unwrap_err(),
            crate::Error::Truncated
        );
    }
}
