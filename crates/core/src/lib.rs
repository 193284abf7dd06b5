//! The sans-IO protocol core of lagless: ticks, sessions, inputs, snapshots, time sync.
//!
//! Nothing here reads a clock, touches a socket or draws unseeded randomness. Time comes
//! in as a [`Duration`](std::time::Duration) since any epoch you like; packets come in as
//! byte slices and go out as byte vectors. That makes every behaviour testable on a virtual
//! clock and the core usable from any engine or transport.
//!
//! * [`ServerSession`]: fixed-rate authoritative clock, per-client input queues
//!   ([`TickBuffer`]), snapshots fragmented into packets with clock echo and input acks.
//! * [`ClientSession`]: runs ahead of the server by RTT/2 plus an input buffer
//!   ([`LeadPolicy`]), sends every unacknowledged input in each message (redundancy with
//!   run-length compression), reassembles snapshots.
//! * Game messages both ways ([`channel`]): reliable-ordered or unreliable
//!   ([`Delivery`]), framed in the packets that flow anyway: the client's input messages
//!   ([`ClientSession::send_message`]) and the server's snapshots
//!   ([`ServerSession::send_message`]); plus a resync request from the client
//!   ([`ClientSession::set_resync`], [`ServerSession::resync_requested`]).
//! * Building blocks: [`Tick`], [`FixedTimestep`], [`TickBuffer`], [`RttEstimator`],
//!   [`ClockSync`].
//!
//! # A game loop
//! A toy one-dimensional game: input `1` moves the player one unit. The server and client
//! run in one process, with packets handed straight across.
//! ```
//! use lagless_core::{ClientConfig, ClientSession, ServerConfig, ServerSession};
//! use std::time::Duration;
//!
//! let mut server = ServerSession::<u8>::new(ServerConfig::default());
//! let mut client = ClientSession::<u8>::new(ClientConfig::default());
//! server.add_client(1).unwrap();
//! let mut position: i64 = 0; // the server's game state
//! let mut seen = 0;          // what the client displays
//!
//! for ms in 0..2000u64 {
//!     let now = Duration::from_millis(ms);
//!     // Server: run due ticks, then send a snapshot of the state.
//!     server.update(now);
//!     while let Some(step) = server.next_tick() {
//!         for (_, input) in &step.inputs {
//!             position += i64::from(input.unwrap_or(0));
//!         }
//!         if server.snapshot_due() {
//!             server.send_snapshot(1, now, &position.to_le_bytes()).unwrap();
//!         }
//!     }
//!     while let Some((_, packet)) = server.poll_transmit() {
//!         client.handle_packet(now, &packet).unwrap();
//!     }
//!     // Client: produce ticks, sample input, send; apply the newest snapshot.
//!     client.update(now);
//!     while let Some(tick) = client.next_tick() {
//!         client.set_input(tick, 1);
//!     }
//!     while let Some(packet) = client.poll_transmit(now) {
//!         server.handle_packet(1, now, &packet).unwrap();
//!     }
//!     while let Some(snap) = client.poll_snapshot() {
//!         seen = i64::from_le_bytes(snap.payload.try_into().unwrap());
//!     }
//! }
//! assert!(client.is_synced());
//! assert!(seen > 100, "the player moved: {seen}");
//! assert_eq!(server.client_stats(1).unwrap().ticks_starved, 0);
//! ```

#![deny(missing_docs)]

pub mod channel;
mod client;
mod error;
mod input;
mod integrity;
pub mod interpolation;
pub mod lead;
pub mod message;
pub mod policy_text;
pub mod prediction;
mod quat;
mod reassembly;
mod ring;
mod rtt;
mod server;
pub mod smoothing;
mod sync;
mod tick;
mod timestep;
mod window;

pub use channel::{ChannelConfig, ChannelError, ChannelStats, Delivery, MessageChannel};
pub use client::{ClientConfig, ClientSession, ClientStats, ReceivedSnapshot};

/// The client session's fixed limits (not settings: the protocol's behaviour rests on
/// them), for tools and tests that reason about them.
pub mod limits {
    pub use crate::client::{FAST_FORWARD_TICKS, RESYNC_AFTER_PACKETS, TICK_TRUST_SECS};
}
pub use error::ProtocolError;
pub use input::{GUESS_REPEAT_TICKS, Input};
pub use integrity::CHECKSUM_BYTES;
/// The wire types an [`Input`] implementation reads and writes, so a game needs no direct
/// dependency on `lagless-wire`.
pub use lagless_wire::{Reader, WireError, Writer};
pub use message::MAX_PACKET_BYTES;
pub use policy_text::PolicyParseError;
pub use prediction::{PredictionConfig, PredictionStats, Predictor, Reconciled, Rollback};
pub use ring::{RingError, TickBuffer};
pub use rtt::RttEstimator;
pub use server::{
    ClientId, MissingInput, ServerClientStats, ServerConfig, ServerSession, TickInputs,
};
pub use smoothing::{ErrorSmoother, SmoothingConfig};
pub use sync::{ClockAdjust, ClockSync, LeadPolicy, SyncConfig};
pub use tick::{Tick, TickRate};
pub use timestep::FixedTimestep;
