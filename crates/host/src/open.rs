//! Where host facts come from: a bundle or capture directory (`--from`),
//! another root (`--root DIR`), or the live host — opened as one [`Source`]
//! with what to call it in reports and the options to collect with.

use std::path::Path;

use crate::bounded::{self, Cap};
use crate::bundle::{Bundle, BundleError};
use crate::capture::{import_capture, ImportError};
use crate::collect::CollectOptions;
use crate::source::{Answer, LimitsFn, LiveSource, Op, Source};

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

    /// What to call it: "live host", "tree at DIR", "bundle FILE (tool)", ...
    pub fn label(&self) -> &str {
        match self {
            Opened::Live(_, l) | Opened::Bundle(_, l) => l,
        }
    }
}

/// Why a source could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A capture directory that does not import.
    #[error("importing capture directory {path}")]
    Capture {
        /// The directory.
        path: String,
        /// Why.
        #[source]
        source: ImportError,
    },
    /// A bundle that does not read.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// `--root` that is not a directory.
    #[error("--root {0}: not a directory")]
    NotDir(String),
    /// `--root` a copy of a host tree whose symlinks are regular files.
    #[error(
        "--root {root}: {file} is a regular file holding a link target ({target}): this \
         copy stores symlinks as files, so devices and ports cannot be found in it; {advice}"
    )]
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
}

impl SourceSpec {
    /// The collect options these flags ask for (a bundle brings its own).
    pub fn options(&self) -> CollectOptions {
        CollectOptions {
            pid: self.pid,
            kernel_log: self.kernel_log(),
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
    /// with `pid` and `kernel_log` overriding them when given. The live
    /// host answers device limits through `limits` (called once, only for
    /// the live host).
    ///
    /// # Errors
    /// The bundle or capture directory does not read; `--root` is not a
    /// directory.
    pub fn open(
        &self,
        limits: impl FnOnce() -> LimitsFn,
    ) -> Result<(Opened, CollectOptions), OpenError> {
        if let Some(path) = &self.from {
            let p = Path::new(path);
            let bundle = if p.is_dir() {
                import_capture(p).map_err(|source| OpenError::Capture {
                    path: path.clone(),
                    source,
                })?
            } else {
                Bundle::read(path)?
            };
            let mut bundle = bundle;
            let mut opts = bundle.header.options.clone();
            if self.pid.is_some() {
                opts.pid = self.pid;
            }
            if let Some(f) = self.kernel_log() {
                // A kernel log named with a bundle is read from this host's
                // files (as a live source reads it), not looked up in the bundle.
                let answer = match bounded::read_named(Path::new(&f), Cap::KERNEL_LOG) {
                    Ok(b) => Answer::Data(b),
                    Err(e) => Answer::Err(e.errno()),
                };
                bundle.set(Op::Read, &f, answer);
                opts.kernel_log = Some(f);
            }
            let label = if p.is_dir() {
                format!("capture directory {path}")
            } else {
                format!("bundle {path} ({})", flat(&bundle.header.tool))
            };
            return Ok((Opened::Bundle(Box::new(bundle), label), opts));
        }
        if let Some(root) = &self.root {
            if !Path::new(root).is_dir() {
                return Err(OpenError::NotDir(root.clone()));
            }
            if let Some((file, target)) = crate::capture::flattened_link_in_tree(Path::new(root)) {
                return Err(flattened(root, &file, target));
            }
            return Ok((
                Opened::Live(self.live(root), format!("tree at {root}")),
                self.options(),
            ));
        }
        Ok((
            Opened::Live(
                self.live("/").with_device_limits(limits()),
                "live host".into(),
            ),
            self.options(),
        ))
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
        let Err(e) = spec.open(no_limits) else {
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

    fn no_limits() -> LimitsFn {
        std::sync::Arc::new(|_: &str| None)
    }

    #[test]
    fn roots_bundles_and_the_live_host_are_named_and_bad_inputs_refused() {
        let dir = std::env::temp_dir();
        let root = dir.to_string_lossy().into_owned();
        let spec = SourceSpec {
            root: Some(root.clone()),
            pid: Some(7),
            ..SourceSpec::default()
        };
        let Ok((o, opts)) = spec.open(no_limits) else {
            panic!("the temporary directory did not open as a root")
        };
        assert_eq!(o.label(), format!("tree at {root}"));
        assert_eq!(opts.pid, Some(7));
        let spec = SourceSpec {
            root: Some(format!("{root}/rdmakit-no-such-dir")),
            ..SourceSpec::default()
        };
        let Err(e) = spec.open(no_limits) else {
            panic!("a missing --root opened")
        };
        assert_eq!(
            e.to_string(),
            format!("--root {root}/rdmakit-no-such-dir: not a directory")
        );
        let spec = SourceSpec {
            from: Some(format!("{root}/rdmakit-no-such-bundle.json")),
            ..SourceSpec::default()
        };
        assert!(matches!(spec.open(no_limits), Err(OpenError::Bundle(_))));
        let Ok((o, _)) = SourceSpec::default().open(no_limits) else {
            panic!("the live host did not open")
        };
        assert_eq!(o.label(), "live host");
        assert_eq!(o.recorded_unix(), None);
    }
}
