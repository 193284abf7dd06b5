//! One simulated client: its session, link, input script, prediction and the buffer that
//! shows the other players, with what it measured.

use super::UDP_IP_HEADER_BYTES;
use crate::config::RunConfig;
use crate::cpu::CpuTimer;
use crate::playback::PolicyShadows;
use crate::remote_view::RemoteView;
use crate::replication::{SnapshotReceiver, SnapshotSender};
use lagless_core::interpolation::{InterpolationBuffer, InterpolationConfig, Pose};
use lagless_core::{ClientId, ClientSession, ErrorSmoother, Predictor, Reconciled, Rollback, Tick};
use lagless_netem::Duplex;
use lagless_scenes::cubes::predict::{CubeRollback, PredictConfig, PredictMode};
use lagless_scenes::cubes::script::InputScript;
use lagless_scenes::cubes::snapshot::CubeSnapshot;
use lagless_scenes::cubes::{BodyState, CubeInput, CubeSceneConfig, PlayerId};
use std::collections::BTreeMap;
use std::time::Duration;

/// The server's truth, one position per state tick: every player's (client `k` drives
/// player `k + 1`, at index `k`) and every cube's.
#[derive(Default)]
pub(crate) struct Truth {
    pub(crate) players: Vec<Vec<[f32; 3]>>,
    pub(crate) cubes: Vec<Vec<[f32; 3]>>,
}

/// A rendered frame of the own player.
#[derive(Clone, Copy)]
pub(crate) struct Frame {
    pub(crate) position: [f32; 3],
    /// The newest server tick whose effects the frame shows.
    pub(super) shows: u32,
}

pub(crate) struct ClientSim {
    pub(super) id: ClientId,
    pub(crate) player: PlayerId,
    pub(crate) session: ClientSession<CubeInput>,
    pub(crate) link: Duplex,
    script: Box<dyn InputScript + Send>,
    view: Option<BodyState>,
    /// Server tick of the state `view` came from.
    view_tick: u32,
    /// Per rendered frame, keyed by the state tick it stands for: the own player's
    /// rendered position and the newest server tick whose effects the frame shows.
    pub(crate) rendered: BTreeMap<u32, Frame>,
    inputs: Vec<(Tick, CubeInput)>,
    pub(super) down_bytes: u64,
    /// Bytes that reached the client (with UDP/IP headers).
    pub(crate) delivered_bytes: u64,
    pub(crate) up_bytes: u64,
    pub(crate) down_per_second: Vec<u64>,
    pub(crate) snapshots: SnapshotReceiver,
    pub(super) packet_errors: u64,
    pub(super) prediction: Option<Prediction>,
    /// Everything the client does not predict, shown interpolated from snapshots: the
    /// other players (in id order), then every cube.
    pub(crate) remote: InterpolationBuffer<Vec<Pose>>,
    /// How they looked: error and jerk, frame by frame.
    pub(crate) remote_view: RemoteView,
    /// Other delay policies, fed what `remote` is fed.
    pub(super) shadows: PolicyShadows,
}

/// A client's prediction machinery and what it measured.
pub(super) struct Prediction {
    game: CubeRollback,
    pub(super) predictor: Predictor<CubeRollback>,
    pub(super) smoother: ErrorSmoother,
    /// Naive full-world baseline, timed on a sample of rollbacks.
    shadow: Option<CubeRollback>,
    pub(super) reconcile_ms: Vec<f64>,
    pub(super) naive_ms: Vec<f64>,
    /// Our cost on the same rollbacks the shadow was timed on.
    pub(super) paired_ms: Vec<f64>,
    pub(super) predicted_cubes: Vec<f64>,
    /// An essential part (players only) held back until the next tick, in case the full
    /// snapshot of the same tick completes meanwhile: a full one corrects the cubes too.
    pending_essential: Option<(Tick, CubeSnapshot)>,
}

impl ClientSim {
    /// Client `id`, driving `player`, over `link`.
    pub(crate) fn new(
        config: &RunConfig,
        (id, player): (ClientId, PlayerId),
        link: Duplex,
        script: Box<dyn InputScript + Send>,
        sender: &SnapshotSender,
        (scene_config, cubes): (CubeSceneConfig, usize),
    ) -> Self {
        let remote_config = config.playback.buffer_config(config.server.tick_hz);
        Self {
            id,
            player,
            session: ClientSession::new(config.client.clone()),
            link,
            script,
            view: None,
            view_tick: 0,
            rendered: BTreeMap::new(),
            inputs: Vec::new(),
            down_bytes: 0,
            delivered_bytes: 0,
            up_bytes: 0,
            down_per_second: Vec::new(),
            snapshots: SnapshotReceiver::new(config.snapshot_codec, sender, cubes),
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
        }
    }

    /// Puts a packet from the server on the downlink, counting its bytes.
    pub(crate) fn send_down(&mut self, now: Duration, bytes: Vec<u8>) {
        let size = bytes.len() as u64 + UDP_IP_HEADER_BYTES;
        self.down_bytes += size;
        let second = now.as_secs() as usize;
        if self.down_per_second.len() <= second {
            self.down_per_second.resize(second + 1, 0);
        }
        self.down_per_second[second] += size;
        self.link.down.send(now, bytes);
    }

    /// One step of the virtual clock: take in what arrived, run the ticks that are due,
    /// send what the session has. `auth` holds every player's authoritative position per
    /// state tick, to measure how the others were shown.
    pub(crate) fn step(&mut self, now: Duration, config: &RunConfig, auth: &Truth) {
        self.receive(now, config);
        self.session.update(now);
        while let Some(tick) = self.session.next_tick() {
            self.tick(now, tick, config, auth);
        }
        while let Some(p) = self.session.poll_transmit(now) {
            self.up_bytes += p.len() as u64 + UDP_IP_HEADER_BYTES;
            self.link.up.send(now, p);
        }
    }

    /// Takes in the packets that arrived, and every snapshot they completed.
    fn receive(&mut self, now: Duration, config: &RunConfig) {
        while let Some(p) = self.link.down.poll(now) {
            self.delivered_bytes += p.len() as u64 + UDP_IP_HEADER_BYTES;
            if self.session.handle_packet(now, &p).is_err() {
                self.packet_errors += 1;
            }
        }
        while let Some(snap) = self.session.poll_snapshot() {
            let Some(s) = self.snapshots.receive(&snap, &mut self.session) else {
                continue;
            };
            if let Some(p) = s.player(self.player) {
                self.view = Some(*p);
                self.view_tick = snap.tick.0;
            }
            let pose = |b: BodyState| {
                Pose::new(b.position.to_array(), b.rotation.to_array())
                    .with_velocity(b.linvel.to_array(), b.angvel.to_array())
            };
            let shown: Vec<Pose> = s
                .players
                .iter()
                .filter(|(id, _)| *id != self.player)
                .map(|(_, b)| pose(*b))
                .chain(s.cubes.iter().map(|c| pose(c.body_state())))
                .collect();
            // Only a snapshot with the world (not a players-only essential part) shows
            // everything; the essential part's players come again in the full one.
            if s.has_world() {
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
        let observed = match &self.prediction {
            Some(pr) if pr.predictor.present().is_some() => pr.game.player_state(),
            _ => self.view,
        };
        let input = self.script.input(u64::from(tick.0), observed.as_ref());
        self.session.set_input(tick, input);
        self.inputs.push((tick, input));
        if config.clients > 1 {
            self.shadows.sample(now);
        }
        if let Some(shown) = self.remote.sample_at(now) {
            // Client k drives player k + 1: the others, in id order, then the cubes.
            let players = &auth.players;
            let truth: Vec<&[[f32; 3]]> = (0..players.len())
                .filter(|&j| j as u32 + 1 != self.player)
                .map(|j| players[j].as_slice())
                .chain(auth.cubes.iter().map(Vec::as_slice))
                .collect();
            let own = players
                .get(self.player as usize - 1)
                .and_then(|p| p.last().copied());
            self.remote_view.record(now, &shown, &truth, period, own);
        }
        // The frame after tick t stands for state t + 1: predicted, or else the newest
        // server state the client has.
        let predicted = match &mut self.prediction {
            Some(pr) => {
                let session = &self.session;
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
        let frame = predicted.or(self.view.map(|v| Frame {
            position: v.position.to_array(),
            shows: self.view_tick,
        }));
        if let Some(frame) = frame {
            self.rendered.insert(tick.0 + 1, frame);
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
        let mut prev = CubeInput::NONE;
        for &(tick, input) in &self.inputs {
            let pressed = input.moves() && !prev.moves();
            prev = input;
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

/// A player's position, NaN when it has none.
pub(crate) fn pos(state: Option<BodyState>) -> [f32; 3] {
    state.map_or([f32::NAN; 3], |s| s.position.to_array())
}
