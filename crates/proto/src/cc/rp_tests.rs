//! One test per rule of the reaction point, and properties under CNP
//! floods.

use proptest::prelude::*;

use super::*;

const LINE: Rate = Rate::from_mbps(10_000);

fn t(us: u64) -> Instant {
    Instant::from_nanos(us * 1000)
}

/// mlx5's defaults with the time-driven rules out of the way unless a
/// test turns them on: no increase timer or byte counter to speak of, no
/// α decay between the CNPs of a test.
fn quiet() -> Params {
    Params {
        rp_time_reset: 1_000_000,
        rp_byte_reset: 0,
        rp_dce_tcp_rtt: 131_071,
        rp_rate_reduce_monitor_period: 0,
        ..Params::mlx5()
    }
}

fn kbps(rp: &ReactionPoint) -> u64 {
    rp.rate().expect("throttled").kbps()
}

#[test]
fn unthrottled_pacer_answers_without_reading_the_clock() {
    let p = Params::mlx5();
    let mut rp = ReactionPoint::new();
    let never = || -> Instant { panic!("the clock was read") };
    assert_eq!(rp.ready(&p, LINE, never), Ok(()));
    rp.sent(&p, LINE, 1100, never);
    assert!(!rp.throttled() && rp.rate().is_none());
}

#[test]
fn first_cnp_cuts_the_ceiling_by_initial_alpha() {
    let p = quiet();
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(10));
    // α = 1023/1024, gd 11: Rc = L·(1 − 1023/2048).
    let l = LINE.kbps();
    assert_eq!(kbps(&rp), l - ((l * 1023) >> 11));
    assert_eq!(rp.target(), Some(LINE));
    assert_eq!(rp.alpha(), Some(1023));
}

#[test]
fn rate_to_set_on_first_cnp_replaces_the_first_cut() {
    let p = Params {
        rp_rate_to_set_on_first_cnp: Rate::from_mbps(100),
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    assert_eq!(kbps(&rp), 100_000);
    rp.on_cnp(&p, LINE, t(1));
    assert!(kbps(&rp) < 100_000, "later CNPs cut from there");
}

#[test]
fn min_dec_fac_bounds_one_cut() {
    // gd 10 with α ≈ 1 would cut the rate to almost nothing.
    let p = Params {
        rp_gd: 10,
        rp_min_dec_fac: 70,
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    assert_eq!(kbps(&rp), LINE.kbps() * 70 / 100);
}

#[test]
fn min_rate_is_the_floor_of_every_cut() {
    let p = Params {
        rp_min_rate: Rate::from_mbps(2000),
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    for i in 0..20 {
        rp.on_cnp(&p, LINE, t(i * 10));
    }
    assert_eq!(kbps(&rp), 2_000_000);
}

#[test]
fn rate_reduce_monitor_period_allows_one_cut_per_period() {
    let p = Params {
        rp_rate_reduce_monitor_period: 100,
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    let after_first = kbps(&rp);
    rp.on_cnp(&p, LINE, t(50));
    rp.on_cnp(&p, LINE, t(99));
    assert_eq!(kbps(&rp), after_first, "inside the period");
    rp.on_cnp(&p, LINE, t(100));
    assert!(kbps(&rp) < after_first, "the period is over");
}

#[test]
fn alpha_decays_by_g_per_dce_tcp_rtt_without_cnp() {
    let p = Params {
        rp_dce_tcp_rtt: 10,
        rp_dce_tcp_g: 1019,
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    // α = 1023; [0, 10) is this CNP's period.
    rp.on_cnp(&p, LINE, t(0));
    // The next CNP at 45 µs: the periods ending at 20, 30 and 40 µs had no
    // CNP (three decays), then this CNP's rise.
    rp.on_cnp(&p, LINE, t(45));
    let mut a = 1023u64;
    for _ in 0..3 {
        a = a * 1019 / 1024;
    }
    let a = a * 1019 / 1024 + 5;
    let got = u64::from(rp.alpha().unwrap());
    // Fixed point powers may round one unit lower than step-by-step.
    assert!(got.abs_diff(a) <= 1, "α {got}, step by step {a}");
}

#[test]
fn alpha_rises_once_per_dce_tcp_rtt_however_many_cnps() {
    let p = Params {
        rp_dce_tcp_rtt: 100,
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    rp.on_cnp(&p, LINE, t(150)); // α·G/1024 + 5, once
    let once = rp.alpha().unwrap();
    rp.on_cnp(&p, LINE, t(160));
    rp.on_cnp(&p, LINE, t(170));
    assert_eq!(rp.alpha().unwrap(), once);
    assert_eq!(once, 1023 * 1019 / 1024 + 5);
}

#[test]
fn alpha_decays_to_zero_over_a_long_quiet_time() {
    let p = Params {
        rp_dce_tcp_rtt: 1,
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    rp.on_cnp(&p, LINE, t(100_000)); // 0.1 s: 100000 α periods
                                     // Decayed to 0, then one rise of 1024 − G.
    assert_eq!(rp.alpha(), Some(5));
}

/// A QP cut once, at Rc = L/2 and Rt = L, with events by timer only.
fn cut_once(p: &Params) -> ReactionPoint {
    let p = Params {
        rp_rate_to_set_on_first_cnp: Rate::from_kbps(LINE.kbps() / 2),
        ..p.clone()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    rp
}

#[test]
fn fast_recovery_halves_the_gap_to_the_target() {
    let p = Params {
        rp_time_reset: 100,
        rp_threshold: 5,
        ..quiet()
    };
    let mut rp = cut_once(&p);
    let l = LINE.kbps();
    let _ = rp.ready(&p, LINE, || t(100));
    assert_eq!(kbps(&rp), (l / 2 + l).div_ceil(2));
    assert_eq!(rp.target(), Some(LINE), "fast recovery leaves Rt");
}

#[test]
fn additive_increase_once_one_stage_reaches_threshold() {
    let p = Params {
        rp_time_reset: 100,
        rp_threshold: 1,
        rp_ai_rate: Rate::from_mbps(5),
        rp_clamp_tgt_rate: true,
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    rp.on_cnp(&p, LINE, t(1)); // clamps Rt to Rc, then cuts
    let (rc, rt) = (kbps(&rp), rp.target().unwrap().kbps());
    // Time stage 1 ≥ F = 1, byte stage 0 < F: additive.
    let _ = rp.ready(&p, LINE, || t(101));
    assert_eq!(rp.target().unwrap().kbps(), rt + 5000);
    assert_eq!(kbps(&rp), (rt + 5000 + rc).div_ceil(2));
}

#[test]
fn hyper_increase_once_both_stages_reach_threshold() {
    let p = Params {
        rp_time_reset: 1000,
        rp_byte_reset: 1000,
        rp_threshold: 1,
        rp_ai_rate: Rate::from_mbps(5),
        rp_hai_rate: Rate::from_mbps(50),
        rp_clamp_tgt_rate: true,
        rp_min_rate: Rate::from_kbps(1),
        ..quiet()
    };
    let line = Rate::from_mbps(100_000);
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, line, t(0));
    rp.on_cnp(&p, line, t(1));
    let rt0 = rp.target().unwrap().kbps();
    // One byte event (byte stage 1, time stage 0): additive.
    rp.sent(&p, line, 1000, || t(2));
    assert_eq!(rp.target().unwrap().kbps(), rt0 + 5000);
    // One timer event (time stage 1, byte stage 1): hyper, k = 1.
    let _ = rp.ready(&p, line, || t(1001));
    assert_eq!(rp.target().unwrap().kbps(), rt0 + 5000 + 50_000);
    // Another byte event: stages 1 and 2, k = min − F + 1 = 1.
    rp.sent(&p, line, 1000, || t(1002));
    assert_eq!(rp.target().unwrap().kbps(), rt0 + 5000 + 2 * 50_000);
    // Timer again: stages 2 and 2, k = 2.
    let _ = rp.ready(&p, line, || t(2001));
    assert_eq!(rp.target().unwrap().kbps(), rt0 + 5000 + 4 * 50_000);
}

#[test]
fn byte_counter_raises_the_rate_every_byte_reset_bytes() {
    let p = Params {
        rp_byte_reset: 4000,
        rp_threshold: 5,
        ..quiet()
    };
    let mut rp = cut_once(&p);
    let rc = kbps(&rp);
    rp.sent(&p, LINE, 3999, || t(1));
    assert_eq!(kbps(&rp), rc);
    rp.sent(&p, LINE, 1, || t(2));
    assert!(kbps(&rp) > rc);
}

#[test]
fn clamp_tgt_rate_makes_every_cnp_set_the_target_to_the_rate() {
    let p = Params {
        rp_clamp_tgt_rate: true,
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    let rc = kbps(&rp);
    rp.on_cnp(&p, LINE, t(1));
    assert_eq!(rp.target().unwrap().kbps(), rc);
}

#[test]
fn clamp_tgt_rate_ati_clamps_only_after_a_timer_increase() {
    let p = Params {
        rp_clamp_tgt_rate: false,
        rp_clamp_tgt_rate_ati: true,
        rp_time_reset: 100,
        rp_threshold: 5,
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    rp.on_cnp(&p, LINE, t(1));
    assert_eq!(rp.target(), Some(LINE), "no timer increase: Rt kept");
    let _ = rp.ready(&p, LINE, || t(101));
    let rc = kbps(&rp);
    rp.on_cnp(&p, LINE, t(102));
    assert_eq!(rp.target().unwrap().kbps(), rc, "after a timer increase");
}

#[test]
fn reaching_the_ceiling_unthrottles_and_the_next_cnp_is_a_first() {
    let p = Params {
        rp_time_reset: 10,
        ..quiet()
    };
    let mut rp = cut_once(&p);
    let _ = rp.ready(&p, LINE, || t(10_000));
    assert!(!rp.throttled());
    rp.on_cnp(&p, LINE, t(10_001));
    assert_eq!(rp.alpha(), Some(1023), "initial α again");
}

#[test]
fn max_rate_is_the_ceiling_when_below_the_line_rate() {
    let p = Params {
        rp_max_rate: Rate::from_mbps(40),
        ..quiet()
    };
    assert_eq!(ceiling(&p, LINE), Rate::from_mbps(40));
    assert_eq!(ceiling(&p, Rate::from_mbps(10)), Rate::from_mbps(10));
    assert_eq!(ceiling(&Params::mlx5(), LINE), LINE);
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    assert!(kbps(&rp) <= 40_000 && rp.target() == Some(Rate::from_mbps(40)));
}

#[test]
fn idle_catch_up_is_bounded_per_call() {
    let p = Params {
        rp_time_reset: 1,
        rp_ai_rate: Rate::from_kbps(1),
        rp_hai_rate: Rate::ZERO,
        rp_threshold: 1,
        rp_clamp_tgt_rate: true,
        rp_min_rate: Rate::from_kbps(1),
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    rp.on_cnp(&p, LINE, t(0));
    let rt = rp.target().unwrap().kbps();
    // An hour idle: 3.6e9 timer events, each additive (time stage ≥ F,
    // byte stage 0 < F); one call computes MAX_EVENTS of them.
    let _ = rp.ready(&p, LINE, || t(3_600_000_000));
    assert_eq!(rp.target().unwrap().kbps(), rt + u64::from(MAX_EVENTS));
}

#[test]
fn pacer_holds_the_qp_to_its_rate() {
    let p = Params {
        rp_rate_to_set_on_first_cnp: Rate::from_mbps(10),
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    // Send 1000-byte packets as soon as allowed for one second.
    let mut now = t(0);
    let mut bytes = 0u64;
    while now < t(1_000_000) {
        match rp.ready(&p, LINE, || now) {
            Ok(()) => {
                rp.sent(&p, LINE, 1000, || now);
                bytes += 1000;
            }
            Err(at) => {
                assert!(at > now);
                now = at;
            }
        }
    }
    // 10 Mb/s for 1 s = 1.25 MB, within one packet.
    assert!(bytes.abs_diff(1_250_000) <= 1000, "{bytes}");
}

#[test]
fn pacer_banks_at_most_the_burst_while_idle() {
    let p = Params {
        rp_rate_to_set_on_first_cnp: Rate::from_mbps(80), // 10 bytes per µs
        ..quiet()
    };
    let mut rp = ReactionPoint::new();
    rp.on_cnp(&p, LINE, t(0));
    // Idle 10 ms, then 100-byte packets back to back at one instant.
    let now = t(10_000);
    let mut n = 0;
    while rp.ready(&p, LINE, || now).is_ok() {
        rp.sent(&p, LINE, 100, || now);
        n += 1;
    }
    // 50 µs at 10 B/µs = 500 bytes banked: five packets empty the bucket,
    // a sixth goes while it is exactly empty and leaves it in debt.
    assert_eq!(n, 6);
    // The next may go when the debt (100 bytes = 10 µs) is paid.
    assert_eq!(rp.ready(&p, LINE, || now), Err(t(10_010)));
}

proptest! {
    /// A CNP flood (any spacing, any parameters in range) never takes Rc
    /// below rp_min_rate or above the ceiling, keeps α in [0, 1024], and
    /// never stalls the QP: the pacer always lets a packet go within one
    /// packet's time at rp_min_rate.
    #[test]
    fn cnp_flood_never_goes_below_min_rate_nor_stalls(
        gaps in proptest::collection::vec(0u64..2_000, 1..300),
        min_kbps in 1u64..50_000,
        gd in 0u32..=15,
        g in 0u32..=1023,
        init_alpha in 0u32..=1023,
        dec_fac in 1u32..=100,
        monitor in 0u32..50,
        rtt in 1u32..100,
        line_mbps in 1u64..100_000,
    ) {
        let p = Params {
            rp_min_rate: Rate::from_kbps(min_kbps),
            rp_gd: gd,
            rp_dce_tcp_g: g,
            rp_initial_alpha_value: init_alpha,
            rp_min_dec_fac: dec_fac,
            rp_rate_reduce_monitor_period: monitor,
            rp_dce_tcp_rtt: rtt,
            ..Params::mlx5()
        };
        let line = Rate::from_mbps(line_mbps);
        let ceil = ceiling(&p, line).kbps();
        let mut rp = ReactionPoint::new();
        let mut now = t(0);
        for gap in gaps {
            now = now + Duration::from_nanos(gap * 100);
            rp.on_cnp(&p, line, now);
            // A 1100-byte packet sent when allowed.
            match rp.ready(&p, line, || now) {
                Ok(()) => rp.sent(&p, line, 1100, || now),
                Err(at) => {
                    // Debt is at most one packet: at min rate that is
                    // 1100·8/min_kbps ms.
                    let most = Duration::from_nanos(1100 * 8_000_000 / min_kbps + 1);
                    prop_assert!(at - now <= most, "waits {:?}", at - now);
                }
            }
            if let Some(r) = rp.rate() {
                prop_assert!(r.kbps() >= min_kbps.min(ceil), "{} < {}", r.kbps(), min_kbps);
                prop_assert!(r.kbps() <= ceil);
                prop_assert!(rp.target().unwrap().kbps() <= ceil);
            }
            prop_assert!(rp.alpha().unwrap_or(0) <= 1024);
        }
    }

    /// Under any mix of CNPs, sends and idle time, Rc stays within
    /// [min_rate, ceiling] and α within [0, 1024].
    #[test]
    fn rate_stays_between_min_rate_and_ceiling(
        steps in proptest::collection::vec((0u8..3, 0u64..5_000, 64usize..5000), 1..300),
        ai in 0u64..100_000,
        hai in 0u64..1_000_000,
        f in 0u32..=31,
        max_mbps in 0u64..200,
    ) {
        let p = Params {
            rp_ai_rate: Rate::from_kbps(ai),
            rp_hai_rate: Rate::from_kbps(hai),
            rp_threshold: f,
            rp_time_reset: 20,
            rp_byte_reset: 3000,
            rp_max_rate: Rate::from_mbps(max_mbps),
            rp_clamp_tgt_rate: false,
            ..Params::mlx5()
        };
        let line = Rate::from_mbps(100);
        let ceil = ceiling(&p, line).kbps();
        let mut rp = ReactionPoint::new();
        let mut now = t(0);
        for (what, gap_us, len) in steps {
            now = now + Duration::from_micros(gap_us);
            match what {
                0 => rp.on_cnp(&p, line, now),
                _ => {
                    if rp.ready(&p, line, || now).is_ok() {
                        rp.sent(&p, line, len, || now);
                    }
                }
            }
            if let Some(r) = rp.rate() {
                prop_assert!(r.kbps() >= p.rp_min_rate.kbps() && r.kbps() <= ceil);
                prop_assert!(rp.target().unwrap().kbps() <= ceil);
                prop_assert!(rp.alpha().unwrap() <= 1024);
            }
        }
    }
}
