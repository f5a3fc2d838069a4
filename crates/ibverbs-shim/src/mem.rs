//! Protection domains, memory regions, address handles, completion channels.

use libc::{c_int, c_void, size_t};
use rdmakit_ibverbs_abi::{consts::*, *};
use rdmakit_soft::proto::Access;
use rdmakit_soft::{Av, Gid};

use crate::device::{Ctx, Obj};
use crate::guard::{self, nonnull, Res};

#[repr(C)]
pub(crate) struct Pd {
    pub pd: ibv_pd,
}

#[repr(C)]
pub(crate) struct Mr {
    pub mr: ibv_mr,
}

#[repr(C)]
pub(crate) struct Ah {
    pub ah: ibv_ah,
}

#[repr(C)]
pub(crate) struct Channel {
    pub ch: ibv_comp_channel,
    pub handle: u32,
}

/// The context and soft PD handle of a live PD.
pub(crate) fn pd_of<'a>(pd: *mut ibv_pd) -> Res<(&'a Ctx, u32)> {
    nonnull(pd)?;
    // SAFETY: non-NULL; the context pointer is validated by from_ptr.
    let ctx = Ctx::from_ptr(unsafe { (*pd).context })?;
    if !ctx.is_live(pd) {
        return Err(libc::EINVAL);
    }
    // SAFETY: live object of this context.
    Ok((ctx, unsafe { (*pd).handle }))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    guard::ptr("ibv_alloc_pd", || {
        let ctx = Ctx::from_ptr(context)?;
        let h = ctx.dev.alloc_pd().map_err(guard::soft)?;
        let b = Box::new(Pd {
            pd: ibv_pd {
                context: ctx.ibv(),
                handle: h,
            },
        });
        Ok(ctx.insert(Obj::Pd(b)) as *mut ibv_pd)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    guard::int("ibv_dealloc_pd", || {
        let (ctx, h) = pd_of(pd)?;
        ctx.retire(pd, || ctx.dev.dealloc_pd(h).map_err(guard::soft))
    })
}

/// The soft NIC's rights from C access flags, and whether the MR is
/// zero-based. On-demand paging is refused;
/// optional bits (relaxed ordering, huge pages) may be ignored, as the
/// verbs spec allows.
fn access_of(access: u32) -> Res<(Access, bool)> {
    if access & IBV_ACCESS_ON_DEMAND != 0 {
        return Err(guard::unsupported(
            "on-demand paging (IBV_ACCESS_ON_DEMAND)",
        ));
    }
    Ok((
        Access(access & (0xf | IBV_ACCESS_MW_BIND)),
        access & IBV_ACCESS_ZERO_BASED != 0,
    ))
}

unsafe fn reg(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: size_t,
    iova: u64,
    access: c_int,
) -> Res<*mut ibv_mr> {
    let (ctx, h) = pd_of(pd)?;
    let (rights, zero_based) = access_of(access as u32)?;
    let iova = if zero_based { 0 } else { iova };
    // SAFETY: as with real libibverbs, the application keeps the range
    // valid until ibv_dereg_mr; the soft NIC validates every access.
    let key = unsafe { ctx.dev.reg_mr_iova(h, addr.cast(), length, iova, rights) }
        .map_err(guard::soft)?;
    let b = Box::new(Mr {
        mr: ibv_mr {
            context: ctx.ibv(),
            pd,
            addr,
            length,
            handle: key,
            lkey: key,
            rkey: key,
        },
    });
    Ok(ctx.insert(Obj::Mr(b)) as *mut ibv_mr)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: size_t,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: forwarded contract (see reg).
    guard::ptr("ibv_reg_mr", || unsafe {
        reg(pd, addr, length, addr as u64, access)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: size_t,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    // SAFETY: forwarded contract (see reg).
    guard::ptr("ibv_reg_mr", || unsafe {
        reg(pd, addr, length, iova, access as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: size_t,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: forwarded contract (see reg).
    guard::ptr("ibv_reg_mr", || unsafe {
        reg(pd, addr, length, iova, access)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    guard::int("ibv_dereg_mr", || {
        nonnull(mr)?;
        // SAFETY: non-NULL; the context is validated before use.
        let ctx = Ctx::from_ptr(unsafe { (*mr).context })?;
        ctx.retire(mr, || {
            // SAFETY: live (retire checked it under the table lock).
            let key = unsafe { (*mr).lkey };
            ctx.dev.dereg_mr(key).map_err(guard::soft)
        })
    })
}

/// `ibv_rereg_mr@IBVERBS_1.1`: PD, access and translation changes, keys
/// kept. Returns 0 or one of `enum ibv_rereg_mr_err_code` with errno set,
/// as rdma-core does.
#[no_mangle]
pub unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: size_t,
    access: c_int,
) -> c_int {
    const ERR_INPUT: c_int = -1;
    const ERR_CMD: c_int = -4;
    let input = guard::int("ibv_rereg_mr", || {
        nonnull(mr)?;
        // SAFETY: non-NULL; the context is validated before use.
        let ctx = Ctx::from_ptr(unsafe { (*mr).context })?;
        let flags = flags as u32;
        if !ctx.is_live(mr) || flags & !0x7 != 0 {
            return Err(libc::EINVAL);
        }
        if flags & IBV_REREG_MR_CHANGE_TRANSLATION != 0 && (length == 0 || addr.is_null()) {
            return Err(libc::EINVAL);
        }
        if access != 0 && flags & IBV_REREG_MR_CHANGE_ACCESS == 0 {
            return Err(libc::EINVAL);
        }
        Ok(())
    });
    if input != 0 {
        guard::set_errno(input);
        return ERR_INPUT;
    }
    let r = guard::int("ibv_rereg_mr", || {
        // SAFETY: checked live above.
        let (ctx, key) = unsafe { (Ctx::from_ptr((*mr).context)?, (*mr).lkey) };
        let flags = flags as u32;
        let new_pd = if flags & IBV_REREG_MR_CHANGE_PD != 0 {
            let (pctx, h) = pd_of(pd)?;
            if !std::ptr::eq(pctx, ctx) {
                return Err(libc::EINVAL);
            }
            Some(h)
        } else {
            None
        };
        let rights = if flags & IBV_REREG_MR_CHANGE_ACCESS != 0 {
            Some(access_of(access as u32)?.0)
        } else {
            None
        };
        let translation = (flags & IBV_REREG_MR_CHANGE_TRANSLATION != 0).then_some((
            addr.cast::<u8>(),
            length,
            addr as u64,
        ));
        // SAFETY: the program keeps the new range valid until ibv_dereg_mr,
        // as for ibv_reg_mr.
        unsafe { ctx.dev.rereg_mr(key, new_pd, rights, translation) }.map_err(guard::soft)?;
        // SAFETY: a live MR of this context (checked above).
        unsafe {
            if new_pd.is_some() {
                (*mr).pd = pd;
            }
            if translation.is_some() {
                (*mr).addr = addr;
                (*mr).length = length;
            }
        }
        Ok(())
    });
    if r != 0 {
        guard::set_errno(r);
        return ERR_CMD;
    }
    0
}

/// `ibv_reg_dmabuf_mr@IBVERBS_1.12`: dma-buf memory belongs to a GPU or
/// another device driver; a userspace NIC cannot map it.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    _pd: *mut ibv_pd,
    _offset: u64,
    _length: size_t,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> *mut ibv_mr {
    guard::set_errno(guard::unsupported(
        "dma-buf memory regions (ibv_reg_dmabuf_mr)",
    ));
    std::ptr::null_mut()
}

// ---- address handles -------------------------------------------------------

fn create_ah_av(pd: *mut ibv_pd, av: Av) -> Res<*mut ibv_ah> {
    let (ctx, h) = pd_of(pd)?;
    let ah = ctx.dev.create_ah(h, av).map_err(guard::soft)?;
    let b = Box::new(Ah {
        ah: ibv_ah {
            context: ctx.ibv(),
            pd,
            handle: ah,
        },
    });
    Ok(ctx.insert(Obj::Ah(b)) as *mut ibv_ah)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    guard::ptr("ibv_create_ah", || {
        nonnull(attr)?;
        // SAFETY: non-NULL attr from the caller.
        let a = unsafe { &*attr };
        // RoCE needs a GRH: rxe refuses an AH without one the same way
        // (the loopback device maps its own LID, `lid_destination`; no
        // GRH, traffic class 0).
        if a.is_global == 0 {
            let (ctx, _) = pd_of(pd)?;
            let g = ctx
                .dev
                .lid_destination("ibv_create_ah", a.dlid)
                .map_err(guard::soft)?;
            return create_ah_av(pd, Av::from(g));
        }
        create_ah_av(
            pd,
            Av {
                dgid: Gid(a.grh.dgid.raw),
                traffic_class: a.grh.traffic_class,
            },
        )
    })
}

/// The sender's GID from a UD receive: 20 zero bytes then the IPv4 header
/// (RoCEv2 over IPv4, as rxe and the soft NIC write it), or a real GRH.
fn sender_gid(grh: &[u8; 40]) -> Gid {
    if grh[..20].iter().all(|&b| b == 0) && grh[20] >> 4 == 4 {
        let src = std::net::Ipv4Addr::new(grh[32], grh[33], grh[34], grh[35]);
        Gid::from_ipv4(src)
    } else {
        let mut g = [0u8; 16];
        g.copy_from_slice(&grh[8..24]);
        Gid(g)
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    context: *mut ibv_context,
    port_num: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    guard::int("ibv_init_ah_from_wc", || {
        Ctx::from_ptr(context)?;
        nonnull(wc)?;
        nonnull(grh)?;
        nonnull(ah_attr)?;
        // SAFETY: all three checked non-NULL; a GRH area is 40 bytes.
        let (wc, raw) = unsafe { (&*wc, &*grh.cast::<[u8; 40]>()) };
        if wc.wc_flags & IBV_WC_GRH == 0 {
            return Err(libc::EINVAL);
        }
        let g = sender_gid(raw);
        // SAFETY: checked non-NULL.
        unsafe {
            *ah_attr = ibv_ah_attr {
                grh: ibv_global_route {
                    dgid: ibv_gid { raw: g.0 },
                    flow_label: 0,
                    sgid_index: 0,
                    hop_limit: 0xff,
                    traffic_class: 0,
                },
                dlid: wc.slid,
                sl: wc.sl,
                src_path_bits: 0,
                static_rate: 0,
                is_global: 1,
                port_num,
            }
        };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> *mut ibv_ah {
    guard::ptr("ibv_create_ah_from_wc", || {
        nonnull(pd)?;
        let mut attr = ibv_ah_attr::default();
        // SAFETY: pd non-NULL; the rest is checked by ibv_init_ah_from_wc.
        match unsafe { ibv_init_ah_from_wc((*pd).context, port_num, wc, grh, &mut attr) } {
            0 => create_ah_av(
                pd,
                Av {
                    dgid: Gid(attr.grh.dgid.raw),
                    traffic_class: attr.grh.traffic_class,
                },
            ),
            e => Err(e),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    guard::int("ibv_destroy_ah", || {
        nonnull(ah)?;
        // SAFETY: non-NULL; the context is validated before use.
        let ctx = Ctx::from_ptr(unsafe { (*ah).context })?;
        ctx.retire(ah, || {
            // SAFETY: live.
            let h = unsafe { (*ah).handle };
            ctx.dev.destroy_ah(h).map_err(guard::soft)
        })
    })
}

/// The soft AH handle of a live AH, for UD sends.
pub(crate) fn ah_handle(ctx: &Ctx, ah: *mut ibv_ah) -> Res<u32> {
    if ah.is_null() || !ctx.is_live(ah) {
        return Err(libc::EINVAL);
    }
    // SAFETY: live object of this context.
    Ok(unsafe { (*ah).handle })
}

// ---- completion channels ---------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    guard::ptr("ibv_create_comp_channel", || {
        let ctx = Ctx::from_ptr(context)?;
        let h = ctx.dev.create_comp_channel().map_err(guard::soft)?;
        let fd = ctx.dev.comp_channel_fd(h).ok_or(libc::EINVAL)?;
        // A channel fd is blocking until the program sets O_NONBLOCK
        // (ibv_get_cq_event then returns EAGAIN instead of waiting).
        // SAFETY: fcntl on the channel's own descriptor.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
        let b = Box::new(Channel {
            ch: ibv_comp_channel {
                context: ctx.ibv(),
                fd,
                refcnt: 0,
            },
            handle: h,
        });
        Ok(ctx.insert(Obj::Channel(b)) as *mut ibv_comp_channel)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    guard::minus1("ibv_destroy_comp_channel", || {
        nonnull(channel)?;
        // SAFETY: non-NULL; the context is validated before use.
        let ctx = Ctx::from_ptr(unsafe { (*channel).context })?;
        ctx.retire(channel, || {
            // SAFETY: live; Channel starts with the ibv_comp_channel.
            let ch = unsafe { &*channel.cast::<Channel>() };
            if ch.ch.refcnt > 0 {
                return Err(libc::EBUSY);
            }
            ctx.dev.destroy_comp_channel(ch.handle).map_err(guard::soft)
        })
    })
}
