//! Prediction through the whole stack: sessions, emulator, sparse predicted world.
#![allow(clippy::unwrap_used)]

use lagless_lab::{RunConfig, ScriptChoice, run};
use lagless_scenes::cubes::script::InputScript;
use lagless_scenes::cubes::{BodyState, CubeInput};
use std::sync::Arc;
use std::time::Duration;

/// Back and forth along X with jumps, away from the grid (the first client's player
/// spawns on the -Z side), after a second of standing still and half a second driving
/// further from the grid's edge.
struct AwayFromTheGrid;

impl InputScript for AwayFromTheGrid {
    fn input(&mut self, tick: u64, _observed: Option<&BodyState>) -> CubeInput {
        if tick < 64 {
            return CubeInput::NONE;
        }
        if tick < 96 {
            return CubeInput::FORWARD; // -Z: further from the grid's edge
        }
        let mut i = if (tick / 48) % 2 == 0 {
            CubeInput::LEFT
        } else {
            CubeInput::RIGHT
        };
        if tick % 90 < 4 {
            i = i.with(CubeInput::JUMP);
        }
        if tick % 200 > 180 {
            i = CubeInput::NONE; // pauses, so presses from rest are timed
        }
        i
    }
}

#[test]
fn untouched_player_predicts_bit_for_bit_under_lan() {
    let config = RunConfig {
        profile: "lan".into(),
        seconds: 8.0,
        script: ScriptChoice::Custom(Arc::new(|_| Box::new(AwayFromTheGrid))),
        ..RunConfig::default()
    };
    let out = run(&config, &mut |_| {}).unwrap();
    let r = &out.report;
    assert!(r.get_f64("prediction.reconciles").unwrap() > 400.0);
    // Every server state matched the prediction exactly enough: never a rollback, and
    // the rendered player is exactly where the server puts it, every tick.
    assert_eq!(r.get_f64("prediction.rollbacks"), Some(0.0));
    assert_eq!(r.get_f64("render.error_cm_p99"), Some(0.0));
    assert_eq!(r.get_f64("render.jerk_cm_p99"), Some(0.0));
    assert_eq!(r.get_f64("render.input_to_motion_ticks"), Some(0.0));
}

fn mobile(smoothing: bool) -> lagless_lab::RunOutcome {
    let mut config = RunConfig {
        profile: "mobile".into(),
        seconds: 12.0,
        seed: 5,
        naive_sample: 0,
        ..RunConfig::default()
    };
    if !smoothing {
        config.smoothing.half_life = Duration::ZERO;
    }
    run(&config, &mut |_| {}).unwrap()
}

#[test]
fn prediction_hides_latency_and_smoothing_hides_corrections() {
    let on = mobile(true);
    let off = mobile(false);
    let mut unpredicted = RunConfig {
        profile: "mobile".into(),
        seconds: 12.0,
        seed: 5,
        ..RunConfig::default()
    };
    unpredicted.prediction = false;
    let without = run(&unpredicted, &mut |_| {}).unwrap();
    let get = |o: &lagless_lab::RunOutcome, m: &str| o.report.get_f64(m).unwrap();
    // The key press shows on the very next frame with prediction, ~RTT later without.
    assert_eq!(get(&on, "render.input_to_motion_ticks"), 0.0);
    assert!(get(&without, "render.input_to_motion_ticks") >= 10.0);
    // The rendered player is far closer to the truth at the same tick.
    assert!(get(&on, "render.error_cm_p99") * 2.0 < get(&without, "render.error_cm_p99"));
    // Corrections happened, and smoothing turned their pops into glides.
    assert!(get(&on, "prediction.rollbacks") > 10.0);
    assert!(
        get(&on, "render.jerk_cm_p99") < get(&off, "render.jerk_cm_p99"),
        "jerk with smoothing {} vs without {}",
        get(&on, "render.jerk_cm_p99"),
        get(&off, "render.jerk_cm_p99")
    );
}

#[test]
fn delta_snapshots_get_through_loss_that_would_stop_plain_ones() {
    // Under 25% loss a 20-fragment plain world snapshot almost never completes (the
    // library's essential part covers the own player then: `crates/replication/tests/hooks.rs`);
    // a delta snapshot fits one packet, so three in four arrive and
    // each becomes the next baseline. The first full snapshot is the only hard one.
    let config = RunConfig {
        profile: "lossy".into(),
        seconds: 10.0,
        naive_sample: 0,
        ..RunConfig::default()
    };
    let out = run(&config, &mut |_| {}).unwrap();
    let r = &out.report;
    let get = |m: &str| r.get_f64(m).unwrap();
    let sent = 10.0 * 64.0;
    assert!(get("client.snapshots_received") > 0.6 * sent);
    assert!(
        get("snapshot.full_pct") < 15.0,
        "full {}%",
        get("snapshot.full_pct")
    );
    assert_eq!(get("snapshot.missing_baseline"), 0.0);
    assert_eq!(get("client.packets_rejected"), 0.0);
    assert!(get("net.down_kbps_mean") * 10.0 < get("snapshot.naive_kbps"));
    assert_eq!(get("render.input_to_motion_ticks"), 0.0);
}
