//! The library layer as the probes meet it: when the active probes of a
//! host device cannot even load libibverbs.so.1 (`dlopen` fails), that is
//! RDK-L001 with the file looked for and the loader's words as evidence —
//! unless the library rule already reported L001 from the file system.

use crate::checks::Config;
use crate::codes::Code;
use crate::finding::{Evidence, Finding};
use crate::report::Report;

/// The RDK-L001 finding for a libibverbs that does not load. `looked_for`
/// is what `dlopen` was given, `error` the provider's message (with the
/// `dlerror` text).
pub fn library_load_finding(looked_for: &str, error: &str, cfg: &Config) -> Finding {
    let mut f = Finding::new(
        Code::L001,
        "host",
        format!(
            "libibverbs.so.1 does not load ({looked_for}): the active probes, and every verbs \
             application, cannot open the host's RDMA devices"
        ),
    )
    .evidence(Evidence::new(
        format!("dlopen({looked_for})"),
        error.to_string(),
    ))
    .remedy(
        "Install rdma-core's user space: apt-get install libibverbs1 ibverbs-providers \
         (Debian/Ubuntu), dnf install rdma-core libibverbs (RHEL/Fedora); if it is installed \
         outside the search path, run ldconfig or set LD_LIBRARY_PATH / RDMAKIT_IBVERBS_LIB.",
    )
    .next("ldconfig -p | grep libibverbs");
    if let Some(s) = cfg.overrides.get(&Code::L001) {
        f.severity = *s;
    }
    f
}

/// `report` with [`library_load_finding`] added, unless it already has an
/// RDK-L001 finding. Pure.
pub fn with_library_load_error(
    mut report: Report,
    looked_for: &str,
    error: &str,
    cfg: &Config,
) -> Report {
    if report.findings.iter().any(|f| f.code == Code::L001) {
        return report;
    }
    report.add_findings([library_load_finding(looked_for, error, cfg)]);
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::Layer;

    #[test]
    fn a_library_that_does_not_load_is_l001_with_the_loader_text() {
        let f = library_load_finding(
            "libibverbs.so.1",
            "dlopen failed: libibverbs.so.1: cannot open shared object file",
            &Config::default(),
        );
        assert_eq!(
            (f.code, f.layer, f.severity),
            (Code::L001, Layer::Library, crate::codes::Severity::Error)
        );
        assert_eq!(f.evidence[0].path, "dlopen(libibverbs.so.1)");
        assert!(f.evidence[0]
            .value
            .contains("cannot open shared object file"));
    }
}
