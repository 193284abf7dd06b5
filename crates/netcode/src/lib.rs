//! A sans-IO implementation of [netcode.io 1.02](https://github.com/mas-bandwidth/netcode/blob/main/STANDARD.md):
//! secure client/server connections over UDP, in the quinn-proto style. No socket, no clock,
//! no unseeded randomness: time comes in as a `Duration` since any
//! epoch, datagrams come in as byte slices with their source address, and packets to send
//! come out of `poll_transmit`.
//!
//! - [`ConnectToken`]: the 2048-byte token a backend issues (its private part encrypted with
//!   XChaCha20-Poly1305 under the key the backend shares with the servers).
//! - [`Server`]: requests, challenges, client slots, keep-alives, payloads, timeouts,
//!   redundant disconnects; replay protection, anti-amplification, connect-token reuse
//!   protection and per-address encryption mappings, all in bounded tables.
//! - [`Client`]: the state machine with all its error states.
//! - [`packet`]: the wire format, usable on its own.
//!
//! Every packet the server or client drops is refused with a [`PacketError`] and counted;
//! no input bytes can make either panic.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use lagless_netcode::{Client, ConnectToken, Server, ServerConfig, ServerEvent, TokenParams};
//! use rand::SeedableRng;
//!
//! let server_addr = "127.0.0.1:40000".parse().unwrap();
//! let client_addr = "127.0.0.1:50000".parse().unwrap();
//! let private_key = [7u8; 32];
//! let protocol_id = 0x1122334455667788;
//! let unix_now = 1_700_000_000;
//! let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
//!
//! // The backend issues a token ...
//! let params = TokenParams::new(protocol_id, 42, vec![server_addr]);
//! let token = ConnectToken::generate(&params, &private_key, unix_now, &mut rng).unwrap();
//! let token_bytes = token.write().unwrap();
//!
//! // ... the server runs with the same private key ...
//! let config = ServerConfig { protocol_id, private_key, max_clients: 8, public_addresses: vec![server_addr] };
//! let mut server = Server::new(config, [9u8; 32], Duration::ZERO, unix_now).unwrap();
//! let mut client = Client::new(&token_bytes, Duration::ZERO);
//!
//! // ... and the IO layer carries bytes between them.
//! let mut now = Duration::ZERO;
//! while !client.is_connected() {
//!     now += Duration::from_millis(50);
//!     client.update(now);
//!     server.update(now);
//!     while let Some(t) = client.poll_transmit() {
//!         let _ = server.handle_packet(now, client_addr, &t.data);
//!     }
//!     while let Some(t) = server.poll_transmit() {
//!         let _ = client.handle_packet(now, server_addr, &t.data);
//!     }
//! }
//! client.send_payload(b"hello").unwrap();
//! let t = client.poll_transmit().unwrap();
//! server.handle_packet(now, client_addr, &t.data).unwrap();
//! // A replayed packet is refused.
//! assert!(server.handle_packet(now, client_addr, &t.data).is_err());
//! assert!(matches!(server.poll_event(), Some(ServerEvent::Connected { client_id: 42, .. })));
//! assert!(matches!(server.poll_event(), Some(ServerEvent::Payload { payload, .. }) if payload == b"hello"));
//! ```
//!
//! # Conformance with the reference implementation
//!
//! `tests/conformance.rs` decodes a connect token, a challenge token and packets that the
//! reference C implementation (mas-bandwidth/netcode) produced with fixed keys, nonces and
//! timestamps (`tests/data/`), and checks that this crate encrypts the same plaintexts to
//! the same bytes, IPv4 and IPv6 token addresses included. Live interoperability was
//! checked on loopback with the reference's own `client` and `server` programs, all four
//! ways (their client to our server and our client to their server, IPv4 and IPv6),
//! payloads checked byte for byte on both sides, using the `netcode_interop` example of
//! `lagless-transport`. How to build the reference outside this repository and repeat the
//! runs is in this crate's `tests/data/README.md`.

#![deny(missing_docs)]

mod bytes;
mod client;
mod crypto;
mod error;
pub mod packet;
mod replay;
mod server;
mod token;

use std::net::SocketAddr;
use std::time::Duration;

pub use client::{Client, ClientState, ClientStats};
pub use crypto::Key;
pub use error::{ConfigError, DropCounters, PacketError, SendError, TokenError};
pub use packet::{Packet, PacketType};
pub use replay::ReplayProtection;
pub use server::{DisconnectReason, Server, ServerConfig, ServerEvent, ServerStats};
pub use token::{ChallengeToken, ConnectToken, PrivateConnectToken, TokenParams};

/// "NETCODE 1.02" with its null terminator.
pub const VERSION_INFO: &[u8; 13] = b"NETCODE 1.02\0";
/// Bytes in a key.
pub const KEY_BYTES: usize = 32;
/// Bytes in an AEAD tag.
pub const MAC_BYTES: usize = 16;
/// Bytes of user data in a connect token.
pub const USER_DATA_BYTES: usize = 256;
/// Bytes in a connect token.
pub const CONNECT_TOKEN_BYTES: usize = 2048;
/// Bytes in the encrypted private part of a connect token (tag included).
pub const CONNECT_TOKEN_PRIVATE_BYTES: usize = 1024;
/// Bytes in the private token's XChaCha20 nonce.
pub const CONNECT_TOKEN_NONCE_BYTES: usize = 24;
/// Bytes in an encrypted challenge token (tag included).
pub const CHALLENGE_TOKEN_BYTES: usize = 300;
/// Largest payload in one packet.
pub const MAX_PAYLOAD_BYTES: usize = 1200;
/// Largest packet either side sends.
pub const MAX_PACKET_BYTES: usize = 1300;
/// Size of a connection request: every one is exactly this long, and every answer to it
/// (challenge: 333 bytes, denied: 25) is smaller.
pub const REQUEST_PACKET_BYTES: usize =
    1 + 13 + 8 + 8 + CONNECT_TOKEN_NONCE_BYTES + CONNECT_TOKEN_PRIVATE_BYTES;
/// Most server addresses in one token.
pub const MAX_SERVERS_PER_CONNECT: usize = 32;
/// Most client slots a [`Server`] supports.
pub const MAX_CLIENTS: usize = 1024;
/// Pending handshakes (encryption mappings of clients that have not answered their
/// challenge) a [`Server`] holds, whatever its `max_clients`: the reference's
/// `NETCODE_MAX_ENCRYPTION_MAPPINGS`. Since slots are at most [`MAX_CLIENTS`], every free
/// slot can have a handshake in flight at once.
pub const MAX_ENCRYPTION_MAPPINGS: usize = 1024;
/// Connect tokens a [`Server`] remembers (by their private part's MAC, with the address
/// each came from first) to refuse a token used from a second address, whatever its
/// `max_clients`; the oldest is forgotten when a new one comes. The reference's
/// `NETCODE_MAX_CONNECT_TOKEN_ENTRIES` is fixed in the same way at 8 per slot the
/// implementation supports (`NETCODE_MAX_CLIENTS * 8`, 2048 there); sized from this
/// crate's [`MAX_CLIENTS`], it is 8192, so no server remembers fewer than 8 per slot, and
/// a small one cannot be made to forget a token by a holder of a few dozen others. The
/// history grows as tokens arrive, to under 1 MiB when full.
pub const MAX_CONNECT_TOKEN_ENTRIES: usize = MAX_CLIENTS * 8;
/// Pending handshakes one source (IPv4 address or IPv6 /64) holds, with the server's
/// handshake table full, before its own oldest are evicted first. Only a full table
/// enforces it, so clients behind one NAT connect freely otherwise; 16 is room for a LAN
/// party connecting during a flood, and all a flooding host keeps of the table once it is
/// full.
pub const PENDING_SHARE_PER_SOURCE: usize = 16;
/// The window over which a [`Server`] counts connection requests, to tell when it is busy
/// and which sources ask for more than their share (see "Requests under load" on
/// [`Server`]).
pub const REQUEST_WINDOW: Duration = Duration::from_millis(250);
/// Connection requests a [`Server`] decrypts in one [`REQUEST_WINDOW`] (about 1000 a
/// second) before it counts as busy and holds each source to
/// [`REQUESTS_PER_SOURCE_WHEN_BUSY`]. Below it nothing is refused for its source, so a
/// LAN party or a load test behind one address connects as freely as ever.
pub const BUSY_REQUESTS_PER_WINDOW: u32 = 256;
/// Connection requests one source (IPv4 address or IPv6 /64) gets decrypted in one
/// [`REQUEST_WINDOW`] while the [`Server`] is busy. A client sends 10 requests a second
/// (2 or 3 a window), and as many while it answers a challenge: 4 covers one client a
/// source; several behind one NAT share it, and connect one after another while the
/// server is busy.
pub const REQUESTS_PER_SOURCE_WHEN_BUSY: u8 = 4;
/// Entries in the replay-protection window.
pub const REPLAY_PROTECTION_BUFFER_SIZE: usize = 256;
/// Payloads queued per client (server) or in total (client) before more are dropped.
pub const PACKET_QUEUE_SIZE: usize = 256;
/// Redundant disconnect packets sent on a clean disconnect.
pub const NUM_DISCONNECT_PACKETS: usize = 10;
/// Interval of requests, responses and keep-alives (10 Hz).
pub const PACKET_SEND_INTERVAL: Duration = Duration::from_millis(100);

pub(crate) const ADDRESS_IPV4: u8 = 1;
pub(crate) const ADDRESS_IPV6: u8 = 2;

/// A datagram to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Destination.
    pub addr: SocketAddr,
    /// The packet.
    pub data: Vec<u8>,
}

/// Addresses compare by IP and port only (an IPv6 flow label or scope id is dropped).
pub(crate) fn normalize(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip(), addr.port())
}
