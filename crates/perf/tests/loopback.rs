//! Server and client of every test in one process (two soft devices).

use std::time::Duration;

use rdmakit_perf::{run_client, run_server, ClientOpts, Params, Progress, Row, ServerOpts, Test};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn run(test: Test, sizes: Vec<usize>, iters: u64, cq_mod: u32) -> rdmakit_perf::Report {
    run_with(test, sizes, iters, cq_mod, |_| {})
}

fn run_with(
    test: Test,
    sizes: Vec<usize>,
    iters: u64,
    cq_mod: u32,
    tweak: impl FnOnce(&mut Params),
) -> rdmakit_perf::Report {
    run_sides(test, sizes, iters, cq_mod, false, tweak)
}

/// A run with `use_event` (`-e`) on both sides or on neither.
fn run_sides(
    test: Test,
    sizes: Vec<usize>,
    iters: u64,
    cq_mod: u32,
    use_event: bool,
    tweak: impl FnOnce(&mut Params),
) -> rdmakit_perf::Report {
    let port = free_port();
    let server = std::thread::spawn(move || {
        run_server(
            &ServerOpts {
                port,
                device: None,
                provider: rdmakit_verbs::ProviderChoice::Soft,
                soft: rdmakit_verbs::DeviceConfig::default(),
                gid_index: 1,
                test,
                use_event,
            },
            &mut Progress::default(),
        )
    });
    let params = Params {
        test,
        sizes,
        iters,
        duration: None,
        inline: if test.is_bw() { 0 } else { 64 },
        tx_depth: test.default_tx_depth().min(16),
        rx_depth: 64,
        validate: true,
        mtu: 1024,
        ud: false,
        cq_mod,
    };
    let mut params = params;
    tweak(&mut params);
    let r = run_client(
        &ClientOpts {
            host: "127.0.0.1".into(),
            port,
            device: None,
            provider: rdmakit_verbs::ProviderChoice::Soft,
            soft: rdmakit_verbs::DeviceConfig::default(),
            gid_index: 1,
            params,
            connect_timeout: Duration::from_secs(10),
            use_event,
        },
        &mut Progress::default(),
    )
    .unwrap_or_else(|e| panic!("{test}: {e}"));
    let s = server
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{test} server: {e}"));
    assert_eq!(s.validated, Some(true));
    assert_eq!(
        (r.header.use_event, s.header.use_event),
        (use_event, use_event)
    );
    r
}

/// CQ moderation: most sends unsignaled (and without an ACK request), every
/// test still completes and validates — in iteration mode, where the last
/// send is signaled, and in duration mode, where the run ends wherever.
#[test]
fn every_test_completes_with_cq_moderation() {
    for t in Test::ALL {
        let sizes = if t == Test::AtomicBw {
            vec![8]
        } else {
            vec![2, 4096]
        };
        let r = run(t, sizes.clone(), 53, 100);
        assert_eq!(r.validated, Some(true), "{t}");
        match &r.results[..] {
            [Row::Bw(b), ..] => assert_eq!(b.iters, 53, "{t}"),
            [Row::Lat(l), ..] => assert_eq!(l.iters, 53, "{t}"),
            other => panic!("{t}: {other:?}"),
        }
        assert!(
            r.header.cq_mod > 1 || t == Test::ReadLat,
            "{t}: {}",
            r.header.cq_mod
        );
        let r = run_with(t, sizes, 1, 100, |p| p.duration = Some(0.2));
        assert_eq!(r.validated, Some(true), "{t} duration");
        assert_eq!(r.results.len(), if t == Test::AtomicBw { 1 } else { 2 });
    }
}

#[test]
fn every_test_moves_and_validates_data() {
    for t in Test::ALL {
        let sizes = if t == Test::AtomicBw {
            vec![8]
        } else {
            vec![2, 4096, 20000]
        };
        let r = run(t, sizes.clone(), 50, 1);
        assert_eq!(r.validated, Some(true), "{t}");
        assert_eq!(r.results.len(), sizes.len(), "{t}");
        for row in &r.results {
            match row {
                Row::Bw(b) => assert!(b.iters == 50 && b.bw_avg > 0.0, "{t} {b:?}"),
                Row::Lat(l) => assert!(
                    l.iters == 50 && l.t_min > 0.0 && l.t_min <= l.t_max,
                    "{t} {l:?}"
                ),
            }
        }
        assert!(r.control.create_qp > 0.0 && r.control.destroy_qp > 0.0);
    }
}

fn iters_of(r: &rdmakit_perf::Report) -> Vec<(usize, u64)> {
    r.results
        .iter()
        .map(|row| match row {
            Row::Bw(b) => (b.size, b.iters),
            Row::Lat(l) => (l.size, l.iters),
        })
        .collect()
}

/// `-e` on both sides: the runs that sleep on CQ events complete, validate
/// and count what the busy-polling runs count — with moderation (most sends
/// unsignaled) and without, and in duration mode, whose end a sleeping
/// loop must still see.
#[test]
fn event_mode_counts_what_busy_polling_counts() {
    for t in [Test::WriteBw, Test::SendBw, Test::SendLat, Test::ReadBw] {
        let sizes = vec![2, 4096, 20000];
        for cq_mod in [1, 100] {
            let polled = run_sides(t, sizes.clone(), 300, cq_mod, false, |_| {});
            let slept = run_sides(t, sizes.clone(), 300, cq_mod, true, |_| {});
            assert_eq!(iters_of(&slept), iters_of(&polled), "{t} -Q {cq_mod}");
            assert_eq!(iters_of(&slept)[0], (2, 300), "{t} -Q {cq_mod}");
        }
        let t0 = std::time::Instant::now();
        let r = run_sides(t, vec![4096], 1, 100, true, |p| p.duration = Some(0.3));
        let took = t0.elapsed();
        assert_eq!(r.validated, Some(true), "{t} -D");
        assert!(iters_of(&r)[0].1 > 0, "{t} -D: {:?}", iters_of(&r));
        assert!(took < Duration::from_secs(5), "{t} -D 0.3 took {took:?}");
    }
}

/// write-lat sees its echoes in memory: `-e` is refused on either side,
/// before anything is opened.
#[test]
fn event_mode_refuses_write_lat() {
    let e = run_server(
        &ServerOpts {
            port: free_port(),
            device: None,
            provider: rdmakit_verbs::ProviderChoice::Soft,
            soft: rdmakit_verbs::DeviceConfig::default(),
            gid_index: 0,
            test: Test::WriteLat,
            use_event: true,
        },
        &mut Progress::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), "params", "{e}");
    assert!(e.to_string().contains("write-lat"), "{e}");
}
