//! The server: its options, accepting a client and serving each size.

use super::*;

/// The server's options.
#[derive(Clone, Debug)]
pub struct ServerOpts {
    /// TCP port to listen on.
    pub port: u16,
    /// Device (`None`: the soft NIC).
    pub device: Option<String>,
    /// The provider `device` is opened through.
    pub provider: ProviderChoice,
    /// The soft NIC's configuration when `device` is `None` (its `addr`
    /// `None`: the host device's address); the CLI's is
    /// `DeviceConfig::from_env()`.
    pub soft: DeviceConfig,
    /// GID index (reported).
    pub gid_index: u32,
    /// The test this server accepts.
    pub test: Test,
    /// `-e`: sleep on CQ events instead of busy polling (this side only;
    /// the client decides for itself).
    pub use_event: bool,
}

/// Waits for one client on `opts.port`, serves its run, returns this side's
/// report (header and control timings; the client measures).
///
/// # Errors
/// [`PerfError`]; `Exchange` when the client asks for another test or goes away.
pub fn run_server(opts: &ServerOpts, hooks: &mut Progress<'_>) -> Result<Report, PerfError> {
    check_event(opts.test, opts.use_event)?;
    // A device named with -d opens now, not after a client came.
    if let Some(dev) = &opts.device {
        drop(rdmakit_verbs::open_device(opts.provider, dev)?);
    }
    let listener =
        TcpListener::bind(("0.0.0.0", opts.port)).map_err(|e| PerfError::listen(opts.port, &e))?;
    if let Some(f) = hooks.on_listening.as_mut() {
        f(opts.port);
    }
    let (stream, _) = listener.accept().map_err(|e| PerfError::peer_io(&e))?;
    drop(listener);
    serve_on(stream, opts, &|_| Ok(()), hooks)
}

/// Serves one client over `stream`, already accepted (the caller chose
/// how); `opts.port` is not used. `admit` sees the client's parameters
/// first: its error refuses the run (sent to the client as `ERR why`) —
/// a supervisor bounds what a run may cost with it.
///
/// # Errors
/// As [`run_server`]; [`PerfError::Params`] when `admit` refuses;
/// [`PerfError::Cancelled`] when `hooks.cancel` is set.
pub fn serve_on(
    stream: TcpStream,
    opts: &ServerOpts,
    admit: &dyn Fn(&Params) -> Result<(), String>,
    hooks: &mut Progress<'_>,
) -> Result<Report, PerfError> {
    check_event(opts.test, opts.use_event)?;
    let stop = hooks.stop();
    let mut c = Lines::new(stream)?;
    let p = Params::from_line(&c.recv()?)?;
    if p.test != opts.test {
        let why = format!(
            "the server runs {}, the client asked for {}: run the same test on both hosts",
            opts.test, p.test
        );
        let _ = c.send(&format!("ERR {why}"));
        return Err(PerfError::Exchange(why));
    }
    if let Err(e) = check_params(&p) {
        let _ = c.send(&format!("ERR {e}"));
        return Err(e);
    }
    if let Err(why) = admit(&p) {
        let _ = c.send(&format!("ERR {why}"));
        return Err(PerfError::Params(why));
    }
    let remote = QpInfo::from_line(&c.expect("QP")?)?;
    let (mut l, init) = match bring_up(
        opts.provider,
        &opts.device,
        &opts.soft,
        &p,
        buf_len(&p),
        opts.use_event,
    ) {
        Ok(x) => x,
        Err(e) => {
            let _ = c.send(&format!("ERR {e}"));
            return Err(e);
        }
    };
    connect(&mut l, init, &remote)?;
    c.send(&format!("QP {}", l.info.to_line()))?;
    let h = header("server", &l, &remote, &p, opts.gid_index);
    if let Some(f) = hooks.on_header.as_mut() {
        f(&h);
    }
    let mut validated = p.validate.then_some(true);
    let mut posted_recvs = 0u32;
    loop {
        stop.check()?;
        let line = c.recv()?;
        if line == "END" {
            let _ = c.send("BYE");
            break;
        }
        let size: usize = line
            .strip_prefix("SIZE ")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| unexpected("SIZE", &line))?;
        if size == 0 || size > p.max_size() {
            return Err(PerfError::Exchange(format!(
                "size {size} outside the run's sizes"
            )));
        }
        let verdict = serve_size(&l, &remote, &p, size, &mut c, &mut posted_recvs, &stop)?;
        if let Err(why) = &verdict {
            validated = Some(false);
            c.send(&format!("BAD {why}"))?;
        } else {
            c.send("OK")?;
        }
    }
    let qp_counters = l.qp_counters();
    let device_counters = l.device_counters();
    Ok(Report {
        header: h,
        results: Vec::new(),
        control: l.teardown(),
        validated,
        qp_counters,
        device_counters,
    })
}

fn parse_done(line: &str) -> Result<u64, PerfError> {
    line.strip_prefix("DONE ")
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| unexpected("DONE", line))
}

/// The server's part of one size. Outer error: the run failed; inner error:
/// the data did not validate.
fn serve_size(
    l: &Local,
    remote: &QpInfo,
    p: &Params,
    size: usize,
    c: &mut Lines,
    posted_recvs: &mut u32,
    stop: &Stop,
) -> Result<Result<(), String>, PerfError> {
    let buf = l.buf();
    let qp = l.qp();
    let max = p.max_size();
    let pat = pattern(size);
    let grh = if p.ud { GRH } else { 0 };
    match p.test {
        Test::ReadBw | Test::ReadLat => buf.write(0, &pat)?,
        Test::AtomicBw => buf.write(0, &0u64.to_le_bytes())?,
        Test::WriteBw => buf.write(0, &vec![0u8; size])?,
        Test::WriteLat => buf.write(size - 1, &[0])?,
        Test::SendBw | Test::SendLat => {
            let want = p.rx_depth.saturating_sub(*posted_recvs);
            let wrs = (0..want)
                .map(|i| {
                    Ok(RecvWr {
                        wr_id: u64::from(i),
                        sg_list: vec![buf.sge(0..max + grh)?],
                    })
                })
                .collect::<Result<Vec<_>, PerfError>>()?;
            if !wrs.is_empty() {
                qp.post_recv(&wrs)?;
            }
            *posted_recvs += want;
        }
    }
    c.send("GO")?;
    let mut bad: Option<String> = None;
    match p.test {
        Test::WriteBw | Test::ReadBw | Test::ReadLat | Test::AtomicBw => {
            let n = parse_done(&c.recv()?)?;
            if p.validate && p.test == Test::WriteBw && buf.to_vec(0..size)? != pat {
                bad = Some(format!("the {size} bytes written differ from the pattern"));
            }
            if p.validate && p.test == Test::AtomicBw {
                let v = buf.read_u64(0)?;
                if v != n {
                    bad = Some(format!("{n} fetch-and-adds of 1 left {v}, not {n}"));
                }
            }
        }
        Test::SendBw | Test::SendLat | Test::WriteLat => {
            let mut wcs = Vec::with_capacity(64);
            let (mut got, mut done_at): (u64, Option<u64>) = (0, None);
            let mut last = Instant::now();
            let mut spins = 0u32;
            let mut done_when = Instant::now();
            let mut seen = 0u8;
            let mut b = [0u8; 1];
            let echo_sge = |len: usize| buf.sge(grh..grh + len);
            let echo_op = SendOp::Write {
                remote_addr: remote.vaddr + max as u64,
                rkey: remote.rkey,
            };
            let inline = p.inline as usize >= size;
            let every = p.signal_every();
            // Built once, like perftest's: the loop only sets the ids (no
            // allocation on the echo's critical path).
            let mut echo = vec![0u8; size];
            let mut rwr = RecvWr {
                wr_id: 0,
                sg_list: vec![buf.sge(0..max + grh)?],
            };
            let mut pong = SendRequest {
                wr: l.wr(
                    0,
                    SendOp::Send,
                    if inline {
                        inline_sge(&echo[..size])
                    } else {
                        echo_sge(size)?
                    },
                ),
                inline,
            };
            // Event mode: each turn may sleep on the channel, so the
            // cancel, DONE and stall checks come every turn, and the sleep
            // is short: the client's DONE arrives on TCP, not as a
            // completion.
            let (check_every, wait) = match l.event() {
                true => (1, Duration::from_millis(10)),
                false => (1024, Duration::ZERO),
            };
            loop {
                if l.reap(&mut wcs, wait)? > 0 {
                    last = Instant::now();
                    for w in &wcs {
                        if !w.is_recv() {
                            continue;
                        }
                        got += 1;
                        *posted_recvs -= 1;
                        if p.validate && bad.is_none() {
                            if w.byte_len as usize != size + grh {
                                bad = Some(format!(
                                    "received {} bytes, expected {size}",
                                    (w.byte_len as usize).saturating_sub(grh)
                                ));
                            } else if p.test == Test::SendBw && buf.to_vec(grh..grh + size)? != pat
                            {
                                bad = Some(format!("message {got}: bytes differ from the pattern"));
                            }
                        }
                        rwr.wr_id = got;
                        if p.test == Test::SendLat {
                            if inline {
                                // The pong's inline bytes: the ping's.
                                buf.read(grh, &mut echo)?;
                            }
                            // Repost first: the next ping may follow our pong at once.
                            qp.post_recv(std::slice::from_ref(&rwr))?;
                            *posted_recvs += 1;
                            pong.wr.wr_id = got;
                            pong.wr.signaled = got % every == 0;
                            // SAFETY: an inline SGE covers `echo`, alive (and
                            // not reallocated) for the whole loop.
                            unsafe { qp.post_send(std::slice::from_ref(&pong))? };
                        } else {
                            qp.post_recv(std::slice::from_ref(&rwr))?;
                            *posted_recvs += 1;
                        }
                    }
                }
                if p.test == Test::WriteLat {
                    buf.read(size - 1, &mut b)?;
                    if b[0] != 0 && b[0] != seen {
                        seen = b[0];
                        got += 1;
                        last = Instant::now();
                        if p.validate
                            && bad.is_none()
                            && buf.to_vec(0..size - 1)? != pat[..size - 1]
                        {
                            bad = Some(format!("write {got}: bytes differ from the pattern"));
                        }
                        let data = buf.to_vec(0..size)?;
                        let sge = if inline {
                            inline_sge(&data[..size])
                        } else {
                            echo_sge(size)?
                        };
                        // SAFETY: an inline SGE covers `data`, alive for the call.
                        unsafe {
                            qp.post_send(&[SendRequest {
                                wr: l.signaled_every(got, echo_op, sge, every),
                                inline,
                            }])?
                        };
                    }
                }
                if let Some(n) = done_at {
                    // UD is unreliable: what has not arrived shortly after
                    // the client's DONE was dropped (no receive posted).
                    if got >= n || (p.ud && done_when.elapsed() > Duration::from_millis(200)) {
                        break;
                    }
                }
                spins += 1;
                if spins % check_every == 0 {
                    stop.check()?;
                }
                if spins % check_every == 0 && done_at.is_none() {
                    if let Some(line) = c.try_recv()? {
                        done_at = Some(parse_done(&line)?);
                        done_when = Instant::now();
                    }
                }
                if spins % check_every == 0 && last.elapsed() > STALL {
                    return Err(PerfError::Stalled {
                        waited: STALL,
                        waiting_for: "message from the client",
                        progress: format!("{got} received"),
                    });
                }
            }
            // Reap our echoes' completions before the next size.
            let _ = poll(&l.cq, &mut wcs);
        }
    }
    Ok(match bad {
        Some(why) => Err(why),
        None => Ok(()),
    })
}
