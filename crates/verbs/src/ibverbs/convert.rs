//! What the rdma-core provider adds to `rdmakit_ibverbs_abi::convert` (the
//! C structs ↔ `rdmakit-types` conversions, written once there): the choice
//! of a source GID. Pure functions: no calls into the library.

pub(crate) use rdmakit_ibverbs_abi::convert::{
    gid_type_from_c, link_layer_from_c, qp_type_from_c, qp_type_to_c,
};
use rdmakit_types::{Gid, GidEntry, GidType};

/// Whether `g` is an IPv4-mapped GID (`::ffff:a.b.c.d`, RoCE v2 over IPv4).
pub(crate) fn is_v4_mapped(g: &Gid) -> bool {
    g.to_ipv4().is_some()
}

/// Whether `g` is an IPv6 link-local GID (`fe80::/10`).
pub(crate) fn is_link_local(g: &Gid) -> bool {
    g.0[0] == 0xfe && g.0[1] & 0xc0 == 0x80
}

/// The source GID index for a destination GID: the index holding `dgid`
/// itself (loopback), else the first RoCE v2 GID of the same family
/// (IPv4-mapped, link-local, other IPv6), else the first GID of that family,
/// else 0.
pub(crate) fn sgid_index_for(table: &[(u32, GidEntry)], dgid: &Gid) -> u8 {
    let idx = |i: u32| u8::try_from(i).unwrap_or(0);
    if let Some((i, _)) = table.iter().find(|(_, e)| e.gid == *dgid) {
        return idx(*i);
    }
    let family = |g: &Gid| (is_v4_mapped(g), is_link_local(g));
    let same = |e: &GidEntry| !e.gid.is_zero() && family(&e.gid) == family(dgid);
    table
        .iter()
        .find(|(_, e)| same(e) && e.gid_type == GidType::RoceV2)
        .or_else(|| table.iter().find(|(_, e)| same(e)))
        .map_or(0, |(i, _)| idx(*i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(g: Gid, t: GidType) -> GidEntry {
        GidEntry {
            gid: g,
            gid_type: t,
        }
    }

    #[test]
    fn sgid_follows_the_destination_family_like_rxe_tables() {
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[15] = 1;
        let v4 = Gid::from_ipv4(std::net::Ipv4Addr::new(10, 0, 2, 15));
        let peer = Gid::from_ipv4(std::net::Ipv4Addr::new(10, 0, 2, 2));
        let table = vec![
            (0, entry(Gid(ll), GidType::RoceV2)),
            (1, entry(v4, GidType::RoceV2)),
        ];
        assert_eq!(sgid_index_for(&table, &v4), 1, "loopback: the same GID");
        assert_eq!(sgid_index_for(&table, &peer), 1, "IPv4 peer: IPv4 GID");
        assert_eq!(sgid_index_for(&table, &Gid(ll)), 0);
        // RoCE v2 preferred over v1 of the same family (mlx5 tables list both).
        let t2 = vec![
            (0, entry(v4, GidType::RoceV1)),
            (1, entry(v4, GidType::RoceV2)),
        ];
        assert_eq!(sgid_index_for(&t2, &peer), 1);
        assert_eq!(sgid_index_for(&[], &peer), 0);
    }
}
