//! The walker scene: dead reckoning against snapshot interpolation on the same walkers.
//! (Forged dead-reckoning messages are refused by the public `Client`:
//! `crates/replication/tests/forged_dead_reckoning.rs`.)
#![allow(clippy::unwrap_used)]

use lagless_lab::config::{WalkerSettings, WalkerSync};
use lagless_lab::{RunConfig, run};
use lagless_replication::deadreckoning::Steering;

fn config(sync: WalkerSync, steering: Steering) -> RunConfig {
    RunConfig {
        scene: "walkers".into(),
        profile: "broadband".into(),
        seconds: 8.0,
        clients: 2,
        naive_sample: 0,
        walkers: WalkerSettings {
            count: 60,
            sync,
            steering,
            ..WalkerSettings::default()
        },
        ..RunConfig::default()
    }
}

fn figure(r: &lagless_lab::metrics::Report, name: &str) -> f64 {
    r.get_f64(name)
        .unwrap_or_else(|| panic!("{name} missing from the report"))
}

/// On `broadband`, walkers shown by dead reckoning (projective velocity blending) are
/// nearer their true present position than interpolated ones, for less downlink.
#[test]
fn dead_reckoning_beats_interpolation_for_less_bandwidth() {
    let dr = run(
        &config(WalkerSync::DeadReckoning, Steering::Pvb),
        &mut |_| {},
    )
    .unwrap();
    let interp = run(
        &config(WalkerSync::Interpolation, Steering::Pvb),
        &mut |_| {},
    )
    .unwrap();
    let (dr, interp) = (&dr.report, &interp.report);
    let (e_dr, e_in) = (
        figure(dr, "deadreckoning.error_cm_mean"),
        figure(interp, "deadreckoning.error_cm_mean"),
    );
    let (k_dr, k_in) = (
        figure(dr, "net.down_kbps_mean"),
        figure(interp, "net.down_kbps_mean"),
    );
    assert!(
        e_dr < e_in,
        "error: dead reckoning {e_dr} cm, interpolation {e_in} cm"
    );
    assert!(
        k_dr < 0.75 * k_in,
        "downlink: dead reckoning {k_dr} kbit/s, interpolation {k_in} kbit/s"
    );
    assert!(figure(dr, "deadreckoning.messages_per_s") > 0.0);
    // A clean run refuses only stale messages (reordering), and shows every walker soon.
    assert_eq!(
        figure(dr, "deadreckoning.rejected"),
        figure(dr, "deadreckoning.rejected_stale")
    );
    assert!(figure(dr, "deadreckoning.unseen_pct") < 5.0);
    assert!(figure(dr, "deadreckoning.jerk_cm_p99") > 0.0);
}

/// The flags reach the run and its JSON: `--walkers`, `--walker-sync`, `--steering`,
/// a bad value is an error, not a panic.
#[test]
fn the_walker_flags_reach_the_json() {
    let dir = std::env::temp_dir().join(format!("lagless-walkers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("w.json");
    let lagless = || std::process::Command::new(env!("CARGO_BIN_EXE_lagless"));
    let out = lagless()
        .args([
            "run",
            "--scene",
            "walkers",
            "--profile",
            "lan",
            "--seconds",
            "2",
        ])
        .args(["--walkers", "30", "--steering", "pvb"])
        .args(["--no-progress", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let dr = &v["deadreckoning"];
    assert_eq!(dr["steering"], "pvb");
    assert_eq!(dr["mode"], "deadreckoning");
    assert_eq!(v["walkers"]["count"], 30);
    for bad in [
        &["--walkers", "20000"][..],
        &["--walker-sync", "telepathy"],
        &["--steering", "teleport"],
    ] {
        let out = lagless()
            .args([
                "run",
                "--scene",
                "walkers",
                "--seconds",
                "1",
                "--no-progress",
            ])
            .args(bad)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{bad:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
