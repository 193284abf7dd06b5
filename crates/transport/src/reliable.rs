//! The reliable-ordered channel the transport carries beside unreliable payloads.
//!
//! It lives in the protocol core as [`lagless_core::channel`], which also frames it in the
//! sessions' own packets; this module re-exports it under the names the transport has
//! always used. [`ReliableChannel`] is [`lagless_core::MessageChannel`], and
//! [`MAX_PACKET_BYTES`] is [`lagless_core::channel::MAX_CHANNEL_PACKET_BYTES`]. The
//! transport sends only reliable messages on it; the wire format is in the core's module
//! docs.

pub use lagless_core::channel::{
    ChannelConfig, ChannelError, ChannelStats, Delivery,
    MAX_CHANNEL_PACKET_BYTES as MAX_PACKET_BYTES, MAX_MESSAGE_BYTES,
    MessageChannel as ReliableChannel, WINDOW,
};
