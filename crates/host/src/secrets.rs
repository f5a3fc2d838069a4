//! What a bundle never carries out of the host: a process's environment or its
//! arguments, and secrets on the kernel command line.
//!
//! One collector reads `/proc/PID/environ` and `/proc/PID/cmdline`: the collecting
//! process's ancestors ([`crate::model::Ancestor`]), for the Slurm health check's
//! slurm.conf. It keeps of them only what [`kept_argv`] and [`kept_environ`] allow,
//! and this module is also the last gate before bytes leave the host (a written
//! bundle, a sweep's bundle frame), so no collector can ship a token by reading
//! one. Every record is passed through [`scrub`] when a bundle is serialized:
//! - `/proc/*/environ` (any pid, `self`, `thread-self`, a task) keeps only the
//!   variables named in [`ENV_ALLOW`];
//! - `/proc/*/cmdline` of a process keeps only the program (argv\[0\]) and, for
//!   slurmd and slurmstepd, the `-f FILE` naming their slurm.conf ([`kept_argv`]);
//! - `/proc/cmdline` (the kernel's) keeps every parameter, with the value of any
//!   whose name says password, secret, token or credential replaced
//!   (`rd.iscsi.password=...`, `netroot=iscsi:user:pass@...` stays as is: dracut
//!   parses it, the doctor does not read it).

use std::borrow::Cow;

use crate::source::{Answer, Op};

/// The environment variables a bundle may carry (Slurm's, naming the node, job
/// and configuration): nothing else of an environment is recorded.
pub const ENV_ALLOW: &[&str] = &[
    "SLURM_CONF",
    "SLURMD_NODENAME",
    "SLURM_CLUSTER_NAME",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
];

/// What replaces a secret kernel parameter's value.
pub const HIDDEN: &str = "(hidden by rdmakit)";

/// The answer as a bundle may carry it (borrowed when nothing changes).
pub fn scrub<'a>(op: Op, path: &str, answer: &'a Answer) -> Cow<'a, Answer> {
    let Answer::Data(bytes) = answer else {
        return Cow::Borrowed(answer);
    };
    if op != Op::Read {
        return Cow::Borrowed(answer);
    }
    let kept = match proc_file(path) {
        Some(ProcFile::Environ) => keep_env(bytes),
        Some(ProcFile::ProcessCmdline) => {
            let mut v = Vec::new();
            for a in kept_argv(crate::parse::proc::nul_separated(bytes)) {
                v.extend_from_slice(a.as_bytes());
                v.push(0);
            }
            v
        }
        Some(ProcFile::KernelCmdline) => kernel_cmdline(bytes),
        None => return Cow::Borrowed(answer),
    };
    if kept == *bytes {
        Cow::Borrowed(answer)
    } else {
        Cow::Owned(Answer::Data(kept))
    }
}

/// What is kept of a process's command line: the program (argv\[0\]); for slurmd
/// and slurmstepd also their `-f FILE` (which slurm.conf they run with). A job's
/// arguments may hold a secret, and nothing rdmakit does needs them.
pub fn kept_argv(argv: Vec<String>) -> Vec<String> {
    let Some(program) = argv.first() else {
        return argv;
    };
    let mut kept = vec![program.clone()];
    if is_slurm_daemon(program) {
        if let Some(f) = conf_arg(&argv) {
            kept.extend(["-f".to_string(), f.to_string()]);
        }
    }
    kept
}

/// What is kept of a process's environment: the `NAME=value` entries whose name
/// is in `allow` (a subset of [`ENV_ALLOW`]; the names outside it are dropped too).
pub fn kept_environ(environ: Vec<String>, allow: &[&str]) -> Vec<String> {
    environ
        .into_iter()
        .filter(|e| {
            e.split_once('=')
                .is_some_and(|(name, _)| allow.contains(&name) && ENV_ALLOW.contains(&name))
        })
        .collect()
}

/// slurmd, or slurmstepd (which renames itself "slurmstepd: [12.0]"), by argv\[0\]
/// without its directory.
pub fn is_slurm_daemon(argv0: &str) -> bool {
    let prog = argv0.rsplit('/').next().unwrap_or(argv0);
    prog == "slurmd" || prog.starts_with("slurmstepd")
}

/// slurmd's `-f FILE` or `-fFILE`.
pub fn conf_arg(argv: &[String]) -> Option<&str> {
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "-f" {
            return it.next().map(String::as_str).filter(|s| !s.is_empty());
        }
        if let Some(rest) = a.strip_prefix("-f") {
            if !rest.is_empty() && !rest.starts_with('-') {
                return Some(rest);
            }
        }
    }
    None
}

enum ProcFile {
    Environ,
    ProcessCmdline,
    KernelCmdline,
}

/// Which of the scrubbed files `path` is: `/proc/cmdline`, or
/// `/proc/<pid|self|thread-self>[/task/<tid>]/{environ,cmdline}`.
fn proc_file(path: &str) -> Option<ProcFile> {
    // Collapse "//" and "/./" so a path spelled oddly is still recognized.
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.first() != Some(&"proc") {
        return None;
    }
    let is_pid = |s: &str| {
        s == "self"
            || s == "thread-self"
            || (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
    };
    let leaf = match parts.as_slice() {
        ["proc", "cmdline"] => return Some(ProcFile::KernelCmdline),
        ["proc", pid, leaf] if is_pid(pid) => *leaf,
        ["proc", pid, "task", tid, leaf] if is_pid(pid) && is_pid(tid) => *leaf,
        _ => return None,
    };
    match leaf {
        "environ" => Some(ProcFile::Environ),
        "cmdline" => Some(ProcFile::ProcessCmdline),
        _ => None,
    }
}

/// The NUL-separated `NAME=value` entries whose name is in [`ENV_ALLOW`].
fn keep_env(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in bytes.split(|b| *b == 0) {
        let name = e.split(|b| *b == b'=').next().unwrap_or_default();
        if e.contains(&b'=') && ENV_ALLOW.iter().any(|a| a.as_bytes() == name) {
            out.extend_from_slice(e);
            out.push(0);
        }
    }
    out
}

/// The kernel command line with secret parameters' values hidden.
fn kernel_cmdline(bytes: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_ref();
    // Split on whitespace, keeping the separators, so the rest stays byte for byte.
    while !rest.is_empty() {
        let start = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let word = &rest[..end];
        match word.split_once('=') {
            Some((name, _)) if secret_name(name) => {
                out.push_str(name);
                out.push('=');
                out.push_str(HIDDEN);
            }
            _ => out.push_str(word),
        }
        rest = &rest[end..];
    }
    out.into_bytes()
}

fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["password", "passwd", "secret", "token", "credential"]
        .iter()
        .any(|w| n.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(a: &Answer) -> Vec<u8> {
        match a {
            Answer::Data(d) => d.clone(),
            other => panic!("{other:?}"),
        }
    }

    const ENV: &[u8] =
        b"PATH=/bin\0AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI\0SLURM_CONF=/etc/slurm.conf\0\
RDMAKIT_PAIRWISE_TOKEN=0123abcd\0SLURMD_NODENAME=n3\0SLURM_CONF_X=1\0";

    #[test]
    fn an_environ_keeps_only_slurm_names() {
        for path in [
            "/proc/1234/environ",
            "/proc/self/environ",
            "/proc/thread-self/environ",
            "/proc/1/task/7/environ",
            "//proc/./1234//environ",
        ] {
            let a = Answer::Data(ENV.to_vec());
            let kept = data(&scrub(Op::Read, path, &a));
            assert_eq!(
                kept, b"SLURM_CONF=/etc/slurm.conf\0SLURMD_NODENAME=n3\0",
                "{path}"
            );
        }
        // Other files, other ops, errors: untouched.
        let a = Answer::Data(ENV.to_vec());
        assert!(matches!(
            scrub(Op::Read, "/proc/1234/status", &a),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            scrub(Op::Probe, "/proc/1/environ", &a),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            scrub(Op::Read, "/procx/1/environ", &a),
            Cow::Borrowed(_)
        ));
    }

    /// The gate is where bundles are serialized: a record of an environment (even
    /// one that is not UTF-8, stored as base64) leaves without its secrets.
    #[test]
    fn a_bundle_with_environ_and_cmdline_records_serializes_without_secrets() {
        use crate::bundle::Bundle;
        let mut b = Bundle::new(
            Bundle::header_now("test", Default::default()),
            Default::default(),
        );
        let mut env = ENV.to_vec();
        env.extend_from_slice(b"BINARY_SECRET=\xff\xfeVERYSECRET\0");
        b.set(Op::Read, "/proc/77/environ", Answer::Data(env));
        b.set(
            Op::Read,
            "/proc/77/cmdline",
            Answer::Data(b"agent\0--token\0s3cretvalue\0".to_vec()),
        );
        let json = b.to_json();
        let back = Bundle::from_bytes("t", &json).unwrap();
        let mut all = json.clone();
        for key in back.keys() {
            if let Some(Answer::Data(d)) = back.get(key.0, &key.1) {
                all.extend_from_slice(d);
            }
        }
        for secret in [
            &b"wJalrXUtnFEMI"[..],
            b"0123abcd",
            b"VERYSECRET",
            b"s3cretvalue",
        ] {
            assert!(
                !all.windows(secret.len()).any(|w| w == secret),
                "{} leaked",
                String::from_utf8_lossy(secret)
            );
        }
        assert_eq!(
            back.get(Op::Read, "/proc/77/environ"),
            Some(&Answer::Data(
                b"SLURM_CONF=/etc/slurm.conf\0SLURMD_NODENAME=n3\0".to_vec()
            ))
        );
    }

    #[test]
    fn only_slurm_conf_and_a_slurm_daemons_conf_argument_are_kept() {
        let v = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let env = v(&[
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI",
            "RDMAKIT_PAIRWISE_TOKEN=0123abcd",
            "SLURM_CONF=/etc/slurm/slurm.conf",
            "SLURM_CONFX=no",
            "NOEQUALS",
        ]);
        assert_eq!(
            kept_environ(env.clone(), &["SLURM_CONF"]),
            ["SLURM_CONF=/etc/slurm/slurm.conf"]
        );
        // A name outside ENV_ALLOW is never kept, even when asked for.
        assert!(kept_environ(env, &["AWS_SECRET_ACCESS_KEY"]).is_empty());
        let job = v(&["/usr/bin/python3", "train.py", "--api-key", "sk-123"]);
        assert_eq!(kept_argv(job), ["/usr/bin/python3"]);
        assert_eq!(
            kept_argv(v(&["slurmstepd: [12.0]", "x"])),
            ["slurmstepd: [12.0]"]
        );
        assert_eq!(
            kept_argv(v(&rdmakit_testkit::SLURMD_ARGV)),
            ["/usr/sbin/slurmd", "-f", "/tmp/rdkc.1/slurm.conf"]
        );
        assert_eq!(
            kept_argv(v(&["slurmd", "-f/etc/x.conf"])),
            ["slurmd", "-f", "/etc/x.conf"]
        );
        // Not slurm: -f is an argument like any other.
        assert_eq!(
            kept_argv(v(&["/usr/bin/vim", "-f", "/etc/passwd"])),
            ["/usr/bin/vim"]
        );
        assert!(kept_argv(Vec::new()).is_empty());
    }

    #[test]
    fn a_process_cmdline_keeps_only_the_program() {
        let a = Answer::Data(b"/usr/bin/rdmakit\0fleet\0agent\0--token\0s3cret\0".to_vec());
        assert_eq!(
            data(&scrub(Op::Read, "/proc/42/cmdline", &a)),
            b"/usr/bin/rdmakit\0"
        );
        let empty = Answer::Data(Vec::new());
        assert!(matches!(
            scrub(Op::Read, "/proc/42/cmdline", &empty),
            Cow::Borrowed(_)
        ));
        // slurmd keeps the slurm.conf it runs with, nothing else.
        let slurmd = Answer::Data(b"/usr/sbin/slurmd\0-D\0--token\0s3cret\0-f\0/c\0".to_vec());
        assert_eq!(
            data(&scrub(Op::Read, "/proc/42/cmdline", &slurmd)),
            b"/usr/sbin/slurmd\0-f\0/c\0"
        );
    }

    #[test]
    fn the_kernel_cmdline_hides_secret_values_only() {
        let line =
            b"BOOT_IMAGE=/vmlinuz root=/dev/sda1 rd.iscsi.password=hunter2  intel_iommu=on\n";
        let a = Answer::Data(line.to_vec());
        assert_eq!(
            String::from_utf8(data(&scrub(Op::Read, "/proc/cmdline", &a))).unwrap(),
            "BOOT_IMAGE=/vmlinuz root=/dev/sda1 rd.iscsi.password=(hidden by rdmakit)  \
             intel_iommu=on\n"
        );
        // The captures' own command lines carry no secret: unchanged.
        let real = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/healthy/root/proc/cmdline"
        );
        let a = Answer::Data(std::fs::read(real).unwrap());
        assert!(matches!(
            scrub(Op::Read, "/proc/cmdline", &a),
            Cow::Borrowed(_)
        ));
    }
}
