//! What the two-process tests share: this test binary spawned again as the
//! child, the `@@` lines it prints, and the RC QP each side starts from.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc};

use rdmakit_verbs::{ConnectOpts, Context, Cq, Endpoint, InitQp, Pd, QpType, RemoteBuf};

/// Spawns this test binary running only `child_role`, with `role` set to
/// `mode` in its environment. The receiver yields what follows `@@` on each
/// line the child prints.
#[allow(dead_code)]
pub fn spawn_child(role: &str, mode: &str) -> (Child, ChildStdin, mpsc::Receiver<String>) {
    spawn_child_with(role, mode, &[])
}

/// [`spawn_child`] with `wrapper` (a program and its arguments, such as
/// `setpriv …`) in front of the test binary.
#[allow(dead_code)]
pub fn spawn_child_with(
    role: &str,
    mode: &str,
    wrapper: &[&str],
) -> (Child, ChildStdin, mpsc::Receiver<String>) {
    let exe = std::env::current_exe().unwrap();
    let cmd = match wrapper.split_first() {
        Some((prog, args)) => {
            let mut c = Command::new(prog);
            c.args(args).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    spawn_child_cmd(cmd, role, mode)
}

/// [`spawn_child`] through `cmd`, a command that runs this test binary (as
/// `rdmakit_testkit::as_attacker` makes one).
#[allow(dead_code)]
pub fn spawn_child_cmd(
    mut cmd: Command,
    role: &str,
    mode: &str,
) -> (Child, ChildStdin, mpsc::Receiver<String>) {
    let mut child = cmd
        .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env(role, mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(i) = line.find("@@") {
                if tx.send(line[i + 2..].to_string()).is_err() {
                    break;
                }
            }
        }
    });
    let stdin = child.stdin.take().unwrap();
    (child, stdin, rx)
}

/// The child's `EP <endpoint> <addr hex> <rkey hex>` line.
#[allow(dead_code)]
pub fn parse_ep(line: &str) -> (Endpoint, RemoteBuf) {
    let mut f = line.strip_prefix("EP ").unwrap().split(' ');
    let ep = Endpoint::from_wire(f.next().unwrap()).unwrap();
    let remote = RemoteBuf {
        addr: u64::from_str_radix(f.next().unwrap(), 16).unwrap(),
        rkey: u32::from_str_radix(f.next().unwrap(), 16).unwrap(),
    };
    (ep, remote)
}

/// A PD, a 64-entry CQ and an RC QP on them in INIT.
pub fn rc_qp(ctx: &Arc<Context>, opts: ConnectOpts) -> (Arc<Pd>, Arc<Cq>, InitQp) {
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64, None).unwrap();
    let qp = pd.qp_builder(QpType::Rc, &cq).build().unwrap();
    let qp = qp.into_init(opts).unwrap();
    (pd, cq, qp)
}
