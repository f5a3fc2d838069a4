//! Where `rdmakit metrics` puts the exposition: served over HTTP
//! (`--listen`, [`crate::http`]), written whole as a node_exporter textfile
//! (`-o`, [`crate::textfile`]), or handed back for the caller to print —
//! for the host's facts ([`host`]) or the whole fabric's ([`fabric`]).

use std::io;
use std::net::SocketAddr;
use std::path::Path;

use rdmakit_host::collect::CollectOptions;
use rdmakit_host::open::Opened;

use crate::fabric::FabricExporter;
use crate::http;

/// Where the exposition goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To<'a> {
    /// Serve it at this address (`--listen ADDR`).
    Listen(&'a str),
    /// Write it atomically to this file (`-o FILE`).
    Textfile(&'a str),
    /// Hand it back for stdout.
    Stdout,
}

impl<'a> To<'a> {
    /// `--listen` (which conflicts with `-o`), else `-o`, else stdout.
    pub fn of_flags(listen: Option<&'a str>, output: Option<&'a str>) -> To<'a> {
        match (listen, output) {
            (Some(addr), _) => To::Listen(addr),
            (None, Some(path)) => To::Textfile(path),
            (None, None) => To::Stdout,
        }
    }
}

/// Why the exposition went nowhere.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The address could not be bound ([`http::bind`]) or the textfile not
    /// written ([`crate::textfile::write_atomically`]): the message says why.
    #[error("{0}")]
    Refused(String),
    /// The bound listener has no local address.
    #[error("--listen: local address")]
    LocalAddr(#[source] io::Error),
    /// The exporter stopped serving.
    #[error("serving metrics")]
    Serve(#[source] io::Error),
    /// `--fabric`: the local port could not be opened.
    #[error(transparent)]
    Port(#[from] rdmakit_umad::Error),
}

/// Exports the facts of `opened` (and the doctor's findings about them) to
/// `to`, calling `serving` with the bound address before serving; the
/// exposition when `to` is [`To::Stdout`]. Serving returns only on failure.
///
/// # Errors
/// As [`ExportError`].
pub fn host(
    opened: Opened,
    copts: CollectOptions,
    opts: crate::Options,
    to: To,
    serving: &dyn Fn(SocketAddr),
) -> Result<Option<String>, ExportError> {
    if let To::Listen(addr) = to {
        let listener = listen(addr, serving)?;
        http::serve_source(listener, opened, copts, opts).map_err(ExportError::Serve)?;
        return Ok(None);
    }
    let text = crate::scrape(opened.source(), &copts, opened.label(), &opts);
    written(to, text)
}

/// Exports the whole InfiniBand fabric seen from the local port `ca` /
/// `port` (the first Active one by default) to `to`, as [`host`] does.
///
/// # Errors
/// As [`ExportError`].
pub fn fabric(
    ca: Option<&str>,
    port: Option<u8>,
    to: To,
    serving: &dyn Fn(SocketAddr),
) -> Result<Option<String>, ExportError> {
    let opts = crate::fabric::Options::default();
    let mut exporter = FabricExporter::open(ca, port, opts)?;
    if let To::Listen(addr) = to {
        let listener = listen(addr, serving)?;
        http::serve_fabric(listener, exporter).map_err(ExportError::Serve)?;
        return Ok(None);
    }
    written(to, exporter.scrape())
}

/// Binds `addr` and says where.
fn listen(addr: &str, serving: &dyn Fn(SocketAddr)) -> Result<std::net::TcpListener, ExportError> {
    let listener = http::bind(addr).map_err(ExportError::Refused)?;
    serving(listener.local_addr().map_err(ExportError::LocalAddr)?);
    Ok(listener)
}

/// Writes `text` to the textfile `to` names, or hands it back.
fn written(to: To, text: String) -> Result<Option<String>, ExportError> {
    match to {
        To::Textfile(path) => {
            crate::textfile::write_atomically(Path::new(path), text.as_bytes())
                .map_err(ExportError::Refused)?;
            Ok(None)
        }
        _ => Ok(Some(text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_wins_over_a_textfile_and_stdout_is_the_default() {
        assert_eq!(
            To::of_flags(Some("[::]:9879"), None),
            To::Listen("[::]:9879")
        );
        assert_eq!(To::of_flags(None, Some("a.prom")), To::Textfile("a.prom"));
        assert_eq!(To::of_flags(None, None), To::Stdout);
    }
}
