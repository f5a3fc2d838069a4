//! `rdmakit shim install --json`: what [`rdmakit_soft::install::install`]
//! put where, as one JSON object.

use rdmakit_soft::install::Installed;
use serde_json::json;

/// The installation as `shim install --json` prints it: the library, the
/// librdmacm (null when none was built), the vendor links, the directory for
/// `LD_LIBRARY_PATH`, the soft NIC's RoCEv2 GID index and its device node.
pub fn json(i: &Installed) -> String {
    let node = i.node.as_ref();
    json!({
        "library": i.library,
        "rdmacm": i.rdmacm,
        "links": i.links,
        "ld_library_path": i.dir,
        "rocev2_gid_index": rdmakit_soft::ROCEV2_GID_INDEX,
        "device_node": node.map(|n| &n.path),
        "device_node_status": node.map(|n| &n.status),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installation_without_rdmacm_or_node_says_null() {
        let i = Installed {
            from: "/b/libibverbs.so".into(),
            library: "/d/libibverbs.so.1".into(),
            rdmacm: None,
            links: vec!["/d/libmlx5.so.1".into()],
            dir: "/d".into(),
            node: None,
        };
        let v: serde_json::Value = serde_json::from_str(&json(&i)).unwrap();
        assert_eq!(v["ld_library_path"], "/d");
        assert_eq!(v["rdmacm"], serde_json::Value::Null);
        assert_eq!(v["links"][0], "/d/libmlx5.so.1");
    }
}
