//! Feeds the input to the NETLINK_RDMA decoders: as a buffer of netlink
//! messages (each data message's attributes through every view), as a bare
//! attribute stream, and as a monitor datagram. Replies come from the kernel
//! and from replayed bundles, which may be truncated or edited: every path
//! must return an error, never panic.
//! Run with `RUSTC_BOOTSTRAP=1 cargo fuzz run netlink` from crates/host.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmakit_host::netlink::msg::{self, Body, RawAttr};
use rdmakit_host::netlink::{monitor, views};

fn values(attrs: &[RawAttr], depth: u32) {
    for a in attrs {
        let _ = (a.u8(), a.u32(), a.u64(), a.string());
        if depth < 4 {
            if let Ok(inner) = a.nested() {
                values(&inner, depth + 1);
            }
        }
    }
}

fn views_of(payload: &[u8]) {
    let Ok(attrs) = msg::parse_attrs(payload) else {
        return;
    };
    values(&attrs, 0);
    let _ = views::dev(&attrs);
    let _ = views::port(&attrs);
    if let Ok(s) = views::res_summary(&attrs) {
        for k in views::ResKind::ALL {
            let _ = s.count(k.name());
        }
    }
    for k in views::ResKind::ALL {
        if let Ok(rows) = views::resources(k, &attrs) {
            for r in rows {
                let _ = (r.id(), r.pid());
            }
        }
    }
    let _ = views::port_stat(&attrs);
    let _ = views::qp_counters(&attrs);
    let _ = views::sys(&attrs);
    let _ = views::chardev(&attrs);
    let _ = views::event(&attrs);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(msgs) = msg::parse_messages(data) {
        for m in msgs {
            if let Body::Data(p) = m.body {
                views_of(&p);
            }
        }
    }
    views_of(data);
    let _ = monitor::decode(data);
});
