//! The Ethernet layer beneath RoCE: the facts of each netdev that carries an
//! RDMA port which are not files — ethtool's statistics, pause and FEC
//! settings and module EEPROM, and the DCB configuration (PFC, ETS, the APP
//! table, DCBX) — asked through one probe, [`EthQuery`], and answered in the
//! text the matching command prints, so a capture directory can hold that
//! command's real output and a bundle replays the answer exactly.
//!
//! | query | answered as | capture file |
//! |---|---|---|
//! | [`EthQuery::Stats`] | `ethtool -S IF` | `ethtool/IF/stats.txt` |
//! | [`EthQuery::Pause`] | `ethtool -a IF` | `ethtool/IF/pause.txt` |
//! | [`EthQuery::Fec`] | `ethtool --show-fec IF` | `ethtool/IF/fec.txt` |
//! | [`EthQuery::Module`] | `ethtool -m IF hex on` | `ethtool/IF/module.txt` |
//! | [`EthQuery::Dcb`] | `dcb -s -N dcbx/ets/pfc/app show dev IF` | `ethtool/IF/dcb.txt` |
//!
//! A query that fails is its errno (`ethtool/IF/NAME.errno` holds its name in a
//! capture): EOPNOTSUPP from a driver without the operation (veth has no DCB,
//! virtio no module EEPROM) means "not applicable", never an alarm.

pub mod facts;
pub mod live;
pub mod optics;
pub mod parse;
pub mod sysfs;

pub use facts::{EthLink, Ethernet, RocePort};

use serde::{Deserialize, Serialize};

/// One question about a netdev that is not a file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EthQuery {
    /// The driver's own statistics with the driver's names (`ethtool -S`).
    Stats(String),
    /// Global (802.3x) pause settings (`ethtool -a`).
    Pause(String),
    /// FEC modes, configured and active (`ethtool --show-fec`).
    Fec(String),
    /// The plug-in module's EEPROM (`ethtool -m IF hex on`).
    Module(String),
    /// DCB: DCBX mode, ETS, PFC and the APP table (iproute2's `dcb`, numeric).
    Dcb(String),
}

impl EthQuery {
    /// Every query, for one netdev.
    pub fn all(ifname: &str) -> [EthQuery; 5] {
        let i = ifname.to_string();
        [
            EthQuery::Stats(i.clone()),
            EthQuery::Pause(i.clone()),
            EthQuery::Fec(i.clone()),
            EthQuery::Module(i.clone()),
            EthQuery::Dcb(i),
        ]
    }

    /// The netdev asked about.
    pub fn ifname(&self) -> &str {
        match self {
            EthQuery::Stats(i)
            | EthQuery::Pause(i)
            | EthQuery::Fec(i)
            | EthQuery::Module(i)
            | EthQuery::Dcb(i) => i,
        }
    }

    /// The file name in a capture directory's `ethtool/IF/` ("stats").
    pub fn file_stem(&self) -> &'static str {
        match self {
            EthQuery::Stats(_) => "stats",
            EthQuery::Pause(_) => "pause",
            EthQuery::Fec(_) => "fec",
            EthQuery::Module(_) => "module",
            EthQuery::Dcb(_) => "dcb",
        }
    }

    /// The query for capture file stem `stem` of netdev `ifname`.
    pub fn from_file_stem(stem: &str, ifname: &str) -> Option<EthQuery> {
        EthQuery::all(ifname)
            .into_iter()
            .find(|q| q.file_stem() == stem)
    }

    /// The command whose output the answer is ("ethtool -S eth0"), as
    /// evidence names it.
    pub fn command(&self) -> String {
        let i = self.ifname();
        match self {
            EthQuery::Stats(_) => format!("ethtool -S {i}"),
            EthQuery::Pause(_) => format!("ethtool -a {i}"),
            EthQuery::Fec(_) => format!("ethtool --show-fec {i}"),
            EthQuery::Module(_) => format!("ethtool -m {i}"),
            EthQuery::Dcb(_) => format!("dcb show dev {i}"),
        }
    }

    /// The key under which the answer is stored in a bundle ("ethtool-stats:eth0").
    pub fn key(&self) -> String {
        match self {
            EthQuery::Dcb(i) => format!("dcb:{i}"),
            q => format!("ethtool-{}:{}", q.file_stem(), q.ifname()),
        }
    }
}

/// Whether `name` can be a netdev name (what the kernel's `dev_valid_name`
/// accepts): asked of the kernel only then, and a capture's directory of
/// another name is not imported.
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_query_and_the_netdev() {
        assert_eq!(EthQuery::Stats("eth0".into()).key(), "ethtool-stats:eth0");
        assert_eq!(EthQuery::Dcb("ens1f0np0".into()).key(), "dcb:ens1f0np0");
        for q in EthQuery::all("p1") {
            assert_eq!(EthQuery::from_file_stem(q.file_stem(), "p1"), Some(q));
        }
    }

    #[test]
    fn netdev_names_are_what_the_kernel_accepts() {
        assert!(valid_ifname("ens1f0np0"));
        assert!(valid_ifname("bond0.100"));
        for bad in ["", ".", "..", "a/b", "a:b", "a b", "0123456789abcdef"] {
            assert!(!valid_ifname(bad), "{bad:?}");
        }
    }
}
