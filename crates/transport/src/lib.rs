//! Real UDP for lagless: [`UdpServer`] and [`UdpClient`] drive the sans-IO
//! [`lagless_netcode`] state machines over `std::net::UdpSocket` with a real clock, beside
//! unreliable payloads they carry a small [reliable-ordered channel](reliable), and
//! [`Proxy`] puts a seeded `lagless_netem` link between any real client and server.
//!
//! - [`UdpServer`]: `bind(addr, settings)`, then every frame `update()`, `poll_event()`
//!   (connects, disconnects), `recv()` / `recv_reliable()` as `(client_id, bytes)`,
//!   `send(client_id, bytes)` / `send_reliable(client_id, bytes)`; `shutdown()` sends the
//!   redundant disconnect packets to everyone.
//! - [`UdpClient`]: `connect(token_bytes)`, then `update()`, `state()`, `send`,
//!   `send_reliable`, `recv`, `recv_reliable`, `disconnect()`.
//! - [`Proxy`]: `spawn(listen, forward, "mobile", seed)` runs on its own thread until
//!   `stop()` (or drop); each client address gets its own seeded `Duplex`.
//! - [`session`]: a game's `lagless_replication` [`Server`](lagless_replication::Server)
//!   and [`Client`](lagless_replication::Client) over the two, generic over the game:
//!   [`GameServer`] connects and disconnects clients as netcode.io admits them (events
//!   the game polls), checks each client's tick and snapshot rates with a hello on the
//!   reliable channel, counts everything once a second and sleeps until the next tick or
//!   packet; [`GameClient`] refuses a server of other rates with an error naming both.
//! - [`keys`]: private-key files (32 raw bytes), OS-seeded randomness, `issue_token` for a
//!   backend (connect tokens are `lagless_netcode::ConnectToken`, 2048 bytes on disk).
//!
//! Client ids are the ids in the connect tokens (the server refuses a second connection
//! with an id already connected). Every netcode payload of this transport starts with a
//! one-byte tag, `0` for an unreliable payload and `1` for a reliable channel packet, so a
//! peer must speak this transport, not just netcode.io (the `netcode_interop` example talks
//! plain netcode.io to the reference implementation). Every receive queue is bounded
//! (overflow is counted in [`TransportStats`]); every protocol drop is counted by reason in
//! `UdpServer::netcode().stats().drops`.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, Instant};
//! use lagless_transport::{UdpClient, UdpServer, ServerSettings, keys};
//!
//! let private_key = keys::generate_private_key()?;
//! let protocol_id = 0x6c61676c657373;
//! let mut server = UdpServer::bind("127.0.0.1:0".parse().unwrap(), ServerSettings::new(protocol_id, private_key, 8))?;
//! let token = keys::issue_token(&private_key, protocol_id, 42, vec![server.local_addr()?], 30, 5)?;
//! let mut client = UdpClient::connect(&token.write()?)?;
//!
//! let deadline = Instant::now() + Duration::from_secs(5);
//! let mut got = Vec::new();
//! while got.is_empty() && Instant::now() < deadline {
//!     server.update();
//!     client.update();
//!     if client.is_connected() {
//!         client.send(b"hello")?;
//!     }
//!     got.extend(server.recv());
//!     std::thread::sleep(Duration::from_millis(5));
//! }
//! assert_eq!(got[0], (42, b"hello".to_vec()));
//! # Ok::<(), lagless_transport::TransportError>(())
//! ```

#![deny(missing_docs)]

mod client;
mod error;
pub mod keys;
mod proxy;
pub mod reliable;
mod server;
pub mod session;

pub use client::{GaveUp, GaveUpWhy, RETRY_BACKOFF_FIRST, RETRY_BACKOFF_MAX, UdpClient};
pub use error::TransportError;
pub use proxy::{Proxy, ProxyConfig, ProxyStats};
pub use server::{ConnectionEvent, ServerSettings, TransportStats, UdpServer};
pub use session::{GameClient, GameServer, SessionEvent, SessionStats};

/// A protocol id for lagless games ("lagless" and a version byte): servers ignore tokens
/// issued for another protocol id. Games with their own backend may pick their own.
/// Version 2: input messages name every snapshot held (`lagless_core::message`), and
/// snapshots merge the acknowledged ones into their baseline.
pub const PROTOCOL_ID: u64 = u64::from_le_bytes(*b"lagless\x02");

/// Largest unreliable payload (a netcode payload less the tag byte).
pub const MAX_UNRELIABLE_BYTES: usize = lagless_netcode::MAX_PAYLOAD_BYTES - 1;

pub(crate) const TAG_UNRELIABLE: u8 = 0;
pub(crate) const TAG_RELIABLE: u8 = 1;

/// Blocks until a datagram is waiting on `socket` (true) or `timeout` has passed (false).
///
/// std has no poll(2), so this is a blocking peek under a read timeout on a socket that is
/// otherwise non-blocking; a socket error also returns true, so the caller's next read
/// takes it instead of this waiting on it again.
pub(crate) fn wait_readable(socket: &std::net::UdpSocket, timeout: std::time::Duration) -> bool {
    // std refuses a zero read timeout (to the OS it would mean none).
    if timeout.is_zero() {
        return false;
    }
    if socket.set_nonblocking(false).is_err() || socket.set_read_timeout(Some(timeout)).is_err() {
        let _ = socket.set_nonblocking(true);
        return false;
    }
    // One byte is enough to learn a datagram is there; the datagram stays queued.
    let ready = match socket.peek_from(&mut [0u8; 1]) {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    let _ = socket.set_nonblocking(true);
    ready
}

pub(crate) fn unreliable_packet(payload: &[u8]) -> Result<Vec<u8>, TransportError> {
    if payload.is_empty() || payload.len() > MAX_UNRELIABLE_BYTES {
        return Err(TransportError::PayloadSize(payload.len()));
    }
    let mut v = Vec::with_capacity(payload.len() + 1);
    v.push(TAG_UNRELIABLE);
    v.extend_from_slice(payload);
    Ok(v)
}
