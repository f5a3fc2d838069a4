//! The soft NIC's device-wide counters ([`rdmakit_soft::registry::counters`])
//! as `rdmakit stat` rows, shaped like a kernel device's port counters
//! (`rdma statistic`): `link soft0/1 port_xmit_packets 10 ... rp_cnp_ignored 0`,
//! with the congestion line a kernel port with mlx5's counters gets. The JSON
//! adds `users`: each user's total, the part folded from closed contexts and
//! each context not folded yet, as that user's own account of its numbers
//! (every user writes only its own directory). Pure.

use rdmakit_soft::registry::counters::{DeviceCounters, Values};
use serde_json::{json, Map, Value};

use crate::kernel::congestion_note;
use crate::row::Row;
use crate::soft::SoftDevice;

/// The soft device's port row, or None when its counters could not be
/// read (its notes say why).
pub fn stat_row(d: &SoftDevice) -> Option<Row> {
    let c = d.counters.as_ref().ok()?;
    let mut row = Row::new(format!("link {}/1", d.name));
    row.json_only("ifname", Value::from(d.name.as_str()));
    row.json_only("port", Value::from(1u32));
    for (n, v) in c.total.named() {
        row.num(n, v);
    }
    let named: Vec<(String, u64)> = c.total.named().map(|(n, v)| (n.to_string(), v)).collect();
    row.note = congestion_note(&named);
    row.json_only("users", users(c));
    Some(row)
}

/// The notes of a soft device's counters: entries ignored, or why none
/// could be read.
pub fn notes(d: &SoftDevice) -> Vec<String> {
    match &d.counters {
        Ok(c) => c
            .ignored
            .iter()
            .map(|i| format!("{}: ignored {}: {}", d.name, i.path.display(), i.why))
            .collect(),
        Err(e) => vec![format!("{}: counters: {e}", d.name)],
    }
}

fn users(c: &DeviceCounters) -> Value {
    Value::Array(
        c.users
            .iter()
            .map(|u| {
                let contexts: Vec<Value> = u
                    .contexts
                    .iter()
                    .map(|x| {
                        json!({
                            "pid": x.ctx.pid,
                            "start_time": x.ctx.start_time,
                            "instance": x.ctx.instance,
                            "owner-state": x.owner.as_str(),
                            "counters": object(&x.values),
                        })
                    })
                    .collect();
                json!({
                    "uid": u.uid,
                    "counters": object(&u.total),
                    "folded": object(&u.folded),
                    "contexts": contexts,
                })
            })
            .collect(),
    )
}

fn object(v: &Values) -> Value {
    Value::Object(
        v.named()
            .map(|(n, x)| (n.to_string(), Value::from(x)))
            .collect::<Map<_, _>>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdmakit_soft::registry::counters::{UserCounters, NAMES};
    use std::path::PathBuf;

    fn dev(total: Values) -> SoftDevice {
        SoftDevice {
            name: "soft0".into(),
            base: PathBuf::from("/dev/shm"),
            objects: Ok(Vec::new()),
            notes: Vec::new(),
            counters: Ok(DeviceCounters {
                name: "soft0".into(),
                total,
                users: vec![UserCounters {
                    uid: 1000,
                    total,
                    folded: total,
                    ..UserCounters::default()
                }],
                ignored: Vec::new(),
            }),
        }
    }

    #[test]
    fn a_soft_port_row_reads_like_a_kernel_ports() {
        let mut v = Values::default();
        v.0[0] = 10;
        v.0[NAMES.iter().position(|n| *n == "np_cnp_sent").unwrap()] = 3;
        let r = stat_row(&dev(v)).unwrap();
        let h = r.human_lines();
        assert!(
            h.starts_with("link soft0/1 port_xmit_packets 10 port_rcv_packets 0 "),
            "{h}"
        );
        assert!(
            h.contains("congestion: marked 0, CNPs sent 3, handled 0, ignored 0"),
            "{h}"
        );
        let j: Value = serde_json::from_str(&crate::json(&[r])).unwrap();
        assert_eq!(j[0]["ifname"], "soft0");
        assert_eq!(j[0]["port"], 1);
        assert_eq!(j[0]["np_cnp_sent"], 3);
        assert_eq!(j[0]["users"][0]["uid"], 1000);
        assert_eq!(j[0]["users"][0]["folded"]["port_xmit_packets"], 10);
    }

    #[test]
    fn unreadable_counters_are_a_note_not_a_row() {
        let mut d = dev(Values::default());
        d.counters = Err("reading the counters under /x: EACCES".into());
        assert!(stat_row(&d).is_none());
        assert_eq!(notes(&d).len(), 1);
    }
}
