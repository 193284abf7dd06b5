//! The buffer's unit tests: refusals, playback, settings out of range.

use super::*;
use crate::interpolation::{DelayPolicy, MAX_STRETCH};

const MS: Duration = Duration::from_millis(1);

/// 100 Hz ticks so one tick is 10 ms; classic policy; samples are the tick as f64.
fn buffer(policy: DelayPolicy) -> InterpolationBuffer<f64> {
    InterpolationBuffer::new(InterpolationConfig {
        tick_hz: 100,
        policy,
        capacity: 8,
        max_tick_jump: Duration::from_secs(1),
        ..InterpolationConfig::default()
    })
}

/// Pushes ticks `from..to` step `step`, each arriving `latency` after its tick time.
fn feed(b: &mut InterpolationBuffer<f64>, ticks: impl Iterator<Item = u32>, latency: Duration) {
    for k in ticks {
        let at = MS * (k * 10) + latency;
        b.push(Tick(k), at, f64::from(k)).unwrap();
    }
}

#[test]
fn a_stall_never_makes_the_delay_negative() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    feed(&mut b, 0..40, MS * 30);
    // Three seconds with no snapshot: every frame past the newest is extrapolated.
    for t in 0..300u32 {
        b.sample_at(MS * (400 + t * 10));
    }
    let s = b.stats();
    assert!(s.extrapolated + s.frames - s.interpolated > 200, "{s:?}");
    assert!(s.mean_delay_secs().is_some_and(|d| d >= 0.0), "{s:?}");
}

#[test]
fn empty_buffer_answers_nothing() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    assert!(b.is_empty());
    assert_eq!(b.sample_at(MS * 100), None);
    assert_eq!(b.stats().frames, 0);
    assert_eq!(b.render_tick(), None);
}

#[test]
fn classic_plays_three_intervals_behind_the_median_arrival() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    feed(&mut b, (0..40).step_by(2), MS * 30);
    assert_eq!(b.send_interval(), Some(2));
    // Arrivals sit 30 ms after their ticks; three intervals are 60 ms more.
    let s = b.sample_at(MS * 390).unwrap();
    assert!((s.render_tick - 30.0).abs() < 1e-6, "{s:?}");
    assert!(
        matches!(s.kind, SampleKind::Interpolated { from: Tick(30), to: Tick(32), t } if t < 1e-6),
        "{s:?}"
    );
    assert!((s.value - 30.0).abs() < 1e-9);
    assert_eq!(b.target_delay(), Some(MS * 60));
    let s = b.sample_at(MS * 395).unwrap();
    assert!((s.value - 30.5).abs() < 1e-6, "{s:?}");
    // Played-out snapshots are dropped, the pair's start is kept.
    assert_eq!(b.len(), 5);
    assert_eq!(b.delay_behind_newest(), Some(MS * 75));
}

#[test]
fn counts_since_an_earlier_copy_cover_just_the_time_between() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    feed(&mut b, (0..40).step_by(2), MS * 30);
    for t in 0..20u32 {
        b.sample_at(MS * (300 + t * 10));
    }
    let before = b.stats().clone();
    // A second stretch of playback, then stale and duplicate refusals.
    feed(&mut b, (40..80).step_by(2), MS * 30);
    for t in 20..60u32 {
        b.sample_at(MS * (300 + t * 10));
    }
    let _ = b.push(Tick(10), MS * 900, 0.0);
    let _ = b.push(Tick(78), MS * 900, 0.0);
    let after = b.stats();
    let between = after.since(&before);
    assert_eq!(between.frames, 40);
    assert_eq!(between.accepted, 20);
    assert_eq!(between.stale + between.duplicates, 2);
    assert_eq!(between.filling, 0, "the fill happened before");
    assert_eq!(between.frames + before.frames, after.frames);
    let delay = between.mean_delay_secs().expect("frames");
    assert!(
        (delay * 40.0 + before.delay_sum_secs - after.delay_sum_secs).abs() < 1e-9,
        "the delay sum splits exactly"
    );
    assert_eq!(before.since(after).frames, 0, "backwards gives zeros");
    assert_eq!(after.since(after), InterpolationStats::default());
}

#[test]
fn refusals_are_typed_and_counted() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    feed(&mut b, (0..20).step_by(2), MS * 30);
    assert_eq!(
        b.push(Tick(10), MS * 500, 0.0),
        Err(PushError::Duplicate { tick: Tick(10) })
    );
    b.sample_at(MS * 220).unwrap(); // plays around tick 13
    assert_eq!(
        b.push(Tick(11), MS * 500, 0.0),
        Err(PushError::Stale {
            tick: Tick(11),
            floor: Tick(12)
        })
    );
    assert_eq!(
        b.push(Tick(500), MS * 500, 0.0),
        Err(PushError::TooFarAhead {
            tick: Tick(500),
            newest: Tick(18)
        })
    );
    let st = b.stats();
    assert_eq!((st.duplicates, st.stale, st.too_far_ahead), (1, 1, 1));
    assert_eq!(st.accepted, 10);
    // A hole between the floor and the newest is still welcome.
    assert_eq!(b.push(Tick(13), MS * 500, 13.0), Ok(()));
}

#[test]
fn capacity_is_bounded() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    feed(&mut b, 0..8, MS * 30);
    assert_eq!(b.len(), 8);
    // Full: a newer tick evicts the oldest, an older one is refused.
    feed(&mut b, 8..9, MS * 30);
    assert_eq!(b.len(), 8);
    assert_eq!(b.stats().evicted, 1);
    assert_eq!(
        b.push(Tick(0), MS * 100, 0.0),
        Err(PushError::Full {
            tick: Tick(0),
            oldest: Tick(1)
        })
    );
    assert_eq!(b.stats().full, 1);
}

#[test]
fn a_new_timeline_takes_over_after_a_few_consistent_snapshots() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    feed(&mut b, 100..110, MS * 30);
    // The server restarted at tick 0: two refusals, then a reset onto the new numbers.
    assert!(matches!(
        b.push(Tick(0), MS * 2000, 0.0),
        Err(PushError::Stale { .. })
    ));
    assert!(b.push(Tick(1), MS * 2010, 1.0).is_err());
    assert_eq!(b.push(Tick(2), MS * 2020, 2.0), Ok(()));
    assert_eq!(b.stats().resyncs, 1);
    assert_eq!(b.len(), 1);
    assert_eq!(b.newest_tick(), Some(Tick(2)));
    // Unrelated far-away ticks do not add up to a resync.
    assert!(b.push(Tick(5000), MS * 2030, 0.0).is_err());
    assert!(b.push(Tick(9000), MS * 2030, 0.0).is_err());
    assert!(b.push(Tick(13000), MS * 2030, 0.0).is_err());
    assert_eq!(b.stats().resyncs, 1);
}

#[test]
fn extrapolation_is_bounded_then_held() {
    let mut b = buffer(DelayPolicy::Fixed { intervals: 0.0 });
    feed(&mut b, 0..10, MS * 30);
    // Playback at the median arrival: the newest (tick 9) is shown at 120 ms.
    let s = b.sample_at(MS * 120).unwrap();
    assert!(!s.kind.is_underrun(), "{s:?}");
    let s = b.sample_at(MS * 170).unwrap();
    assert_eq!(
        s.kind,
        SampleKind::Extrapolated {
            from: Tick(9),
            by: MS * 50
        }
    );
    let s = b.sample_at(MS * 300).unwrap();
    assert_eq!(
        s.kind,
        SampleKind::Held {
            from: Tick(9),
            by: MS * 180
        }
    );
    let st = b.stats();
    assert_eq!((st.interpolated, st.extrapolated, st.held), (1, 1, 1));
    assert_eq!(st.underruns(), 2);
    assert!((st.underrun_ratio() - 2.0 / 3.0).abs() < 1e-12);
}

#[test]
fn playback_before_the_oldest_snapshot_shows_it_early() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    b.push(Tick(50), MS * 530, 50.0).unwrap();
    let s = b.sample_at(MS * 530).unwrap();
    assert_eq!(s.kind, SampleKind::Early { to: Tick(50) });
    assert_eq!(s.value, 50.0);
    assert_eq!(b.stats().early, 1);
    // Filling up to the delay at the start is not running dry.
    assert_eq!(b.stats().filling, 1);
    assert_eq!(b.stats().underruns(), 0);
    assert_eq!(b.stats().underrun_ratio(), 0.0);
    // Once playback has passed a snapshot, running out is an underrun again.
    for k in 51..60 {
        b.push(Tick(k), MS * (30 + 10 * k), f64::from(k)).unwrap();
    }
    let s = b.sample_at(MS * 600).unwrap();
    assert!(matches!(s.kind, SampleKind::Interpolated { .. }), "{s:?}");
    let s = b.sample_at(MS * 700).unwrap();
    assert!(s.kind.is_underrun(), "{s:?}");
    let st = b.stats();
    assert_eq!((st.filling, st.underruns(), st.frames), (1, 1, 3));
    assert!((st.underrun_ratio() - 0.5).abs() < 1e-12);
    // A reset starts a new fill.
    b.reset();
    b.push(Tick(900), MS * 1300, 900.0).unwrap();
    let s = b.sample_at(MS * 1300).unwrap();
    assert!(matches!(s.kind, SampleKind::Early { .. }), "{s:?}");
    assert_eq!((b.stats().filling, b.stats().underruns()), (2, 1));
}

/// While the clock is still being learned the target lag moves a lot. Moving forward
/// it jumps; moving back it waits, rather than stepping before snapshots it has
/// already played out (showing them "early", an underrun with data in hand).
#[test]
fn warming_up_never_steps_playback_back() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    let mut now = Duration::ZERO;
    let mut last = f64::NEG_INFINITY;
    // Eight ticks: the test buffer holds eight, so none is evicted unplayed.
    for k in 0..8u32 {
        // The first arrivals are fast, the rest 80 ms slower: the median offset, and
        // with it the target, moves back by 80 ms while warming up.
        let latency = if k < 4 { MS * 10 } else { MS * 90 };
        b.push(Tick(k), MS * (k * 10) + latency, f64::from(k))
            .unwrap();
        for _ in 0..5 {
            now += MS * 2;
            let shown = b.sample_at(now).unwrap();
            assert!(shown.render_tick >= last, "{k}: {shown:?} after {last}");
            last = shown.render_tick;
        }
    }
    assert_eq!(b.stats().early, b.stats().filling, "{:?}", b.stats());
}

#[test]
fn time_running_backwards_does_not_move_playback() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    feed(&mut b, 0..40, MS * 30);
    let a = b.sample_at(MS * 400).unwrap().render_tick;
    let c = b.sample_at(MS * 350).unwrap().render_tick;
    assert_eq!(a, c);
}

#[test]
fn delay_changes_are_followed_by_bounded_time_scaling() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    feed(&mut b, 0..40, MS * 30);
    let mut last = b.sample_at(MS * 400).unwrap().render_tick;
    // The link gets 40 ms slower: the median moves, playback slows by at most 10%.
    let mut now = MS * 400;
    let mut slowed = 0;
    b.reset_stats();
    let mut warp = 0.0;
    for k in 40..100u32 {
        b.push(Tick(k), MS * (k * 10) + MS * 70, f64::from(k))
            .unwrap();
        now += MS * 10;
        let pos = b.sample_at(now).unwrap().render_tick;
        let step = pos - last;
        assert!((0.9 - 1e-9..=1.1 + 1e-9).contains(&step), "{k}: {step}");
        slowed += usize::from(step < 0.95);
        // A tick is 10 ms, as is a frame: the frame's share of speed error.
        warp += (step - 1.0).abs() * 0.01;
        last = pos;
    }
    assert!(slowed > 10, "playback followed the longer delay: {slowed}");
    // The speed error counts exactly what the slewing cost, over the time played.
    let stats = b.stats();
    assert!((stats.played_secs - 0.6).abs() < 1e-9, "{stats:?}");
    assert!((stats.warp_secs - warp).abs() < 1e-9, "{stats:?} vs {warp}");
    // Never more slow motion than the 40 ms the longer delay asked for.
    assert!(stats.warp_secs < 0.04, "{stats:?}");
}

#[test]
fn hostile_settings_do_not_panic() {
    let mut b = InterpolationBuffer::<f64>::new(InterpolationConfig {
        tick_hz: 1000,
        policy: DelayPolicy::Fixed {
            intervals: f32::NAN,
        },
        capacity: usize::MAX,
        history: usize::MAX,
        max_extrapolation: Duration::MAX,
        max_tick_jump: Duration::MAX,
        max_time_scale: f32::NAN,
        slew_time: Duration::ZERO,
        snap_threshold: Duration::MAX,
        ..InterpolationConfig::default()
    });
    for k in 0..50u32 {
        b.push(Tick(k), MS * k, f64::from(k)).unwrap();
        b.sample_at(MS * (k * 3)).unwrap();
    }
    b.push(Tick(u32::MAX), Duration::MAX, 0.0).unwrap();
    assert!(b.sample_at(Duration::MAX).is_some());
    let mut a = InterpolationBuffer::<f64>::new(InterpolationConfig {
        policy: DelayPolicy::Adaptive {
            target_underrun: f32::NAN,
            max_delay: Duration::MAX,
        },
        max_time_scale: f32::INFINITY,
        ..InterpolationConfig::default()
    });
    for k in 0..50u32 {
        a.push(Tick(k * 2), MS * (k * 40), f64::from(k)).unwrap();
        assert!(a.sample_at(MS * (k * 40)).unwrap().render_tick.is_finite());
    }
}

/// Snapshots every 6 ticks at 60 Hz, 50 ms ± 30 ms on the way, one in 20 lost (and
/// a few lost twice in a row), sampled every frame: what a strict target stands on.
fn lossy_ten_per_second(config: InterpolationConfig) -> InterpolationBuffer<f64> {
    let mut b = InterpolationBuffer::<f64>::new(InterpolationConfig {
        tick_hz: 60,
        ..config
    });
    for k in 0..600u32 {
        let lost = k % 20 == 7 || (k % 100 == 8);
        let tick = k * 6;
        if !lost {
            let jitter = f64::from(crate::interpolation::adaptive::streams::hash(k) % 61) - 30.0;
            let at = f64::from(tick) / 60.0 + 0.05 + jitter / 1000.0;
            let _ = b.push(Tick(tick), Duration::from_secs_f64(at), f64::from(tick));
        }
        for f in 0..6u32 {
            b.sample_at(Duration::from_secs_f64(f64::from(tick + f) / 60.0));
        }
    }
    b
}

#[test]
fn limitless_settings_give_finite_bounded_delays() {
    // An infinite fixed delay is an hour, not minus infinity on screen.
    let mut b = InterpolationBuffer::<f64>::new(InterpolationConfig {
        tick_hz: 60,
        policy: DelayPolicy::Fixed {
            intervals: f32::INFINITY,
        },
        ..InterpolationConfig::default()
    });
    for k in 0..10u32 {
        b.push(Tick(k), MS * (k * 17 + 50), 0.0).unwrap();
    }
    for t in [300, 320, 340] {
        assert!(b.sample_at(MS * t).unwrap().render_tick.is_finite());
    }
    let delay = b.target_delay().unwrap().as_secs_f64();
    let most = crate::interpolation::MAX_LAG_SECS + 1.0;
    assert!(delay > 3000.0 && delay <= most, "{delay}");
    assert!(b.stats().warp_secs.is_finite());
    // An unbounded adaptive delay is searched as precisely as a bounded one: the
    // answer was once off by 194 days.
    let adaptive = |max_delay| {
        let config = InterpolationConfig {
            policy: DelayPolicy::Adaptive {
                target_underrun: 0.0005,
                max_delay,
            },
            ..InterpolationConfig::default()
        };
        let b = lossy_ten_per_second(config);
        b.target_delay().unwrap().as_secs_f64()
    };
    let (unbounded, hour) = (adaptive(Duration::MAX), adaptive(Duration::from_secs(3600)));
    assert!(
        unbounded < 1.0 && (unbounded - hour).abs() < 1e-4,
        "{unbounded} vs {hour}"
    );
    // A target that is not a number is the default 1%, not "always the longest".
    let nan = adaptive_target(f32::NAN);
    assert!((nan - adaptive_target(0.01)).abs() < 1e-9, "{nan}");
}

fn adaptive_target(target_underrun: f32) -> f64 {
    let config = InterpolationConfig {
        policy: DelayPolicy::adaptive_with_target(target_underrun),
        ..InterpolationConfig::default()
    };
    lossy_ten_per_second(config)
        .target_delay()
        .unwrap()
        .as_secs_f64()
}

#[test]
fn settings_beyond_their_bounds_act_as_the_bounds() {
    // An infinite stretch is the largest stretch, not none; a history too short to
    // warm up on is the shortest that does.
    let run = |max_stretch: f32, history: usize| {
        let b = lossy_ten_per_second(InterpolationConfig {
            max_stretch,
            history,
            ..InterpolationConfig::default()
        });
        (b.target_delay(), b.stats().stretched, b.render_tick())
    };
    assert_eq!(run(f32::INFINITY, 512), run(MAX_STRETCH, 512));
    assert_ne!(run(f32::INFINITY, 512), run(0.0, 512));
    assert_eq!(run(0.0, 4), run(0.0, WARMUP_PAIRS));
}

#[test]
fn copies_of_one_stray_snapshot_do_not_reset_the_buffer() {
    let mut b = buffer(DelayPolicy::CLASSIC);
    feed(&mut b, 0..50, MS * 30);
    for _ in 0..5 {
        assert!(matches!(
            b.push(Tick(1_000_000), MS * 600, 0.0),
            Err(PushError::TooFarAhead { .. })
        ));
    }
    assert_eq!((b.stats().resyncs, b.len()), (0, 8));
    // A late one of a real new timeline neither counts nor starts the count over.
    assert!(b.push(Tick(5000), MS * 610, 0.0).is_err());
    assert!(b.push(Tick(5002), MS * 620, 0.0).is_err());
    assert!(b.push(Tick(5001), MS * 630, 0.0).is_err());
    assert_eq!(b.push(Tick(5003), MS * 640, 0.0), Ok(()));
    assert_eq!(b.stats().resyncs, 1);
}

#[test]
fn a_jump_limit_below_the_send_interval_still_follows_the_server() {
    let mut b = InterpolationBuffer::<f64>::new(InterpolationConfig {
        tick_hz: 60,
        max_tick_jump: Duration::ZERO,
        ..InterpolationConfig::default()
    });
    for k in (0..600u32).step_by(6) {
        b.push(Tick(k), MS * (k * 1000 / 60 + 50), f64::from(k))
            .unwrap();
    }
    assert_eq!(b.newest_tick(), Some(Tick(594)));
}

#[test]
fn durations_never_panic() {
    assert_eq!(secs_to_duration(-1.0), Duration::ZERO);
    assert_eq!(secs_to_duration(f64::NAN), Duration::ZERO);
    assert_eq!(secs_to_duration(f64::INFINITY), Duration::MAX);
    assert_eq!(secs_to_duration(0.25), MS * 250);
}

/// A 60 Hz stream, 40 ms (+0-8 ms of jitter) on the way, with a one-second hole at
/// tick 600: `hold` delivers the hole's snapshots all at once when it ends (a link that
/// queued them), otherwise they are lost. Returns the target delay just before the hole
/// and two seconds after it, and the outages counted.
fn through_a_hole(hold: bool, outage: Duration) -> (Duration, Duration, u64) {
    let mut b = InterpolationBuffer::<f64>::new(InterpolationConfig {
        tick_hz: 60,
        outage,
        ..InterpolationConfig::default()
    });
    let tick_at = |k: u32| Duration::from_secs_f64(f64::from(k) / 60.0);
    let jitter = |k: u32| MS * ((k * 7919) % 9);
    let (hole_from, hole_to) = (600u32, 660u32);
    let mut before = None;
    for k in 0..900u32 {
        let mut at = tick_at(k) + MS * 40 + jitter(k);
        if (hole_from..hole_to).contains(&k) {
            if !hold {
                continue;
            }
            at = tick_at(hole_to) + MS * 40 + MS * (k - hole_from) / 8;
        }
        b.push(Tick(k), at, f64::from(k)).unwrap();
        b.sample_at(at);
        if k + 1 == hole_from {
            before = b.target_delay();
        }
    }
    let after = b.target_delay().expect("learned");
    (before.expect("learned"), after, b.stats().outages)
}

#[test]
fn a_hole_in_the_link_is_skipped_not_learned_as_jitter() {
    for hold in [true, false] {
        let (before, after, outages) = through_a_hole(hold, crate::interpolation::DEFAULT_OUTAGE);
        assert_eq!(outages, 1, "hold {hold}");
        // Back where it was (within 20%), not at the half second a hole would teach.
        assert!(
            after.as_secs_f64() <= before.as_secs_f64() * 1.2 + 0.002,
            "hold {hold}: {before:?} before the hole, {after:?} after"
        );
    }
    // Learning every gap (the old behaviour) does raise it: the test can fail.
    let (before, after, _) = through_a_hole(true, Duration::MAX);
    assert!(
        after > before * 3,
        "learning the hole: {before:?} before, {after:?} after"
    );
}

#[test]
fn an_outage_longer_than_the_tick_jump_keeps_the_timeline_and_its_delay() {
    let mut b = InterpolationBuffer::<f64>::new(InterpolationConfig {
        tick_hz: 60,
        ..InterpolationConfig::default()
    });
    let at =
        |k: u32| Duration::from_secs_f64(f64::from(k) / 60.0) + MS * 40 + MS * ((k * 7919) % 9);
    for k in 0..600u32 {
        b.push(Tick(k), at(k), f64::from(k)).unwrap();
        b.sample_at(at(k));
    }
    let before = b.target_delay().expect("learned");
    // 8 s of silence (past the 4 s tick jump), then the same timeline moves on.
    for k in 1080..1200u32 {
        b.push(Tick(k), at(k), f64::from(k)).unwrap();
        b.sample_at(at(k));
    }
    assert_eq!(b.stats().resyncs, 0, "{:?}", b.stats());
    assert_eq!(b.stats().too_far_ahead, 0);
    let after = b.target_delay().expect("learned");
    assert!(
        after <= before * 12 / 10 + MS * 2,
        "{before:?} before, {after:?} after"
    );
    // A tick jump that time does not explain is still another timeline.
    let mut c = InterpolationBuffer::<f64>::new(InterpolationConfig {
        tick_hz: 60,
        ..InterpolationConfig::default()
    });
    for k in 0..600u32 {
        c.push(Tick(k), at(k), f64::from(k)).unwrap();
    }
    for k in 0..3u32 {
        let _ = c.push(Tick(100_000 + k), at(600 + k), 0.0);
    }
    assert_eq!(c.stats().resyncs, 1, "{:?}", c.stats());
}

/// Playback's lag behind real time (seconds) at `now`, from the tick it shows.
fn shown_lag(b: &mut InterpolationBuffer<f64>, now: Duration) -> Option<f64> {
    let shown = b.sample_at(now)?.render_tick;
    Some(now.as_secs_f64() - shown / 60.0)
}

#[test]
fn a_link_that_queued_through_an_outage_does_not_start_playback_over() {
    // 60 Hz, 40 ms (+0-8 ms) on the way. The link goes silent at tick 600 for 8 s (past
    // the 4 s tick jump); the server sends for the first second of it, and the link
    // delivers those stale snapshots at once when it returns, 10 ms apart, ahead of the
    // fresh ones, which queue behind them.
    let mut b = InterpolationBuffer::<f64>::new(InterpolationConfig {
        tick_hz: 60,
        ..InterpolationConfig::default()
    });
    let sent = |k: u32| Duration::from_secs_f64(f64::from(k) / 60.0);
    let at = |k: u32| sent(k) + MS * 40 + MS * ((k * 7919) % 9);
    let frame = MS * 1000 / 60;
    let mut now = Duration::ZERO;
    let back = sent(1080) + MS * 40;
    let mut lag_before = 0.0;
    let mut lag_after = None;
    let mut feed = |b: &mut InterpolationBuffer<f64>, k: u32, arrival: Duration| {
        while now + frame <= arrival {
            now += frame;
            let lag = shown_lag(b, now);
            if now < sent(600) {
                lag_before = lag.unwrap_or(lag_before);
            }
            if now <= back + MS * 2000 {
                lag_after = lag;
            }
        }
        let _ = b.push(Tick(k), arrival, f64::from(k));
    };
    for k in 0..600u32 {
        feed(&mut b, k, at(k));
    }
    let held = 60u32;
    for k in 600..600 + held {
        feed(&mut b, k, back + MS * 10 * (k - 600));
    }
    let drained = back + MS * 10 * held;
    for k in 1080..1500u32 {
        feed(&mut b, k, at(k).max(drained));
    }
    assert_eq!(b.stats().resyncs, 0, "{:?}", b.stats());
    assert_eq!(b.stats().outages, 1, "{:?}", b.stats());
    // Two seconds after the return, the others are shown as far in the past as before
    // it (within 20%), not at a warm-up's delay being slewed off at 10%.
    let after = lag_after.expect("playing");
    assert!(
        (after - lag_before).abs() <= lag_before * 0.2 + 0.005,
        "{lag_before} s behind before the outage, {after} s two seconds after it"
    );
}
