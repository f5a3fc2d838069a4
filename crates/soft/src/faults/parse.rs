//! The `RDMAKIT_SOFT_FAULTS` grammar (docs/fault-injection.md): items
//! separated by `;` or newlines, each a kind, its positional word and
//! `key=value` pairs separated by blanks. Bounded ([`super::limits`]);
//! any input gives a plan or an error, never a panic.

use super::{
    limits, Dir, Event, EventRule, Nak, Opcode, PacketFault, PacketRule, Plan, Trigger, Verb,
    VerbRule, When,
};
use crate::errno::Errno;

/// Why a specification was refused: the item (1-based), the column
/// (1-based, in characters from the start of its line) of the word at
/// fault, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("item {item}, column {column}: {message}")]
pub struct ParseError {
    /// The item, counted from 1.
    pub item: usize,
    /// The column of the word at fault, counted from 1.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// A word of the specification and where it starts (byte offset).
#[derive(Clone, Copy)]
struct Word<'a> {
    text: &'a str,
    at: usize,
}

pub(super) fn parse(spec: &str) -> Result<Plan, ParseError> {
    // Columns count characters from the start of the word's line.
    let column = |at: usize| {
        let before = spec.get(..at).unwrap_or("");
        let line = before.rfind('\n').map_or(before, |n| &before[n + 1..]);
        line.chars().count() + 1
    };
    if spec.len() > limits::SPEC_LEN {
        return Err(ParseError {
            item: 0,
            column: 1,
            message: format!("{} bytes; at most {}", spec.len(), limits::SPEC_LEN),
        });
    }
    let mut plan = Plan::default();
    let mut item = 0;
    let mut start = 0;
    for piece in spec.split([';', '\n']) {
        let at = start;
        start += piece.len() + 1;
        let words: Vec<Word> = piece
            .split([' ', '\t', '\r'])
            .scan(at, |pos, w| {
                let word = Word { text: w, at: *pos };
                *pos += w.len() + 1;
                Some(word)
            })
            .filter(|w| !w.text.is_empty())
            .collect();
        let Some(first) = words.first() else {
            continue;
        };
        item += 1;
        let fail = |w: &Word, message: String| ParseError {
            item,
            column: column(w.at),
            message,
        };
        if item > limits::ITEMS {
            return Err(fail(first, format!("more than {} items", limits::ITEMS)));
        }
        parse_item(&mut plan, &words).map_err(|(w, m)| fail(&w, m))?;
    }
    Ok(plan)
}

type ItemError<'a> = (Word<'a>, String);

fn parse_item<'a>(plan: &mut Plan, words: &[Word<'a>]) -> Result<(), ItemError<'a>> {
    let first = words[0];
    if let Some(v) = first.text.strip_prefix("rng=") {
        if let Some(extra) = words.get(1) {
            return Err((*extra, "rng=N stands alone".into()));
        }
        plan.rng = v
            .parse()
            .map_err(|_| (first, format!("rng {v:?} is not a number 0..=2^64-1")))?;
        return Ok(());
    }
    let mut rest = &words[1..];
    let mut positional = || {
        let (w, r) = rest.split_first()?;
        if w.text.contains('=') {
            return None;
        }
        rest = r;
        Some(*w)
    };
    let fault = match first.text {
        "drop" => Some(PacketFault::Drop),
        "dup" => Some(PacketFault::Dup),
        "ce" => Some(PacketFault::Ce),
        "reorder" => Some(PacketFault::Reorder { depth: 3 }),
        "corrupt" => {
            if let Some(w) = positional() {
                if w.text != "icrc" {
                    return Err((w, format!("corrupt {:?}: only \"icrc\" is known", w.text)));
                }
            }
            Some(PacketFault::CorruptIcrc)
        }
        "delay" => {
            let w = positional().ok_or((first, "delay needs a duration (delay 2ms)".into()))?;
            let ns = duration(w, limits::DELAY_NS)?;
            if ns == 0 {
                return Err((w, "a delay of 0 delays nothing".into()));
            }
            Some(PacketFault::Delay { ns })
        }
        "rnr" => Some(PacketFault::Rnr),
        "nak" => {
            let w = positional().ok_or((first, "nak needs a code (nak rem_access)".into()))?;
            let n = Nak::NAMES.iter().find(|(n, _)| *n == w.text).map(|x| x.1);
            Some(PacketFault::Nak(n.ok_or((
                w,
                format!(
                    "unknown NAK {:?}: psn_seq, inv_req, rem_access or rem_op",
                    w.text
                ),
            ))?))
        }
        "link" => {
            let w = positional().ok_or((first, "link needs \"down\" (link down)".into()))?;
            if w.text != "down" {
                return Err((
                    w,
                    format!(
                        "link {:?}: only \"down\" (up again at the end of for=)",
                        w.text
                    ),
                ));
            }
            None
        }
        "fail" | "exhaust" | "qp_fatal" | "device_fatal" => None,
        other => {
            return Err((
                first,
                format!(
                    "unknown fault {other:?}: drop, dup, reorder, corrupt, delay, ce, rnr, nak, \
                     link, qp_fatal, device_fatal, fail, exhaust or rng=N"
                ),
            ))
        }
    };
    let event = Event::NAMES
        .iter()
        .find(|(n, _)| *n == first.text)
        .map(|x| x.1);
    let answers = matches!(fault, Some(PacketFault::Rnr | PacketFault::Nak(_)));
    let verb = match first.text {
        "fail" => {
            let w = positional().ok_or((first, "fail needs a verb (fail create_qp)".into()))?;
            let v = Verb::NAMES.iter().find(|(n, _)| *n == w.text).map(|x| x.1);
            Some(v.ok_or((
                w,
                format!(
                    "unknown verb {:?}: create_qp, reg_mr, create_cq or post",
                    w.text
                ),
            ))?)
        }
        _ => None,
    };
    if let Some(w) = positional() {
        return Err((w, format!("{:?} is not key=value", w.text)));
    }
    let mut rule = PacketRule {
        fault: fault.unwrap_or(PacketFault::Drop),
        dir: Dir::Rx,
        qp: None,
        opcode: None,
        psn: None,
        after_ns: 0,
        for_ns: None,
        trigger: Trigger {
            when: When::Always,
            count: None,
        },
    };
    let mut errno = None;
    let mut seen: Vec<&str> = Vec::new();
    for w in rest {
        let Some((key, value)) = w.text.split_once('=') else {
            return Err((*w, format!("{:?} is not key=value", w.text)));
        };
        if seen.contains(&key) {
            return Err((*w, format!("{key}= given twice")));
        }
        seen.push(key);
        let packet_key = fault.is_some();
        let triggered = first.text != "exhaust" && event.is_none();
        match key {
            "p" | "every" | "nth" if triggered => {
                if rule.trigger.when != When::Always {
                    return Err((*w, "one of p=, every= and nth=".into()));
                }
                rule.trigger.when = match key {
                    "p" => When::P(probability(*w, value)?),
                    "every" => When::Every(number(*w, value, 1, limits::EVERY)?),
                    _ => When::Nth(number(*w, value, 1, limits::EVERY)?),
                };
            }
            "count" if triggered => {
                rule.trigger.count = Some(number(*w, value, 1, limits::COUNT)?);
            }
            "errno" if !packet_key && event.is_none() && verb != Some(Verb::Post) => {
                let n = rdmakit_vocab::errno::number(value)
                    .ok_or((*w, format!("unknown errno {value:?} (ENOSPC, ENOMEM, ...)")))?;
                errno = Some(Errno(n));
            }
            "dir" if packet_key => {
                rule.dir = match value {
                    "rx" => Dir::Rx,
                    "tx" => Dir::Tx,
                    "both" => Dir::Both,
                    _ => return Err((*w, format!("dir={value}: rx, tx or both"))),
                };
                if answers && rule.dir != Dir::Rx {
                    let e = format!(
                        "dir={value}: {} answers what it receives, dir=rx",
                        first.text
                    );
                    return Err((*w, e));
                }
            }
            "qp" if packet_key || event == Some(Event::QpFatal) => {
                rule.qp = Some(number(*w, value, 0, limits::PSN.into())? as u32);
            }
            "opcode" if packet_key => rule.opcode = Some(opcode(*w, value)?),
            "psn" if packet_key => {
                let (a, b) = value.split_once('-').unwrap_or((value, value));
                let a = number(*w, a, 0, limits::PSN.into())? as u32;
                let b = number(*w, b, 0, limits::PSN.into())? as u32;
                if a > b {
                    return Err((*w, format!("psn={value}: the range ends before it starts")));
                }
                rule.psn = Some((a, b));
            }
            "after" if packet_key || event.is_some() => {
                rule.after_ns = duration(*w, limits::WINDOW_NS)?
            }
            "for" if packet_key || event == Some(Event::LinkDown) => {
                let d = duration(*w, limits::WINDOW_NS)?;
                if d == 0 {
                    return Err((*w, "for=0 is never active".into()));
                }
                rule.for_ns = Some(d);
            }
            "depth" if matches!(fault, Some(PacketFault::Reorder { .. })) => {
                let depth = number(*w, value, 1, limits::DEPTH.into())? as u32;
                rule.fault = PacketFault::Reorder { depth };
            }
            _ => return Err((*w, format!("{key}= is not a key of {}", first.text))),
        }
    }
    match (fault, verb, event) {
        (Some(_), _, _) => plan.packets.push(rule),
        (None, Some(verb), _) => plan.verbs.push(VerbRule {
            verb,
            trigger: rule.trigger,
            errno: errno.unwrap_or(Errno::ENOMEM),
        }),
        (None, None, Some(event)) => plan.events.push(EventRule {
            event,
            qp: rule.qp,
            after_ns: rule.after_ns,
            for_ns: rule.for_ns,
        }),
        (None, None, None) => {
            let e = errno.ok_or((first, "exhaust needs errno= (exhaust errno=ENOSPC)".into()))?;
            plan.exhaust = Some(e);
        }
    }
    Ok(())
}

/// `value` as a number in `lo..=hi` (decimal, or hexadecimal after `0x`).
fn number<'a>(w: Word<'a>, value: &str, lo: u64, hi: u64) -> Result<u64, ItemError<'a>> {
    let n = match value.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => value.parse().ok(),
    };
    n.filter(|n| (lo..=hi).contains(n))
        .ok_or((w, format!("{value:?} is not a number in {lo}..={hi}")))
}

/// A probability in 0 < p <= 1 with at most 6 decimals, in parts per
/// million.
fn probability<'a>(w: Word<'a>, value: &str) -> Result<u32, ItemError<'a>> {
    let bad = || {
        (
            w,
            format!("p={value}: a probability above 0, at most 1, 6 decimals at most"),
        )
    };
    let (int, frac) = value.split_once('.').unwrap_or((value, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || int.len() > 1 || frac.len() > 6 || !digits(int) || !digits(frac) {
        return Err(bad());
    }
    let i: u32 = int.parse().map_err(|_| bad())?;
    let f: u32 = format!("{frac:0<6}").parse().map_err(|_| bad())?;
    let ppm = i * 1_000_000 + f;
    if ppm == 0 || ppm > 1_000_000 {
        return Err(bad());
    }
    Ok(ppm)
}

/// A duration `N` with unit `ns`, `us`, `ms` or `s`, at most `max` ns.
fn duration<'a>(w: Word<'a>, max: u64) -> Result<u64, ItemError<'a>> {
    let text = w.text.split_once('=').map_or(w.text, |(_, v)| v);
    let bad = || {
        (
            w,
            format!(
                "{text:?} is not a duration up to {}s (2ms, 500us, 1s)",
                max / 1_000_000_000
            ),
        )
    };
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = text.split_at(split);
    let scale: u64 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(bad()),
    };
    n.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&ns| ns <= max)
        .ok_or_else(bad)
}

fn opcode<'a>(w: Word<'a>, value: &str) -> Result<Opcode, ItemError<'a>> {
    if let Some((_, o)) = Opcode::NAMES.iter().find(|(n, _)| *n == value) {
        return Ok(*o);
    }
    if value.starts_with("0x") {
        return Ok(Opcode::Code(number(w, value, 0, 0xff)? as u8));
    }
    Err((
        w,
        format!(
            "opcode={value}: send, write, read, read_resp, ack, atomic, cnp or a BTH opcode \
             (0x11)"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_example_of_the_docs_parses() {
        let p = parse(
            "rng=7; drop p=0.05 dir=rx qp=17 opcode=write psn=100-200 count=10 after=1s \
             for=5s; dup every=50; reorder depth=3 p=0.02; corrupt icrc p=0.01; delay 2ms \
             p=0.1; ce p=0.2; fail create_qp nth=3 errno=ENOSPC",
        )
        .unwrap();
        assert_eq!(p.rng, 7);
        assert_eq!(p.packets.len(), 6);
        let d = p.packets[0];
        assert_eq!(d.qp, Some(17));
        assert_eq!(d.psn, Some((100, 200)));
        assert_eq!(d.opcode, Some(Opcode::Write));
        assert_eq!((d.after_ns, d.for_ns), (1_000_000_000, Some(5_000_000_000)));
        assert_eq!(
            d.trigger,
            Trigger {
                when: When::P(50_000),
                count: Some(10)
            }
        );
        assert_eq!(p.packets[4].fault, PacketFault::Delay { ns: 2_000_000 });
        assert_eq!(
            p.verbs,
            [VerbRule {
                verb: Verb::CreateQp,
                trigger: Trigger {
                    when: When::Nth(3),
                    count: None
                },
                errno: Errno::ENOSPC,
            }]
        );
        assert_eq!(parse(&p.to_string()).unwrap(), p);
    }

    #[test]
    fn errors_name_the_item_and_the_column() {
        for (spec, item, column, says) in [
            ("drop p=2", 1, 6, "probability"),
            ("dup; drop qp=1 opcode=jump", 2, 16, "opcode=jump"),
            ("rng=7;\n  reorder depth=65", 2, 11, "1..=64"),
            ("fail create_qp errno=EFOO", 1, 16, "unknown errno"),
            ("fail destroy_qp", 1, 6, "unknown verb"),
            ("drop errno=ENOSPC", 1, 6, "not a key of drop"),
            ("delay", 1, 1, "needs a duration"),
            ("delay 2 minutes", 1, 7, "not a duration"),
            ("drop p=0.1 every=3", 1, 12, "one of"),
            ("drop psn=9-3", 1, 6, "ends before"),
            ("drop p=0.1 p=0.2", 1, 12, "twice"),
            ("exhaust", 1, 1, "needs errno"),
            ("fail post errno=ENOSPC", 1, 11, "not a key of fail"),
            ("flood", 1, 1, "unknown fault"),
            ("drop dir=up", 1, 6, "rx, tx or both"),
            ("drop p=0.0000001", 1, 6, "6 decimals"),
            ("é drop", 1, 1, "unknown fault"),
            ("dup; é", 2, 6, "unknown fault"),
            ("nak", 1, 1, "needs a code"),
            ("dup; nak rem_acces", 2, 10, "unknown NAK"),
            ("rnr dir=tx", 1, 5, "answers what it receives"),
            ("nak inv_req dir=both", 1, 13, "answers what it receives"),
            ("link", 1, 1, "needs \"down\""),
            ("link up after=1s", 1, 6, "only \"down\""),
            ("link down p=0.5", 1, 11, "not a key of link"),
            ("link down for=0s", 1, 11, "never active"),
            ("qp_fatal for=1s", 1, 10, "not a key of qp_fatal"),
            ("device_fatal qp=3", 1, 14, "not a key of device_fatal"),
            ("link down after=2days", 1, 11, "not a duration"),
        ] {
            let e = parse(spec).unwrap_err();
            assert_eq!((e.item, e.column), (item, column), "{spec}: {e}");
            assert!(e.message.contains(says), "{spec}: {e}");
        }
        let many = vec!["dup"; limits::ITEMS + 1].join(";");
        assert!(parse(&many).unwrap_err().message.contains("more than 32"));
        assert!(parse(&"x".repeat(limits::SPEC_LEN + 1)).is_err());
    }

    #[test]
    fn responder_and_event_rules_parse() {
        let p = parse(
            "rnr qp=17 opcode=send count=3; nak rem_access nth=2; nak psn_seq p=0.5; \
             link down after=1s for=2s; qp_fatal qp=17 after=10ms; device_fatal after=1s",
        )
        .unwrap();
        assert_eq!(p.packets[0].fault, PacketFault::Rnr);
        assert_eq!(p.packets[0].trigger.count, Some(3));
        assert_eq!(p.packets[1].fault, PacketFault::Nak(Nak::RemAccess));
        assert_eq!(p.packets[2].fault, PacketFault::Nak(Nak::PsnSeq));
        assert_eq!(
            p.events,
            [
                EventRule {
                    event: Event::LinkDown,
                    qp: None,
                    after_ns: 1_000_000_000,
                    for_ns: Some(2_000_000_000),
                },
                EventRule {
                    event: Event::QpFatal,
                    qp: Some(17),
                    after_ns: 10_000_000,
                    for_ns: None,
                },
                EventRule {
                    event: Event::DeviceFatal,
                    qp: None,
                    after_ns: 1_000_000_000,
                    for_ns: None,
                },
            ]
        );
        assert_eq!(parse(&p.to_string()).unwrap(), p);
        assert!(!p.is_empty());
    }

    #[test]
    fn empty_items_and_blanks_are_nothing() {
        assert_eq!(parse("").unwrap(), Plan::default());
        assert_eq!(parse(" ;\n;\t; ").unwrap(), Plan::default());
        assert!(parse(" ; ").unwrap().is_empty());
    }

    fn trigger() -> impl Strategy<Value = Trigger> {
        let when = prop_oneof![
            Just(When::Always),
            (1u32..=1_000_000).prop_map(When::P),
            (1..=limits::EVERY).prop_map(When::Every),
            (1..=limits::EVERY).prop_map(When::Nth),
        ];
        (when, proptest::option::of(1..=limits::COUNT))
            .prop_map(|(when, count)| Trigger { when, count })
    }

    fn packet_rule() -> impl Strategy<Value = PacketRule> {
        let fault = prop_oneof![
            Just(PacketFault::Drop),
            Just(PacketFault::Dup),
            (1..=limits::DEPTH).prop_map(|depth| PacketFault::Reorder { depth }),
            Just(PacketFault::CorruptIcrc),
            (1..=limits::DELAY_NS).prop_map(|ns| PacketFault::Delay { ns }),
            Just(PacketFault::Ce),
            Just(PacketFault::Rnr),
            (0..4usize).prop_map(|i| PacketFault::Nak(Nak::NAMES[i].1)),
        ];
        let dir = prop_oneof![Just(Dir::Rx), Just(Dir::Tx), Just(Dir::Both)];
        let op = prop_oneof![
            (0..7usize).prop_map(|i| Opcode::NAMES[i].1),
            any::<u8>().prop_map(Opcode::Code),
        ];
        let psn = (0..=limits::PSN, 0..=limits::PSN).prop_map(|(a, b)| (a.min(b), a.max(b)));
        (
            fault,
            dir,
            proptest::option::of(0..=limits::PSN),
            proptest::option::of(op),
            proptest::option::of(psn),
            0..=limits::WINDOW_NS,
            proptest::option::of(1..=limits::WINDOW_NS),
            trigger(),
        )
            .prop_map(|(fault, dir, qp, opcode, psn, after_ns, for_ns, trigger)| {
                let answers = matches!(fault, PacketFault::Rnr | PacketFault::Nak(_));
                PacketRule {
                    fault,
                    dir: if answers { Dir::Rx } else { dir },
                    qp,
                    opcode,
                    psn,
                    after_ns,
                    for_ns,
                    trigger,
                }
            })
    }

    fn verb_rule() -> impl Strategy<Value = VerbRule> {
        let verb = (0..4usize).prop_map(|i| Verb::NAMES[i].1);
        (verb, trigger(), 1i32..=133).prop_filter_map("a named errno", |(verb, trigger, n)| {
            rdmakit_vocab::errno::name(n)?;
            let errno = if verb == Verb::Post {
                Errno::ENOMEM
            } else {
                Errno(n)
            };
            Some(VerbRule {
                verb,
                trigger,
                errno,
            })
        })
    }

    fn event_rule() -> impl Strategy<Value = EventRule> {
        (
            (0..3usize).prop_map(|i| Event::NAMES[i].1),
            proptest::option::of(0..=limits::PSN),
            0..=limits::WINDOW_NS,
            proptest::option::of(1..=limits::WINDOW_NS),
        )
            .prop_map(|(event, qp, after_ns, for_ns)| EventRule {
                event,
                qp: qp.filter(|_| event == Event::QpFatal),
                after_ns,
                for_ns: for_ns.filter(|_| event == Event::LinkDown),
            })
    }

    fn plan() -> impl Strategy<Value = Plan> {
        (
            any::<u64>(),
            proptest::option::of(
                (1i32..=133)
                    .prop_filter_map("named", |n| rdmakit_vocab::errno::name(n).map(|_| Errno(n))),
            ),
            proptest::collection::vec(packet_rule(), 0..12),
            proptest::collection::vec(verb_rule(), 0..8),
            proptest::collection::vec(event_rule(), 0..6),
        )
            .prop_map(|(rng, exhaust, packets, verbs, events)| Plan {
                rng,
                exhaust,
                packets,
                verbs,
                events,
            })
    }

    proptest! {
        #[test]
        fn a_plan_written_out_parses_back_equal(p in plan()) {
            let text = p.to_string();
            prop_assert_eq!(parse(&text).unwrap(), p, "{}", text);
        }

        #[test]
        fn any_text_gives_a_plan_or_an_error(s in "\\PC{0,200}") {
            if let Err(e) = parse(&s) {
                prop_assert!(e.column >= 1 && e.column <= s.chars().count() + 1);
            }
        }

        #[test]
        fn grammar_shaped_text_never_panics(
            words in proptest::collection::vec(
                prop_oneof![
                    Just("drop".to_string()), Just("delay".to_string()),
                    Just("fail".to_string()), Just(";".to_string()),
                    Just("p=".to_string()), Just("psn=1-".to_string()),
                    Just("every=0".to_string()), Just("=".to_string()),
                    "[a-z_]{1,8}=[0-9a-zx.\\-]{0,12}",
                    "[a-z_]{1,10}",
                ],
                0..24,
            )
        ) {
            let _ = parse(&words.join(" "));
        }
    }
}
