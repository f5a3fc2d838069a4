//! The coordinator's command-line options, validated into a
//! [`PairwiseConfig`]; the agents' addresses resolved; a saved run read
//! back; a progress step said in words.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

use super::auth::Token;
use super::coordinator::{PairwiseConfig, Step};
use super::report::{Mode, PairwiseReport, Phase, SCHEMA};

/// What the coordinator measures and how it judges, as the command line
/// gives it.
#[derive(Clone, Debug)]
pub struct Options {
    /// A ring instead of every pair.
    pub quick: bool,
    /// A known-good node, the first partner of every suspect's re-test.
    pub reference: Option<String>,
    /// RC WRITE message sizes, bytes.
    pub sizes: Vec<usize>,
    /// Seconds per bandwidth size and direction.
    pub seconds: f64,
    /// Seconds of latency ping-pongs per direction (0: none).
    pub lat_seconds: f64,
    /// Send queue depth of the bandwidth tests.
    pub tx_depth: u32,
    /// Path MTU.
    pub mtu: u32,
    /// Report the screening's suspects without re-measuring them.
    pub no_confirm: bool,
    /// Suspect pairs re-measured at once.
    pub confirm_parallel: usize,
    /// The port rate in Gb/s, when the agents do not know it.
    pub port_rate: Option<f64>,
    /// A node or cell below this fraction of its reference level is low.
    pub relative: f64,
    /// Tell the agents to exit at the end (agents the run started).
    pub shutdown: bool,
}

impl Options {
    /// Checks each option's range.
    ///
    /// # Errors
    /// The first option out of range, named as its flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.sizes.is_empty() || self.sizes.iter().any(|&s| s == 0 || s > (8 << 20)) {
            return Err("--sizes: 1 to 8388608 bytes each".into());
        }
        if !(self.seconds > 0.0 && self.seconds <= 30.0) {
            return Err("--seconds: more than 0, at most 30".into());
        }
        if ![256, 512, 1024, 2048, 4096].contains(&self.mtu) {
            return Err(format!(
                "--mtu {}: one of 256, 512, 1024, 2048, 4096",
                self.mtu
            ));
        }
        if !(self.relative > 0.0 && self.relative < 1.0) {
            return Err("--relative: between 0 and 1".into());
        }
        if !(self.lat_seconds >= 0.0 && self.lat_seconds <= 30.0) {
            return Err("--lat-seconds: 0 to 30".into());
        }
        if self.confirm_parallel == 0 {
            return Err("--confirm-parallel: at least 1".into());
        }
        if self.port_rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            return Err("--port-rate: Gb/s, more than 0".into());
        }
        Ok(())
    }

    /// The run's configuration over `agents` with `token` (re-measuring
    /// takes twice the screening's time per size, at least 0.3 s).
    pub fn config(&self, agents: Vec<SocketAddr>, token: Token) -> PairwiseConfig {
        let mut cfg = PairwiseConfig::new(agents, token);
        cfg.mode = if self.quick { Mode::Quick } else { Mode::Full };
        cfg.reference = self.reference.clone();
        cfg.bw_sizes = self.sizes.clone();
        cfg.bw_seconds = self.seconds;
        cfg.lat_seconds = self.lat_seconds;
        cfg.lat_size = if self.lat_seconds == 0.0 { 0 } else { 8 };
        cfg.mtu = self.mtu;
        cfg.tx_depth = self.tx_depth;
        cfg.confirm = !self.no_confirm;
        cfg.confirm_parallel = self.confirm_parallel;
        cfg.confirm_seconds = (2.0 * self.seconds).max(0.3);
        cfg.thresholds.relative = self.relative;
        cfg.thresholds.port_rate_mbs = self.port_rate.map(|g| g * 1e9 / 8.0 / 1_048_576.0);
        cfg.shutdown = self.shutdown;
        cfg
    }
}

/// `HOST:PORT` each → its first IPv4 address; blank entries are skipped.
///
/// # Errors
/// The first entry that does not resolve, or resolves to no IPv4 address.
pub fn resolve(list: &[String]) -> Result<Vec<SocketAddr>, String> {
    list.iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let s = s.trim();
            s.to_socket_addrs()
                .map_err(|e| format!("{s}: {e}"))?
                .find(SocketAddr::is_ipv4)
                .ok_or_else(|| format!("{s}: no IPv4 address"))
        })
        .collect()
}

/// A run saved with `--json`.
///
/// # Errors
/// The file unreadable, not a pairwise run, or of another schema.
pub fn saved(path: &Path) -> Result<PairwiseReport, String> {
    // A file the user named: regular or a pipe, at most one JSON document's cap.
    let bytes = rdmakit_host::bounded::read_named(path, rdmakit_host::bounded::Cap::DOCUMENT)
        .map_err(|e| e.reason())?;
    let r: PairwiseReport =
        serde_json::from_slice(&bytes).map_err(|e| format!("not a pairwise run: {e}"))?;
    if r.schema != SCHEMA {
        return Err(format!("schema {:?}, not {SCHEMA}", r.schema));
    }
    Ok(r)
}

/// What a progress display shows for a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepText {
    /// The line's message.
    Message(String),
    /// The line's prefix (the pairs counter).
    Prefix(String),
}

impl Step {
    /// The step in words, for a progress line.
    pub fn text(&self) -> StepText {
        match self {
            Step::Connected { nodes, unreachable } => StepText::Message(format!(
                "{} agents connected{}",
                nodes.len(),
                if *unreachable > 0 {
                    format!(", {unreachable} unreachable")
                } else {
                    String::new()
                }
            )),
            Step::Round { phase, index, of } => StepText::Message(format!(
                "{} round {}/{of}",
                match phase {
                    Phase::Screen => "screening",
                    _ => "re-measuring suspects:",
                },
                index + 1
            )),
            Step::PairDone { done, of } => StepText::Prefix(format!("{done}/{of} pairs")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            quick: false,
            reference: None,
            sizes: vec![4096, 65536, 262_144],
            seconds: 0.3,
            lat_seconds: 0.2,
            tx_depth: 16,
            mtu: 4096,
            no_confirm: false,
            confirm_parallel: 1,
            port_rate: None,
            relative: 0.6,
            shutdown: false,
        }
    }

    #[test]
    fn options_out_of_range_name_their_flag() {
        assert_eq!(opts().validate(), Ok(()));
        let mut o = opts();
        o.sizes = vec![0];
        assert_eq!(
            o.validate().unwrap_err(),
            "--sizes: 1 to 8388608 bytes each"
        );
        let mut o = opts();
        o.mtu = 1500;
        assert_eq!(
            o.validate().unwrap_err(),
            "--mtu 1500: one of 256, 512, 1024, 2048, 4096"
        );
        let mut o = opts();
        o.relative = 1.0;
        assert_eq!(o.validate().unwrap_err(), "--relative: between 0 and 1");
        let mut o = opts();
        o.port_rate = Some(f64::INFINITY);
        assert_eq!(o.validate().unwrap_err(), "--port-rate: Gb/s, more than 0");
        let mut o = opts();
        o.confirm_parallel = 0;
        assert_eq!(o.validate().unwrap_err(), "--confirm-parallel: at least 1");
    }

    #[test]
    fn config_follows_the_options() {
        let mut o = opts();
        (o.quick, o.lat_seconds, o.seconds, o.port_rate) = (true, 0.0, 0.1, Some(100.0));
        let c = o.config(vec![], Token::generate().unwrap());
        assert_eq!(c.mode, Mode::Quick);
        assert_eq!((c.lat_size, c.confirm_seconds), (0, 0.3));
        let mbs = c.thresholds.port_rate_mbs.unwrap();
        assert!((mbs - 100e9 / 8.0 / 1_048_576.0).abs() < 1e-6, "{mbs}");
    }

    #[test]
    fn addresses_resolve_and_steps_read() {
        let v = resolve(&["127.0.0.1:9".into(), " ".into()]).unwrap();
        assert_eq!(v, vec!["127.0.0.1:9".parse().unwrap()]);
        assert!(resolve(&["nope".into()]).unwrap_err().starts_with("nope: "));
        let s = Step::Connected {
            nodes: vec!["a".into(), "b".into()],
            unreachable: 1,
        };
        assert_eq!(
            s.text(),
            StepText::Message("2 agents connected, 1 unreachable".into())
        );
        let s = Step::PairDone { done: 3, of: 6 };
        assert_eq!(s.text(), StepText::Prefix("3/6 pairs".into()));
    }
}
