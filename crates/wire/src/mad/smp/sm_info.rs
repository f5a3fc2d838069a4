//! SMInfo (attribute 0x0020, IBTA Vol 1 §14.2.5.13): which subnet manager this
//! is, how busy it has been and what state it is in.
//!
//! ```text
//! bytes 0-7    GUID
//! bytes 8-15   SM_Key (0 unless the requester proved it knows it)
//! bytes 16-19  ActCount
//! byte 20      Priority(4) SMState(4)
//! bytes 21-63  reserved
//! ```

use core::fmt;

use crate::view::{layout, Bits, Zeroing, U32, U64};

/// Length of the attribute (the SMP data).
pub const LEN: usize = 64;

/// SMState: not active.
pub const STATE_NOT_ACTIVE: u8 = 0;
/// SMState: discovering.
pub const STATE_DISCOVERING: u8 = 1;
/// SMState: standby.
pub const STATE_STANDBY: u8 = 2;
/// SMState: master.
pub const STATE_MASTER: u8 = 3;

layout! {
    an "SMInfo", LEN, "64 bytes";
    fields {
        /// GUID of the SM's port.
        guid / set_guid: u64 = Zeroing<U64<0>, 0, LEN>;
        /// SM_Key.
        sm_key / set_sm_key: u64 = U64<8>;
        /// ActCount: bumped as the SM works; a master whose count stalls is stuck.
        act_count / set_act_count: u32 = U32<16>;
        /// Priority (4 bits).
        priority / set_priority: u8 = Bits<20, 0, 4>;
        /// SMState (4 bits): 0 not active, 1 discovering, 2 standby, 3 master.
        sm_state / set_sm_state: u8 = Bits<20, 4, 4>;
    }
}

crate::mad::attribute!(SmpAttribute, super::attr::SM_INFO);

impl Repr {
    /// The state's name as `sminfo` prints it (`SMINFO_MASTER`).
    pub fn state_name(&self) -> &'static str {
        match self.sm_state {
            STATE_NOT_ACTIVE => "SMINFO_NOTACT",
            STATE_DISCOVERING => "SMINFO_DISCOVER",
            STATE_STANDBY => "SMINFO_STANDBY",
            STATE_MASTER => "SMINFO_MASTER",
            _ => "SMINFO_STATE_UNKNOWN",
        }
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SMInfo guid 0x{:016x} activity count {} priority {} state {} {}",
            self.guid,
            self.act_count,
            self.priority,
            self.sm_state,
            self.state_name()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::{attr_data, mad_fixture};

    // `sminfo` printed `sm lid 1 sm guid 0x100001, activity count 122 priority 0
    // state 3 SMINFO_MASTER`: fixtures/mad/smp-sminfo-lid1.resp.hex.
    fn data() -> [u8; 64] {
        attr_data(&mad_fixture!("smp-sminfo-lid1.resp.hex"))
    }

    fn repr() -> Repr {
        // opensm's default SM_Key is 1.
        Repr {
            guid: 0x10_0001,
            sm_key: 1,
            act_count: 122,
            priority: 0,
            sm_state: 3,
        }
    }

    #[test]
    fn deconstruct_sminfo() {
        let d = data();
        let p = Packet::new_checked(&d[..]).unwrap();
        assert_eq!((p.guid(), p.act_count(), p.sm_state()), (0x10_0001, 122, 3));
    }

    #[test]
    fn construct_sminfo() {
        let mut b = [0xa5u8; 64];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_guid(0x10_0001);
        p.set_sm_key(1);
        p.set_act_count(122);
        p.set_priority(0);
        p.set_sm_state(3);
        assert_eq!(b, data());
    }

    #[test]
    fn parse_and_emit_sminfo() {
        let d = data();
        let r = Repr::parse(&Packet::new_checked(&d[..]).unwrap()).unwrap();
        assert_eq!(r, repr());
        let mut b = [0xa5u8; 64];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, d);
        assert!(r
            .to_string()
            .ends_with("activity count 122 priority 0 state 3 SMINFO_MASTER"));
    }
}
