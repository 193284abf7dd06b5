//! Bevy plugins for lagless: a [`ServerPlugin`] (optionally with a host client playing
//! in the same app) and a [`ClientPlugin`], over the public
//! [`lagless_replication::Server`] and [`lagless_replication::Client`].
//!
//! The game declares its replicated components once ([`NetComponent`]: fields and
//! quantization), the kinds of entity that carry them ([`NetKind`], by a marker
//! component) and its simulation: systems in the [`NetTick`] schedule, which read each
//! player's [`NetInput`]. Both ends run those systems: the server once per tick on the
//! world, each client on a prediction world holding only the entities it owns (and again
//! on every rollback). The rest is interpolated. A replicated entity is a Bevy entity
//! while the frame the player is shown holds it (interpolated ones from their spawn tick
//! to their despawn tick at the render tick, one Bevy entity per generation of an id),
//! with a [`NetId`], a [`NetGeneration`], its components (written only when they change),
//! a [`NetPose`] where the player should see it (corrections smoothed) and a
//! [`Predicted`] or [`Interpolated`] marker ([`Controlled`] on what the client owns).
//! `Transform` is the game's: it is set at spawn, and follows [`NetPose`] only with
//! [`TransformSync`]. The game writes its player's input to [`LocalInput`] each frame,
//! and its messages as [`ToServer`]/[`ToClients`] (read as [`FromClient`]/[`FromServer`]),
//! registered once with [`ProtocolBuilder::message`]. The adapter's systems are in
//! [`NetSystems`]. [`PredictionStatus`], [`InterpolationStatus`], [`NetworkStatus`],
//! [`ServerStatus`] and [`LocalClient`] are resources.
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
//! The arena example (`examples/arena.rs`) is a whole game; `examples/projectiles.rs`
//! spawns and despawns shots every second.

/// The parts of Bevy the adapter is built on, under the `bevy` crate's paths, for a game
/// that depends on nothing else (the examples do).
pub mod bevy {
    pub use bevy_app as app;
    pub use bevy_ecs as ecs;
    pub use bevy_math as math;
    pub use bevy_transform as transform;

    /// Everything a game's systems usually name.
    ///
    /// It also names the `bevy_ecs` crate: Bevy's derives (`Component`, `Resource`,
    /// `Message`, `SystemSet`) expand to paths starting `bevy_ecs::` when the game's
    /// manifest names neither `bevy` nor `bevy_ecs`, and this glob import is what those
    /// paths then find. A game that depends on nothing but `lagless-bevy` derives them
    /// in any module that imports this prelude.
    pub mod prelude {
        pub use bevy_ecs;

        pub use bevy_app::prelude::*;
        pub use bevy_ecs::prelude::*;
        pub use bevy_math::prelude::*;
        pub use bevy_transform::prelude::*;
    }
}

mod client;
mod message;
mod ownership;
mod pose;
mod predict;
mod protocol;
mod server;
mod transport;

pub use client::{
    ClientPlugin, ConnectedToServer, Controlled, DisconnectedFromServer, Interpolated,
    InterpolationStatus, LocalClient, NetClient, NetGeneration, NetworkStatus, Predicted,
    PredictionStatus, SnapshotEvents,
};
pub use message::{FromClient, FromServer, NetMessage, Target, ToClients, ToServer};
pub use pose::{NetPose, NetSystems, TransformSync};
pub use predict::{PredictionWorld, Saved};
pub use protocol::{
    Authority, LateInputs, LocalInput, NetClock, NetComponent, NetId, NetInput, NetKind, NetRef,
    NetTick, Owner, Protocol, ProtocolBuilder, SimTick,
};
pub use server::{ClientConnected, ClientDisconnected, NetServer, ServerPlugin, ServerStatus};
pub use transport::{
    ClientHost, Connection, EmulatedClient, EmulatedNetwork, EmulatedServer, ServerHost,
};

/// Implements [`NetComponent`] for a one-field tuple struct whose field converts to and
/// from one of the schema's field types: `net_component!(Position, vec2("position", 50.0,
/// 0.01));` declares a 2D position of ±50 m at 1 cm; `net_component!(Score, int("score",
/// 0, 999));` an integer.
#[macro_export]
macro_rules! net_component {
    ($ty:ident, $field:ident($($arg:expr),* $(,)?)) => {
        impl $crate::NetComponent for $ty {
            fn declare(kind: $crate::Kind) -> $crate::Kind {
                kind.$field($($arg),*)
            }
            fn write(&self, w: &mut $crate::StateWriter) {
                w.$field(self.0.into());
            }
            fn read(r: &mut $crate::StateReader) -> Self {
                Self(r.$field().into())
            }
        }
    };
}

pub use lagless_replication::{
    Delivery, Kind, NetConfig, Reader, StateReader, StateWriter, WireError, Writer,
};

/// The `Transform` a pose shows (2D kinds in the plane z = 0, turned about z).
pub fn transform_of(pose: &lagless_replication::Pose) -> bevy_transform::components::Transform {
    NetPose::of(pose).transform()
}
