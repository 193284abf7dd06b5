//! One simulated client: the public `Client` a game runs (through [`GamePipe`]), its
//! link and input script, and what the lab measures of how it felt.

use super::UDP_IP_HEADER_BYTES;
use crate::character_view::{CharacterTruth, CharacterView};
use crate::config::RunConfig;
use crate::playback::PolicyShadows;
use crate::remote_view::{RemoteView, Track};
use crate::runner::game::GamePipe;
use crate::scene::{LabScene, PlayerId, RenderedFrame, RenderedFrames, Script};
use lagless_core::interpolation::{DelayPolicy, InterpolationConfig, Pose};
use lagless_core::{ClientId, ClientSession, SmoothingConfig, Tick};
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
    /// How the others (everything the client does not predict) looked: error and jerk, frame by frame.
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
    /// The public client a game runs (decoding, prediction, smoothing, interpolation),
    /// and what the lab times around it.
    pub(crate) game: Box<GamePipe<S>>,
}

/// What a client's prediction measured.
pub(crate) struct PredictionFigures<'a> {
    pub(crate) stats: &'a lagless_core::PredictionStats,
    pub(crate) reconcile_ms: &'a [f64],
    pub(crate) naive_ms: &'a [f64],
    pub(crate) paired_ms: &'a [f64],
    pub(crate) predicted_cubes: &'a [f64],
    pub(crate) snaps: u64,
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
        let world = S::world(setup, player, config, false)
            .ok_or_else(|| super::RunError::Invalid("the scene has no predicted world".into()))?;
        let game = Box::new(GamePipe::new(config, setup, player, world)?);
        Ok(Self {
            id,
            player,
            link,
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

    /// The client's session.
    pub(crate) fn session(&self) -> &ClientSession<S::Input> {
        self.game.client.session()
    }

    /// The replicated entities as the client holds them.
    pub(crate) fn registry(&self) -> &lagless_replication::ReplicationClient {
        self.game.client.replication()
    }

    /// The dead-reckoning receiver, when characters travel so.
    pub(crate) fn dead_reckoning(&self) -> Option<&lagless_replication::deadreckoning::DrReceiver> {
        self.game.client.dead_reckoning()
    }

    /// The predicted world, when the client predicts.
    pub(crate) fn predicted_world(&self) -> Option<&S::World> {
        let world = self.game.client.world();
        world.predicting().then_some(&world.game)
    }

    /// The newest tick the predicted world has simulated.
    pub(crate) fn present(&self) -> Option<Tick> {
        let client = &self.game.client;
        client
            .world()
            .predicting()
            .then(|| client.predicted_tick())?
    }

    /// What the client's prediction measured, when it predicts.
    pub(crate) fn prediction_figures(&self) -> Option<PredictionFigures<'_>> {
        let g = &self.game;
        g.client.world().predicting().then(|| PredictionFigures {
            stats: g.client.prediction_stats(),
            reconcile_ms: &g.reconcile_ms,
            naive_ms: &g.naive_ms,
            paired_ms: &g.paired_ms,
            predicted_cubes: &g.predicted_cubes,
            snaps: g.client.smoothing_snaps(),
        })
    }

    /// Replaces, in `others` ([`LabScene::shown`]'s order), the entities rendered from
    /// the predicted world, smoothed, when the client predicts.
    pub(crate) fn render_others(&self, others: &mut [Pose]) {
        self.game.render_others(others);
    }

    /// The interpolation buffer's counters.
    pub(crate) fn interpolation_stats(&self) -> &lagless_core::interpolation::InterpolationStats {
        self.game.client.interpolation().stats()
    }

    /// The underrun share the interpolation policy aims at now (the felt one's choice),
    /// and what an underrun tick was measured to cost (metres).
    pub(crate) fn underrun_choice(&self) -> (Option<f64>, Option<f64>) {
        let client = &self.game.client;
        (
            client.interpolation().target_underrun(),
            client.underrun_costs().per_underrun_tick(),
        )
    }

    /// How far behind the newest snapshot the others are shown.
    pub(crate) fn interpolation_delay(&self) -> Option<Duration> {
        self.game.client.interpolation().delay_behind_newest()
    }

    /// What a tick of lead and a late input cost this player, as the library's client
    /// measured them.
    pub(crate) fn felt_costs(&self) -> &lagless_replication::FeltCosts {
        self.game.client.felt_costs()
    }

    /// Packets the client refused.
    pub(crate) fn refused(&self) -> u64 {
        self.game.packet_errors
    }

    /// Server states prediction left for a newer one after an outage.
    pub(crate) fn states_deferred(&self) -> u64 {
        self.game.client.stats().states_deferred
    }

    /// Essential parts the client reconciled with because the rest of their snapshot
    /// came too late.
    pub(crate) fn essential_used(&self) -> u64 {
        self.game.client.stats().essential_used
    }

    /// The decoder's figures: view mismatches, deltas against a missing baseline, and
    /// the CPU time per decode.
    pub(crate) fn decode_figures(&self) -> (u64, u64, &crate::metrics::Histogram) {
        let s = self.game.client.replication().stats();
        (s.view_mismatches, s.missing_baseline, &self.game.decode_us)
    }

    /// Turns prediction on or off from now on (`lagless view`'s knob), smoothing with
    /// `smoothing`: off, the own player is shown as the newest server state has it.
    pub(crate) fn set_prediction(&mut self, on: bool, smoothing: SmoothingConfig) {
        let own = S::player_entity(&self.setup, self.player);
        self.game.set_prediction(on, own);
        self.game.client.set_smoothing(smoothing);
    }

    /// Smooths corrections with `smoothing` from now on (a zero half-life: off). The
    /// offsets being hidden now are dropped, so the next frame may jump by them.
    pub(crate) fn set_smoothing(&mut self, smoothing: SmoothingConfig) {
        self.game.client.set_smoothing(smoothing);
    }

    /// Shows the others with delay policy `policy` from now on. The buffer starts empty
    /// (its estimates belong to the old policy), so playback waits for two snapshots.
    pub(crate) fn set_interpolation(&mut self, config: &RunConfig, policy: DelayPolicy) {
        let remote_config = config.playback.buffer_config(config.server.tick_hz);
        self.game.client.set_interpolation(InterpolationConfig {
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
        self.receive(now, config.naive_sample);
        let g = &mut self.game;
        g.client.update(now);
        while let Some(e) = g.client.poll_link_event() {
            self.link_events.push((now, e.state, e.silent_since));
        }
        while let Some(tick) = self.game.client.next_tick() {
            self.tick(now, tick, config, auth);
        }
        while let Some(p) = self.game.client.poll_transmit(now) {
            self.up_bytes += p.len() as u64 + UDP_IP_HEADER_BYTES;
            self.link.up.send(now, p);
        }
    }

    /// Takes in what arrived: the public client decodes, acknowledges and reconciles;
    /// the lab keeps the own player as the server has it and feeds the shadow delay
    /// policies each new snapshot of the world. Every `naive_every`th rollback (0: never)
    /// also times the naive full-world replay.
    fn receive(&mut self, now: Duration, naive_every: u32) {
        let g = &mut self.game;
        while let Some(p) = self.link.down.poll(now) {
            self.delivered_bytes += p.len() as u64 + UDP_IP_HEADER_BYTES;
            g.receive(now, &p, naive_every);
            let newest = g.client.replication().newest();
            let Some(tick) = newest.filter(|_| newest != g.newest) else {
                continue;
            };
            g.newest = newest;
            let player = self.player;
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

    /// Client tick `tick`: input, the other players' frame, prediction, the own frame.
    fn tick(&mut self, now: Duration, tick: Tick, config: &RunConfig, auth: &Truth) {
        let period = Duration::from_secs(1) / config.server.tick_hz;
        let predicted = match (self.present(), self.predicted_world()) {
            (Some(_), Some(world)) => S::predicted(world),
            _ => None,
        };
        // Sampled before the input (the same instant): a script aims at what it shows.
        // What the public client renders now: the others as the scene lists them.
        let sampled = self
            .game
            .sample_others(now, &self.setup, self.player, config.clients);
        if let Some(s) = &sampled {
            self.script.view(self.player, s.render_tick, &s.value);
            if let Some(server) = self.session().server_position(now) {
                let hz = f64::from(config.server.tick_hz);
                let behind_ms = (server - s.render_tick) * 1000.0 / hz;
                self.interpolation_delays
                    .push((now.as_secs_f64(), behind_ms));
            }
        }
        let input = match self.manual {
            Some(input) => input,
            None => self
                .script
                .input(u64::from(tick.0), predicted.as_ref().or(self.view.as_ref())),
        };
        // The world completes the input and shows the scene what was drawn.
        if let Some(s) = &sampled {
            self.game.client.world_mut().shown.clone_from(&s.value);
        }
        self.game.client.tick(tick, input);
        self.inputs.push((tick, input));
        if config.clients > 1 {
            self.shadows.sample(now);
        }
        if let Some((ids, slot, view)) = &mut self.characters {
            let hidden = [f32::NAN; 3];
            let dr = self.game.client.dead_reckoning();
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
            if S::RECORDS_FRAMES || self.keep_shown {
                self.last_shown.clone_from(&shown.value);
            }
        }
        // The frame after tick t stands for state t + 1: predicted, or else the newest
        // server state the client has.
        let predicted = self.game.own_frame();
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
        let g = &self.game;
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
