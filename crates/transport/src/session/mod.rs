//! A game's [`Server`](lagless_replication::Server) and
//! [`Client`](lagless_replication::Client) over real UDP, generic over the game.
//!
//! - [`GameServer`] hosts a game's `Server<I>` on a [`crate::UdpServer`]: it reads the
//!   socket, connects and disconnects clients in the `Server` as netcode.io admits them,
//!   hands it their packets and sends what it has, on a real clock. The game polls
//!   [`SessionEvent`]s (a client connected or left, once a second the [`SessionStats`]) to
//!   spawn and despawn players, and steps its world with `server_mut().next_tick()`.
//! - [`GameClient`] hosts a game's `Client<W>` on a [`crate::UdpClient`]; the game drives
//!   the hosted client as it would over any transport, or calls [`GameClient::step`].
//!
//! Beside the game's packets (unreliable payloads, unchanged), the server sends
//! [`Control`] messages on the transport's reliable channel: a [`Control::Hello`] with its
//! tick rate and snapshot interval when a client connects (and the id it knows the client
//! by, [`GameClient::client_id`]), which the client checks against
//! its own [`NetConfig`](lagless_replication::NetConfig) before it sends anything, and a
//! [`Control::Refused`] to a client whose packets announce another tick rate (one that
//! skipped the check), before it is disconnected. Either way the connection ends with a
//! [`Mismatch`] naming both values, so a misconfigured client says why it cannot play
//! instead of timing out.

mod client;
mod server;

pub use client::{
    DEFAULT_SWITCH_AFTER, GameClient, GameClientStats, SessionState, SwitchCause, TokenSource,
};
pub use server::{
    DEFAULT_IDLE_TIMEOUT, GameServer, LeaveReason, MatchId, RefusedPackets, SessionEvent,
    SessionStats, match_of_user_data, match_user_data,
};

use lagless_core::{Reader, WireError, Writer};
use thiserror::Error;

/// Ticks between snapshots for a snapshot rate, rounded as
/// [`lagless_replication::NetConfig`] rounds it (its own method is private).
pub(crate) fn snapshot_interval(tick_hz: u32, snapshot_hz: u32) -> u32 {
    (f64::from(tick_hz) / f64::from(snapshot_hz.max(1)))
        .round()
        .max(1.0) as u32
}

/// A rate in Hz for a message: whole numbers without decimals.
fn hz(tick_hz: u32, interval: u32) -> String {
    let hz = f64::from(tick_hz) / f64::from(interval.max(1));
    if hz.fract() == 0.0 {
        format!("{hz:.0}")
    } else {
        format!("{hz:.1}")
    }
}

/// Settings on which a server and a client disagree, so they cannot play together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Mismatch {
    /// Another simulation rate.
    #[error("server runs {server} Hz ticks, this client {client} Hz")]
    TickRate {
        /// The server's ticks per second.
        server: u32,
        /// The client's.
        client: u32,
    },
    /// Another snapshot rate at the same tick rate.
    #[error(
        "server sends {} snapshots/s (one every {server} ticks), this client expects {} (one every {client})",
        hz(*tick_hz, *server),
        hz(*tick_hz, *client)
    )]
    SnapshotRate {
        /// The tick rate both run.
        tick_hz: u32,
        /// Ticks between the server's snapshots.
        server: u32,
        /// Ticks between snapshots the client is configured for.
        client: u32,
    },
}

/// Why a [`GameClient`]'s session ended or never started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SessionError {
    /// The server's settings differ from this client's: the client refused to play.
    #[error("{0}")]
    Mismatch(Mismatch),
    /// The server refused this client's settings.
    #[error("refused by the server: {0}")]
    Refused(Mismatch),
    /// netcode.io did not connect: the token expired or is invalid, the server is full,
    /// or no server answered any handshake tried within the token's validity; says how
    /// many were tried and why no other was.
    #[error("could not connect: {0}")]
    Connect(crate::GaveUp),
    /// Connected, but no hello came from the server in time: it does not speak this
    /// session (a bare [`crate::UdpServer`], say).
    #[error("no hello from the server within {0:?}")]
    NoHello(std::time::Duration),
    /// Nothing arrived from the server within the token's timeout.
    #[error("connection timed out")]
    TimedOut,
    /// The server closed the connection (it shut down or kicked this client).
    #[error("the server closed the connection")]
    ServerClosed,
    /// This client left ([`GameClient::disconnect`]).
    #[error("disconnected")]
    Left,
    /// The client was not updated for this long, longer than the connection's timeout
    /// (the app was in the background, the process stopped): the server has dropped it,
    /// whatever packets wait in the socket, so it does not play on. Reconnect with a
    /// fresh token ([`GameClient::reconnect`]).
    #[error(
        "silent for {0:?}, longer than the connection's timeout: the server has dropped this client"
    )]
    Suspended(std::time::Duration),
    /// The server dropped this client because no game packet came from it for this
    /// long, though its connection was alive ([`GameServer::set_idle_timeout`]): the
    /// game stopped ticking the client while the transport kept it connected.
    #[error("dropped by the server: no game packet from this client for {0:?}")]
    Idle(std::time::Duration),
}

/// A message of the session on the transport's reliable channel (server to client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Sent once when a client connects: the server's settings, for the client to check.
    Hello {
        /// Ticks per second.
        tick_hz: u32,
        /// Ticks between snapshots.
        snapshot_interval: u32,
        /// The connection took an away client's place back
        /// ([`GameServer::set_resume_grace`]): its session goes on. A client that
        /// resumed and reads `false` was taken as a new one, and starts over.
        resumed: bool,
        /// The id the server knows this client by (its connect token's), which the
        /// client cannot read from the token itself ([`GameClient::client_id`]).
        client: lagless_core::ClientId,
    },
    /// The client's packets announce settings this server cannot use; it is disconnected
    /// once it has this message (or after a grace period).
    Refused(Mismatch),
    /// The client sent no game packet for this long while its connection lived
    /// ([`GameServer::set_idle_timeout`]): it is out of the game, and disconnected once
    /// it has this message (or after a grace period).
    Idle(std::time::Duration),
    /// The game's own message ([`GameServer::send_control`], [`GameClient::poll_control`]):
    /// reliable, ordered, and readable before the client plays, for what a client needs
    /// before it builds its world (the map, the player it drives, a seed).
    Game(Vec<u8>),
}

const TAG_HELLO: u8 = b'H';
const TAG_REFUSED: u8 = b'R';
const TAG_GAME: u8 = b'G';
const TAG_IDLE: u8 = b'D';
const MISMATCH_TICK_RATE: u8 = 1;
const MISMATCH_SNAPSHOT_RATE: u8 = 2;

impl Control {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        match self {
            Control::Hello {
                tick_hz,
                snapshot_interval,
                resumed,
                client,
            } => {
                w.write_u8(TAG_HELLO);
                w.write_u32(*tick_hz);
                w.write_u32(*snapshot_interval);
                w.write_u8(u8::from(*resumed));
                w.write_u64(*client);
            }
            Control::Refused(Mismatch::TickRate { server, client }) => {
                w.write_u8(TAG_REFUSED);
                w.write_u8(MISMATCH_TICK_RATE);
                w.write_u32(*server);
                w.write_u32(*client);
            }
            Control::Refused(Mismatch::SnapshotRate {
                tick_hz,
                server,
                client,
            }) => {
                w.write_u8(TAG_REFUSED);
                w.write_u8(MISMATCH_SNAPSHOT_RATE);
                w.write_u32(*tick_hz);
                w.write_u32(*server);
                w.write_u32(*client);
            }
            Control::Idle(after) => {
                w.write_u8(TAG_IDLE);
                w.write_u32(u32::try_from(after.as_millis()).unwrap_or(u32::MAX));
            }
            Control::Game(bytes) => {
                w.write_u8(TAG_GAME);
                w.write_bytes(bytes);
            }
        }
        w.into_bytes()
    }

    /// Decodes a message; anything truncated, longer or of an unknown kind is an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        let out = match r.read_u8()? {
            TAG_HELLO => Control::Hello {
                tick_hz: r.read_u32()?,
                snapshot_interval: r.read_u32()?,
                resumed: match r.read_u8()? {
                    0 => false,
                    1 => true,
                    _ => {
                        return Err(WireError::Invalid {
                            what: "hello's resumed flag",
                        });
                    }
                },
                client: r.read_u64()?,
            },
            TAG_REFUSED => Control::Refused(match r.read_u8()? {
                MISMATCH_TICK_RATE => Mismatch::TickRate {
                    server: r.read_u32()?,
                    client: r.read_u32()?,
                },
                MISMATCH_SNAPSHOT_RATE => Mismatch::SnapshotRate {
                    tick_hz: r.read_u32()?,
                    server: r.read_u32()?,
                    client: r.read_u32()?,
                },
                _ => {
                    return Err(WireError::Invalid {
                        what: "mismatch kind",
                    });
                }
            }),
            TAG_IDLE => Control::Idle(std::time::Duration::from_millis(u64::from(r.read_u32()?))),
            TAG_GAME => Control::Game(bytes[1..].to_vec()),
            _ => {
                return Err(WireError::Invalid {
                    what: "control message kind",
                });
            }
        };
        if !matches!(out, Control::Game(_)) {
            r.finish()?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_round_trips_and_refuses_every_prefix_and_suffix() {
        for c in [
            Control::Hello {
                tick_hz: 64,
                snapshot_interval: 2,
                resumed: false,
                client: u64::MAX,
            },
            Control::Hello {
                tick_hz: 30,
                snapshot_interval: 1,
                resumed: true,
                client: 7,
            },
            Control::Refused(Mismatch::TickRate {
                server: 64,
                client: 30,
            }),
            Control::Refused(Mismatch::SnapshotRate {
                tick_hz: 60,
                server: 2,
                client: 3,
            }),
            Control::Idle(std::time::Duration::from_millis(10_250)),
        ] {
            let bytes = c.encode();
            assert_eq!(Control::decode(&bytes), Ok(c.clone()));
            for n in 0..bytes.len() {
                assert!(Control::decode(&bytes[..n]).is_err(), "prefix {n}");
            }
            let mut longer = bytes;
            longer.push(0);
            assert!(Control::decode(&longer).is_err());
        }
        assert!(Control::decode(&[TAG_REFUSED, 9, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(Control::decode(&[0]).is_err());
        assert!(Control::decode(&[TAG_HELLO, 30, 0, 0, 0, 1, 0, 0, 0, 2]).is_err());
        // The game's message is whatever follows its tag, empty included.
        for payload in [vec![], vec![1, 2, 3]] {
            let c = Control::Game(payload);
            assert_eq!(Control::decode(&c.encode()), Ok(c));
        }
    }

    #[test]
    fn control_never_panics_on_random_bytes() {
        // A fixed-seed LCG: lengths 0..16 around the messages' 9 to 14 bytes, first bytes
        // often a tag so the rest is read too.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) as u8
        };
        let mut decoded = 0;
        for _ in 0..50_000 {
            let len = usize::from(next() % 16);
            let mut bytes: Vec<u8> = (0..len).map(|_| next()).collect();
            if let Some(b) = bytes.first_mut() {
                *b = [TAG_HELLO, TAG_REFUSED, *b][usize::from(*b % 3)];
            }
            if let [TAG_REFUSED, kind, ..] = &mut bytes[..] {
                *kind %= 3;
            }
            if let [TAG_HELLO, .., flag] = &mut bytes[..] {
                *flag %= 3;
            }
            if let Ok(c) = Control::decode(&bytes) {
                assert_eq!(c.encode(), bytes, "decode then encode gives the same bytes");
                decoded += 1;
            }
        }
        assert!(decoded > 0, "messages of the right length decode");
    }

    #[test]
    fn mismatches_name_both_values() {
        let tick = Mismatch::TickRate {
            server: 64,
            client: 30,
        };
        assert_eq!(
            tick.to_string(),
            "server runs 64 Hz ticks, this client 30 Hz"
        );
        let snap = Mismatch::SnapshotRate {
            tick_hz: 64,
            server: 2,
            client: 3,
        };
        assert_eq!(
            snap.to_string(),
            "server sends 32 snapshots/s (one every 2 ticks), this client expects 21.3 (one every 3)"
        );
        assert_eq!(
            SessionError::Refused(tick).to_string(),
            "refused by the server: server runs 64 Hz ticks, this client 30 Hz"
        );
    }

    #[test]
    fn snapshot_interval_rounds_as_net_config_does() {
        assert_eq!(snapshot_interval(64, 64), 1);
        assert_eq!(snapshot_interval(64, 32), 2);
        assert_eq!(snapshot_interval(64, 30), 2);
        assert_eq!(snapshot_interval(60, 20), 3);
        assert_eq!(snapshot_interval(30, 0), 30);
    }
}
