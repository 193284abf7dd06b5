//! One simulated client: its session, link, input script, prediction and the buffer that
//! shows the other players, with what it measured.

use super::UDP_IP_HEADER_BYTES;
use crate::character_view::{CharacterTruth, CharacterView};
use crate::config::RunConfig;
use crate::cpu::CpuTimer;
use crate::playback::PolicyShadows;
use crate::remote_view::{RemoteView, Track};
use crate::replication::SnapshotReceiver;
use crate::runner::game::GamePipe;
use crate::scene::{LabScene, PlayerId, RenderedFrame, RenderedFrames, Script};
use lagless_core::interpolation::{DelayPolicy, InterpolationBuffer, InterpolationConfig, Pose};
use lagless_core::{
    ClientId, ClientSession, ErrorSmoother, Predictor, Reconciled, Rollback, SmoothingConfig, Tick,
};
use lagless_netem::Duplex;
use std::collections::BTreeMap;
use std::time::Duration;

/// The server's truth, one position per state tick: every player's (client `k` drives
/// player `k + 1`, at index `k`) and every other entity's ([`LabScene::others`]).
#[derive(Default)]
pub(crate) struct Truth {
    pub(crate) players: Vec<Track>,
    pub(crate) others: Vec<Track>,
    /// The walking characters ([`LabScene::characters`]), with the time of each record.
    pub(crate) characters: CharacterTruth,
    /// The characters' entity ids, in [`LabScene::characters`]' order.
    pub(crate) character_ids: Vec<u32>,
    /// Over a real clock, the instant the characters' record times count from (`None`
    /// on the virtual clock, where everyone's time is the same).
    pub(crate) epoch: Option<std::time::Instant>,
    /// Over a real clock in one process, the probe of input delay and lead the server
    /// and every client feed on the server's clock (the virtual-clock runner holds its
    /// own).
    pub(crate) probe: Option<std::sync::Arc<std::sync::Mutex<crate::input_buffer::SyncProbe>>>,
}

/// How long after the link's return frames still count as the return's, not as live
/// play (`render.error_cm_p99_live`).
pub(crate) const LIVE_AFTER_RETURN: Duration = Duration::from_secs(1);

/// A rendered frame of the own player.
#[derive(Clone, Copy)]
pub(crate) struct OwnFrame {
    pub(crate) position: [f32; 3],
    /// The newest server tick whose effects the frame shows.
    pub(super) shows: u32,
}

pub(crate) struct ClientSim<S: LabScene> {
    pub(crate) id: ClientId,
    pub(crate) player: PlayerId,
    pub(crate) session: ClientSession<S::Input>,
    pub(crate) link: Duplex,
    setup: S::Setup,
    script: Box<dyn Script<S>>,
    /// When set, the input of every tick instead of the script's (`lagless view`'s
    /// keyboard); the script is not asked meanwhile.
    pub(crate) manual: Option<S::Input>,
    /// The own player as the newest server state has it: what the client shows with
    /// prediction off.
    pub(crate) view: Option<S::Seen>,
    /// Server tick of the state `view` came from.
    view_tick: u32,
    /// Per rendered frame, keyed by the state tick it stands for: the own player's
    /// rendered position and the newest server tick whose effects the frame shows.
    pub(crate) rendered: BTreeMap<u32, OwnFrame>,
    /// The rendered frames (labels as in `rendered`) shown while the link was not live,
    /// or within a second of its return: left out of `render.error_cm_p99_live`.
    pub(crate) not_live: std::collections::BTreeSet<u32>,
    /// The public client's link events: (lab time, state entered, silent since).
    pub(crate) link_events: Vec<(Duration, lagless_replication::LinkState, Option<Duration>)>,
    inputs: Vec<(Tick, S::Input)>,
    pub(crate) down_bytes: u64,
    /// Bytes that reached the client (with UDP/IP headers).
    pub(crate) delivered_bytes: u64,
    pub(crate) up_bytes: u64,
    pub(crate) down_per_second: Vec<u64>,
    /// How far in the past the others were shown, per client tick: (seconds on the
    /// client's clock, ms behind its estimate of the server's time), for `--plot`.
    pub(crate) interpolation_delays: Vec<(f64, f64)>,
    pub(crate) snapshots: SnapshotReceiver<S>,
    pub(crate) packet_errors: u64,
    pub(crate) prediction: Option<Prediction<S>>,
    /// Everything the client does not predict, shown interpolated from snapshots: the
    /// other players (in id order), then every other entity.
    pub(crate) remote: InterpolationBuffer<Vec<Pose>>,
    /// How they looked: error and jerk, frame by frame.
    pub(crate) remote_view: RemoteView,
    /// Other delay policies, fed what `remote` is fed.
    pub(crate) shadows: PolicyShadows,
    /// Every rendered frame, for the scene's own metrics (with
    /// [`LabScene::RECORDS_FRAMES`] only).
    pub(crate) frames: RenderedFrames,
    /// The newest interpolated sample of the others (kept with
    /// [`LabScene::RECORDS_FRAMES`] or [`ClientSim::keep_shown`] only).
    pub(crate) last_shown: Vec<Pose>,
    /// Keep [`ClientSim::last_shown`] even when the scene records no frames (`lagless
    /// view` draws it).
    pub(crate) keep_shown: bool,
    /// The walking characters as shown, when the scene has any: their ids (in
    /// [`LabScene::characters`]' order), where they sit in the interpolated frame when
    /// they travel in snapshots, and how they looked.
    pub(crate) characters: Option<(Vec<u32>, Option<usize>, CharacterView)>,
    /// What to add to this client's clock to read the characters' truth (a client over
    /// a real clock started after the server).
    pub(crate) truth_offset: Duration,
    /// With the delta codec, the public client a game runs (decoding, prediction,
    /// smoothing); `session`, `snapshots` and `prediction` serve the plain codec alone.
    pub(crate) game: Option<Box<GamePipe<S>>>,
}

/// What a client's prediction measured, from either pipeline.
pub(crate) struct PredictionFigures<'a> {
    pub(crate) stats: &'a lagless_core::PredictionStats,
    pub(crate) reconcile_ms: &'a [f64],
    pub(crate) naive_ms: &'a [f64],
    pub(crate) paired_ms: &'a [f64],
    pub(crate) predicted_cubes: &'a [f64],
    pub(crate) snaps: u64,
}

/// A client's prediction machinery and what it measured.
pub(crate) struct Prediction<S: LabScene> {
    pub(crate) game: S::World,
    pub(crate) predictor: Predictor<S::World>,
    pub(crate) smoother: ErrorSmoother,
    /// Naive full-world baseline, timed on a sample of rollbacks.
    shadow: Option<S::World>,
    pub(crate) reconcile_ms: Vec<f64>,
    pub(crate) naive_ms: Vec<f64>,
    /// Our cost on the same rollbacks the shadow was timed on.
    pub(super) paired_ms: Vec<f64>,
    pub(super) predicted_cubes: Vec<f64>,
    /// An essential part (players only) held back until the next tick, in case the full
    /// snapshot of the same tick completes meanwhile: a full one corrects the cubes too.
    pending_essential: Option<(Tick, S::Known)>,
    /// One smoother per entry of the others' list, for those rendered from the
    /// predicted world ([`LabScene::render_predicted`]).
    others_smoothers: Vec<ErrorSmoother>,
    smoothing: SmoothingConfig,
    /// The player this client drives, and how many there are.
    own: PlayerId,
    players: PlayerId,
}

impl<S: LabScene> ClientSim<S> {
    /// Client `id`, driving `player`, over `link`.
    pub(crate) fn new(
        config: &RunConfig,
        (id, player): (ClientId, PlayerId),
        link: Duplex,
        script: Box<dyn Script<S>>,
        setup: &S::Setup,
    ) -> Result<Self, super::RunError> {
        let remote_config = config.playback.buffer_config(config.server.tick_hz);
        let delta = config.snapshot_codec == crate::config::SnapshotCodecChoice::Delta;
        let game = if delta {
            let world = S::world(setup, player, config, false).ok_or_else(|| {
                super::RunError::Invalid("the scene has no predicted world".into())
            })?;
            Some(Box::new(GamePipe::new(config, setup, player, world)?))
        } else {
            None
        };
        Ok(Self {
            id,
            player,
            session: ClientSession::new(config.client.clone()),
            link,
            prediction: (config.prediction && !delta)
                .then(|| Prediction::new(config, setup, player, config.smoothing)),
            setup: setup.clone(),
            script,
            manual: None,
            view: None,
            view_tick: 0,
            rendered: BTreeMap::new(),
            not_live: Default::default(),
            link_events: Vec::new(),
            inputs: Vec::new(),
            down_bytes: 0,
            delivered_bytes: 0,
            up_bytes: 0,
            down_per_second: Vec::new(),
            interpolation_delays: Vec::new(),
            snapshots: SnapshotReceiver::new(config.snapshot_codec, setup, config.server.tick_hz),
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
            frames: RenderedFrames {
                player,
                frames: BTreeMap::new(),
            },
            last_shown: Vec::new(),
            keep_shown: false,
            characters: None,
            truth_offset: Duration::ZERO,
            game,
        })
    }

    /// The client's session (the public client's with the delta codec).
    pub(crate) fn session(&self) -> &ClientSession<S::Input> {
        match &self.game {
            Some(g) => g.client.session(),
            None => &self.session,
        }
    }

    /// The replicated entities as the client holds them.
    pub(crate) fn registry(&self) -> &lagless_replication::ReplicationClient {
        match &self.game {
            Some(g) => g.client.replication(),
            None => &self.snapshots.layer,
        }
    }

    /// The dead-reckoning receiver, when characters travel so.
    pub(crate) fn dead_reckoning(&self) -> Option<&lagless_replication::deadreckoning::DrReceiver> {
        match &self.game {
            Some(g) => g.client.dead_reckoning(),
            None => self.snapshots.dr.as_ref().map(|(dr, _)| dr),
        }
    }

    /// The predicted world, when the client predicts.
    pub(crate) fn predicted_world(&self) -> Option<&S::World> {
        match &self.game {
            Some(g) if g.client.world().predicting() => Some(&g.client.world().game),
            Some(_) => None,
            None => self.prediction.as_ref().map(|p| &p.game),
        }
    }

    /// The newest tick the predicted world has simulated.
    pub(crate) fn present(&self) -> Option<Tick> {
        match &self.game {
            Some(g) if g.client.world().predicting() => g.client.predicted_tick(),
            Some(_) => None,
            None => self.prediction.as_ref()?.predictor.present(),
        }
    }

    /// What the client's prediction measured, when it predicts.
    pub(crate) fn prediction_figures(&self) -> Option<PredictionFigures<'_>> {
        match &self.game {
            Some(g) if g.client.world().predicting() => Some(PredictionFigures {
                stats: g.client.prediction_stats(),
                reconcile_ms: &g.reconcile_ms,
                naive_ms: &g.naive_ms,
                paired_ms: &g.paired_ms,
                predicted_cubes: &g.predicted_cubes,
                snaps: g.client.smoothing_snaps(),
            }),
            Some(_) => None,
            None => self.prediction.as_ref().map(|p| PredictionFigures {
                stats: p.predictor.stats(),
                reconcile_ms: &p.reconcile_ms,
                naive_ms: &p.naive_ms,
                paired_ms: &p.paired_ms,
                predicted_cubes: &p.predicted_cubes,
                snaps: p.smoother.snaps(),
            }),
        }
    }

    /// Replaces, in `others` ([`LabScene::shown`]'s order), the entities rendered from
    /// the predicted world, smoothed, when the client predicts.
    pub(crate) fn render_others(&mut self, others: &mut [Pose]) {
        if let Some(g) = &self.game {
            g.render_others(others);
        }
        if let Some(pr) = &mut self.prediction {
            if pr.predictor.present().is_some() {
                pr.render_others(others);
            }
        }
    }

    /// The interpolation buffer's counters (the public client's with the delta codec).
    pub(crate) fn interpolation_stats(&self) -> &lagless_core::interpolation::InterpolationStats {
        match &self.game {
            Some(g) => g.client.interpolation().stats(),
            None => self.remote.stats(),
        }
    }

    /// The underrun share the interpolation policy aims at now (the felt one's choice),
    /// and what an underrun tick was measured to cost (metres); the delta pipeline only.
    pub(crate) fn underrun_choice(&self) -> (Option<f64>, Option<f64>) {
        match &self.game {
            Some(g) => (
                g.client.interpolation().target_underrun(),
                g.client.underrun_costs().per_underrun_tick(),
            ),
            None => (None, None),
        }
    }

    /// How far behind the newest snapshot the others are shown.
    pub(crate) fn interpolation_delay(&self) -> Option<Duration> {
        match &self.game {
            Some(g) => g.client.interpolation().delay_behind_newest(),
            None => self.remote.delay_behind_newest(),
        }
    }

    /// Packets and snapshots refused.
    /// What a tick of lead and a late input cost this player, as the library's client
    /// measured them (the delta pipeline only).
    pub(crate) fn felt_costs(&self) -> Option<&lagless_replication::FeltCosts> {
        self.game.as_ref().map(|g| g.client.felt_costs())
    }

    pub(crate) fn refused(&self) -> u64 {
        match &self.game {
            Some(g) => g.packet_errors,
            None => self.packet_errors + self.snapshots.stats.decode_errors,
        }
    }

    /// The decoder's figures: view mismatches, deltas against a missing baseline, and
    /// the CPU time per decode.
    /// Essential parts the client reconciled with because the rest of their snapshot
    /// came too late (the public `Client`'s count; none with the plain baseline).
    /// Server states prediction left for a newer one after an outage (the library's
    /// client only).
    pub(crate) fn states_deferred(&self) -> u64 {
        self.game
            .as_ref()
            .map_or(0, |g| g.client.stats().states_deferred)
    }

    pub(crate) fn essential_used(&self) -> u64 {
        self.game
            .as_ref()
            .map_or(0, |g| g.client.stats().essential_used)
    }

    pub(crate) fn decode_figures(&self) -> (u64, u64, &crate::metrics::Histogram) {
        match &self.game {
            Some(g) => {
                let s = g.client.replication().stats();
                (s.view_mismatches, s.missing_baseline, &g.decode_us)
            }
            None => (
                self.snapshots.layer.stats().view_mismatches,
                self.snapshots.stats.missing_baseline,
                &self.snapshots.stats.decode_us,
            ),
        }
    }

    /// Turns prediction on or off from now on (`lagless view`'s knob). Turned on, it
    /// starts afresh with `smoothing` and catches up at the next snapshot, as a client
    /// that has just joined; what the old one measured is dropped with it.
    pub(crate) fn set_prediction(
        &mut self,
        config: &RunConfig,
        on: bool,
        smoothing: SmoothingConfig,
    ) {
        if let Some(g) = &mut self.game {
            g.set_prediction(on, S::player_entity(&self.setup, self.player));
            g.client.set_smoothing(smoothing);
            return;
        }
        if on != self.prediction.is_some() {
            self.prediction =
                on.then(|| Prediction::new(config, &self.setup, self.player, smoothing));
        }
    }

    /// Smooths corrections with `smoothing` from now on (a zero half-life: off). The
    /// offsets being hidden now are dropped, so the next frame may jump by them.
    pub(crate) fn set_smoothing(&mut self, smoothing: SmoothingConfig) {
        if let Some(g) = &mut self.game {
            g.client.set_smoothing(smoothing);
        }
        if let Some(pr) = &mut self.prediction {
            pr.smoothing = smoothing;
            pr.smoother = ErrorSmoother::new(smoothing);
            pr.others_smoothers.clear();
        }
    }

    /// Shows the others with delay policy `policy` from now on. The buffer starts empty
    /// (its estimates belong to the old policy), so playback waits for two snapshots.
    pub(crate) fn set_interpolation(&mut self, config: &RunConfig, policy: DelayPolicy) {
        let remote_config = config.playback.buffer_config(config.server.tick_hz);
        if let Some(g) = &mut self.game {
            g.client.set_interpolation(InterpolationConfig {
                policy,
                ..remote_config
            });
        }
        self.remote = InterpolationBuffer::new(InterpolationConfig {
            policy,
            ..remote_config
        });
    }

    /// Measures how the characters `ids` are shown (`deadreckoning.*`): through the
    /// dead-reckoning receiver if the snapshots carry one, else at `slot` onwards in
    /// the interpolated frame.
    pub(crate) fn watch_characters(&mut self, ids: Vec<u32>, slot: Option<usize>) {
        self.characters = Some((ids, slot, CharacterView::default()));
    }

    /// Puts a packet from the server on the downlink, counting its bytes.
    pub(crate) fn send_down(&mut self, now: Duration, bytes: Vec<u8>) {
        let size = bytes.len() as u64 + UDP_IP_HEADER_BYTES;
        self.down_bytes += size;
        count_per_second(&mut self.down_per_second, now, size);
        self.link.down.send(now, bytes);
    }

    /// One step of the virtual clock: take in what arrived, run the ticks that are due,
    /// send what the session has. `auth` holds every player's authoritative position per
    /// state tick, to measure how the others were shown.
    pub(crate) fn step(&mut self, now: Duration, config: &RunConfig, auth: &Truth) {
        self.receive(now, config);
        match &mut self.game {
            Some(g) => {
                g.client.update(now);
                while let Some(e) = g.client.poll_link_event() {
                    self.link_events.push((now, e.state, e.silent_since));
                }
            }
            None => self.session.update(now),
        }
        loop {
            let next = match &mut self.game {
                Some(g) => g.client.next_tick(),
                None => self.session.next_tick(),
            };
            let Some(tick) = next else { break };
            self.tick(now, tick, config, auth);
        }
        loop {
            let next = match &mut self.game {
                Some(g) => g.client.poll_transmit(now),
                None => self.session.poll_transmit(now),
            };
            let Some(p) = next else { break };
            self.up_bytes += p.len() as u64 + UDP_IP_HEADER_BYTES;
            self.link.up.send(now, p);
        }
    }

    /// Takes in what arrived with the delta codec: the public client decodes,
    /// acknowledges and reconciles; the lab shows a new snapshot's list through its
    /// buffer and keeps the own player as the server has it.
    fn receive_game(&mut self, now: Duration, config: &RunConfig) {
        let Some(g) = &mut self.game else {
            return;
        };
        while let Some(p) = self.link.down.poll(now) {
            self.delivered_bytes += p.len() as u64 + UDP_IP_HEADER_BYTES;
            g.receive(now, &p, config.naive_sample);
            let newest = g.client.replication().newest();
            let Some(tick) = newest.filter(|_| newest != g.newest) else {
                continue;
            };
            g.newest = newest;
            let (player, players, setup) = (self.player, config.clients, &self.setup);
            let _ = (players, setup);
            let (whole, seen) = g.client.world().known_of(g.client.replication(), |k| {
                (S::is_whole(k), S::seen_in(k, player))
            });
            if let Some(p) = seen {
                self.view = Some(p);
                self.view_tick = tick.0;
            }
            // The client's own buffer took the snapshot; the shadow policies get it too.
            if whole {
                self.shadows.push(tick, now);
            }
        }
    }

    /// Takes in the packets that arrived, and every snapshot they completed.
    fn receive(&mut self, now: Duration, config: &RunConfig) {
        if self.game.is_some() {
            self.receive_game(now, config);
            return;
        }
        while let Some(p) = self.link.down.poll(now) {
            self.delivered_bytes += p.len() as u64 + UDP_IP_HEADER_BYTES;
            if self.session.handle_packet(now, &p).is_err() {
                self.packet_errors += 1;
            }
        }
        while let Some(snap) = self.session.poll_snapshot() {
            let received = self.snapshots.receive_at(&snap, &mut self.session, now);
            if S::EVENTS_DOWN {
                let rtt = self.session.rtt().smoothed();
                for events in self.snapshots.events.drain(..) {
                    if let Some(pr) = &mut self.prediction {
                        S::events_received(&mut pr.game, &events, rtt);
                    }
                }
            }
            let Some(s) = received else {
                continue;
            };
            if let Some(p) = S::seen_in(&s, self.player) {
                self.view = Some(p);
                self.view_tick = snap.tick.0;
            }
            let shown: Vec<Pose> = S::shown(&self.setup, &s, self.player, config.clients);
            // Only a snapshot with the world (not a players-only essential part) shows
            // everything; the essential part's players come again in the full one.
            if S::is_whole(&s) {
                let _ = self.remote.push(snap.tick, now, shown);
                self.shadows.push(snap.tick, now);
            }
            if let Some(pr) = &mut self.prediction {
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
                pr.reconcile(snap.tick, &s, &self.session, config.naive_sample);
            }
        }
    }

    /// Client tick `tick`: input, the other players' frame, prediction, the own frame.
    fn tick(&mut self, now: Duration, tick: Tick, config: &RunConfig, auth: &Truth) {
        let period = Duration::from_secs(1) / config.server.tick_hz;
        if let Some(pr) = &mut self.prediction {
            if let Some((t, s)) = pr.pending_essential.take() {
                pr.reconcile(t, &s, &self.session, config.naive_sample);
            }
        }
        let predicted = match (self.present(), self.predicted_world()) {
            (Some(_), Some(world)) => S::predicted(world),
            _ => None,
        };
        // Sampled before the input (the same instant): a script aims at what it shows.
        let sampled = match &mut self.game {
            // What the public client renders now: the others as the scene lists them.
            Some(g) => g.sample_others(now, &self.setup, self.player, config.clients),
            None => self.remote.sample_at(now),
        };
        if let Some(s) = &sampled {
            self.script.view(self.player, s.render_tick, &s.value);
            if let Some(server) = self.session().server_position(now) {
                let hz = f64::from(config.server.tick_hz);
                let behind_ms = (server - s.render_tick) * 1000.0 / hz;
                self.interpolation_delays
                    .push((now.as_secs_f64(), behind_ms));
            }
        }
        let mut input = match self.manual {
            Some(input) => input,
            None => self
                .script
                .input(u64::from(tick.0), predicted.as_ref().or(self.view.as_ref())),
        };
        if let Some(pr) = &mut self.prediction {
            let render_tick = sampled.as_ref().map(|s| s.render_tick);
            S::complete_input(&mut pr.game, tick, render_tick, &mut input);
        }
        match &mut self.game {
            Some(g) => {
                // The world completes the input and shows the scene what was drawn.
                if let Some(s) = &sampled {
                    g.client.world_mut().shown.clone_from(&s.value);
                }
                g.client.tick(tick, input);
            }
            None => self.session.set_input(tick, input),
        }
        self.inputs.push((tick, input));
        if config.clients > 1 {
            self.shadows.sample(now);
        }
        if let Some((ids, slot, view)) = &mut self.characters {
            let hidden = [f32::NAN; 3];
            let dr = match &self.game {
                Some(g) => g.client.dead_reckoning(),
                None => self.snapshots.dr.as_ref().map(|(dr, _)| dr),
            };
            let shown: Vec<[f32; 3]> = match (dr, slot, &sampled) {
                (Some(dr), _, _) => ids
                    .iter()
                    .map(|&id| dr.shown(id, now).map_or(hidden, |s| s.position))
                    .collect(),
                (None, Some(slot), Some(frame)) => (0..ids.len())
                    .map(|j| frame.value.get(*slot + j).map_or(hidden, |p| p.position))
                    .collect(),
                _ => vec![hidden; ids.len()],
            };
            view.record(now + self.truth_offset, shown);
            view.judge(&auth.characters);
        }
        if let Some(shown) = sampled {
            // Client k drives player k + 1: the others, in id order, then the cubes.
            let players = &auth.players;
            let truth: Vec<&Track> = (0..players.len())
                .filter(|&j| j as u32 + 1 != self.player)
                .map(|j| &players[j])
                .chain(&auth.others)
                .collect();
            let own = players
                .get(self.player as usize - 1)
                .and_then(|p| p.last().copied());
            self.remote_view.record(now, &shown, &truth, period, own);
            if let Some(pr) = &mut self.prediction {
                S::show(&mut pr.game, tick, &shown.value);
            }
            if S::RECORDS_FRAMES || self.keep_shown {
                self.last_shown.clone_from(&shown.value);
            }
        }
        // The frame after tick t stands for state t + 1: predicted, or else the newest
        // server state the client has.
        let predicted = match &mut self.prediction {
            Some(pr) => {
                let session = &self.session;
                let inputs = |t: Tick| session.input(t);
                pr.predictor.predict(&mut pr.game, tick, input, &inputs);
                pr.smoother.decay(period);
                for s in &mut pr.others_smoothers {
                    s.decay(period);
                }
                pr.predicted_cubes
                    .push(S::predicted_entities(&pr.game) as f64);
                match (pr.predictor.present(), S::predicted(&pr.game)) {
                    (Some(present), Some(state)) => {
                        let pose = S::seen_pose(&state);
                        let (position, rotation) = pr.smoother.apply(pose.position, pose.rotation);
                        Some((
                            OwnFrame {
                                position,
                                shows: present.0,
                            },
                            Pose::new(position, rotation),
                        ))
                    }
                    _ => None,
                }
            }
            None => self.game.as_mut().and_then(|g| g.own_frame()),
        };
        let frame = predicted.or(self.view.as_ref().map(|v| {
            let pose = S::seen_pose(v);
            (
                OwnFrame {
                    position: pose.position,
                    shows: self.view_tick,
                },
                pose,
            )
        }));
        if let Some((frame, own)) = frame {
            self.rendered.insert(tick.0 + 1, frame);
            if !self.link_live(now) {
                self.not_live.insert(tick.0 + 1);
            }
            if S::RECORDS_FRAMES {
                let mut others = self.last_shown.clone();
                self.render_others(&mut others);
                self.frames
                    .frames
                    .insert(tick.0 + 1, RenderedFrame { own, others });
            }
        }
    }

    /// True when the link is live at `now` and came back (if ever) at least
    /// [`LIVE_AFTER_RETURN`] ago.
    fn link_live(&self, now: Duration) -> bool {
        use lagless_replication::LinkState;
        let Some(g) = &self.game else {
            return true;
        };
        let back = self
            .link_events
            .iter()
            .rev()
            .find(|(_, s, _)| *s == LinkState::Recovering)
            .map(|(at, _, _)| *at);
        g.client.link_state() == LinkState::Live
            && back.is_none_or(|b| now.saturating_sub(b) >= LIVE_AFTER_RETURN)
    }

    /// The own player's rendered frames against `track`, the server's position of that
    /// player per state tick (NaN where it had none): each frame's distance from the
    /// truth of the tick it stands for, and each frame's motion against the true motion
    /// since the previous tick's frame, in cm.
    pub(crate) fn render_errors(&self, track: &Track, errors: &mut Vec<f64>, jerks: &mut Vec<f64>) {
        let mut series = Vec::new();
        self.render_errors_at(track, &mut series, jerks);
        errors.extend(series.into_iter().map(|(_, e)| e));
    }

    /// [`Self::render_errors`]' errors with the state tick of each frame.
    pub(crate) fn render_error_series(&self, track: &Track) -> Vec<(u32, f64)> {
        let mut series = Vec::new();
        self.render_errors_at(track, &mut series, &mut Vec::new());
        series
    }

    fn render_errors_at(&self, track: &Track, errors: &mut Vec<(u32, f64)>, jerks: &mut Vec<f64>) {
        let mut prev: Option<(u32, [f32; 3], [f32; 3])> = None;
        for (&t, frame) in &self.rendered {
            let p = frame.position;
            let Some(&truth) = track.get(t as usize).filter(|x| x[0].is_finite()) else {
                prev = None;
                continue;
            };
            errors.push((t, crate::remote_view::dist_cm(p, truth)));
            if let Some((pt, pp, ptruth)) = prev {
                if pt + 1 == t {
                    let shown = [0, 1, 2].map(|i| p[i] - pp[i]);
                    let actual = [0, 1, 2].map(|i| truth[i] - ptruth[i]);
                    jerks.push(crate::remote_view::dist_cm(shown, actual));
                }
            }
            prev = Some((t, p, truth));
        }
    }

    /// Ticks from a key press to the first rendered frame that can show its effect.
    ///
    /// A press of a movement key at tick `t` (after a tick with none) is applied by the
    /// server in the step to state `t + 1`, so it can first be seen in a frame showing
    /// state `t + 1` or later. The frame after processing tick `u` is labelled `u + 1`;
    /// the latency is the first such label whose frame shows state `>= t + 1`, minus
    /// `t + 1`. With prediction the frame after the press already shows it (0); without,
    /// it waits for the server's reply. Measured causally rather than by watching
    /// positions, which a stall in snapshots would fool.
    pub(crate) fn input_to_motion(&self) -> Vec<f64> {
        let mut out = Vec::new();
        let mut prev = false;
        for &(tick, input) in &self.inputs {
            let moves = S::moves(&input);
            let pressed = moves && !prev;
            prev = moves;
            if !pressed {
                continue;
            }
            let due = tick.0 + 1;
            if let Some((&label, _)) = self.rendered.range(due..).find(|(_, f)| f.shows >= due) {
                out.push(f64::from(label - due));
            }
        }
        out
    }
}

impl<S: LabScene> Prediction<S> {
    /// A client's prediction of `player`, smoothing corrections with `smoothing`.
    fn new(
        config: &RunConfig,
        setup: &S::Setup,
        player: PlayerId,
        smoothing: SmoothingConfig,
    ) -> Self {
        Self {
            game: S::world(setup, player, config, false)
                .expect("every scene predicts its own player"),
            predictor: Predictor::new(config.prediction_limits),
            smoother: ErrorSmoother::new(smoothing),
            shadow: (config.naive_sample > 0)
                .then(|| S::world(setup, player, config, true))
                .flatten(),
            reconcile_ms: Vec::new(),
            naive_ms: Vec::new(),
            paired_ms: Vec::new(),
            predicted_cubes: Vec::new(),
            pending_essential: None,
            others_smoothers: Vec::new(),
            smoothing,
            own: player,
            players: config.clients,
        }
    }

    /// The others the predicted world renders, in [`LabScene::shown`]'s order (NaN
    /// positions for the ones it does not), as many as the others' list had last frame.
    fn predicted_others(&self) -> Vec<Pose> {
        let mut out =
            vec![Pose::new([f32::NAN; 3], [0.0, 0.0, 0.0, 1.0]); self.others_smoothers.len()];
        S::render_predicted(&self.game, self.own, self.players, &mut out);
        out
    }

    /// Replaces in `others` (interpolated, [`LabScene::shown`]'s order) the entities
    /// rendered from the predicted world, smoothed.
    pub(crate) fn render_others(&mut self, others: &mut [Pose]) {
        if self.others_smoothers.len() != others.len() {
            self.others_smoothers
                .resize(others.len(), ErrorSmoother::new(self.smoothing));
        }
        for (i, p) in self.predicted_others().into_iter().enumerate() {
            if p.position[0].is_finite() {
                let (position, rotation) = self.others_smoothers[i].apply(p.position, p.rotation);
                others[i] = Pose {
                    position,
                    rotation,
                    ..p
                };
            }
        }
    }

    /// Reconciles with the server's state for `tick`, timing it and smoothing the
    /// correction. On every `naive_every`th rollback (0: never) it also times the
    /// full-world baseline on the same work.
    fn reconcile(
        &mut self,
        tick: Tick,
        snapshot: &S::Known,
        session: &ClientSession<S::Input>,
        naive_every: u32,
    ) {
        let inputs = |t: Tick| session.input(t);
        let naive =
            naive_every > 0 && self.predictor.stats().rollbacks % u64::from(naive_every) == 0;
        let before = S::predicted(&self.game).map(|s| S::seen_pose(&s));
        let others_before = self.predicted_others();
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
        let after = S::predicted(&self.game).map(|s| S::seen_pose(&s));
        if let (Some(old), Some(new)) = (before, after) {
            self.smoother
                .correct(old.position, old.rotation, new.position, new.rotation);
        }
        let others_after = self.predicted_others();
        for ((s, old), new) in self
            .others_smoothers
            .iter_mut()
            .zip(&others_before)
            .zip(&others_after)
        {
            if old.position[0].is_finite() && new.position[0].is_finite() {
                s.correct(old.position, old.rotation, new.position, new.rotation);
            }
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

/// Adds `bytes` to the whole second of `now` in `per_second`.
pub(crate) fn count_per_second(per_second: &mut Vec<u64>, now: Duration, bytes: u64) {
    let second = now.as_secs() as usize;
    if per_second.len() <= second {
        per_second.resize(second + 1, 0);
    }
    per_second[second] += bytes;
}

/// A position, NaN when there is none.
pub(crate) fn pos(position: Option<[f32; 3]>) -> [f32; 3] {
    position.unwrap_or([f32::NAN; 3])
}
