//! Bevy plugins for lagless: a [`ServerPlugin`] (optionally with a host client playing
//! in the same app) and a [`ClientPlugin`], over the public
//! [`lagless_replication::Server`] and [`lagless_replication::Client`].
//!
//! The game declares its replicated components once ([`NetComponent`]: fields and
//! quantization), the kinds of entity that carry them ([`NetKind`], by a marker
//! component) and its simulation: systems in the [`NetTick`] schedule, which read each
//! player's [`NetInput`]. Both ends run those systems: the server once per tick on the
//! world, each client on a prediction world holding only the entities it owns (and again
//! on every rollback). The rest is interpolated. Every replicated entity is a Bevy entity
//! with a [`NetId`], its components and a `Transform` as the player should see it,
//! corrections smoothed. The game writes its player's input to [`LocalInput`] each frame.
//! [`PredictionStatus`], [`InterpolationStatus`], [`NetworkStatus`] and [`ServerStatus`]
//! are resources.
//!
//! Transports: the seeded emulator ([`EmulatedNetwork`]) and real UDP with netcode.io
//! (`lagless_transport::{GameServer, GameClient}`, both [`ServerHost`]/[`ClientHost`]).
//!
//! ```text
//! let protocol = Protocol::builder(NetConfig::new(30))
//!     .kind(NetKind::new::<Player>("player").with::<Position>())
//!     .simulation(|_world, schedule| { schedule.add_systems(move_players); })
//!     .build()?;
//! server_app.add_plugins(ServerPlugin::<u8>::new(protocol.clone(), net.server(protocol.server()?)));
//! client_app.add_plugins(ClientPlugin::<u8>::new(protocol.clone(), net.client(1, protocol.client()?)));
//! ```
//! The arena example (`examples/arena.rs`) is a whole game.

mod client;
mod ownership;
mod predict;
mod protocol;
mod server;
mod transport;

pub use client::{ClientPlugin, InterpolationStatus, NetClient, NetworkStatus, PredictionStatus};
pub use predict::{PredictionWorld, Saved};
pub use protocol::{
    Authority, LocalInput, NetComponent, NetId, NetInput, NetKind, NetTick, Owner, Protocol,
    ProtocolBuilder, SimTick,
};
pub use server::{ClientConnected, ClientDisconnected, NetServer, ServerPlugin, ServerStatus};
pub use transport::{
    ClientHost, Connection, EmulatedClient, EmulatedNetwork, EmulatedServer, ServerHost,
};

use bevy::math::{Quat, Vec3};
use bevy::transform::components::Transform;
use lagless_replication::Pose;

/// The `Transform` a pose shows (2D kinds in the plane z = 0, turned about z).
pub fn transform_of(pose: &Pose) -> Transform {
    let [x, y, z, w] = pose.rotation;
    Transform::from_translation(Vec3::from(pose.position))
        .with_rotation(Quat::from_xyzw(x, y, z, w))
}
