//! Cohorts: groups of comparable nodes, so that different hardware is never called
//! drift.
//!
//! A node's hardware key is the set of distinct (adapter identity, ports per
//! adapter, link layer) it holds, where the identity is `hca_type` and `board_id`
//! (either alone when the other is absent; the driver, else the name's prefix, for
//! devices with neither, such as rxe). Counts are not part of the key: a node with
//! one HCA fewer than its peers has the same key and stays in their cohort, where
//! the device count is compared.
//!
//! A node that lost every adapter of one kind has a key that is a strict subset of
//! its peers'. Such a small group (at most one node in five of the larger cohort) is
//! folded into the larger cohort, where its device count is compared; a group of
//! its own size (three mlx5-only nodes next to four mlx5 + hfi1 nodes) stays a
//! cohort of its own.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rdmakit_doctor::inventory::{Inventory, InventoryDevice};
use serde::{Deserialize, Serialize};

/// One kind of adapter in a node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Hardware {
    /// `MT4099 SM_1141000001000` (hca_type and board_id), `rdma_rxe` (driver).
    pub ident: String,
    /// Ports per adapter.
    pub ports: usize,
    /// `InfiniBand`, `Ethernet`, or both joined with `+`.
    pub link_layer: String,
}

/// The hardware key of a node: its distinct adapter kinds, sorted.
pub type Key = Vec<Hardware>;

/// The adapter identity of a device.
pub fn ident(d: &InventoryDevice) -> String {
    fn nonempty(s: &Option<String>) -> Option<&str> {
        s.as_deref().map(str::trim).filter(|s| !s.is_empty())
    }
    match (nonempty(&d.hca_type), nonempty(&d.board_id)) {
        (Some(h), Some(b)) => format!("{h} {b}"),
        (Some(h), None) => h.to_string(),
        (None, Some(b)) => b.to_string(),
        (None, None) => match d.driver.as_deref() {
            Some(drv) => drv.to_string(),
            None => d
                .name
                .trim_end_matches(|c: char| c.is_ascii_digit())
                .to_string(),
        },
    }
}

/// The hardware key of an inventory.
pub fn key(inv: &Inventory) -> Key {
    let set: BTreeSet<Hardware> = inv
        .devices
        .iter()
        .map(|d| {
            let lls: BTreeSet<&str> = d
                .ports
                .iter()
                .map(|p| p.link_layer.as_deref().unwrap_or("unknown"))
                .collect();
            Hardware {
                ident: ident(d),
                ports: d.ports.len(),
                link_layer: lls.into_iter().collect::<Vec<_>>().join("+"),
            }
        })
        .collect();
    set.into_iter().collect()
}

/// How a key reads: `MT4099 SM_1141000001000 (2 ports, InfiniBand) + ...`.
pub fn label(key: &Key) -> String {
    if key.is_empty() {
        return "no RDMA device".to_string();
    }
    key.iter()
        .map(|h| {
            format!(
                "{} ({} port{}, {})",
                h.ident,
                h.ports,
                if h.ports == 1 { "" } else { "s" },
                h.link_layer
            )
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Groups node indices by key; returns (key, members) in a stable order (largest
/// first, then by label), with small subset groups folded into larger supersets.
pub fn group(keys: &[(usize, Key)]) -> Vec<(Key, Vec<usize>)> {
    let mut by: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (i, k) in keys {
        by.entry(k.clone()).or_default().push(*i);
    }
    // Fold, smallest groups first, into the largest strict superset that is at
    // least five times their size. A superset holds every adapter of the key, so
    // only keys holding its rarest adapter are candidates: looking them up keeps
    // a fleet of thousands of distinct keys linear, not quadratic.
    let keys: Vec<Key> = by.keys().cloned().collect();
    let mut holding: HashMap<&Hardware, Vec<usize>> = HashMap::new();
    for (i, k) in keys.iter().enumerate() {
        for h in k {
            holding.entry(h).or_default().push(i);
        }
    }
    let all: Vec<usize> = (0..keys.len()).collect();
    let mut order: Vec<Key> = keys.clone();
    order.sort_by_key(|k| by[k].len());
    for k in order {
        let n = by.get(&k).map_or(0, Vec::len);
        let candidates = k
            .iter()
            .filter_map(|h| holding.get(h))
            .min_by_key(|v| v.len())
            .unwrap_or(&all);
        let target = candidates
            .iter()
            .map(|&i| &keys[i])
            .filter_map(|other| by.get(other).map(|members| (other, members)))
            .filter(|(other, members)| {
                *other != &k
                    && members.len() > n
                    && n <= (members.len() / 5).max(1)
                    && is_strict_subset(&k, other)
            })
            .max_by_key(|(other, members)| (members.len(), std::cmp::Reverse(label(other))))
            .map(|(other, _)| other.clone());
        if let Some(t) = target {
            let moved = by.remove(&k).unwrap_or_default();
            if let Some(m) = by.get_mut(&t) {
                m.extend(moved);
                m.sort_unstable();
            }
        }
    }
    let mut out: Vec<(Key, Vec<usize>)> = by.into_iter().collect();
    out.sort_by(|a, b| {
        b.1.len()
            .cmp(&a.1.len())
            .then_with(|| label(&a.0).cmp(&label(&b.0)))
    });
    out
}

fn is_strict_subset(small: &Key, big: &Key) -> bool {
    small.len() < big.len() && small.iter().all(|h| big.contains(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hw(id: &str) -> Hardware {
        Hardware {
            ident: id.into(),
            ports: 1,
            link_layer: "InfiniBand".into(),
        }
    }

    #[test]
    fn a_lone_node_missing_an_adapter_kind_joins_its_peers() {
        let full = vec![hw("a"), hw("b")];
        let mut keys: Vec<(usize, Key)> = (0..4).map(|i| (i, full.clone())).collect();
        keys.push((4, vec![hw("a")]));
        let g = group(&keys);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].1, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_group_of_its_own_size_stays_its_own_cohort() {
        let full = vec![hw("a"), hw("b")];
        let mut keys: Vec<(usize, Key)> = (0..4).map(|i| (i, full.clone())).collect();
        keys.extend((4..7).map(|i| (i, vec![hw("a")])));
        let g = group(&keys);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].1, vec![0, 1, 2, 3]);
        assert_eq!(g[1].1, vec![4, 5, 6]);
    }

    #[test]
    fn different_hardware_never_merges() {
        let keys = vec![(0, vec![hw("a")]), (1, vec![hw("b")]), (2, vec![hw("b")])];
        assert_eq!(group(&keys).len(), 2);
    }
}
