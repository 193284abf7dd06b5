//! A real peer beside lagless: bevy_replicon 0.44 replicating the same world in the same
//! run (`--features replicon`), with its own change detection and serialization, through
//! an in-process backend: its server's messages are handed to one replicon client app per
//! lab client, and their acknowledgements back, every snapshot tick, with no loss and no
//! delay (which spares replicon every resend a lossy link would cost it).
//!
//! Each of the scene's entities is a Bevy entity with one replicated component holding
//! its floats and flags ([`crate::scene::RawEntity`]), written only when a value changed,
//! so replicon sends what changed, as it would for a game's `Transform` and velocity.
//! Bytes are counted as they leave the server, each message as packets of at most
//! [`MAX_PACKET`] payload bytes with [`HEADER_BYTES`] of UDP/IP header each, as
//! `snapshot.peer_kbps` counts them.

use crate::cpu::CpuTimer;
use crate::metrics::{Histogram, Report};
use crate::scene::RawEntity;
use bevy::prelude::*;
use bevy::state::app::StatesPlugin;
use bevy_replicon::prelude::*;
use serde::{Deserialize, Serialize};

/// Payload bytes per packet replicon is told it may send unsplit (`ConnectedClient::max_size`).
pub const MAX_PACKET: usize = 1200;
/// UDP/IP header bytes per packet.
pub const HEADER_BYTES: usize = 28;

/// One entity's state: the scene's floats and flags.
#[derive(Component, Serialize, Deserialize, Clone, PartialEq, Debug, Default)]
struct Body {
    floats: Vec<f32>,
    flags: Vec<bool>,
}

/// The replicon server app, its clients, and what it sent. Each app is kept as its built
/// `World` (an `App` is not `Send`, and the lab's server runs on a thread of its own) and
/// updated as `App::update` does: the main schedule, then the change trackers cleared.
pub struct RepliconPeer {
    server: World,
    /// Each client's world and its connection entity on the server.
    clients: Vec<(World, Entity)>,
    /// Scene entity id -> Bevy entity on the server.
    entities: Vec<Option<Entity>>,
    /// Bytes the server sent, headers included, summed over clients.
    pub bytes: u64,
    /// Packets the server sent.
    pub packets: u64,
    /// CPU per snapshot tick: writing the world into the ECS and replicon's send, µs.
    pub tick_us: Histogram,
}

fn app() -> World {
    let mut app = App::new();
    app.add_plugins((
        MinimalPlugins,
        StatesPlugin,
        // A replicon tick on every update: the lab updates the server once per snapshot.
        RepliconPlugins.set(ServerPlugin::new(PostUpdate)),
    ))
    .replicate::<Body>();
    app.finish();
    app.cleanup();
    std::mem::take(app.world_mut())
}

/// One frame of an app's world, as `App::update` runs it.
fn update(world: &mut World) {
    world.run_schedule(Main);
    world.clear_trackers();
}

impl RepliconPeer {
    /// A server with `clients` connected and authorized clients.
    pub fn new(clients: usize) -> Self {
        let mut server = app();
        server
            .resource_mut::<NextState<ServerState>>()
            .set(ServerState::Running);
        let mut peer = Self {
            server,
            clients: Vec::new(),
            entities: Vec::new(),
            bytes: 0,
            packets: 0,
            tick_us: Histogram::default(),
        };
        for _ in 0..clients.max(1) {
            let mut client = app();
            client
                .resource_mut::<NextState<ClientState>>()
                .set(ClientState::Connected);
            let on_server = peer
                .server
                .spawn(ConnectedClient {
                    max_size: MAX_PACKET,
                })
                .id();
            peer.clients.push((client, on_server));
        }
        // The protocol handshake: a few rounds of updates and exchanges, not counted.
        for _ in 0..4 {
            peer.exchange(false);
        }
        peer
    }

    /// One snapshot tick of the scene's world (`raw`): the changes written into the ECS,
    /// replicon's server update (timed), its messages delivered and counted, the clients
    /// updated and their acknowledgements returned.
    pub fn replicate(&mut self, raw: &[RawEntity]) {
        let timer = CpuTimer::start();
        let world = &mut self.server;
        let mut present = vec![false; self.entities.len()];
        for e in raw {
            let slot = e.id as usize;
            if self.entities.len() <= slot {
                self.entities.resize(slot + 1, None);
                present.resize(slot + 1, false);
            }
            present[slot] = true;
            let body = Body {
                floats: e.floats.clone(),
                flags: e.flags.clone(),
            };
            match self.entities[slot] {
                Some(entity) => {
                    if let Some(mut old) = world.get_mut::<Body>(entity) {
                        // Bevy marks it changed only when written: replicon sends changes.
                        old.set_if_neq(body);
                    }
                }
                None => self.entities[slot] = Some(world.spawn((Replicated, body)).id()),
            }
        }
        for (slot, here) in present.iter().enumerate() {
            if !here {
                if let Some(entity) = self.entities[slot].take() {
                    world.despawn(entity);
                }
            }
        }
        update(&mut self.server);
        self.tick_us.record(timer.ms() * 1000.0);
        self.exchange(true);
    }

    /// Delivers the server's messages to each client (counting them when `count`), updates
    /// the clients, returns their messages, and (when not counting) updates the server.
    fn exchange(&mut self, count: bool) {
        if !count {
            update(&mut self.server);
        }
        let sent: Vec<(Entity, usize, Vec<u8>)> = self
            .server
            .resource_mut::<ServerMessages>()
            .drain_sent()
            .map(|(e, channel, bytes)| (e, channel, bytes.to_vec()))
            .collect();
        for (to, channel, bytes) in sent {
            if count {
                let packets = bytes.len().div_ceil(MAX_PACKET).max(1);
                self.packets += packets as u64;
                self.bytes += (bytes.len() + packets * HEADER_BYTES) as u64;
            }
            if let Some((client, _)) = self.clients.iter_mut().find(|(_, e)| *e == to) {
                client
                    .resource_mut::<ClientMessages>()
                    .insert_received(channel, bytes);
            }
        }
        for (client, on_server) in &mut self.clients {
            update(client);
            let back: Vec<(usize, Vec<u8>)> = client
                .resource_mut::<ClientMessages>()
                .drain_sent()
                .map(|(channel, bytes)| (channel, bytes.to_vec()))
                .collect();
            let mut messages = self.server.resource_mut::<ServerMessages>();
            for (channel, bytes) in back {
                messages.insert_received(*on_server, channel, bytes);
            }
        }
    }

    /// Entities each client holds (replicated to it), for a check that replication ran.
    pub fn client_entities(&mut self) -> Vec<usize> {
        self.clients
            .iter_mut()
            .map(|(client, _)| {
                let mut q = client.query_filtered::<(), With<Remote>>();
                q.iter(client).count()
            })
            .collect()
    }

    /// Adds `snapshot.replicon_kbps` (per client), `snapshot.replicon_ratio` (to
    /// `down_kbps_mean`, lagless's own down rate) and the CPU per snapshot tick.
    pub fn report(
        &self,
        r: &mut Report,
        per_client_kbps: impl Fn(f64) -> f64,
        down_kbps_mean: Option<f64>,
    ) {
        let kbps = per_client_kbps(self.bytes as f64 * 8.0);
        r.number("snapshot.replicon_kbps", Some(kbps));
        r.number(
            "snapshot.replicon_ratio",
            down_kbps_mean.filter(|d| *d > 0.0).map(|d| kbps / d),
        );
        r.number(
            "snapshot.replicon_tick_us_p50",
            self.tick_us.percentile(50.0),
        );
        r.number(
            "snapshot.replicon_tick_us_p99",
            self.tick_us.percentile(99.0),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(id: u32, x: f32) -> RawEntity {
        RawEntity {
            id,
            floats: vec![x, 0.0, 0.0],
            flags: vec![true],
        }
    }

    #[test]
    fn replicates_changes_and_sends_less_for_still_entities() {
        let mut peer = RepliconPeer::new(2);
        let world: Vec<RawEntity> = (0..50).map(|i| body(i, i as f32)).collect();
        peer.replicate(&world);
        assert_eq!(peer.client_entities(), vec![50, 50]);
        let spawned = peer.bytes;
        assert!(
            spawned > 50 * 2 * 13,
            "every body went to both clients: {spawned}"
        );
        // Nothing changed: (almost) nothing sent.
        peer.replicate(&world);
        let still = peer.bytes - spawned;
        // One body moved: a little.
        let mut moved = world.clone();
        moved[7].floats[0] += 1.0;
        peer.replicate(&moved);
        let one = peer.bytes - spawned - still;
        assert!(still < one && one < spawned / 10, "{still} {one} {spawned}");
        // One despawned.
        peer.replicate(&moved[1..]);
        assert_eq!(peer.client_entities(), vec![49, 49]);
        assert_eq!(peer.tick_us.count(), 4);
    }
}
