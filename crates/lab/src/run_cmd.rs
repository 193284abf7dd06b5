//! `lagless run`: the settings it takes, checked into a [`RunConfig`], and the run.

use super::{
    LagcompWindowArg, MissingInputArg, PredictionModeArg, RunArgs, SteeringArg, TransportArg,
    WalkerSyncArg, net_commands, simulation_bar,
};
use lagless_core::{LeadPolicy, MissingInput};
use lagless_lab::{RunConfig, ScriptChoice, run};
use lagless_scenes::cubes::predict::PredictMode;

/// The run `a` asks for, checked.
fn run_config(a: &RunArgs) -> Result<RunConfig, String> {
    let net = a.net.overrides()?;
    if a.input_buffer_ticks
        .is_some_and(|n| !(0.0..=1000.0).contains(&n))
    {
        return Err("--input-buffer-ticks must be in 0..=1000".into());
    }
    // Each scene's own rates unless told otherwise (RunConfig::for_scene); snapshots go
    // out every tick unless told otherwise.
    let defaults = RunConfig::for_scene(&a.scene);
    let tick_hz = a.tick_hz.unwrap_or(defaults.server.tick_hz);
    let snapshot_hz = a.snapshot_hz.unwrap_or(tick_hz);
    if !(1..=1000).contains(&tick_hz) {
        return Err("--tick-hz must be in 1..=1000".into());
    }
    let mut config = RunConfig {
        scene: a.scene.clone(),
        profile: a.profile.clone(),
        net,
        link_changes: a.net.link_changes.clone(),
        seconds: a.seconds,
        seed: a.seed,
        clients: a.clients,
        threads: a
            .threads
            .map_or_else(lagless_replication::available_threads, usize::from),
        script: ScriptChoice::Named(a.script.clone()),
        snapshot_hz,
        ..defaults
    };
    if !(a.budget_kbps.is_finite() && a.budget_kbps >= 0.0) {
        return Err("--budget-kbps must be a non-negative number (0: no budget)".into());
    }
    config.budget_kbps = a.budget_kbps;
    if !(a.relevance_m.is_finite() && a.relevance_m > 0.0) {
        return Err("--relevance-m must be a positive number".into());
    }
    config.relevance_m = a.relevance_m;
    if !(a.near_boost.is_finite() && a.near_boost >= 1.0) {
        return Err("--near-boost must be a number of at least 1 (1: no near field)".into());
    }
    config.near_boost = a.near_boost;
    config.walkers = walker_settings(a)?;
    config.set_tick_hz(tick_hz);
    shooter_settings(a, &mut config.shooter)?;
    config.cells = lagless_lab::config::cells(a.cells_m, a.interest_m)?;
    config.server.missing_input = match a.missing_input {
        MissingInputArg::Hold => MissingInput::Hold,
        MissingInputArg::Repeat => MissingInput::RepeatLast,
        MissingInputArg::Guess => MissingInput::Guess,
    };
    config.prediction = !a.no_prediction;
    config.predict.mode = match a.prediction_mode {
        PredictionModeArg::Set => PredictMode::PredictedSet,
        PredictionModeArg::Full => PredictMode::FullWorld,
    };
    if let Some(r) = a.predict_radius {
        if !(r.is_finite() && r >= 0.0) {
            return Err("--predict-radius must be a non-negative number".into());
        }
        config.predict.radius = r;
    }
    if let Some(n) = a.predict_max_cubes {
        config.predict.max_cubes = n;
    }
    if !(a.smoothing_half_life_ms.is_finite() && a.smoothing_half_life_ms >= 0.0) {
        return Err("--smoothing-half-life-ms must be a non-negative number".into());
    }
    config.smoothing.half_life = if a.no_smoothing {
        std::time::Duration::ZERO
    } else {
        std::time::Duration::from_secs_f64(a.smoothing_half_life_ms / 1000.0)
    };
    config.naive_sample = a.naive_sample;
    match a.prediction_horizon.as_deref().map(str::trim) {
        None => {}
        Some("off") => config.link.prediction_horizon = None,
        Some(ms) => {
            let ms: u64 = ms
                .parse()
                .map_err(|_| format!("--prediction-horizon {ms:?}: expected ms or off"))?;
            config.link.prediction_horizon = Some(std::time::Duration::from_millis(ms));
        }
    }
    if let Some(ms) = a.interrupted_after_ms {
        config.link.interrupted_after = std::time::Duration::from_millis(ms);
    }
    config.rocket.ball = a.ball.policy();
    config.rocket.remote_cars = a.remote_cars.policy();
    if a.remote_input_decay_ms.is_nan() || a.remote_input_decay_ms < 0.0 {
        return Err("--remote-input-decay-ms must be a non-negative number or inf".into());
    }
    config.rocket.remote_input_decay_secs = (a.remote_input_decay_ms / 1000.0) as f32;
    if let Some(policy) = a.interpolation {
        config.interpolation = policy;
    }
    config.playback = a.playback.settings_over(config.playback);
    if a.interpolation_sweep {
        if config.clients < 2 {
            return Err(
                "--interpolation-sweep needs --clients 2 or more (remote players to show)".into(),
            );
        }
        config.interpolation_shadows = lagless_lab::playback::sweep_policies();
    }
    config.client.sync.lead = match a.input_buffer_ticks {
        Some(n) => LeadPolicy::Fixed {
            buffer_ticks: n,
            jitter_factor: 1.0,
        },
        None => a.input_buffer.unwrap_or(config.client.sync.lead),
    };
    for o in &a.outages {
        if o.outage.start.as_secs_f64() >= config.seconds {
            return Err(format!("outage {} starts after the run ends", o.label()));
        }
    }
    config.outages = a.outages.clone();
    Ok(config)
}

/// `--walkers`, `--walker-sync`, `--steering`, `--steer-ms` and `--dr-budget-share`.
fn walker_settings(a: &RunArgs) -> Result<lagless_lab::config::WalkerSettings, String> {
    Ok(lagless_lab::config::WalkerSettings {
        count: a.walkers,
        sync: match a.walker_sync {
            WalkerSyncArg::Deadreckoning => lagless_lab::config::WalkerSync::DeadReckoning,
            WalkerSyncArg::Interpolation => lagless_lab::config::WalkerSync::Interpolation,
        },
        steering: match a.steering {
            SteeringArg::Arrive => lagless_replication::deadreckoning::Steering::Arrive,
            SteeringArg::Pvb => lagless_replication::deadreckoning::Steering::Pvb,
        },
        steer_time: a.steer_ms.map(std::time::Duration::from_millis),
        budget_share: match a.dr_budget_share.as_str() {
            "off" => None,
            s => Some(
                s.parse::<f32>()
                    .ok()
                    .filter(|v| (0.0..=1.0).contains(v))
                    .ok_or_else(|| format!("--dr-budget-share: 0 to 1 or off, got {s}"))?,
            ),
        },
    })
}

/// The shooter's options: lag compensation's window and the liar, and the arena's tiles.
fn shooter_settings(
    a: &RunArgs,
    shooter: &mut lagless_lab::config::ShooterSettings,
) -> Result<(), String> {
    if !(a.lie_rewind_ms.is_finite() && (0.0..=60_000.0).contains(&a.lie_rewind_ms)) {
        return Err("--lie-rewind-ms must be in 0..=60000".into());
    }
    if !(a.lagcomp_window_ms.is_finite()
        && a.lagcomp_window_ms > 0.0
        && a.lagcomp_window_ms <= 10_000.0)
    {
        return Err("--lagcomp-window-ms must be in (0, 10000]".into());
    }
    shooter.window = std::time::Duration::from_secs_f64(a.lagcomp_window_ms / 1000.0);
    shooter.lag_compensation = !a.no_lag_compensation;
    shooter.relative_window = a.lagcomp_window == LagcompWindowArg::Relative;
    shooter.lie_rewind = std::time::Duration::from_secs_f64(a.lie_rewind_ms / 1000.0);
    shooter.arena_tiles = a.arena_tiles;
    Ok(())
}

/// `lagless run`: over the emulator on a virtual clock (a progress bar, then the short
/// report), or over UDP on loopback in real time.
pub(crate) fn run_command(a: RunArgs) -> Result<(), String> {
    let config = run_config(&a)?;
    if a.transport == TransportArg::Udp {
        if a.interpolation_sweep {
            return Err("--interpolation-sweep needs the emulator".into());
        }
        if a.plot.is_some() || a.timeline.is_some() {
            return Err("--plot and --timeline need the emulator".into());
        }
        eprintln!(
            "lagless: scene {} over UDP on loopback ({}) for {} real s, {} client(s), seed {}",
            config.scene, config.profile, config.seconds, config.clients, config.seed
        );
        let options = lagless_lab::net::run::UdpOptions {
            switch_at: a.switch_at,
        };
        let report =
            lagless_lab::net::run::run_with(&config, &options).map_err(|e| e.to_string())?;
        print!(
            "{}",
            if a.all {
                report.to_table()
            } else {
                report.to_summary()
            }
        );
        return net_commands::write_json(a.json.as_deref(), &report);
    }
    if a.switch_at.is_some() {
        return Err("--switch-at needs --transport udp (a real socket to change)".into());
    }
    let bar = simulation_bar((config.seconds * 10.0).ceil() as u64, a.no_progress);
    let total = config.seconds;
    eprintln!(
        "lagless: scene {} over {} for {} simulated s, {} client(s), seed {}",
        config.scene, config.profile, config.seconds, config.clients, config.seed
    );
    let outcome = run(&config, &mut |t| {
        bar.set_position((t * 10.0) as u64);
        bar.set_message(format!("{t:.1} / {total:.0} s simulated"));
    })
    .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    let r = &outcome.report;
    print!("{}", if a.all { r.to_table() } else { r.to_summary() });
    if a.interpolation_sweep {
        println!("\ninterpolation policies on the same arrivals and frames (means over clients):");
        print!(
            "{}",
            lagless_lab::playback::format_sweep(&outcome.interpolation_shadows)
        );
    }
    if let Some(path) = &a.plot {
        let title = format!(
            "{} over {}, {} s, seed {}: client 1",
            config.scene, config.profile, config.seconds, config.seed
        );
        outcome
            .timeline
            .write_svg(path, &title)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("plot written to {}", path.display());
    }
    if let Some(path) = &a.timeline {
        let text = serde_json::to_string(&outcome.timeline).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = a.json {
        let text =
            serde_json::to_string_pretty(&outcome.report.to_json()).map_err(|e| e.to_string())?;
        std::fs::write(&path, text + "\n")
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("metrics written to {}", path.display());
    }
    Ok(())
}
