//! The `lagless` binary: `run` prints a table and writes JSON with the nested names of
//! docs/metrics.md; bad arguments fail with a message instead of a panic.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn lagless() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lagless"))
}

/// Runs `command`, asserts it succeeded (showing its stderr if not) and returns its stdout.
fn stdout_of(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn run_writes_json_and_a_table() {
    let dir = std::env::temp_dir().join(format!("lagless-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("m.json");
    let table = stdout_of(
        lagless()
            .args([
                "run",
                "--scene",
                "cubes",
                "--profile",
                "broadband",
                "--seconds",
                "2",
                "--seed",
                "5",
            ])
            .args(["--clients", "2", "--no-progress", "--interpolation-sweep"])
            .args(["--interpolation", "adaptive:0.5%", "--json"])
            .arg(&json),
    );
    assert!(table.contains("net.down_kbps_mean") && table.contains("server.input_starved_pct"));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["scene"], "cubes");
    assert_eq!(v["profile"], "broadband");
    assert_eq!(v["clients"], 2);
    assert_eq!(v["seed"], 5);
    assert!(v["net"]["down_kbps_mean"].as_f64().unwrap() > 0.0);
    assert!(v["server"]["tick_ms_p99"].as_f64().is_some());
    assert!(v["render"]["error_cm_p99"].as_f64().is_some());
    // The chosen policy, the classic buffer on the same arrivals, and the sweep table.
    assert_eq!(v["interpolation"]["policy"], "adaptive:0.5%");
    assert!(
        v["interpolation"]["fixed3"]["delay_ms_mean"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(table.contains("cut vs fixed:3"), "{table}");
    assert!(table.contains("adaptive:0.05%"), "{table}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_rocket_scene_takes_its_policies_and_reports_the_ball() {
    let dir = std::env::temp_dir().join(format!("lagless-cli-rocket-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("m.json");
    let table = stdout_of(
        lagless()
            .args(["run", "--scene", "rocket", "--profile", "broadband"])
            .args(["--seconds", "2", "--clients", "2", "--no-progress"])
            .args(["--ball", "interpolated", "--remote-cars", "interpolated"])
            .arg("--json")
            .arg(&json),
    );
    assert!(table.contains("ball.error_cm_p99"), "{table}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["scene"], "rocket");
    assert_eq!(v["ball"]["policy"], "interpolated");
    assert_eq!(v["remote_cars"]["policy"], "interpolated");
    assert!(v["ball"]["error_cm_p99"].as_f64().unwrap() >= 0.0);
    assert!(v["ball"]["contacts_client_only"].as_u64().is_some());
    assert!(v["remote_cars"]["error_cm_p99"].as_f64().is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_shooter_runs_at_30_ticks_and_takes_its_flags() {
    let dir = std::env::temp_dir().join(format!("lagless-cli-shooter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("m.json");
    let table = stdout_of(
        lagless()
            .args(["run", "--scene", "shooter", "--profile", "broadband"])
            .args(["--seconds", "3", "--clients", "2", "--no-progress"])
            .args(["--lie-rewind-ms", "1000", "--lagcomp-window-ms", "200"])
            .args(["--lagcomp-window", "absolute"])
            .arg("--json")
            .arg(&json),
    );
    assert!(table.contains("hits.confirmed_pct"), "{table}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["scene"], "shooter");
    assert_eq!(v["tick_hz"], 30);
    assert_eq!(v["lagcomp"]["enabled"], "on");
    assert_eq!(v["lagcomp"]["window_mode"], "absolute");
    assert!(v["lagcomp"]["rewind_ms_p99"].as_f64().unwrap() <= 200.0 + 1e-9);
    assert!(v["lagcomp"]["excess_ms_p99"].as_f64().unwrap() <= 200.0 + 1e-9);
    assert_eq!(v["spawns"]["id_collisions"], 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_arguments_fail_cleanly() {
    for args in [
        &["run", "--profile", "nope", "--seconds", "1"][..],
        &["run", "--seconds", "0"],
        &["run", "--trace", "/nonexistent/trace.txt", "--seconds", "1"],
        &["run", "--snapshot-hz", "0"],
        &[
            "run",
            "--scene",
            "shooter",
            "--lie-rewind-ms",
            "-5",
            "--seconds",
            "1",
        ],
        &[
            "run",
            "--scene",
            "shooter",
            "--lagcomp-window-ms",
            "0",
            "--seconds",
            "1",
        ],
        &["run", "--interpolation", "slow", "--seconds", "1"],
        &["run", "--interpolation", "fixed:-2", "--seconds", "1"],
        &["run", "--interpolation-sweep", "--seconds", "1"],
        &[
            "run",
            "--scene",
            "rocket",
            "--ball",
            "sideways",
            "--seconds",
            "1",
        ],
        &[
            "run",
            "--scene",
            "rocket",
            "--script",
            "pattern",
            "--seconds",
            "1",
        ],
        &["sweep-playback", "--profile", "nope", "--seconds", "1"],
        &["sweep-playback", "--snapshot-hz", "0", "--seconds", "1"],
        &["sweep-playback", "--policies", "fixed:x", "--seconds", "1"],
        &["sweep-playback", "--max-stretch", "-0.1", "--seconds", "1"],
        &["sweep-playback", "--max-stretch", "x", "--seconds", "1"],
        &["run", "--max-stretch", "1", "--seconds", "1"],
        &["run", "--overdue-quantile", "0.3", "--seconds", "1"],
        &["sweep-playback", "--history", "0", "--seconds", "1"],
        &[
            "sweep-playback",
            "--overdue-quantile",
            "x",
            "--seconds",
            "1",
        ],
        &["bench-playback", "--profile", "nope", "--seconds", "1"],
        &["bench-playback", "--policies", "fixed:x", "--seconds", "1"],
        &["bench-playback", "--seconds", "-1"],
        &[
            "sweep-playback",
            "--trace",
            "/nonexistent/trace.txt",
            "--seconds",
            "1",
        ],
    ] {
        let out = lagless().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("error"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let out = lagless().arg("profiles").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("snapshot-demo"));
}

#[test]
fn sweep_playback_compares_policies_on_one_link() {
    let sweep = |extra: &[&str]| -> String {
        stdout_of(
            lagless()
                .args(["sweep-playback", "--snapshot-hz", "10", "--seconds", "60"])
                .args(["--policies", "fixed:2,adaptive:0.5%", "--no-progress"])
                .args(extra),
        )
    };
    let table = sweep(&[]);
    // The classic buffer is added as the reference for the cuts.
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert!(rows[0].starts_with("fixed:3 "), "{table}");
    assert!(rows[0].ends_with("+0%"), "{table}");
    assert!(rows[1].starts_with("fixed:2 ") && rows[2].starts_with("adaptive:0.5%"));
    // A shorter buffer has less delay than the classic one.
    let delay = |row: &str| -> f64 { row.split_whitespace().nth(1).unwrap().parse().unwrap() };
    assert!(delay(rows[1]) < delay(rows[0]) - 50.0, "{table}");
    // Stretching is off unless asked for; asked, only the adaptive buffer stretches
    // over losses.
    let stretched = |row: &str| -> f64 { row.split_whitespace().nth(4).unwrap().parse().unwrap() };
    assert_eq!(stretched(rows[0]), 0.0, "{table}");
    assert_eq!(stretched(rows[2]), 0.0, "{table}");
    let half = sweep(&["--max-stretch", "0.5"]);
    let half_rows: Vec<&str> = half.lines().skip(1).collect();
    assert_eq!(stretched(half_rows[0]), 0.0, "{half}");
    assert!(stretched(half_rows[2]) > 0.0, "{half}");
    // Counting snapshots overdue earlier stretches more often.
    let eager = sweep(&["--max-stretch", "0.5", "--overdue-quantile", "0.6"]);
    let eager_rows: Vec<&str> = eager.lines().skip(1).collect();
    assert!(
        stretched(eager_rows[2]) > stretched(half_rows[2]),
        "{half}\n{eager}"
    );
}

/// `--history` reaches the buffers: on a bursty link, a window four times as long sees
/// more of the rare loss runs, and the adaptive buffer picks another delay.
#[test]
fn sweep_playback_history_sets_the_adaptive_window() {
    let row = |extra: &[&str]| -> String {
        let table = stdout_of(
            lagless()
                .args(["sweep-playback", "--profile", "wifi", "--seconds", "120"])
                .args(["--policies", "adaptive:0.3%", "--no-progress"])
                .args(extra),
        );
        table.lines().nth(2).expect("adaptive row").to_string()
    };
    let (short, default, long) = (
        row(&["--history", "512"]),
        row(&[]),
        row(&["--history", "2048"]),
    );
    assert_eq!(short, default);
    assert_ne!(long, default, "{long}");
}

#[test]
fn bench_playback_times_the_classic_buffer_first() {
    let table = stdout_of(lagless().args([
        "bench-playback",
        "--seconds",
        "2",
        "--policies",
        "adaptive:1%",
    ]));
    let rows: Vec<&str> = table.lines().skip(2).collect();
    assert_eq!(rows.len(), 5, "{table}");
    for (row, (policy, op)) in rows.iter().zip([
        ("fixed:3", "push"),
        ("fixed:3", "sample"),
        ("adaptive:1%", "push"),
        ("adaptive:1%", "sample"),
        ("(timer", "alone)"),
    ]) {
        let mut cells = row.split_whitespace();
        assert_eq!(
            (cells.next(), cells.next()),
            (Some(policy), Some(op)),
            "{table}"
        );
    }
    // Two timed seconds at 60 frames/s.
    let calls = |row: &str| -> u32 { row.split_whitespace().nth(2).unwrap().parse().unwrap() };
    assert!((115..=125).contains(&calls(rows[1])), "{table}");
}

/// Adaptive buffers notice a link that changed (the `shifts_per_h` column) unless told
/// not to watch, and an absurd window is refused.
#[test]
fn the_watch_for_a_changed_link_can_be_turned_off() {
    let shifts = |extra: &[&str]| -> f64 {
        let table = stdout_of(
            lagless()
                .args([
                    "sweep-playback",
                    "--profile",
                    "broadband",
                    "--seconds",
                    "60",
                ])
                .args([
                    "--link-change",
                    "40:snapshot-demo",
                    "--policies",
                    "adaptive:1%",
                ])
                .arg("--no-progress")
                .args(extra),
        );
        let whole = table
            .split("whole replay")
            .nth(1)
            .expect("a whole-replay table");
        let row = whole
            .lines()
            .find(|l| l.starts_with("adaptive:1%"))
            .unwrap_or_else(|| panic!("{table}"));
        row.split_whitespace().nth(7).unwrap().parse().unwrap()
    };
    assert!(shifts(&[]) > 0.0);
    assert_eq!(shifts(&["--shift-window", "0"]), 0.0);
    let out = lagless()
        .args([
            "sweep-playback",
            "--shift-window",
            "100000",
            "--no-progress",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn link_changes_reach_runs_and_replays() {
    let loss = |extra: &[&str]| -> f64 {
        let dir = std::env::temp_dir().join(format!("lagless-cli-lc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join(format!("m{}.json", extra.len()));
        stdout_of(
            lagless()
                .args(["run", "--profile", "lan", "--seconds", "4", "--no-progress"])
                .args(extra)
                .arg("--json")
                .arg(&json),
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        if !extra.is_empty() {
            assert_eq!(v["link_changes"], "2 s: lossy");
        }
        v["net"]["loss_pct"].as_f64().unwrap()
    };
    assert_eq!(loss(&[]), 0.0);
    // `lossy` drops a quarter of the packets for the second half.
    let changed = loss(&["--link-change", "2:lossy"]);
    assert!((5.0..20.0).contains(&changed), "{changed}");

    let table = stdout_of(lagless().args([
        "sweep-playback",
        "--profile",
        "broadband",
        "--seconds",
        "30",
        "--link-change",
        "10:snapshot-demo",
        "--policies",
        "fixed:3",
        "--no-progress",
    ]));
    let headers: Vec<&str> = table
        .lines()
        .filter(|l| l.ends_with(": broadband") || l.ends_with(": snapshot-demo"))
        .collect();
    assert_eq!(
        headers,
        ["0 s to 10 s: broadband", "10 s to 30 s: snapshot-demo"],
        "{table}"
    );
    assert!(table.contains("whole replay"), "{table}");

    for bad in [["--link-change", "9:lossy"], ["--link-change", "2:nowhere"]] {
        let out = lagless()
            .args(["run", "--seconds", "4", "--no-progress"])
            .args(bad)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("link change") || err.contains("profile"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}
