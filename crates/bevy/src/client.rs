//! The client plugin: replicated entities become Bevy entities; the ones this client owns
//! are predicted by the game's own [`NetTick`] systems in a prediction world, the rest
//! interpolated; every entity's components and `Transform` show what the player should
//! see, corrections smoothed.

use crate::bevy::prelude::*;
use crate::ownership;
use crate::predict::PredictionWorld;
use crate::protocol::{LocalInput, NetClock, NetId, Protocol};
use crate::transport::ClientHost;
use lagless_core::interpolation::InterpolationStats;
use lagless_replication::{ClientNetStats, EntityEvent, Input, Policy, Render};
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
    /// True while the client plays (connected, settings checked).
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

/// The hosted client and the Bevy entities it shows.
#[derive(Resource)]
pub struct NetClient<I: Input + Sync> {
    host: Box<dyn ClientHost<PredictionWorld<I>>>,
    protocol: Protocol,
    /// Replicated id to (Bevy entity, generation).
    entities: BTreeMap<u32, (Entity, u32)>,
    error: Option<SessionError>,
    malformed: u64,
    render: Option<Render>,
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

    /// One frame: packets in, ticks due, packets out, entities shown.
    fn frame(&mut self, world: &mut World) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.host.update() {
            self.error = Some(e);
            return;
        }
        if !self.host.is_ready() {
            return;
        }
        let client = self.host.client_mut();
        while let Some((_, bytes)) = client.poll_message() {
            let Ok(owned) = ownership::decode(&bytes) else {
                self.malformed += 1;
                continue;
            };
            let before = client.world().owned().clone();
            for id in before.difference(&owned) {
                client.set_policy(*id, Policy::Interpolated);
            }
            for id in owned.difference(&before) {
                client.set_policy(*id, Policy::Predicted);
            }
            client.world_mut().set_owned(owned);
        }
        let input = world.get_resource::<LocalInput<I>>().map(|l| l.0);
        while let Some(tick) = client.next_tick() {
            client.tick(tick, input.unwrap_or_default());
        }
        self.host.transmit();
        self.spawn_and_despawn(world);
        let now = self.host.now();
        let render = self.host.client_mut().render(now);
        self.show(world, &render);
        self.render = Some(render);
    }

    /// Maps the replication's spawns and despawns to Bevy entities.
    fn spawn_and_despawn(&mut self, world: &mut World) {
        let client = self.host.client_mut();
        while let Some(event) = client.poll_event() {
            match event {
                EntityEvent::Spawned {
                    id,
                    generation,
                    kind,
                } => {
                    if let Some((old, _)) = self.entities.remove(&id) {
                        world.despawn(old);
                    }
                    let mut e = world.spawn(NetId(id));
                    if let Some(state) = client.replication().get(id) {
                        self.protocol.apply(kind, &state.values, &mut e);
                    }
                    self.entities.insert(id, (e.id(), generation));
                }
                EntityEvent::Despawned { id, generation } => {
                    // A despawn of an older generation than the one shown is stale.
                    if let Some(&(e, g)) = self.entities.get(&id)
                        && g == generation
                    {
                        self.entities.remove(&id);
                        world.despawn(e);
                    }
                }
            }
        }
    }

    /// Writes what the player sees: the predicted entities' components from the
    /// prediction world, the others' from the interpolated frame, and every `Transform`
    /// from its smoothed pose.
    fn show(&self, world: &mut World, render: &Render) {
        let client = self.host.client();
        for (id, (entity, _)) in &self.entities {
            let Ok(mut e) = world.get_entity_mut(*entity) else {
                continue;
            };
            let values = match client.policy(*id) {
                Policy::Predicted => client.world().values(*id),
                _ => render.frame.get(*id).map(|(k, v)| (k, v.to_vec())),
            };
            if let Some((kind, values)) = values {
                self.protocol.apply(kind, &values, &mut e);
            }
            if let Some(pose) = render.pose(*id) {
                e.insert(crate::transform_of(&pose));
            }
        }
    }

    fn statuses(&self) -> (PredictionStatus, InterpolationStatus, NetworkStatus) {
        let client = self.host.client();
        let prediction = PredictionStatus {
            stats: client.prediction_stats().clone(),
            predicted_tick: client.predicted_tick().map(|t| t.0),
            owned: client.world().owned().iter().copied().collect(),
            smoothing_snaps: client.smoothing_snaps(),
        };
        let interpolation = InterpolationStatus {
            render_tick: self.render.as_ref().and_then(|r| r.render_tick),
            delay: client.interpolation().delay_behind_newest(),
            underrun: self.render.as_ref().is_some_and(|r| r.underrun),
            stats: client.interpolation().stats().clone(),
        };
        let session = client.session();
        let network = NetworkStatus {
            ready: self.host.is_ready() && self.error.is_none(),
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

/// The transport's clock for the frame's `Update` (the game's input, say).
fn read_clock<I: Input + Sync>(net: Res<NetClient<I>>, mut clock: ResMut<NetClock>) {
    clock.0 = net.now();
}

fn client_frame<I: Input + Sync>(world: &mut World) {
    world.resource_scope(|world, mut net: Mut<NetClient<I>>| {
        net.frame(world);
        let (p, i, n) = net.statuses();
        world.insert_resource(p);
        world.insert_resource(i);
        world.insert_resource(n);
    });
}

/// Runs a client in the app, on a transport ([`crate::EmulatedNetwork::client`] or a
/// `lagless_transport::GameClient`) hosting a client made by [`Protocol::client`]. The
/// game writes [`LocalInput`] in `Update`; the plugin runs in `PostUpdate`.
pub struct ClientPlugin<I: Input + Sync> {
    protocol: Protocol,
    host: Mutex<Option<Box<dyn ClientHost<PredictionWorld<I>>>>>,
}

impl<I: Input + Sync> ClientPlugin<I> {
    /// A client for `protocol` on `host`.
    pub fn new(protocol: Protocol, host: impl ClientHost<PredictionWorld<I>>) -> Self {
        Self {
            protocol,
            host: Mutex::new(Some(Box::new(host))),
        }
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
        app.init_resource::<LocalInput<I>>()
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
            })
            .add_systems(PreUpdate, read_clock::<I>)
            .add_systems(PostUpdate, client_frame::<I>);
    }
}
