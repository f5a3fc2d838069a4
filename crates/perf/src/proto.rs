//! The TCP line protocol: run parameters, QP information, per-size sync.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use rdmakit_verbs::Gid;
use serde::{Deserialize, Serialize};

use crate::{PerfError, Test};

/// Protocol tag of the first line.
const MAGIC: &str = "RDMAKIT-PERF/1";

/// A QP's information as exchanged (perftest's `LID:QPN:PSN:RKey:VAddr:GID`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpInfo {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// First PSN the QP sends.
    pub psn: u32,
    /// RKey of the data buffer.
    pub rkey: u32,
    /// Address of the data buffer.
    pub vaddr: u64,
    /// GID (16 bytes).
    #[serde(serialize_with = "ser_gid", deserialize_with = "de_gid")]
    pub gid: [u8; 16],
}

fn ser_gid<S: serde::Serializer>(g: &[u8; 16], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&gid_text(g))
}

fn de_gid<'de, D: serde::Deserializer<'de>>(d: D) -> Result<[u8; 16], D::Error> {
    let s = String::deserialize(d)?;
    let mut g = [0u8; 16];
    let mut n = 0;
    for (i, part) in s.split(':').enumerate() {
        let b = g
            .get_mut(i)
            .ok_or_else(|| serde::de::Error::custom(format!("GID {s:?}: more than 16 bytes")))?;
        *b = u8::from_str_radix(part, 16).map_err(|_| {
            serde::de::Error::custom(format!("GID {s:?}: {part:?} is not a hex byte"))
        })?;
        n = i + 1;
    }
    if n != 16 {
        return Err(serde::de::Error::custom(format!(
            "GID {s:?}: {n} bytes, not 16"
        )));
    }
    Ok(g)
}

/// perftest's GID format: `00:00:...:7f:00:00:01`.
pub fn gid_text(g: &[u8; 16]) -> String {
    g.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl QpInfo {
    /// The line sent to the peer: `LID:QPN:PSN:RKey:VAddr:GID`, hex.
    pub fn to_line(&self) -> String {
        let g: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:{g}",
            self.lid, self.qpn, self.psn, self.rkey, self.vaddr
        )
    }

    /// Parses [`QpInfo::to_line`].
    ///
    /// # Errors
    /// [`PerfError::Exchange`] for malformed text.
    pub fn from_line(s: &str) -> Result<QpInfo, PerfError> {
        let bad = || {
            PerfError::Exchange(format!(
                "the peer sent malformed QP information {:?}: run the same rdmakit version on \
                 both hosts",
                s.trim()
            ))
        };
        let f: Vec<&str> = s.trim().split(':').collect();
        if f.len() != 6 || f[5].len() != 32 {
            return Err(bad());
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(f[5].get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
                .map_err(|_| bad())?;
        }
        Ok(QpInfo {
            lid: u16::from_str_radix(f[0], 16).map_err(|_| bad())?,
            qpn: u32::from_str_radix(f[1], 16).map_err(|_| bad())?,
            psn: u32::from_str_radix(f[2], 16).map_err(|_| bad())?,
            rkey: u32::from_str_radix(f[3], 16).map_err(|_| bad())?,
            vaddr: u64::from_str_radix(f[4], 16).map_err(|_| bad())?,
            gid,
        })
    }

    /// The verbs endpoint to connect to.
    pub fn endpoint(&self) -> rdmakit_verbs::Endpoint {
        rdmakit_verbs::Endpoint {
            qpn: self.qpn,
            gid: Gid(self.gid),
            psn: self.psn,
        }
    }
}

/// Run parameters: chosen by the client, adopted by the server.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Params {
    /// The test.
    pub test: Test,
    /// Message sizes, in order.
    pub sizes: Vec<usize>,
    /// Iterations per size (ignored in duration mode).
    pub iters: u64,
    /// Seconds per size (duration mode).
    pub duration: Option<f64>,
    /// Inline threshold in bytes.
    pub inline: u32,
    /// TX depth.
    pub tx_depth: u32,
    /// RX depth (receives kept posted for SEND tests).
    pub rx_depth: u32,
    /// Check the data moved.
    pub validate: bool,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// UD instead of RC (SEND tests; messages up to the MTU).
    pub ud: bool,
    /// Ask for a send completion every this many sends (perftest's
    /// `--cq-mod`); see [`Params::signal_every`].
    pub cq_mod: u32,
}

impl Params {
    /// The first line of the exchange.
    pub fn to_line(&self) -> String {
        let sizes: Vec<String> = self.sizes.iter().map(usize::to_string).collect();
        format!(
            "{MAGIC} test={} sizes={} iters={} dur={} inline={} txd={} rxd={} validate={} mtu={} conn={} cqmod={}",
            self.test,
            sizes.join(","),
            self.iters,
            self.duration.unwrap_or(0.0),
            self.inline,
            self.tx_depth,
            self.rx_depth,
            u8::from(self.validate),
            self.mtu,
            if self.ud { "UD" } else { "RC" },
            self.cq_mod
        )
    }

    /// Parses [`Params::to_line`].
    ///
    /// # Errors
    /// [`PerfError::Exchange`] when the peer is not an rdmakit perf client.
    pub fn from_line(s: &str) -> Result<Params, PerfError> {
        let bad = |why: &str| {
            PerfError::Exchange(format!(
                "the client does not speak rdmakit perf's exchange ({why} in {:?}): run \
                 `rdmakit perf TEST HOST` on the client, the same version on both hosts",
                s.trim()
            ))
        };
        let mut it = s.split_whitespace();
        if it.next() != Some(MAGIC) {
            return Err(bad("no rdmakit perf greeting"));
        }
        let mut p = Params {
            test: Test::WriteBw,
            sizes: vec![],
            iters: 0,
            duration: None,
            inline: 0,
            tx_depth: 1,
            rx_depth: 1,
            validate: false,
            mtu: 1024,
            ud: false,
            // A client that does not say signals every send.
            cq_mod: 1,
        };
        for kv in it {
            let (k, v) = kv.split_once('=').ok_or_else(|| bad("bad field"))?;
            let num = || v.parse::<u64>().map_err(|_| bad("bad number"));
            match k {
                "test" => p.test = Test::parse(v).ok_or_else(|| bad("unknown test"))?,
                "sizes" => {
                    p.sizes = v
                        .split(',')
                        .map(|x| x.parse().map_err(|_| bad("bad size")))
                        .collect::<Result<_, _>>()?
                }
                "iters" => p.iters = num()?,
                "dur" => {
                    let d: f64 = v.parse().map_err(|_| bad("bad duration"))?;
                    p.duration = (d > 0.0).then_some(d);
                }
                "inline" => p.inline = num()? as u32,
                "txd" => p.tx_depth = num()? as u32,
                "rxd" => p.rx_depth = num()? as u32,
                "validate" => p.validate = num()? != 0,
                "mtu" => p.mtu = num()? as u32,
                "conn" => p.ud = v == "UD",
                "cqmod" => p.cq_mod = num()?.clamp(1, u64::from(u32::MAX)) as u32,
                _ => {} // fields of a newer client are ignored
            }
        }
        if p.sizes.is_empty() {
            return Err(bad("no sizes"));
        }
        Ok(p)
    }

    /// Every how many sends one is signaled. `cq_mod`, capped at half the
    /// send window (the TX depth of bandwidth tests; 16 for the latency
    /// tests, which reap lazily) so that a signaled send is always in flight
    /// and the queue never drains waiting for one; 1 for read-lat, whose
    /// client waits for each READ's completion.
    pub fn signal_every(&self) -> u64 {
        let window = if self.test.is_bw() {
            self.tx_depth
        } else {
            self.tx_depth.max(16)
        };
        if self.test == Test::ReadLat {
            return 1;
        }
        u64::from(self.cq_mod.clamp(1, (window / 2).max(1)))
    }

    /// Largest message.
    pub fn max_size(&self) -> usize {
        self.sizes.iter().copied().max().unwrap_or(8).max(8)
    }
}

/// A TCP connection carrying lines.
pub(crate) struct Lines {
    r: BufReader<TcpStream>,
    w: TcpStream,
    pending: String,
}

impl Lines {
    pub(crate) fn new(s: TcpStream) -> Result<Lines, PerfError> {
        let _ = s.set_nodelay(true);
        let w = s.try_clone().map_err(|e| PerfError::peer_io(&e))?;
        Ok(Lines {
            r: BufReader::new(s),
            w,
            pending: String::new(),
        })
    }

    pub(crate) fn send(&mut self, line: &str) -> Result<(), PerfError> {
        self.w
            .write_all(format!("{line}\n").as_bytes())
            .map_err(|e| PerfError::peer_io(&e))
    }

    /// Blocking read of one line (EOF is an error: the peer went away).
    pub(crate) fn recv(&mut self) -> Result<String, PerfError> {
        self.w
            .set_nonblocking(false)
            .map_err(|e| PerfError::peer_io(&e))?;
        let mut l = std::mem::take(&mut self.pending);
        let n = self
            .r
            .read_line(&mut l)
            .map_err(|e| PerfError::peer_io(&e))?;
        if n == 0 && !l.ends_with('\n') {
            return Err(PerfError::peer_closed());
        }
        Ok(l.trim_end().to_string())
    }

    /// Reads a line expecting `word` as its first token; returns the rest.
    pub(crate) fn expect(&mut self, word: &str) -> Result<String, PerfError> {
        let l = self.recv()?;
        match l.split_once(' ') {
            Some((w, rest)) if w == word => Ok(rest.to_string()),
            None if l == word => Ok(String::new()),
            _ if l.starts_with("ERR ") => Err(PerfError::Exchange(format!(
                "the peer refused the run: {}",
                &l[4..]
            ))),
            _ => Err(unexpected(word, &l)),
        }
    }

    /// Non-blocking: a complete line if one arrived.
    pub(crate) fn try_recv(&mut self) -> Result<Option<String>, PerfError> {
        if !self.r.buffer().is_empty() || self.pending.contains('\n') {
            return self.recv().map(Some);
        }
        self.w
            .set_nonblocking(true)
            .map_err(|e| PerfError::peer_io(&e))?;
        let mut b = [0u8; 256];
        let r = self.r.get_mut().read(&mut b);
        self.w
            .set_nonblocking(false)
            .map_err(|e| PerfError::peer_io(&e))?;
        match r {
            Ok(0) => Err(PerfError::peer_closed()),
            Ok(n) => {
                self.pending.push_str(&String::from_utf8_lossy(&b[..n]));
                if let Some(i) = self.pending.find('\n') {
                    let line = self.pending[..i].trim_end().to_string();
                    self.pending.drain(..=i);
                    Ok(Some(line))
                } else {
                    Ok(None)
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(PerfError::peer_io(&e)),
        }
    }
}

/// A line other than the one the exchange expects: the peer is no rdmakit
/// perf of this version (perftest's tools speak an exchange of their own).
pub(crate) fn unexpected(word: &str, got: &str) -> PerfError {
    PerfError::Exchange(format!(
        "the peer does not speak rdmakit perf's exchange (it sent {got:?} where {word} was \
         due): run `rdmakit perf` of the same version on both hosts (perftest's ib_* tools \
         speak their own)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_info_and_params_round_trip() {
        let q = QpInfo {
            lid: 0,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234_5678,
            vaddr: 0x7f00_dead_b000,
            gid: Gid::from_ipv4(std::net::Ipv4Addr::new(127, 1, 2, 3)).0,
        };
        assert_eq!(QpInfo::from_line(&q.to_line()).unwrap(), q);
        assert!(QpInfo::from_line("1:2:3").is_err());
        let p = Params {
            test: Test::SendLat,
            sizes: vec![2, 4],
            iters: 10,
            duration: Some(1.5),
            inline: 64,
            tx_depth: 4,
            rx_depth: 8,
            validate: true,
            mtu: 4096,
            ud: true,
            cq_mod: 100,
        };
        assert_eq!(Params::from_line(&p.to_line()).unwrap(), p);
        // Capped at half the send window; read-lat signals every READ.
        assert_eq!(p.signal_every(), 8);
        let bw = Params {
            test: Test::WriteBw,
            tx_depth: 128,
            ..p.clone()
        };
        assert_eq!(bw.signal_every(), 64);
        let bw1 = Params {
            tx_depth: 1,
            ..bw.clone()
        };
        assert_eq!(bw1.signal_every(), 1);
        let rl = Params {
            test: Test::ReadLat,
            ..p.clone()
        };
        assert_eq!(rl.signal_every(), 1);
        // A client that predates the field signals every send.
        let old = p.to_line().replace(" cqmod=100", "");
        assert_eq!(Params::from_line(&old).unwrap().cq_mod, 1);
        assert!(Params::from_line("GET / HTTP/1.1").is_err());
    }
}
