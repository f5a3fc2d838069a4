//! Property tests: the NLDEV parser never panics on arbitrary bytes, and requests
//! built by the builder parse back.

/// Named `netlink` so `cargo test -p rdmakit-host netlink` selects these tests.
mod netlink {
    use proptest::prelude::*;
    use rdmakit_host::netlink::{self, msg, requests, ResKind};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = msg::parse_messages(&bytes);
            let _ = msg::parse_attrs(&bytes);
            for req in [requests::devices(), requests::res_dump(ResKind::Qp, 0), requests::port_stat(0, 1)] {
                if let Ok(msgs) = netlink::interpret(&req, &bytes) {
                    for m in &msgs {
                        let _ = netlink::views::dev(m);
                        let _ = netlink::views::port(m);
                        let _ = netlink::views::res_summary(m);
                        for k in ResKind::ALL {
                            let _ = netlink::views::resources(k, m);
                        }
                        let _ = netlink::views::port_stat(m);
                        let _ = netlink::views::qp_counters(m);
                        let _ = netlink::views::sys(m);
                        let _ = netlink::views::chardev(m);
                        let _ = netlink::views::event(m);
                    }
                }
            }
        }

        /// A plausible header followed by random attribute bytes: the nested decoders
        /// see structured garbage, not only short buffers.
        #[test]
        fn garbage_attributes_in_a_valid_frame(
            attrs in proptest::collection::vec(any::<u8>(), 0..400),
            op in prop::sample::select(vec![1u16, 5, 9, 10, 11, 12, 13, 14, 17, 22, 23]),
        ) {
            let kind = 0x1400 + op;
            let mut m = Vec::new();
            m.extend_from_slice(&((16 + attrs.len()) as u32).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(&2u16.to_ne_bytes());
            m.extend_from_slice(&[0; 8]);
            m.extend_from_slice(&attrs);
            m.resize((m.len() + 3) & !3, 0);
            m.extend_from_slice(&[20, 0, 0, 0, 3, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            let req = msg::Request::new(kind, 0x301, 1).build();
            if let Ok(msgs) = netlink::interpret(&req, &m) {
                for a in &msgs {
                    for k in ResKind::ALL {
                        let _ = netlink::views::resources(k, a);
                    }
                    let _ = netlink::views::qp_counters(a);
                    let _ = netlink::views::port_stat(a);
                    let _ = netlink::views::res_summary(a);
                }
            }
        }

        #[test]
        fn built_requests_parse_back(dev in any::<u32>(), port in any::<u32>()) {
            let req = requests::port_stat(dev, port);
            let msgs = msg::parse_messages(&req).unwrap();
            prop_assert_eq!(msgs.len(), 1);
            let msg::Body::Data(p) = &msgs[0].body else { panic!() };
            let attrs = msg::parse_attrs(p).unwrap();
            prop_assert_eq!(attrs[0].u32().unwrap(), dev);
            prop_assert_eq!(attrs[1].u32().unwrap(), port);
        }
    }
}
