//! How the model's values are spelled in JSON: GUIDs as `0x` and 16 hex
//! digits (a JSON number loses bits past 2^53), widths as `4X`, speeds as
//! `EDR`, port states as `Active`. The shared types carry no serde, so the
//! spelling lives here, once.

use rdmakit_types::{PortState, Speed, Width};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serializer};

/// A GUID as ibnetdiscover's node names spell it, with `0x`.
pub(crate) fn guid_text(g: u64) -> String {
    format!("{g:#018x}")
}

/// A GUID from `0x…` hex (1 to 16 digits).
pub(crate) fn parse_guid(s: &str) -> Option<u64> {
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    parse_hex(h)
}

/// 1 to 16 hex digits, nothing else.
pub(crate) fn parse_hex(h: &str) -> Option<u64> {
    if h.is_empty() || h.len() > 16 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(h, 16).ok()
}

fn state_name(s: PortState) -> &'static str {
    match s {
        PortState::Down => "Down",
        PortState::Init => "Init",
        PortState::Armed => "Armed",
        PortState::Active => "Active",
    }
}

fn state_from_name(s: &str) -> Option<PortState> {
    [
        PortState::Down,
        PortState::Init,
        PortState::Armed,
        PortState::Active,
    ]
    .into_iter()
    .find(|p| state_name(*p) == s)
}

pub(crate) mod guid {
    use super::*;

    pub fn serialize<S: Serializer>(g: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&guid_text(*g))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let t = String::deserialize(d)?;
        parse_guid(&t).ok_or_else(|| D::Error::custom(format!("{t:?} is not a 0x GUID")))
    }
}

pub(crate) mod opt_guid {
    use super::*;

    pub fn serialize<S: Serializer>(g: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match g {
            Some(g) => s.serialize_some(&guid_text(*g)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(t) => parse_guid(&t)
                .map(Some)
                .ok_or_else(|| D::Error::custom(format!("{t:?} is not a 0x GUID"))),
        }
    }
}

pub(crate) mod port_state {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<PortState>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(p) => s.serialize_some(state_name(*p)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PortState>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(t) => state_from_name(&t)
                .map(Some)
                .ok_or_else(|| D::Error::custom(format!("{t:?} is not a port state"))),
        }
    }
}

fn width<E: serde::de::Error>(t: &str) -> Result<Width, E> {
    Width::from_name(t).ok_or_else(|| E::custom(format!("{t:?} is not a link width")))
}

fn speed<E: serde::de::Error>(t: &str) -> Result<Speed, E> {
    Speed::from_name(t).ok_or_else(|| E::custom(format!("{t:?} is not a link speed")))
}

pub(crate) mod opt_width {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<Width>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(w) => s.serialize_some(w.name()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Width>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| width(&t))
            .transpose()
    }
}

pub(crate) mod widths {
    use super::*;
    use serde::ser::SerializeSeq;

    pub fn serialize<S: Serializer>(v: &[Width], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for w in v {
            seq.serialize_element(w.name())?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Width>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|t| width(t))
            .collect()
    }
}

pub(crate) mod opt_speed {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<Speed>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(w) => s.serialize_some(w.name()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Speed>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| speed(&t))
            .transpose()
    }
}

pub(crate) mod speeds {
    use super::*;
    use serde::ser::SerializeSeq;

    pub fn serialize<S: Serializer>(v: &[Speed], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for w in v {
            seq.serialize_element(w.name())?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Speed>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|t| speed(t))
            .collect()
    }
}
