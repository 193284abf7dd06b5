use crate::ClientId;
use crate::channel::ChannelError;
use lagless_wire::WireError;
use thiserror::Error;

/// Why the protocol core refused a packet or a call.
///
/// Packet errors are also counted in the session's stats; a caller may log them but need
/// not do anything else: the offending packet has simply been dropped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtocolError {
    /// The bytes are not a well-formed message.
    #[error("malformed packet: {0}")]
    Wire(#[from] WireError),
    /// The first byte names no message kind this side accepts.
    #[error("unknown message kind {0:#04x}")]
    UnknownKind(u8),
    /// The packet exceeds [`crate::MAX_PACKET_BYTES`].
    #[error("packet of {len} bytes exceeds the maximum")]
    PacketTooLarge {
        /// Size of the packet.
        len: usize,
    },
    /// A packet or call named a client the server does not know.
    #[error("unknown client {0}")]
    UnknownClient(ClientId),
    /// A client id was added twice.
    #[error("client {0} already exists")]
    DuplicateClient(ClientId),
    /// A tick on the wire cannot be placed near the receiver's own tick: `tick` (as far
    /// as it could be read) lies outside `low..=high`, what the receiver accepts now.
    #[error("tick {tick} out of range: {low}..={high} accepted now")]
    TickOutOfRange {
        /// The tick on the wire (a 16-bit wire tick that could not be expanded: its
        /// wire value).
        tick: crate::Tick,
        /// The lowest tick accepted now.
        low: crate::Tick,
        /// The highest tick accepted now.
        high: crate::Tick,
    },
    /// A snapshot for this client and tick was already queued: the client tells snapshots
    /// apart by tick, so a second one would be confused with the first.
    #[error("a snapshot for tick {} was already sent", .0.0)]
    SnapshotAlreadySent(crate::Tick),
    /// A snapshot fragment disagrees with earlier fragments of the same snapshot.
    #[error("inconsistent snapshot fragment")]
    InconsistentFragment,
    /// A snapshot (or its fragment count) exceeds the configured maximum size.
    #[error("snapshot of {len} bytes exceeds the maximum of {max}")]
    SnapshotTooLarge {
        /// Size of the snapshot.
        len: usize,
        /// Configured maximum.
        max: usize,
    },
    /// A message section was refused by the message channel (the packet it came in was
    /// dropped), or a message could not be queued.
    #[error("message channel: {0}")]
    Channel(#[from] ChannelError),
    /// The other side runs the simulation at another tick rate: nothing it sends can be
    /// used. Configure one rate on both ends.
    #[error("tick rate mismatch: this side runs at {ours} Hz, the other at {theirs} Hz")]
    TickRateMismatch {
        /// This side's rate.
        ours: u32,
        /// The rate the other side announced.
        theirs: u32,
    },
    /// The packet's checksum does not match its bytes (it was damaged on the way, or the
    /// other side sends none): refused before decoding. Only with the checksum on
    /// ([`crate::ServerConfig::checksum`], [`crate::ClientConfig::checksum`]), which
    /// both sides must agree on.
    #[error("packet checksum mismatch")]
    BadChecksum,
}
