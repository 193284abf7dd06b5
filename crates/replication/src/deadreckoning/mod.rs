//! Dead reckoning for walking characters: event-driven updates instead of every
//! snapshot, and remote characters shown where they are *now* rather than in the past.
//!
//! Snapshot interpolation costs bandwidth in proportion to the number of entities and
//! shows them a buffer's delay in the past. A walking character's motion is simple
//! (a position, a heading, a speed), so the character-sync article ("hiding latency":
//! momentum-change messages, a sync clock, steering to a predicted point) sends it
//! only when it changes, and the receiver predicts the rest:
//!
//! * **Sender** ([`DrSender`], one per character; [`DrServer`] over many and per
//!   client). Fed the true state every tick, it sends at once on a *momentum change*
//!   (start, stop, a heading change beyond a threshold, a speed change beyond one), and
//!   on a *sync clock* (2 s) during steady motion, which also corrects drift and
//!   repairs lost messages. Heading and speed changes are rate-limited, so a spinning
//!   camera costs a few messages a second, not one a tick; an idle character sends a
//!   shorter message; each momentum change is resent once a little later, because the
//!   messages travel unreliably. See [`SenderConfig`].
//! * **Message** ([`DrMessage`], encoded by [`DrCodec`]): id, tick (newer wins, so
//!   stale and reordered messages are dropped), position, heading, speed, the sync
//!   interval and the sender's lag; 16 bytes moving, 12 idle with the default codec,
//!   bit-packed so it can ride inside a snapshot packet.
//! * **Receiver** ([`DrReceiver`]). The *predicted point* is
//!   `position + direction × speed × (lag + interval)`: where the character will be
//!   when the next message is due. The shown character is steered to arrive exactly
//!   there when the interval ends ([`Steering::Arrive`], the article's), or by
//!   projective velocity blending ([`Steering::Pvb`], Curtiss Murphy's "Believable
//!   Dead Reckoning for Networked Games", Game Engine Gems 2); with no new message it
//!   keeps going. [`Shown::predicted_point`] is the debug marker.
//!
//! # The lag
//!
//! The lag in the prediction is how old the message's state is when it arrives. It is
//! the sum of two one-way lags, each half a measured round trip:
//!
//! * the message's `lag`: how old the state already was when the sender sent it. In
//!   the article's topology (client A → relay → client B) it is A's half round trip
//!   to the relay. For a character the server simulates, which is the truth in a
//!   server-authoritative game, it is zero ([`CharacterState::new`]); a game that
//!   wants remote players shown where their owners see themselves sets it to the
//!   owner's half RTT from the server's estimator ([`CharacterState::source_lag`]).
//! * the receiver's own one-way lag, half the smoothed RTT of the core's
//!   [`RttEstimator`](lagless_core::RttEstimator) ([`DrReceiver::set_rtt`]).
//!
//! Their sum is the article's `(RTT_A + RTT_B) / 2`. Halving each round trip assumes
//! symmetric links; the sum is capped ([`ReceiverConfig::max_lag`]) so a forged lag
//! cannot throw characters far ahead.
//!
//! # Spawning
//!
//! The receiver shows only characters the game spawned ([`DrReceiver::spawn`]: from
//! the replication layer's spawn events, or its own logic); a message for any other id
//! is refused and counted, so forged ids cannot grow its memory.
//!
//! # Example
//! ```
//! use lagless_replication::deadreckoning::*;
//! use lagless_replication::Tick;
//! use std::time::Duration;
//!
//! let codec = DrCodec::default();
//! let mut server = DrServer::new(SenderConfig::default());
//! let mut client = DrReceiver::new(ReceiverConfig::default());
//! server.add_client(1);
//! client.spawn(7);
//! client.set_one_way_lag(Duration::from_millis(50));
//!
//! // Server tick 0: character 7 walks along +Z at 2 m/s.
//! let state = CharacterState::new([0.0, 0.0, 0.0], 0.0, 2.0);
//! server.update(7, Duration::ZERO, Tick(0), state);
//! let mut bits = lagless_wire::BitWriter::new();
//! codec.write_batch(&mut bits, &server.poll_messages(1, |_| true)).unwrap();
//! let bytes = bits.into_bytes();
//!
//! // 50 ms later the client has it, and shows the character where it is now.
//! let now = Duration::from_millis(50);
//! let mut r = lagless_wire::BitReader::new(&bytes);
//! assert_eq!(client.receive_batch(now, Tick(3), &codec, &mut r), Ok(1));
//! let shown = client.shown(7, now).unwrap();
//! assert!((shown.position[2] - 0.1).abs() < 1e-3);
//! // The marker: where it will be when the 2 s interval ends.
//! assert!((shown.predicted_point[2] - 4.1).abs() < 1e-3);
//! ```

mod message;
mod receiver;
mod sender;
mod server;
mod steering;

pub use message::{DrCodec, DrLimits, DrMessage, Field, Motion};
pub use receiver::{DrReceiver, DrReceiverStats, ReceiverConfig, Shown};
pub use sender::{CharacterState, DrSender, SenderConfig, Trigger};
pub use server::{DrServer, DrServerStats, ERROR_TOLERANCE_M, PollRoom};
pub use steering::Steering;

use lagless_wire::WireError;
use thiserror::Error;

/// Dead reckoning in the high-level API ([`crate::NetConfig::dead_reckoning`]): how the
/// server sends and how clients show. Both ends must use the same codec.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DrConfig {
    /// When the server sends.
    pub sender: SenderConfig,
    /// How clients show characters and what they accept.
    pub receiver: ReceiverConfig,
    /// The encoding.
    pub codec: DrCodec,
    /// The most of a client's snapshot budget its dead-reckoning messages may take (0 to
    /// 1): with a budget, each message due is an entry waiting with its own priority
    /// ([`DrServer::poll_within`]), a snapshot takes the highest within this share of its
    /// room, and what they take comes out of the room its entities are chosen in.
    /// Without a budget every message due goes. `None` (the default): every message due
    /// goes beside the budget, uncounted, so a link can carry more than the budget.
    ///
    /// Off by default because held-back messages cost more than they save while the
    /// senders make more due than the room holds: on the walker scene's `mobile` seed 2
    /// a share of 0.75 took `deadreckoning.error_cm_mean` from 23.6 to 141 cm
    /// (`docs/dead-reckoning.md`). Turn it on where the budget is a hard limit.
    pub budget_share: Option<f32>,
}

/// Why a dead-reckoning message was refused. A receiver counts each by reason
/// ([`DrReceiverStats`]); none is a panic.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DrError {
    /// Malformed bytes (truncated, a code out of range, non-zero padding, trailing
    /// bytes).
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A batch holds more messages than [`DrCodec::max_batch`].
    #[error("too many messages in one batch")]
    TooMany,
    /// A NaN or infinite value.
    #[error("{0:?} is not finite")]
    NonFinite(Field),
    /// A value outside the [`DrLimits`].
    #[error("{0:?} is outside the limits")]
    OutOfLimits(Field),
    /// A message for a character the receiver never spawned (or despawned).
    #[error("character {0} is not spawned")]
    UnknownId(u32),
    /// Not newer than the newest message accepted for the character.
    #[error("stale or reordered message")]
    Stale,
    /// The tick is too far from the receiver's reference tick.
    #[error("tick too far from the receiver's")]
    TickFarOff,
}
