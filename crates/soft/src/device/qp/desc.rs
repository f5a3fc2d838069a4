//! A send queue's descriptor: the work request as posted, with its inline
//! bytes copied at post time.

use rdmakit_proto::{SendWr, Sge};

/// A posted send: the WR, and its inline data when it was posted inline
/// (its SGEs were copied and name no registered memory).
#[derive(Debug)]
pub(super) struct SendDesc {
    wr: SendWr,
    inline: Option<InlineData>,
}

impl SendDesc {
    /// The descriptor of `wr`.
    pub(super) fn new(wr: SendWr, inline: Option<InlineData>) -> SendDesc {
        SendDesc { wr, inline }
    }

    /// The WR and its inline data.
    pub(super) fn into_parts(self) -> (SendWr, Option<InlineData>) {
        (self.wr, self.inline)
    }
}

/// Bytes of inline data a send descriptor holds in place; longer inline
/// sends take a heap buffer.
const INLINE_IN_PLACE: usize = 64;

/// The inline bytes of a posted send, copied at post time: in the
/// descriptor itself when they fit (no allocation per small send).
#[derive(Debug)]
pub(super) enum InlineData {
    InPlace {
        len: u8,
        bytes: [u8; INLINE_IN_PLACE],
    },
    Heap(Vec<u8>),
}

impl InlineData {
    /// Copies the bytes every SGE names.
    ///
    /// # Safety
    /// Every SGE's `[addr, addr + length)` must be readable memory.
    pub(super) unsafe fn copy(sges: &[Sge]) -> InlineData {
        let total: usize = sges.iter().map(|s| s.length as usize).sum();
        if total <= INLINE_IN_PLACE {
            let mut bytes = [0u8; INLINE_IN_PLACE];
            let mut at = 0;
            for s in sges {
                let n = s.length as usize;
                // SAFETY: forwarded from this function's contract.
                unsafe { crate::dma::copy_inline_to(s.addr, &mut bytes[at..at + n]) };
                at += n;
            }
            // `total <= 64` fits a u8.
            return InlineData::InPlace {
                len: total as u8,
                bytes,
            };
        }
        let mut v = Vec::with_capacity(total);
        for s in sges {
            // SAFETY: forwarded from this function's contract.
            unsafe { crate::dma::copy_inline(s.addr, s.length as usize, &mut v) };
        }
        InlineData::Heap(v)
    }

    /// The bytes.
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            InlineData::InPlace { len, bytes } => &bytes[..usize::from(*len)],
            InlineData::Heap(v) => v,
        }
    }
}
