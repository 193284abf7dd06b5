//! Predicted spawns: entities a client creates by prediction (shots, projectiles),
//! shown at once and handed over to the server's entity when it arrives.
//!
//! The Pixonic shooter article met the problem this solves: ids allocated one after
//! another differ between the client and the server as soon as two players fire in
//! the same tick, so its shots got a client-only id range and were not reconciled;
//! components were then added and removed on them freely. Overwatch ("Overwatch
//! Gameplay Architecture and Netcode", GDC 2017) predicts projectiles the same way.
//! Here:
//!
//! * [`IdSpace`]: server ids in `0..=Limits::max_id` (the replication decoder refuses
//!   larger ones), and above that one client-only range per client slot. A predicted
//!   id can never equal a server id or another client's.
//! * [`SpawnRegistry`] (client): [`spawn`](SpawnRegistry::spawn) hands out an id from
//!   its slot's range and returns the [`SpawnClaim`] to send (id, kind, tick, sequence
//!   within the tick); [`match_server`](SpawnRegistry::match_server) matches the
//!   server's entity by owner, kind and spawn tick within a tolerance and returns a
//!   [`Handover`] (predicted id → server id, the pose offset to smooth away);
//!   [`expire`](SpawnRegistry::expire) drops what the server never confirmed
//!   (orphans, counted). Its payload `T` is the game's (a `hecs::Entity`, or a
//!   [`Components`] store).
//! * [`SpawnGuard`] (server): refuses and counts claims with an id outside the
//!   claimant's range, a tick far from the server's, or a rate above the kind's.
//! * [`SpawnClaimCodec`]: the claims' bit-packed encoding; an id travels as an offset
//!   into the sender's own range, so it cannot even name another client's id.
//!
//! # Example
//! ```
//! use lagless_replication::spawns::*;
//! use lagless_replication::{Pose, Tick};
//! use lagless_wire::{BitReader, BitWriter};
//!
//! let space = IdSpace::default(); // server ids below 2^20, 256 client slots above
//! let mut client = SpawnRegistry::new(SpawnConfig::default(), space, 2).unwrap();
//! let mut guard = SpawnGuard::new(SpawnGuardConfig::default());
//! guard.set_min_interval(0, 3); // kind 0 fires at most every 3 ticks
//!
//! // Client slot 2 fires at its tick 50: the rocket exists at once.
//! let mut rocket = Components::new();
//! rocket.insert("trail");
//! let claim = client.spawn(Tick(50), 0, Pose::planar([0.0, 0.0], 0.0), rocket).unwrap();
//! assert!(!space.is_server(claim.id));
//! let codec = SpawnClaimCodec::default();
//! let mut w = BitWriter::new();
//! codec.write(&mut w, 2, &[claim]).unwrap();
//! let bytes = w.into_bytes();
//!
//! // The server (at tick 47: the client runs ahead) checks it and spawns its own.
//! let claims = codec.read(&mut BitReader::new(&bytes), 2, Tick(47)).unwrap();
//! assert_eq!(guard.check(2, Tick(47), &claims[0]), Ok(true));
//!
//! // The server's rocket 12 arrives; the client flew its own to x = 3.0.
//! client.set_pose(claim.id, Pose::planar([3.0, 0.0], 0.0));
//! let server = ServerSpawn {
//!     id: 12, owner: 2, tick: Tick(50), kind: 0, seq: None,
//!     pose: Pose::planar([2.9, 0.0], 0.0),
//! };
//! let handover = client.match_server(&server).unwrap();
//! assert_eq!(handover.server_id, 12);
//! assert!((handover.offset[0] - 0.1).abs() < 1e-6); // draw 12 shifted by this, decaying
//! assert_eq!(handover.payload.get::<&str>(), Some(&"trail"));
//! ```

mod claim;
mod components;
mod guard;
mod ids;
mod registry;

pub use claim::{SpawnClaim, SpawnClaimCodec};
pub use components::Components;
pub use guard::{SpawnGuard, SpawnGuardConfig, SpawnGuardStats};
pub use ids::IdSpace;
pub use registry::{Handover, Predicted, ServerSpawn, SpawnConfig, SpawnRegistry, SpawnStats};

use lagless_wire::WireError;
use thiserror::Error;

/// Why a spawn, a claim or its bytes were refused. The guard and the registry count
/// each; none is a panic.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpawnError {
    /// Malformed bytes.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A decoded field out of its range (a kind beyond 16 bits, a sequence beyond 8,
    /// a tick that does not expand).
    #[error("a field is out of range")]
    BadField,
    /// An id outside the claiming client's range.
    #[error("id {0} is outside the client's range")]
    IdOutOfRange(u32),
    /// A slot the [`IdSpace`] has no range for.
    #[error("slot {0} has no id range")]
    UnknownSlot(u32),
    /// An [`IdSpace`] that leaves no ids for each slot.
    #[error("the id space leaves no client ids")]
    BadIdSpace,
    /// Too many: claims in a batch, predicted spawns alive, spawns in one tick.
    #[error("too many spawns")]
    TooMany,
    /// Faster than the kind's fire rate.
    #[error("faster than the fire rate")]
    TooFast,
    /// A claim's tick too far from the server's.
    #[error("the claim's tick is outside the window")]
    TickOutOfWindow,
}
