//! What a user reads from `rdmakit doctor` and `rdmakit explain`, end to end on the
//! real binary: the report fits the terminal (80 columns through a pipe, `COLUMNS`
//! when set), the checklist table and the check list agree, hints are not results,
//! no Rust Debug text, real NICs described by what the capture holds, explain pages
//! rendered for a terminal, close suggestions only, and the errors for a host tree
//! that stores its symlinks as files.

mod common;

use common::*;
use rdmakit_testkit::lines_over;

fn out(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let o = rdmakit_env(args, env);
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

#[test]
fn doctor_fits_80_columns_through_a_pipe_and_columns_when_set() {
    for name in [
        "healthy",
        "gpud-h100",
        "mlx4-saturated-edit",
        "real-nics-procfs",
    ] {
        let cap = fixture(name);
        for extra in [&[][..], &["--verbose"][..]] {
            let mut args = vec!["doctor", "--from", cap.as_str()];
            args.extend_from_slice(extra);
            let (_, piped, _) = out(&args, &[("COLUMNS", "")]);
            assert!(
                lines_over(&piped, 80).is_empty(),
                "{name}:\n{}",
                lines_over(&piped, 80).join("\n")
            );
            let (_, wide, _) = out(&args, &[("COLUMNS", "120")]);
            assert!(
                lines_over(&wide, 120).is_empty(),
                "{name}:\n{}",
                lines_over(&wide, 120).join("\n")
            );
        }
    }
    // COLUMNS is honoured: the same report is laid out wider.
    let gpud = fixture("gpud-h100");
    let (_, wide, _) = out(&["doctor", "--from", &gpud], &[("COLUMNS", "120")]);
    assert!(wide.lines().any(|l| l.chars().count() > 80), "{wide}");
    let (_, list, _) = out(&["doctor", "--list-checks"], &[]);
    assert!(lines_over(&list, 80).is_empty(), "{list}");
}

/// Every row of the table is "fail" exactly when it names failing checks, and
/// each check it names is listed as "fail" by --verbose; on a kernel without
/// ib_core the row for modules says which check failed it.
#[test]
fn checklist_table_and_check_list_agree() {
    let vm = repo().join("crates/doctor/tests/data/vm");
    for b in [
        "ib_core_missing",
        "port_down",
        "no_device",
        "healthy",
        "ib_umad_missing",
    ] {
        let p = vm.join(format!("{b}.json.gz"));
        let p = p.to_str().unwrap();
        let (_, j, _) = out(&["doctor", "--from", p, "--json"], &[]);
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        let (_, verbose, _) = out(&["doctor", "--from", p, "--verbose"], &[]);
        for row in v["checklist"].as_array().unwrap() {
            let failed: Vec<&str> = row["failed_checks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap())
                .collect();
            assert_eq!(row["result"] == "fail", !failed.is_empty(), "{b}: {row}");
            for id in failed {
                let check = v["checks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["id"] == id)
                    .unwrap();
                assert_eq!(check["status"], "fail", "{b}: {id}");
                assert!(
                    verbose.contains(&format!("  fail         {id} ")),
                    "{b}: --verbose does not list {id} as failing\n{verbose}"
                );
                assert!(verbose.contains(&format!("fail: {id}")), "{b}: {verbose}");
            }
        }
    }
    let core = vm.join("ib_core_missing.json.gz");
    let (_, text, _) = out(&["doctor", "--from", core.to_str().unwrap()], &[]);
    let row = text
        .lines()
        .find(|l| l.contains("Kernel modules loaded"))
        .unwrap();
    assert!(row.contains("┆ fail: kernel.modules"), "{text}");
}

/// On a healthy capture the table holds results only; the commonly omitted
/// checks are hints, shown for failing rows and with --verbose, never as a
/// row's status.
#[test]
fn common_omissions_are_hints_not_results() {
    let cap = fixture("healthy");
    let (code, text, _) = out(&["doctor", "--from", &cap], &[]);
    assert_eq!(code, Some(0));
    assert!(!text.contains("hint"), "{text}");
    assert!(!text.contains("not checked:"), "{text}");
    assert!(text.contains("│ Kernel modules loaded ┆ pass "), "{text}");
    let (_, verbose, _) = out(&["doctor", "--from", &cap, "--verbose"], &[]);
    assert!(
        verbose.contains("hint Kernel modules loaded: ib_umad is the module most often left"),
        "{verbose}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&out(&["doctor", "--from", &cap, "--json"], &[]).1).unwrap();
    assert_eq!(
        v["checklist"][0]["omission"],
        "ib_umad is the module most often left out; without it MAD tools (sminfo, perfquery) \
         and opensm cannot reach the fabric"
    );
}

/// Words a Rust `{:?}` leaves: struct literals, CamelCase enum variants.
fn debug_text(s: &str) -> Vec<String> {
    let mut bad = Vec::new();
    for w in s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        let b = w.as_bytes();
        let camel = b.first().is_some_and(u8::is_ascii_uppercase)
            && b.windows(2)
                .any(|p| p[0].is_ascii_lowercase() && p[1].is_ascii_uppercase())
            && ![
                "InfiniBand",
                "RoCE",
                "LinkUp",
                "ConnectX",
                "PortCounters",
                "KiB",
                "MiB",
                "GiB",
                "TiB",
            ]
            .contains(&w);
        let state = ["Reset", "Rtr", "Rts", "Sqd", "Sqe"].contains(&w);
        if camel || state {
            bad.push(w.to_string());
        }
    }
    for (i, _) in s.match_indices(" { ") {
        let before: String = s[..i]
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric())
            .collect();
        if before
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_uppercase())
        {
            bad.push(format!("{} {{ ", before.chars().rev().collect::<String>()));
        }
    }
    bad
}

#[test]
fn soft_nic_probes_print_no_rust_debug_text() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let (code, text, err) = out(
        &[
            "doctor",
            "--device",
            "soft0",
            "--html",
            html.to_str().unwrap(),
        ],
        &[("COLUMNS", "200")],
    );
    assert_eq!(code, Some(0), "{text}{err}");
    assert!(text.contains("RESET->INIT->RTR->RTS"), "{text}");
    assert!(
        text.contains("PD 0, MR 0, CQ 0, QP 0, SRQ 0, AH 0"),
        "{text}"
    );
    assert_eq!(debug_text(&text), Vec::<String>::new(), "{text}");
    let (_, json, _) = out(&["doctor", "--device", "soft0", "--json"], &[]);
    assert_eq!(debug_text(&json), Vec::<String>::new(), "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    for r in v["probes"][0]["results"].as_array().unwrap() {
        let kind = r["kind"].as_str().unwrap();
        assert!(
            kind.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{kind}"
        );
    }
    // The HTML carries the same probe details (its data, not its markup, is checked).
    let page = std::fs::read_to_string(&html).unwrap();
    for needle in [
        "ResourceCounts",
        "Reset -&gt;",
        "Reset ->",
        "Rtr -",
        "Rts\"",
    ] {
        assert!(!page.contains(needle), "{needle} in the HTML report");
    }
    assert!(page.contains("RESET-&gt;INIT-&gt;RTR-&gt;RTS") || page.contains("RESET->INIT"));
}

/// A capture of /sys/class/infiniband alone: what is known (HCA type, firmware,
/// state, rate), "unknown" only for what is not.
#[test]
fn real_nic_capture_says_what_it_knows() {
    let (_, text, _) = out(&["doctor", "--from", &fixture("mlx4-saturated-edit")], &[]);
    assert!(
        text.contains(
            "  mlx4_0 (MT4099, firmware 2.31.5050, driver unknown):\n    port 1: ACTIVE 40 \
             Gb/sec (4X QDR), link layer unknown\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains(" ? ") && !text.contains("kind unknown"),
        "{text}"
    );
}

/// A bundle recorded on this host: its label reads without nested parentheses.
#[test]
fn bundle_header_does_not_nest() {
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path().join("node.json.gz");
    let b = b.to_str().unwrap();
    let (code, _, err) = out(&["collect", "-o", b], &[]);
    assert_eq!(code, Some(0), "{err}");
    let (_, text, _) = out(&["doctor", "--from", b], &[("COLUMNS", "300")]);
    let first = text.lines().next().unwrap();
    let want = format!(
        "rdmakit doctor: bundle {b} (rdmakit {}, live host), kernel ",
        env!("CARGO_PKG_VERSION")
    );
    assert!(first.starts_with(&want), "{first}");
}

/// fixtures/*/root keeps symlinks as files (git, copies): read as a host tree
/// it would show no ports; rdmakit says so and names the capture to replay.
#[test]
fn root_of_a_capture_with_flattened_symlinks_points_to_from() {
    let cap = fixture("healthy");
    let root = format!("{cap}/root");
    let (code, text, err) = out(&["doctor", "--root", &root], &[]);
    assert_eq!(code, Some(2), "{text}");
    assert_eq!(
        err,
        format!(
            "rdmakit: error: --root {root}: sys/class/infiniband/rxe0 is a regular file \
             holding a link target (../../devices/virtual/infiniband/rxe0): this copy stores \
             symlinks as files, so devices and ports cannot be found in it; replay it as the \
             capture directory it belongs to: --from {cap}\n"
        )
    );
}

#[test]
fn explain_renders_pages_for_a_terminal_and_keeps_the_markdown_on_request() {
    let (code, text, _) = out(&["explain", "RDK-K003"], &[]);
    assert_eq!(code, Some(0));
    assert!(
        text.starts_with("RDK-K003: ib_umad is not loaded\n\nWhat it means\n\n"),
        "{text}"
    );
    for mark in ["## ", "```", "`ib_umad`", "**"] {
        assert!(!text.contains(mark), "{mark} in\n{text}");
    }
    assert!(
        text.contains("\n  • opensm cannot run on this host;\n"),
        "{text}"
    );
    assert!(text.contains("\n    modprobe ib_umad\n"), "{text}");
    assert!(
        text.lines()
            .all(|l| l.chars().count() <= 80 || l.starts_with("    ")),
        "{text}"
    );
    let (_, raw, _) = out(&["explain", "--raw", "RDK-K003"], &[]);
    assert!(
        raw.starts_with("# RDK-K003: ib_umad is not loaded\n\n## What it means"),
        "{raw}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&out(&["explain", "--json", "RDK-K003"], &[]).1).unwrap();
    assert!(v["page"].as_str().unwrap().contains("## How to fix"));
}

#[test]
fn explain_suggests_only_close_matches() {
    let (code, text, err) = out(&["explain", "FOO"], &[]);
    assert_eq!((code, text.as_str()), (Some(2), ""));
    assert_eq!(
        err,
        "rdmakit: error: explain FOO: no such code, errno or status; rdmakit explain takes a \
         finding code (RDK-K003, ib-umad-missing), an errno (ENOSPC, 28), a verb and errno \
         (ibv_create_qp:ENOSPC) or a work completion status (wc:12, RETRY_EXC_ERR)\n"
    );
    let (code, _, err) = out(&["explain", "ENOSCP"], &[]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err,
        "rdmakit: error: explain ENOSCP: no such code, errno or status; did you mean ENOSPC?\n"
    );
}

/// The explanations users meet first speak of RDMA, not of the project's notes.
#[test]
fn doctor_and_explain_never_mention_the_project_source() {
    let mut texts = Vec::new();
    for q in [
        "ibv_create_qp:ENOSPC",
        "ibv_reg_mr:ENOMEM",
        "ibv_create_qp:ENOSYS",
        "EINVAL",
        "ENOSPC",
        "RDK-K003",
        "RDK-R001",
        "RDK-L003",
    ] {
        texts.push((q.to_string(), out(&["explain", q], &[]).1));
    }
    for name in ["healthy", "gpud-h100"] {
        let cap = fixture(name);
        texts.push((
            name.into(),
            out(&["doctor", "--from", &cap, "--verbose"], &[]).1,
        ));
    }
    for (what, t) in texts {
        assert_eq!(
            rdmakit_testkit::words::internal_word(&t),
            None,
            "{what}: {t}"
        );
    }
}
