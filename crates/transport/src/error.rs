//! Typed errors of the transport.

use std::path::PathBuf;

use thiserror::Error;

use crate::reliable::ChannelError;

/// Anything the transport can fail at.
#[derive(Debug, Error)]
pub enum TransportError {
    /// A socket operation failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// The connect token could not be written or read.
    #[error("connect token: {0}")]
    Token(#[from] lagless_netcode::TokenError),
    /// The server configuration is invalid.
    #[error("server config: {0}")]
    Config(#[from] lagless_netcode::ConfigError),
    /// The payload could not be sent.
    #[error("send: {0}")]
    Send(#[from] lagless_netcode::SendError),
    /// The reliable channel refused the message.
    #[error("reliable channel: {0}")]
    Channel(#[from] ChannelError),
    /// No connected client has this id.
    #[error("no connected client with id {0}")]
    UnknownClient(u64),
    /// The client is not connected.
    #[error("not connected")]
    NotConnected,
    /// An unreliable payload is empty or too large.
    #[error("payload of {0} bytes is outside 1..={max}", max = crate::MAX_UNRELIABLE_BYTES)]
    PayloadSize(usize),
    /// A key or token file could not be read or written.
    #[error("file {path}: {reason}")]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The operating system's random source failed.
    #[error("random source: {0}")]
    Random(String),
    /// An unknown link profile name.
    #[error("unknown link profile {0:?} (known: {known})", known = lagless_netem::PROFILE_NAMES.join(", "))]
    UnknownProfile(String),
    /// What a game asked a host to host cannot be hosted (no match, matches at different
    /// tick rates).
    #[error("hosting: {0}")]
    Hosting(String),
    /// The link emulator refused a configuration.
    #[error("link config: {0}")]
    Netem(#[from] lagless_netem::ConfigError),
}
