//! The lab's client on the public [`Client`] a game runs (the delta codec): decoding,
//! acknowledgements, the resync on a view mismatch, reconciliation, smoothing, snapshot
//! events, dead reckoning and interpolation are the library's. The lab adds what only a
//! lab needs: it times reconciliations (and the naive full-world replay beside them), and
//! reads what the client rendered as the scene lists it ([`LabScene::shown_in`], which
//! carries scene rules a bare pose does not: a dead player is not drawn).

use crate::config::RunConfig;
use crate::cpu::{CpuMark, CpuTimer};
use crate::replication::net_config;
use crate::scene::{LabScene, PlayerId};
use lagless_core::interpolation::Pose;
use lagless_core::{Rollback, Tick};
use lagless_replication::{Client, Policy, PredictedWorld, ReplicationClient};
use std::cell::RefCell;
use std::time::Duration;

/// A registry's state converted to a scene's form, by the registry's address and tick.
type Converted<K> = Option<((usize, Tick), K)>;

/// A scene's predicted world as the public [`Client`] drives it: the scene's own world,
/// whose server state is the scene's decoded form ([`LabScene::known`]) of the registry.
pub(crate) struct SceneWorld<S: LabScene> {
    /// The scene's predicted world.
    pub(crate) game: S::World,
    setup: S::Setup,
    own: PlayerId,
    players: PlayerId,
    own_id: Option<u32>,
    /// Entity ids of [`LabScene::shown`]'s list, for the poses of the entities the scene
    /// renders from its predicted world.
    shown_ids: Vec<u32>,
    /// The registry last converted, by its address and tick, and its conversion:
    /// comparing and loading the same state convert it once.
    known: RefCell<Converted<S::Known>>,
    /// What the player was shown before the next input, in the scene's list
    /// ([`LabScene::show`]).
    pub(crate) shown: Vec<Pose>,
    /// When the reconciliation under way started (set when the server's state is first
    /// compared), for the lab to time it.
    reconcile_started: RefCell<Option<CpuMark>>,
    /// Whether the client predicts at all (off: the own player is shown as the newest
    /// server state has it).
    predicting: bool,
}

impl<S: LabScene> SceneWorld<S> {
    /// `known` for `client` at its newest tick, converted at most once per state.
    fn with_known<R>(&self, client: &ReplicationClient, f: impl FnOnce(&S::Known) -> R) -> R {
        let tick = client.newest().unwrap_or_default();
        let key = (client as *const ReplicationClient as usize, tick);
        let mut cache = self.known.borrow_mut();
        if cache.as_ref().is_none_or(|(k, _)| *k != key) {
            *cache = Some((key, S::known(&self.setup, client, tick)));
        }
        match cache.as_ref() {
            Some((_, known)) => f(known),
            None => f(&S::known(&self.setup, client, tick)),
        }
    }

    /// The scene's form of `client`'s newest state (converted once per state).
    pub(crate) fn known_of<R>(
        &self,
        client: &ReplicationClient,
        f: impl FnOnce(&S::Known) -> R,
    ) -> R {
        self.with_known(client, f)
    }

    /// `client`'s newest state in the scene's form, taken out of the cache (converted if
    /// it holds another), with its key to put it back under.
    fn take_known(&mut self, client: &ReplicationClient) -> ((usize, Tick), S::Known) {
        let tick = client.newest().unwrap_or_default();
        let key = (client as *const ReplicationClient as usize, tick);
        let cached = self.known.get_mut().take().filter(|(k, _)| *k == key);
        let known = cached.map_or_else(|| S::known(&self.setup, client, tick), |(_, k)| k);
        (key, known)
    }

    /// Whether the client predicts.
    pub(crate) fn predicting(&self) -> bool {
        self.predicting
    }

    /// When the reconciliation that just ran started, taken.
    fn take_reconcile_timer(&self) -> Option<CpuMark> {
        self.reconcile_started.borrow_mut().take()
    }
}

impl<S: LabScene> Rollback for SceneWorld<S> {
    type Input = S::Input;
    type Saved = <S::World as Rollback>::Saved;
    type Confirmed = ReplicationClient;

    fn advance(&mut self, tick: Tick, input: S::Input) {
        self.game.advance(tick, input);
    }

    fn save(&self) -> Self::Saved {
        self.game.save()
    }

    fn diverged(&self, predicted: &Self::Saved, confirmed: &ReplicationClient) -> bool {
        let mut timer = self.reconcile_started.borrow_mut();
        if timer.is_none() {
            *timer = Some(CpuMark::now());
        }
        drop(timer);
        self.with_known(confirmed, |k| self.game.diverged(predicted, k))
    }

    fn load(&mut self, confirmed: &ReplicationClient, predicted: Option<&Self::Saved>) {
        let (key, known) = self.take_known(confirmed);
        self.game.load(&known, predicted);
        *self.known.get_mut() = Some((key, known));
    }

    fn confirmed(&mut self, confirmed: &ReplicationClient) {
        let (key, known) = self.take_known(confirmed);
        self.game.confirmed(&known);
        *self.known.get_mut() = Some((key, known));
    }
}

impl<S: LabScene> PredictedWorld for SceneWorld<S> {
    fn pose(&self, id: u32) -> Option<Pose> {
        if Some(id) == self.own_id {
            return S::predicted(&self.game).map(|s| S::seen_pose(&s));
        }
        let i = self.shown_ids.iter().position(|&x| x == id)?;
        let mut out = vec![Pose::new([f32::NAN; 3], [0.0, 0.0, 0.0, 1.0]); self.shown_ids.len()];
        S::render_predicted(&self.game, self.own, self.players, &mut out);
        out.get(i).copied().filter(|p| p.position[0].is_finite())
    }

    fn complete_input(&mut self, tick: Tick, render_tick: Option<f64>, input: &mut S::Input) {
        // What the player saw before this input: the scene's list of the frame the
        // client rendered just before (set by the lab), and its render tick.
        if self.predicting {
            S::show(&mut self.game, tick, &self.shown);
            S::complete_input(&mut self.game, tick, render_tick, input);
        }
    }

    fn snapshot_events(&mut self, _tick: Tick, bytes: &[u8], rtt: Option<Duration>) {
        S::events_received(&mut self.game, bytes, rtt);
    }
}

/// The public client of one lab client, and what the lab measures around it.
pub(crate) struct GamePipe<S: LabScene> {
    /// The client a game runs.
    pub(crate) client: Client<SceneWorld<S>>,
    /// The newest snapshot tick taken in ([`ReplicationClient::newest`]).
    pub(crate) newest: Option<Tick>,
    /// The naive full-world baseline, timed on a sample of rollbacks.
    shadow: Option<S::World>,
    /// CPU time of each reconciliation that re-simulated, ms.
    pub(crate) reconcile_ms: Vec<f64>,
    /// The naive baseline's time on the sampled ones, and ours on the same.
    pub(crate) naive_ms: Vec<f64>,
    pub(crate) paired_ms: Vec<f64>,
    /// Entities the predicted world simulates besides the player, per tick.
    pub(crate) predicted_cubes: Vec<f64>,
    /// Packets the client refused (counted by cause in the layers).
    pub(crate) packet_errors: u64,
    /// Where in [`LabScene::shown`]'s list the entities rendered from the predicted
    /// world sit, and their ids.
    pub(crate) predicted_slots: Vec<(usize, u32)>,
    /// CPU time to take in a packet that completed a snapshot, reconciliation aside, µs.
    pub(crate) decode_us: crate::metrics::Histogram,
}

impl<S: LabScene> GamePipe<S> {
    /// The client of `player` among `config.clients` players of the scene `setup`
    /// describes.
    pub(crate) fn new(
        config: &RunConfig,
        setup: &S::Setup,
        player: PlayerId,
        world: S::World,
    ) -> Result<Self, crate::runner::RunError> {
        let mut net = net_config::<S>(setup, config);
        net.smoothing = config.smoothing;
        net.prediction = config.prediction_limits;
        net.link = config.link;
        net.interpolation = lagless_core::interpolation::InterpolationConfig {
            policy: config.interpolation,
            ..config.playback.buffer_config(config.server.tick_hz)
        };
        let own_id = S::player_entity(setup, player);
        let shown_ids = S::shown_ids(setup, player, config.clients);
        let world = SceneWorld {
            game: world,
            setup: setup.clone(),
            own: player,
            players: config.clients,
            own_id,
            shown_ids: shown_ids.clone(),
            known: RefCell::new(None),
            shown: Vec::new(),
            reconcile_started: RefCell::new(None),
            predicting: config.prediction,
        };
        let mut client = Client::new(S::schema(setup), world, &net)
            .map_err(|e| crate::runner::RunError::Invalid(e.to_string()))?;
        if let Some(own) = own_id {
            let policy = if config.prediction {
                Policy::Predicted
            } else {
                Policy::Latest
            };
            client.set_policy(own, policy);
        }
        let mut predicted_slots = Vec::new();
        if config.prediction {
            for id in S::predicted_ids(setup, config, player, config.clients) {
                client.set_policy(id, Policy::Predicted);
                if let Some(i) = shown_ids.iter().position(|&x| x == id) {
                    predicted_slots.push((i, id));
                }
            }
        }
        Ok(Self {
            client,
            newest: None,
            shadow: (config.naive_sample > 0)
                .then(|| S::world(setup, player, config, true))
                .flatten(),
            reconcile_ms: Vec::new(),
            naive_ms: Vec::new(),
            paired_ms: Vec::new(),
            predicted_cubes: Vec::new(),
            packet_errors: 0,
            predicted_slots,
            decode_us: crate::metrics::Histogram::default(),
        })
    }

    /// Renders at `now` (a game draws a frame) and lists the interpolated entities as the
    /// scene shows them ([`LabScene::shown_in`]), with the server tick they stand for.
    pub(crate) fn sample_others(
        &mut self,
        now: Duration,
        setup: &S::Setup,
        own: PlayerId,
        players: PlayerId,
    ) -> Option<lagless_core::interpolation::Sampled<Vec<Pose>>> {
        let render = self.client.render(now);
        match (render.render_tick, render.kind) {
            (Some(render_tick), Some(kind)) => Some(lagless_core::interpolation::Sampled {
                value: S::shown_in(setup, &render.interpolated, own, players),
                kind,
                render_tick,
            }),
            _ => None,
        }
    }

    /// Turns prediction on or off (`lagless view`'s knob): off, the own player (entity
    /// `own`) is shown as the newest server state has it.
    pub(crate) fn set_prediction(&mut self, on: bool, own: Option<u32>) {
        self.client.world_mut().predicting = on;
        if let Some(own) = own {
            let policy = if on {
                Policy::Predicted
            } else {
                Policy::Latest
            };
            self.client.set_policy(own, policy);
        }
    }

    /// After a tick: the own player's frame when the client predicts it (the frame after
    /// tick `t` stands for state `t + 1`), smoothed by the client.
    pub(crate) fn own_frame(&mut self) -> Option<(super::client::OwnFrame, Pose)> {
        let world = self.client.world();
        if world.predicting {
            self.predicted_cubes
                .push(S::predicted_entities(&world.game) as f64);
        }
        let (own, predicting) = (world.own_id, world.predicting);
        // The pose after this tick, smoothed as the last render left the corrections:
        // a second render would sample the interpolation buffer twice in one tick.
        let pose = own.and_then(|id| self.client.predicted_pose(id));
        match (predicting, self.client.predicted_tick(), pose) {
            (true, Some(present), Some(pose)) => Some((
                super::client::OwnFrame {
                    position: pose.position,
                    shows: present.0,
                },
                pose,
            )),
            _ => None,
        }
    }

    /// Replaces, in `others` ([`LabScene::shown`]'s order), the entities the client
    /// renders from its predicted world, smoothed.
    pub(crate) fn render_others(&self, others: &mut [Pose]) {
        if self.client.predicted_tick().is_none() {
            return;
        }
        for &(i, id) in &self.predicted_slots {
            let pose = self.client.predicted_pose(id);
            if let (Some(slot), Some(pose)) = (others.get_mut(i), pose) {
                *slot = pose;
            }
        }
    }

    /// Takes in a packet at `now`, timing the reconciliation it caused; every
    /// `naive_every`th rollback (0: never) also times the naive full-world replay.
    pub(crate) fn receive(&mut self, now: Duration, bytes: &[u8], naive_every: u32) {
        let before = self.client.prediction_stats().clone();
        let newest = self.client.replication().newest();
        let whole = CpuTimer::start();
        if self.client.receive(now, bytes).is_err() {
            self.packet_errors += 1;
        }
        let total_ms = whole.ms();
        let timer = self.client.world().take_reconcile_timer();
        if self.client.replication().newest() != newest {
            let reconcile_ms = timer.as_ref().map_or(0.0, CpuMark::ms);
            self.decode_us
                .record((total_ms - reconcile_ms).max(0.0) * 1000.0);
        }
        let after = self.client.prediction_stats();
        let replayed = after.replayed_ticks - before.replayed_ticks;
        let rolled = after.rollbacks + after.resyncs > before.rollbacks + before.resyncs;
        let (Some(timer), true) = (timer, rolled && replayed > 0) else {
            return;
        };
        let ms = timer.ms();
        self.reconcile_ms.push(ms);
        let naive = naive_every > 0 && after.rollbacks % u64::from(naive_every) == 0;
        let (true, Some(shadow)) = (naive, &mut self.shadow) else {
            return;
        };
        // The naive way: load every body from the snapshot, replay the whole world.
        let Some(tick) = self.client.replication().newest() else {
            return;
        };
        let world = self.client.world();
        let started = CpuTimer::start();
        world.known_of(self.client.replication(), |k| shadow.load(k, None));
        let session = self.client.session();
        let mut t = tick;
        for _ in 0..replayed {
            shadow.advance(t, session.input(t).unwrap_or_default());
            t = t.next();
        }
        self.naive_ms.push(started.ms());
        self.paired_ms.push(ms);
    }
}
