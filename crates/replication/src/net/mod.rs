//! The high-level API: a [`Server`] and a [`Client`] a game drives from its own loop.
//!
//! They wire the core's sessions (clock sync, redundant inputs, fragmented snapshots)
//! to the replication layer (declared state, delta snapshots under a budget) and to
//! the client's prediction (rollback and replay), correction smoothing and snapshot
//! interpolation. The game steps its own world; the library does the rest. Both stay
//! sans-IO: bytes and `now` in, bytes out, so any transport (the emulator,
//! `lagless-transport`'s UDP, a WebSocket) carries them.
//!
//! One [`NetConfig`] configures both ends: the tick rate is set once there, and each
//! end announces it in its first packets, so a client at another rate is refused with
//! [`lagless_core::ProtocolError::TickRateMismatch`] on both ends.

mod client;
mod felt;
mod link;
mod server;

pub use client::{Client, ClientNetStats, MAX_DEFER, Policy, PredictedWorld, Render, Spectator};
pub use felt::{FeltCosts, PRIOR_WRONG_TICK_IN_LEAD_TICKS, UNDERRUN_SAMPLE, UnderrunCosts};
pub use link::{
    ConnectionConfig, ConnectionStats, DEFAULT_INTERRUPTED_AFTER, DEFAULT_PREDICTION_HORIZON,
    LinkEvent, LinkState,
};
pub use server::{CharacterRelevance, DepartedClient, Latency, Server, SnapshotCounters};

use crate::budget::BudgetConfig;
use crate::deadreckoning::{DrConfig, DrError};
use crate::error::ReplicationError;
use lagless_core::interpolation::InterpolationConfig;
use lagless_core::{PredictionConfig, ProtocolError, SmoothingConfig};
use thiserror::Error;

/// Settings shared by a game's server and clients.
#[derive(Debug, Clone, PartialEq)]
pub struct NetConfig {
    /// Simulation ticks per second, the same on both ends (1 to 1000).
    pub tick_hz: u32,
    /// Snapshots per second to each client (1 to `tick_hz`; rounded to a whole number of
    /// ticks between snapshots).
    pub snapshot_hz: u32,
    /// The per-client bandwidth budget.
    pub budget: BudgetConfig,
    /// The replication server's other settings (relevance, tolerances, limits); its
    /// `tick_hz`, `snapshot_hz`, `budget` and `max_snapshot_bytes` are set from the
    /// fields above.
    pub replication: crate::ReplicationConfig,
    /// How corrections of predicted entities are hidden.
    pub smoothing: SmoothingConfig,
    /// How far back the client's prediction can roll back.
    pub prediction: PredictionConfig,
    /// The interpolation buffer (its `tick_hz` is set from [`NetConfig::tick_hz`]).
    pub interpolation: InterpolationConfig,
    /// The server's session (its `tick_hz` and `snapshot_interval` are set from the
    /// rates above).
    pub server_session: lagless_core::ServerConfig,
    /// The client's session (its `tick_hz` is set from [`NetConfig::tick_hz`]).
    pub client_session: lagless_core::ClientConfig,
    /// Dead reckoning for characters ([`Server::update_character`],
    /// [`Policy::DeadReckoned`]); `None` (the default) leaves snapshots as they are. Both
    /// ends must agree: with it, every snapshot starts with a batch of messages.
    pub dead_reckoning: Option<DrConfig>,
    /// Whether every snapshot carries the game's per-client snapshot events in front
    /// ([`Server::set_snapshot_events`], [`PredictedWorld::snapshot_events`]): reports
    /// that belong to one snapshot's tick and go with it or not at all (a shooter's hit
    /// reports). Off by default; both ends must agree.
    pub snapshot_events: bool,
    /// Whether a snapshot that needs more than one packet is preceded by an essential
    /// part, a standalone snapshot of the entities the client predicts, which the client
    /// reconciles with if the fragments do not all arrive by its next tick. On by default;
    /// a game whose predicted world cannot load a state holding only those entities turns
    /// it off. Only the server reads it.
    pub essential_parts: bool,
    /// When the client calls the link interrupted, and how far it predicts the player
    /// into an interruption ([`Client::link_state`]). Only the client reads it.
    pub link: ConnectionConfig,
}

impl NetConfig {
    /// Defaults at `tick_hz` ticks per second, one snapshot per tick.
    pub fn new(tick_hz: u32) -> Self {
        Self {
            tick_hz,
            snapshot_hz: tick_hz,
            budget: BudgetConfig::default(),
            replication: crate::ReplicationConfig::default(),
            smoothing: SmoothingConfig::default(),
            prediction: PredictionConfig::default(),
            interpolation: InterpolationConfig::default(),
            server_session: lagless_core::ServerConfig::default(),
            client_session: lagless_core::ClientConfig::default(),
            dead_reckoning: None,
            snapshot_events: false,
            essential_parts: true,
            link: ConnectionConfig::default(),
        }
    }

    /// Checks the rates.
    pub fn check(&self) -> Result<(), NetError> {
        if !(1..=1000).contains(&self.tick_hz) {
            return Err(NetError::Config(format!(
                "tick rate must be 1..=1000 Hz, got {}",
                self.tick_hz
            )));
        }
        if !(1..=self.tick_hz).contains(&self.snapshot_hz) {
            return Err(NetError::Config(format!(
                "snapshot rate must be 1..={} Hz, got {}",
                self.tick_hz, self.snapshot_hz
            )));
        }
        Ok(())
    }

    /// Ticks between snapshots.
    fn snapshot_interval(&self) -> u32 {
        (f64::from(self.tick_hz) / f64::from(self.snapshot_hz.max(1)))
            .round()
            .max(1.0) as u32
    }
}

impl Default for NetConfig {
    fn default() -> Self {
        Self::new(64)
    }
}

/// Why a call of the high-level API failed. A packet error means the packet was dropped
/// (and counted); the connection goes on.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum NetError {
    /// Invalid settings.
    #[error("invalid settings: {0}")]
    Config(String),
    /// The session refused a packet or a call (a tick rate mismatch among them).
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The replication layer refused a snapshot, an entity or a call.
    #[error(transparent)]
    Replication(#[from] ReplicationError),
    /// Dead-reckoning messages did not decode or were refused.
    #[error(transparent)]
    DeadReckoning(#[from] DrError),
    /// A snapshot's events did not decode.
    #[error("malformed snapshot events: {0}")]
    SnapshotEvents(#[from] lagless_wire::WireError),
}

/// Largest block of per-client snapshot events, bytes ([`Server::set_snapshot_events`]).
pub const MAX_SNAPSHOT_EVENT_BYTES: usize = 16 * 1024;
