//! node_exporter's textfile collector reads `*.prom` files from a
//! directory: they must appear whole, so each is written beside its final
//! name under a dot name the collector ignores, then renamed over it.

use std::io::Write as _;
use std::path::Path;

/// Writes `data` to `path` through a temporary file in the same directory and a
/// rename, so a reader sees the old file or the new one, never half of one.
pub fn write_atomically(path: &Path, data: &[u8]) -> Result<(), String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", path.display()))?;
    // A dot name without .prom: node_exporter's textfile collector ignores it.
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let res = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res.map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_files_and_leaves_no_temporary_behind() {
        let d = std::env::temp_dir().join(format!("rdmakit-textfile-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("rdmakit.prom");
        write_atomically(&p, b"a 1\n").unwrap();
        write_atomically(&p, b"a 2\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"a 2\n");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        let e = write_atomically(&d.join("no/such/dir.prom"), b"").unwrap_err();
        assert!(e.starts_with("writing "), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
