//! What each exit status of the one table ([`rdmakit_vocab::exit::Exit`]) means
//! for each subcommand: the end of its `--help` and its man page's EXIT STATUS
//! section. A subcommand lists the statuses it can end with; the test
//! `every_subcommand_documents_its_exit_status` holds every subcommand to it.

use rdmakit_vocab::exit::Exit::{self, Failed, Found, Incomplete, Ok};

/// (subcommand path as typed, its statuses).
pub const TABLE: &[(&str, &[(Exit, &str)])] = &[
    (
        "doctor",
        &[
            (
                Ok,
                "nothing at or above --fail-on (default error) was found; --list-checks; \
                 with --slurm-health-check: healthy",
            ),
            (
                Found,
                "a finding at or above --fail-on; with --npd: a problem; with \
                 --slurm-health-check: unhealthy (the node is drained)",
            ),
            (
                Failed,
                "bad arguments, or an input that cannot be read (--from, --root, --baseline, \
                 --kernel-log, --pid); with --npd: unknown (node-problem-detector's status, \
                 also when the check did not finish); with --slurm-health-check: the checks or \
                 scontrol could not run",
            ),
        ],
    ),
    (
        "explain",
        &[
            (Ok, "explained"),
            (
                Failed,
                "a term rdmakit does not know (the nearest ones are suggested), or bad arguments",
            ),
        ],
    ),
    (
        "collect",
        &[
            (
                Ok,
                "the bundle was written (files the host could not read are recorded with \
                 their errno, not failures)",
            ),
            (
                Failed,
                "bad arguments, a source that cannot be read, a bundle that cannot be written",
            ),
        ],
    ),
    (
        "pcap",
        &[
            (Ok, "every packet decoded, every ICRC valid, no anomaly"),
            (
                Found,
                "a packet failed its ICRC, or a protocol anomaly was found",
            ),
            (
                Failed,
                "a capture that cannot be read or decoded, or bad arguments",
            ),
            (
                Incomplete,
                "more than 100,000 RoCE packets: the first ones decoded, the frames left named",
            ),
        ],
    ),
    ("dev", VIEW),
    (
        "devinfo",
        &[
            (Ok, "shown (\"No IB devices found\" too)"),
            (
                Failed,
                "bad arguments, no such device or port, a provider or bundle that cannot be \
                 used",
            ),
            (
                Incomplete,
                "with --from or --root: fields the source does not record were left out, and \
                 are named on stderr",
            ),
        ],
    ),
    ("link", VIEW),
    ("res", VIEW),
    ("stat", VIEW),
    (
        "monitor",
        &[
            (Failed, "events could not be received"),
            (
                Incomplete,
                "the kernel has no RDMA netlink to subscribe to (ib_core not loaded)",
            ),
        ],
    ),
    (
        "metrics",
        &[
            (
                Ok,
                "printed or written (findings are metrics, not exit statuses); with \
                 --listen: served until stopped",
            ),
            (
                Failed,
                "bad arguments, a source that cannot be read, -o that cannot be written, \
                 --listen that cannot bind",
            ),
        ],
    ),
    (
        "perf",
        &[
            (
                Ok,
                "the run completed (with --validate: every byte checked)",
            ),
            (
                Found,
                "the run failed: no server, the peer vanished (RETRY_EXC_ERR), a completion \
                 error, a data mismatch, no progress",
            ),
            (Failed, "invalid arguments"),
        ],
    ),
    (
        "soft status",
        &[(Ok, "shown"), (Failed, "a registry that cannot be read")],
    ),
    (
        "soft leaky",
        &[
            (Ok, "set"),
            (Failed, "the registry or its option file cannot be written"),
        ],
    ),
    (
        "soft reclaim",
        &[
            (
                Ok,
                "freed, or nothing to free (--dry-run: what would be freed)",
            ),
            (
                Found,
                "some objects were refused: their owner is alive or a zombie, or a forked \
                 child still holds the context (each named)",
            ),
            (Failed, "a registry that cannot be read or changed"),
        ],
    ),
    (
        "shim install",
        &[
            (Ok, "installed"),
            (
                Failed,
                "the library is not built (the message says how), or DIR cannot be written",
            ),
        ],
    ),
    (
        "fleet report",
        &[
            (Ok, "every node is ok"),
            (
                Found,
                "a node needs attention: a warning, an error, missing",
            ),
            (
                Failed,
                "an input that cannot be read, one node twice, a bad --baseline or --expect",
            ),
        ],
    ),
    (
        "fleet baseline",
        &[
            (Ok, "written"),
            (
                Failed,
                "an input that cannot be read, -o that cannot be written",
            ),
        ],
    ),
    (
        "fleet sweep",
        &[
            (Ok, "every node is ok"),
            (
                Found,
                "a node needs attention: a warning, an error, silent, garbled or hung",
            ),
            (
                Failed,
                "srun could not run, an input or DIR that cannot be used, a bad --baseline or \
                 --expect",
            ),
        ],
    ),
    (
        "fleet agent",
        &[
            (
                Ok,
                "exited: idle for --idle-timeout, or with --once when its coordinator left",
            ),
            (
                Failed,
                "could not start or serve: no token, the address in use, --user refused",
            ),
        ],
    ),
    (
        "fleet pairwise",
        &[
            (Ok, "no fault"),
            (
                Found,
                "a slow node or link, an agent unreachable, or no verdict (most tests failed)",
            ),
            (
                Failed,
                "the run could not be made (no token, bad --agents, srun failed), or --from \
                 cannot be read",
            ),
        ],
    ),
    (
        "verbs-test",
        &[
            (Ok, "every case passed"),
            (Found, "a case failed"),
            (
                Failed,
                "no device, a provider that cannot be used, --filter matches no case",
            ),
        ],
    ),
    (
        "irq",
        &[
            (
                Ok,
                "the IRQ checks pass, or do not apply (software devices)",
            ),
            (
                Found,
                "an IRQ check failed: no vectors, too few, INTx, all on one CPU, on another \
                 NUMA node",
            ),
            (Failed, "bad arguments, or a source that cannot be read"),
        ],
    ),
    ("completions", &[(Ok, "printed"), (Failed, "bad arguments")]),
    (
        "man",
        &[
            (Ok, "printed or written"),
            (Failed, "DIR cannot be written"),
        ],
    ),
];

/// dev, link, res, stat: views of RDMA netlink.
const VIEW: &[(Exit, &str)] = &[
    (
        Ok,
        "shown; also when the kernel has no RDMA (nothing to show, stderr says why)",
    ),
    (
        Failed,
        "bad arguments, no such device, a source that cannot be read",
    ),
    (
        Incomplete,
        "part could not be read (not recorded in this bundle, a dump the kernel refused or \
         garbled): the rest is shown, what is missing is named on stderr",
    ),
];

/// The statuses of the subcommand `path` ("fleet report"), or None when the
/// table has no row for it (a group such as `fleet`).
pub fn of(path: &str) -> Option<&'static [(Exit, &'static str)]> {
    TABLE.iter().find(|(p, _)| *p == path).map(|(_, t)| *t)
}
