//! The client's bandwidth runs (`ib_*_bw`).

use super::*;

pub(super) fn client_bw(
    l: &Local,
    remote: &QpInfo,
    p: &Params,
    size: usize,
    prog: &mut dyn FnMut(f64),
    cancel: &Stop,
) -> Result<(crate::BwResult, u64), PerfError> {
    let op = op_of(p.test, remote);
    let data = pattern(size);
    if p.test != Test::ReadBw {
        l.buf().write(0, &data)?;
    }
    let inline = p.inline as usize >= size && matches!(p.test, Test::WriteBw | Test::SendBw);
    let sge = if inline {
        inline_sge(&data[..size])
    } else {
        l.buf().sge(0..size)?
    };
    let depth = u64::from(p.tx_depth.max(1));
    let every = p.signal_every();
    let qp = l.qp();
    let mut wcs = Vec::with_capacity(64);
    let start = Instant::now();
    let end = p.duration.map(|d| start + Duration::from_secs_f64(d));
    // `done`: sends known complete — completions come in order, so a
    // signaled send's completion completes every send before it.
    let (mut posted, mut done) = (0u64, 0u64);
    let mut tail_signaled = true;
    let (mut last, mut tick) = (start, Tick(start));
    // Peak: best rate over windows of `win` completions.
    let win = depth.max(16);
    let (mut w_start, mut w_done, mut peak) = (start, 0u64, 0f64);
    let mut reqs = Vec::with_capacity(32);
    loop {
        let now = Instant::now();
        let stop = match end {
            Some(e) => now >= e,
            None => posted >= p.iters,
        };
        if !stop && posted - done < depth {
            let mut n = (depth - (posted - done)).min(32);
            if end.is_none() {
                n = n.min(p.iters - posted);
            }
            reqs.clear();
            for i in 0..n {
                let id = posted + i;
                let mut wr = l.wr(id, op, sge);
                wr.signaled = (id + 1) % every == 0 || (end.is_none() && id + 1 == p.iters);
                tail_signaled = wr.signaled;
                reqs.push(SendRequest { wr, inline });
            }
            // SAFETY: inline SGEs cover `data`, alive for this call; the
            // others name the registered buffer, which outlives the QP's use
            // (completions are reaped before it is freed).
            unsafe { qp.post_send(&reqs)? };
            posted += n;
        } else if stop && !tail_signaled {
            // Duration mode ended after an unsignaled send: one more,
            // signaled, so the last sends are known complete.
            let mut wr = l.wr(posted, op, sge);
            wr.signaled = true;
            // SAFETY: as above.
            unsafe { qp.post_send(&[SendRequest { wr, inline }])? };
            posted += 1;
            tail_signaled = true;
        }
        cancel.check()?;
        // Nothing more to post until a completion frees the window (or the
        // run ends): event mode sleeps on the channel, up to the run's end.
        let idle = posted - done >= depth || stop;
        let got = if idle && l.event() {
            let left = end.map_or(EVENT_WAIT, |e| e.saturating_duration_since(now));
            l.reap(&mut wcs, if stop { EVENT_WAIT } else { left })?
        } else {
            poll(&l.cq, &mut wcs)?
        } as u64;
        if got > 0 {
            done = wcs.iter().map(|w| w.wr_id + 1).fold(done, u64::max);
            last = Instant::now();
            if done - w_done >= win {
                let dt = last.duration_since(w_start).as_secs_f64();
                if dt > 0.0 {
                    peak = peak.max((done - w_done) as f64 * size as f64 / dt);
                }
                (w_start, w_done) = (last, done);
            }
        } else if last.elapsed() > STALL {
            return Err(PerfError::Stalled {
                waited: STALL,
                waiting_for: "completion",
                progress: format!("{done} of {posted} completed"),
            });
        } else if idle && !l.event() {
            // Nothing to post and nothing done: let the NIC's threads run
            // (2 shared cores: a spinning poller starves the progress thread).
            std::thread::yield_now();
        }
        if stop && done == posted {
            break;
        }
        if tick.due() {
            prog(match end {
                Some(_) => start.elapsed().as_secs_f64() / p.duration.unwrap_or(1.0),
                None => done as f64 / p.iters as f64,
            });
        }
    }
    let secs = last.duration_since(start).as_secs_f64();
    Ok((bw_row(size, done, secs, peak), done))
}
