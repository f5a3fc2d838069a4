//! Replays the real NETLINK_RDMA replies captured from a 6.1 kernel with rxe
//! (fixtures/healthy and healthy-busy, netlink/*.bin) through the native
//! NLDEV client, and pins the error paths (kernel errors, failed dumps, truncated
//! and malformed replies, no RDMA in the kernel, owner liveness).

/// Named `netlink` so `cargo test -p rdmakit-host netlink` selects these tests.
mod netlink {
    use std::path::PathBuf;

    use rdmakit_host::bundle::Bundle;
    use rdmakit_host::capture::import_capture;
    use rdmakit_host::netlink::{self, msg, requests, Holder, Liveness, NlError, ResKind};
    use rdmakit_host::source::{Answer, Errno, Op, Probe};

    fn fixtures() -> PathBuf {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures"))
    }

    fn scenario(name: &str) -> Bundle {
        import_capture(&fixtures().join(name)).expect("capture imports")
    }

    fn read(scn: &str, file: &str) -> Vec<u8> {
        std::fs::read(fixtures().join(scn).join("netlink").join(file)).expect("fixture file")
    }

    /// Our requests are byte-identical to what the capture sent (seq 1000 + op, port 0).
    #[test]
    fn requests_match_the_captured_req_bin_files() {
        let cases: [(&str, Vec<u8>); 10] = [
            ("op1-get", requests::devices()),
            ("op5-port-get", requests::ports(0)),
            ("op9-res-get", requests::res_summary()),
            ("op10-res-qp-get", requests::res_dump(ResKind::Qp, 0)),
            ("op12-res-cq-get", requests::res_dump(ResKind::Cq, 0)),
            ("op13-res-mr-get", requests::res_dump(ResKind::Mr, 0)),
            ("op14-res-pd-get", requests::res_dump(ResKind::Pd, 0)),
            ("op15-get-chardev", requests::chardev(0)),
            ("op17-stat-get", requests::port_stat(0, 1)),
            ("op6-sys-get", requests::sys()),
        ];
        for (name, ours) in cases {
            assert_eq!(ours, read("healthy", &format!("{name}.req.bin")), "{name}");
        }
    }

    #[test]
    fn healthy_busy_replay() {
        let b = scenario("healthy-busy");
        let f = netlink::rdma_netlink(&b);
        let devs = f.devs.as_ref().unwrap();
        assert_eq!(devs.len(), 1);
        let d = &devs[0];
        assert_eq!((d.index, d.name.as_str()), (0, "rxe0"));
        assert_eq!(d.ports, Some(1));
        assert_eq!(d.node_type, Some(1));
        assert_eq!(
            netlink::names::guid(d.node_guid.unwrap()),
            "5054:00ff:fe12:3456"
        );
        assert_eq!(d.protocol.as_deref(), Some("roce"));
        assert_eq!(d.dim, Some(false));
        assert_eq!(
            d.fw_version, None,
            "rxe has an empty fw_ver: the kernel omits it"
        );

        let dev = &f.devices[0];
        let ports = dev.ports.as_ref().unwrap();
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].state, Some(4));
        assert_eq!(ports[0].phys_state, Some(5));
        assert_eq!(ports[0].netdev.as_deref(), Some("eth0"));
        assert_eq!(ports[0].netdev_index, Some(2));

        let (qps, errs) = f.resources(ResKind::Qp);
        assert!(errs.is_empty());
        let lq: Vec<_> = qps
            .iter()
            .map(|q| (q.lqpn.unwrap(), q.holder.clone()))
            .collect();
        assert_eq!(
            lq,
            vec![
                (17, Holder::Pid(342)),
                (18, Holder::Pid(345)),
                (19, Holder::Pid(343)),
                (1, Holder::Kernel("ib_core".into())),
            ]
        );
        assert_eq!(qps[1].rqpn, Some(19));
        assert_eq!(qps[1].state, Some(3));
        assert_eq!(qps[3].res_type, Some(1));
        assert_eq!(qps[3].pdn, None);

        let (cqs, _) = f.resources(ResKind::Cq);
        assert_eq!(
            cqs.iter().map(|c| c.cqe.unwrap()).collect::<Vec<_>>(),
            [1023, 511, 255, 255]
        );
        assert_eq!(cqs[0].poll_ctx, Some(2));
        let (mrs, _) = f.resources(ResKind::Mr);
        assert_eq!(mrs[0].lkey, Some(0x23f));
        assert_eq!(mrs[1].mrlen, Some(131072));
        let (pds, _) = f.resources(ResKind::Pd);
        assert_eq!(pds[0].local_dma_lkey, Some(0x18a));
        assert_eq!(pds.len(), 4);

        // Not captured: the source has no answer, and says so.
        for k in [ResKind::Ctx, ResKind::Srq, ResKind::CmId] {
            assert_eq!(dev.resources[&k], Err(NlError::NotRecorded), "{k:?}");
        }
        assert_eq!(dev.qp_counters, Err(NlError::NotRecorded));

        let s = &f.summary.as_ref().unwrap()[0];
        assert_eq!(s.count("qp"), Some(4));
        assert_eq!(s.count("mr"), Some(3));
        assert_eq!(s.count("ctx"), Some(3));

        let (port, st) = &dev.port_stats[0];
        assert_eq!(*port, 1);
        let st = st.as_ref().unwrap();
        assert_eq!(st.counters.len(), 15);
        assert_eq!(st.counters[0], ("sent_pkts".into(), 28646));

        let sys = f.sys.as_ref().unwrap();
        assert_eq!(sys.netns_mode, Some(1));
        assert_eq!(sys.copy_on_fork, Some(1));
        let cd = dev.chardev.as_ref().unwrap();
        assert_eq!(cd.name.as_deref(), Some("uverbs0"));
        assert_eq!(cd.abi, Some(2));

        // The capture holds no /proc/<pid>: the owners are unknown, not dead.
        assert!(!f.proc_listed);
        assert_eq!(
            f.owners.keys().copied().collect::<Vec<_>>(),
            [342, 343, 345]
        );
        for o in f.owners.values() {
            assert_eq!(o.state, Liveness::Unknown, "{o:?}");
        }
        assert_eq!(
            f.owner_of(&Holder::Kernel("ib_core".into())).0,
            Liveness::Kernel
        );
    }

    #[test]
    fn healthy_replay_has_only_kernel_objects() {
        let f = netlink::rdma_netlink(&scenario("healthy"));
        let (qps, _) = f.resources(ResKind::Qp);
        assert_eq!(qps.len(), 1);
        assert_eq!(qps[0].holder, Holder::Kernel("ib_core".into()));
        assert!(f.owners.is_empty());
    }

    /// A copy of healthy-busy with a process table: 342 a zombie, 343 gone, 345 alive.
    #[test]
    fn owner_liveness_from_proc() {
        let mut b = scenario("healthy-busy");
        b.add_process(1, None, None);
        b.add_process(
            342,
            Some("342 (ibv_rc_pingp) Z 1 342 1 0 -1 4194564 0 0"),
            Some("ibv_rc_pingpong"),
        );
        b.add_process(
            345,
            Some("345 (ib_write_bw) S 1 345 1 0 -1"),
            Some("ib_write_bw"),
        );
        let f = netlink::rdma_netlink(&b);
        assert!(f.proc_listed);
        assert_eq!(f.owners[&342].state, Liveness::Zombie);
        assert_eq!(f.owners[&342].comm.as_deref(), Some("ibv_rc_pingpong"));
        assert_eq!(f.owners[&343].state, Liveness::Dead);
        assert_eq!(f.owners[&345].state, Liveness::Alive);
        assert_eq!(
            f.owner_of(&Holder::Pid(345)),
            (Liveness::Alive, Some("ib_write_bw".into()))
        );
    }

    /// EPROTONOSUPPORT from socket(): no RDMA in the kernel; nothing else is asked.
    #[test]
    fn no_rdma_in_kernel_is_a_value() {
        let mut b = Bundle::new(
            Bundle::header_now("test", Default::default()),
            Default::default(),
        );
        b.set(
            Op::Probe,
            &Probe::Netlink(requests::devices()).key(),
            Answer::Err(Errno::EPROTONOSUPPORT),
        );
        let f = netlink::rdma_netlink(&b);
        assert_eq!(f.devs, Err(NlError::Socket(Errno::EPROTONOSUPPORT)));
        assert!(f.devices.is_empty());
        assert!(f.devs.unwrap_err().to_string().contains("no RDMA netlink"));
    }

    fn nlmsg(kind: u16, flags: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(&flags.to_ne_bytes());
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(payload);
        v.resize((v.len() + 3) & !3, 0);
        v
    }

    /// A doit the kernel refuses (an older kernel: EOPNOTSUPP; no CAP_NET_ADMIN: EPERM).
    #[test]
    fn nlmsg_error_becomes_kernel_errno() {
        let req = requests::qp_counters(0);
        for errno in [95i32, 1] {
            let mut p = (-errno).to_ne_bytes().to_vec();
            p.extend_from_slice(&req);
            let reply = nlmsg(2, 0x100, &p);
            assert_eq!(
                netlink::interpret(&req, &reply),
                Err(NlError::Kernel(Errno(errno)))
            );
        }
    }

    /// A failing dump ends with NLMSG_DONE carrying -errno (here -EINVAL: a RES dump
    /// without DEV_INDEX).
    #[test]
    fn failed_dump_done_with_negative_errno() {
        let req = requests::res_dump(ResKind::Qp, 0);
        let reply = nlmsg(3, 2, &(-22i32).to_ne_bytes());
        assert_eq!(
            netlink::interpret(&req, &reply),
            Err(NlError::Dump(Errno::EINVAL))
        );
    }

    /// Every prefix of every captured reply: an error (truncated / unterminated) or a
    /// shorter answer, never a panic; cut inside a message it is always an error.
    #[test]
    fn truncated_captured_replies_are_errors() {
        for scn in ["healthy", "healthy-busy"] {
            let dir = fixtures().join(scn).join("netlink");
            for ent in std::fs::read_dir(&dir).unwrap() {
                let p = ent.unwrap().path();
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                let Some(stem) = name.strip_suffix(".req.bin") else {
                    continue;
                };
                let req = std::fs::read(&p).unwrap();
                let reply = read(scn, &format!("{stem}.bin"));
                assert!(netlink::interpret(&req, &reply).is_ok(), "{scn}/{stem}");
                for cut in 0..reply.len() {
                    let r = netlink::interpret(&req, &reply[..cut]);
                    assert!(r.is_err(), "{scn}/{stem} cut at {cut}: {r:?}");
                }
            }
        }
    }

    /// A lying attribute length inside a real device message is malformed, and a known
    /// attribute of the wrong size too.
    #[test]
    fn malformed_attributes_are_errors() {
        let req = requests::devices();
        let mut reply = read("healthy", "op1-get.bin");
        // First attribute of the first message: nla_len 8 -> 200.
        reply[16] = 200;
        assert!(matches!(
            netlink::interpret(&req, &reply),
            Err(NlError::Malformed(msg::Malformed::Truncated { .. }))
        ));
        // DEV_INDEX with 2 bytes of payload.
        let attrs = vec![msg::RawAttr {
            kind: 1,
            nested: false,
            data: vec![0, 0],
        }];
        assert!(matches!(
            netlink::views::dev(&attrs),
            Err(msg::Malformed::BadAttr { attr: 1, .. })
        ));
    }

    /// Unknown attributes (a newer kernel) are kept as (type, bytes).
    #[test]
    fn unknown_attributes_are_kept() {
        let req = requests::devices();
        let reply = read("healthy", "op1-get.bin");
        let msgs = msg::parse_messages(&reply).unwrap();
        let msg::Body::Data(mut payload) = msgs[0].body.clone() else {
            panic!()
        };
        payload.extend_from_slice(&[8, 0, 200, 0, 1, 2, 3, 4]);
        let mut bytes = nlmsg(0x1401, 2, &payload);
        bytes.extend_from_slice(&nlmsg(3, 2, &0i32.to_ne_bytes()));
        let attrs = netlink::interpret(&req, &bytes).unwrap();
        let d = netlink::views::dev(&attrs[0]).unwrap();
        assert_eq!(d.name, "rxe0");
        assert_eq!(d.unknown.len(), 1);
        assert_eq!(d.unknown[0].kind, 200);
        assert_eq!(d.unknown[0].data, [1, 2, 3, 4]);
    }

    /// The kernel sets NLA_F_NESTED on the counter table; the type is read without it.
    #[test]
    fn nested_flag_is_masked() {
        let reply = read("healthy-busy", "op17-stat-get.bin");
        let attrs = netlink::interpret(&requests::port_stat(0, 1), &reply).unwrap();
        let hw = attrs[0].iter().find(|a| a.kind == 80).unwrap();
        assert!(hw.nested);
    }
}
