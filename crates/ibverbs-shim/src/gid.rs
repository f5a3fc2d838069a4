//! The port's GID and P_Key tables: `ibv_query_gid`, `_ibv_query_gid_ex`,
//! `_ibv_query_gid_table`, `ibv_query_gid_type`, `ibv_query_pkey`,
//! `ibv_get_pkey_index`, and the L2 address of a RoCE destination.

use libc::{c_int, size_t, ssize_t};
use rdmakit_ibverbs_abi::{consts::*, *};

use crate::device::Ctx;
use crate::guard::{self, nonnull};

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    guard::minus1("ibv_query_gid", || {
        let ctx = Ctx::from_ptr(context)?;
        nonnull(gid)?;
        let index = u32::try_from(index).map_err(|_| libc::EINVAL)?;
        let g = ctx.dev.gid(port_num, index).map_err(guard::soft)?;
        // SAFETY: the caller passes a writable GID.
        unsafe { (*gid).raw = g.0 };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: size_t,
) -> c_int {
    guard::int("ibv_query_gid_ex", || {
        let ctx = Ctx::from_ptr(context)?;
        nonnull(entry)?;
        if flags != 0 || entry_size < std::mem::size_of::<ibv_gid_entry>() {
            return Err(libc::EINVAL);
        }
        let port = u8::try_from(port_num).map_err(|_| libc::EINVAL)?;
        let e = gid_entry(ctx, port, gid_index)?.ok_or(libc::ENODATA)?;
        // SAFETY: checked non-NULL and large enough.
        unsafe { *entry = e };
        Ok(())
    })
}

/// `ibv_query_gid_type@IBVERBS_PRIVATE_34`: 1 = "RoCE v2" in the sysfs
/// numbering (`enum ibv_gid_type_sysfs`); empty entries report 0.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(
    context: *mut ibv_context,
    port_num: u8,
    index: u32,
    gid_type: *mut u32,
) -> c_int {
    guard::minus1("ibv_query_gid_type", || {
        let ctx = Ctx::from_ptr(context)?;
        nonnull(gid_type)?;
        let g = ctx.dev.gid(port_num, index).map_err(guard::soft)?;
        // SAFETY: checked non-NULL.
        unsafe { *gid_type = u32::from(!g.is_zero()) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    guard::minus1("ibv_query_pkey", || {
        let ctx = Ctx::from_ptr(context)?;
        nonnull(pkey)?;
        let index = u16::try_from(index).map_err(|_| libc::EINVAL)?;
        let p = ctx.dev.pkey(port_num, index).map_err(guard::soft)?;
        // SAFETY: checked non-NULL.
        unsafe { *pkey = p.to_be() };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_pkey_index(
    context: *mut ibv_context,
    port_num: u8,
    pkey: u16,
) -> c_int {
    let Ok(ctx) = Ctx::from_ptr(context) else {
        return -1;
    };
    let want = u16::from_be(pkey);
    (0..16u16)
        .find(|&i| ctx.dev.pkey(port_num, i).is_ok_and(|p| p == want))
        .map_or(-1, c_int::from)
}

/// The entry at `index` of `port`'s GID table; None when it is empty.
fn gid_entry(ctx: &Ctx, port: u8, index: u32) -> Result<Option<ibv_gid_entry>, c_int> {
    let g = ctx.dev.gid(port, index).map_err(guard::soft)?;
    if g.is_zero() {
        return Ok(None);
    }
    Ok(Some(ibv_gid_entry {
        gid: ibv_gid { raw: g.0 },
        gid_index: index,
        port_num: u32::from(port),
        gid_type: IBV_GID_TYPE_ROCE_V2,
        ndev_ifindex: netdev_ifindex(g.to_ipv4()),
    }))
}

/// The interface index of the netdev that holds `ip` (the kernel reports
/// the GID's netdev): `lo` for the loopback device's addresses.
fn netdev_ifindex(ip: Option<std::net::Ipv4Addr>) -> u32 {
    let Some(ip) = ip else { return 0 };
    let mut found = 0;
    let mut ifa: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we walk read-only and free once.
    unsafe {
        if libc::getifaddrs(&mut ifa) != 0 {
            return 0;
        }
        let mut cur = ifa;
        while !cur.is_null() {
            let a = (*cur).ifa_addr;
            if !a.is_null() && c_int::from((*a).sa_family) == libc::AF_INET {
                let sin = &*a.cast::<libc::sockaddr_in>();
                let addr = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if addr == ip || (ip.is_loopback() && addr.is_loopback()) {
                    found = libc::if_nametoindex((*cur).ifa_name);
                    break;
                }
            }
            cur = (*cur).ifa_next;
        }
        libc::freeifaddrs(ifa);
    }
    found
}

/// `_ibv_query_gid_table@IBVERBS_1.11`: every valid GID of every port, or
/// `-EINVAL` when `max_entries` cannot hold them (the kernel's answer).
#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: size_t,
    flags: u32,
    entry_size: size_t,
) -> ssize_t {
    let r = guard::count("ibv_query_gid_table", || {
        let ctx = Ctx::from_ptr(context)?;
        if flags != 0 || entry_size < std::mem::size_of::<ibv_gid_entry>() {
            return Err(libc::EINVAL);
        }
        let len = ctx.dev.port_attr(1).map_err(guard::soft)?.gid_tbl_len;
        let mut valid = Vec::new();
        for i in 0..len {
            if let Some(e) = gid_entry(ctx, 1, i)? {
                valid.push(e);
            }
        }
        if valid.len() > max_entries {
            return Err(libc::EINVAL);
        }
        if !valid.is_empty() {
            nonnull(entries)?;
        }
        for (i, e) in valid.iter().enumerate() {
            // SAFETY: the caller's array holds max_entries entries of
            // entry_size bytes each (>= ours); i < max_entries.
            unsafe {
                entries
                    .cast::<u8>()
                    .add(i * entry_size)
                    .cast::<ibv_gid_entry>()
                    .write_unaligned(*e)
            };
        }
        c_int::try_from(valid.len()).map_err(|_| libc::EINVAL)
    });
    r as ssize_t
}

/// `ibv_resolve_eth_l2_from_gid@IBVERBS_1.1`: the Ethernet address and VLAN
/// of an AH's destination. The soft NIC's MAC for an IPv4 address is the
/// locally administered `02:00:a:b:c:d` its GUID derives from; no VLAN
/// (0xffff).
#[no_mangle]
pub unsafe extern "C" fn ibv_resolve_eth_l2_from_gid(
    context: *mut ibv_context,
    attr: *mut ibv_ah_attr,
    eth_mac: *mut u8,
    vid: *mut u16,
) -> c_int {
    guard::int("ibv_resolve_eth_l2_from_gid", || {
        Ctx::from_ptr(context)?;
        nonnull(attr)?;
        nonnull(eth_mac)?;
        // SAFETY: checked non-NULL.
        let a = unsafe { &*attr };
        if a.is_global == 0 {
            return Err(libc::EINVAL);
        }
        let ip = rdmakit_soft::Gid(a.grh.dgid.raw)
            .to_ipv4()
            .ok_or(libc::EINVAL)?
            .octets();
        let mac = [0x02, 0x00, ip[0], ip[1], ip[2], ip[3]];
        // SAFETY: the caller passes a 6-byte buffer and an optional u16.
        unsafe {
            std::ptr::copy_nonoverlapping(mac.as_ptr(), eth_mac, 6);
            if !vid.is_null() {
                *vid = 0xffff;
            }
        }
        Ok(())
    })
}
