//! Writing a page to the file `--html FILE` names: through a temporary file
//! beside it, renamed over it, so a reader never sees half a page.

use std::path::{Path, PathBuf};

/// Why a page could not be written; each names the flag or the file.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The path ends in no file name (`/`, `..`).
    #[error("--html: not a file name")]
    NotAFileName,
    /// The temporary file or the rename failed.
    #[error("writing {}", path.display())]
    Io {
        /// The file being written (the temporary one, or the page's when
        /// the rename failed).
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

/// Writes `html` to `path` through a temporary file (`.NAME.tmp` in the same
/// directory) renamed over it.
///
/// # Errors
/// [`WriteError`]: `path` has no file name, or the temporary file cannot be
/// written or renamed.
pub fn write(path: &str, html: &str) -> Result<(), WriteError> {
    let p = Path::new(path);
    let dir = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = p.file_name().ok_or(WriteError::NotAFileName)?;
    let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
    std::fs::write(&tmp, html).map_err(|source| WriteError::Io {
        path: tmp.clone(),
        source,
    })?;
    std::fs::rename(&tmp, p).map_err(|source| WriteError::Io {
        path: p.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.html");
        std::fs::write(&path, "old").unwrap();
        write(path.to_str().unwrap(), "<html>").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "<html>");
        assert!(!dir.path().join(".r.html.tmp").exists());
    }

    #[test]
    fn a_path_without_a_file_name_is_refused_by_the_flag() {
        let e = write("/", "<html>").unwrap_err();
        assert_eq!(e.to_string(), "--html: not a file name");
        let e = write("/nonexistent-dir/r.html", "x").unwrap_err();
        assert_eq!(e.to_string(), "writing /nonexistent-dir/.r.html.tmp");
    }
}
