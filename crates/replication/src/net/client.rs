//! The game client's side of the high-level API.

#[cfg(doc)]
use super::ConnectionConfig;
use super::felt::{FeltCosts, UNDERRUN_SAMPLE, UnderrunCosts, distance, rounding};
use super::link::{ConnectionStats, LinkEvent, LinkState, LinkWatch};
use super::{NetConfig, NetError};
use crate::client::{ClientConfig, EntityEvent, ReplicationClient};
use crate::deadreckoning::{DrCodec, DrMessage, DrReceiver};
use crate::frame::{Frame, pose_of};
use crate::schema::Schema;
use lagless_core::interpolation::{InterpolationBuffer, InterpolationConfig, Pose};
use lagless_core::{
    ClientSession, Delivery, ErrorSmoother, PredictionStats, Predictor, Reconciled, Rollback,
    SmoothingConfig, Tick,
};
use lagless_wire::BitReader;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// How the client shows an entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Simulated ahead by the game's [`PredictedWorld`], rolled back and replayed when the
    /// server disagrees, corrections smoothed: the own player, and what it pushes.
    Predicted,
    /// Shown a little in the past, blended between snapshots (Glenn Fiedler's "Snapshot
    /// Interpolation"): everything else, by default.
    #[default]
    Interpolated,
    /// The newest state as it arrives, without blending (scores, timers).
    Latest,
    /// Shown where it is now by dead reckoning from the server's messages
    /// ([`NetConfig::dead_reckoning`], [`super::Server::update_character`]): walking
    /// characters. Not in [`Render::frame`], only in [`Render::pose`].
    DeadReckoned,
}

/// A predicted world with nothing to predict: a client that only watches (a spectator, a
/// replay viewer, a bot loading a server), whose entities are all interpolated or dead
/// reckoned. Its inputs still go to the server as the game gives them.
#[derive(Debug)]
pub struct Spectator<I>(std::marker::PhantomData<fn() -> I>);

impl<I> Default for Spectator<I> {
    fn default() -> Self {
        Self(std::marker::PhantomData)
    }
}

impl<I: lagless_core::Input> Rollback for Spectator<I> {
    type Input = I;
    type Saved = ();
    type Confirmed = ReplicationClient;
    fn advance(&mut self, _: Tick, _: I) {}
    fn save(&self) {}
    fn diverged(&self, _: &(), _: &ReplicationClient) -> bool {
        false
    }
    fn load(&mut self, _: &ReplicationClient, _: Option<&()>) {}
}

impl<I: lagless_core::Input> PredictedWorld for Spectator<I> {
    fn pose(&self, _: u32) -> Option<Pose> {
        None
    }
}

/// The game's predicted world, as the [`Client`] drives it: the core's [`Rollback`]
/// (step, save, compare, load) over the replicated state, plus where its entities are.
///
/// The server's state arrives as the [`ReplicationClient`] registry: read entity `id`
/// with [`ReplicationClient::reader`]; [`crate::ClientEntity::tick`] says which snapshot
/// it came in (the snapshot's own tick is [`ReplicationClient::newest`]). When only a
/// snapshot's essential part came in time ([`NetConfig::essential_parts`]), the registry
/// a world reloads from holds every entity: the predicted ones from that part, the rest
/// as last known.
///
/// Besides [`Rollback`], a world may follow what the player sees and what the server
/// reports: each hook below has a default that ignores it.
pub trait PredictedWorld: Rollback<Confirmed = ReplicationClient> {
    /// Where predicted entity `id` is now, if the world holds it (2D games use
    /// [`Pose::planar`]). The client smooths corrections and policy switches with it.
    fn pose(&self, id: u32) -> Option<Pose>;

    /// What the player was just shown ([`Client::render`] calls it with what it
    /// returns): the entities the world does not simulate, where they are drawn, so
    /// predicted bodies can collide with them there (a predicted car with the
    /// interpolated ball).
    fn show(&mut self, _shown: &Render) {}

    /// Completes the player's input for `tick` before it is sent and predicted:
    /// `render_tick` is the fractional server tick of the interpolated entities the
    /// player was last shown (`None` before any). A shooter stamps the view its shot
    /// is to be judged in, and the ids of what the input spawns.
    fn complete_input(&mut self, _tick: Tick, _render_tick: Option<f64>, _input: &mut Self::Input) {
    }

    /// The events the server framed with snapshot `tick`
    /// ([`super::Server::set_snapshot_events`], [`NetConfig::snapshot_events`]), as the
    /// snapshot arrives (repeats and reordering possible): `rtt` is the session's
    /// round-trip estimate.
    fn snapshot_events(&mut self, _tick: Tick, _bytes: &[u8], _rtt: Option<Duration>) {}
}

/// Client counters beyond the session's and the layers'.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientNetStats {
    /// Snapshots the replication layer refused (counted there by cause).
    pub snapshots_refused: u64,
    /// Snapshots the interpolation buffer refused (too old, too far off).
    pub frames_refused: u64,
    /// Snapshots whose dead-reckoning batch did not decode (so neither part was used).
    pub dead_reckoning_refused: u64,
    /// Entity events dropped because the game did not poll them ([`Client::poll_event`]).
    pub events_dropped: u64,
    /// Essential parts (the predicted entities alone, sent before a fragmented snapshot)
    /// reconciled with because the full snapshot had not completed by the next tick.
    pub essential_used: u64,
    /// Server states too old to replay through (a queue of them draining after an
    /// outage) that prediction left for a newer one, rather than reload the world from
    /// each ([`MAX_DEFER`]).
    pub states_deferred: u64,
    /// Interruptions of the link and the time spent in them ([`Client::link_state`]).
    pub link: ConnectionStats,
    /// Times the client started over with its session ([`ClientSession::epoch`]: the
    /// server restarted, or the ticks it went by were bogus): its entities were despawned
    /// and came back from the next snapshot against nothing.
    pub restarts: u64,
}

/// What to draw this frame: every entity's pose, and the interpolated state of the
/// entities the client does not predict.
#[derive(Debug, Clone)]
pub struct Render {
    /// The interpolated (and latest) entities' states.
    pub frame: Frame,
    /// The server tick the interpolated entities stand for (`None` before the first
    /// snapshot).
    pub render_tick: Option<f64>,
    /// True when the buffer had no snapshot on each side of the render time (an
    /// underrun: it held or extrapolated).
    pub underrun: bool,
    /// How the interpolated entities were produced (`None` before the first snapshot).
    pub kind: Option<lagless_core::interpolation::SampleKind>,
    /// Every entity as the interpolation buffer shows it now, whatever its policy (a
    /// predicted entity's interpolated past too): for debug views and for comparing
    /// what prediction shows with what interpolation would.
    pub interpolated: Frame,
    poses: BTreeMap<u32, Pose>,
}

impl Render {
    /// Entity `id`'s pose to draw, smoothed: predicted ones from the world, the others
    /// from the frame.
    pub fn pose(&self, id: u32) -> Option<Pose> {
        self.poses.get(&id).copied()
    }

    /// Every entity with a pose, ascending id.
    pub fn poses(&self) -> impl Iterator<Item = (u32, Pose)> + '_ {
        self.poses.iter().map(|(id, p)| (*id, *p))
    }
}

/// A game client: the core's [`ClientSession`] (clock ahead of the server, redundant
/// inputs), a [`ReplicationClient`] (snapshots decoded against baselines), the
/// game's [`PredictedWorld`] under a [`Predictor`], an [`ErrorSmoother`] per predicted
/// entity and an [`InterpolationBuffer`] for the rest.
///
/// The game's loop:
/// ```text
/// for bytes in packets { client.receive(now, &bytes) }   // decode, acknowledge, reconcile
/// client.update(now);
/// while let Some(tick) = client.next_tick() { client.tick(tick, read_input()) }
/// while let Some(bytes) = client.poll_transmit(now) { send(bytes) }
/// let render = client.render(now);                         // draw render.pose(id)
/// ```
///
/// It trusts its transport's integrity: a packet arrives as it was sent, or not at all
/// (netcode.io, under `lagless_transport::GameClient`, authenticates every packet). Over
/// a transport that may damage bytes, turn the sessions' checksum on at both ends
/// (`NetConfig::client_session.checksum`, `server_session.checksum`; `docs/sessions.md`,
/// "Integrity"): damaged packets are then refused before decoding.
///
/// A client kept across a server restart, or whose session started over for any reason
/// ([`ClientSession::epoch`]), starts over with it: its entities are despawned (events)
/// and come back from the new timeline's first snapshot ([`ClientNetStats::restarts`]).
pub struct Client<W: PredictedWorld> {
    session: ClientSession<W::Input>,
    replication: ReplicationClient,
    predictor: Predictor<W>,
    world: W,
    interpolation: InterpolationBuffer<Frame>,
    schema: Arc<Schema>,
    smoothing: SmoothingConfig,
    smoothers: BTreeMap<u32, ErrorSmoother>,
    policies: BTreeMap<u32, Policy>,
    /// Entities whose policy changed: the next render blends from where they were shown.
    switched: BTreeSet<u32>,
    shown: BTreeMap<u32, Pose>,
    last_render: Option<Duration>,
    /// How far a held-back entity's state is carried along its velocity, seconds
    /// ([`crate::ReplicationConfig::dead_reckoning_secs`]).
    max_dead_reckoning: f32,
    dead_reckoning: Option<(DrReceiver, DrCodec)>,
    /// Spawns and despawns for the game, oldest first (bounded: the oldest go).
    events: VecDeque<EntityEvent>,
    /// Whether snapshots carry events in front ([`NetConfig::snapshot_events`]).
    snapshot_events: bool,
    /// An essential part held until the next tick, in case the full snapshot of its
    /// tick completes meanwhile (a full one corrects more than the predicted entities).
    pending_essential: Option<(Tick, ReplicationClient)>,
    /// The render tick of the newest [`Client::render`].
    render_tick: Option<f64>,
    /// What a tick of lead and a late input cost, from the corrections seen.
    felt: FeltCosts,
    /// What an underrun of the interpolation buffer costs, from the jumps seen.
    underruns: UnderrunCosts,
    /// The newest tick reconciled with, for the wrong ticks each reconciliation covers.
    reconciled: Option<Tick>,
    /// The newest time the game gave ([`Client::receive`], [`Client::update`]).
    now: Duration,
    /// Since when server states too old to replay through have been left for a newer one
    /// (a queue draining after an outage).
    deferred_since: Option<Duration>,
    /// Replay settings, for telling such states.
    max_replay_ticks: u32,
    /// Live, interrupted or recovering.
    link: LinkWatch,
    /// The session's [`ClientSession::epoch`] this client's tick-keyed state belongs to.
    epoch: u64,
    stats: ClientNetStats,
}

/// The longest a client leaves server states too old to replay through for a newer one
/// ([`ClientNetStats::states_deferred`]) before it reloads from the newest anyway.
pub const MAX_DEFER: Duration = Duration::from_millis(500);

/// Events kept for the game until polled; older ones are dropped (and counted in
/// [`ClientNetStats::events_dropped`]).
const MAX_EVENTS: usize = 1 << 16;

impl<W: PredictedWorld> Client<W> {
    /// A client of a server replicating `schema`, predicting with `world`.
    pub fn new(schema: Schema, world: W, config: &NetConfig) -> Result<Self, NetError> {
        config.check()?;
        let schema = Arc::new(schema);
        Ok(Self {
            session: ClientSession::new(lagless_core::ClientConfig {
                tick_hz: config.tick_hz,
                ..config.client_session.clone()
            }),
            replication: ReplicationClient::new(
                (*schema).clone(),
                ClientConfig {
                    tick_hz: config.tick_hz,
                    ..ClientConfig::default()
                },
            ),
            predictor: Predictor::new(config.prediction),
            world,
            interpolation: InterpolationBuffer::new(InterpolationConfig {
                tick_hz: config.tick_hz,
                ..config.interpolation
            }),
            schema,
            smoothing: config.smoothing,
            smoothers: BTreeMap::new(),
            policies: BTreeMap::new(),
            switched: BTreeSet::new(),
            shown: BTreeMap::new(),
            last_render: None,
            // The server's model of it, from the same setting: one horizon, both ends.
            max_dead_reckoning: {
                let secs = config.replication.dead_reckoning_secs;
                if secs.is_nan() {
                    0.0
                } else {
                    secs.clamp(0.0, 60.0)
                }
            },
            dead_reckoning: config
                .dead_reckoning
                .map(|c| (DrReceiver::new(c.receiver), c.codec)),
            events: VecDeque::new(),
            snapshot_events: config.snapshot_events,
            pending_essential: None,
            render_tick: None,
            felt: FeltCosts::default(),
            underruns: UnderrunCosts::default(),
            reconciled: None,
            now: Duration::ZERO,
            deferred_since: None,
            max_replay_ticks: config.prediction.max_replay_ticks,
            link: LinkWatch::new(config.link),
            epoch: 0,
            stats: ClientNetStats::default(),
        })
    }

    /// Shows entity `id` by `policy` from now on. A switch blends from where the entity
    /// was last shown, with no pop.
    pub fn set_policy(&mut self, id: u32, policy: Policy) {
        if self.policy(id) != policy {
            self.switched.insert(id);
        }
        if policy == Policy::default() {
            self.policies.remove(&id);
        } else {
            self.policies.insert(id, policy);
        }
    }

    /// How entity `id` is shown.
    pub fn policy(&self, id: u32) -> Policy {
        self.policies.get(&id).copied().unwrap_or_default()
    }

    /// Takes in a packet from the server at `now`: completed snapshots are decoded,
    /// acknowledged, handed to prediction (which rolls back and replays if the server
    /// disagrees) and to the interpolation buffer. Errors mean a packet or snapshot was
    /// dropped (and counted).
    pub fn receive(&mut self, now: Duration, bytes: &[u8]) -> Result<(), NetError> {
        self.now = self.now.max(now);
        let handled = self.session.handle_packet(now, bytes);
        // Before the packet's snapshot: it belongs to the session's new timeline.
        self.follow_session();
        handled?;
        self.link.heard(now, self.session.server_position(now));
        self.stats.link = self.link.stats();
        let mut first_error = None;
        while let Some(snapshot) = self.session.poll_snapshot() {
            if snapshot.essential {
                self.hold_essential(snapshot.tick, &snapshot.payload);
                continue;
            }
            let payload = match self.take_events(snapshot.tick, &snapshot.payload) {
                Ok(rest) => rest,
                Err(e) => {
                    self.stats.snapshots_refused += 1;
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            let (messages, payload) = match self.split(snapshot.tick, payload) {
                Ok(split) => split,
                Err(e) => {
                    self.stats.dead_reckoning_refused += 1;
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            match self.replication.receive(snapshot.tick, payload) {
                Ok(Some(applied)) => {
                    self.session.acknowledge_snapshot(applied.tick);
                    if self
                        .pending_essential
                        .as_ref()
                        .is_some_and(|(t, _)| *t <= applied.tick)
                    {
                        self.pending_essential = None;
                    }
                    self.apply(now, applied.tick);
                }
                Ok(None) => {}
                Err(e) => {
                    self.stats.snapshots_refused += 1;
                    first_error.get_or_insert(NetError::Replication(e));
                }
            }
            // After the snapshot, which spawns the characters these messages may be the
            // first of. Refusals (stale ones after reordering) are counted there.
            if let Some((dr, _)) = &mut self.dead_reckoning {
                dr.set_rtt(self.session.rtt());
                for m in messages {
                    let _ = dr.receive(now, snapshot.tick, m);
                }
            }
        }
        // Until a snapshot against nothing decodes, every packet asks for one.
        self.session.set_resync(self.replication.needs_resync());
        first_error.map_or(Ok(()), Err)
    }

    /// Queues a game message for the server (a chat line, an interaction): reliable ones
    /// arrive once and in order, unreliable ones at most once. They ride the input
    /// packets the client sends every tick.
    pub fn send_message(&mut self, delivery: Delivery, bytes: &[u8]) -> Result<(), NetError> {
        self.session
            .send_message(delivery, bytes)
            .map_err(|e| NetError::Protocol(e.into()))
    }

    /// The next game message from the server.
    pub fn poll_message(&mut self) -> Option<(Delivery, Vec<u8>)> {
        self.session.poll_message()
    }

    /// Starts over with the session when it started over ([`ClientSession::epoch`]: the
    /// server restarted, or the ticks it went by were bogus): everything keyed on the
    /// server's ticks goes, or the registry, the interpolation buffer, prediction and dead
    /// reckoning would refuse every tick up to the old newest as stale (one corrupted tick
    /// pinned them for good). The shown entities are despawned (events for the game) and
    /// come back with the new timeline's first snapshot, which is asked for against
    /// nothing.
    fn follow_session(&mut self) {
        let epoch = self.session.epoch();
        if epoch == self.epoch {
            return;
        }
        self.epoch = epoch;
        self.stats.restarts += 1;
        self.replication.start_over();
        self.take_registry_events();
        self.interpolation.reset();
        self.predictor.reset();
        self.pending_essential = None;
        self.reconciled = None;
        self.deferred_since = None;
        self.render_tick = None;
        self.session.set_resync(true);
    }

    /// Starts over as a new connection (a reconnection to a new slot on the server):
    /// the session restarts ([`ClientSession::restart`]) and the client with it, as after
    /// a server restart: its entities are despawned (events for the game) and come back
    /// from the next snapshot. The world, the policies and the counters stay.
    pub fn start_over(&mut self) {
        self.session.restart();
        self.follow_session();
    }

    /// Hands the events in front of snapshot `tick` to the world, and returns the bytes
    /// after them (all of them when snapshots carry no events).
    fn take_events<'a>(&mut self, tick: Tick, payload: &'a [u8]) -> Result<&'a [u8], NetError> {
        if !self.snapshot_events {
            return Ok(payload);
        }
        let mut r = lagless_wire::Reader::new(payload);
        let events = r.read_len_prefixed(super::MAX_SNAPSHOT_EVENT_BYTES, "snapshot events")?;
        if !events.is_empty() {
            let rtt = self.session.rtt().smoothed();
            self.world.snapshot_events(tick, events, rtt);
        }
        Ok(r.read_rest())
    }

    /// Decodes an essential part (a standalone snapshot of the predicted entities) and
    /// holds it for the next tick, unless a full snapshot as new arrived already.
    fn hold_essential(&mut self, tick: Tick, payload: &[u8]) {
        if self.replication.newest().is_some_and(|n| tick <= n) {
            return;
        }
        let mut scratch = ReplicationClient::new(
            (*self.schema).clone(),
            ClientConfig {
                tick_hz: self.session.config().tick_hz,
                ..ClientConfig::default()
            },
        );
        match scratch.receive(tick, payload) {
            Ok(Some(_)) => self.pending_essential = Some((tick, scratch)),
            _ => self.stats.snapshots_refused += 1,
        }
    }

    /// A snapshot's dead-reckoning messages and the replication bytes after them (all of
    /// it when dead reckoning is off).
    fn split<'a>(
        &mut self,
        tick: Tick,
        payload: &'a [u8],
    ) -> Result<(Vec<DrMessage>, &'a [u8]), NetError> {
        let Some((dr, codec)) = &mut self.dead_reckoning else {
            return Ok((Vec::new(), payload));
        };
        let mut bits = BitReader::new(payload);
        let messages = dr.decode_batch(tick, codec, &mut bits)?;
        bits.align().map_err(crate::DrError::from)?;
        Ok((messages, &payload[bits.bit_position() / 8..]))
    }

    /// Passes the registry's spawns and despawns on to the game, and keeps the per-entity
    /// state (smoothing, dead reckoning) in step with them.
    fn take_registry_events(&mut self) {
        while let Some(event) = self.replication.poll_event() {
            if self.events.len() >= MAX_EVENTS {
                self.events.pop_front();
                self.stats.events_dropped += 1;
            }
            self.events.push_back(event);
            match event {
                EntityEvent::Despawned { id, .. } => {
                    self.smoothers.remove(&id);
                    self.shown.remove(&id);
                    if let Some((dr, _)) = &mut self.dead_reckoning {
                        dr.despawn(id);
                    }
                }
                // Every entity may be a character: the receiver holds only its newest
                // message, and refuses messages for ids the server never spawned.
                EntityEvent::Spawned { id, .. } => {
                    if let Some((dr, _)) = &mut self.dead_reckoning {
                        dr.spawn(id);
                    }
                }
            }
        }
    }

    /// A decoded snapshot of `tick`: spawn and despawn bookkeeping, the interpolation
    /// frame, and reconciliation.
    fn apply(&mut self, now: Duration, tick: Tick) {
        self.take_registry_events();
        // Every entity goes in, whatever its policy now: one switched to interpolated
        // has its past ready at once.
        let mut frame = Frame::new(Arc::clone(&self.schema));
        for (id, e) in self.replication.entities() {
            let values = if e.tick < tick {
                // Held back by the budget: carried along its velocity to this tick.
                self.replication
                    .values_at(id, tick, self.max_dead_reckoning)
                    .unwrap_or_else(|| e.values.clone())
            } else {
                e.values.clone()
            };
            frame.push_generation(id, e.generation, e.kind, values.into());
        }
        if self.interpolation.push(tick, now, frame).is_err() {
            self.stats.frames_refused += 1;
        }
        self.reconcile(tick, None);
        self.link.applied(tick);
    }

    /// Reconciles the predicted world with the server's state of `tick` (the registry,
    /// or the registry with an essential part laid over it), smoothing what moved.
    fn reconcile(&mut self, tick: Tick, essential: Option<&ReplicationClient>) {
        if self.defer(tick) {
            return;
        }
        let predicted: Vec<u32> = self.predicted_ids().collect();
        let before: Vec<Option<Pose>> = predicted.iter().map(|&id| self.world.pose(id)).collect();
        let session = &self.session;
        let inputs = |t: Tick| session.input(t);
        let confirmed = essential.unwrap_or(&self.replication);
        let rounding: Vec<f32> = predicted
            .iter()
            .map(|&id| {
                confirmed
                    .get(id)
                    .and_then(|e| self.schema.get(e.kind))
                    .map_or(0.0, rounding)
            })
            .collect();
        let present = self.predictor.present();
        let outcome = self
            .predictor
            .reconcile(&mut self.world, tick, confirmed, &inputs);
        // The correction the prediction's error made: a move within the server's rounding
        // is that rounding (a rollback for another field, a score the server gave, loads
        // the quantized position), which no lead changes.
        let mut moved = 0.0f32;
        if matches!(
            outcome,
            Reconciled::RolledBack { .. } | Reconciled::Resynced { .. }
        ) {
            for ((id, old), rounding) in predicted.into_iter().zip(before).zip(rounding) {
                if let (Some(old), Some(new)) = (old, self.world.pose(id)) {
                    let d = distance(old.position, new.position);
                    if d > rounding {
                        moved = moved.max(d);
                    }
                    self.smoother(id).correct(
                        old.position,
                        old.rotation,
                        new.position,
                        new.rotation,
                    );
                }
            }
        }
        if matches!(
            outcome,
            Reconciled::Confirmed | Reconciled::RolledBack { .. }
        ) {
            self.take_felt_cost(tick, present, moved);
        }
    }

    /// True when the state of `tick` is too old to replay through (further behind the
    /// prediction than [`PredictionConfig::max_replay_ticks`](lagless_core::PredictionConfig))
    /// and is left for a newer one: after an outage a link delivers its queue of old
    /// snapshots one after another, and reloading the world from each (a resync, the
    /// player thrown back seconds each time) would keep the player jumping until the queue
    /// drained. Such states (deeper than the replay bound, or older than the prediction's
    /// history) wait for one that can be replayed through, up to [`MAX_DEFER`] after the
    /// first, or while the link is recovering from an interruption, until a state sent
    /// after its return; then the newest is taken. The registry and the
    /// interpolation buffer take every state regardless.
    fn defer(&mut self, tick: Tick) -> bool {
        let Some(present) = self.predictor.present() else {
            return false;
        };
        let depth = present.diff(tick).max(0) as u64;
        // Replayable: within the replay bound and still in the prediction's history (a
        // state older than the history reloads the world as surely as a deep one).
        let in_history = tick > present || self.predictor.saved(tick).is_some();
        if depth <= u64::from(self.max_replay_ticks) && in_history {
            self.deferred_since = None;
            return false;
        }
        if self.link.state() == LinkState::Recovering {
            // What the link held through an outage is draining: a state sent after its
            // return is on its way, and reloading from each stale one would resync again
            // and again.
            self.stats.states_deferred += 1;
            return true;
        }
        let since = *self.deferred_since.get_or_insert(self.now);
        if self.now.saturating_sub(since) >= MAX_DEFER {
            self.deferred_since = None;
            return false;
        }
        self.stats.states_deferred += 1;
        true
    }

    /// Counts one reconciliation's correction toward the felt costs, and gives the session
    /// the costs as they now stand.
    fn take_felt_cost(&mut self, tick: Tick, present: Option<Tick>, moved: f32) {
        let after = self.reconciled.replace(tick);
        let (Some(after), Some(present)) = (after, present) else {
            return;
        };
        // The state of `tick` is what the inputs of the ticks before it made: this one
        // newly confirms the inputs of `after..tick`, and a wrong guess among them is
        // what it corrects.
        let wrong = self
            .session
            .guesses_wrong_between(after.saturating_sub(1), tick.saturating_sub(1));
        let horizon = present.diff(tick).max(0) as f64;
        self.felt.record(f64::from(moved), horizon, wrong);
        if let (Some(lead), Some(wrong)) = (self.felt.per_lead_tick(), self.felt.per_wrong_tick()) {
            self.session.set_lead_costs(lead, wrong);
        }
    }

    /// Counts one frame toward what an underrun costs, and gives the interpolation buffer
    /// its costs as they now stand: a tick of delay priced as a tick of lead (each is a
    /// tick of the felt latency), an underrun tick by its jump.
    fn take_underrun_cost(&mut self, shown: &[(u32, [f32; 3])], underrun: bool, elapsed: Duration) {
        let ticks = elapsed.as_secs_f64() * f64::from(self.session.config().tick_hz);
        self.underruns.frame(shown, underrun, ticks);
        if let (Some(delay), Some(jump)) = (
            self.felt.per_lead_tick(),
            self.underruns.per_underrun_tick(),
        ) {
            self.interpolation.set_costs(delay, jump);
        }
    }

    /// What an underrun of the interpolation buffer costs this client's player, as
    /// measured from the jumps of the others on screen
    /// ([`lagless_core::interpolation::DelayPolicy::Felt`] chooses its delay by it).
    pub fn underrun_costs(&self) -> &UnderrunCosts {
        &self.underruns
    }

    /// What a tick of lead and a late input cost this client's player, as measured from
    /// its corrections ([`lagless_core::LeadPolicy::Felt`] chooses its lead by them).
    pub fn felt_costs(&self) -> &FeltCosts {
        &self.felt
    }

    fn predicted_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.policies
            .iter()
            .filter(|(_, p)| **p == Policy::Predicted)
            .map(|(id, _)| *id)
    }

    fn smoother(&mut self, id: u32) -> &mut ErrorSmoother {
        let config = self.smoothing;
        self.smoothers
            .entry(id)
            .or_insert_with(|| ErrorSmoother::new(config))
    }

    /// When the client next has work, on the clock [`Client::update`] is given (`None`
    /// before the first update): its next tick, or the moment a silent link becomes
    /// [`LinkState::Interrupted`], whichever is first. A loop that sleeps (or waits on
    /// its socket with a timeout) wakes then, calls `update`, drains [`Client::next_tick`]
    /// and [`Client::poll_transmit`]; a packet arriving or a frame to draw are work too.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let tick = self.session.poll_timeout()?;
        Some(self.link.deadline().map_or(tick, |d| d.min(tick)))
    }

    /// Advances the clock to `now`; then run [`Client::next_tick`] until it returns
    /// `None`.
    pub fn update(&mut self, now: Duration) {
        self.now = self.now.max(now);
        self.session.update(now);
        self.link.update(self.now);
        self.stats.link = self.link.stats();
    }

    /// How the link to the server is doing: live, interrupted (nothing heard for
    /// [`ConnectionConfig::interrupted_after`]; show "connection interrupted"), or recovering.
    pub fn link_state(&self) -> LinkState {
        self.link.state()
    }

    /// The next change of [`Client::link_state`], oldest first.
    pub fn poll_link_event(&mut self) -> Option<LinkEvent> {
        self.link.poll_event()
    }

    /// The next tick the client simulates: call [`Client::tick`] with the player's input
    /// for it.
    pub fn next_tick(&mut self) -> Option<Tick> {
        self.session.next_tick()
    }

    /// Tick `tick` with the player's `input`: it is sent to the server, and the
    /// predicted world steps with it. Past [`ConnectionConfig::prediction_horizon`] into an
    /// interruption, the input's `Default` goes in its place.
    pub fn tick(&mut self, tick: Tick, mut input: W::Input) {
        if self.link.withhold_input() {
            input = W::Input::default();
        }
        self.stats.link = self.link.stats();
        if let Some((t, essential)) = self.pending_essential.take() {
            // The full snapshot of its tick did not complete in time: the predicted
            // entities are corrected from the essential part alone.
            self.stats.essential_used += 1;
            // Over everything else the client knows, so the world reloads whole: its
            // predicted entities from the essential part, the rest as last known.
            let confirmed = self.replication.overlaid_with(&essential);
            self.reconcile(t, Some(&confirmed));
        }
        self.world
            .complete_input(tick, self.render_tick, &mut input);
        self.session.set_input(tick, input);
        let session = &self.session;
        let inputs = |t: Tick| session.input(t);
        self.predictor
            .predict(&mut self.world, tick, input, &inputs);
    }

    /// The next packet to send to the server.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<Vec<u8>> {
        self.session.poll_transmit(now)
    }

    /// What to draw at `now`: predicted entities where the world has them, the others
    /// interpolated, every correction and policy switch smoothed.
    pub fn render(&mut self, now: Duration) -> Render {
        let elapsed = self
            .last_render
            .map_or(Duration::ZERO, |t| now.saturating_sub(t));
        self.last_render = Some(now);
        for s in self.smoothers.values_mut() {
            s.decay(elapsed);
        }
        let sampled = self.interpolation.sample_at(now);
        let (render_tick, underrun) = sampled.as_ref().map_or((None, true), |s| {
            (Some(s.render_tick), s.kind.is_underrun())
        });
        let kind = sampled.as_ref().map(|s| s.kind);
        let interpolated =
            sampled.map_or_else(|| Frame::new(Arc::clone(&self.schema)), |s| s.value);
        let mut frame = Frame::new(Arc::clone(&self.schema));
        let mut raw = BTreeMap::new();
        let latest: BTreeSet<u32> = self
            .policies
            .iter()
            .filter(|(_, p)| **p == Policy::Latest)
            .map(|(id, _)| *id)
            .collect();
        // The interpolated entities and the latest ones, in id order.
        let ids: BTreeSet<u32> = interpolated.ids().chain(latest.iter().copied()).collect();
        let mut watched = Vec::with_capacity(UNDERRUN_SAMPLE);
        for id in ids {
            if latest.contains(&id) {
                if let Some(e) = self.replication.get(id) {
                    frame.push_generation(id, e.generation, e.kind, e.values.clone().into());
                    if let Some(p) = self.schema.get(e.kind).and_then(|k| pose_of(k, &e.values)) {
                        raw.insert(id, p);
                    }
                }
            } else if let Some((generation, kind, values)) = interpolated.get_shared(id) {
                if self.policy(id) == Policy::Interpolated {
                    // The buffer's blend is handed on, not copied again.
                    frame.push_generation(id, generation, kind, values);
                    if let Some(p) = interpolated.pose(id) {
                        if watched.len() < UNDERRUN_SAMPLE {
                            watched.push((id, p.position));
                        }
                        raw.insert(id, p);
                    }
                }
            }
        }
        self.take_underrun_cost(&watched, underrun, elapsed);
        let predicted: Vec<u32> = self.predicted_ids().collect();
        for id in predicted {
            if let Some(p) = self.world.pose(id) {
                raw.insert(id, p);
            }
        }
        if let Some((dr, _)) = &self.dead_reckoning {
            let reckoned = self
                .policies
                .iter()
                .filter(|(_, p)| **p == Policy::DeadReckoned);
            for (&id, _) in reckoned {
                if let Some(s) = dr.shown(id, now) {
                    let (sin, cos) = (s.heading / 2.0).sin_cos();
                    let mut pose = Pose::new(s.position, [0.0, sin, 0.0, cos]);
                    pose.linear_velocity = Some(s.velocity);
                    raw.insert(id, pose);
                }
            }
        }
        let switched = std::mem::take(&mut self.switched);
        for id in switched {
            match (self.shown.get(&id).copied(), raw.get(&id)) {
                (Some(old), Some(new)) => {
                    let new = *new;
                    self.smoother(id).correct(
                        old.position,
                        old.rotation,
                        new.position,
                        new.rotation,
                    );
                }
                // Not drawn yet under the new policy: blend when it is.
                (Some(_), None) => {
                    self.switched.insert(id);
                }
                _ => {}
            }
        }
        let poses: BTreeMap<u32, Pose> = raw
            .into_iter()
            .map(|(id, p)| (id, self.smoothed(id, p)))
            .collect();
        // An entity waiting to be drawn under its new policy keeps where it was shown.
        let waiting: Vec<(u32, Pose)> = self
            .switched
            .iter()
            .filter_map(|id| Some((*id, *self.shown.get(id)?)))
            .collect();
        self.shown.clone_from(&poses);
        self.shown.extend(waiting);
        self.render_tick = render_tick;
        let render = Render {
            frame,
            render_tick,
            underrun,
            kind,
            interpolated,
            poses,
        };
        self.world.show(&render);
        render
    }

    /// The newest tick the predicted world has simulated (`None` before it started
    /// predicting, at the first snapshot).
    pub fn predicted_tick(&self) -> Option<Tick> {
        self.predictor.present()
    }

    /// Where predicted entity `id` is drawn now, corrections smoothed as the last
    /// [`Client::render`] left them: the pose after a tick predicted since, without
    /// sampling the interpolation buffer again (`None`: not predicted, or not held).
    pub fn predicted_pose(&self, id: u32) -> Option<Pose> {
        if self.policy(id) != Policy::Predicted {
            return None;
        }
        Some(self.smoothed(id, self.world.pose(id)?))
    }

    /// Entity `id`'s pose `p` with the correction its smoother still hides.
    fn smoothed(&self, id: u32, p: Pose) -> Pose {
        match self.smoothers.get(&id) {
            Some(s) => {
                let (position, rotation) = s.apply(p.position, p.rotation);
                Pose {
                    position,
                    rotation,
                    ..p
                }
            }
            None => p,
        }
    }

    /// Shows the interpolated entities with `config` from now on (its `tick_hz` is the
    /// client's). The buffer starts empty: its estimates belong to the old settings.
    pub fn set_interpolation(&mut self, config: InterpolationConfig) {
        let tick_hz = self.session.config().tick_hz;
        self.interpolation = InterpolationBuffer::new(InterpolationConfig { tick_hz, ..config });
    }

    /// Hides corrections with `smoothing` from now on (a zero half-life: off). The
    /// offsets being hidden now are dropped, so the next frame may jump by them.
    pub fn set_smoothing(&mut self, smoothing: SmoothingConfig) {
        self.smoothing = smoothing;
        self.smoothers.clear();
    }

    /// Corrections too large to hide that were shown at once, summed over the
    /// predicted entities shown now.
    pub fn smoothing_snaps(&self) -> u64 {
        self.smoothers.values().map(ErrorSmoother::snaps).sum()
    }

    /// The game's predicted world.
    pub fn world(&self) -> &W {
        &self.world
    }

    /// The game's predicted world, to change what it predicts (a change the predictor
    /// does not see is overwritten by the next rollback).
    pub fn world_mut(&mut self) -> &mut W {
        &mut self.world
    }

    /// The next spawn or despawn of a replicated entity, oldest first: a despawn and a
    /// spawn of the same id are two events with different generations, whatever was
    /// lost on the way. Events come as snapshots are decoded, before
    /// [`Client::render`] shows their entities.
    pub fn poll_event(&mut self) -> Option<EntityEvent> {
        self.events.pop_front()
    }

    /// The replicated entities as the newest snapshot has them.
    pub fn replication(&self) -> &ReplicationClient {
        &self.replication
    }

    /// The session: clock, round trip, counters.
    pub fn session(&self) -> &ClientSession<W::Input> {
        &self.session
    }

    /// Rollbacks, replayed ticks, resyncs.
    pub fn prediction_stats(&self) -> &PredictionStats {
        self.predictor.stats()
    }

    /// The interpolation buffer (its delay and underrun counters).
    pub fn interpolation(&self) -> &InterpolationBuffer<Frame> {
        &self.interpolation
    }

    /// The dead-reckoning receiver (shown characters, predicted points for a debug
    /// marker, refusals by reason), if configured.
    pub fn dead_reckoning(&self) -> Option<&DrReceiver> {
        self.dead_reckoning.as_ref().map(|(dr, _)| dr)
    }

    /// This client's own counters.
    pub fn stats(&self) -> &ClientNetStats {
        &self.stats
    }
}
