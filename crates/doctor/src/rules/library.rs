//! Library layer: libibverbs, providers, rdma-core vs kernel versions.

use crate::checks::{Ctx, Outcome};
use crate::codes::Code;
use crate::finding::{Evidence, Finding};
use rdmakit_host::parse::proc::KernelRelease;

fn not_covered(cx: &Ctx) -> Option<Outcome> {
    (!cx.facts.covers("usr") && !cx.facts.covers("etc"))
        .then(|| Outcome::NotChecked("the source holds neither /usr nor /etc".into()))
}

pub fn libibverbs(cx: &Ctx) -> Outcome {
    if !cx.facts.covers("usr") {
        return Outcome::NotChecked("the source holds no /usr".into());
    }
    let rc = &cx.facts.rdma_core;
    if rc.libibverbs.is_some() {
        return Outcome::pass();
    }
    Outcome::Findings(vec![Finding::new(
        Code::L001,
        "host",
        "libibverbs.so.1 is not installed: no verbs application (ibv_devinfo, perftest, NCCL, UCX, MPI) can open a device",
    )
    .evidence(Evidence::new(
        rc.lib_dirs
            .iter()
            .map(|d| format!("{d}/libibverbs.so.1"))
            .collect::<Vec<_>>()
            .join(", "),
        "<absent>",
    ))
    .remedy(
        "Install rdma-core's user space: apt-get install libibverbs1 ibverbs-providers \
         ibverbs-utils rdma-core (Debian/Ubuntu), dnf install rdma-core libibverbs \
         libibverbs-utils (RHEL/Fedora), zypper install rdma-core libibverbs (SUSE).",
    )
    .next("ldconfig -p | grep libibverbs")])
}

pub fn providers(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    if let Some(o) = not_covered(cx) {
        return o;
    }
    if f.devices.is_empty() {
        return Outcome::NotApplicable("no RDMA device".into());
    }
    if f.rdma_core.libibverbs.is_none() {
        return Outcome::NotApplicable("libibverbs is not installed (RDK-L001)".into());
    }
    let rc = &f.rdma_core;
    let mut out = Vec::new();
    for d in &f.devices {
        let Some(p) = &d.provider else { continue };
        let driver_file = match &rc.driver_files {
            Ok(v) => v.iter().find(|(_, provs)| provs.iter().any(|x| x == p)),
            Err(_) => None,
        };
        let lib = rc.provider_libs.iter().find(|(_, prov, _)| prov == p);
        if driver_file.is_some() && lib.is_some() {
            continue;
        }
        let listing = match &rc.driver_files {
            Ok(v) if v.is_empty() => "empty".to_string(),
            Ok(v) => v
                .iter()
                .map(|(path, _)| path.rsplit('/').next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join(" "),
            Err(e) => format!("<read failed: {e}>"),
        };
        let mut fd = Finding::new(
            Code::L002,
            d.name.clone(),
            format!(
                "no libibverbs provider '{p}' for {}: libibverbs skips the device silently \
                 (it says so only with IBV_SHOW_WARNINGS=1)",
                d.name
            ),
        )
        .evidence(Evidence::new("/etc/libibverbs.d", listing));
        let libdir = rc
            .libibverbs
            .as_ref()
            .and_then(|l| {
                l.path
                    .rsplit_once('/')
                    .map(|(dir, _)| format!("{dir}/libibverbs"))
            })
            .unwrap_or_else(|| "libibverbs/".into());
        fd = fd.evidence(Evidence::new(
            format!("{libdir}/lib{p}-rdmav*.so"),
            if lib.is_some() { "present" } else { "<absent>" },
        ));
        out.push(
            fd.remedy(format!(
                "Install the providers package (ibverbs-providers on Debian/Ubuntu, \
                 rdma-core/libibverbs on RHEL) of the same rdma-core version as libibverbs; \
                 in containers, copy /etc/libibverbs.d/{p}.driver and lib{p}-rdmav*.so from \
                 the same release."
            ))
            .next(format!(
                "IBV_SHOW_WARNINGS=1 ibv_devices; ls /etc/libibverbs.d/ {libdir}/"
            )),
        );
    }
    Outcome::Findings(out)
}

/// Approximate release date (in years) of rdma-core release `n`: releases come about
/// every 9-10 weeks, v15 in late 2017, v44 at the start of 2023.
fn rdma_core_year(n: u32) -> f64 {
    2017.9 + (f64::from(n) - 15.0) * 0.176
}

/// Approximate release date (in years) of a kernel: a release every 9-10 weeks.
fn kernel_year(k: &KernelRelease) -> Option<f64> {
    let m = f64::from(k.minor);
    match k.major {
        3 => Some(2011.55 + m * 0.19),
        4 => Some(2015.2 + m * 0.19),
        5 => Some(2019.2 + m * 0.18),
        6 => Some(2022.8 + m * 0.17),
        7.. => Some(2025.9 + f64::from(k.major - 7) * 3.3 + m * 0.17),
        _ => None,
    }
}

pub fn versions(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    if let Some(o) = not_covered(cx) {
        return o;
    }
    let rc = &f.rdma_core;
    if rc.libibverbs.is_none() && rc.packages.get().is_none_or(|p| p.is_empty()) {
        return Outcome::NotApplicable("rdma-core is not installed (RDK-L001)".into());
    }
    let Some((ver, from)) = rc.version() else {
        let mut fd = Finding::new(
            Code::L004,
            "host",
            "the rdma-core version could not be determined, so its compatibility with the kernel is unchecked",
        )
        .evidence(Evidence::of(&rc.packages));
        if let Some(l) = &rc.libibverbs {
            fd = fd.evidence(Evidence::new(l.path.clone(), l.real_name.clone()));
        }
        return Outcome::Findings(vec![fd
            .remedy("Check the package manager: dpkg -l rdma-core libibverbs1, or rpm -q rdma-core libibverbs.")
            .next("dpkg -l 'rdma-core*' 'libibverbs*' || rpm -qa | grep -E 'rdma-core|libibverbs'")]);
    };
    let Some(k) = f.kernel.release.get() else {
        return Outcome::NotChecked("the kernel release is unknown".into());
    };
    let Some(ky) = kernel_year(k) else {
        return Outcome::NotChecked(format!("kernel release {} not understood", k.raw));
    };
    let ry = rdma_core_year(ver);
    let skew = ry - ky;
    if skew.abs() <= cx.cfg.skew_years {
        return Outcome::pass();
    }
    let (older, consequence) = if skew < 0.0 {
        (
            "rdma-core is older than the kernel",
            "new kernel features are invisible to it, and a newer provider ABI may be refused",
        )
    } else {
        (
            "rdma-core is newer than the kernel",
            "verbs the kernel lacks fail with ENOSYS or EOPNOTSUPP (e.g. ibv_create_qp ENOSYS)",
        )
    };
    Outcome::Findings(vec![Finding::new(
        Code::L003,
        "host",
        format!(
            "{older} by about {:.0} years (rdma-core {ver} vs kernel {}): {consequence}",
            skew.abs(),
            k.raw
        ),
    )
    .evidence(Evidence::new(from, ver.to_string()))
    .evidence(Evidence::of(&f.kernel.release))
    .remedy(
        "Use the rdma-core that ships with the distribution of this kernel (or a vendor \
         OFED built for it); mixing a container's user space with a much older or newer \
         host kernel is the usual cause.",
    )
    .next("dpkg -l rdma-core libibverbs1; uname -r")])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_dates_line_up() {
        let k = |major, minor| KernelRelease {
            major,
            minor,
            patch: 0,
            raw: String::new(),
        };
        // rdma-core 44 shipped with Debian 12's 6.1 kernel.
        assert!((rdma_core_year(44) - kernel_year(&k(6, 1)).unwrap()).abs() < 0.5);
        // rdma-core 28 and Linux 5.6 are both early 2020.
        assert!((rdma_core_year(28) - kernel_year(&k(5, 6)).unwrap()).abs() < 0.5);
    }
}
