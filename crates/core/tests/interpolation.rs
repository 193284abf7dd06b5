//! Snapshot interpolation (Fiedler's "Snapshot Interpolation"): blending, bounded
//! extrapolation, refusals, and playback over the emulated `snapshot-demo` link, classic
//! against adaptive delay.

use lagless_core::Tick;
use lagless_core::interpolation::{
    Curve, DelayPolicy, Interpolate, InterpolationBuffer, InterpolationConfig, MAX_LAG_SECS, Pose,
    PushError, SampleKind,
};
use lagless_netem::{Link, LinkConfig, Loss, profile};
use proptest::prelude::*;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const TICK_HZ: u32 = 60;
const RADIUS: f32 = 5.0;
const OMEGA: f32 = 1.0;

fn yaw(angle: f32) -> [f32; 4] {
    [0.0, (angle / 2.0).sin(), 0.0, (angle / 2.0).cos()]
}

fn dist(a: [f32; 3], b: [f32; 3]) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// Same rotation, up to the sign of the quaternion.
fn same_rotation(a: [f32; 4], b: [f32; 4]) -> bool {
    (a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]).abs() > 1.0 - 1e-5
}

/// The server's truth: a body circling at 5 m/s (radius 5 m, 1 rad/s), facing its motion.
fn circle(secs: f64) -> Pose {
    let a = (secs as f32) * OMEGA;
    Pose::new([RADIUS * a.cos(), 1.0, RADIUS * a.sin()], yaw(a)).with_velocity(
        [-RADIUS * OMEGA * a.sin(), 0.0, RADIUS * OMEGA * a.cos()],
        [0.0, OMEGA, 0.0],
    )
}

fn config(policy: DelayPolicy) -> InterpolationConfig {
    InterpolationConfig {
        tick_hz: TICK_HZ,
        policy,
        ..InterpolationConfig::default()
    }
}

#[test]
fn pose_blends_exactly_at_endpoints_and_midpoint() {
    let a = Pose::new([0.0, 0.0, 0.0], yaw(0.0)).with_velocity([2.0, 0.0, 0.0], [0.0; 3]);
    let b = Pose::new([2.0, 4.0, -2.0], yaw(1.0)).with_velocity([2.0, 0.0, 0.0], [0.0; 3]);
    let blends: [fn(&Pose, &Pose, f32) -> Pose; 2] =
        [Pose::lerp, |a, b, t| Pose::hermite(a, b, t, 1.0)];
    for blend in blends {
        let start = blend(&a, &b, 0.0);
        let end = blend(&a, &b, 1.0);
        assert!(dist(start.position, a.position) < 1e-6);
        assert!(dist(end.position, b.position) < 1e-6);
        assert!(same_rotation(start.rotation, a.rotation));
        assert!(same_rotation(end.rotation, b.rotation));
        assert!(same_rotation(blend(&a, &b, 0.5).rotation, yaw(0.5)));
    }
    assert!(dist(Pose::lerp(&a, &b, 0.5).position, [1.0, 2.0, -1.0]) < 1e-6);
    // Hermite's midpoint: (p0 + p1) / 2 + (v0 - v1) * dt / 8.
    let h = Pose::hermite(&a, &b, 0.5, 1.0);
    assert!(dist(h.position, [1.0, 2.0, -1.0]) < 1e-6, "{h:?}");
}

#[test]
fn slerp_takes_the_shortest_path() {
    let a = Pose::new([0.0; 3], yaw(170f32.to_radians()));
    let b = Pose::new([0.0; 3], yaw(-170f32.to_radians()));
    // 20 degrees through 180, not 340 through 0.
    let mid = Pose::lerp(&a, &b, 0.5);
    assert!(
        same_rotation(mid.rotation, yaw(180f32.to_radians())),
        "{mid:?}"
    );
    let quarter = Pose::lerp(&a, &b, 0.25);
    assert!(same_rotation(quarter.rotation, yaw(175f32.to_radians())));
    let r = quarter.rotation;
    assert!((r.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
}

#[test]
fn hermite_reproduces_constant_velocity_motion() {
    let v = [3.0, -1.0, 0.5];
    let at = |t: f32| Pose::new([1.0 + v[0] * t, 2.0 + v[1] * t, v[2] * t], yaw(0.0));
    let a = at(0.0).with_velocity(v, [0.0; 3]);
    let b = at(0.1).with_velocity(v, [0.0; 3]);
    for i in 0..=10 {
        let s = i as f32 / 10.0;
        let h = Pose::hermite(&a, &b, s, 0.1);
        assert!(dist(h.position, at(0.1 * s).position) < 1e-5, "{s}: {h:?}");
        let hv = h.linear_velocity.unwrap();
        assert!(dist(hv, v) < 1e-3, "{s}: {hv:?}");
    }
}

#[test]
fn hermite_beats_linear_on_a_circle() {
    // Snapshots of the circle every 100 ms (10 per second); compare between them.
    let (mut linear, mut hermite) = (0.0f32, 0.0f32);
    for k in 0..20 {
        let (t0, dt) = (k as f64 * 0.1, 0.1);
        let (a, b) = (circle(t0), circle(t0 + dt));
        for i in 1..10 {
            let s = i as f32 / 10.0;
            let truth = circle(t0 + dt * f64::from(s)).position;
            linear = linear.max(dist(Pose::lerp(&a, &b, s).position, truth));
            hermite = hermite.max(dist(Pose::hermite(&a, &b, s, dt as f32).position, truth));
        }
    }
    // Linear cuts the chord: sagitta r (1 - cos(w dt / 2)) = 6.2 mm.
    assert!((linear - 0.00625).abs() < 2e-4, "linear {linear}");
    assert!(
        hermite < linear / 50.0,
        "hermite {hermite} vs linear {linear}"
    );
}

#[test]
fn extrapolation_is_bounded_flagged_and_counted() {
    let mut b = InterpolationBuffer::new(InterpolationConfig {
        max_extrapolation: MS * 100,
        ..config(DelayPolicy::Fixed { intervals: 1.0 })
    });
    for k in 0..60u32 {
        let at = MS * (k * 1000 / 60) + MS * 40;
        b.push(Tick(k), at, circle(f64::from(k) / 60.0)).unwrap();
    }
    // Snapshots stop at tick 59; render on at 60 fps for another half second.
    let mut kinds = Vec::new();
    let mut held = None;
    for f in 0..90u32 {
        let s = b.sample_at(MS * (1000 + f * 1000 / 60)).unwrap();
        match s.kind {
            SampleKind::Interpolated { .. } => {}
            SampleKind::Extrapolated { from, by } => {
                assert_eq!(from, Tick(59));
                assert!(by <= MS * 100);
                // Velocity extrapolation follows the tangent: close to the circle for now.
                let truth = circle(s.render_tick / 60.0).position;
                assert!(dist(s.value.position, truth) < 0.03, "{s:?}");
            }
            SampleKind::Held { from, by } => {
                assert_eq!(from, Tick(59));
                assert!(by > MS * 100);
                // Frozen where extrapolation stopped.
                let value = *held.get_or_insert(s.value);
                assert_eq!(value, s.value);
                let edge = Pose::extrapolate(&circle(59.0 / 60.0), 0.1);
                assert!(dist(value.position, edge.position) < 1e-4);
            }
            SampleKind::Early { .. } => panic!("playback started inside the buffer"),
        }
        kinds.push(s.kind);
    }
    let count = |f: fn(&SampleKind) -> bool| kinds.iter().filter(|k| f(k)).count() as u64;
    let st = b.stats();
    assert_eq!(
        st.extrapolated,
        count(|k| matches!(k, SampleKind::Extrapolated { .. }))
    );
    assert_eq!(st.held, count(|k| matches!(k, SampleKind::Held { .. })));
    assert!(
        st.interpolated > 0 && st.extrapolated >= 5 && st.held > 30,
        "{st:?}"
    );
    assert_eq!(st.underruns(), st.extrapolated + st.held);
    assert_eq!(st.frames, 90);
}

#[test]
fn stale_duplicate_and_far_future_snapshots_are_dropped_and_counted() {
    let mut b = InterpolationBuffer::new(InterpolationConfig {
        capacity: 16,
        max_tick_jump: Duration::from_secs(2),
        ..config(DelayPolicy::CLASSIC)
    });
    let at = |k: u32| MS * (k * 1000 / 60) + MS * 50;
    for k in 0..100u32 {
        b.push(Tick(k), at(k), circle(0.0)).unwrap();
        assert!(b.len() <= 16);
    }
    assert_eq!(b.stats().evicted, 84);
    b.sample_at(at(99)).unwrap(); // plays about 3 ticks behind the newest
    let floor = b.render_tick().unwrap().floor() as u32;
    assert_eq!(
        b.push(Tick(floor - 1), at(100), circle(0.0)),
        Err(PushError::Stale {
            tick: Tick(floor - 1),
            floor: Tick(floor)
        })
    );
    assert_eq!(
        b.push(Tick(99), at(100), circle(0.0)),
        Err(PushError::Duplicate { tick: Tick(99) })
    );
    // 2 s at 60 Hz is 120 ticks.
    assert_eq!(
        b.push(Tick(99 + 121), at(100), circle(0.0)),
        Err(PushError::TooFarAhead {
            tick: Tick(220),
            newest: Tick(99)
        })
    );
    assert_eq!(b.push(Tick(99 + 120), at(100), circle(0.0)), Ok(()));
    let st = b.stats();
    assert_eq!(
        (st.stale, st.duplicates, st.too_far_ahead, st.accepted),
        (1, 1, 1, 101)
    );
}

#[test]
fn ticks_past_the_u16_wrap_and_near_u32_max() {
    for start in [65_530u32, u32::MAX - 200] {
        let mut b = InterpolationBuffer::<f64>::new(config(DelayPolicy::CLASSIC));
        for i in 0..150u32 {
            let k = start + i;
            b.push(Tick(k), MS * (i * 1000 / 60) + MS * 30, f64::from(i))
                .unwrap();
        }
        let s = b.sample_at(MS * 2000).unwrap();
        assert!(!s.kind.is_underrun(), "{start}: {s:?}");
        // The value tracks the tick: no confusion across the 16-bit wrap or near u32::MAX.
        let expected = s.render_tick - f64::from(start);
        assert!((s.value - expected).abs() < 1e-4, "{start}: {s:?}");
        // Old ticks are stale, not mistaken for ticks of a later lap.
        assert!(matches!(
            b.push(Tick(start), MS * 2700, 0.0),
            Err(PushError::Stale { .. })
        ));
    }
}

/// What one run measured, over the frames after a warm-up.
#[derive(Debug, Clone, Copy)]
struct Figures {
    /// How far the shown state trailed the newest snapshot received.
    delay_ms_mean: f64,
    /// Frames without a pair to interpolate between.
    underrun_pct: f64,
    /// Shown position against the truth at the displayed tick.
    error_cm_p99: f64,
}

/// A server sends the circle every `interval` ticks (60 Hz) through a seeded link with
/// the `profile_name` conditions; arrivals go into a buffer rendered at 60 fps on a
/// virtual clock.
fn simulate(
    policy: DelayPolicy,
    profile_name: &str,
    interval: u64,
    seed: u64,
    seconds: u64,
) -> Figures {
    let conditions = profile(profile_name).expect("a netem profile");
    let mut link = Link::new(conditions, seed).expect("profiles validate");
    let mut buffer = InterpolationBuffer::<Pose>::new(config(policy));
    let tick_at = |k: u64| Duration::from_nanos(k * 1_000_000_000 / u64::from(TICK_HZ));
    // Frames at 60 fps, at a phase unrelated to the ticks.
    let frame_at = |f: u64| Duration::from_nanos(f * 1_000_000_000 / 60 + 3_300_000);
    let (end, warmup) = (Duration::from_secs(seconds), Duration::from_secs(5));
    let (mut next_send, mut next_frame) = (0u64, 0u64);
    let mut newest: Option<u32> = None;
    let (mut delay_sum, mut frames, mut underruns) = (0.0f64, 0u64, 0u64);
    let mut errors = Vec::new();
    loop {
        let (send, frame, due) = (tick_at(next_send), frame_at(next_frame), link.next_due());
        let now = send.min(frame).min(due.unwrap_or(Duration::MAX));
        if now > end {
            break;
        }
        if due == Some(now) {
            let packet = link.poll(now).expect("due now");
            let k = u32::from_le_bytes(packet.try_into().expect("4-byte tick"));
            newest = newest.max(Some(k));
            let _ = buffer.push(Tick(k), now, circle(f64::from(k) / f64::from(TICK_HZ)));
        } else if send == now {
            link.send(now, (next_send as u32).to_le_bytes().to_vec());
            next_send += interval;
        } else {
            next_frame += 1;
            let Some(shown) = buffer.sample_at(now) else {
                continue;
            };
            if now < warmup {
                continue;
            }
            frames += 1;
            underruns += u64::from(shown.kind.is_underrun());
            let behind = f64::from(newest.expect("a snapshot arrived")) - shown.render_tick;
            delay_sum += behind * 1000.0 / f64::from(TICK_HZ);
            let truth = circle(shown.render_tick / f64::from(TICK_HZ));
            errors.push(dist(shown.value.position, truth.position) * 100.0);
        }
    }
    errors.sort_by(f32::total_cmp);
    Figures {
        delay_ms_mean: delay_sum / frames as f64,
        underrun_pct: underruns as f64 * 100.0 / frames as f64,
        error_cm_p99: f64::from(errors[(errors.len() * 99) / 100]),
    }
}

/// The test conditions of Fiedler's "Snapshot Interpolation": 50 ms, ±33 ms uniform
/// jitter, 5% loss.
///
/// The adaptive buffer's target: underrun no more than Fixed(3) with at least 30% less
/// delay. No *constant* delay can do that here: Fixed(3) sits at the knee of the
/// delay/underrun curve (it rides single losses; underruns come only from double losses),
/// so every delay 30% shorter underruns several times more, as the `Fixed(2.25)` row
/// shows. What Adaptive does at its default 1% target is asserted here: it holds the
/// target and takes the delay saving that allows at each send rate. That target's own
/// comparison, which rests on events rarer than this run holds, is in the lab
/// (`lagless_lab::link_replay`'s hour-long replay), where stretching over losses meets it.
#[test]
fn adaptive_against_classic_on_snapshot_demo() {
    const SEED: u64 = 1;
    let mut table = vec![format!(
        "snapshot-demo, seed {SEED}: policy x rate | mean delay ms | underrun % | error p99 cm"
    )];
    for (pps, interval, seconds) in [(60u32, 1u64, 300u64), (10, 6, 1200)] {
        let run = |policy| simulate(policy, "snapshot-demo", interval, SEED, seconds);
        let fixed = run(DelayPolicy::CLASSIC);
        let shorter = run(DelayPolicy::Fixed { intervals: 2.25 });
        let adaptive = run(DelayPolicy::adaptive());
        for (name, f) in [
            ("Fixed(3)", fixed),
            ("Fixed(2.25)", shorter),
            ("Adaptive(1%)", adaptive),
        ] {
            table.push(format!(
                "{name:>12} @ {pps:2} pps | {:7.1} | {:6.3} | {:6.3}",
                f.delay_ms_mean, f.underrun_pct, f.error_cm_p99
            ));
        }
        let cut = 1.0 - adaptive.delay_ms_mean / fixed.delay_ms_mean;
        table.push(format!(
            "             delay cut {:.0}%, brief's target (underrun <= Fixed(3) and cut >= 30%) met: {}",
            cut * 100.0,
            adaptive.underrun_pct <= fixed.underrun_pct && cut >= 0.3
        ));
        let ctx = format!("seed {SEED}, {pps} pps: {fixed:?} {shorter:?} {adaptive:?}");
        // Why the target is out of reach for a constant delay: 30% less delay costs underruns.
        assert!(shorter.delay_ms_mean < 0.75 * fixed.delay_ms_mean, "{ctx}");
        assert!(shorter.underrun_pct > 3.0 * fixed.underrun_pct, "{ctx}");
        // Adaptive holds its target (judged on future arrivals, so with some slack)...
        assert!(adaptive.underrun_pct < 1.25, "{ctx}");
        // ...and turns the rest into delay: much more at 10 pps, where three intervals
        // (300 ms) far exceed the jitter, than at 60 pps, where they (50 ms) do not.
        let want = if pps == 10 { 0.3 } else { 0.05 };
        assert!(cut >= want, "delay cut {cut:.3} < {want}: {ctx}");
        assert!(adaptive.error_cm_p99 < 1.0, "{ctx}");
    }
    println!("{}", table.join("\n"));
}

/// Where the classic rule is wrong for the link, adaptive fixes it either way: on a LAN it
/// meets the 30% target outright; on a mobile link it buffers more and underruns less.
#[test]
fn adaptive_fits_the_link() {
    const SEED: u64 = 7;
    let run = |policy, name| simulate(policy, name, 1, SEED, 60);
    let (fixed, adaptive) = (
        run(DelayPolicy::CLASSIC, "lan"),
        run(DelayPolicy::adaptive(), "lan"),
    );
    let ctx = format!("lan, seed {SEED}: {fixed:?} {adaptive:?}");
    println!("{ctx}");
    assert!(adaptive.underrun_pct <= fixed.underrun_pct, "{ctx}");
    assert!(adaptive.delay_ms_mean < 0.5 * fixed.delay_ms_mean, "{ctx}");

    let (fixed, adaptive) = (
        run(DelayPolicy::CLASSIC, "mobile"),
        run(DelayPolicy::adaptive(), "mobile"),
    );
    let ctx = format!("mobile, seed {SEED}: {fixed:?} {adaptive:?}");
    println!("{ctx}");
    assert!(fixed.underrun_pct > 4.0, "{ctx}");
    assert!(adaptive.underrun_pct < fixed.underrun_pct / 3.0, "{ctx}");
}

/// A lost snapshot slows playback down until a newer one arrives, by exactly the
/// configured stretch, and the adaptive policy spends what that buys on a shorter delay:
/// a double loss that a constant delay must wait out needs only half as much past the
/// moment the loss shows. Fixed buffers never stretch, nor do adaptive ones unless asked.
#[test]
fn a_lost_snapshot_stretches_playback_and_shortens_the_delay() {
    // 10 snapshots/s, always 50 ms on the way; one in 20 lost, and every tenth loss is
    // followed by a second.
    let interval = 6u32;
    let lost = |k: u32| k % 20 == 7 || k % 200 == 8;
    let run = |policy: DelayPolicy, max_stretch: f32| {
        let mut b = InterpolationBuffer::<f32>::new(InterpolationConfig {
            max_stretch,
            ..config(policy)
        });
        let mut shown = Vec::new();
        let mut frame = 0u64;
        for step in 0..(120 * 1000) {
            let now = MS * step;
            // Whatever was sent 50 ms ago arrives now.
            if let Some(since) = step.checked_sub(50) {
                let tick = since * 60 / 1000;
                if since * 60 % 1000 < 60 && tick % interval == 0 && !lost(tick / interval) {
                    b.push(Tick(tick), now, tick as f32).expect("in order");
                }
            }
            if u64::from(step) * 60 >= frame * 1000 {
                frame += 1;
                let before = b.stats().stretched;
                if let Some(s) = b.sample_at(now) {
                    let stretched = b.stats().stretched > before;
                    shown.push((step, s.render_tick, stretched, s.kind, b.newest_tick()));
                }
            }
        }
        (b, shown)
    };
    let adaptive = DelayPolicy::adaptive_with_target(0.001);
    let (plain, plain_frames) = run(adaptive, 0.0);
    let (stretchy, frames) = run(adaptive, 0.5);
    // Past the warm-up, where the policy has seen double losses.
    let late_underruns = |f: &[(u32, f64, bool, SampleKind, Option<Tick>)]| {
        f[f.len() / 4..]
            .iter()
            .filter(|x| x.3.is_underrun())
            .count()
    };
    let (fixed, _) = run(DelayPolicy::CLASSIC, 0.5);
    // Stretching is opt-in: by default the delay alone rides out losses.
    let (default, _) = run(adaptive, InterpolationConfig::default().max_stretch);
    assert_eq!(default.stats().stretched, 0);
    assert_eq!(default.target_delay(), plain.target_delay());
    assert_eq!(plain.stats().stretched, 0);
    assert_eq!(fixed.stats().stretched, 0);
    let warm = &frames[frames.len() / 4..];
    let mut stretched = 0;
    for pair in warm.windows(2) {
        let ((_, t0, _, _, _), (step, t1, was_stretched, _, newest)) = (pair[0], pair[1]);
        if !was_stretched {
            continue;
        }
        stretched += 1;
        // Only while the snapshot after the newest is missing...
        let newest = newest.expect("snapshots arrived").0;
        assert!(lost(newest / interval + 1), "at {step} ms, newest {newest}");
        // ...and at half speed: half a tick per 1/60 s frame.
        assert!((t1 - t0 - 0.5).abs() < 0.05, "at {step} ms: {t0} -> {t1}");
    }
    assert!(stretched > 100, "{stretched}");
    let delay = |b: &InterpolationBuffer<f32>| b.target_delay().expect("warm").as_secs_f64();
    let ctx = format!(
        "plain {:?} {:?}, stretched {:?} {:?}",
        plain.target_delay(),
        plain.stats(),
        stretchy.target_delay(),
        stretchy.stats()
    );
    assert!(delay(&stretchy) < delay(&plain) - 0.07, "{ctx}");
    assert_eq!(late_underruns(&plain_frames), 0, "{ctx}");
    assert_eq!(late_underruns(&frames), 0, "{ctx}");
    println!("{ctx}");
}

/// How early a snapshot counts as overdue is the developer's choice. Here one snapshot in
/// 13 is 30 ms late, holding back the one behind it, and none is lost. Counted overdue
/// only past the 95th percentile of arrivals, a late snapshot is expected, and the policy
/// waits for it with delay; past the 80th, it is overdue, playback stretches while it is
/// awaited, and the policy spends what that buys on a shorter delay. Neither underruns.
#[test]
fn an_earlier_overdue_moment_stretches_more_for_less_delay() {
    let late = |tick: u32| tick % 13 == 5;
    // Ticks run at 60 Hz and each is sent: arrival in ms, in order (a late snapshot
    // holds back those behind it).
    let mut arrivals = Vec::new();
    let mut last = 0u32;
    for tick in 0..60 * 60 {
        let sent = tick * 1000 / 60;
        last = last.max(sent + 50 + if late(tick) { 30 } else { 0 });
        arrivals.push((last, tick));
    }
    let run = |overdue_quantile: f32| {
        let mut b = InterpolationBuffer::<f32>::new(InterpolationConfig {
            overdue_quantile,
            max_stretch: 0.5,
            ..config(DelayPolicy::adaptive_with_target(0.001))
        });
        let (mut next, mut frame) = (0, 0u64);
        for step in 0..(60 * 1000) {
            // Judged once the window has seen late snapshots.
            if step == 20_000 {
                b.reset_stats();
            }
            while let Some(&(at, tick)) = arrivals.get(next).filter(|(at, _)| *at <= step) {
                b.push(Tick(tick), MS * at, tick as f32).expect("in order");
                next += 1;
            }
            if u64::from(step) * 60 >= frame * 1000 {
                frame += 1;
                b.sample_at(MS * step);
            }
        }
        b
    };
    let (patient, eager) = (run(0.95), run(0.8));
    let ctx = format!(
        "0.95: {:?} {:?}; 0.8: {:?} {:?}",
        patient.target_delay(),
        patient.stats(),
        eager.target_delay(),
        eager.stats()
    );
    assert_eq!(patient.stats().stretched, 0, "{ctx}");
    // About one late snapshot a quarter second, each a few frames of stretch.
    assert!(eager.stats().stretched > 200, "{ctx}");
    // Slow motion shows in the speed error: each stretched frame at half speed loses
    // half a frame of shown time, which catching up then repays as much again.
    assert!(patient.stats().speed_error() < 0.005, "{ctx}");
    let frame = 1.0 / 60.0;
    let stretched = eager.stats().stretched as f64 * 0.5 * frame;
    let repaid = eager.stats().warp_secs / stretched;
    assert!((1.8..2.2).contains(&repaid), "{repaid}: {ctx}");
    // One stretch per late snapshot (185 in the 40 s judged), each over in a few frames.
    let stretches = eager.stats().stretches;
    assert!((170..=185).contains(&stretches), "{ctx}");
    assert_eq!(patient.stats().stretches, 0, "{ctx}");
    let delay = |b: &InterpolationBuffer<f32>| b.target_delay().expect("warm").as_secs_f64();
    assert!(delay(&eager) < delay(&patient) - 0.005, "{ctx}");
    assert_eq!(
        patient.stats().underruns() + eager.stats().underruns(),
        0,
        "{ctx}"
    );
    println!("{ctx}");
}

/// Stretching must never run away with the delay. Here the snapshot after the newest is
/// overdue every fourth one (each fourth is lost), and a stretch over each would put
/// playback behind faster than catching up at 110% makes good: the delay would grow until
/// playback jumped. A stretch starts only when playback is about to reach the newest, so
/// the delay stays where the policy puts it.
#[test]
fn frequent_stretches_do_not_pile_up_delay() {
    let mut b = InterpolationBuffer::<f32>::new(InterpolationConfig {
        max_stretch: 0.5,
        ..config(DelayPolicy::adaptive())
    });
    let (mut delays, mut frame) = (Vec::new(), 0u64);
    for step in 0..(60 * 1000) {
        let now = MS * step;
        // Whatever was sent 50 ms ago arrives now.
        if let Some(since) = step.checked_sub(50) {
            let tick = since * 60 / 1000;
            if since * 60 % 1000 < 60 && tick % 4 != 3 {
                b.push(Tick(tick), now, tick as f32).expect("in order");
            }
        }
        // Frames at 50 Hz, so they fall at every phase of the sends.
        if u64::from(step) * 50 >= frame * 1000 {
            frame += 1;
            if let Some(s) = b.sample_at(now) {
                let newest = b.newest_tick().expect("arrived").0;
                delays.push((f64::from(newest) - s.render_tick) * 1000.0 / 60.0);
            }
        }
    }
    let stats = b.stats();
    let late = &delays[delays.len() / 2..];
    let mean = late.iter().sum::<f64>() / late.len() as f64;
    let max = late.iter().copied().fold(0.0, f64::max);
    let ctx = format!("mean {mean:.1} ms, max {max:.1} ms, {stats:?}");
    // Riding out one lost snapshot takes about two intervals (33 ms) behind the newest.
    assert!(mean < 45.0 && max < 70.0, "{ctx}");
    assert!(stats.stretched > 0, "{ctx}");
    assert!(stats.stretched_ratio() < 1.0 / 6.0, "{ctx}");
    println!("{ctx}");
}

/// What one phase of [`over_changing_link`] showed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Phase {
    frames: u64,
    underruns: u64,
    delay_ms_sum: f64,
}

impl Phase {
    fn underrun_pct(&self) -> f64 {
        self.underruns as f64 * 100.0 / self.frames.max(1) as f64
    }

    fn delay_ms_mean(&self) -> f64 {
        self.delay_ms_sum / self.frames.max(1) as f64
    }
}

/// A snapshot every `interval` ticks (60 Hz) over `broadband` (seeded with `seed`),
/// switching to `snapshot-demo` at 90 s and back at 150 s, into a buffer with the default adaptive
/// policy and the given `config` changes, rendered at 60 fps. Returns the figures over
/// the phases cut at `bounds` (milliseconds), and the buffer.
fn over_changing_link(
    seed: u64,
    interval: u64,
    config_with: impl Fn(InterpolationConfig) -> InterpolationConfig,
    bounds: &[u64],
) -> (Vec<Phase>, InterpolationBuffer<f32>) {
    let named = |name: &str| profile(name).expect("a netem profile");
    let changes = [
        (0, named("broadband")),
        (90_000, named("snapshot-demo")),
        (150_000, named("broadband")),
    ];
    over_links(seed, interval, &changes, config_with, bounds)
}

/// [`over_changing_link`] over the given `links`, each from its start (milliseconds; the
/// first from 0).
fn over_links(
    seed: u64,
    interval: u64,
    links: &[(u64, LinkConfig)],
    config_with: impl Fn(InterpolationConfig) -> InterpolationConfig,
    bounds: &[u64],
) -> (Vec<Phase>, InterpolationBuffer<f32>) {
    let mut link = Link::new(links[0].1.clone(), seed).expect("profiles validate");
    let changes = &links[1..];
    let mut buffer = InterpolationBuffer::<f32>::new(config_with(config(DelayPolicy::adaptive())));
    let mut phases = vec![Phase::default(); bounds.len() - 1];
    let (mut newest, mut changed) = (None::<u32>, 0);
    let tick = |ms: u64| ms * u64::from(TICK_HZ) / 1000;
    for ms in 0..bounds[bounds.len() - 1] {
        let now = MS * ms as u32;
        if changes.get(changed).is_some_and(|(at, _)| ms == *at) {
            link.reconfigure(changes[changed].1.clone())
                .expect("profiles validate");
            changed += 1;
        }
        // Each tick's first millisecond, every `interval`-th tick.
        let k = tick(ms);
        if (ms == 0 || tick(ms - 1) != k) && k % interval == 0 {
            link.send(now, (k as u32).to_le_bytes().to_vec());
        }
        while let Some(packet) = link.poll(now) {
            let k = u32::from_le_bytes(packet.try_into().expect("4-byte tick"));
            newest = newest.max(Some(k));
            let _ = buffer.push(Tick(k), now, k as f32);
        }
        // Frames at 60 fps, on each tick's last millisecond.
        if tick(ms) != tick(ms + 1) {
            let Some(shown) = buffer.sample_at(now) else {
                continue;
            };
            let Some(p) = bounds.windows(2).position(|b| ms >= b[0] && ms < b[1]) else {
                continue;
            };
            phases[p].frames += 1;
            phases[p].underruns += u64::from(shown.kind.is_underrun());
            let behind = f64::from(newest.expect("a snapshot arrived")) - shown.render_tick;
            phases[p].delay_ms_sum += behind * 1000.0 / f64::from(TICK_HZ);
        }
    }
    (phases, buffer)
}

/// At 10 snapshots a second the adaptive policy's window spans 51 s, so on its own it
/// takes about that long to learn that the link changed. Watching the last 32 arrivals
/// for a change (the default) halves the underruns over the first ten seconds on a worse
/// link, and gives back most of the delay within twenty seconds on a better one, while
/// changing nothing as long as the link does not change.
#[test]
fn a_change_of_link_is_followed_within_seconds() {
    let bounds = [30_000, 90_000, 100_000, 150_000, 170_000, 210_000];
    let (watching, w) = over_changing_link(3, 6, |c| c, &bounds);
    let (blind, b) = over_changing_link(
        3,
        6,
        |c| InterpolationConfig {
            shift_window: 0,
            ..c
        },
        &bounds,
    );
    let ctx = format!("{watching:?} {:?}\n{blind:?} {:?}", w.stats(), b.stats());
    println!("{ctx}");
    // Before the change, nothing to tell.
    assert_eq!(watching[0], blind[0], "{ctx}");
    assert_eq!(b.stats().shifts_worse + b.stats().shifts_better, 0, "{ctx}");
    assert!(
        w.stats().shifts_worse >= 1 && w.stats().shifts_better >= 1,
        "{ctx}"
    );
    // The ten seconds after the link got worse.
    assert!(
        watching[1].underrun_pct() < 0.6 * blind[1].underrun_pct(),
        "{ctx}"
    );
    // The twenty after it got better: less delay, still about the 1% target.
    assert!(
        watching[3].delay_ms_mean() < 0.7 * blind[3].delay_ms_mean(),
        "{ctx}"
    );
    assert!(watching[3].underrun_pct() < 2.0, "{ctx}");
}

/// At 10 snapshots a second a window of 512 arrivals holds a few lost snapshots, whose
/// pairs need a whole send interval more than the rest: a link 30 ms slower need not
/// show in the needs' tail at all, but it shows in the arrival offsets. Once the change
/// is seen, the delay rests on the new link's arrivals alone, from the first of them on,
/// and on all they say, losses included: were the old link's last arrivals kept among
/// the few dozen new ones, or a short window without a loss yet taken for a link that
/// never loses, the delay would stay short of what the new link needs for seconds, and
/// playback would underrun well above the target.
#[test]
fn after_the_link_gets_worse_the_delay_rests_on_the_new_link_alone() {
    let bounds = [30_000, 90_000, 91_000, 100_000, 120_000, 150_000];
    let (mut early, mut settled) = (Phase::default(), Phase::default());
    for seed in 1..=4 {
        let (p, _) = over_changing_link(seed, 6, |c| c, &bounds);
        early.frames += p[2].frames;
        early.underruns += p[2].underruns;
        early.delay_ms_sum += p[2].delay_ms_sum;
        settled.frames += p[4].frames;
        settled.underruns += p[4].underruns;
        settled.delay_ms_sum += p[4].delay_ms_sum;
    }
    let ctx = format!(
        "seconds 1-10 after: {:.1} ms, {:.2}%; 30-60 after: {:.1} ms, {:.2}%",
        early.delay_ms_mean(),
        early.underrun_pct(),
        settled.delay_ms_mean(),
        settled.underrun_pct()
    );
    println!("{ctx}");
    // Seconds 1-10 after the change near the delay and the 1% target of seconds 30-60
    // (before: 100 ms at 4.2%, against 137 ms at 1.0%).
    assert!(early.underrun_pct() < 2.5, "{ctx}");
    assert!(
        early.delay_ms_mean() > 0.85 * settled.delay_ms_mean(),
        "{ctx}"
    );
}

/// A link whose losses stop: its delay covered them, and the window of 2048 snapshots
/// the loss rate is measured over takes 205 s to turn over at 10 snapshots a second.
/// Once the last quarter of it has lost far fewer than the rest, the windows keep only
/// that quarter, and the delay comes down within a minute.
#[test]
fn after_losses_stop_the_delay_comes_down_within_a_minute() {
    let demo = profile("snapshot-demo").expect("a netem profile");
    let calm = LinkConfig {
        loss: Loss::None,
        ..demo.clone()
    };
    let links = [(0, demo.clone()), (150_000, calm.clone())];
    let bounds = [150_000, 210_000, 270_000];
    let (mut watching, mut blind) = (Vec::new(), Vec::new());
    for seed in 1..=2 {
        let (w, wb) = over_links(seed, 6, &links, |c| c, &bounds);
        let (b, _) = over_links(
            seed,
            6,
            &links,
            |c| InterpolationConfig {
                shift_window: 0,
                ..c
            },
            &bounds,
        );
        assert!(
            wb.stats().shifts_better >= 1,
            "seed {seed}: {:?}",
            wb.stats()
        );
        watching.push(w[1]);
        blind.push(b[1]);
    }
    let ctx = format!("{watching:?}\n{blind:?}");
    println!("{ctx}");
    // A minute to two minutes after the losses stopped, no losses to cover.
    for (w, b) in watching.iter().zip(&blind) {
        assert!(w.delay_ms_mean() < 0.8 * b.delay_ms_mean(), "{ctx}");
        assert!(w.underrun_pct() < 0.2, "{ctx}");
    }
}

/// At 60 snapshots a second the change shows within a fraction of a second, and what is
/// left is playback catching up with the longer delay. Slowing down to half speed for it
/// (the default `shift_slowdown`) ends the underruns within a few tenths of a second;
/// at the time-scale bound alone (90% speed) they go on for most of a second. (Both
/// slow playback down by the same total, the rise in delay: one in a tenth of a second
/// of slow motion, the other over half a second of frames past the newest snapshot.)
#[test]
fn after_the_link_gets_worse_playback_slows_down_to_the_delay_it_needs() {
    // The first 0.3 s after the change underrun either way: the new link's first
    // snapshots are simply late. What differs is the rest of the second.
    let bounds = [30_000, 90_000, 90_300, 91_000, 100_000];
    let (mut steep, mut gentle) = (Phase::default(), Phase::default());
    let mut shifts = 0;
    for seed in 1..=3 {
        let (s, sb) = over_changing_link(seed, 1, |c| c, &bounds);
        let (g, gb) = over_changing_link(
            seed,
            1,
            |c| InterpolationConfig {
                shift_slowdown: 0.0,
                ..c
            },
            &bounds,
        );
        assert_eq!(s[0], g[0], "seed {seed}: nothing differs before the change");
        steep.frames += s[2].frames;
        steep.underruns += s[2].underruns;
        gentle.frames += g[2].frames;
        gentle.underruns += g[2].underruns;
        shifts += sb.stats().shifts_worse.min(1) + gb.stats().shifts_worse.min(1);
    }
    let ctx = format!("{steep:?} / {gentle:?}");
    println!("{ctx}");
    assert_eq!(shifts, 6, "{ctx}");
    assert!(gentle.underrun_pct() > 5.0, "{ctx}");
    assert!(steep.underrun_pct() < 0.3 * gentle.underrun_pct(), "{ctx}");
}

#[derive(Debug, Clone)]
enum Op {
    Push { tick: u32, at_ms: u64, x: f32 },
    Sample { at_ms: u64 },
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u32..400, 0u64..10_000, any::<f32>()).prop_map(|(tick, at_ms, x)| Op::Push {
            tick,
            at_ms,
            x
        }),
        (any::<u32>(), 0u64..10_000, any::<f32>()).prop_map(|(tick, at_ms, x)| Op::Push {
            tick,
            at_ms,
            x
        }),
        (0u64..10_000).prop_map(|at_ms| Op::Sample { at_ms }),
        Just(Op::Reset),
    ]
}

/// A float setting anywhere: in range, out of it, or not finite.
fn any_setting(range: std::ops::Range<f32>) -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(f32::NAN),
        Just(f32::INFINITY),
        Just(f32::NEG_INFINITY),
        range
    ]
}

fn policy() -> impl Strategy<Value = DelayPolicy> {
    prop_oneof![
        any_setting(-2.0..10.0).prop_map(|intervals| DelayPolicy::Fixed { intervals }),
        (
            any_setting(-0.5..1.5),
            prop_oneof![Just(Duration::MAX), (0u32..2000).prop_map(|ms| MS * ms)]
        )
            .prop_map(|(target_underrun, max_delay)| DelayPolicy::Adaptive {
                target_underrun,
                max_delay,
            }),
    ]
}

proptest! {
    #[test]
    fn arbitrary_sequences_never_panic_and_stay_bounded(
        base in prop_oneof![Just(0u32), Just(65_000), Just(u32::MAX - 300), any::<u32>()],
        policy in policy(),
        capacity in 0usize..12,
        history in 0usize..40,
        shift_window in 0usize..6,
        shift_slowdown in any_setting(-1.0..2.0),
        hermite in any::<bool>(),
        max_stretch in any_setting(-1.0..2.0),
        max_time_scale in any_setting(-1.0..2.0),
        max_tick_jump_ms in prop_oneof![Just(0u64), Just(u64::MAX), 0u64..10_000],
        overdue_quantile in prop_oneof![Just(f32::NAN), Just(f32::NEG_INFINITY), -1.0f32..2.0],
        ops in prop::collection::vec(op(), 0..300),
    ) {
        let mut b = InterpolationBuffer::<Pose>::new(InterpolationConfig {
            tick_hz: 64,
            policy,
            curve: if hermite { Curve::Hermite } else { Curve::Linear },
            capacity,
            history,
            shift_window,
            shift_slowdown,
            max_stretch,
            overdue_quantile,
            max_time_scale,
            max_tick_jump: Duration::from_millis(max_tick_jump_ms),
            ..InterpolationConfig::default()
        });
        let mut pushes = 0u64;
        for op in ops {
            match op {
                Op::Push { tick, at_ms, x } => {
                    pushes += 1;
                    let tick = Tick(tick.wrapping_add(base));
                    let pose = Pose::new([x, -x, x], [x, 0.0, 0.0, 1.0]).with_velocity([x; 3], [x; 3]);
                    let _ = b.push(tick, MS * at_ms as u32, pose);
                }
                Op::Sample { at_ms } => {
                    if let Some(s) = b.sample_at(MS * at_ms as u32) {
                        prop_assert!(s.render_tick.is_finite());
                    }
                    // However unbounded the settings, the delay is at most an hour past
                    // the earliest arrival (10 s at most here).
                    if let Some(d) = b.target_delay() {
                        prop_assert!(d.as_secs_f64() <= MAX_LAG_SECS + 11.0, "{d:?}");
                    }
                }
                Op::Reset => b.reset(),
            }
            prop_assert!(b.len() <= capacity.max(2));
        }
        let st = b.stats();
        prop_assert_eq!(
            st.accepted + st.stale + st.duplicates + st.too_far_ahead + st.full,
            pushes
        );
        prop_assert!(st.filling <= st.early);
        prop_assert_eq!(st.frames, st.interpolated + st.underruns() + st.filling);
    }
}
