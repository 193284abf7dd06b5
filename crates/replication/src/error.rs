//! Why a snapshot or an update was refused.

use crate::state::StateError;
use lagless_core::Tick;
use lagless_wire::WireError;
use thiserror::Error;

/// A snapshot the client cannot use, or an update the server refuses. Every variant a
/// network peer can cause is counted by whoever receives it, never a panic.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ReplicationError {
    /// Malformed bytes.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The snapshot is a delta against a baseline the client does not hold (any more).
    /// The server stops using it once acknowledgements show the client moved on.
    #[error("snapshot refers to baseline tick {0}, which is not held")]
    MissingBaseline(Tick),
    /// An update for an entity the baseline does not hold (never spawned, or despawned).
    #[error("update for entity {0}, which the baseline does not hold")]
    UnknownEntity(u32),
    /// A kind the schema does not declare.
    #[error("unknown entity kind {0}")]
    UnknownKind(u32),
    /// More entities than the limits allow.
    #[error("{count} entities, more than the limit of {max}")]
    TooManyEntities {
        /// Entities.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// An entity id above the limit.
    #[error("entity id {0} is above the limit")]
    IdOutOfRange(u64),
    /// The game wrote a state that does not follow its kind's declaration.
    #[error(transparent)]
    State(#[from] StateError),
    /// The entity id is not live (server side: update or despawn of an unknown id).
    #[error("entity {0} does not exist")]
    NoSuchEntity(u32),
    /// The entity id is already live (server side: spawn with a taken id).
    #[error("entity {0} already exists")]
    IdTaken(u32),
    /// The client is not known to the server.
    #[error("client {0} is not known")]
    UnknownClient(u64),
    /// The view a snapshot leaves the client with is not the one the server believes it
    /// holds (the snapshot's checksum differs): refused, and a snapshot against nothing
    /// is asked for.
    #[error(
        "snapshot {tick} (baseline {}) leaves a view that differs from the server's",
        baseline.map_or_else(|| "none".to_string(), |b| b.to_string())
    )]
    ViewMismatch {
        /// The snapshot's tick.
        tick: Tick,
        /// Its baseline.
        baseline: Option<Tick>,
    },
}
