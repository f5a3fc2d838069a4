//! The ECN marker: crates/testkit/bpf/ecn_vq.bpf.c built with clang-14 for
//! one dumbbell's rate, K and limit, attached as a clsact egress program,
//! and its map found (filter → program → map) and read with bpftool.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use super::stats::{self, MarkerStats, ParseError};
use super::sys::{run, Tools};
use super::Error;

/// The program's source, compiled into testkit so a test binary needs no
/// checkout at run time.
pub const SOURCE: &str = include_str!("../../bpf/ecn_vq.bpf.c");

/// Writes the source to `dir` and compiles it with the bottleneck's numbers
/// as `-D` defines; returns the object's path.
pub(super) fn build(
    tools: &Tools,
    dir: &Path,
    rate_bps: u64,
    k_bytes: u32,
    limit_bytes: u32,
) -> Result<PathBuf, Error> {
    let clang = tools.clang.as_ref().ok_or(Error::Missing {
        what: "clang-14".into(),
        package: "clang-14",
    })?;
    let src = dir.join("ecn_vq.bpf.c");
    let obj = dir.join("ecn_vq.o");
    std::fs::write(&src, SOURCE).map_err(|e| Error::io(&src, e))?;
    let mut c = Command::new(clang);
    c.args([
        "-O2",
        "-g",
        "-target",
        "bpf",
        "-I/usr/include/x86_64-linux-gnu",
    ])
    .arg(format!("-DRATE_BPS={rate_bps}ULL"))
    .arg(format!("-DK_BYTES={k_bytes}ULL"))
    .arg(format!("-DLIMIT_BYTES={limit_bytes}ULL"))
    .arg("-c")
    .arg(&src)
    .arg("-o")
    .arg(&obj);
    run(&mut c, "clang-14 -target bpf (the ECN marker)")?;
    Ok(obj)
}

/// Attaches `obj` to `ifname`'s egress in namespace `ns` (a clsact qdisc,
/// then a direct-action bpf filter); returns its map's id.
pub(super) fn attach(tools: &Tools, ns: &str, ifname: &str, obj: &Path) -> Result<u32, Error> {
    run(
        Command::new(&tools.tc).args(["-n", ns, "qdisc", "add", "dev", ifname, "clsact"]),
        "tc qdisc add clsact",
    )?;
    run(
        Command::new(&tools.tc)
            .args([
                "-n", ns, "filter", "add", "dev", ifname, "egress", "bpf", "da", "obj",
            ])
            .arg(obj)
            .args(["sec", "tc"]),
        "tc filter add ... bpf (the ECN marker)",
    )?;
    let filters = run(
        Command::new(&tools.tc).args(["-n", ns, "-j", "filter", "show", "dev", ifname, "egress"]),
        "tc -j filter show",
    )?;
    let prog = prog_id(&filters)?;
    let bpftool = bpftool(tools)?;
    let shown = run(
        Command::new(bpftool).args(["prog", "show", "id", &prog.to_string(), "-j"]),
        "bpftool prog show",
    )?;
    Ok(map_id(&shown)?)
}

/// The marker's counters now.
pub(super) fn read(tools: &Tools, map: u32) -> Result<MarkerStats, Error> {
    let out = run(
        Command::new(bpftool(tools)?).args([
            "map",
            "lookup",
            "id",
            &map.to_string(),
            "key",
            "0",
            "0",
            "0",
            "0",
            "-j",
        ]),
        "bpftool map lookup (the ECN marker's counters)",
    )?;
    Ok(stats::parse_marker(&out)?)
}

fn bpftool(tools: &Tools) -> Result<&Path, Error> {
    tools.bpftool.as_deref().ok_or(Error::Missing {
        what: "bpftool".into(),
        package: "bpftool",
    })
}

/// The id of the `ecn_vq` program among `tc -j filter show`'s filters.
fn prog_id(json: &str) -> Result<u32, ParseError> {
    const WHAT: &str = "tc -j filter show";
    #[derive(Deserialize)]
    struct Prog {
        id: u32,
        name: String,
    }
    #[derive(Deserialize)]
    struct Options {
        prog: Option<Prog>,
    }
    #[derive(Deserialize)]
    struct Filter {
        kind: String,
        options: Option<Options>,
    }
    if json.len() > stats::MAX_OUTPUT {
        return Err(ParseError::TooLong {
            what: WHAT,
            len: json.len(),
        });
    }
    let filters: Vec<Filter> =
        serde_json::from_str(json).map_err(|source| ParseError::Json { what: WHAT, source })?;
    filters
        .into_iter()
        .filter(|f| f.kind == "bpf")
        .filter_map(|f| f.options?.prog)
        .find(|p| p.name == "ecn_vq")
        .map(|p| p.id)
        .ok_or(ParseError::Missing {
            what: WHAT,
            missing: "bpf filter running ecn_vq".into(),
        })
}

/// The one map of `bpftool prog show -j`'s program.
fn map_id(json: &str) -> Result<u32, ParseError> {
    const WHAT: &str = "bpftool prog show";
    #[derive(Deserialize)]
    struct Prog {
        #[serde(default)]
        map_ids: Vec<u32>,
    }
    if json.len() > stats::MAX_OUTPUT {
        return Err(ParseError::TooLong {
            what: WHAT,
            len: json.len(),
        });
    }
    let p: Prog =
        serde_json::from_str(json).map_err(|source| ParseError::Json { what: WHAT, source })?;
    match p.map_ids[..] {
        [m] => Ok(m),
        _ => Err(ParseError::Missing {
            what: WHAT,
            missing: format!("single map (map_ids {:?})", p.map_ids),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_filter_json_names_the_program() {
        let j = include_str!("../../tests/data/ecn/tc-filter-egress.json");
        assert_eq!(prog_id(j).unwrap(), 100);
        assert!(prog_id("[]").is_err());
        assert!(prog_id("[{\"kind\":\"bpf\"}]").is_err());
        assert!(prog_id("{").is_err());
    }

    #[test]
    fn bpftool_prog_show_names_the_map() {
        let j = include_str!("../../tests/data/ecn/bpftool-prog-show.json");
        assert_eq!(map_id(j).unwrap(), 26);
        assert!(map_id("{\"map_ids\":[]}").is_err());
        assert!(map_id("{\"map_ids\":[1,2]}").is_err());
        assert!(map_id("[]").is_err());
    }

    #[test]
    fn the_source_defines_what_the_parser_reads() {
        for field in [
            "seen",
            "marked",
            "mark_failed",
            "model_drops",
            "notect_over",
            "ce_in",
            "backlog",
            "peak_backlog",
        ] {
            assert!(
                SOURCE.contains(&format!("__u64 {field};")),
                "struct vq has no {field}"
            );
        }
    }
}
