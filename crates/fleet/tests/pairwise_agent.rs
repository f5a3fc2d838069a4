//! The agent is not an open door: strangers, wrong tokens and garbage are
//! refused and logged while the real coordinator is still served; it runs
//! one test at a time, within bounds; a coordinator that dies mid-test
//! leaves no agent running one; it exits when idle, when told, or (once)
//! when its coordinator goes. Agents run in this process on loopback, each
//! soft NIC on its own 127.x address.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdmakit_fleet::pairwise::agent::{Agent, AgentConfig, Event, Exit};
use rdmakit_fleet::pairwise::auth::Token;
use rdmakit_fleet::pairwise::coordinator::{self, PairwiseConfig};
use rdmakit_fleet::pairwise::protocol::{self, ProtoError, Refusal, Reply, Request, TestSpec};

fn token() -> Token {
    Token::new(b"the-run-token-0123456789abcdef").unwrap()
}

/// A loopback address no other test process uses at the same time.
fn addr(k: u8) -> String {
    let p = std::process::id();
    format!(
        "127.{}.{}.{k}",
        100 + (p % 100) as u8,
        (p / 100 % 250) as u8 + 1
    )
}

struct Running {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Event>>>,
    handle: JoinHandle<Exit>,
}

impl Running {
    fn events(&self) -> Vec<Event> {
        self.log.lock().unwrap().clone()
    }

    fn wait_for(&self, what: &str, f: impl Fn(&Event) -> bool) -> Event {
        let t = Instant::now();
        loop {
            if let Some(e) = self.events().into_iter().find(|e| f(e)) {
                return e;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "no {what} in {:#?}",
                self.events()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn start(k: u8, name: &str, tweak: impl FnOnce(&mut AgentConfig)) -> Running {
    let mut cfg = AgentConfig::new(format!("{}:0", addr(k)).parse().unwrap(), name, token());
    cfg.idle_timeout = Duration::from_secs(120);
    tweak(&mut cfg);
    let agent = Agent::bind(cfg).unwrap();
    let addr = agent.local_addr();
    let log = Arc::new(Mutex::new(Vec::new()));
    let l2 = Arc::clone(&log);
    let handle = std::thread::spawn(move || {
        agent
            .run(Arc::new(move |e: &Event| {
                l2.lock().unwrap().push(e.clone())
            }))
            .unwrap()
    });
    Running { addr, log, handle }
}

fn spec(seconds: f64) -> TestSpec {
    TestSpec {
        test: "write-bw".into(),
        sizes: vec![65536],
        seconds: Some(seconds),
        iters: 0,
        tx_depth: 16,
        mtu: 4096,
        inline: 0,
    }
}

fn refused_count(r: &Running) -> usize {
    r.events()
        .iter()
        .filter(|e| matches!(e, Event::Refused { .. }))
        .count()
}

#[test]
fn strangers_wrong_tokens_and_garbage_are_refused_and_logged_then_the_coordinator_is_served() {
    // Names with letters no hex nonce has: "a1" was found in one by chance.
    let a = start(1, "node-a1", |_| {});
    let b = start(2, "node-a2", |_| {});
    let t5 = Duration::from_secs(5);

    // 1. No token at all: the stranger reads the challenge — a nonce and
    //    nothing else — and answers nothing useful (an HTTP request); it
    //    gets no welcome.
    let mut s = TcpStream::connect(a.addr).unwrap();
    s.set_read_timeout(Some(t5)).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut hello = String::new();
    r.read_line(&mut hello).unwrap();
    let v: serde_json::Value = serde_json::from_str(&hello).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["nonce"], "{hello}");
    assert!(
        !hello.contains("node-a1"),
        "the name before the proof: {hello}"
    );
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut rest = String::new();
    let _ = r.read_line(&mut rest);
    assert_eq!(rest, "{\"refused\":\"authentication failed\"}\n");
    a.wait_for(
        "refusal of the HTTP request",
        |e| matches!(e, Event::Refused { why, .. } if why.contains("malformed")),
    );

    // 2. A wrong token: refused on both sides, logged.
    let bad = Token::new(b"not-the-run-token-0123456789").unwrap();
    let e = protocol::connect(a.addr, &bad, t5).unwrap_err();
    assert!(e.to_string().contains("refused us"), "{e}");
    a.wait_for(
        "refusal of the wrong token",
        |e| matches!(e, Event::Refused { why, .. } if why.contains("wrong token")),
    );

    // 3. Garbage: binary bytes, then a line far over the bound.
    let mut g = TcpStream::connect(a.addr).unwrap();
    g.write_all(&[0xff, 0x00, 0xfe, b'\n']).unwrap();
    let mut g2 = TcpStream::connect(a.addr).unwrap();
    let _ = g2.write_all(&vec![b'{'; 64 * 1024]);
    // 4. A stranger that connects and says nothing: dropped at the
    //    handshake timeout.
    let _silent = TcpStream::connect(a.addr).unwrap();
    let t = Instant::now();
    while refused_count(&a) < 5 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(refused_count(&a) >= 5, "{:#?}", a.events());
    assert!(a.events().iter().any(
        |e| matches!(e, Event::Refused { why, .. } if why.contains("longer than") || why.contains("not UTF-8") || why.contains("malformed"))
    ));

    // 5. After all that, the real coordinator is served: a 2-node matrix.
    let mut cfg = PairwiseConfig::new(vec![a.addr, b.addr], token());
    cfg.bw_sizes = vec![65536];
    cfg.bw_seconds = 0.2;
    cfg.lat_seconds = 0.1;
    let rep = coordinator::run(&cfg, &|_| {}).unwrap();
    assert!(rep.unreachable.is_empty(), "{:?}", rep.unreachable);
    let screened: Vec<_> = rep.cells.iter().filter(|c| c.error.is_none()).collect();
    assert_eq!(screened.len(), 2, "{:#?}", rep.cells);
    assert!(screened.iter().all(|c| c.mbs > 0.0 && c.lat.is_some()));
    assert!(rep.faults.is_empty());
}

/// Connects and authenticates as the real coordinator.
fn coord(r: &Running) -> protocol::Conn {
    protocol::connect(r.addr, &token(), Duration::from_secs(5))
        .unwrap()
        .0
}

fn reply(c: &mut protocol::Conn) -> Reply {
    c.recv(Some(Duration::from_secs(30)), "a reply").unwrap()
}

/// Asks the agent behind `c` to serve test `id` with a client on loopback;
/// returns its reply.
fn serve(c: &mut protocol::Conn, id: u64, spec: TestSpec) -> Reply {
    c.send(&Request::Serve {
        id,
        spec,
        peer: "127.0.0.1".parse().unwrap(),
    })
    .unwrap();
    reply(c)
}

#[test]
fn one_test_at_a_time_and_within_bounds() {
    let a = start(3, "b1", |c| c.max_size = 1 << 20);
    let mut c1 = coord(&a);
    let mut c2 = coord(&a);
    // Over the size bound.
    let mut big = spec(0.2);
    big.sizes = vec![2 << 20];
    assert!(matches!(
        serve(&mut c1, 1, big),
        Reply::Refused {
            kind: Refusal::Bounds,
            ..
        }
    ));
    // Over the time bound (60 s by default).
    assert!(matches!(
        serve(&mut c1, 2, spec(61.0)),
        Reply::Refused {
            kind: Refusal::Bounds,
            ..
        }
    ));
    // A test in progress (waiting for its client) keeps a second one out.

    let Reply::Listening { port, .. } = serve(&mut c1, 3, spec(0.2)) else {
        panic!("not listening")
    };

    match serve(&mut c2, 4, spec(0.2)) {
        Reply::Refused { kind, message } => {
            assert_eq!(kind, Refusal::Busy, "{message}");
        }
        other => panic!("{other:?}"),
    }
    // A connection to the test port with a wrong ticket is refused too.
    let mut s = TcpStream::connect((a.addr.ip(), port)).unwrap();
    s.write_all(b"TICKET 00000000000000000000000000000000\n")
        .unwrap();
    a.wait_for(
        "the wrong ticket",
        |e| matches!(e, Event::Refused { why, .. } if why.contains("wrong ticket")),
    );
    // The coordinator hangs up while its test waits: the test ends, the
    // agent is free again.
    drop(c1);
    a.wait_for("the cancel", |e| {
        matches!(e, Event::Cancelled { id: 3, .. })
    });
    c2.send(&Request::Info).unwrap();
    assert!(matches!(reply(&mut c2), Reply::Info { .. }));
}

#[test]
fn a_coordinator_dying_mid_test_leaves_no_agent_testing() {
    let a = start(4, "c1", |_| {});
    let b = start(5, "c2", |_| {});
    let mut ca = coord(&a);
    let mut cb = coord(&b);
    // A long test: 20 s planned.
    let long = spec(20.0);
    cb.send(&Request::Serve {
        id: 9,
        spec: long.clone(),
        peer: a.addr.ip(),
    })
    .unwrap();
    let Reply::Listening { port, ticket, .. } = reply(&mut cb) else {
        panic!("not listening")
    };
    ca.send(&Request::Run {
        id: 9,
        spec: long,
        peer: b.addr.ip(),
        server: SocketAddr::new(b.addr.ip(), port),
        ticket,
    })
    .unwrap();
    // Let the test get going, then the coordinator "dies".
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    drop(ca);
    drop(cb);
    a.wait_for("the client's cancel", |e| {
        matches!(e, Event::Cancelled { id: 9, .. })
    });
    b.wait_for("the server's cancel", |e| {
        matches!(e, Event::Cancelled { id: 9, .. })
            || matches!(
                e,
                Event::TestDone {
                    id: 9,
                    error: Some(_),
                    ..
                }
            )
    });
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "cancelled only after {took:?}"
    );
    // Both are free at once: a new coordinator's test is not refused busy.
    for r in [&a, &b] {
        let mut c = coord(r);
        assert!(
            matches!(serve(&mut c, 10, spec(0.2)), Reply::Listening { .. }),
            "{:#?}",
            r.events()
        );
    }
}

#[test]
fn exits_when_idle_when_told_and_when_its_coordinator_goes() {
    let idle = start(6, "d1", |c| c.idle_timeout = Duration::from_millis(500));
    assert_eq!(idle.handle.join().unwrap(), Exit::Idle);

    let told = start(7, "d2", |_| {});
    let mut c = coord(&told);
    c.send(&Request::Shutdown).unwrap();
    assert_eq!(reply(&mut c), Reply::Bye);
    assert_eq!(told.handle.join().unwrap(), Exit::Shutdown);

    let once = start(8, "d3", |c| c.once = true);
    // A stranger's visit does not count as its coordinator.
    let _ = protocol::connect(
        once.addr,
        &Token::new(b"someone-else-0123456789").unwrap(),
        Duration::from_secs(5),
    );
    let mut c = coord(&once);
    c.send(&Request::Info).unwrap();
    assert!(matches!(reply(&mut c), Reply::Info { .. }));
    assert!(!once.handle.is_finished());
    drop(c);
    assert_eq!(once.handle.join().unwrap(), Exit::CoordinatorGone);
}

#[test]
fn an_impostor_agent_is_not_trusted() {
    // Something listening where an agent should be, that does not hold the
    // token: the coordinator refuses to use it.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut w = s.try_clone().unwrap();
        writeln!(w, r#"{{"nonce":"{}"}}"#, "00".repeat(32)).unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        writeln!(w, r#"{{"welcome":"{}","name":"evil"}}"#, "11".repeat(32)).unwrap();
    });
    let e = protocol::connect(at, &token(), Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, ProtoError::AuthFailed { .. }), "{e}");
    assert!(e.to_string().contains("not our agent"), "{e}");
}

/// An agent of an older rdmakit (protocol 1 announced its name before the
/// proof): the coordinator says what is wrong instead of "malformed".
#[test]
fn an_agent_of_the_old_protocol_is_named_as_such() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        writeln!(
            s,
            r#"{{"hello":"rdmakit.fleet.agent/1","name":"n1","nonce":"{}"}}"#,
            "00".repeat(32)
        )
        .unwrap();
        std::thread::sleep(Duration::from_secs(1));
    });
    let e = protocol::connect(at, &token(), Duration::from_secs(5)).unwrap_err();
    assert!(
        e.to_string().contains(
            "the agent speaks rdmakit.fleet.agent/1, this coordinator rdmakit.fleet.agent/2"
        ),
        "{e}"
    );
}

/// Issue 34: strangers holding connections open — more than the pool of
/// pending handshakes holds, or trickling a byte at a time — do not keep
/// the coordinator out: the oldest stranger is closed to make room, and a
/// slow one is cut at its one deadline however often it sends a byte.
#[test]
fn idle_and_slow_strangers_do_not_keep_the_coordinator_out() {
    let a = start(9, "e1", |c| {
        c.max_handshakes = 4;
        c.handshake_timeout = Duration::from_secs(2);
    });
    let idle: Vec<TcpStream> = (0..10)
        .map(|_| TcpStream::connect(a.addr).unwrap())
        .collect();
    let t = Instant::now();
    let mut c = coord(&a);
    c.send(&Request::Info).unwrap();
    assert!(matches!(reply(&mut c), Reply::Info { .. }));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    a.wait_for(
        "an eviction",
        |e| matches!(e, Event::Refused { why, .. } if why.contains("this the oldest")),
    );
    drop(idle);

    // A byte every 300 ms: each read is quick, the handshake never ends.
    let slow = TcpStream::connect(a.addr).unwrap();
    let from = slow.local_addr().unwrap().to_string();
    let start = Instant::now();
    let trickle = std::thread::spawn(move || {
        let mut slow = slow;
        while start.elapsed() < Duration::from_secs(6) {
            if slow.write_all(b"{").is_err() {
                return start.elapsed();
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        start.elapsed()
    });
    a.wait_for(
        "the slow stranger's deadline",
        |e| matches!(e, Event::Refused { peer, why } if *peer == from && why.contains("within 2.0 s")),
    );
    let cut = trickle.join().unwrap();
    assert!(cut < Duration::from_secs(5), "cut only after {cut:?}");
}
