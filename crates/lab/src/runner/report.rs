//! Turns what a run measured into the [`Report`], under the metric names of `docs/metrics.md`.

use super::Sim;
use super::client::{ClientSim, PredictionFigures};
use crate::character_view::CharacterView;
use crate::metrics::{Histogram, Metric, Report, mean, percentile};
use crate::playback::PolicyFigures;
use crate::remote_view::RemoteView;
use crate::replication::{SnapshotSender, snapshot_metrics};
use crate::scene::{LabScene, RenderedFrames};
use lagless_core::interpolation::{DelayPolicy, InterpolationStats};
use lagless_core::{ClientStats, PredictionStats};
use lagless_replication::Server;
use lagless_replication::deadreckoning::DrReceiverStats;
use std::time::Duration;

/// The report of a finished run that took `wall` of real time; `shadows` are the shadow
/// policies' figures.
pub(super) fn build<S: LabScene>(
    sim: &Sim<S>,
    wall: Duration,
    shadows: &[PolicyFigures],
) -> Report {
    let config = sim.config;
    let mut r = Report::default();
    what_ran(&mut r, sim);
    let down_kbps = net(&mut r, sim);
    render(&mut r, sim);
    prediction(&mut r, &sim.clients);
    interpolation(&mut r, sim, shadows);
    server(&mut r, sim);
    sync(&mut r, &sim.clients);
    super::link_report::link(&mut r, sim);
    let decoders: Vec<_> = sim.clients.iter().map(ClientSim::decode_figures).collect();
    let ran = crate::config::RunConfig {
        seconds: sim.seconds,
        ..config.clone()
    };
    snapshot_metrics(&mut r, &ran, &sim.sender, &sim.server, &decoders, down_kbps);
    let used = sim.clients.iter().map(ClientSim::essential_used).sum();
    r.set("snapshot.essential_used", Metric::Count(used));
    let deferred = sim.clients.iter().map(ClientSim::states_deferred).sum();
    r.set("prediction.states_deferred", Metric::Count(deferred));

    dead_reckoning(&mut r, &sim.clients, &sim.sender, &sim.server, sim.seconds);
    scene_metrics(&mut r, &sim.scene, &sim.clients);
    r.number("lab.wall_s", Some(wall.as_secs_f64()));
    r.number(
        "lab.speedup",
        Some(sim.seconds / wall.as_secs_f64().max(1e-9)),
    );
    r
}

/// `scene`, `profile`, `seconds` and the other settings that say what ran.
fn what_ran<S: LabScene>(r: &mut Report, sim: &Sim<S>) {
    let config = sim.config;
    r.set("scene", Metric::Text(config.scene.clone()));
    r.set("profile", Metric::Text(config.profile.clone()));
    if !config.link_changes.is_empty() {
        let changes: Vec<String> = config
            .link_changes
            .iter()
            .map(|c| format!("{} s: {}", c.at.as_secs_f64(), c.profile))
            .collect();
        r.set("link_changes", Metric::Text(changes.join(", ")));
    }
    if !config.outages.is_empty() {
        let outages: Vec<String> = config.outages.iter().map(|o| o.label()).collect();
        r.set("outages", Metric::Text(outages.join(", ")));
    }
    r.number("seconds", Some(sim.seconds));
    r.set("tick_hz", Metric::Count(u64::from(config.server.tick_hz)));
    r.set("snapshot_hz", Metric::Count(u64::from(config.snapshot_hz)));
    r.set("clients", Metric::Count(u64::from(config.clients)));
    r.set("seed", Metric::Count(config.seed));
    // The whole network setup, so a run on a trace or with overrides is told apart from
    // a plain profile run by its file alone.
    r.set("network", Metric::Text(format!("{:?}", config.net)));
}

/// `net.*`; returns the mean downlink rate per client, kbit/s.
fn net<S: LabScene>(r: &mut Report, sim: &Sim<S>) -> Option<f64> {
    let secs = sim.seconds;
    let clients = &sim.clients;
    let kbps = |bytes: u64| bytes as f64 * 8.0 / 1000.0 / secs;
    let down: Vec<f64> = clients.iter().map(|c| kbps(c.down_bytes)).collect();
    let up: Vec<f64> = clients.iter().map(|c| kbps(c.up_bytes)).collect();
    // Whole seconds only: the last, partial second would understate the rate.
    let whole = secs.floor() as usize;
    let windows: Vec<f64> = clients
        .iter()
        .flat_map(|c| {
            c.down_per_second
                .iter()
                .take(whole)
                .map(|b| *b as f64 * 8.0 / 1000.0)
        })
        .collect();
    r.number("net.down_kbps_mean", mean(&down));
    let delivered: Vec<f64> = clients.iter().map(|c| kbps(c.delivered_bytes)).collect();
    r.number("net.down_delivered_kbps_mean", mean(&delivered));
    r.number("net.down_kbps_p95", percentile(&windows, 95.0));
    r.number("net.up_kbps_mean", mean(&up));
    let (mut sent, mut dropped) = (0u64, 0u64);
    for c in clients {
        for l in [&c.link.up, &c.link.down] {
            sent += l.stats().sent_packets;
            dropped += l.stats().dropped_packets();
        }
    }
    r.number(
        "net.loss_pct",
        (sent > 0).then(|| dropped as f64 * 100.0 / sent as f64),
    );
    if sim.config.net.trace.is_some() || sim.config.net.trace_up.is_some() {
        let outages = super::trace_outages(sim.config);
        r.set("net.trace_outages", Metric::Count(outages.len() as u64));
    }
    mean(&down)
}

/// `feel.*`: what the player pays end to end. `feel.view_age_ms_mean` is how far behind
/// the server's present the others were shown (each client's frames averaged, then the
/// clients); `feel.latency_ms_mean` adds `input.delay_ms_mean`, the wait from sampling an
/// input to the server applying it: together, how long before what one player does is
/// seen by another. Needs `input.delay_ms_mean` already in `r` (the sync probe's).
pub(crate) fn feel<S: LabScene>(r: &mut Report, clients: &[ClientSim<S>]) {
    let ages: Vec<f64> = clients
        .iter()
        .filter(|c| c.remote_view.view_age_frames > 0)
        .map(|c| c.remote_view.view_age_ms_sum / c.remote_view.view_age_frames as f64)
        .collect();
    let age = mean(&ages);
    r.number("feel.view_age_ms_mean", age);
    let input = r.get_f64("input.delay_ms_mean");
    r.number("feel.latency_ms_mean", input.zip(age).map(|(i, a)| i + a));
}

/// `render.*`: the own player's frames against the server's truth for the same tick.
fn render<S: LabScene>(r: &mut Report, sim: &Sim<S>) {
    let mut errors = Vec::new();
    let mut jerks = Vec::new();
    let mut latency = Vec::new();
    for (c, a) in sim.clients.iter().zip(&sim.auth.players) {
        c.render_errors(a, &mut errors, &mut jerks);
        latency.extend(c.input_to_motion());
    }
    r.number("render.error_cm_p99", percentile(&errors, 99.0));
    r.number("render.jerk_cm_p99", percentile(&jerks, 99.0));
    r.number("render.input_to_motion_ticks", percentile(&latency, 50.0));
}

/// `prediction.*` (and `render.smoothing_snaps`), when the clients predict.
pub(crate) fn prediction<S: LabScene>(r: &mut Report, clients: &[ClientSim<S>]) {
    let preds: Vec<PredictionFigures<'_>> = clients
        .iter()
        .filter_map(ClientSim::prediction_figures)
        .collect();
    if preds.is_empty() {
        return;
    }
    let sum = |f: fn(&PredictionStats) -> u64| preds.iter().map(|p| f(p.stats)).sum::<u64>();
    let pooled = |of: for<'a> fn(&PredictionFigures<'a>) -> &'a [f64]| -> Vec<f64> {
        preds.iter().flat_map(|p| of(p).iter().copied()).collect()
    };
    r.set("prediction.rollbacks", Metric::Count(sum(|s| s.rollbacks)));
    let deepest = preds
        .iter()
        .map(|p| u64::from(p.stats.max_rollback_ticks))
        .max()
        .unwrap_or(0);
    r.set("prediction.rollback_ticks_max", Metric::Count(deepest));
    let ms = pooled(|p| p.reconcile_ms);
    r.number("prediction.reconcile_ms_p50", percentile(&ms, 50.0));
    r.number("prediction.reconcile_ms_p99", percentile(&ms, 99.0));
    r.set(
        "prediction.reconciles",
        Metric::Count(sum(|s| s.reconciles)),
    );
    r.set("prediction.resyncs", Metric::Count(sum(|s| s.resyncs)));
    let replayed = sum(|s| s.replayed_ticks) as f64;
    let rollbacks = sum(|s| s.rollbacks) as f64;
    r.number(
        "prediction.rollback_ticks_mean",
        (rollbacks > 0.0).then(|| replayed / rollbacks),
    );
    r.number(
        "prediction.predicted_cubes_mean",
        mean(&pooled(|p| p.predicted_cubes)),
    );
    let naive = pooled(|p| p.naive_ms);
    let paired = pooled(|p| p.paired_ms);
    r.set(
        "prediction.naive_samples",
        Metric::Count(naive.len() as u64),
    );
    r.number(
        "prediction.naive_reconcile_ms_p50",
        percentile(&naive, 50.0),
    );
    r.number(
        "prediction.naive_reconcile_ms_p99",
        percentile(&naive, 99.0),
    );
    let ratio = |p: f64| Some(percentile(&naive, p)? / percentile(&paired, p)?.max(1e-9));
    r.number("prediction.naive_ratio_p50", ratio(50.0));
    r.number("prediction.naive_ratio_p99", ratio(99.0));
    let snaps = preds.iter().map(|p| p.snaps).sum();
    r.set("render.smoothing_snaps", Metric::Count(snaps));
}

/// `interpolation.*` of the clients' buffers: delay, underruns, warps, and how the
/// interpolated entities looked against the server's truth. Returns the mean delay, ms.
pub(crate) fn interpolation_buffers<S: LabScene>(
    r: &mut Report,
    clients: &[ClientSim<S>],
) -> Option<f64> {
    let delays: Vec<f64> = clients
        .iter()
        .filter_map(|c| c.interpolation_stats().mean_delay_secs())
        .map(|s| s * 1000.0)
        .collect();
    r.number("interpolation.delay_ms_mean", mean(&delays));
    // A percentage of each client's buffer, averaged over clients.
    let per_client = |pct: fn(&InterpolationStats) -> f64| {
        let values: Vec<f64> = clients
            .iter()
            .map(|c| pct(c.interpolation_stats()))
            .collect();
        mean(&values)
    };
    r.number(
        "interpolation.underrun_pct",
        per_client(|s| s.underrun_ratio() * 100.0),
    );
    let chosen: Vec<(Option<f64>, Option<f64>)> =
        clients.iter().map(ClientSim::underrun_choice).collect();
    r.number(
        "interpolation.underrun_target_pct",
        mean(
            &chosen
                .iter()
                .filter_map(|c| Some(c.0? * 100.0))
                .collect::<Vec<_>>(),
        ),
    );
    r.number(
        "feel.underrun_tick_cost_cm",
        mean(
            &chosen
                .iter()
                .filter_map(|c| Some(c.1? * 100.0))
                .collect::<Vec<_>>(),
        ),
    );
    r.number(
        "interpolation.stretched_pct",
        per_client(|s| s.stretched_ratio() * 100.0),
    );
    r.number(
        "interpolation.speed_error_pct",
        per_client(|s| s.speed_error() * 100.0),
    );
    // Changes of link each client's buffer saw, worse or better: on a link that does not
    // change, how often it was fooled.
    r.number(
        "interpolation.link_shifts",
        per_client(|s| s.link_shifts() as f64),
    );
    // The 99th percentile of every client's frames together.
    let pooled_p99 = |of: fn(&RemoteView) -> &Histogram| {
        let mut all = Histogram::default();
        for c in clients {
            all.merge(of(&c.remote_view));
        }
        all.percentile(99.0)
    };
    r.number("interpolation.error_cm_p99", pooled_p99(|v| &v.error_cm));
    r.number(
        "interpolation.near_error_cm_p99",
        pooled_p99(|v| &v.near_error_cm),
    );
    r.number("interpolation.jerk_cm_p99", pooled_p99(|v| &v.jerk_cm));
    let (seen, unseen) = clients.iter().fold((0, 0), |(s, u), c| {
        (s + c.remote_view.seen, u + c.remote_view.unseen)
    });
    r.number(
        "interpolation.unseen_pct",
        (seen + unseen > 0).then(|| unseen as f64 * 100.0 / (seen + unseen) as f64),
    );
    mean(&delays)
}

/// `interpolation.*`: the other players, shown through each client's interpolation
/// buffer, and the classic buffer on the very same arrivals.
fn interpolation<S: LabScene>(r: &mut Report, sim: &Sim<S>, shadows: &[PolicyFigures]) {
    interpolation_with_shadows(r, &sim.clients, &sim.config.interpolation, shadows);
}

/// `interpolation.*` of `clients` shown with `policy`, beside the shadow policies'
/// figures on the same arrivals.
pub(crate) fn interpolation_with_shadows<S: LabScene>(
    r: &mut Report,
    clients: &[ClientSim<S>],
    policy: &DelayPolicy,
    shadows: &[PolicyFigures],
) {
    let delay_ms_mean = interpolation_buffers(r, clients);
    r.set(
        "interpolation.policy",
        Metric::Text(crate::playback::policy_label(policy)),
    );
    let classic = shadows.iter().find(|f| f.policy == DelayPolicy::CLASSIC);
    if let Some(f) = classic {
        r.number("interpolation.fixed3.delay_ms_mean", Some(f.delay_ms_mean));
        r.number("interpolation.fixed3.underrun_pct", Some(f.underrun_pct));
        let cut = delay_ms_mean
            .filter(|_| f.delay_ms_mean > 0.0)
            .map(|d| (1.0 - d / f.delay_ms_mean) * 100.0);
        r.number("interpolation.delay_cut_pct", cut);
    }
}

/// `server.*`: CPU per tick, and how the clients' inputs fared.
fn server<S: LabScene>(r: &mut Report, sim: &Sim<S>) {
    r.number("server.tick_ms_p50", percentile(&sim.tick_ms, 50.0));
    r.number("server.tick_ms_p99", percentile(&sim.tick_ms, 99.0));
    r.number(
        "server.tick_wall_ms_p50",
        percentile(&sim.tick_wall_ms, 50.0),
    );
    r.number(
        "server.tick_wall_ms_p99",
        percentile(&sim.tick_wall_ms, 99.0),
    );
    r.number("server.physics_ms_p99", percentile(&sim.physics_ms, 99.0));
    // Per snapshot tick: capturing the world and encoding every client's snapshot.
    r.number("server.encode_ms_p99", percentile(&sim.encode_ms, 99.0));
    let (mut starved, mut fed, mut late, mut rejected) = (0u64, 0u64, 0u64, 0u64);
    let mut handed_late = 0u64;
    for c in &sim.clients {
        if let Some(s) = sim.server.client_stats(c.id) {
            starved += s.ticks_starved;
            fed += s.ticks_with_input;
            late += s.inputs_late;
            handed_late += s.inputs_handed_late;
            rejected += s.packets_rejected;
        }
    }
    r.number(
        "server.input_starved_pct",
        (starved + fed > 0).then(|| starved as f64 * 100.0 / (starved + fed) as f64),
    );
    r.set("server.inputs_late", Metric::Count(late));
    r.set("server.inputs_handed_late", Metric::Count(handed_late));
    r.set("server.packets_rejected", Metric::Count(rejected));
}

/// `sync.*` (the clients' clocks) and `client.*` (what they received and refused).
pub(crate) fn sync<S: LabScene>(r: &mut Report, clients: &[ClientSim<S>]) {
    let per_client = |f: &dyn Fn(&ClientSim<S>) -> Option<f64>| {
        mean(&clients.iter().filter_map(f).collect::<Vec<_>>())
    };
    r.number(
        "sync.rtt_ms",
        per_client(&|c| Some(c.session().rtt().smoothed()?.as_secs_f64() * 1000.0)),
    );
    r.number(
        "sync.lead_ticks",
        per_client(&|c| Some(c.session().target_lead_ticks())),
    );
    r.number(
        "sync.input_slack_ticks",
        per_client(&|c| c.session().input_slack()),
    );
    r.number(
        "sync.lead_correction_ticks",
        per_client(&|c| Some(c.session().lead_correction())),
    );
    // The adaptive lead's own state, to tell why it leads as it does.
    let adaptive = |c: &ClientSim<S>| c.session().clock_sync().adaptive().cloned();
    r.number(
        "sync.lead_margin_ticks",
        per_client(&|c| Some(adaptive(c)?.margin())),
    );
    r.set(
        "sync.lead_shifts",
        Metric::Count(
            clients
                .iter()
                .filter_map(|c| Some(adaptive(c)?.shifts()))
                .sum(),
        ),
    );
    r.set(
        "sync.lead_outliers",
        Metric::Count(
            clients
                .iter()
                .filter_map(|c| Some(adaptive(c)?.outliers()))
                .sum(),
        ),
    );
    r.number(
        "sync.lead_starvation_chosen_pct",
        per_client(&|c| Some(adaptive(c)?.chosen_share() * 100.0)),
    );
    r.number(
        "feel.lead_tick_cost_cm",
        per_client(&|c| Some(c.felt_costs().per_lead_tick()? * 100.0)),
    );
    r.number(
        "feel.wrong_tick_cost_cm",
        per_client(&|c| Some(c.felt_costs().per_wrong_tick()? * 100.0)),
    );
    let stats: Vec<ClientStats> = clients.iter().map(|c| c.session().stats()).collect();
    let sum = |f: fn(&ClientStats) -> u64| Metric::Count(stats.iter().map(f).sum());
    let (starved, wrong) = (
        stats.iter().map(|s| s.ticks_starved).sum::<u64>(),
        stats.iter().map(|s| s.guesses_wrong).sum::<u64>(),
    );
    r.number(
        "input.guesses_wrong_pct",
        (starved > 0).then(|| wrong as f64 * 100.0 / starved as f64),
    );
    r.set("sync.clock_jumps", sum(|s| s.clock_jumps));
    r.set("sync.uplink_outages", sum(|s| s.uplink_outages));
    r.set("client.snapshots_received", sum(|s| s.snapshots_received));
    r.set("client.snapshots_abandoned", sum(|s| s.snapshots_abandoned));
    r.set(
        "client.packets_rejected",
        Metric::Count(clients.iter().map(ClientSim::refused).sum()),
    );
}

/// `deadreckoning.*` (docs/metrics.md, section Dead reckoning), when the scene has walking
/// characters: how they were shown against the truth at the same instant, per client and
/// then averaged over clients, and what the dead-reckoning receivers refused.
/// The scene's own metrics: the server's ([`LabScene::report`]), its clients' predicted
/// worlds', both joined, and the frames the clients rendered.
pub(crate) fn scene_metrics<S: LabScene>(r: &mut Report, scene: &S, clients: &[ClientSim<S>]) {
    scene.report(r);
    let worlds: Vec<&S::World> = clients
        .iter()
        .filter_map(ClientSim::predicted_world)
        .collect();
    S::report_worlds(&worlds, r);
    scene.report_joint(&worlds, r);
    if S::RECORDS_FRAMES {
        let frames: Vec<&RenderedFrames> = clients.iter().map(|c| &c.frames).collect();
        scene.report_frames(&frames, r);
    }
}

/// `deadreckoning.*`: how the characters were shown (with their truth), what was sent
/// and what the receivers refused.
pub(crate) fn dead_reckoning<S: LabScene>(
    r: &mut Report,
    clients: &[ClientSim<S>],
    sender: &SnapshotSender<S>,
    server: &Server<S::Input>,
    seconds: f64,
) {
    let views: Vec<&CharacterView> = clients
        .iter()
        .filter_map(|c| c.characters.as_ref().map(|(_, _, v)| v))
        .collect();
    if views.is_empty() {
        return;
    }
    let per_client = |f: fn(&CharacterView) -> Option<f64>| {
        mean(&views.iter().filter_map(|v| f(v)).collect::<Vec<_>>())
    };
    r.number(
        "deadreckoning.error_cm_mean",
        per_client(|v| v.error_mean.mean()),
    );
    r.number(
        "deadreckoning.error_cm_p99",
        per_client(|v| v.error_cm.percentile(99.0)),
    );
    r.number(
        "deadreckoning.jerk_cm_p99",
        per_client(|v| v.jerk_cm.percentile(99.0)),
    );
    let (seen, unseen) = views
        .iter()
        .fold((0, 0), |(s, u), v| (s + v.seen, u + v.unseen));
    r.number(
        "deadreckoning.unseen_pct",
        (seen + unseen > 0).then(|| unseen as f64 * 100.0 / (seen + unseen) as f64),
    );
    let Some(sent) = sender.dr_stats(server) else {
        r.set("deadreckoning.mode", Metric::Text("interpolation".into()));
        return;
    };
    r.set("deadreckoning.mode", Metric::Text("deadreckoning".into()));
    if let Some(c) = sender.dead_reckoning() {
        let steering = format!("{:?}", c.receiver.steering).to_lowercase();
        r.set("deadreckoning.steering", Metric::Text(steering));
    }
    let secs = seconds;
    let n = clients.len().max(1) as f64;
    r.number(
        "deadreckoning.messages_per_s",
        Some(sent.messages as f64 / secs / n),
    );
    r.number(
        "deadreckoning.kbps_mean",
        Some(sent.bits as f64 / 1000.0 / secs / n),
    );
    if let Some(s) = server.dead_reckoning().map(|d| d.stats()) {
        // Why messages became due, all characters together (each then goes to every
        // client): which part of the rate is momentum changes, resends, sync, idle.
        for (trigger, n) in &s.due {
            let name = format!("{trigger:?}").to_lowercase();
            r.set(&format!("deadreckoning.due_{name}"), Metric::Count(*n));
        }
    }
    let mut t = DrReceiverStats::default();
    for c in clients {
        if let Some(dr) = c.dead_reckoning() {
            let s = dr.stats();
            t.accepted += s.accepted;
            t.malformed += s.malformed;
            t.non_finite += s.non_finite;
            t.bad_position += s.bad_position;
            t.bad_speed += s.bad_speed;
            t.bad_interval += s.bad_interval;
            t.bad_lag += s.bad_lag;
            t.unknown_id += s.unknown_id;
            t.stale += s.stale;
            t.tick_far_off += s.tick_far_off;
        }
    }
    r.set("deadreckoning.accepted", Metric::Count(t.accepted));
    r.set("deadreckoning.rejected", Metric::Count(t.rejected()));
    for (name, n) in [
        ("malformed", t.malformed),
        ("non_finite", t.non_finite),
        ("bad_position", t.bad_position),
        ("bad_speed", t.bad_speed),
        ("bad_interval", t.bad_interval),
        ("bad_lag", t.bad_lag),
        ("unknown_id", t.unknown_id),
        ("stale", t.stale),
        ("tick_far_off", t.tick_far_off),
    ] {
        r.set(&format!("deadreckoning.rejected_{name}"), Metric::Count(n));
    }
}
