//! Opens soft device NAME, creates N RC QPs (plus their PD and CQ), prints
//! `ready <created> <errno-or-0>` and then sleeps until killed: an
//! application that dies holding QPs.
//!
//! `cargo run -p rdmakit-soft --example hold_qps -- NAME N [MAX_QP] [enospc] [leaky] [fork]`
//!
//! `leaky` opens a leaky device (its QPs outlive it); `fork` forks a child
//! that inherits the context and sleeps (no exec), printing `child <pid>`
//! before `ready`: killing the parent then leaves the QPs held by the child,
//! as a forked child keeps a real device's objects.

// An example: `expect` on setup failures is its error report.
use std::io::Write as _;

use rdmakit_soft::proto::QpType;
use rdmakit_soft::{Device, DeviceConfig, Errno, Limits, QpInit};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let name = a.first().cloned().unwrap_or_else(|| "soft0".into());
    let n: u32 = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let max_qp: u32 = a
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(Limits::default().max_qp);
    let flag = |f: &str| a.iter().skip(2).any(|x| x == f);
    let mut cfg = DeviceConfig {
        name: Some(name),
        limits: Limits {
            max_qp,
            ..Limits::default()
        },
        leaky: Some(flag("leaky")),
        ..DeviceConfig::from_env().unwrap()
    };
    cfg.faults.exhaust = Some(if flag("enospc") {
        Errno::ENOSPC
    } else {
        Errno::EINVAL
    });
    let dev = Device::open(cfg).expect("open");
    let pd = dev.alloc_pd().expect("alloc_pd");
    let cq = dev.create_cq(16, None).expect("create_cq");
    let mut made = 0;
    let mut errno = 0;
    for _ in 0..n {
        let init = QpInit::new(QpType::Rc, pd, cq, 4);
        match dev.create_qp(&init) {
            Ok(_) => made += 1,
            Err(e) => {
                errno = e.errno.0;
                break;
            }
        }
    }
    if flag("fork") {
        // SAFETY: the child calls only async-signal-safe functions (sleep)
        // until it is killed; the parent goes on as before.
        match unsafe { libc::fork() } {
            0 => loop {
                // SAFETY: sleep is async-signal-safe.
                unsafe { libc::sleep(3600) };
            },
            child if child > 0 => println!("child {child}"),
            _ => eprintln!("fork failed"),
        }
    }
    println!("ready {made} {errno}");
    let _ = std::io::stdout().flush();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}
