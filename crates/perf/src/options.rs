//! From perftest-shaped command-line options to run [`Params`]: the value
//! parsers of single flags, and [`Options::params`], which applies each
//! test's defaults and rejects the combinations a test cannot run; and a
//! whole `rdmakit perf` invocation ([`Request`]) run as a client or a server
//! ([`run`]).

use std::time::Duration;

use rdmakit_verbs::{DeviceConfig, ProviderChoice};

use crate::{
    run_client, run_server, ClientOpts, Params, PerfError, Progress, Report, ServerOpts, Test,
    SWEEP_MAX,
};

/// A test name (`write-bw`, `ib_write_bw`, ...).
///
/// # Errors
/// An unknown name, with the list of tests.
pub fn parse_test(s: &str) -> Result<Test, String> {
    Test::parse(s).ok_or_else(|| {
        let names: Vec<&str> = Test::ALL.iter().map(|t| t.name()).collect();
        format!("unknown test {s:?}: one of {}", names.join(", "))
    })
}

/// A path MTU: 256, 512, 1024, 2048 or 4096.
///
/// # Errors
/// Anything else.
pub fn parse_mtu(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(m @ (256 | 512 | 1024 | 2048 | 4096)) => Ok(m),
        _ => Err(format!("MTU {s:?}: one of 256, 512, 1024, 2048, 4096")),
    }
}

/// `-c`: RC, or UD (case-insensitive); `true` for UD.
///
/// # Errors
/// Anything else.
pub fn parse_ud(s: &str) -> Result<bool, String> {
    match s.to_ascii_uppercase().as_str() {
        "RC" => Ok(false),
        "UD" => Ok(true),
        _ => Err(format!(
            "connection type {s:?}: RC, or UD for send-bw/send-lat"
        )),
    }
}

/// `--connect-timeout SECONDS` as a duration: at most a day, NaN or less
/// than 0 none (`Duration::from_secs_f64` would panic on 1e300 or NaN).
fn connect_timeout(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs.clamp(0.0, 86_400.0)).unwrap_or_default()
}

/// `-D`: seconds, more than 0, at most a day.
///
/// # Errors
/// Anything else.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if d > 0.0 && d <= 86_400.0 => Ok(d),
        _ => Err(format!("duration {s:?}: seconds, more than 0")),
    }
}

/// A run's options as the command line gives them (`None`: the test's
/// default).
#[derive(Clone, Debug)]
pub struct Options {
    /// The test.
    pub test: Test,
    /// `-s`: message size (with `all`, the largest of the sweep).
    pub size: Option<u64>,
    /// `-a`: sweep the sizes.
    pub all: bool,
    /// `-n`: iterations per size.
    pub iters: Option<u64>,
    /// `-D`: seconds per size.
    pub duration: Option<f64>,
    /// `-I`: inline threshold.
    pub inline: Option<u32>,
    /// `-t`: send queue depth.
    pub tx_depth: Option<u32>,
    /// `-Q`: CQ moderation.
    pub cq_mod: u32,
    /// `-r`: receives kept posted.
    pub rx_depth: u32,
    /// `-m`: path MTU.
    pub mtu: u32,
    /// `-c UD`.
    pub ud: bool,
    /// `--validate`.
    pub validate: bool,
}

impl Options {
    /// The run's parameters: each test's defaults (size 65536 for
    /// bandwidth, 2 for latency, 8 for atomics; perftest's iterations,
    /// depths and inline sizes), the sweep's sizes.
    ///
    /// # Errors
    /// What the test cannot run (UD beyond send-bw/send-lat or above the
    /// MTU, atomics other than 8 bytes, ...), as the usage error says it.
    pub fn params(&self) -> Result<Params, String> {
        let (test, ud) = (self.test, self.ud);
        let bad = |m: &str| Err(m.to_string());
        if test == Test::AtomicBw && self.size.is_some_and(|s| s != 8) {
            return bad("atomic-bw moves 8 bytes per message: -s must be 8");
        }
        if test == Test::WriteLat && self.size == Some(1) {
            return bad("write-lat needs messages of at least 2 bytes");
        }
        let default_size = match test {
            Test::AtomicBw => 8,
            t if t.is_bw() => 65536,
            _ => 2,
        };
        if ud && !matches!(test, Test::SendBw | Test::SendLat) {
            return bad(&format!("{test} runs over RC only (UD: send-bw, send-lat)"));
        }
        if ud && self.size.is_some_and(|s| s > u64::from(self.mtu)) {
            return bad(&format!(
                "UD messages must fit the MTU ({} bytes; -m)",
                self.mtu
            ));
        }
        let cap = if ud { self.mtu as usize } else { SWEEP_MAX };
        let size = self.size.map_or(default_size.min(cap), |s| s as usize);
        let sizes = if self.all {
            let max = self.size.map_or(cap, |s| s as usize);
            let v = test.sweep_sizes(max);
            if v.is_empty() {
                return bad("-a with -s below 2 leaves no sizes to sweep");
            }
            v
        } else {
            vec![size]
        };
        Ok(Params {
            test,
            sizes,
            iters: self.iters.unwrap_or(test.default_iters()),
            duration: self.duration,
            inline: self.inline.unwrap_or(if test.is_bw() { 0 } else { 220 }),
            tx_depth: self.tx_depth.unwrap_or(test.default_tx_depth()),
            rx_depth: self.rx_depth,
            validate: self.validate,
            mtu: self.mtu,
            ud,
            cq_mod: self.cq_mod,
        })
    }
}

/// `rdmakit perf TEST [HOST]` as the command line gives it: perftest-shaped
/// bandwidth and latency tests (write-bw, read-bw, send-bw, atomic-bw,
/// write-lat, read-lat, send-lat) over RC (send-bw and send-lat also over
/// UD), plus the control-path verb timings no common tool reports.
///
/// Without HOST it waits as the server on TCP port 18515 (`-p`); with HOST it
/// runs the client, whose parameters (-s/-a/-n/-D/-I/-t/...) the server
/// adopts.
#[derive(Clone, Debug)]
pub struct Request {
    /// The test and its parameters.
    pub options: Options,
    /// `HOST`: run as the client against this server (`None`: serve).
    pub host: Option<String>,
    /// `-p`: TCP port of the QP information exchange.
    pub port: u16,
    /// `-d`: the device (`None`: the soft NIC).
    pub device: Option<String>,
    /// `-x`: GID index (reported).
    pub gid_index: u32,
    /// Client: seconds to keep retrying the TCP connect while the server
    /// starts (negative: none).
    pub connect_timeout: f64,
    /// `-e`: sleep on CQ events instead of busy polling — this side's
    /// choice, not sent to the peer (perftest's `--use_event`).
    pub use_event: bool,
}

/// Why [`run`] gave no report. The exit statuses: 0 success, 1 the run
/// failed (a completion error such as RETRY_EXC_ERR when the peer vanished, a
/// broken exchange, a validation failure), 2 invalid arguments.
#[derive(Debug)]
pub enum Refused {
    /// Parameters a test cannot run ([`Options::params`]); exit 2, said on
    /// stderr only.
    Usage(String),
    /// The provider `-d DEV` opens through could not be chosen (a bad
    /// `RDMAKIT_PROVIDER`); exit 2.
    Provider(rdmakit_verbs::Error),
    /// The run failed; [`PerfError::exit_code`] says how.
    Run(PerfError),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Usage(m) => f.write_str(m),
            Refused::Provider(e) => write!(f, "choosing a verbs provider: {e}"),
            Refused::Run(e) => write!(f, "{e}"),
        }
    }
}

impl Refused {
    /// The failed run's JSON object for `--json` (a usage error has none).
    pub fn json(&self, test: Test) -> Option<serde_json::Value> {
        match self {
            Refused::Run(e) => Some(crate::render::error_json(test, e)),
            _ => None,
        }
    }

    /// The exit status: 2 for bad parameters, else as [`PerfError::exit_code`].
    pub fn exit(&self) -> rdmakit_vocab::exit::Exit {
        use rdmakit_vocab::exit::Exit;
        match self {
            Refused::Run(e) => Exit::from_code(e.exit_code()).unwrap_or(Exit::Failed),
            _ => Exit::Failed,
        }
    }
}

/// Runs `req`: its parameters checked first, then the device opened through
/// `provider` (which matters for `-d DEV` only: the soft NIC is built in),
/// the soft NIC configured by `soft` (the environment's, read by the caller:
/// a malformed one fails a run on the soft NIC as opening it would), then the
/// client or the server, reporting through `hooks`.
///
/// # Errors
/// [`Refused`].
pub fn run(
    req: &Request,
    provider: rdmakit_verbs::Result<ProviderChoice>,
    soft: rdmakit_verbs::Result<DeviceConfig>,
    hooks: &mut Progress<'_>,
) -> Result<Report, Refused> {
    let params = req.options.params().map_err(Refused::Usage)?;
    if req.use_event && req.options.test == Test::WriteLat {
        return Err(Refused::Usage(crate::engine::EVENT_WRITE_LAT.into()));
    }
    let provider = match provider {
        Ok(c) => c,
        Err(e) if req.device.is_some() => return Err(Refused::Provider(e)),
        Err(_) => ProviderChoice::Auto,
    };
    let soft = match soft {
        Ok(c) => c,
        Err(e) if req.device.is_none() => return Err(Refused::Run(PerfError::Verbs(e))),
        Err(_) => DeviceConfig::default(),
    };
    let r = match &req.host {
        Some(host) => run_client(
            &ClientOpts {
                host: host.clone(),
                port: req.port,
                device: req.device.clone(),
                provider,
                soft,
                gid_index: req.gid_index,
                params,
                connect_timeout: connect_timeout(req.connect_timeout),
                use_event: req.use_event,
            },
            hooks,
        ),
        None => run_server(
            &ServerOpts {
                port: req.port,
                device: req.device.clone(),
                provider,
                soft,
                gid_index: req.gid_index,
                test: req.options.test,
                use_event: req.use_event,
            },
            hooks,
        ),
    };
    r.map_err(Refused::Run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PerfError;

    fn opts(test: Test) -> Options {
        Options {
            test,
            size: None,
            all: false,
            iters: None,
            duration: None,
            inline: None,
            tx_depth: None,
            cq_mod: 100,
            rx_depth: 512,
            mtu: 4096,
            ud: false,
            validate: false,
        }
    }

    fn refused(o: &Options) -> String {
        o.params().unwrap_err()
    }

    fn request(options: Options, device: Option<&str>) -> Request {
        Request {
            options,
            host: Some("127.0.0.1".into()),
            port: 1,
            device: device.map(str::to_string),
            gid_index: 0,
            connect_timeout: 0.0,
            use_event: false,
        }
    }

    /// What stops a run before it starts, in the order a user meets it: the
    /// parameters, then the provider `-d` needs, then the soft NIC's setting.
    #[test]
    fn a_run_refuses_usage_then_provider_then_soft_setting() {
        let bad = || ProviderChoice::parse("bogus").unwrap_err();
        let mut o = opts(Test::AtomicBw);
        o.size = Some(16);
        let r = run(
            &request(o, Some("mlx5_0")),
            Err(bad()),
            Err(bad()),
            &mut Progress::default(),
        );
        assert!(matches!(r, Err(Refused::Usage(_))), "{r:?}");
        let o = opts(Test::WriteBw);
        let r = run(
            &request(o.clone(), Some("mlx5_0")),
            Err(bad()),
            Ok(DeviceConfig::default()),
            &mut Progress::default(),
        );
        assert!(matches!(r, Err(Refused::Provider(_))), "{r:?}");
        let r = run(
            &request(o, None),
            Err(bad()),
            Err(bad()),
            &mut Progress::default(),
        );
        assert!(matches!(r, Err(Refused::Run(PerfError::Verbs(_)))), "{r:?}");
    }

    #[test]
    fn each_test_gets_perftests_defaults() {
        let p = opts(Test::WriteBw).params().unwrap();
        assert_eq!((p.sizes, p.inline), (vec![65536], 0));
        assert_eq!(p.iters, Test::WriteBw.default_iters());
        let p = opts(Test::SendLat).params().unwrap();
        assert_eq!((p.sizes, p.inline), (vec![2], 220));
        assert_eq!(opts(Test::AtomicBw).params().unwrap().sizes, vec![8]);
        let mut o = opts(Test::SendBw);
        o.ud = true;
        o.mtu = 1024;
        assert_eq!(o.params().unwrap().sizes, vec![1024]);
        o.all = true;
        assert_eq!(o.params().unwrap().sizes, Test::SendBw.sweep_sizes(1024));
    }

    #[test]
    fn combinations_a_test_cannot_run_are_parameter_errors() {
        let mut o = opts(Test::AtomicBw);
        o.size = Some(16);
        assert_eq!(
            refused(&o),
            "atomic-bw moves 8 bytes per message: -s must be 8"
        );
        let mut o = opts(Test::WriteLat);
        o.size = Some(1);
        assert_eq!(refused(&o), "write-lat needs messages of at least 2 bytes");
        let mut o = opts(Test::ReadBw);
        o.ud = true;
        assert_eq!(
            refused(&o),
            "read-bw runs over RC only (UD: send-bw, send-lat)"
        );
        let mut o = opts(Test::SendBw);
        (o.ud, o.mtu, o.size) = (true, 1024, Some(2048));
        assert_eq!(refused(&o), "UD messages must fit the MTU (1024 bytes; -m)");
        let mut o = opts(Test::WriteBw);
        (o.all, o.size) = (true, Some(1));
        assert_eq!(refused(&o), "-a with -s below 2 leaves no sizes to sweep");
        assert_eq!(PerfError::Params(String::new()).kind(), "params");
        assert_eq!(PerfError::Params(String::new()).exit_code(), 2);
        assert_eq!(PerfError::Cancelled.exit_code(), 1);
    }

    #[test]
    fn flag_values_parse_or_say_what_is_allowed() {
        assert_eq!(parse_test("ib_write_bw"), Ok(Test::WriteBw));
        assert!(parse_test("x").unwrap_err().contains("write-bw"));
        assert_eq!(parse_mtu("1024"), Ok(1024));
        assert!(parse_mtu("1500").is_err());
        assert_eq!(parse_ud("ud"), Ok(true));
        assert!(parse_ud("uc").is_err());
        assert_eq!(parse_duration("2.5"), Ok(2.5));
        assert_eq!(connect_timeout(2.5), Duration::from_millis(2500));
        assert_eq!(connect_timeout(1e300), Duration::from_secs(86_400));
        assert_eq!(connect_timeout(f64::NAN), Duration::ZERO);
        assert_eq!(connect_timeout(-1.0), Duration::ZERO);
        assert!(parse_duration("0").is_err());
    }
}
