//! Replication for lagless: a game declares its entity kinds once, and the library
//! sends their state to every client as compact, delta-encoded snapshots within a
//! per-client bandwidth budget.
//!
//! * [`Schema`] and [`Kind`]: the declaration, fields with their quantization.
//! * [`ReplicationServer`]: the authoritative entities; per client, the views it
//!   acknowledged and snapshots in flight, a priority accumulator and an adaptive
//!   [`BudgetController`] (Glenn Fiedler's "State Synchronization" and "Snapshot
//!   Compression"; Unity Netcode for Entities' importance scaling).
//! * [`ReplicationClient`]: decodes snapshots against the views it holds and keeps the
//!   newest state of every entity, with spawn and despawn events.
//! * [`deadreckoning`]: walking characters sent only when their motion changes
//!   ([`DrServer`]) and shown where they are now ([`DrReceiver`]), the character-sync
//!   article's dead reckoning with Murphy's projective velocity blending.
//! * The shooter's mechanisms (the Pixonic mobile shooter article, Valve's lag
//!   compensation, Overwatch's GDC 2017 netcode): [`lagcomp`] (the server tests a shot
//!   against the world the shooter was showing, within a trusted window), [`spawns`]
//!   (projectiles predicted under client-only ids, handed over to the server's) and
//!   [`hits`] (hits shown at once, resolved by the server's word).
//!
//! # The high-level API
//!
//! [`prelude`] is the front door: one import for everything a game names, with the loop
//! of both ends as a compiled example. Most games want [`Server`] and [`Client`], which wire all of it together with the
//! core's sessions: the game steps its own world, writes its entities' state on the
//! server, implements [`PredictedWorld`] for what the client predicts (Glenn Fiedler's and
//! the Pixonic shooter article's client-side prediction: step, save, compare, load), and
//! draws what [`Client::render`] returns: predicted entities where its world has them,
//! everything else through snapshot interpolation, corrections and [`Policy`] switches
//! smoothed. One [`NetConfig`] sets the tick rate for both ends. A whole game in 150
//! lines: `examples/dots.rs`. Walking characters can go by dead reckoning instead
//! ([`NetConfig::dead_reckoning`], [`Server::update_character`],
//! [`Policy::DeadReckoned`]): sent when their motion changes, shown where they are now.
//! [`harness`] runs both ends of a game over emulated links on a virtual clock, for
//! tests and measurements without sockets.
//!
//! # The layer underneath
//!
//! Snapshots are game bytes to the core: the server hands
//! [`EncodedSnapshot::bytes`] to [`lagless_core::ServerSession::send_snapshot`], reads
//! acknowledgements from [`lagless_core::ServerSession::snapshot_ack`]; the client feeds
//! [`lagless_core::ReceivedSnapshot`]s to [`ReplicationClient::receive`] and acknowledges
//! what decoded with [`lagless_core::ClientSession::acknowledge_snapshot`].
//!
//! # Example
//! ```
//! use lagless_core::Tick;
//! use lagless_replication::*;
//! use std::time::Duration;
//!
//! let schema = || {
//!     Schema::new()
//!         .kind(Kind::new("dot").vec2("position", 100.0, 0.01).int("score", 0, 999))
//!         .build()
//!         .unwrap()
//! };
//! let mut server = ReplicationServer::new(schema(), ReplicationConfig::default());
//! let mut client = ReplicationClient::new(schema(), ClientConfig::default());
//! let dot = server.spawn(0, |w| { w.vec2([1.0, 2.0]); w.int(0); }).unwrap();
//! server.add_client(7);
//!
//! let now = Duration::ZERO;
//! let first = server.encode(7, Tick(1), now).unwrap();
//! client.receive(Tick(1), &first.bytes).unwrap();
//! server.acknowledge(7, Tick(1), now); // what the session reports
//!
//! server.update(dot, |w| { w.vec2([1.5, 2.0]); w.int(1); }).unwrap();
//! let delta = server.encode(7, Tick(2), now).unwrap(); // only what changed
//! assert_eq!(delta.entries, 1);
//! client.receive(Tick(2), &delta.bytes).unwrap();
//! let mut r = client.reader(dot).unwrap();
//! assert_eq!(r.vec2(), [1.5, 2.0]);
//! assert_eq!(r.int(), 1);
//! ```

#![deny(missing_docs)]

mod budget;
mod client;
pub mod deadreckoning;
mod error;
mod field;
mod frame;
pub mod harness;
pub mod hits;
pub mod lagcomp;
mod net;
pub mod prelude;
mod schema;
mod server;
mod snapshot;
pub mod spawns;
mod state;
mod view;

pub use budget::{BudgetConfig, BudgetController, BudgetStats};
pub use client::{
    Applied, ClientConfig, ClientEntity, EntityEvent, ReplicationClient, ReplicationClientStats,
};
/// The dead-reckoning types most games name; the rest are in [`deadreckoning`].
pub use deadreckoning::{DrCodec, DrConfig, DrError, DrMessage, DrReceiver, DrServer};
pub use error::ReplicationError;
pub use field::{codes_valid, values_of, zero_codes};
pub use frame::{Frame, pose_of};
/// The pose type the client renders and smooths (2D games use [`Pose::planar`]).
pub use lagless_core::interpolation::Pose;
/// The interpolation settings and counters of [`Client::interpolation`].
pub use lagless_core::interpolation::{InterpolationConfig, InterpolationStats};
/// The core types a game using [`Server`] and [`Client`] needs, so one import serves:
/// what [`Server::next_tick`] hands over ([`TickInputs`]), the sessions' errors and counters,
/// and the prediction, smoothing and interpolation settings of [`NetConfig`].
pub use lagless_core::{
    ClientId, ClientStats, Delivery, Input, PredictionConfig, PredictionStats, ProtocolError,
    Reader, Rollback, ServerClientStats, SmoothingConfig, Tick, TickInputs, WireError, Writer,
};
pub use net::{
    CharacterRelevance, Client, ClientNetStats, ConnectionConfig, ConnectionStats,
    DEFAULT_INTERRUPTED_AFTER, DEFAULT_PREDICTION_HORIZON, DepartedClient, FeltCosts, Latency,
    LinkEvent, LinkState, MAX_DEFER, MAX_SNAPSHOT_EVENT_BYTES, NetConfig, NetError,
    PRIOR_WRONG_TICK_IN_LEAD_TICKS, Policy, PredictedWorld, Render, Server, SnapshotCounters,
    Spectator, UNDERRUN_SAMPLE, UnderrunCosts,
};
pub use schema::{
    CODE_LIMIT, Field, FieldType, Kind, KindId, MAX_FIELDS, MAX_KINDS, Schema, SchemaError,
};
pub use server::{
    Cell, CellConfig, ClientReplicationStats, EncodedSnapshot, Interest, RelevanceFn,
    ReplicationConfig, ReplicationServer, available_threads,
};
pub use snapshot::{Change, Decoded, Limits};
pub use state::{StateError, StateReader, StateWriter};
pub use view::{Entry, MERGE_WINDOW, View};
