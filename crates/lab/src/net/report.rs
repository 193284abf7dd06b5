//! The lab's metrics (`docs/metrics.md`) from clients that played over a real link, and from the server when
//! it ran in the same process.
//!
//! Over a real link nobody sees the packets the network dropped, so `net.loss_pct` comes
//! from the session packets' sequence numbers: the client counts the server's, the server
//! counts the client's and says so in its link reports. `net.down_kbps_mean` is what the
//! server reports it sent, `net.down_delivered_kbps_mean` what arrived. Figures against
//! the server's truth (`render.error_cm_p99`, `interpolation.error_cm_p99`) need a server
//! in the same process (`run --transport udp`); a lone `lagless connect` leaves them out.

use super::connect::{ClientRun, Player};
use super::serve::ServeOutcome;
use crate::metrics::{Metric, Report, mean, percentile};
use crate::replication::snapshot_metrics;
use crate::runner::client::{ClientSim, Truth};
use crate::scene::LabScene;

/// The report of clients that played (one or more), with `profile` naming the link.
pub fn build<S: LabScene>(runs: Vec<ClientRun<S>>, profile: &str) -> Report {
    build_with(runs, None, None, profile)
}

/// The report of `runs` (one or more clients), with `server` and `truth` when the
/// server ran in the same process. `profile` names the link (`udp` when unknown).
pub(crate) fn build_with<S: LabScene>(
    runs: Vec<ClientRun<S>>,
    server: Option<&ServeOutcome<S>>,
    truth: Option<&Truth>,
    profile: &str,
) -> Report {
    let mut r = Report::default();
    let Some(first) = runs.first() else {
        return r;
    };
    let config = first.config.clone();
    let seconds = mean(&runs.iter().map(|c| c.seconds).collect::<Vec<_>>()).unwrap_or(0.0);
    r.set("scene", Metric::Text(config.scene.clone()));
    r.set("profile", Metric::Text(profile.into()));
    r.set("transport", Metric::Text(super::TRANSPORT_LABEL.into()));
    r.number("seconds", Some(seconds));
    r.set("tick_hz", Metric::Count(u64::from(config.server.tick_hz)));
    r.set("snapshot_hz", Metric::Count(u64::from(config.snapshot_hz)));
    r.set("clients", Metric::Count(runs.len() as u64));
    r.set("seed", Metric::Count(config.seed));
    let ended: Vec<&str> = runs.iter().map(|c| c.ended.as_str()).collect();
    r.set("client.ended", Metric::Text(ended.join(",")));
    let down_kbps = net(&mut r, &runs);
    let decoders: Vec<(u64, u64, &crate::metrics::Histogram)> = runs
        .iter()
        .map(|c| match &c.client {
            Player::Full(s) => s.decode_figures(),
            Player::Bot(b) => {
                let s = b.client.replication().stats();
                (s.view_mismatches, s.missing_baseline, &b.decode_us)
            }
        })
        .collect();
    if let Some(s) = server {
        s.fill(&mut r);
        let mut config = config.clone();
        config.seconds = seconds;
        config.clients = runs.len() as u32;
        snapshot_metrics(&mut r, &config, &s.sender, &s.server, &decoders, down_kbps);
    } else {
        let mut decode = crate::metrics::Histogram::default();
        for (_, _, d) in &decoders {
            decode.merge(d);
        }
        r.number("snapshot.decode_us_p50", decode.percentile(50.0));
        r.set(
            "snapshot.missing_baseline",
            Metric::Count(decoders.iter().map(|(_, m, _)| m).sum()),
        );
    }
    let rtt: Vec<f64> = runs
        .iter()
        .filter_map(|c| Some(c.client.rtt().smoothed()?.as_secs_f64() * 1000.0))
        .collect();
    r.number("sync.rtt_ms", mean(&rtt));
    let stats: Vec<_> = runs.iter().map(|c| c.client.stats()).collect();
    r.set(
        "client.snapshots_received",
        Metric::Count(stats.iter().map(|s| s.snapshots_received).sum()),
    );
    r.set(
        "client.packets_rejected",
        Metric::Count(stats.iter().map(|s| s.packets_rejected).sum()),
    );
    switch_metrics(&mut r, &runs);
    let players: Vec<u32> = runs.iter().map(|c| c.player).collect();
    let sims: Vec<ClientSim<S>> = runs
        .into_iter()
        .filter_map(|c| match c.client {
            Player::Full(s) => Some(*s),
            Player::Bot(_) => None,
        })
        .collect();
    if !sims.is_empty() {
        crate::runner::report::sync(&mut r, &sims);
        crate::runner::report::prediction(&mut r, &sims);
        let sets: Vec<&crate::playback::PolicyShadows> = sims.iter().map(|c| &c.shadows).collect();
        let shadows = crate::playback::PolicyShadows::mean_figures(&sets);
        crate::runner::report::interpolation_with_shadows(
            &mut r,
            &sims,
            &config.interpolation,
            &shadows,
        );
        render(&mut r, &sims, truth);
        if let Some(probe) = truth.and_then(|t| t.probe.as_ref()) {
            if let Ok(p) = probe.lock() {
                p.fill(&mut r);
            }
            r.set(
                "sync.lead_policy",
                Metric::Text(crate::input_buffer::lead_label(&config.client.sync.lead)),
            );
        }
        match server {
            // The scene's own figures, as a run over the emulator reports them.
            Some(s) => {
                crate::runner::report::dead_reckoning(&mut r, &sims, &s.sender, &s.server, seconds);
                crate::runner::report::scene_metrics(&mut r, &s.scene, &sims);
            }
            None => {
                let worlds: Vec<&S::World> =
                    sims.iter().filter_map(ClientSim::predicted_world).collect();
                S::report_worlds(&worlds, &mut r);
            }
        }
    }
    r.set(
        "client.players",
        Metric::Text(
            players
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
    );
    r
}

/// `net.*`; returns the mean downlink rate per client as sent, kbit/s.
fn net<S: LabScene>(r: &mut Report, runs: &[ClientRun<S>]) -> Option<f64> {
    let kbps = |bytes: u64, secs: f64| (secs > 0.0).then(|| bytes as f64 * 8.0 / 1000.0 / secs);
    let sent: Vec<f64> = runs
        .iter()
        .filter_map(|c| c.link.and_then(|l| kbps(l.down_bytes, l.seconds)))
        .collect();
    let delivered: Vec<f64> = runs
        .iter()
        .filter_map(|c| kbps(c.client.bytes().1, c.seconds))
        .collect();
    let up: Vec<f64> = runs
        .iter()
        .filter_map(|c| kbps(c.client.bytes().0, c.seconds))
        .collect();
    let windows: Vec<f64> = runs
        .iter()
        .flat_map(|c| {
            let whole = c.seconds.floor() as usize;
            c.client
                .bytes()
                .2
                .iter()
                .take(whole)
                .map(|b| *b as f64 * 8.0 / 1000.0)
        })
        .collect();
    r.number("net.down_kbps_mean", mean(&sent));
    r.number("net.down_delivered_kbps_mean", mean(&delivered));
    // What arrived, per second: a client cannot see what was sent in each second.
    r.number("net.down_kbps_p95", percentile(&windows, 95.0));
    r.number("net.up_kbps_mean", mean(&up));
    let (mut down_expected, mut down_lost, mut up_expected, mut up_lost) = (0, 0, 0, 0);
    for c in runs {
        down_expected += c.down.expected();
        down_lost += c.down.lost();
        if let Some(l) = c.link {
            up_expected += l.up_expected;
            up_lost += l.up_expected.saturating_sub(l.up_received);
        }
    }
    let pct = |lost: u64, of: u64| (of > 0).then(|| lost as f64 * 100.0 / of as f64);
    r.number(
        "net.loss_pct",
        pct(down_lost + up_lost, down_expected + up_expected),
    );
    r.number("net.down_loss_pct", pct(down_lost, down_expected));
    r.number("net.up_loss_pct", pct(up_lost, up_expected));
    mean(&sent)
}

/// `render.*`: the own player's frames against the server's truth (when known) and the
/// causal input-to-motion latency (always).
fn render<S: LabScene>(r: &mut Report, sims: &[ClientSim<S>], truth: Option<&Truth>) {
    let mut errors = Vec::new();
    let mut jerks = Vec::new();
    let mut latency = Vec::new();
    for c in sims {
        latency.extend(c.input_to_motion());
        let Some(track) = truth.and_then(|t| t.players.get(c.player as usize - 1)) else {
            continue;
        };
        c.render_errors(track, &mut errors, &mut jerks);
    }
    if truth.is_some() {
        r.number("render.error_cm_p99", percentile(&errors, 99.0));
        r.number("render.jerk_cm_p99", percentile(&jerks, 99.0));
    }
    r.number("render.input_to_motion_ticks", percentile(&latency, 50.0));
}

/// `switch.*`: what the scripted network switch (`run --transport udp --switch-at`) cost
/// the clients that made it, and the reliable messages they numbered and the server
/// echoed across it.
fn switch_metrics<S: LabScene>(r: &mut Report, runs: &[ClientRun<S>]) {
    let switched: Vec<&super::connect::SwitchFigures> =
        runs.iter().filter_map(|c| c.switch.as_ref()).collect();
    if switched.is_empty() {
        return;
    }
    let back: Vec<f64> = switched.iter().filter_map(|s| s.back_ms).collect();
    r.set("switch.clients", Metric::Count(switched.len() as u64));
    r.number("switch.back_ms_mean", mean(&back));
    r.number("switch.back_ms_max", back.iter().copied().reduce(f64::max));
    let kept = switched.iter().filter(|s| s.player_kept).count();
    r.number(
        "switch.player_kept_pct",
        Some(kept as f64 * 100.0 / switched.len() as f64),
    );
    let echoes: Vec<&super::connect::EchoFigures> =
        runs.iter().filter_map(|c| c.echo.as_ref()).collect();
    if !echoes.is_empty() {
        r.set(
            "switch.messages_sent",
            Metric::Count(echoes.iter().map(|e| e.sent).sum()),
        );
        r.set(
            "switch.messages_lost",
            Metric::Count(echoes.iter().map(|e| e.lost).sum()),
        );
        r.set(
            "switch.messages_duplicated",
            Metric::Count(echoes.iter().map(|e| e.duplicated).sum()),
        );
    }
}
