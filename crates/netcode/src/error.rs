//! Typed errors.

use std::fmt;

use thiserror::Error;

/// Why a connect token (or challenge token) could not be written or read.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum TokenError {
    /// A token buffer had the wrong size.
    #[error("token buffer has the wrong size ({0} bytes)")]
    WrongSize(usize),
    /// The buffer ended in the middle of a field.
    #[error("token is truncated")]
    Truncated,
    /// The version info is not "NETCODE 1.02\0".
    #[error("token version info is not NETCODE 1.02")]
    BadVersion,
    /// The create timestamp is after the expire timestamp.
    #[error("token was created after it expires")]
    CreatedAfterExpiry,
    /// The number of server addresses is outside [1, 32].
    #[error("token holds {0} server addresses, not 1 to 32")]
    BadAddressCount(u32),
    /// An address type byte is neither 1 (IPv4) nor 2 (IPv6).
    #[error("token holds an address of unknown type")]
    BadAddress,
    /// No server address was given.
    #[error("a token needs at least one server address")]
    NoAddresses,
    /// More than 32 server addresses were given.
    #[error("a token holds at most 32 server addresses, got {0}")]
    TooManyAddresses(usize),
    /// The private part (or a challenge token) failed authentication.
    #[error("token failed to decrypt")]
    DecryptFailed,
    /// The AEAD refused to encrypt (never happens with netcode's sizes).
    #[error("token encryption failed")]
    Crypto,
}

/// Why a received packet was dropped (or a packet could not be written). Every drop is counted
/// by reason in the receiver's stats.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum PacketError {
    /// Shorter than any valid packet.
    #[error("packet too small")]
    TooSmall,
    /// Low 4 bits of the prefix byte are 7 to 15.
    #[error("invalid packet type")]
    InvalidType,
    /// A packet type this side never accepts (a server receiving a challenge, a client a
    /// request or response).
    #[error("packet type not accepted here")]
    TypeNotAllowed,
    /// High 4 bits of the prefix byte are 0 or 9 to 15.
    #[error("sequence byte count outside [1, 8]")]
    BadSequenceBytes,
    /// A connection request that is not exactly 1078 bytes.
    #[error("connection request is not 1078 bytes")]
    RequestWrongSize,
    /// Version info other than "NETCODE 1.02\0".
    #[error("wrong version info")]
    BadVersion,
    /// Another game's protocol id.
    #[error("wrong protocol id")]
    WrongProtocolId,
    /// The connect token has expired.
    #[error("connect token expired")]
    TokenExpired,
    /// The private connect token failed to decrypt (wrong key, forged or altered).
    #[error("private connect token failed to decrypt")]
    TokenDecryptFailed,
    /// The private connect token decrypted but its contents are invalid.
    #[error("private connect token is malformed")]
    TokenMalformed,
    /// This server's address is not in the token (a token for another server).
    #[error("server address not in connect token")]
    ServerAddressNotInToken,
    /// A client is already connected from this address.
    #[error("address already connected")]
    AddressAlreadyConnected,
    /// A client with this client id is already connected.
    #[error("client id already connected")]
    ClientIdAlreadyConnected,
    /// The connect token was already used from another address.
    #[error("connect token already used from another address")]
    TokenReused,
    /// No room for another encryption mapping. [`crate::Server`] no longer refuses for
    /// this (a full handshake table evicts, so silent holders of valid tokens cannot lock
    /// real clients out); the reason stays so counter indices and matches keep working.
    #[error("encryption mapping table full")]
    MappingTableFull,
    /// An encrypted packet from an address with no key.
    #[error("no encryption mapping for this address")]
    NoKeyForAddress,
    /// Sequence already received or older than the replay window.
    #[error("replayed packet")]
    Replayed,
    /// Authentication failed: forged, altered, or under another key.
    #[error("packet failed to decrypt")]
    DecryptFailed,
    /// Decrypted size wrong for the packet type (or an empty or oversized payload).
    #[error("decrypted packet has the wrong size for its type")]
    WrongSize,
    /// The challenge token in a response failed to decrypt.
    #[error("challenge token failed to decrypt")]
    ChallengeDecryptFailed,
    /// A valid packet that has no meaning in the receiver's current state.
    #[error("packet ignored in the current state")]
    UnexpectedInState,
    /// A packet from an address other than the server's (client side).
    #[error("packet from an unknown address")]
    UnknownAddress,
    /// The receive queue for payloads is full; the payload was dropped.
    #[error("receive queue full")]
    QueueFull,
    /// A payload to send is empty or larger than 1200 bytes.
    #[error("payload size outside [1, 1200]")]
    PayloadSize,
    /// A connection request refused before its token was decrypted: the server is busy
    /// with requests and this source (IPv4 address or IPv6 /64) already had its share of
    /// them decrypted in the current window (see "Requests under load" on
    /// [`crate::Server`]).
    #[error("connection request over its source's share while the server is busy")]
    SourceOverShare,
}

impl PacketError {
    /// Every reason, in counter order.
    pub const ALL: [PacketError; 25] = [
        Self::TooSmall,
        Self::InvalidType,
        Self::TypeNotAllowed,
        Self::BadSequenceBytes,
        Self::RequestWrongSize,
        Self::BadVersion,
        Self::WrongProtocolId,
        Self::TokenExpired,
        Self::TokenDecryptFailed,
        Self::TokenMalformed,
        Self::ServerAddressNotInToken,
        Self::AddressAlreadyConnected,
        Self::ClientIdAlreadyConnected,
        Self::TokenReused,
        Self::MappingTableFull,
        Self::NoKeyForAddress,
        Self::Replayed,
        Self::DecryptFailed,
        Self::WrongSize,
        Self::ChallengeDecryptFailed,
        Self::UnexpectedInState,
        Self::UnknownAddress,
        Self::QueueFull,
        Self::PayloadSize,
        Self::SourceOverShare,
    ];

    /// A short snake_case name for logs and metrics; fixed, so greps and dashboards can
    /// rely on it even if a variant or its message is reworded.
    pub fn name(self) -> &'static str {
        match self {
            Self::TooSmall => "too_small",
            Self::InvalidType => "invalid_type",
            Self::TypeNotAllowed => "type_not_allowed",
            Self::BadSequenceBytes => "bad_sequence_bytes",
            Self::RequestWrongSize => "request_wrong_size",
            Self::BadVersion => "bad_version",
            Self::WrongProtocolId => "wrong_protocol_id",
            Self::TokenExpired => "token_expired",
            Self::TokenDecryptFailed => "token_decrypt_failed",
            Self::TokenMalformed => "token_malformed",
            Self::ServerAddressNotInToken => "server_address_not_in_token",
            Self::AddressAlreadyConnected => "address_already_connected",
            Self::ClientIdAlreadyConnected => "client_id_already_connected",
            Self::TokenReused => "token_reused",
            Self::MappingTableFull => "mapping_table_full",
            Self::NoKeyForAddress => "no_key_for_address",
            Self::Replayed => "replayed",
            Self::DecryptFailed => "decrypt_failed",
            Self::WrongSize => "wrong_size",
            Self::ChallengeDecryptFailed => "challenge_decrypt_failed",
            Self::UnexpectedInState => "unexpected_in_state",
            Self::UnknownAddress => "unknown_address",
            Self::QueueFull => "queue_full",
            Self::PayloadSize => "payload_size",
            Self::SourceOverShare => "source_over_share",
        }
    }
}

/// Packets dropped, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropCounters {
    counts: [u64; PacketError::ALL.len()],
}

impl DropCounters {
    /// Counts one drop.
    pub fn add(&mut self, reason: PacketError) {
        if let Some(c) = self.counts.get_mut(reason as usize) {
            *c = c.saturating_add(1);
        }
    }

    /// Drops counted for `reason`.
    pub fn get(&self, reason: PacketError) -> u64 {
        self.counts.get(reason as usize).copied().unwrap_or(0)
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Non-zero counters, by reason.
    pub fn iter(&self) -> impl Iterator<Item = (PacketError, u64)> + '_ {
        PacketError::ALL
            .iter()
            .map(|r| (*r, self.get(*r)))
            .filter(|(_, n)| *n > 0)
    }
}

/// `reason:count` for each non-zero reason, comma-separated, in counter order (empty when
/// nothing was dropped): one compact log field, e.g. `no_key_for_address:3,replayed:1`.
impl fmt::Display for DropCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (reason, n)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{n}", reason.name())?;
        }
        Ok(())
    }
}

/// A configuration the server cannot run with.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    /// `max_clients` is 0 or above [`crate::MAX_CLIENTS`].
    #[error("max_clients must be in 1..={max}, got {got}")]
    MaxClients {
        /// The value given.
        got: usize,
        /// The largest supported.
        max: usize,
    },
    /// The server has no public address to match tokens against.
    #[error("the server needs at least one public address")]
    NoPublicAddress,
}

/// A request the local application made that cannot be carried out.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum SendError {
    /// No connected client in that slot (server), or not connected (client).
    #[error("not connected")]
    NotConnected,
    /// Payloads are 1 to 1200 bytes.
    #[error("payload of {0} bytes is outside 1..=1200")]
    PayloadSize(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_names_are_distinct_and_drops_print_compactly() {
        let mut names: Vec<&str> = PacketError::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PacketError::ALL.len());
        let mut d = DropCounters::default();
        assert_eq!(d.to_string(), "");
        d.add(PacketError::Replayed);
        d.add(PacketError::NoKeyForAddress);
        d.add(PacketError::NoKeyForAddress);
        assert_eq!(d.to_string(), "no_key_for_address:2,replayed:1");
    }
}
