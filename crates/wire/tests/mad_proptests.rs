//! Property tests of the SMP and PMA layouts: no parser panics on arbitrary
//! bytes, every Repr survives emit then parse, and input shorter than the
//! layout is an error.

use proptest::prelude::*;
use rdmakit_wire::mad::pma::{
    self, class_port_info, port_counters, port_counters_ext, rcv_error_details,
    xmit_discard_details,
};
use rdmakit_wire::mad::smp::{
    self, lft, node_description, node_info, port_info, sm_info, switch_info, Directed, Route,
};
use rdmakit_wire::mad::{Attribute, Status};
use rdmakit_wire::Error;

/// For an attribute module: parse arbitrary bytes without panicking; what
/// parses emits into a 0xa5-filled buffer and parses back to itself; a buffer
/// one byte short of `LEN` is `Truncated`.
macro_rules! attr_props {
    ($m:ident, $bytes:expr) => {{
        let bytes: &[u8] = $bytes;
        let checked = $m::Packet::new_checked(bytes);
        if bytes.len() < $m::LEN {
            prop_assert_eq!(checked.unwrap_err(), Error::Truncated);
        } else {
            let repr = $m::Repr::parse(&checked.unwrap()).unwrap();
            let _ = repr.to_string();
            let mut out = vec![0xa5u8; repr.buffer_len()];
            repr.emit(&mut $m::Packet::new_unchecked(&mut out[..]));
            let again = $m::Repr::parse(&$m::Packet::new_checked(&out[..]).unwrap()).unwrap();
            prop_assert_eq!(again, repr);
            // The same through the Attribute trait, and a short data area refused.
            prop_assert_eq!(<$m::Repr as Attribute>::from_data(bytes).unwrap(), repr);
            let mut short = vec![0u8; $m::LEN - 1];
            prop_assert_eq!(repr.to_data(&mut short).unwrap_err(), Error::Truncated);
        }
    }};
}

fn path() -> impl Strategy<Value = [u8; 64]> {
    proptest::collection::vec(any::<u8>(), 64).prop_map(|v| v.try_into().unwrap())
}

prop_compose! {
    fn directed()(
        returning in any::<bool>(),
        hop_pointer in any::<u8>(),
        hop_count in 0u8..=63,
        dr_slid in any::<u16>(),
        dr_dlid in any::<u16>(),
        initial_path in path(),
        return_path in path(),
    ) -> Directed {
        Directed { returning, hop_pointer, hop_count, dr_slid, dr_dlid, initial_path, return_path }
    }
}

fn route() -> impl Strategy<Value = Route> {
    prop_oneof![Just(Route::Lid), directed().prop_map(Route::Directed)]
}

fn smp_repr() -> impl Strategy<Value = smp::Repr> {
    (any::<(u8, u8, u16, u64, u16, u32, u64)>(), route(), path()).prop_map(
        |((cv, method, status, tid, attr_id, attr_mod, m_key), route, data)| {
            // A directed SMP's status has 15 bits (the 16th is the D bit).
            let status = match route {
                Route::Lid => status,
                Route::Directed(_) => status & 0x7fff,
            };
            smp::Repr {
                class_version: cv,
                method,
                status,
                tid,
                attr_id,
                attr_mod,
                m_key,
                route,
                data,
            }
        },
    )
}

fn pma_repr() -> impl Strategy<Value = pma::Repr> {
    (
        any::<(u8, u8, u16, u64, u16, u32)>(),
        proptest::collection::vec(any::<u8>(), 192),
    )
        .prop_map(
            |((class_version, method, status, tid, attr_id, attr_mod), data)| pma::Repr {
                class_version,
                method,
                status,
                tid,
                attr_id,
                attr_mod,
                data: data.try_into().unwrap(),
            },
        )
}

proptest! {
    #[test]
    fn smp_and_pma_parse_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(p) = smp::Packet::new_checked(&bytes[..]) {
            let _ = smp::Repr::parse(&p).map(|r| r.to_string());
            let _ = (p.status(), p.is_response(), p.initial_path(), p.return_path());
        } else {
            prop_assert!(bytes.len() < 256);
        }
        if let Ok(p) = pma::Packet::new_checked(&bytes[..]) {
            let _ = pma::Repr::parse(&p).map(|r| r.to_string());
        } else {
            prop_assert!(bytes.len() < 256);
        }
        let _ = Status(u16::from_be_bytes([bytes.first().copied().unwrap_or(0), bytes.len() as u8]))
            .to_string();
    }

    #[test]
    fn attributes_parse_emit_parse(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        attr_props!(node_info, &bytes);
        attr_props!(node_description, &bytes);
        attr_props!(switch_info, &bytes);
        attr_props!(port_info, &bytes);
        attr_props!(lft, &bytes);
        attr_props!(sm_info, &bytes);
        attr_props!(class_port_info, &bytes);
        attr_props!(port_counters, &bytes);
        attr_props!(port_counters_ext, &bytes);
        attr_props!(rcv_error_details, &bytes);
        attr_props!(xmit_discard_details, &bytes);
    }

    #[test]
    fn smp_repr_roundtrip(repr in smp_repr()) {
        let mut buf = vec![0xa5u8; 256];
        repr.emit(&mut smp::Packet::new_unchecked(&mut buf[..]));
        let back = smp::Repr::parse(&smp::Packet::new_checked(&buf[..]).unwrap()).unwrap();
        prop_assert_eq!(back, repr);
        prop_assert_eq!(
            smp::Packet::new_checked(&buf[..255]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn pma_repr_roundtrip(repr in pma_repr()) {
        let buf = repr.to_bytes();
        let back = pma::Repr::parse(&pma::Packet::new_checked(&buf[..]).unwrap()).unwrap();
        prop_assert_eq!(back, repr);
    }

    #[test]
    fn directed_routes_up_to_63_hops(ports in proptest::collection::vec(0u8..255, 0..80)) {
        match Route::directed(&ports) {
            Ok(Route::Directed(d)) => {
                prop_assert!(ports.len() <= 63);
                prop_assert_eq!(d.path(), &ports[..]);
            }
            Ok(Route::Lid) => prop_assert!(false, "a directed route came back LID-routed"),
            Err(e) => {
                prop_assert!(ports.len() > 63);
                prop_assert_eq!(e, smp::PathError::TooLong { hops: ports.len() });
            }
        }
    }
}
