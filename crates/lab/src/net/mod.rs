//! Every scene over real UDP: the lab's server and clients on `lagless_transport`
//! (netcode.io, real clock), for `lagless serve`, `connect`, `proxy` and
//! `run --transport udp`.
//!
//! - [`serve`]: the authoritative server loop (the game's `lagless_replication::Server`,
//!   the scene and [`crate::replication::SnapshotSender`]) in real time, hosted by the
//!   library's `lagless_transport::GameServer` as a game's would be; each netcode.io
//!   client slot `k` drives player `k + 1`.
//! - [`connect`]: one client in real time, the lab's client (`runner::client::ClientSim`:
//!   the public `Client`, script, interpolation) or a light bot (session, script, decoding),
//!   its link a pass-through `netem::Duplex` fed from the socket.
//! - [`proxy`]: `lagless proxy`, the transport's [`lagless_transport::Proxy`] with a profile
//!   and the network overrides of `run`.
//! - [`run`]: `run --transport udp`, a server and N clients on loopback threads.
//! - [`report`]: the metrics of `docs/metrics.md` from what the clients (and, in one process, the server)
//!   measured.
//!
//! Beside the session packets, which travel as unreliable payloads unchanged, the server
//! sends [`Control`] messages as the host's game control messages (reliable, readable
//! before the client plays): a welcome with the
//! player the client drives and the scene's settings (the scene, its declaration's
//! fingerprint and the seed, so a client of another scene is refused by name), and once a second a link report
//! with what the server received from the client and sent to it, so the client can tell
//! the loss of both directions (`net.loss_pct`) from the session packets' sequence
//! numbers ([`SeqCounter`]).

pub mod admin;
pub mod connect;
pub mod flood;
mod matches;
pub mod proxy;
pub mod report;
pub mod run;
pub mod serve;

use lagless_wire::{Reader, WireError, Writer};
use thiserror::Error;

/// Why a networked command could not run.
#[derive(Debug, Error)]
pub enum UdpRunError {
    /// The transport failed (socket, token, key file).
    #[error(transparent)]
    Transport(#[from] lagless_transport::TransportError),
    /// The run's settings are invalid.
    #[error(transparent)]
    Run(#[from] crate::RunError),
    /// The server did not accept the client in time, or refused it.
    #[error("could not connect: {0}")]
    Connect(String),
    /// A thread of the run panicked.
    #[error("a thread of the run failed: {0}")]
    Thread(String),
}

/// What the server tells a client on the reliable channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Sent once on connect: what the client drives and the scene's settings.
    Welcome {
        /// The player this client drives.
        player: u32,
        /// Server ticks per second.
        tick_hz: u32,
        /// Snapshots per second.
        snapshot_hz: u32,
        /// Cubes per side of the scene's grid.
        grid: u32,
        /// The scene ([`scene_code`]).
        scene: u8,
        /// The scene's replication declaration ([`schema_fingerprint`]): a client whose
        /// scene settings declare another one would decode nothing right.
        schema: u64,
        /// The run's seed (scene layouts and scripts follow it).
        seed: u64,
    },
    /// Sent every second: the link as the server saw it since this client connected.
    Link {
        /// Session packets the client sent, by their sequence numbers.
        up_expected: u64,
        /// Of those, received.
        up_received: u64,
        /// Session packets sent to the client.
        down_sent: u64,
        /// Their bytes, with the UDP/IP header counted per packet (`docs/metrics.md`).
        down_bytes: u64,
        /// Milliseconds since the client connected.
        elapsed_ms: u64,
    },
}

const TAG_WELCOME: u8 = 1;
const TAG_LINK: u8 = 2;

impl Control {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        match *self {
            Control::Welcome {
                player,
                tick_hz,
                snapshot_hz,
                grid,
                scene,
                schema,
                seed,
            } => {
                w.write_u8(TAG_WELCOME);
                w.write_u32(player);
                w.write_u32(tick_hz);
                w.write_u32(snapshot_hz);
                w.write_u32(grid);
                w.write_u8(scene);
                w.write_u64(schema);
                w.write_u64(seed);
            }
            Control::Link {
                up_expected,
                up_received,
                down_sent,
                down_bytes,
                elapsed_ms,
            } => {
                w.write_u8(TAG_LINK);
                for v in [up_expected, up_received, down_sent, down_bytes, elapsed_ms] {
                    w.write_u64(v);
                }
            }
        }
        w.into_bytes()
    }

    /// Decodes a message; anything malformed or of another kind is an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        let out = match r.read_u8()? {
            TAG_WELCOME => Control::Welcome {
                player: r.read_u32()?,
                tick_hz: r.read_u32()?,
                snapshot_hz: r.read_u32()?,
                grid: r.read_u32()?,
                scene: r.read_u8()?,
                schema: r.read_u64()?,
                seed: r.read_u64()?,
            },
            TAG_LINK => Control::Link {
                up_expected: r.read_u64()?,
                up_received: r.read_u64()?,
                down_sent: r.read_u64()?,
                down_bytes: r.read_u64()?,
                elapsed_ms: r.read_u64()?,
            },
            _ => {
                return Err(WireError::Invalid {
                    what: "control message kind",
                });
            }
        };
        r.finish()?;
        Ok(out)
    }
}

/// A scene's code in the welcome: its place in [`crate::scenes::SCENES`] (255: none).
pub fn scene_code(name: &str) -> u8 {
    crate::scenes::SCENES
        .iter()
        .position(|s| *s == name)
        .map_or(u8::MAX, |i| i as u8)
}

/// The scene name a welcome's code stands for.
pub fn scene_name(code: u8) -> Option<&'static str> {
    crate::scenes::SCENES.get(usize::from(code)).copied()
}

/// A fingerprint of a replication declaration (FNV-1a of its description): two ends
/// whose fingerprints differ do not speak the same snapshots.
pub fn schema_fingerprint(schema: &lagless_replication::Schema) -> u64 {
    format!("{schema:?}")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// Counts the packets of one direction from the 16-bit sequence number every session
/// packet carries after its kind byte: the packets expected are those from the first to
/// the newest number seen, so the packets lost are the ones never seen (netcode.io's replay
/// protection has already dropped duplicates).
#[derive(Debug, Clone, Default)]
pub struct SeqCounter {
    span: lagless_wire::SeqSpan,
    received: u64,
}

impl SeqCounter {
    /// Counts a session packet; packets too short to carry a sequence number are not
    /// counted.
    pub fn observe(&mut self, packet: &[u8]) {
        let mut r = Reader::new(packet);
        let Ok(seq) = r.read_u8().and_then(|_| r.read_u16()) else {
            return;
        };
        self.received += 1;
        self.span.observe(lagless_wire::Seq16(seq));
    }

    /// Packets from the first to the newest sequence number seen.
    pub fn expected(&self) -> u64 {
        self.span.expected()
    }

    /// Packets seen.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Packets expected and never seen.
    pub fn lost(&self) -> u64 {
        self.expected().saturating_sub(self.received)
    }
}

/// This process's resident memory, MB (Linux; `None` elsewhere).
pub fn rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// The label `connect` and `run --transport udp` report as `transport`.
pub const TRANSPORT_LABEL: &str = "udp";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_round_trips_and_refuses_garbage() {
        for c in [
            Control::Welcome {
                player: 3,
                tick_hz: 64,
                snapshot_hz: 32,
                grid: 30,
                scene: 2,
                schema: 0x1234_5678_9abc_def0,
                seed: 7,
            },
            Control::Link {
                up_expected: 10,
                up_received: 9,
                down_sent: 12,
                down_bytes: 3000,
                elapsed_ms: 1000,
            },
        ] {
            let bytes = c.encode();
            assert_eq!(Control::decode(&bytes), Ok(c));
            for n in 0..bytes.len() {
                assert!(Control::decode(&bytes[..n]).is_err(), "prefix {n}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Control::decode(&longer).is_err());
        }
        assert!(Control::decode(&[9, 0, 0]).is_err());
    }

    #[test]
    fn control_never_panics_on_random_bytes() {
        // A fixed-seed LCG: lengths 0..64, every byte value, both tags often enough.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) as u8
        };
        let mut decoded = 0;
        for _ in 0..20_000 {
            let len = usize::from(next() % 64);
            let mut bytes: Vec<u8> = (0..len).map(|_| next()).collect();
            if let Some(b) = bytes.first_mut() {
                *b %= 3;
            }
            if let Ok(c) = Control::decode(&bytes) {
                assert_eq!(c.encode(), bytes, "decode then encode gives the same bytes");
                decoded += 1;
            }
        }
        assert!(
            decoded > 0,
            "some random messages of the right length decode"
        );
    }

    fn packet(seq: u16) -> Vec<u8> {
        let mut p = vec![0x53];
        let mut w = Writer::new();
        w.write_u16(seq);
        p.extend(w.into_bytes());
        p.push(0);
        p
    }

    #[test]
    fn seq_counter_counts_gaps_across_the_wrap() {
        let mut c = SeqCounter::default();
        // 65530..=65535 and 0..=9 with 65533, 2 and 3 lost, 5 before 4.
        let seqs = (65530u16..=65535)
            .chain(0..=9)
            .filter(|s| ![65533, 2, 3].contains(s));
        let mut seqs: Vec<u16> = seqs.collect();
        let four = seqs.iter().position(|&s| s == 4).unwrap_or(0);
        seqs.swap(four, four + 1);
        for s in seqs {
            c.observe(&packet(s));
        }
        assert_eq!(c.expected(), 16);
        assert_eq!(c.received(), 13);
        assert_eq!(c.lost(), 3);
        // Too short to count.
        c.observe(&[0x53, 1]);
        assert_eq!(c.received(), 13);
    }
}
