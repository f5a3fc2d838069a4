//! The run's shared secret and the HMAC-SHA256 challenge–response built on
//! it. The token itself never crosses the wire: each side proves it holds
//! it by a MAC over both sides' fresh nonces, and every later message
//! carries a MAC under a session key derived from the token and the nonces.

use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use rdmakit_host::bounded::{self, Cap, ReadError};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Fewest bytes a token may have.
pub const MIN_TOKEN_LEN: usize = 16;

/// Bytes of a nonce.
pub const NONCE_LEN: usize = 32;

/// Why a token could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Neither a token file nor the environment variable gave one.
    #[error("no token: give --token-file FILE (mode 0600) or set RDMAKIT_FLEET_TOKEN; an agent serves only a coordinator that proves the run's shared secret")]
    Missing,
    /// Shorter than [`MIN_TOKEN_LEN`].
    #[error("the token has {0} bytes; at least {MIN_TOKEN_LEN} are needed (`rdmakit fleet pairwise --slurm` makes one itself; by hand: openssl rand -hex 32)")]
    TooShort(usize),
    /// The token file could not be read: missing, over 4 KiB, a pipe that did
    /// not end in time ([`rdmakit_host::bounded`]; the path is in the message).
    #[error("token file {0}")]
    Read(ReadError),
    /// Readable or writable by others, owned by someone else, or neither a
    /// regular file nor a pipe.
    #[error("token file {path}: {why}; it must be a regular file (or a pipe) readable by its owner alone (chmod 600 {path})")]
    Unsafe {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The random source failed.
    #[error("getrandom: {0}")]
    Random(String),
}

/// The run's shared secret. Its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token({} bytes)", self.0.len())
    }
}

impl Token {
    /// A token of these bytes (surrounding whitespace trimmed).
    ///
    /// # Errors
    /// [`TokenError::TooShort`].
    pub fn new(bytes: &[u8]) -> Result<Token, TokenError> {
        let t = bytes.trim_ascii();
        if t.len() < MIN_TOKEN_LEN {
            return Err(TokenError::TooShort(t.len()));
        }
        Ok(Token(t.to_vec()))
    }

    /// Reads a token file, refusing one that others could read or write,
    /// or that its reader does not own. A pipe is read too, so a secret never
    /// has to touch a disk (`--token-file <(vault read ...)`): within
    /// [`rdmakit_host::bounded::PIPE_DEADLINE`]; a device or a directory is
    /// refused before it is opened; at most 4 KiB.
    ///
    /// # Errors
    /// [`TokenError::Read`], [`TokenError::Unsafe`], [`TokenError::TooShort`].
    pub fn from_file(path: &Path) -> Result<Token, TokenError> {
        let unsafe_ = |why: String| TokenError::Unsafe {
            path: path.to_path_buf(),
            why,
        };
        let f = match bounded::open_named(path, Cap::TOKEN) {
            Ok(f) => f,
            Err(ReadError::Refused { kind, .. }) => {
                return Err(unsafe_(format!("{kind}, not a regular file or a pipe")))
            }
            Err(e) => return Err(TokenError::Read(e)),
        };
        // Checked on the open file, so the file read is the file checked.
        let st = f.stat();
        let me = rustix::process::geteuid().as_raw();
        if st.st_uid != me {
            return Err(unsafe_(format!(
                "owned by uid {}, not by this user (uid {me})",
                st.st_uid
            )));
        }
        let mode = st.st_mode & 0o777;
        if mode & 0o077 != 0 {
            return Err(unsafe_(format!("mode {mode:04o} lets others in")));
        }
        Token::new(&f.read_all().map_err(TokenError::Read)?)
    }

    /// The run's token: `file` (`--token-file`, [`Token::from_file`]), else
    /// `env`, the value of [`crate::pairwise::slurm::TOKEN_ENV`] that the
    /// caller read at its edge.
    ///
    /// # Errors
    /// [`TokenError::Missing`] when neither gives one; as [`Token::from_file`]
    /// and [`Token::new`].
    pub fn from_file_or_env(
        file: Option<&Path>,
        env: Option<&std::ffi::OsStr>,
    ) -> Result<Token, TokenError> {
        match (file, env) {
            (Some(f), _) => Token::from_file(f),
            (None, Some(v)) if !v.is_empty() => Token::new(v.as_encoded_bytes()),
            _ => Err(TokenError::Missing),
        }
    }

    /// A fresh random token: 32 random bytes as 64 hex digits (text, so it
    /// can travel in an environment variable).
    ///
    /// # Errors
    /// [`TokenError::Random`].
    pub fn generate() -> Result<Token, TokenError> {
        let mut b = [0u8; 32];
        getrandom::fill(&mut b).map_err(|e| TokenError::Random(e.to_string()))?;
        Ok(Token(hex(&b).into_bytes()))
    }

    /// The token as text for an environment variable (lossy only for a
    /// token that is not UTF-8, which `generate` never makes).
    pub fn to_env_value(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    fn key(&self) -> &[u8] {
        &self.0
    }
}

/// A fresh nonce.
///
/// # Errors
/// The random source's, as text.
pub fn nonce() -> Result<[u8; NONCE_LEN], String> {
    let mut b = [0u8; NONCE_LEN];
    getrandom::fill(&mut b).map_err(|e| format!("getrandom: {e}"))?;
    Ok(b)
}

/// What a MAC is computed for (domain separation: a proof made for one
/// purpose never verifies for another).
#[derive(Clone, Copy, Debug)]
pub enum Purpose {
    /// The coordinator's proof: over (agent nonce, coordinator nonce).
    Coordinator,
    /// The agent's proof: over (coordinator nonce, agent nonce, agent name).
    Agent,
    /// The session key: over (agent nonce, coordinator nonce).
    Session,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::Coordinator => b"rdmakit-fleet/2 coordinator proof",
            Purpose::Agent => b"rdmakit-fleet/2 agent proof",
            Purpose::Session => b"rdmakit-fleet/2 session key",
        }
    }
}

/// HMAC-SHA256 of `parts` (each length-prefixed, so no two different part
/// lists give the same input) under `key`.
pub fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = keyed(key);
    feed(&mut m, parts);
    m.finalize().into_bytes().into()
}

/// Checks `tag` against the HMAC of `parts` in constant time.
pub fn verify(key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    let mut m = keyed(key);
    feed(&mut m, parts);
    m.verify_slice(tag).is_ok()
}

fn keyed(key: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length: new_from_slice cannot fail for it.
    match HmacSha256::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    }
}

fn feed(m: &mut HmacSha256, parts: &[&[u8]]) {
    for p in parts {
        m.update(&(p.len() as u32).to_be_bytes());
        m.update(p);
    }
}

/// A proof of the token for `purpose` over `parts`.
pub fn prove(token: &Token, purpose: Purpose, parts: &[&[u8]]) -> [u8; 32] {
    let mut all: Vec<&[u8]> = vec![purpose.label()];
    all.extend_from_slice(parts);
    mac(token.key(), &all)
}

/// Checks a proof (constant time).
pub fn check(token: &Token, purpose: Purpose, parts: &[&[u8]], tag: &[u8]) -> bool {
    let mut all: Vec<&[u8]> = vec![purpose.label()];
    all.extend_from_slice(parts);
    verify(token.key(), &all, tag)
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    use std::fmt::Write;
    b.iter()
        .fold(String::with_capacity(2 * b.len()), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

/// Parses hex (either case); None on anything else.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 == 1 || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn rfc4231_case_2() {
        // RFC 4231 test case 2 (HMAC-SHA256, key "Jefe"), through `keyed`.
        let mut m = keyed(b"Jefe");
        m.update(b"what do ya want for nothing?");
        assert_eq!(
            hex(&m.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn proofs_bind_purpose_token_and_parts() {
        let t = Token::new(b"0123456789abcdef0123").unwrap();
        let other = Token::new(b"0123456789abcdef0124").unwrap();
        let p = prove(&t, Purpose::Coordinator, &[b"n1", b"n2"]);
        assert!(check(&t, Purpose::Coordinator, &[b"n1", b"n2"], &p));
        assert!(!check(&other, Purpose::Coordinator, &[b"n1", b"n2"], &p));
        assert!(!check(&t, Purpose::Agent, &[b"n1", b"n2"], &p));
        assert!(!check(&t, Purpose::Coordinator, &[b"n1n2"], &p));
        assert!(!check(&t, Purpose::Coordinator, &[b"n1", b"n2"], &p[..31]));
    }

    #[test]
    fn tokens_short_missing_and_debug() {
        assert!(matches!(Token::new(b"short"), Err(TokenError::TooShort(5))));
        let t = Token::new(b"  0123456789abcdef\n").unwrap();
        assert_eq!(format!("{t:?}"), "Token(16 bytes)");
        let g = Token::generate().unwrap();
        assert_eq!(g.to_env_value().len(), 64);
        assert_ne!(g, Token::generate().unwrap());
    }

    #[test]
    fn token_file_must_be_private() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("tok");
        std::fs::write(&p, "0123456789abcdef0123456789abcdef\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Token::from_file(&p).unwrap_err();
        assert!(matches!(e, TokenError::Unsafe { .. }), "{e}");
        assert!(e.to_string().contains("0644"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            Token::from_file(&p).unwrap(),
            Token::new(b"0123456789abcdef0123456789abcdef").unwrap()
        );
        let e = Token::from_file(&d.path().join("nope")).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("nope: No such file or directory (os error 2)"),
            "{e}"
        );
        let e = Token::from_file(d.path()).unwrap_err();
        assert!(matches!(e, TokenError::Unsafe { .. }), "{e}");
    }

    /// `--token-file <(vault read ...)`: a pipe is read (issue 34; it was refused
    /// as not a regular file, and a FIFO hung in open(2)).
    #[test]
    fn a_token_from_a_pipe_is_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        let st = std::process::Command::new("mkfifo")
            .args(["-m", "600"])
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success());
        let q = p.clone();
        let w = std::thread::spawn(move || {
            std::fs::write(q, "0123456789abcdef0123456789abcdef\n").unwrap();
        });
        assert_eq!(
            Token::from_file(&p).unwrap(),
            Token::new(b"0123456789abcdef0123456789abcdef").unwrap()
        );
        w.join().unwrap();
        let e = Token::from_file(Path::new("/dev/zero")).unwrap_err();
        assert!(matches!(e, TokenError::Unsafe { .. }), "{e}");
    }

    #[test]
    fn hex_round_trip() {
        assert_eq!(unhex(&hex(&[0, 0xab, 0xff])), Some(vec![0, 0xab, 0xff]));
        assert_eq!(unhex("0g"), None);
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("é1"), None);
    }
}
