//! CPU sets as the kernel prints them: lists (`cpu/online`, `local_cpulist`,
//! `smp_affinity_list`) and hex masks (`smp_affinity`, `local_cpus`). The CPU and
//! IRQ-affinity views of the host own these values; sysfs re-exports them.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::sysfs::{digits_only, strip};
use super::{ParseError, Result};

/// Largest CPU number accepted in a cpu list or mask (Linux's NR_CPUS tops out at
/// 8192 today; this leaves room while keeping a hostile `0-4294967295` cheap).
pub const MAX_CPU: u32 = 65_535;

/// A set of CPU numbers, sorted and without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CpuSet(pub Vec<u32>);

impl CpuSet {
    /// A set from any CPU numbers (sorted and deduplicated here).
    pub fn new(mut cpus: Vec<u32>) -> Self {
        cpus.sort_unstable();
        cpus.dedup();
        CpuSet(cpus)
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The CPUs in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    /// CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.iter().filter(|c| other.contains(*c)).collect())
    }

    /// Every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.iter().all(|c| other.contains(c))
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuSet::new(iter.into_iter().collect())
    }
}

/// The kernel's list form: `0-3,8,10-11`; the empty set prints as an empty string.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while let Some(&next) = iter.peek() {
                if Some(next) == end.checked_add(1) {
                    end = next;
                    iter.next();
                } else {
                    break;
                }
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

/// Parses a CPU list as the kernel prints it (`cpu/online`, `local_cpulist`,
/// `smp_affinity_list`): `"0-3,8,10-11"`; the empty string is the empty set.
///
/// # Errors
/// A malformed item, a reversed range, or a CPU above [`MAX_CPU`].
pub fn cpulist(s: &str) -> Result<CpuSet> {
    let text = strip(s).trim();
    let err = || ParseError::new("CPU list", text);
    let mut bits = CpuBits::default();
    if text.is_empty() {
        return Ok(CpuSet::default());
    }
    for item in text.split(',') {
        let item = item.trim();
        let (lo, hi) = match item.split_once('-') {
            Some((lo, hi)) => (cpu_number(lo), cpu_number(hi)),
            None => (cpu_number(item), cpu_number(item)),
        };
        match (lo, hi) {
            (Some(lo), Some(hi)) if lo <= hi => bits.set_range(lo, hi),
            _ => return Err(err()),
        }
    }
    Ok(bits.into_set())
}

/// Parses a hex CPU mask (`smp_affinity`, `local_cpus`): 32-bit groups separated by
/// commas, most significant first, e.g. `"ff,00000001"` = CPUs 0 and 32-39.
///
/// # Errors
/// A group that is not 1-8 hex digits, or a set bit above [`MAX_CPU`].
pub fn cpumask(s: &str) -> Result<CpuSet> {
    let text = strip(s).trim();
    let err = || ParseError::new("CPU mask", text);
    if text.is_empty() {
        return Err(err());
    }
    let mut bits = CpuBits::default();
    for (index, group) in text.rsplit(',').enumerate() {
        let group = group.trim();
        if group.is_empty() || group.len() > 8 {
            return Err(err());
        }
        if !group.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(err());
        }
        let word = u32::from_str_radix(group, 16).map_err(|_| err())?;
        for bit in 0..32u32 {
            if word & (1 << bit) != 0 {
                let cpu = u32::try_from(index)
                    .ok()
                    .and_then(|i| i.checked_mul(32))
                    .and_then(|base| base.checked_add(bit))
                    .filter(|cpu| *cpu <= MAX_CPU)
                    .ok_or_else(err)?;
                bits.set_range(cpu, cpu);
            }
        }
    }
    Ok(bits.into_set())
}

// ---------------------------------------------------------------------------
// helpers

fn cpu_number(s: &str) -> Option<u32> {
    digits_only(s.trim())
        .and_then(|d| d.parse::<u32>().ok())
        .filter(|cpu| *cpu <= MAX_CPU)
}

/// A bitmap of CPUs up to [`MAX_CPU`], grown as needed.
#[derive(Default)]
struct CpuBits(Vec<u64>);

impl CpuBits {
    /// Sets `lo..=hi`; both are at most [`MAX_CPU`] (checked by the callers, and
    /// clamped here again).
    fn set_range(&mut self, lo: u32, hi: u32) {
        let hi = hi.min(MAX_CPU);
        let words = (hi / 64 + 1) as usize;
        if self.0.len() < words {
            self.0.resize(words, 0);
        }
        for cpu in lo..=hi {
            if let Some(word) = self.0.get_mut((cpu / 64) as usize) {
                *word |= 1 << (cpu % 64);
            }
        }
    }

    fn into_set(self) -> CpuSet {
        let mut cpus = Vec::new();
        for (index, word) in self.0.iter().enumerate() {
            for bit in 0..64u32 {
                if word & (1 << bit) != 0 {
                    if let Ok(index) = u32::try_from(index) {
                        cpus.push(index * 64 + bit);
                    }
                }
            }
        }
        CpuSet(cpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_cpu_online() {
        let online = cpulist("0-1\n").unwrap();
        assert_eq!(online, CpuSet(vec![0, 1]));
        assert_eq!(online.to_string(), "0-1");
    }

    #[test]
    fn cpulists() {
        let set = cpulist("0-3,8,10-11\n").unwrap();
        assert_eq!(set.0, vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(set.to_string(), "0-3,8,10-11");
        assert!(set.contains(8) && !set.contains(9));
        assert_eq!(set.len(), 7);
        assert_eq!(cpulist("\n").unwrap(), CpuSet::default());
        assert_eq!(cpulist("3,1,1-2").unwrap().0, vec![1, 2, 3]);
        assert!(cpulist("3-1").is_err());
        assert!(cpulist("0-4294967295").is_err());
        assert!(cpulist("a").is_err());
        assert!(cpulist("1,,2").is_err());
        assert_eq!(cpulist("65535").unwrap().0, vec![65535]);
    }

    #[test]
    fn cpumasks() {
        let set = cpumask("ff,00000001\n").unwrap();
        assert_eq!(set.to_string(), "0,32-39");
        assert_eq!(cpumask("00000000,00000003").unwrap().0, vec![0, 1]);
        assert_eq!(cpumask("0").unwrap(), CpuSet::default());
        assert!(cpumask("").is_err());
        assert!(cpumask("123456789").is_err());
        assert!(cpumask("+1").is_err());
        assert!(cpumask("g").is_err());
    }

    #[test]
    fn cpuset_operations() {
        let a: CpuSet = [3, 1, 2].into_iter().collect();
        let b = CpuSet::new(vec![2, 3, 4]);
        assert_eq!(a.intersection(&b).0, vec![2, 3]);
        assert!(!a.is_subset(&b));
        assert!(CpuSet::new(vec![2]).is_subset(&b));
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![1, 2, 3]);
    }
}
