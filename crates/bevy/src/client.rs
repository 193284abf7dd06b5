//! The client plugin: replicated entities become Bevy entities; the ones this client owns
//! are predicted by the game's own [`NetTick`] systems in a prediction world, the rest
//! interpolated. An entity exists in the app exactly while the frame the player is shown
//! holds it: an interpolated one from its spawn tick to its despawn tick as the render
//! tick reaches them, a predicted one while the prediction world holds it, each of one
//! generation (a reused id is a new Bevy entity).
//!
//! [`NetTick`]: crate::NetTick

use crate::bevy::prelude::*;
use crate::message::{self, TAG_GAME, TAG_OWNED};
use crate::ownership;
use crate::pose::{NetPose, NetSystems, TransformSync};
use crate::predict::PredictionWorld;
use crate::protocol::{LocalInput, NetClock, NetId, Protocol};
use crate::transport::ClientHost;
use lagless_core::interpolation::InterpolationStats;
use lagless_replication::{
    ClientId, ClientNetStats, Input, KindId, Policy, Reader, Render, WireError,
};
use lagless_transport::session::SessionError;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Prediction as it stands, refreshed every frame.
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq)]
pub struct PredictionStatus {
    /// Rollbacks, replayed ticks, resyncs.
    pub stats: lagless_core::PredictionStats,
    /// The newest tick predicted.
    pub predicted_tick: Option<u32>,
    /// The entities this client owns and predicts.
    pub owned: Vec<u32>,
    /// Corrections too large to smooth, shown at once.
    pub smoothing_snaps: u64,
    /// Replicated entities the simulation spawned in the prediction world (despawned
    /// there: only the server spawns; see [`crate::PredictionWorld::leaked`]).
    pub leaked_entities: u64,
    /// Components the simulation names that the prediction world never holds, once
    /// prediction fails most comparisons ([`crate::PredictionWorld::lacking`]).
    pub lacking_components: Vec<String>,
    /// Systems added to the client app's own `NetTick` schedule: they never run (a
    /// client steps its prediction world, built by `ProtocolBuilder::simulation`).
    /// Warned about once.
    pub ignored_systems: usize,
}

/// Interpolation as it stands, refreshed every frame.
#[derive(Resource, Debug, Clone, Default, PartialEq)]
pub struct InterpolationStatus {
    /// The fractional server tick the interpolated entities show.
    pub render_tick: Option<f64>,
    /// How far behind the newest snapshot they are shown.
    pub delay: Option<Duration>,
    /// True when the last frame had no snapshot on one side of its render time.
    pub underrun: bool,
    /// The buffer's counters.
    pub stats: InterpolationStats,
}

/// The connection as it stands, refreshed every frame.
#[derive(Resource, Debug, Clone, Default, PartialEq)]
pub struct NetworkStatus {
    /// True while the client plays: connected, settings checked, and the server has
    /// heard it (its first snapshot came).
    pub ready: bool,
    /// Why the session ended, if it did.
    pub error: Option<SessionError>,
    /// The smoothed round trip.
    pub rtt: Option<Duration>,
    /// The client's lead over the server, ticks (its input buffer).
    pub lead_ticks: f64,
    /// Packets and bytes each way, snapshots.
    pub session: lagless_core::ClientStats,
    /// Snapshots and frames refused, events dropped.
    pub client: ClientNetStats,
    /// Messages from the server the adapter did not understand.
    pub malformed_messages: u64,
}

/// This client's id, once the transport knows it: the emulator's at once; over UDP
/// (`lagless_transport::GameClient`) the one the server's hello names.
#[derive(Resource, Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalClient(pub ClientId);

/// The client is playing: the server has heard it (its first snapshot came).
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectedToServer;

/// The session ended; every replicated entity has been despawned.
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct DisconnectedFromServer(pub SessionError);

/// Events the server framed with a snapshot (`Server::set_snapshot_events`), as the
/// snapshot arrives: the snapshot's tick and the game's bytes (repeats possible).
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct SnapshotEvents {
    /// The snapshot's server tick.
    pub tick: u32,
    /// The game's bytes.
    pub bytes: Vec<u8>,
}

/// On a client: this entity is predicted (simulated ahead in the prediction world).
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Predicted;

/// On a client: this entity is shown interpolated, in the past.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Interpolated;

/// On a client: this client owns this entity (drives it with its input).
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Controlled;

/// On a client: the replicated entity's generation (an id reused by the server is a new
/// generation, and a new Bevy entity).
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetGeneration(pub u32);

/// One replicated entity as this frame shows it.
struct Shown {
    generation: u32,
    kind: KindId,
    values: Vec<f32>,
    pose: Option<NetPose>,
    predicted: bool,
}

/// The hosted client and the Bevy entities it shows.
#[derive(Resource)]
pub struct NetClient<I: Input + Sync> {
    host: Box<dyn ClientHost<PredictionWorld<I>>>,
    protocol: Protocol,
    /// Replicated id to (Bevy entity, generation), as shown.
    entities: BTreeMap<u32, (Entity, u32)>,
    error: Option<SessionError>,
    malformed: u64,
    render: Option<Render>,
    /// Whether [`ConnectedToServer`] was sent.
    connected: bool,
    /// Set by [`NetClient::disconnect`]: the next frame leaves.
    leave: bool,
    /// Systems found in the app's own `NetTick` (checked once, at the first frame).
    ignored_systems: Option<usize>,
}

impl<I: Input + Sync> NetClient<I> {
    /// The hosted client (its session, replication, prediction).
    pub fn client(&self) -> &lagless_replication::Client<PredictionWorld<I>> {
        self.host.client()
    }

    /// The transport's clock.
    pub fn now(&self) -> Duration {
        self.host.now()
    }

    /// The Bevy entity showing replicated entity `id`.
    pub fn entity(&self, id: u32) -> Option<Entity> {
        self.entities.get(&id).map(|(e, _)| *e)
    }

    /// What the last frame showed (poses by id, the interpolated frame).
    pub fn render(&self) -> Option<&Render> {
        self.render.as_ref()
    }

    /// Leaves the server at the next frame: the transport says goodbye (the server
    /// hears it at once rather than after a timeout), every replicated entity is
    /// despawned and [`DisconnectedFromServer`] is written.
    pub fn disconnect(&mut self) {
        self.leave = true;
    }

    /// One frame: packets in, messages, ticks due, packets out, entities shown.
    fn frame(&mut self, world: &mut World) {
        if self.error.is_some() {
            return;
        }
        if self.leave {
            self.host.disconnect();
            self.end(world, SessionError::Left);
            return;
        }
        if let Err(e) = self.host.update() {
            self.end(world, e);
            return;
        }
        if !self.host.is_ready() {
            return;
        }
        self.receive_messages(world);
        let client = self.host.client_mut();
        let input = world.get_resource::<LocalInput<I>>().map(|l| l.0);
        while let Some(tick) = client.next_tick() {
            client.tick(tick, input.unwrap_or_default());
        }
        for (delivery, bytes) in message::client_outgoing(self.protocol.messages(), world) {
            // Refused only when the channel is full: the message is lost, as a Bevy
            // game's message would be on a full socket.
            let _ = self.host.client_mut().send_message(delivery, &bytes);
        }
        self.host.transmit();
        let client = self.host.client_mut();
        // Entities follow the rendered frame (below), not these events.
        while client.poll_event().is_some() {}
        for (tick, bytes) in client.world_mut().take_snapshot_events() {
            world.write_message(SnapshotEvents { tick, bytes });
        }
        if !self.connected && client.replication().newest().is_some() {
            self.connected = true;
            world.write_message(ConnectedToServer);
        }
        let now = self.host.now();
        let render = self.host.client_mut().render(now);
        self.show(world, &render);
        self.render = Some(render);
    }

    /// The session is over: what it showed goes.
    fn end(&mut self, world: &mut World, error: SessionError) {
        self.error = Some(error);
        for (_, (e, _)) in std::mem::take(&mut self.entities) {
            world.despawn(e);
        }
        world.write_message(DisconnectedFromServer(error));
    }

    /// Reads the server's messages: the adapter's ownership ones and the game's.
    fn receive_messages(&mut self, world: &mut World) {
        while let Some((_, bytes)) = self.host.client_mut().poll_message() {
            if self.receive_message(world, &bytes).is_err() {
                self.malformed += 1;
            }
        }
    }

    fn receive_message(&mut self, world: &mut World, bytes: &[u8]) -> Result<(), WireError> {
        let mut r = Reader::new(bytes);
        match r.read_u8()? {
            TAG_OWNED => {
                let owned = ownership::decode(bytes)?;
                let client = self.host.client_mut();
                let before = client.world().owned().clone();
                for id in before.difference(&owned) {
                    client.set_policy(*id, Policy::Interpolated);
                }
                for id in owned.difference(&before) {
                    client.set_policy(*id, Policy::Predicted);
                }
                client.world_mut().set_owned(owned);
                Ok(())
            }
            TAG_GAME => {
                let messages = self.protocol.messages();
                let i = message::read_index(messages, &mut r)?;
                (messages[i].client_in)(world, &mut r)
            }
            _ => Err(WireError::Invalid {
                what: "adapter message tag",
            }),
        }
    }

    /// What the player is shown of each replicated entity this frame: the predicted ones
    /// as the prediction world holds them, the others as the rendered frame has them at
    /// the render tick (so an entity appears at its spawn tick and goes at its
    /// despawn tick), each with its generation.
    fn shown(&self, render: &Render) -> BTreeMap<u32, Shown> {
        let client = self.host.client();
        let mut out = BTreeMap::new();
        for &id in client.world().owned() {
            if client.policy(id) != Policy::Predicted {
                continue;
            }
            if let Some((generation, kind, values)) = client.world().held(id) {
                let pose = render.pose(id).map(|p| NetPose::of(&p));
                let predicted = true;
                out.insert(
                    id,
                    Shown {
                        generation,
                        kind,
                        values,
                        pose,
                        predicted,
                    },
                );
            } else if let (Some(generation), Some((kind, values))) = (
                render.interpolated.generation(id),
                render.interpolated.get(id),
            ) {
                // Owned but not yet in the prediction world (it enters at the next
                // reconciliation): shown interpolated meanwhile, not dropped.
                let pose = render.interpolated.pose(id).map(|p| NetPose::of(&p));
                let values = values.to_vec();
                let predicted = false;
                out.insert(
                    id,
                    Shown {
                        generation,
                        kind,
                        values,
                        pose,
                        predicted,
                    },
                );
            }
        }
        for id in render.frame.ids() {
            let (Some(generation), Some((kind, values))) =
                (render.frame.generation(id), render.frame.get(id))
            else {
                continue;
            };
            // The render's pose of an id in its frame comes from that frame (the same
            // generation), with a policy switch smoothed.
            let pose = render.pose(id).map(|p| NetPose::of(&p));
            let values = values.to_vec();
            let predicted = false;
            out.entry(id).or_insert(Shown {
                generation,
                kind,
                values,
                pose,
                predicted,
            });
        }
        out
    }

    /// Spawns, writes and despawns the Bevy entities to match what is shown. A value is
    /// written only when it changed; a new entity gets its components, its pose and a
    /// `Transform` at once.
    fn show(&mut self, world: &mut World, render: &Render) {
        let mut shown = self.shown(render);
        let gone: Vec<u32> = self
            .entities
            .iter()
            .filter(|(id, (_, g))| shown.get(id).is_none_or(|s| s.generation != *g))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some((e, _)) = self.entities.remove(&id) {
                world.despawn(e);
            }
        }
        // New entities first, so references among this frame's entities map.
        for (id, s) in &shown {
            if !self.entities.contains_key(id) {
                let pose = s.pose.unwrap_or_default();
                let bundle = (
                    NetId(*id),
                    NetGeneration(s.generation),
                    pose,
                    pose.transform(),
                );
                self.entities
                    .insert(*id, (world.spawn(bundle).id(), s.generation));
            }
        }
        let owned = self.host.client().world().owned().clone();
        let entities = &self.entities;
        let entity_of = |id: u32| entities.get(&id).map(|(e, _)| *e);
        for (id, s) in std::mem::take(&mut shown) {
            let Some(Ok(mut e)) = entities.get(&id).map(|(e, _)| world.get_entity_mut(*e)) else {
                continue;
            };
            self.protocol.apply(s.kind, &s.values, &mut e, &entity_of);
            if let Some(pose) = s.pose {
                match e.get_mut::<NetPose>() {
                    Some(mut p) => {
                        p.set_if_neq(pose);
                    }
                    None => {
                        e.insert(pose);
                    }
                }
            }
            set_marker(&mut e, Predicted, s.predicted);
            set_marker(&mut e, Interpolated, !s.predicted);
            set_marker(&mut e, Controlled, owned.contains(&id));
        }
    }

    fn statuses(&self) -> (PredictionStatus, InterpolationStatus, NetworkStatus) {
        let client = self.host.client();
        let prediction = PredictionStatus {
            stats: client.prediction_stats().clone(),
            predicted_tick: client.predicted_tick().map(|t| t.0),
            owned: client.world().owned().iter().copied().collect(),
            smoothing_snaps: client.smoothing_snaps(),
            leaked_entities: client.world().leaked(),
            lacking_components: client.world().lacking().to_vec(),
            ignored_systems: self.ignored_systems.unwrap_or(0),
        };
        let interpolation = InterpolationStatus {
            render_tick: self.render.as_ref().and_then(|r| r.render_tick),
            delay: client.interpolation().delay_behind_newest(),
            underrun: self.render.as_ref().is_some_and(|r| r.underrun),
            stats: client.interpolation().stats().clone(),
        };
        let session = client.session();
        let network = NetworkStatus {
            ready: self.host.is_ready() && self.connected && self.error.is_none(),
            error: self.error,
            rtt: session.rtt().smoothed(),
            lead_ticks: session.target_lead_ticks(),
            session: session.stats(),
            client: client.stats().clone(),
            malformed_messages: self.malformed,
        };
        (prediction, interpolation, network)
    }
}

/// Inserts or removes marker `M`, touching nothing when it is already as wanted.
fn set_marker<M: Component>(e: &mut EntityWorldMut, marker: M, on: bool) {
    match (on, e.contains::<M>()) {
        (true, false) => {
            e.insert(marker);
        }
        (false, true) => {
            e.remove::<M>();
        }
        _ => {}
    }
}

/// The transport's clock for the frame's `Update` (the game's input, say).
fn read_clock<I: Input + Sync>(net: Res<NetClient<I>>, mut clock: ResMut<NetClock>) {
    clock.0 = net.now();
}

/// Systems in the app's own [`crate::NetTick`] schedule, which a client never runs.
fn app_net_tick_systems(world: &World) -> usize {
    world
        .get_resource::<crate::bevy::ecs::schedule::Schedules>()
        .and_then(|s| s.get(crate::NetTick))
        .map_or(0, |s| s.systems_len())
}

fn client_frame<I: Input + Sync>(world: &mut World) {
    world.resource_scope(|world, mut net: Mut<NetClient<I>>| {
        if net.ignored_systems.is_none() {
            let n = app_net_tick_systems(world);
            if n > 0 {
                tracing::warn!(
                    "lagless-bevy: {n} systems were added to a client app's NetTick \
                     schedule; a client never runs it (it steps its prediction world): add \
                     them in ProtocolBuilder::simulation"
                );
            }
            net.ignored_systems = Some(n);
        }
        net.frame(world);
        let (p, i, n) = net.statuses();
        // Written only when changed, like the components.
        set_resource(world, p);
        set_resource(world, i);
        set_resource(world, n);
        if let Some(id) = net.host.id()
            && world.get_resource::<LocalClient>() != Some(&LocalClient(id))
        {
            world.insert_resource(LocalClient(id));
        }
    });
}

/// Inserts `value` unless the resource already holds it (so `is_changed` means a change).
pub(crate) fn set_resource<R: Resource + PartialEq>(world: &mut World, value: R) {
    if world.get_resource::<R>() != Some(&value) {
        world.insert_resource(value);
    }
}

/// Runs a client in the app, on a transport ([`crate::EmulatedNetwork::client`] or a
/// `lagless_transport::GameClient`) hosting a client made by [`Protocol::client`]. The
/// game writes [`LocalInput`] in `Update`; the plugin runs in `PostUpdate`
/// ([`NetSystems`]).
pub struct ClientPlugin<I: Input + Sync> {
    protocol: Protocol,
    host: Mutex<Option<Box<dyn ClientHost<PredictionWorld<I>>>>>,
    sync: TransformSync,
}

impl<I: Input + Sync> ClientPlugin<I> {
    /// A client for `protocol` on `host`.
    pub fn new(protocol: Protocol, host: impl ClientHost<PredictionWorld<I>>) -> Self {
        Self {
            protocol,
            host: Mutex::new(Some(Box::new(host))),
            sync: TransformSync::Off,
        }
    }

    /// Writes `Transform` from each entity's [`NetPose`] as `sync` says (off by default:
    /// the game owns `Transform`).
    pub fn with_transform_sync(mut self, sync: TransformSync) -> Self {
        self.sync = sync;
        self
    }
}

impl<I: Input + Sync> Plugin for ClientPlugin<I> {
    fn build(&self, app: &mut App) {
        let host = self
            .host
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(host) = host else {
            return;
        };
        for m in self.protocol.messages() {
            (m.add_client)(app);
        }
        crate::pose::configure(app, self.sync);
        app.add_message::<ConnectedToServer>()
            .add_message::<DisconnectedFromServer>()
            .add_message::<SnapshotEvents>()
            .init_resource::<LocalInput<I>>()
            .init_resource::<PredictionStatus>()
            .init_resource::<NetClock>()
            .init_resource::<InterpolationStatus>()
            .init_resource::<NetworkStatus>()
            .insert_resource(NetClient {
                host,
                protocol: self.protocol.clone(),
                entities: BTreeMap::new(),
                error: None,
                malformed: 0,
                render: None,
                connected: false,
                leave: false,
                ignored_systems: None,
            })
            .add_systems(PreUpdate, read_clock::<I>.in_set(NetSystems::Clock))
            .add_systems(PostUpdate, client_frame::<I>.in_set(NetSystems::Frame));
    }
}
