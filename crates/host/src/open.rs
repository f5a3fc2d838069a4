//! Where host facts come from: a bundle or capture directory (`--from`),
//! another root (`--root DIR`), or the live host — opened as one [`Source`]
//! with what to call it in reports and the options to collect with.

use std::path::Path;

use crate::bounded::{self, Cap};
use crate::bundle::{Bundle, BundleError};
use crate::capture::{import_capture, ImportError};
use crate::collect::CollectOptions;
use crate::source::{Answer, Errno, LiveSource, Op, Recorder, Source};

/// Which source to open, as the command line names it.
#[derive(Clone, Debug, Default)]
pub struct SourceSpec {
    /// A captured host tree rooted here instead of /.
    pub root: Option<String>,
    /// A bundle recorded by `rdmakit collect`, or a capture directory.
    pub from: Option<String>,
    /// Also check the host as this process sees it.
    pub pid: Option<u32>,
    /// Read the kernel log from this file.
    pub kernel_log: Option<String>,
    /// The flag that named `from`, for messages ("--baseline"; empty: "--from").
    pub from_flag: &'static str,
}

/// An opened source and what to call it in reports.
pub enum Opened {
    /// The live host, or a tree at another root.
    Live(LiveSource, String),
    /// A bundle (a capture directory is imported as one).
    Bundle(Box<Bundle>, String),
}

impl Opened {
    /// The source to collect from.
    pub fn source(&self) -> &dyn Source {
        match self {
            Opened::Live(s, _) => s,
            Opened::Bundle(b, _) => b.as_ref(),
        }
    }

    /// When the bundle was recorded (None: a live source, or a bundle
    /// without a recorded time).
    pub fn recorded_unix(&self) -> Option<u64> {
        match self {
            Opened::Bundle(b, _) => Some(b.header.created_unix).filter(|t| *t > 0),
            Opened::Live(..) => None,
        }
    }

    /// A bundle of what a collection with `opts` reads from this source, made
    /// by `tool`. A bundle or a capture directory being converted
    /// (`keep_all`) gives every answer it holds, under its header with `opts`
    /// (the options this run adds: a replay reads what they name); any other
    /// source is recorded afresh, the live host's label in the header's tool.
    pub fn record(&self, opts: &CollectOptions, tool: &str, keep_all: bool) -> Bundle {
        if let (Opened::Bundle(b, _), true) = (self, keep_all) {
            let mut c = b.copy();
            c.header.options = opts.clone();
            return c;
        }
        let rec = Recorder::new(self.source());
        let _ = crate::collect::collect(&rec, opts);
        let mut header = Bundle::header_now(tool, opts.clone());
        if let Opened::Live(_, label) = self {
            header.tool = format!("{tool} ({label})");
        }
        Bundle::new(header, rec.into_records())
    }

    /// What to call it: "live host", "tree at DIR", "bundle FILE (tool)", ...
    pub fn label(&self) -> &str {
        match self {
            Opened::Live(_, l) | Opened::Bundle(_, l) => l,
        }
    }
}

/// Why a source could not be opened. Each message starts with the flag and the
/// path the user gave, says what was wrong (an errno by its name) and what to
/// do; none carries a separate source, so a printed chain says it once.
#[derive(Debug)]
pub enum OpenError {
    /// A capture directory that does not import.
    Capture {
        /// The flag that named it ("--from", "--baseline").
        flag: &'static str,
        /// The directory.
        path: String,
        /// Why.
        source: ImportError,
    },
    /// A bundle that does not read.
    Bundle {
        /// The flag that named it ("--from", "--baseline").
        flag: &'static str,
        /// Why.
        error: BundleError,
    },
    /// `--root` that is not a directory.
    NotDir {
        /// The path given.
        path: String,
        /// What `stat` said: ENOENT, ENOTDIR, EACCES.
        errno: Errno,
    },
    /// `--root` a copy of a host tree whose symlinks are regular files.
    FlattenedLinks {
        /// The tree.
        root: String,
        /// The first such file.
        file: String,
        /// What it holds.
        target: String,
        /// What to run instead.
        advice: String,
    },
    /// `--kernel-log` that cannot be read.
    KernelLog {
        /// The path given.
        path: String,
        /// Why: an errno by its name, or what the bounded reader refused.
        why: String,
    },
    /// `--pid` names a process the source does not have.
    NoProcess {
        /// The process.
        pid: u32,
        /// What the source is called ("live host", "bundle b.json.gz (...)").
        label: String,
        /// The source was recorded (a bundle): the process was not recorded,
        /// rather than not running; `Some(recorded)` is the `--pid` it was
        /// collected with.
        recorded: Option<Option<u32>>,
    },
}

impl std::error::Error for OpenError {}

/// What to do about a bundle that does not read, by the errno it failed with.
fn bundle_hint(errno: Errno) -> &'static str {
    match errno.0 {
        2 | 20 => ": name a bundle written by `rdmakit collect -o FILE`, or a capture directory",
        1 | 13 => ": read it as a user who may (or copy it somewhere readable)",
        _ => "",
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plain = rdmakit_vocab::errno::plain;
        match self {
            OpenError::Capture { flag, path, source } => write!(
                f,
                "{flag} {path}: a directory, but not a capture directory rdmakit can import: {}",
                plain(&source.to_string())
            ),
            OpenError::Bundle {
                flag,
                error: BundleError::Read(r),
            } => write!(
                f,
                "{flag} {}: {}{}",
                r.path(),
                plain(&r.reason()),
                bundle_hint(r.errno())
            ),
            OpenError::Bundle {
                flag,
                error: BundleError::Malformed { path, reason },
            } => write!(
                f,
                "{flag} {path}: not an rdmakit bundle ({reason}): `rdmakit collect -o FILE` \
                 writes one; a capture directory is read too"
            ),
            OpenError::Bundle {
                flag,
                error: BundleError::Version { path, found },
            } => write!(
                f,
                "{flag} {path}: bundle version {found} is not supported (this rdmakit reads \
                 version {}): replay it with the rdmakit that recorded it (its header names it)",
                crate::bundle::VERSION
            ),
            OpenError::Bundle { flag, error } => write!(f, "{flag} {}", plain(&error.to_string())),
            OpenError::NotDir { path, errno } => write!(
                f,
                "--root {path}: {}: name the directory a host's /sys and \
                 /proc were copied to, or replay a bundle with --from",
                rdmakit_vocab::errno::os_text(errno.0)
            ),
            OpenError::FlattenedLinks {
                root,
                file,
                target,
                advice,
            } => write!(
                f,
                "--root {root}: {file} is a regular file holding a link target ({target}): this \
                 copy stores symlinks as files, so devices and ports cannot be found in it; \
                 {advice}"
            ),
            OpenError::KernelLog { path, why } => write!(
                f,
                "--kernel-log {path}: {why}: name a file or a pipe of kernel messages \
                 (journalctl -k > k.log; --kernel-log <(dmesg))"
            ),
            OpenError::NoProcess {
                pid,
                label,
                recorded: None,
            } => write!(
                f,
                "--pid {pid}: no process {pid} on the {label} (ESRCH): name a running \
                 process (pgrep -f APP)"
            ),
            OpenError::NoProcess {
                pid,
                label,
                recorded: Some(with),
            } => {
                let how = match with {
                    Some(p) => format!("it was collected with --pid {p}"),
                    None => "it was collected without --pid".to_string(),
                };
                write!(
                    f,
                    "--pid {pid}: {label} did not record process {pid} ({how}): collect \
                     again with `rdmakit collect --pid {pid}`, or leave --pid out"
                )
            }
        }
    }
}

impl SourceSpec {
    /// The source `--root`, `--from`, `--pid` and `--kernel-log` name.
    pub fn of_flags(
        root: Option<String>,
        from: Option<String>,
        pid: Option<u32>,
        kernel_log: Option<String>,
    ) -> SourceSpec {
        SourceSpec {
            root,
            from,
            pid,
            kernel_log,
            from_flag: "--from",
        }
    }

    /// The collect options these flags ask for (a bundle brings its own).
    pub fn options(&self) -> CollectOptions {
        CollectOptions {
            pid: self.pid,
            kernel_log: self.kernel_log(),
            ..CollectOptions::default()
        }
    }

    /// `--kernel-log` as an absolute path: the file is read where the user's
    /// shell sees it (a relative name was read under / before), and recorded in
    /// a bundle under that name.
    fn kernel_log(&self) -> Option<String> {
        let f = self.kernel_log.as_deref()?;
        Some(match std::path::absolute(f) {
            Ok(p) => p.to_string_lossy().into_owned(),
            Err(_) => f.to_string(),
        })
    }

    /// A live source (the host, or a tree at `root`) that reads `--kernel-log`
    /// as a file the user named ([`Cap::KERNEL_LOG`]; a pipe is fine).
    fn live(&self, root: &str) -> LiveSource {
        let s = LiveSource::new(root);
        match self.kernel_log() {
            Some(f) => s.with_named_file(&f, Cap::KERNEL_LOG),
            None => s,
        }
    }

    /// Opens the source, and the options to collect with: a bundle's own,
    /// with `pid` and `kernel_log` overriding them when given. `host` adds
    /// to the live host what this crate cannot read itself (device limits
    /// through libibverbs, the soft NIC's counters: [`LiveSource`]'s
    /// `with_*`); it is called once, only for the live host.
    ///
    /// # Errors
    /// The bundle or capture directory does not read; `--root` is not a
    /// directory.
    pub fn open(
        &self,
        host: impl FnOnce(LiveSource) -> LiveSource,
    ) -> Result<(Opened, CollectOptions), OpenError> {
        if let Some(path) = &self.from {
            let p = Path::new(path);
            let flag = if self.from_flag.is_empty() {
                "--from"
            } else {
                self.from_flag
            };
            let bundle = if p.is_dir() {
                import_capture(p).map_err(|source| OpenError::Capture {
                    flag,
                    path: path.clone(),
                    source,
                })?
            } else {
                Bundle::read(path).map_err(|error| OpenError::Bundle { flag, error })?
            };
            let mut bundle = bundle;
            let mut opts = bundle.header.options.clone();
            if self.pid.is_some() {
                opts.pid = self.pid;
            }
            if let Some(f) = self.kernel_log() {
                // A kernel log named with a bundle is read from this host's
                // files (as a live source reads it), not looked up in the bundle;
                // one that does not read is the user's to fix, not a gap.
                let bytes = bounded::read_named(Path::new(&f), Cap::KERNEL_LOG).map_err(|e| {
                    OpenError::KernelLog {
                        path: self.kernel_log.clone().unwrap_or_default(),
                        why: rdmakit_vocab::errno::plain(&e.reason()),
                    }
                })?;
                bundle.set(Op::Read, &f, Answer::Data(bytes));
                opts.kernel_log = Some(f);
            }
            let label = if p.is_dir() {
                format!("capture directory {path}")
            } else {
                format!("bundle {path} ({})", flat(&bundle.header.tool))
            };
            if let Some(pid) = self.pid {
                let status = format!("/proc/{pid}/status");
                if bundle.get(Op::Read, &bundle.canonical(&status)).is_none() {
                    return Err(OpenError::NoProcess {
                        pid,
                        label,
                        recorded: Some(bundle.header.options.pid),
                    });
                }
            }
            return Ok((Opened::Bundle(Box::new(bundle), label), opts));
        }
        self.check_kernel_log()?;
        let opened = match &self.root {
            Some(root) => {
                match std::fs::metadata(root) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => {
                        return Err(OpenError::NotDir {
                            path: root.clone(),
                            errno: Errno::ENOTDIR,
                        })
                    }
                    Err(e) => {
                        return Err(OpenError::NotDir {
                            path: root.clone(),
                            errno: Errno::from_io(&e),
                        })
                    }
                }
                if let Some((file, target)) =
                    crate::capture::flattened_link_in_tree(Path::new(root))
                {
                    return Err(flattened(root, &file, target));
                }
                Opened::Live(self.live(root), format!("tree at {root}"))
            }
            None => Opened::Live(host(self.live("/")), "live host".into()),
        };
        if let Some(pid) = self.pid {
            if let Err(e) = opened.source().read(&format!("/proc/{pid}/status")) {
                if e == Errno::ENOENT || e.0 == 3 {
                    return Err(OpenError::NoProcess {
                        pid,
                        label: opened.label().to_string(),
                        recorded: None,
                    });
                }
            }
        }
        Ok((opened, self.options()))
    }

    /// `--kernel-log` on a live source: a path that does not exist, is not
    /// readable or is a directory fails now, naming why (it is read later,
    /// once: a pipe cannot be read twice, so this checks without opening it).
    fn check_kernel_log(&self) -> Result<(), OpenError> {
        let Some(given) = &self.kernel_log else {
            return Ok(());
        };
        let fail = |errno: Errno| OpenError::KernelLog {
            path: given.clone(),
            why: rdmakit_vocab::errno::os_text(errno.0),
        };
        let m = std::fs::metadata(given).map_err(|e| fail(Errno::from_io(&e)))?;
        if m.is_dir() {
            return Err(fail(Errno(21)));
        }
        rustix::fs::access(given.as_str(), rustix::fs::Access::READ_OK)
            .map_err(|e| fail(Errno(e.raw_os_error())))
    }
}

/// A bundle's tool without nested parentheses: "rdmakit 0.1.0 (live host)" →
/// "rdmakit 0.1.0, live host", so a label reads "bundle b.json.gz (rdmakit
/// 0.1.0, live host)".
fn flat(tool: &str) -> String {
    let mut t = tool.trim().to_string();
    while let Some((a, b)) = t.strip_suffix(')').and_then(|x| x.split_once(" (")) {
        t = format!("{a}, {b}");
    }
    t
}

/// The error for a `--root` tree with symlinks stored as files, with the
/// capture directory to replay instead when the tree is one's `root/`.
fn flattened(root: &str, file: &Path, target: String) -> OpenError {
    let r = Path::new(root);
    let file = file
        .strip_prefix(r)
        .map_or_else(|_| file.display().to_string(), |f| f.display().to_string());
    let advice = match r
        .parent()
        .filter(|_| r.file_name().is_some_and(|n| n == "root"))
    {
        Some(p) if !p.as_os_str().is_empty() => format!(
            "replay it as the capture directory it belongs to: --from {}",
            p.display()
        ),
        _ => "copy it again keeping symlinks (cp -a), or move it to DIR/root and replay it \
              with --from DIR"
            .to_string(),
    };
    OpenError::FlattenedLinks {
        root: root.to_string(),
        file,
        target,
        advice,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_labels_do_not_nest_parentheses() {
        assert_eq!(
            flat("rdmakit 0.1.0 (live host)"),
            "rdmakit 0.1.0, live host"
        );
        assert_eq!(
            flat("rdmakit 0.1.0 (bundle b (rdmakit 0.1.0 (live host)))"),
            "rdmakit 0.1.0, bundle b, rdmakit 0.1.0, live host"
        );
        assert_eq!(flat("rdmacap import"), "rdmacap import");
    }

    #[test]
    fn a_root_with_symlinks_stored_as_files_names_the_capture_to_replay() {
        let d = std::env::temp_dir().join(format!("rdmakit-flat-{}", std::process::id()));
        let class = d.join("cap/root/sys/class/infiniband");
        std::fs::create_dir_all(&class).unwrap();
        std::fs::write(class.join("rxe0"), "../../devices/virtual/infiniband/rxe0").unwrap();
        let root = d.join("cap/root").display().to_string();
        let spec = SourceSpec {
            root: Some(root.clone()),
            ..SourceSpec::default()
        };
        let Err(e) = spec.open(as_is) else {
            panic!("a tree of flattened links opened")
        };
        assert_eq!(
            e.to_string(),
            format!(
                "--root {root}: sys/class/infiniband/rxe0 is a regular file holding a link \
                 target (../../devices/virtual/infiniband/rxe0): this copy stores symlinks as \
                 files, so devices and ports cannot be found in it; replay it as the capture \
                 directory it belongs to: --from {}",
                d.join("cap").display()
            )
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn as_is(s: LiveSource) -> LiveSource {
        s
    }

    #[test]
    fn roots_bundles_and_the_live_host_are_named_and_bad_inputs_refused() {
        let dir = std::env::temp_dir();
        let root = dir.to_string_lossy().into_owned();
        let tree = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tree.path().join("proc/7")).unwrap();
        std::fs::write(tree.path().join("proc/7/status"), "Name:\tapp\n").unwrap();
        let t = tree.path().to_string_lossy().into_owned();
        let spec = SourceSpec {
            root: Some(t.clone()),
            pid: Some(7),
            ..SourceSpec::default()
        };
        let Ok((o, opts)) = spec.open(as_is) else {
            panic!("the temporary directory did not open as a root")
        };
        assert_eq!(o.label(), format!("tree at {t}"));
        assert_eq!(opts.pid, Some(7));
        let spec = SourceSpec {
            root: Some(t.clone()),
            pid: Some(8),
            ..SourceSpec::default()
        };
        let Err(e) = spec.open(as_is) else {
            panic!("a --pid the tree does not have opened")
        };
        assert_eq!(
            e.to_string(),
            format!(
                "--pid 8: no process 8 on the tree at {t} (ESRCH): name a running process \
                 (pgrep -f APP)"
            )
        );
        let spec = SourceSpec {
            root: Some(format!("{root}/rdmakit-no-such-dir")),
            ..SourceSpec::default()
        };
        let Err(e) = spec.open(as_is) else {
            panic!("a missing --root opened")
        };
        assert_eq!(
            e.to_string(),
            format!(
                "--root {root}/rdmakit-no-such-dir: ENOENT (No such file or directory): name \
                 the directory a host's /sys and /proc were copied to, or replay a bundle \
                 with --from"
            )
        );
        let spec = SourceSpec {
            from: Some(format!("{root}/rdmakit-no-such-bundle.json")),
            ..SourceSpec::default()
        };
        let Err(e) = spec.open(as_is) else {
            panic!("a missing bundle opened")
        };
        assert_eq!(
            e.to_string(),
            format!(
                "--from {root}/rdmakit-no-such-bundle.json: ENOENT (No such file or \
                 directory): name a bundle written by `rdmakit collect -o FILE`, or a capture \
                 directory"
            )
        );
        let spec = SourceSpec {
            kernel_log: Some(format!("{root}/rdmakit-no-such-log")),
            ..SourceSpec::default()
        };
        let Err(e) = spec.open(as_is) else {
            panic!("a missing --kernel-log opened")
        };
        assert!(
            e.to_string().starts_with(&format!(
                "--kernel-log {root}/rdmakit-no-such-log: ENOENT (No such file or directory): "
            )),
            "{e}"
        );
        let Ok((o, _)) = SourceSpec::default().open(as_is) else {
            panic!("the live host did not open")
        };
        assert_eq!(o.label(), "live host");
        assert_eq!(o.recorded_unix(), None);
    }
}
