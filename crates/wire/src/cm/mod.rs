//! Communication Management messages (IBTA Vol 1 chapter 12): the class data of
//! a CM MAD (management class 0x07, class version 2, method Send), as Linux's
//! `ib_cm` sends them on QP1 for RoCEv2 and rdma_cm fills them in.
//!
//! Every message occupies the 232 bytes after the [`crate::mad`] header; byte
//! offsets below are relative to that data (the kernel's `ibta_vol1_c12.h` adds
//! the 24 header bytes). Sub-byte fields follow the spec's Byte\[Bit\] notation:
//! bit 0 is the most significant bit of the byte.
//!
//! | attribute | module | message |
//! |---|---|---|
//! | 0x0010 | [`req`] | REQ, connect request |
//! | 0x0011 | [`mra`] | MRA, message receipt acknowledgement |
//! | 0x0012 | [`rej`] | REJ, reject |
//! | 0x0013 | [`rep`] | REP, reply to a REQ |
//! | 0x0014 | [`rtu`] | RTU, ready to use |
//! | 0x0015 | [`dreq`] | DREQ, disconnect request |
//! | 0x0016 | [`drep`] | DREP, reply to a DREQ |
//! | 0x0017 | [`sidr_req`] | SIDR_REQ, service ID resolution request (UD) |
//! | 0x0018 | [`sidr_rep`] | SIDR_REP |
//!
//! LAP/APR (alternate paths) are refused by Linux on RoCE and are
//! [`Error::Unsupported`] here. [`ip`] is the RDMA CM header that rdma_cm puts
//! at the front of a REQ's / SIDR_REQ's private data (IBTA Annex A11).
//!
//! [`Repr`] is a whole CM MAD: the transaction ID and one [`Message`].

use core::fmt;

use crate::mad;
use crate::{Error, Result};

pub mod drep;
pub mod dreq;
pub mod ip;
pub mod mra;
pub mod rej;
pub mod rep;
pub mod req;
pub mod rtu;
pub mod sidr_rep;
pub mod sidr_req;

/// CM class version.
pub const CLASS_VERSION: u8 = 2;
/// Length of a CM message (the class data of a 256-byte MAD).
pub const MSG_LEN: usize = mad::DATA_LEN;

/// The attribute IDs of the CM messages.
pub mod attr {
    /// ClassPortInfo.
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// REQ.
    pub const REQ: u16 = 0x0010;
    /// MRA.
    pub const MRA: u16 = 0x0011;
    /// REJ.
    pub const REJ: u16 = 0x0012;
    /// REP.
    pub const REP: u16 = 0x0013;
    /// RTU.
    pub const RTU: u16 = 0x0014;
    /// DREQ.
    pub const DREQ: u16 = 0x0015;
    /// DREP.
    pub const DREP: u16 = 0x0016;
    /// SIDR_REQ.
    pub const SIDR_REQ: u16 = 0x0017;
    /// SIDR_REP.
    pub const SIDR_REP: u16 = 0x0018;
    /// LAP.
    pub const LAP: u16 = 0x0019;
    /// APR.
    pub const APR: u16 = 0x001a;
}

/// Which message an MRA or REJ refers to (2 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MsgResponse {
    /// The REQ (0).
    #[default]
    Req,
    /// The REP (1).
    Rep,
    /// Another message, e.g. a LAP (2).
    Other,
    /// The reserved value 3, kept so that parse/emit round-trips.
    Reserved,
}

impl MsgResponse {
    pub(crate) fn from_bits(v: u8) -> MsgResponse {
        match v & 3 {
            0 => MsgResponse::Req,
            1 => MsgResponse::Rep,
            2 => MsgResponse::Other,
            _ => MsgResponse::Reserved,
        }
    }

    pub(crate) fn bits(self) -> u8 {
        match self {
            MsgResponse::Req => 0,
            MsgResponse::Rep => 1,
            MsgResponse::Other => 2,
            MsgResponse::Reserved => 3,
        }
    }

    /// The name printed for it: `REQ`, `REP`, `other` or `reserved(3)`.
    pub fn name(self) -> &'static str {
        match self {
            MsgResponse::Req => "REQ",
            MsgResponse::Rep => "REP",
            MsgResponse::Other => "other",
            MsgResponse::Reserved => "reserved(3)",
        }
    }
}

impl fmt::Display for MsgResponse {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A CM timeout field (5 bits, 4.096 µs × 2^n, IBTA 12.6.5) in nanoseconds.
pub const fn timeout_nanos(n: u8) -> u64 {
    4096u64 << (n & 0x1f)
}

/// Nanoseconds as a person reads them: `4.3 s`, `268 ms`, `16 µs`.
pub fn duration_text(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s >= 10.0 {
        format!("{s:.0} s")
    } else if s >= 1.0 {
        format!("{s:.1} s")
    } else if ns >= 1_000_000 {
        format!("{} ms", ns / 1_000_000)
    } else {
        format!("{} µs", ns / 1_000)
    }
}

/// A timeout field as `20 (4.3 s)`: the IBTA exponent and what it means.
pub(crate) struct Timeout(pub u8);

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} ({})", self.0, duration_text(timeout_nanos(self.0)))
    }
}

/// An RNR retry count as printed: 7 means "retry forever" (IBA 9.7.5.2.8).
pub(crate) struct RnrRetry(pub u8);

impl fmt::Display for RnrRetry {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.0 == 7 {
            f.write_str("7 (infinite)")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// A service ID with what rdma_cm makes of it: `0x0000000001061c06 (rdma_cm
/// TCP port 7174)`, or the bare hex for another service.
pub(crate) struct ServiceId(pub u64);

impl fmt::Display for ServiceId {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "0x{:016x}", self.0)?;
        if let Some((ps, port)) = ip::split_service_id(self.0) {
            if let Some(name) = ip::port_space_name(ps) {
                write!(f, " (rdma_cm {name} port {port})")?;
            }
        }
        Ok(())
    }
}

/// Writes the private data of a REQ or SIDR_REQ: rdma_cm's IP header as
/// ` rdma_cm 10.0.3.2:45641 > 10.0.3.1:7174` when the service ID is one of
/// its port spaces and the header parses, then the user's bytes after it;
/// otherwise the raw bytes ([`fmt_private`]).
pub(crate) fn fmt_rdma_cm_private(f: &mut fmt::Formatter, sid: u64, data: &[u8]) -> fmt::Result {
    let port = ip::split_service_id(sid)
        .filter(|&(ps, _)| ip::port_space_name(ps).is_some())
        .map(|(_, port)| port);
    let hdr = ip::Packet::new_checked(data)
        .ok()
        .and_then(|p| ip::Repr::parse(&p).ok());
    match (port, hdr) {
        (Some(port), Some(h)) => {
            let dst = match h.dst_addr {
                core::net::IpAddr::V6(a) => format!("[{a}]:{port}"),
                a => format!("{a}:{port}"),
            };
            let src = match h.src_addr {
                core::net::IpAddr::V6(a) => format!("[{a}]:{}", h.src_port),
                a => format!("{a}:{}", h.src_port),
            };
            write!(f, " rdma_cm {src} > {dst}")?;
            fmt_private(f, data.get(ip::HEADER_LEN..).unwrap_or(&[]))
        }
        _ => fmt_private(f, data),
    }
}

/// One CM message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)]
pub enum Message {
    /// REQ.
    Req(req::Repr),
    /// MRA.
    Mra(mra::Repr),
    /// REJ.
    Rej(rej::Repr),
    /// REP.
    Rep(rep::Repr),
    /// RTU.
    Rtu(rtu::Repr),
    /// DREQ.
    Dreq(dreq::Repr),
    /// DREP.
    Drep(drep::Repr),
    /// SIDR_REQ.
    SidrReq(sidr_req::Repr),
    /// SIDR_REP.
    SidrRep(sidr_rep::Repr),
}

impl Message {
    /// The attribute ID of the message.
    pub fn attr_id(&self) -> u16 {
        match self {
            Message::Req(_) => attr::REQ,
            Message::Mra(_) => attr::MRA,
            Message::Rej(_) => attr::REJ,
            Message::Rep(_) => attr::REP,
            Message::Rtu(_) => attr::RTU,
            Message::Dreq(_) => attr::DREQ,
            Message::Drep(_) => attr::DREP,
            Message::SidrReq(_) => attr::SIDR_REQ,
            Message::SidrRep(_) => attr::SIDR_REP,
        }
    }

    /// The message's name as the IBTA writes it.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Req(_) => "REQ",
            Message::Mra(_) => "MRA",
            Message::Rej(_) => "REJ",
            Message::Rep(_) => "REP",
            Message::Rtu(_) => "RTU",
            Message::Dreq(_) => "DREQ",
            Message::Drep(_) => "DREP",
            Message::SidrReq(_) => "SIDR_REQ",
            Message::SidrRep(_) => "SIDR_REP",
        }
    }
}

/// A whole CM MAD: the transaction ID and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repr {
    /// Transaction ID. The sender of a REQ, DREQ or SIDR_REQ picks it; every
    /// answer (MRA, REJ, REP, RTU, DREP, SIDR_REP) repeats the one of the
    /// exchange it belongs to.
    pub tid: u64,
    /// The message.
    pub message: Message,
}

impl Repr {
    /// Parse a CM MAD (at least 256 bytes: header + 232 bytes of data).
    ///
    /// # Errors
    /// [`Error::Truncated`] for a short buffer; [`Error::Malformed`] for a base
    /// version other than 1; [`Error::Unsupported`] for another management
    /// class, class version or method than CM v2 Send, and for attributes this
    /// crate does not decode (ClassPortInfo, LAP, APR).
    pub fn parse(bytes: &[u8]) -> Result<Repr> {
        let p = mad::Packet::new_checked(bytes)?;
        let h = mad::Repr::parse(&p)?;
        if h.mgmt_class != mad::CLASS_CM
            || h.class_version != CLASS_VERSION
            || h.method != mad::METHOD_SEND
        {
            return Err(Error::Unsupported);
        }
        let data = p.data();
        if data.len() < MSG_LEN {
            return Err(Error::Truncated);
        }
        let message = match h.attr_id {
            attr::REQ => Message::Req(req::Repr::parse(&req::Packet::new_checked(data)?)?),
            attr::MRA => Message::Mra(mra::Repr::parse(&mra::Packet::new_checked(data)?)?),
            attr::REJ => Message::Rej(rej::Repr::parse(&rej::Packet::new_checked(data)?)?),
            attr::REP => Message::Rep(rep::Repr::parse(&rep::Packet::new_checked(data)?)?),
            attr::RTU => Message::Rtu(rtu::Repr::parse(&rtu::Packet::new_checked(data)?)?),
            attr::DREQ => Message::Dreq(dreq::Repr::parse(&dreq::Packet::new_checked(data)?)?),
            attr::DREP => Message::Drep(drep::Repr::parse(&drep::Packet::new_checked(data)?)?),
            attr::SIDR_REQ => Message::SidrReq(sidr_req::Repr::parse(
                &sidr_req::Packet::new_checked(data)?,
            )?),
            attr::SIDR_REP => Message::SidrRep(sidr_rep::Repr::parse(
                &sidr_rep::Packet::new_checked(data)?,
            )?),
            _ => return Err(Error::Unsupported),
        };
        Ok(Repr {
            tid: h.tid,
            message,
        })
    }

    /// The MAD header this message is sent with.
    pub fn header(&self) -> mad::Repr {
        mad::Repr {
            base_version: mad::BASE_VERSION,
            mgmt_class: mad::CLASS_CM,
            class_version: CLASS_VERSION,
            method: mad::METHOD_SEND,
            status: 0,
            class_specific: 0,
            tid: self.tid,
            attr_id: self.message.attr_id(),
            attr_mod: 0,
        }
    }

    /// The length of the MAD this Repr emits (256).
    pub const fn buffer_len(&self) -> usize {
        mad::MAD_LEN
    }

    /// Emit the whole MAD (header and message; reserved bits zero).
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer is shorter than 256 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let buf = buf.get_mut(..mad::MAD_LEN).ok_or(Error::Truncated)?;
        let mut p = mad::Packet::new_unchecked(&mut *buf);
        self.header().emit(&mut p);
        let data = p.data_mut();
        match &self.message {
            Message::Req(m) => m.emit(&mut req::Packet::new_unchecked(data)),
            Message::Mra(m) => m.emit(&mut mra::Packet::new_unchecked(data)),
            Message::Rej(m) => m.emit(&mut rej::Packet::new_unchecked(data)),
            Message::Rep(m) => m.emit(&mut rep::Packet::new_unchecked(data)),
            Message::Rtu(m) => m.emit(&mut rtu::Packet::new_unchecked(data)),
            Message::Dreq(m) => m.emit(&mut dreq::Packet::new_unchecked(data)),
            Message::Drep(m) => m.emit(&mut drep::Packet::new_unchecked(data)),
            Message::SidrReq(m) => m.emit(&mut sidr_req::Packet::new_unchecked(data)),
            Message::SidrRep(m) => m.emit(&mut sidr_rep::Packet::new_unchecked(data)),
        }
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.message {
            Message::Req(m) => write!(f, "{m}")?,
            Message::Mra(m) => write!(f, "{m}")?,
            Message::Rej(m) => write!(f, "{m}")?,
            Message::Rep(m) => write!(f, "{m}")?,
            Message::Rtu(m) => write!(f, "{m}")?,
            Message::Dreq(m) => write!(f, "{m}")?,
            Message::Drep(m) => write!(f, "{m}")?,
            Message::SidrReq(m) => write!(f, "{m}")?,
            Message::SidrRep(m) => write!(f, "{m}")?,
        }
        write!(f, " tid 0x{:016x}", self.tid)
    }
}

pub(crate) use crate::view::{get_bits, get_u16, get_u24, get_u32, get_u64};
pub(crate) use crate::view::{set_bits, set_u16, set_u24, set_u32, set_u64};

/// Writes `n` bytes of private data for Display: the used prefix (up to the
/// last non-zero byte), at most 16 bytes shown.
pub(crate) fn fmt_private(f: &mut fmt::Formatter, data: &[u8]) -> fmt::Result {
    let used = data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    if used == 0 {
        return Ok(());
    }
    write!(f, " pdata[{used}]")?;
    for b in data.iter().take(used.min(16)) {
        write!(f, "{b:02x}")?;
    }
    if used > 16 {
        write!(f, "..")?;
    }
    Ok(())
}

/// Defines the view boilerplate (`new_unchecked`, `new_checked`, `check_len`,
/// `into_inner`) of a CM message of `MSG_LEN` bytes.
macro_rules! cm_view {
    ($art:ident $what:literal) => {
        $crate::view::view!($art $what, $crate::cm::MSG_LEN, "232 bytes");

        impl<T: AsRef<[u8]>> Packet<T> {
            fn b(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            fn bm(&mut self) -> &mut [u8] {
                self.buffer.as_mut()
            }
        }
    };
}
pub(crate) use cm_view;

/// Declares a CM message (232 bytes) from its table of fields: see
/// [`crate::view::layout`]. The module writes its `Display`.
macro_rules! cm_message {
    ($art:ident $what:literal; $($table:tt)*) => {
        $crate::view::layout! { $art $what, $crate::cm::MSG_LEN, "232 bytes"; $($table)* }
    };
}
pub(crate) use cm_message;

/// Defines a message made of a local and a remote communication ID followed
/// by private data only (RTU, DREP).
macro_rules! ids_and_private_data {
    ($what:literal, $pd_len:expr) => {
        use $crate::view::U32;

        #[doc = concat!("Bytes of private data in a ", $what, ".")]
        pub const PRIVATE_DATA_LEN: usize = $pd_len;

        $crate::cm::cm_message! {
            a $what;
            fields {
                /// The sender's communication ID.
                local_comm_id / set_local_comm_id: u32 = U32<0>;
                /// The receiver's communication ID.
                remote_comm_id / set_remote_comm_id: u32 = U32<4>;
            }
            bytes {
                /// Private data.
                private_data / private_data_mut: [8; PRIVATE_DATA_LEN];
            }
        }

        impl core::fmt::Display for Repr {
            fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
                write!(
                    f,
                    "{} local_comm_id 0x{:08x} remote_comm_id 0x{:08x}",
                    $what, self.local_comm_id, self.remote_comm_id
                )?;
                $crate::cm::fmt_private(f, &self.private_data)
            }
        }
    };
}
pub(crate) use ids_and_private_data;

/// A [`MsgResponse`] in the two bits field `F` holds.
pub(crate) struct Resp<F>(core::marker::PhantomData<F>);
impl<F: crate::view::Codec<u8>> crate::view::Codec<MsgResponse> for Resp<F> {
    fn get(b: &[u8]) -> MsgResponse {
        MsgResponse::from_bits(F::get(b))
    }
    fn set(b: &mut [u8], v: MsgResponse) {
        F::set(b, v.bits())
    }
}

/// The tests every CM message with a capture has: the captured bytes parse
/// to the expected Repr, which emits them again byte for byte into a
/// 0xa5-filled buffer, and one byte short is truncated.
#[cfg(test)]
macro_rules! capture_round_trip {
    ($data:expr, $repr:expr) => {
        #[test]
        fn parse_capture() {
            let p = Packet::new_checked($data).unwrap();
            assert_eq!(Repr::parse(&p).unwrap(), $repr);
        }

        #[test]
        fn emit_capture() {
            let mut bytes = [0xa5u8; $crate::cm::MSG_LEN];
            $repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
            assert_eq!(&bytes[..], $data);
        }

        #[test]
        fn truncated() {
            assert_eq!(
                Packet::new_checked(&$data[..$crate::cm::MSG_LEN - 1]).unwrap_err(),
                $crate::Error::Truncated
            );
        }
    };
}
#[cfg(test)]
pub(crate) use capture_round_trip;
