//! Every named profile runs to completion with several clients, and the report carries
//! the metric names of docs/metrics.md with sensible values.
#![allow(clippy::unwrap_used)]

use lagless_core::interpolation::DelayPolicy;
use lagless_lab::playback::PlaybackSettings;
use lagless_lab::{RunConfig, run};
use lagless_netem::PROFILE_NAMES;

const NAMES: &[&str] = &[
    "scene",
    "profile",
    "seconds",
    "tick_hz",
    "clients",
    "seed",
    "net.down_kbps_mean",
    "net.down_kbps_p95",
    "net.up_kbps_mean",
    "net.loss_pct",
    "render.error_cm_p99",
    "render.jerk_cm_p99",
    "render.input_to_motion_ticks",
    "server.tick_ms_p50",
    "server.tick_ms_p99",
    "server.input_starved_pct",
];

#[test]
fn every_profile_runs_and_reports() {
    for name in PROFILE_NAMES {
        let config = RunConfig {
            profile: (*name).into(),
            seconds: 4.0,
            clients: 2,
            seed: 3,
            ..RunConfig::default()
        };
        let out = run(&config, &mut |_| {}).unwrap();
        let json = out.report.to_json();
        for metric in NAMES {
            let mut v = &json;
            for part in metric.split('.') {
                v = &v[part];
            }
            assert!(
                !v.is_null() || metric.starts_with("render."),
                "{name}: {metric} missing"
            );
        }
        let loss = out.report.get_f64("net.loss_pct").unwrap();
        let down = out.report.get_f64("net.down_kbps_mean").unwrap();
        let up = out.report.get_f64("net.up_kbps_mean").unwrap();
        assert!(down > up && up > 5.0, "{name}: down {down} up {up}");
        match *name {
            "lan" | "" => assert_eq!(loss, 0.0),
            "lossy" => assert!((20.0..30.0).contains(&loss), "{name}: {loss}"),
            _ => assert!(loss < 15.0, "{name}: {loss}"),
        }
        for c in &out.client_stats {
            assert!(c.packets_received > 0, "{name}");
        }
    }
}

#[test]
fn unknown_names_are_errors_not_panics() {
    let bad = |f: fn(&mut RunConfig)| {
        let mut c = RunConfig {
            seconds: 1.0,
            ..RunConfig::default()
        };
        f(&mut c);
        run(&c, &mut |_| {}).err().map(|e| e.to_string())
    };
    assert!(
        bad(|c| c.profile = "dialup".into())
            .unwrap()
            .contains("dialup")
    );
    assert!(bad(|c| c.scene = "pong".into()).unwrap().contains("pong"));
    assert!(bad(|c| c.script = lagless_lab::ScriptChoice::Named("x".into())).is_some());
    assert!(bad(|c| c.seconds = -1.0).is_some());
    assert!(bad(|c| c.clients = 0).is_some());
    assert!(bad(|c| c.snapshot_hz = 1000).is_some());
    assert!(
        bad(|c| c.net.loss_pct = Some(300.0)).is_none(),
        "loss is clamped to 100%"
    );
    assert!(
        bad(|c| c.net.duplicate_pct = Some(300.0))
            .unwrap()
            .contains("duplicate")
    );
}

#[test]
fn remote_players_are_interpolated() {
    // No budget: what the interpolation buffer shows, not what the budget held back.
    let config = RunConfig {
        profile: "broadband".into(),
        seconds: 6.0,
        clients: 3,
        naive_sample: 0,
        budget_kbps: 0.0,
        ..RunConfig::default()
    };
    let out = run(&config, &mut |_| {}).unwrap();
    let r = &out.report;
    let delay = r.get_f64("interpolation.delay_ms_mean").unwrap();
    let underrun = r.get_f64("interpolation.underrun_pct").unwrap();
    let error = r.get_f64("interpolation.error_cm_p99").unwrap();
    let speed_error = r.get_f64("interpolation.speed_error_pct").unwrap();
    // Shown a little in the past, rarely without a pair, close to the truth at that time,
    // and at close to real speed.
    assert!(delay > 0.0 && delay < 100.0, "delay {delay} ms");
    assert!(underrun < 5.0, "underrun {underrun}%");
    assert!(error < 10.0, "error {error} cm");
    assert!(
        (0.0..5.0).contains(&speed_error),
        "speed error {speed_error}%"
    );
}

/// The shadow buffers see exactly what the real one sees: one with the real buffer's own
/// policy reproduces its figures to the last bit, although it holds no poses. That is what
/// makes the `interpolation.fixed3.*` and `--interpolation-sweep` comparisons like for like.
#[test]
fn shadow_policies_replay_the_real_buffer_exactly() {
    let classic = DelayPolicy::Fixed { intervals: 3.0 };
    let config = RunConfig {
        profile: "snapshot-demo".into(),
        seconds: 6.0,
        clients: 2,
        naive_sample: 0,
        interpolation: DelayPolicy::adaptive(),
        interpolation_shadows: vec![classic, DelayPolicy::adaptive()],
        ..RunConfig::default()
    };
    let out = run(&config, &mut |_| {}).unwrap();
    let r = &out.report;
    let [fixed, own] = &out.interpolation_shadows[..] else {
        panic!("one row per shadow: {:?}", out.interpolation_shadows);
    };
    assert_eq!(own.policy, DelayPolicy::adaptive());
    assert_eq!(
        Some(own.delay_ms_mean),
        r.get_f64("interpolation.delay_ms_mean")
    );
    assert_eq!(
        Some(own.underrun_pct),
        r.get_f64("interpolation.underrun_pct")
    );
    assert_eq!(
        Some(fixed.delay_ms_mean),
        r.get_f64("interpolation.fixed3.delay_ms_mean")
    );
    assert_eq!(
        Some(fixed.underrun_pct),
        r.get_f64("interpolation.fixed3.underrun_pct")
    );
    let cut = r.get_f64("interpolation.delay_cut_pct").unwrap();
    assert!(
        (cut - (1.0 - own.delay_ms_mean / fixed.delay_ms_mean) * 100.0).abs() < 1e-9,
        "{cut}"
    );
    // Different policies do differ on the same arrivals.
    assert_ne!(fixed.delay_ms_mean, own.delay_ms_mean);

    // One client shows no remote players: nothing to compare.
    let single = run(
        &RunConfig {
            clients: 1,
            ..config
        },
        &mut |_| {},
    )
    .unwrap();
    assert!(single.interpolation_shadows.is_empty());
    assert_eq!(
        single.report.get("interpolation.fixed3.delay_ms_mean"),
        None
    );
}

/// Stretching playback over an overdue snapshot shows the truth at the time it shows, so
/// the error cannot see it; the jerk does: a frame at quarter speed loses three quarters
/// of a frame of motion, which a fixed buffer's rare, short extrapolations do not.
#[test]
fn slow_motion_shows_as_jerk_not_error() {
    let config = |interpolation, max_stretch| RunConfig {
        profile: "snapshot-demo".into(),
        seconds: 10.0,
        clients: 2,
        naive_sample: 0,
        budget_kbps: 0.0,
        interpolation,
        playback: PlaybackSettings {
            max_stretch,
            overdue_quantile: 0.8,
            ..PlaybackSettings::default()
        },
        interpolation_shadows: Vec::new(),
        ..RunConfig::default()
    };
    let figures = |c: &RunConfig| {
        let out = run(c, &mut |_| {}).unwrap();
        let r = &out.report;
        let get = |name: &str| r.get_f64(name).unwrap();
        (
            get("interpolation.stretched_pct"),
            get("interpolation.jerk_cm_p99"),
            get("interpolation.error_cm_p99"),
        )
    };
    let (fixed_stretched, fixed_jerk, fixed_error) = figures(&config(DelayPolicy::CLASSIC, 0.75));
    let adaptive = DelayPolicy::adaptive_with_target(0.02);
    let (stretched, jerk, error) = figures(&config(adaptive, 0.75));
    let ctx = format!(
        "fixed: {fixed_stretched}% stretched, jerk {fixed_jerk} cm, error {fixed_error} cm; \
         stretching: {stretched}%, jerk {jerk} cm, error {error} cm"
    );
    assert_eq!(fixed_stretched, 0.0, "{ctx}");
    assert!(stretched > 1.0, "{ctx}");
    assert!(fixed_jerk < 2.0, "{ctx}");
    // Stretching costs about 2.3-2.7 times the fixed buffer's jerk on this run (the
    // figures: docs/interpolation.md, "Why it is off by default"; the ratio moves with
    // the players' paths, which any change to the client's timing moves): at least 2.
    assert!(jerk > 2.0 * fixed_jerk, "{ctx}");
    assert!(error < 2.0 * fixed_error.max(0.5), "{ctx}");
    println!("{ctx}");
}
