//! LinearForwardingTable (attribute 0x0019, IBTA Vol 1 §14.2.5.10): one block
//! of a switch's unicast routes, the egress port for 64 consecutive LIDs. The
//! attribute modifier is the block number: block `n` covers LIDs `64n..64n+63`.
//! Port 255 means "no route".
//!
//! ```text
//! bytes 0-63   egress port of LID 64n + i at byte i
//! ```

use core::fmt;

use crate::view::layout;

/// Length of the attribute (the SMP data).
pub const LEN: usize = 64;
/// LIDs a block covers.
pub const LIDS_PER_BLOCK: u16 = 64;
/// The port a switch reports for a LID it has no route to.
pub const NO_ROUTE: u8 = 0xff;

layout! {
    a "LinearForwardingTable block", LEN, "64 bytes";
    fields {}
    bytes {
        /// Egress port of each LID of the block.
        ports / ports_mut: [0; LEN];
    }
}

crate::mad::attribute!(SmpAttribute, super::attr::LINEAR_FORWARDING_TABLE);

/// The block (the attribute modifier) that holds `lid`.
pub fn block_of(lid: u16) -> u32 {
    u32::from(lid / LIDS_PER_BLOCK)
}

impl Repr {
    /// The egress port of `lid` if this is its block (`block` is the modifier
    /// the block was read with) and the switch has a route for it.
    pub fn port_of(&self, block: u32, lid: u16) -> Option<u8> {
        if block_of(lid) != block {
            return None;
        }
        let port = self.ports[usize::from(lid % LIDS_PER_BLOCK)];
        (port != NO_ROUTE).then_some(port)
    }
}

impl Repr {
    /// The routed LIDs of block `block` with their egress ports, in LID order.
    pub fn routes(&self, block: u32) -> impl Iterator<Item = (u16, u8)> + '_ {
        // Blocks past 1023 would wrap the 16-bit LID: they yield nothing.
        let base = u16::try_from(block)
            .ok()
            .and_then(|b| b.checked_mul(LIDS_PER_BLOCK));
        base.into_iter().flat_map(move |base| {
            (0..LIDS_PER_BLOCK)
                .zip(self.ports)
                .filter(|&(_, p)| p != NO_ROUTE)
                .map(move |(i, p)| (base + i, p))
        })
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("LFT block")?;
        for (i, p) in self
            .ports
            .iter()
            .enumerate()
            .filter(|(_, &p)| p != NO_ROUTE)
        {
            write!(f, " {i}:{p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::{attr_data, mad_fixture};

    // `ibroute 2` (switch S1) printed LIDs 1..6 -> ports 1, 0, 7, 2, 7, 8:
    // fixtures/mad/smp-lft-lid2-block0.resp.hex.
    fn data() -> [u8; 64] {
        attr_data(&mad_fixture!("smp-lft-lid2-block0.resp.hex"))
    }

    #[test]
    fn parse_and_emit_ibroute_block0() {
        let d = data();
        let r = Repr::parse(&Packet::new_checked(&d[..]).unwrap()).unwrap();
        let routes: Vec<_> = (1..=6).map(|lid| r.port_of(0, lid)).collect();
        assert_eq!(routes, [1, 0, 7, 2, 7, 8].map(Some));
        assert_eq!(r.port_of(0, 0), None, "LID 0 has no route");
        assert_eq!(r.port_of(1, 3), None, "LID 3 is not in block 1");
        let mut b = [0xa5u8; 64];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, d);
        assert_eq!(block_of(64), 1);
        let all: Vec<_> = r.routes(0).collect();
        assert_eq!(all, [(1, 1), (2, 0), (3, 7), (4, 2), (5, 7), (6, 8)]);
        assert_eq!(r.routes(2).next(), Some((129, 1)));
        assert_eq!(r.routes(u32::MAX).count(), 0);
    }
}
