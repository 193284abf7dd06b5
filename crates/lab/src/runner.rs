//! Runs a scene's server and clients in one process over the emulated network on a
//! virtual clock, and measures the run.

use crate::config::{RunConfig, ScriptChoice};
use crate::cpu::CpuTimer;
use crate::metrics::{Metric, Report, mean, percentile};
use crate::playback::{PolicyFigures, PolicyShadows};
use crate::remote_view::{RemoteView, dist_cm};
use crate::replication::{SnapshotReceiver, SnapshotSender, snapshot_metrics};
use lagless_core::interpolation::{
    DelayPolicy, InterpolationBuffer, InterpolationConfig, InterpolationStats, Pose,
};
use lagless_core::{
    ClientId, ClientSession, ClientStats, ErrorSmoother, PredictionStats, Predictor, Reconciled,
    Rollback, ServerClientStats, ServerConfig, ServerSession, Tick,
};
use lagless_netem::{ConfigError, Duplex, PROFILE_NAMES, derive_seed, profile};
use lagless_scenes::cubes::delta::SnapshotCodec;
use lagless_scenes::cubes::predict::{CubeRollback, PredictConfig, PredictMode};
use lagless_scenes::cubes::script::{InputScript, SCRIPT_NAMES, script_by_name};
use lagless_scenes::cubes::snapshot::CubeSnapshot;
use lagless_scenes::cubes::{BodyState, CubeInput, CubeScene, CubeSceneConfig, PlayerId};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Per-packet UDP/IP header bytes counted in bandwidth figures (LAB.md).
pub const UDP_IP_HEADER_BYTES: u64 = 28;

/// Why a run could not start.
#[derive(Debug, Error)]
pub enum RunError {
    /// The scene name is not known.
    #[error("unknown scene {0:?} (known: cubes)")]
    UnknownScene(String),
    /// The profile name is not known.
    #[error("unknown network profile {0:?} (known: {known})", known = PROFILE_NAMES.join(", "))]
    UnknownProfile(String),
    /// The script name is not known.
    #[error("unknown script {0:?} (known: {known})", known = SCRIPT_NAMES.join(", "))]
    UnknownScript(String),
    /// The network settings are invalid.
    #[error("invalid network settings: {0}")]
    Net(#[from] ConfigError),
    /// Some other setting is out of range.
    #[error("invalid setting: {0}")]
    Invalid(String),
}

/// What a run produced: the report plus final states, for tests and tools.
pub struct RunOutcome {
    /// The metrics.
    pub report: Report,
    /// Each player's final authoritative state on the server.
    pub server_players: Vec<(PlayerId, BodyState)>,
    /// Every cube's final authoritative state on the server.
    pub server_cubes: Vec<BodyState>,
    /// The server's counters per client.
    pub server_stats: Vec<(ClientId, ServerClientStats)>,
    /// Each client's counters.
    pub client_stats: Vec<ClientStats>,
    /// The server tick reached.
    pub final_tick: Tick,
    /// Real time the run took.
    pub wall: Duration,
    /// Per policy in [`RunConfig::interpolation_shadows`], its figures on the same
    /// arrivals and frames as the real interpolation buffer (empty with one client).
    pub interpolation_shadows: Vec<PolicyFigures>,
}

#[derive(Clone, Copy)]
struct Frame {
    position: [f32; 3],
    shows: u32,
}

struct ClientSim {
    id: ClientId,
    player: PlayerId,
    session: ClientSession<CubeInput>,
    link: Duplex,
    script: Box<dyn InputScript + Send>,
    view: Option<BodyState>,
    /// Server tick of the state `view` came from.
    view_tick: u32,
    /// Per rendered frame, keyed by the state tick it stands for: the own player's
    /// rendered position and the newest server tick whose effects the frame shows.
    rendered: BTreeMap<u32, Frame>,
    inputs: Vec<(Tick, CubeInput)>,
    down_bytes: u64,
    up_bytes: u64,
    down_per_second: Vec<u64>,
    snapshots: SnapshotReceiver,
    packet_errors: u64,
    prediction: Option<Prediction>,
    /// The other players, shown interpolated from snapshots (in id order).
    remote: InterpolationBuffer<Vec<Pose>>,
    /// How the other players looked: error and jerk, frame by frame.
    remote_view: RemoteView,
    /// Other delay policies, fed what `remote` is fed.
    shadows: PolicyShadows,
}

/// A client's prediction machinery and what it measured.
struct Prediction {
    game: CubeRollback,
    predictor: Predictor<CubeRollback>,
    smoother: ErrorSmoother,
    /// Naive full-world baseline, timed on a sample of rollbacks.
    shadow: Option<CubeRollback>,
    reconcile_ms: Vec<f64>,
    naive_ms: Vec<f64>,
    /// Our cost on the same rollbacks the shadow was timed on.
    paired_ms: Vec<f64>,
    predicted_cubes: Vec<f64>,
    /// An essential part (players only) held back until the next tick, in case the full
    /// snapshot of the same tick completes meanwhile: a full one corrects the cubes too.
    pending_essential: Option<(Tick, CubeSnapshot)>,
}

/// Runs `config`, calling `progress` with the simulated seconds elapsed now and then.
pub fn run(config: &RunConfig, progress: &mut dyn FnMut(f64)) -> Result<RunOutcome, RunError> {
    if config.scene != "cubes" {
        return Err(RunError::UnknownScene(config.scene.clone()));
    }
    let base =
        profile(&config.profile).ok_or_else(|| RunError::UnknownProfile(config.profile.clone()))?;
    if !(config.seconds > 0.0 && config.seconds <= 24.0 * 3600.0) {
        return Err(RunError::Invalid(format!(
            "seconds must be in (0, 86400], got {}",
            config.seconds
        )));
    }
    crate::config::check_link_changes(&config.link_changes, config.seconds)
        .map_err(RunError::Invalid)?;
    if config.clients == 0 || config.clients > 256 {
        return Err(RunError::Invalid(format!(
            "clients must be 1..=256, got {}",
            config.clients
        )));
    }
    let tick_hz = config.server.tick_hz;
    if config.client.tick_hz != tick_hz {
        return Err(RunError::Invalid(
            "client and server tick rates differ".into(),
        ));
    }
    if config.snapshot_hz == 0 || config.snapshot_hz > tick_hz {
        return Err(RunError::Invalid(format!(
            "snapshot rate must be 1..={tick_hz} Hz, got {}",
            config.snapshot_hz
        )));
    }
    let (up_cfg, down_cfg) = config.net.apply(&base);

    let scene_config = CubeSceneConfig {
        tick_hz,
        ..CubeSceneConfig::default()
    };
    let mut scene = CubeScene::new(scene_config);
    let server_config = ServerConfig {
        snapshot_interval: (tick_hz as f64 / f64::from(config.snapshot_hz))
            .round()
            .max(1.0) as u32,
        ..config.server.clone()
    };
    let mut server = ServerSession::<CubeInput>::new(server_config);
    let codec = SnapshotCodec::new(scene_config.quantize.unwrap_or_default()).with_tick_hz(tick_hz);
    let mut sender = SnapshotSender::new(config.snapshot_codec, codec);
    let remote_config = config.playback.buffer_config(tick_hz);
    let mut clients = Vec::new();
    for k in 0..config.clients {
        let id = ClientId::from(k) + 1;
        let player = k + 1;
        server
            .add_client(id)
            .map_err(|e| RunError::Invalid(e.to_string()))?;
        scene.add_player(player);
        let script_seed = derive_seed(config.seed, 1000 + u64::from(k));
        let script = match &config.script {
            ScriptChoice::Named(name) => script_by_name(name, script_seed, &scene_config)
                .ok_or_else(|| RunError::UnknownScript(name.clone()))?,
            ScriptChoice::Custom(f) => f(script_seed),
        };
        clients.push(ClientSim {
            id,
            player,
            session: ClientSession::new(config.client.clone()),
            link: Duplex::new(
                up_cfg.clone(),
                down_cfg.clone(),
                derive_seed(config.seed, u64::from(k)),
            )?,
            script,
            view: None,
            view_tick: 0,
            rendered: BTreeMap::new(),
            inputs: Vec::new(),
            down_bytes: 0,
            up_bytes: 0,
            down_per_second: Vec::new(),
            snapshots: SnapshotReceiver::new(config.snapshot_codec, codec),
            packet_errors: 0,
            remote: InterpolationBuffer::new(InterpolationConfig {
                policy: config.interpolation,
                ..remote_config
            }),
            remote_view: RemoteView::default(),
            shadows: PolicyShadows::new(
                remote_config,
                if config.clients > 1 {
                    &config.interpolation_shadows
                } else {
                    &[]
                },
            ),
            prediction: config.prediction.then(|| Prediction {
                game: CubeRollback::new(player, scene_config, config.predict),
                predictor: Predictor::new(config.prediction_limits),
                smoother: ErrorSmoother::new(config.smoothing),
                shadow: (config.naive_sample > 0
                    && config.predict.mode == PredictMode::PredictedSet)
                    .then(|| {
                        CubeRollback::new(
                            player,
                            scene_config,
                            PredictConfig {
                                mode: PredictMode::FullWorld,
                                ..config.predict
                            },
                        )
                    }),
                reconcile_ms: Vec::new(),
                naive_ms: Vec::new(),
                paired_ms: Vec::new(),
                predicted_cubes: Vec::new(),
                pending_essential: None,
            }),
        });
    }
    let client_ids: Vec<ClientId> = clients.iter().map(|c| c.id).collect();
    let player_index: BTreeMap<ClientId, usize> =
        clients.iter().enumerate().map(|(i, c)| (c.id, i)).collect();
    let cube_start: Vec<BodyState> = scene.cube_states();
    // Authoritative own-player position per client, indexed by state tick.
    let mut auth: Vec<Vec<[f32; 3]>> = clients
        .iter()
        .map(|c| vec![pos(scene.player_state(c.player))])
        .collect();
    let mut tick_ms = Vec::new();
    let mut awake_max = 0usize;

    let wall_start = Instant::now();
    let end = Duration::from_secs_f64(config.seconds);
    let mut now = Duration::ZERO;
    let mut next_progress = Duration::ZERO;
    let mut changes = config.link_changes.iter().peekable();
    while now <= end {
        while let Some(change) = changes.next_if(|c| c.at <= now) {
            for c in &mut clients {
                c.link
                    .reconfigure(change.link.clone(), change.link.clone())?;
            }
        }
        for c in &mut clients {
            while let Some(p) = c.link.up.poll(now) {
                // Rejected packets are counted by the session; nothing else to do.
                let _ = server.handle_packet(c.id, now, &p);
            }
        }

        server.update(now);
        while let Some(step) = server.next_tick() {
            let started = CpuTimer::start();
            let inputs: Vec<(PlayerId, CubeInput)> = step
                .inputs
                .iter()
                .filter_map(|(id, input)| Some((clients[*player_index.get(id)?].player, (*input)?)))
                .collect();
            scene.step(&inputs);
            if server.snapshot_due() {
                sender
                    .send(&scene, &mut server, &client_ids, now)
                    .map_err(|e| RunError::Invalid(format!("snapshot: {e}")))?;
            }
            tick_ms.push(started.ms());
            for (i, c) in clients.iter().enumerate() {
                auth[i].push(pos(scene.player_state(c.player)));
            }
            awake_max = awake_max.max(scene.awake_cube_count());
        }
        while let Some((id, bytes)) = server.poll_transmit() {
            if let Some(&i) = player_index.get(&id) {
                let c = &mut clients[i];
                let size = bytes.len() as u64 + UDP_IP_HEADER_BYTES;
                c.down_bytes += size;
                let second = now.as_secs() as usize;
                if c.down_per_second.len() <= second {
                    c.down_per_second.resize(second + 1, 0);
                }
                c.down_per_second[second] += size;
                c.link.down.send(now, bytes);
            }
        }

        for c in &mut clients {
            while let Some(p) = c.link.down.poll(now) {
                if c.session.handle_packet(now, &p).is_err() {
                    c.packet_errors += 1;
                }
            }
            while let Some(snap) = c.session.poll_snapshot() {
                let Some(s) = c.snapshots.receive(&snap, &mut c.session) else {
                    continue;
                };
                if let Some(p) = s.player(c.player) {
                    c.view = Some(*p);
                    c.view_tick = snap.tick.0;
                }
                let others: Vec<Pose> = s
                    .players
                    .iter()
                    .filter(|(id, _)| *id != c.player)
                    .map(|(_, b)| {
                        Pose::new(b.position.to_array(), b.rotation.to_array())
                            .with_velocity(b.linvel.to_array(), b.angvel.to_array())
                    })
                    .collect();
                if !others.is_empty() {
                    // The essential part and the full snapshot of a tick both carry the
                    // players: the second is a duplicate, refused and counted.
                    let _ = c.remote.push(snap.tick, now, others);
                    c.shadows.push(snap.tick, now);
                }
                if let Some(pr) = &mut c.prediction {
                    if snap.essential {
                        pr.pending_essential = Some((snap.tick, s));
                        continue;
                    }
                    if pr
                        .pending_essential
                        .as_ref()
                        .is_some_and(|(t, _)| *t <= snap.tick)
                    {
                        pr.pending_essential = None;
                    }
                    pr.reconcile(snap.tick, &s, &c.session, config.naive_sample);
                }
            }
            c.session.update(now);
            let period = Duration::from_secs(1) / tick_hz;
            while let Some(tick) = c.session.next_tick() {
                if let Some(pr) = &mut c.prediction {
                    if let Some((t, s)) = pr.pending_essential.take() {
                        pr.reconcile(t, &s, &c.session, config.naive_sample);
                    }
                }
                let observed = match &c.prediction {
                    Some(pr) if pr.predictor.present().is_some() => pr.game.player_state(),
                    _ => c.view,
                };
                let input = c.script.input(u64::from(tick.0), observed.as_ref());
                c.session.set_input(tick, input);
                c.inputs.push((tick, input));
                if config.clients > 1 {
                    c.shadows.sample(now);
                    if let Some(shown) = c.remote.sample_at(now) {
                        // Client k drives player k + 1: the others, in id order.
                        let others: Vec<&[[f32; 3]]> = (0..auth.len())
                            .filter(|&j| j as u32 + 1 != c.player)
                            .map(|j| auth[j].as_slice())
                            .collect();
                        c.remote_view.record(now, &shown, &others, period);
                    }
                }
                // The frame after tick t stands for state t + 1: predicted, or else the
                // newest server state the client has.
                let predicted = match &mut c.prediction {
                    Some(pr) => {
                        let session = &c.session;
                        let inputs = |t: Tick| session.input(t);
                        pr.predictor.predict(&mut pr.game, tick, input, &inputs);
                        pr.smoother.decay(period);
                        pr.predicted_cubes.push(pr.game.predicted_cubes() as f64);
                        match (pr.predictor.present(), pr.game.player_state()) {
                            (Some(present), Some(state)) => Some(Frame {
                                position: pr
                                    .smoother
                                    .apply(state.position.to_array(), state.rotation.to_array())
                                    .0,
                                shows: present.0,
                            }),
                            _ => None,
                        }
                    }
                    None => None,
                };
                let frame = predicted.or(c.view.map(|v| Frame {
                    position: v.position.to_array(),
                    shows: c.view_tick,
                }));
                if let Some(frame) = frame {
                    c.rendered.insert(tick.0 + 1, frame);
                }
            }
            while let Some(p) = c.session.poll_transmit(now) {
                c.up_bytes += p.len() as u64 + UDP_IP_HEADER_BYTES;
                c.link.up.send(now, p);
            }
        }

        if now >= next_progress {
            progress(now.as_secs_f64());
            next_progress += Duration::from_millis(100);
        }
        now += config.clock_step;
    }
    progress(config.seconds);
    let wall = wall_start.elapsed();
    let shadows = shadow_figures(&clients);

    let report = build_report(
        config,
        &clients,
        &auth,
        &tick_ms,
        &server,
        &scene,
        &cube_start,
        awake_max,
        wall,
        &sender,
        &shadows,
    );
    Ok(RunOutcome {
        report,
        server_players: scene
            .players()
            .into_iter()
            .filter_map(|p| scene.player_state(p).map(|s| (p, s)))
            .collect(),
        server_cubes: scene.cube_states(),
        server_stats: clients
            .iter()
            .filter_map(|c| server.client_stats(c.id).map(|s| (c.id, s.clone())))
            .collect(),
        client_stats: clients.iter().map(|c| c.session.stats()).collect(),
        final_tick: server.current_tick(),
        wall,
        interpolation_shadows: shadows,
    })
}

impl Prediction {
    /// Reconciles with the server's state for `tick`, timing it and smoothing the
    /// correction. On every `naive_every`th rollback (0: never) it also times the
    /// full-world baseline on the same work.
    fn reconcile(
        &mut self,
        tick: Tick,
        snapshot: &CubeSnapshot,
        session: &ClientSession<CubeInput>,
        naive_every: u32,
    ) {
        let inputs = |t: Tick| session.input(t);
        let naive =
            naive_every > 0 && self.predictor.stats().rollbacks % u64::from(naive_every) == 0;
        let before = self.game.player_state();
        let started = CpuTimer::start();
        let outcome = self
            .predictor
            .reconcile(&mut self.game, tick, snapshot, &inputs);
        let ms = started.ms();
        let depth = match outcome {
            Reconciled::RolledBack { depth } | Reconciled::Resynced { depth } if depth > 0 => depth,
            _ => return,
        };
        self.reconcile_ms.push(ms);
        if let (Some(old), Some(new)) = (before, self.game.player_state()) {
            self.smoother.correct(
                old.position.to_array(),
                old.rotation.to_array(),
                new.position.to_array(),
                new.rotation.to_array(),
            );
        }
        if let (true, Some(shadow)) = (naive, &mut self.shadow) {
            // The naive way: load every body from the snapshot, replay the whole world.
            let started = CpuTimer::start();
            shadow.load(snapshot, None);
            let mut t = tick;
            for _ in 0..depth {
                shadow.advance(t, inputs(t).unwrap_or_default());
                t = t.next();
            }
            self.naive_ms.push(started.ms());
            self.paired_ms.push(ms);
        }
    }
}

fn pos(state: Option<BodyState>) -> [f32; 3] {
    state.map_or([f32::NAN; 3], |s| s.position.to_array())
}

/// Ticks from a key press to the first rendered frame that can show its effect.
///
/// A press of a movement key at tick `t` (after a tick with none) is applied by the server
/// in the step to state `t + 1`, so it can first be seen in a frame showing state `t + 1`
/// or later. The frame after processing tick `u` is labelled `u + 1`; the latency is the
/// first such label whose frame shows state `>= t + 1`, minus `t + 1`. With prediction the
/// frame after the press already shows it (0); without, it waits for the server's reply.
/// Measured causally rather than by watching positions, which a stall in snapshots would
/// fool.
fn input_to_motion(c: &ClientSim) -> Vec<f64> {
    let mut out = Vec::new();
    let mut prev = CubeInput::NONE;
    for &(tick, input) in &c.inputs {
        let pressed = input.moves() && !prev.moves();
        prev = input;
        if !pressed {
            continue;
        }
        let due = tick.0 + 1;
        if let Some((&label, _)) = c.rendered.range(due..).find(|(_, f)| f.shows >= due) {
            out.push(f64::from(label - due));
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn build_report(
    config: &RunConfig,
    clients: &[ClientSim],
    auth: &[Vec<[f32; 3]>],
    tick_ms: &[f64],
    server: &ServerSession<CubeInput>,
    scene: &CubeScene,
    cube_start: &[BodyState],
    awake_max: usize,
    wall: Duration,
    sender: &SnapshotSender,
    shadows: &[PolicyFigures],
) -> Report {
    let mut r = Report::default();
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
    r.number("seconds", Some(config.seconds));
    r.set("tick_hz", Metric::Count(u64::from(config.server.tick_hz)));
    r.set("snapshot_hz", Metric::Count(u64::from(config.snapshot_hz)));
    r.set("clients", Metric::Count(u64::from(config.clients)));
    r.set("seed", Metric::Count(config.seed));

    let secs = config.seconds;
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

    let mut errors = Vec::new();
    let mut jerks = Vec::new();
    let mut latency = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let a = &auth[i];
        let mut prev: Option<(u32, [f32; 3], [f32; 3])> = None;
        for (&t, frame) in &c.rendered {
            let p = frame.position;
            let Some(&truth) = a.get(t as usize) else {
                prev = None;
                continue;
            };
            errors.push(dist_cm(p, truth));
            if let Some((pt, pp, ptruth)) = prev {
                if pt + 1 == t {
                    let rendered = [p[0] - pp[0], p[1] - pp[1], p[2] - pp[2]];
                    let actual = [
                        truth[0] - ptruth[0],
                        truth[1] - ptruth[1],
                        truth[2] - ptruth[2],
                    ];
                    jerks.push(dist_cm(rendered, actual));
                }
            }
            prev = Some((t, p, truth));
        }
        latency.extend(input_to_motion(c));
    }
    r.number("render.error_cm_p99", percentile(&errors, 99.0));
    r.number("render.jerk_cm_p99", percentile(&jerks, 99.0));
    r.number("render.input_to_motion_ticks", percentile(&latency, 50.0));

    let preds: Vec<&Prediction> = clients
        .iter()
        .filter_map(|c| c.prediction.as_ref())
        .collect();
    if !preds.is_empty() {
        let sum = |f: fn(&PredictionStats) -> u64| {
            preds.iter().map(|p| f(p.predictor.stats())).sum::<u64>()
        };
        r.set("prediction.rollbacks", Metric::Count(sum(|s| s.rollbacks)));
        let deepest = preds
            .iter()
            .map(|p| u64::from(p.predictor.stats().max_rollback_ticks))
            .max()
            .unwrap_or(0);
        r.set("prediction.rollback_ticks_max", Metric::Count(deepest));
        let ms: Vec<f64> = preds
            .iter()
            .flat_map(|p| p.reconcile_ms.iter().copied())
            .collect();
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
        let cubes: Vec<f64> = preds
            .iter()
            .flat_map(|p| p.predicted_cubes.iter().copied())
            .collect();
        r.number("prediction.predicted_cubes_mean", mean(&cubes));
        let naive: Vec<f64> = preds
            .iter()
            .flat_map(|p| p.naive_ms.iter().copied())
            .collect();
        let paired: Vec<f64> = preds
            .iter()
            .flat_map(|p| p.paired_ms.iter().copied())
            .collect();
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
        let snaps = preds.iter().map(|p| p.smoother.snaps()).sum();
        r.set("render.smoothing_snaps", Metric::Count(snaps));
    }

    if config.clients > 1 {
        // Remote players, shown through the adaptive interpolation buffer.
        let delays: Vec<f64> = clients
            .iter()
            .filter_map(|c| c.remote.stats().mean_delay_secs())
            .map(|s| s * 1000.0)
            .collect();
        r.number("interpolation.delay_ms_mean", mean(&delays));
        // A percentage of each client's buffer, averaged over clients.
        let per_client = |pct: fn(&InterpolationStats) -> f64| {
            let values: Vec<f64> = clients.iter().map(|c| pct(c.remote.stats())).collect();
            mean(&values)
        };
        r.number(
            "interpolation.underrun_pct",
            per_client(|s| s.underrun_ratio() * 100.0),
        );
        r.number(
            "interpolation.stretched_pct",
            per_client(|s| s.stretched_ratio() * 100.0),
        );
        r.number(
            "interpolation.speed_error_pct",
            per_client(|s| s.speed_error() * 100.0),
        );
        // Changes of link each client's buffer saw, worse or better: on a link that does
        // not change, how often it was fooled.
        r.number(
            "interpolation.link_shifts",
            per_client(|s| s.link_shifts() as f64),
        );
        // The 99th percentile of every client's frames together.
        let pooled_p99 = |of: fn(&RemoteView) -> &[f64]| {
            let values: Vec<f64> = clients
                .iter()
                .flat_map(|c| of(&c.remote_view).iter().copied())
                .collect();
            percentile(&values, 99.0)
        };
        r.number(
            "interpolation.error_cm_p99",
            pooled_p99(|v| v.error_cm.as_slice()),
        );
        r.number(
            "interpolation.jerk_cm_p99",
            pooled_p99(|v| v.jerk_cm.as_slice()),
        );
        r.set(
            "interpolation.policy",
            Metric::Text(crate::playback::policy_label(&config.interpolation)),
        );
        // The classic buffer on the very same arrivals: the like-for-like baseline.
        let classic = shadows.iter().find(|f| f.policy == DelayPolicy::CLASSIC);
        if let Some(f) = classic {
            r.number("interpolation.fixed3.delay_ms_mean", Some(f.delay_ms_mean));
            r.number("interpolation.fixed3.underrun_pct", Some(f.underrun_pct));
            let cut = mean(&delays)
                .filter(|_| f.delay_ms_mean > 0.0)
                .map(|d| (1.0 - d / f.delay_ms_mean) * 100.0);
            r.number("interpolation.delay_cut_pct", cut);
        }
    }

    r.number("server.tick_ms_p50", percentile(tick_ms, 50.0));
    r.number("server.tick_ms_p99", percentile(tick_ms, 99.0));
    let (mut starved, mut fed, mut late, mut rejected) = (0u64, 0u64, 0u64, 0u64);
    for c in clients {
        if let Some(s) = server.client_stats(c.id) {
            starved += s.ticks_starved;
            fed += s.ticks_with_input;
            late += s.inputs_late;
            rejected += s.packets_rejected;
        }
    }
    r.number(
        "server.input_starved_pct",
        (starved + fed > 0).then(|| starved as f64 * 100.0 / (starved + fed) as f64),
    );
    r.set("server.inputs_late", Metric::Count(late));
    r.set("server.packets_rejected", Metric::Count(rejected));

    let rtts: Vec<f64> = clients
        .iter()
        .filter_map(|c| c.session.rtt().smoothed())
        .map(|d| d.as_secs_f64() * 1000.0)
        .collect();
    r.number("sync.rtt_ms", mean(&rtts));
    let leads: Vec<f64> = clients
        .iter()
        .map(|c| c.session.target_lead_ticks())
        .collect();
    r.number("sync.lead_ticks", mean(&leads));
    let slack: Vec<f64> = clients
        .iter()
        .filter_map(|c| c.session.input_slack())
        .collect();
    r.number("sync.input_slack_ticks", mean(&slack));
    let corr: Vec<f64> = clients
        .iter()
        .map(|c| c.session.lead_correction())
        .collect();
    r.number("sync.lead_correction_ticks", mean(&corr));
    let stats: Vec<ClientStats> = clients.iter().map(|c| c.session.stats()).collect();
    r.set(
        "sync.clock_jumps",
        Metric::Count(stats.iter().map(|s| s.clock_jumps).sum()),
    );
    r.set(
        "client.snapshots_received",
        Metric::Count(stats.iter().map(|s| s.snapshots_received).sum()),
    );
    r.set(
        "client.snapshots_abandoned",
        Metric::Count(stats.iter().map(|s| s.snapshots_abandoned).sum()),
    );
    r.set(
        "client.packets_rejected",
        Metric::Count(
            clients
                .iter()
                .map(|c| c.packet_errors + c.snapshots.stats.decode_errors)
                .sum(),
        ),
    );
    let receivers: Vec<&SnapshotReceiver> = clients.iter().map(|c| &c.snapshots).collect();
    snapshot_metrics(&mut r, config, sender, &receivers, mean(&down));

    let moved = scene
        .cube_states()
        .iter()
        .zip(cube_start)
        .filter(|(now, start)| now.position.distance(start.position) > 0.5)
        .count();
    r.set("cubes.moved", Metric::Count(moved as u64));
    r.set("cubes.awake_max", Metric::Count(awake_max as u64));
    r.number("lab.wall_s", Some(wall.as_secs_f64()));
    r.number("lab.speedup", Some(secs / wall.as_secs_f64().max(1e-9)));
    r
}

/// Each shadow policy's figures, averaged over clients.
fn shadow_figures(clients: &[ClientSim]) -> Vec<PolicyFigures> {
    let sets: Vec<&PolicyShadows> = clients.iter().map(|c| &c.shadows).collect();
    PolicyShadows::mean_figures(&sets)
}
