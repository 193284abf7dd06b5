//! The server plugin: the app's world is the authoritative one; the game's [`NetTick`]
//! systems step it once per network tick with every client's input, and what its
//! replicated entities hold goes out as delta snapshots. With a host client, one local
//! player plays in the same app with no network and no prediction.

use crate::bevy::ecs::schedule::Schedule;
use crate::bevy::prelude::*;
use crate::message::{self, TAG_GAME};
use crate::ownership;
use crate::pose::{NetPose, NetSystems, TransformSync};
use crate::protocol::{
    Authority, LateInputs, LocalInput, NetClock, NetId, NetInput, NetTick, Owner, Protocol, SimTick,
};
use crate::transport::{Connection, ServerHost};
use lagless_replication::{
    ClientId, Delivery, Input, KindId, Reader, Server, WireError, pose_of, values_of,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// A client connected (on a host, the host's own player too, in the first frame).
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConnected(pub ClientId);

/// A client left; the entities it owned are despawned.
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientDisconnected(pub ClientId);

/// The server's counters, refreshed every frame.
#[derive(Resource, Debug, Clone, Default, PartialEq)]
pub struct ServerStatus {
    /// The newest tick simulated.
    pub tick: u32,
    /// Clients connected over the network (the host's player is not one).
    pub clients: usize,
    /// Replicated entities.
    pub entities: usize,
    /// Replication bits sent to all clients since the start (those that left too).
    pub snapshot_bits: u64,
    /// Entities left out because a component was missing when they were written.
    pub incomplete: u64,
    /// Messages from clients the adapter did not understand.
    pub malformed_messages: u64,
}

/// The hosted server and what the adapter keeps beside it.
#[derive(Resource)]
pub struct NetServer<I: Input + Sync> {
    host: Box<dyn ServerHost<I>>,
    protocol: Protocol,
    /// Replicated entities: Bevy entity to (id, kind).
    ids: BTreeMap<Entity, (u32, KindId)>,
    /// Per client, the owned set it was last told.
    told: BTreeMap<ClientId, BTreeSet<u32>>,
    host_client: Option<ClientId>,
    host_announced: bool,
    status: ServerStatus,
    /// Replication bits sent to clients that have left.
    departed_bits: u64,
    /// Per connected client, the bits last counted.
    last_bits: BTreeMap<ClientId, u64>,
}

impl<I: Input + Sync> NetServer<I> {
    /// The hosted server (its counters, latency per client).
    pub fn server(&self) -> &Server<I> {
        self.host.server()
    }

    /// The hosted server, for what the adapter does not cover.
    pub fn server_mut(&mut self) -> &mut Server<I> {
        self.host.server_mut()
    }

    /// The transport's clock.
    pub fn now(&self) -> std::time::Duration {
        self.host.now()
    }

    /// The Bevy entity replicated as `id`.
    pub fn entity(&self, id: u32) -> Option<Entity> {
        self.ids
            .iter()
            .find(|(_, (i, _))| *i == id)
            .map(|(e, _)| *e)
    }

    /// The host's own player, in host-client mode.
    pub fn host_client(&self) -> Option<ClientId> {
        self.host_client
    }

    /// Registers new replicated entities with the server, and despawns the ones gone.
    fn register(&mut self, world: &mut World) {
        let gone: Vec<(Entity, u32)> = self
            .ids
            .iter()
            .filter(|(e, (_, kind))| {
                world
                    .get_entity(**e)
                    .map_or(true, |r| !self.protocol.complete(*kind, &r))
            })
            .map(|(e, (id, _))| (*e, *id))
            .collect();
        for (entity, id) in gone {
            self.ids.remove(&entity);
            // Despawning an id the server holds cannot fail.
            let _ = self.host.server_mut().despawn(id);
            if let Ok(mut e) = world.get_entity_mut(entity) {
                e.remove::<NetId>();
            }
        }
        for (kind, entity) in self.protocol.marked(world) {
            if self.ids.contains_key(&entity) {
                continue;
            }
            let Ok(r) = world.get_entity(entity) else {
                continue;
            };
            if !self.protocol.complete(kind, &r) {
                continue;
            }
            let protocol = &self.protocol;
            match self
                .host
                .server_mut()
                .spawn(kind, |w| protocol.write(kind, &r, w))
            {
                Ok(id) => {
                    self.ids.insert(entity, (id, kind));
                    world.entity_mut(entity).insert(NetId(id));
                }
                Err(_) => self.status.incomplete += 1,
            }
        }
    }

    /// Writes every replicated entity's state for the tick just stepped.
    fn write_states(&mut self, world: &World) {
        let protocol = &self.protocol;
        for (entity, (id, kind)) in &self.ids {
            let Ok(r) = world.get_entity(*entity) else {
                continue;
            };
            let server = self.host.server_mut();
            if server
                .update_entity(*id, |w| protocol.write(*kind, &r, w))
                .is_err()
            {
                self.status.incomplete += 1;
            }
        }
    }

    /// Tells each client the entities it owns when that set changed.
    fn tell_owners(&mut self, world: &mut World) {
        let mut owned: BTreeMap<ClientId, BTreeSet<u32>> = BTreeMap::new();
        let mut q = world.query::<(&NetId, &Owner)>();
        for (id, owner) in q.iter(world) {
            owned.entry(owner.0).or_default().insert(id.0);
        }
        let clients: Vec<ClientId> = self.told.keys().copied().collect();
        for client in clients {
            let now = owned.remove(&client).unwrap_or_default();
            if self.told.get(&client) == Some(&now) {
                continue;
            }
            let ids: Vec<u32> = now.iter().copied().collect();
            let server = self.host.server_mut();
            server.set_owned(client, &ids);
            if server
                .send_message(client, Delivery::Reliable, &ownership::encode(&now))
                .is_ok()
            {
                self.told.insert(client, now);
            }
        }
    }

    /// One frame: connections, every tick due, snapshots, packets out.
    fn frame(&mut self, world: &mut World) {
        let mut connections = Vec::new();
        self.host.update(&mut connections);
        if let (Some(host), false) = (self.host_client, self.host_announced) {
            self.host_announced = true;
            world.write_message(ClientConnected(host));
        }
        for c in connections {
            match c {
                Connection::Connected(id) => {
                    self.told.insert(id, BTreeSet::new());
                    world.write_message(ClientConnected(id));
                }
                Connection::Disconnected(id) => {
                    self.told.remove(&id);
                    // Its counters go with it; the total keeps what it was sent.
                    self.departed_bits += self.last_bits.remove(&id).unwrap_or(0);
                    let mut q = world.query::<(Entity, &Owner)>();
                    let owned: Vec<Entity> = q
                        .iter(world)
                        .filter(|(_, o)| o.0 == id)
                        .map(|(e, _)| e)
                        .collect();
                    for e in owned {
                        world.despawn(e);
                    }
                    world.write_message(ClientDisconnected(id));
                }
            }
        }
        self.receive_messages(world);
        self.register(world);
        self.tell_owners(world);
        let now = self.host.now();
        while let Some(step) = self.host.server_mut().next_tick() {
            let mut inputs: BTreeMap<ClientId, I> = step
                .inputs
                .into_iter()
                .map(|(c, i)| (c, i.unwrap_or_default()))
                .collect();
            if let Some(host) = self.host_client {
                // The host's input applies on the tick it is made: no network, no lead.
                let local = world.get_resource::<LocalInput<I>>().map(|l| l.0);
                inputs.insert(host, local.unwrap_or_default());
            }
            let mut q = world.query::<(Entity, &Owner)>();
            let owned: Vec<(Entity, ClientId)> = q.iter(world).map(|(e, o)| (e, o.0)).collect();
            for (entity, client) in owned {
                let input = inputs.get(&client).copied().unwrap_or_default();
                world.entity_mut(entity).insert(NetInput(input));
            }
            let late = step.late.iter().map(|&(c, t, i)| (c, t.0, i)).collect();
            world.insert_resource(LateInputs(late));
            // The state this step reaches: the snapshot's tick (see `SimTick`).
            world.insert_resource(SimTick(step.tick.0.wrapping_add(1)));
            world.run_schedule(NetTick);
            self.register(world);
            self.write_states(world);
            // Refusals here are the game's misuse (an oversized state): counted, not fatal.
            if self.host.server_mut().send_snapshots(now).is_err() {
                self.status.incomplete += 1;
            }
        }
        self.send_messages(world);
        self.host.transmit();
        if self.host_client.is_some() {
            self.show(world);
        }
        let server = self.host.server();
        self.status.tick = server.current_tick().0;
        self.status.clients = self.told.len();
        self.status.entities = self.ids.len();
        for c in self.told.keys() {
            if let Some(s) = server.replication_stats(*c) {
                self.last_bits.insert(*c, s.bits);
            }
        }
        self.status.snapshot_bits = self.departed_bits + self.last_bits.values().sum::<u64>();
    }

    /// Reads the clients' game messages into [`crate::FromClient`] messages.
    fn receive_messages(&mut self, world: &mut World) {
        while let Some((client, _, bytes)) = self.host.server_mut().poll_message() {
            if self.receive_message(world, client, &bytes).is_err() {
                self.status.malformed_messages += 1;
            }
        }
    }

    fn receive_message(
        &self,
        world: &mut World,
        client: ClientId,
        bytes: &[u8],
    ) -> Result<(), WireError> {
        let mut r = Reader::new(bytes);
        if r.read_u8()? != TAG_GAME {
            return Err(WireError::Invalid {
                what: "adapter message tag",
            });
        }
        let messages = self.protocol.messages();
        let i = message::read_index(messages, &mut r)?;
        (messages[i].server_in)(world, client, &mut r)
    }

    /// Sends the game's [`crate::ToClients`] messages written this frame.
    fn send_messages(&mut self, world: &mut World) {
        let clients: Vec<ClientId> = self.told.keys().copied().collect();
        for (i, m) in self.protocol.messages().iter().enumerate() {
            let mut out: message::OutgoingToClients = Vec::new();
            (m.server_out)(world, &mut out);
            for (target, delivery, body) in out {
                let bytes = message::frame_game(i, &body);
                for c in clients.iter().filter(|c| target.includes(**c)) {
                    // Refused only when the client's channel is full: lost, as on a
                    // full socket.
                    let _ = self.host.server_mut().send_message(*c, delivery, &bytes);
                }
            }
        }
    }

    /// On a host: every replicated entity's [`NetPose`] from its current state (the
    /// host shows the authoritative present), written when it changed.
    fn show(&self, world: &mut World) {
        for (entity, (_, kind)) in &self.ids {
            let pose = world.get_entity(*entity).ok().and_then(|r| {
                let codes = self.protocol.codes(*kind, &r)?;
                let k = self.protocol.schema().get(*kind)?;
                pose_of(k, &values_of(k, &codes))
            });
            if let (Some(p), Ok(mut e)) = (pose, world.get_entity_mut(*entity)) {
                let pose = NetPose::of(&p);
                let has_transform = e.contains::<Transform>();
                match e.get_mut::<NetPose>() {
                    Some(mut old) => {
                        old.set_if_neq(pose);
                    }
                    // A new entity gets a `Transform` at its pose with it, so a
                    // visual never sits at the origin.
                    None if has_transform => {
                        e.insert(pose);
                    }
                    None => {
                        e.insert((pose, pose.transform()));
                    }
                }
            }
        }
    }
}

/// The transport's clock for the frame's `Update` (the game's input, say).
fn read_clock<I: Input + Sync>(net: Res<NetServer<I>>, mut clock: ResMut<NetClock>) {
    clock.0 = net.now();
}

fn server_frame<I: Input + Sync>(world: &mut World) {
    world.resource_scope(|world, mut net: Mut<NetServer<I>>| {
        net.frame(world);
        // Written only when changed, like the components.
        crate::client::set_resource(world, net.status.clone());
    });
}

/// Runs a server in the app: `protocol`'s simulation in [`NetTick`], hosted on a
/// transport ([`crate::EmulatedNetwork::server`] or a `lagless_transport::GameServer`).
/// It runs in `PostUpdate`, so inputs and spawns the game makes in `Update` go out the
/// same frame.
pub struct ServerPlugin<I: Input + Sync> {
    protocol: Protocol,
    host: Mutex<Option<Box<dyn ServerHost<I>>>>,
    host_client: Option<ClientId>,
    sync: TransformSync,
}

impl<I: Input + Sync> ServerPlugin<I> {
    /// A server for `protocol` on `host`.
    pub fn new(protocol: Protocol, host: impl ServerHost<I>) -> Self {
        Self {
            protocol,
            host: Mutex::new(Some(Box::new(host))),
            host_client: None,
            sync: TransformSync::Off,
        }
    }

    /// On a host, writes `Transform` from each replicated entity's [`NetPose`] as `sync`
    /// says (off by default: the game owns `Transform`).
    pub fn with_transform_sync(mut self, sync: TransformSync) -> Self {
        self.sync = sync;
        self
    }

    /// Host-client mode: a local player with client id `id` plays in this app, its
    /// [`LocalInput`] applied on the tick it is made. It is announced with a
    /// [`ClientConnected`] like any other, so the game spawns its player the same way.
    pub fn with_host_client(mut self, id: ClientId) -> Self {
        self.host_client = Some(id);
        self
    }
}

impl<I: Input + Sync> Plugin for ServerPlugin<I> {
    fn build(&self, app: &mut App) {
        let host = self
            .host
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(host) = host else {
            // A plugin is built once; a second build has nothing to host.
            return;
        };
        let mut schedule = Schedule::new(NetTick);
        self.protocol
            .build_simulation(app.world_mut(), &mut schedule);
        for m in self.protocol.messages() {
            (m.add_server)(app);
        }
        crate::pose::configure(app, self.sync);
        app.add_schedule(schedule)
            .add_message::<ClientConnected>()
            .add_message::<ClientDisconnected>()
            .init_resource::<LocalInput<I>>()
            .init_resource::<LateInputs<I>>()
            .init_resource::<ServerStatus>()
            .init_resource::<NetClock>()
            .insert_resource(Authority)
            .insert_resource(NetServer {
                host,
                protocol: self.protocol.clone(),
                ids: BTreeMap::new(),
                told: BTreeMap::new(),
                host_client: self.host_client,
                host_announced: false,
                status: ServerStatus::default(),
                departed_bits: 0,
                last_bits: BTreeMap::new(),
            })
            .add_systems(PreUpdate, read_clock::<I>.in_set(NetSystems::Clock))
            .add_systems(PostUpdate, server_frame::<I>.in_set(NetSystems::Frame));
    }
}
