//! The client's latency runs (`ib_*_lat`).

use super::*;

pub(super) fn client_lat(
    l: &Local,
    remote: &QpInfo,
    p: &Params,
    size: usize,
    posted_recvs: &mut u32,
    prog: &mut dyn FnMut(f64),
    stop: &Stop,
) -> Result<Vec<f64>, PerfError> {
    let qp = l.qp();
    let buf = l.buf();
    let max = p.max_size();
    let mut data = pattern(size);
    buf.write(0, &data)?;
    let inline = p.inline as usize >= size && p.test != Test::ReadLat;
    let grh = if p.ud { GRH } else { 0 };
    let mut wcs = Vec::with_capacity(64);
    let mut samples = Vec::with_capacity(p.iters.min(1 << 20) as usize);
    let start = Instant::now();
    let end = p.duration.map(|d| start + Duration::from_secs_f64(d));
    let mut tick = Tick(start);
    let recv_wr = |id| -> Result<RecvWr, PerfError> {
        Ok(RecvWr {
            wr_id: id,
            sg_list: vec![buf.sge(max..2 * max + grh)?],
        })
    };
    if p.test == Test::SendLat && *posted_recvs == 0 {
        *posted_recvs = p.rx_depth;
        let wrs = (0..p.rx_depth)
            .map(|i| recv_wr(u64::from(i)))
            .collect::<Result<Vec<_>, _>>()?;
        qp.post_recv(&wrs)?;
    }
    if p.test == Test::WriteLat {
        buf.write(max + size - 1, &[0])?;
    }
    let sq_cap = u64::from(p.tx_depth.max(16));
    let every = p.signal_every();
    // Sends posted, sends known complete (in order: a signaled send's
    // completion completes the unsignaled ones before it), and the count
    // the last signaled send completes.
    let (mut posted, mut sends_done, mut want) = (0u64, 0u64, 0u64);
    let mut early_recv = 0u32;
    let mut i = 0u64;
    // The work requests are built once, like perftest's; the loop sets ids.
    let op = op_of(p.test, remote);
    let sge = if inline {
        inline_sge(&data[..size])
    } else {
        buf.sge(0..size)?
    };
    let mut req = SendRequest {
        wr: l.wr(0, op, sge),
        inline,
    };
    let mut rwr = recv_wr(0)?;
    loop {
        match end {
            Some(e) if Instant::now() >= e => break,
            None if i >= p.iters => break,
            _ => {}
        }
        let marker = (i % 255) as u8 + 1;
        if p.test == Test::WriteLat {
            data[size - 1] = marker;
            if !inline {
                buf.write(size - 1, &[marker])?;
            }
        }
        stop.check()?;
        // Keep the send queue from overflowing: reap send completions.
        while posted - sends_done >= sq_cap {
            stop.check()?;
            l.reap(&mut wcs, EVENT_WAIT)?;
            for w in &wcs {
                if w.is_recv() {
                    early_recv += 1;
                } else {
                    sends_done = sends_done.max(w.wr_id + 1);
                }
            }
        }
        req.wr.wr_id = i;
        req.wr.signaled = (i + 1) % every == 0 || (end.is_none() && i + 1 == p.iters);
        if req.wr.signaled {
            want = i + 1;
        }
        let t0 = Instant::now();
        // SAFETY: an inline SGE covers `data` (never reallocated: only its
        // last byte changes), alive for this call; others name the
        // registered buffer.
        unsafe { qp.post_send(std::slice::from_ref(&req))? };
        posted += 1;
        let mut arrived = false;
        let mut spins = 0u32;
        // Event mode: each turn may sleep up to EVENT_WAIT, so the cancel
        // and stall checks come every turn.
        let (cancel_every, stall_every) = if l.event() { (1, 1) } else { (256, 4096) };
        let mut b = [0u8; 1];
        while !arrived {
            l.reap(&mut wcs, EVENT_WAIT)?;
            for w in &wcs {
                if w.is_recv() {
                    early_recv += 1;
                    if p.validate && w.byte_len as usize != size + grh {
                        return Err(PerfError::Validation(format!(
                            "received {} bytes, expected {size}",
                            w.byte_len
                        )));
                    }
                } else {
                    sends_done = sends_done.max(w.wr_id + 1);
                    if p.test == Test::ReadLat {
                        arrived = true;
                    }
                }
            }
            match p.test {
                Test::SendLat if early_recv > 0 => {
                    early_recv -= 1;
                    arrived = true;
                }
                Test::WriteLat => {
                    buf.read(max + size - 1, &mut b)?;
                    arrived = b[0] == marker;
                }
                _ => {}
            }
            spins += 1;
            if spins % cancel_every == 0 {
                stop.check()?;
            }
            if spins % stall_every == 0 && t0.elapsed() > STALL {
                return Err(PerfError::Stalled {
                    waited: STALL,
                    waiting_for: "answer from the peer",
                    progress: format!("iteration {i}"),
                });
            }
        }
        let rtt = us(t0.elapsed());
        samples.push(match p.test {
            Test::ReadLat => rtt,
            _ => rtt / 2.0,
        });
        if p.validate && p.test != Test::ReadLat {
            let got = buf.to_vec(max + grh..max + grh + size - 1)?;
            if got[..] != pattern(size)[..size - 1] {
                return Err(PerfError::Validation(format!(
                    "iteration {i}: the echoed {size} bytes differ from the pattern"
                )));
            }
        }
        if p.test == Test::SendLat {
            rwr.wr_id = i;
            qp.post_recv(std::slice::from_ref(&rwr))?;
        }
        i += 1;
        if tick.due() {
            prog(match end {
                Some(_) => start.elapsed().as_secs_f64() / p.duration.unwrap_or(1.0),
                None => i as f64 / p.iters as f64,
            });
        }
    }
    // Reap the last signaled send so the next size starts clean. (An
    // unsignaled tail of a duration run needs no wait: each send's echo
    // came back, and the next size's first ACK covers it.)
    let t = Instant::now();
    while sends_done < want && t.elapsed() < STALL {
        stop.check()?;
        l.reap(&mut wcs, EVENT_WAIT)?;
        for w in &wcs {
            if !w.is_recv() {
                sends_done = sends_done.max(w.wr_id + 1);
            }
        }
    }
    Ok(samples)
}
