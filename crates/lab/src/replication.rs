//! Snapshot replication in the lab: what the server encodes for each client, and how a
//! client decodes it, for either codec ([`SnapshotCodecChoice`]).
//!
//! With the delta codec the server records every snapshot it builds and encodes each
//! client's against the newest one that client acknowledged, in full when none is usable;
//! the client keeps what it decoded and acknowledges it through its session.
//!
//! Both ends work incrementally: the server quantizes only bodies whose state changed
//! since its previous capture ([`CaptureCache`]), a client dequantizes only cubes whose
//! codes differ from the snapshot it converted last ([`DecodeCache`]). Neither changes a
//! byte or a float of what the non-incremental paths produce.

use crate::config::{RunConfig, SnapshotCodecChoice};
use crate::cpu::CpuTimer;
use crate::metrics::{Metric, Report, percentile};
use lagless_core::message::FRAGMENT_PAYLOAD_BYTES;
use lagless_core::{
    BaselineHistory, ClientId, ClientSession, ProtocolError, ReceivedSnapshot, ServerSession,
};
use lagless_scenes::cubes::cache::{CaptureCache, DecodeCache};
use lagless_scenes::cubes::delta::{QuantizedSnapshot, SnapshotCodec, SnapshotError};
use lagless_scenes::cubes::snapshot::{CubeSnapshot, SnapshotLimits};
use lagless_scenes::cubes::{CubeInput, CubeScene};
use std::time::Duration;

/// Snapshots the server keeps as baselines: 1 s at 64 snapshots/s.
pub const SERVER_BASELINES: usize = 64;
/// Snapshots a client keeps: more than the server, so it never lacks one the server picks.
pub const CLIENT_BASELINES: usize = 2 * SERVER_BASELINES;

/// Bits per entity of Fiedler's uncompressed encoding (source 003): position and linear
/// velocity as 3 floats, orientation as 4, one "interacting" bit.
pub const NAIVE_BITS_PER_ENTITY: u64 = 321;

/// What the server side counted.
#[derive(Debug, Clone, Default)]
pub struct SenderStats {
    /// Snapshots encoded (one per client per snapshot tick).
    pub sent: u64,
    /// Of those, encoded without a baseline.
    pub full: u64,
    /// Payload bits of all of them.
    pub bits: u64,
    /// Entities they carried that differed from the baseline (players always count).
    pub changed_entities: u64,
    /// Entities in the world at each, summed: what the naive encoding would send.
    pub entities: u64,
    /// Summed age of the baselines used, ticks.
    pub baseline_age_ticks: u64,
    /// Snapshots that needed more than one packet.
    pub fragmented: u64,
    /// CPU time per delta encode, µs.
    pub encode_us: Vec<f64>,
    /// CPU time to capture and quantize the world once per snapshot tick, µs.
    pub capture_us: Vec<f64>,
}

/// The server's snapshot encoder.
pub struct SnapshotSender {
    choice: SnapshotCodecChoice,
    codec: SnapshotCodec,
    history: BaselineHistory<QuantizedSnapshot>,
    capture: CaptureCache,
    /// Counters.
    pub stats: SenderStats,
}

impl SnapshotSender {
    /// An encoder for `choice`, on `codec`'s grid.
    pub fn new(choice: SnapshotCodecChoice, codec: SnapshotCodec) -> Self {
        Self {
            choice,
            codec,
            history: BaselineHistory::new(SERVER_BASELINES),
            capture: CaptureCache::new(),
            stats: SenderStats::default(),
        }
    }

    /// Encodes the scene's current state for every client and queues it on `server`.
    ///
    /// When a client's snapshot needs several packets (the first one, or after its
    /// acknowledgements stopped), the players also go alone in one packet, so the client
    /// can reconcile its own player whatever becomes of the fragments.
    pub fn send(
        &mut self,
        scene: &CubeScene,
        server: &mut ServerSession<CubeInput>,
        clients: &[ClientId],
        now: Duration,
    ) -> Result<(), ProtocolError> {
        let tick = server.current_tick();
        match self.choice {
            SnapshotCodecChoice::Plain => {
                let snapshot = CubeSnapshot::capture(scene);
                let bytes = snapshot.to_bytes();
                let entities = snapshot.players.len() + snapshot.cubes.len();
                let make_essential = || CubeSnapshot::capture_players(scene).to_bytes();
                let mut essential = None;
                for &id in clients {
                    self.count(bytes.len() * 8, entities, entities, None);
                    let fragmented =
                        send_one(server, id, now, &bytes, &mut essential, &make_essential)?;
                    self.stats.fragmented += u64::from(fragmented);
                }
            }
            SnapshotCodecChoice::Delta => {
                let timer = CpuTimer::start();
                let codec = self.codec;
                let snapshot = self.capture.capture(scene, &codec.quantization);
                self.stats.capture_us.push(timer.ms() * 1000.0);
                let entities = snapshot.players.len() + snapshot.cubes.len();
                // Only snapshots needing several packets go with an essential part.
                let make_essential = || codec.encode(&snapshot.players_only(), tick, None).bytes;
                let mut essential = None;
                for &id in clients {
                    let timer = CpuTimer::start();
                    let baseline = server
                        .snapshot_ack(id)
                        .and_then(|t| self.history.get(t).map(|b| (t, b)));
                    let encoded = codec.encode(&snapshot, tick, baseline);
                    self.stats.encode_us.push(timer.ms() * 1000.0);
                    let age = encoded.baseline.map(|t| tick.0 - t.0);
                    let changed = encoded.players + encoded.changed_cubes;
                    self.count(encoded.bits, changed, entities, age);
                    let fragmented = send_one(
                        server,
                        id,
                        now,
                        &encoded.bytes,
                        &mut essential,
                        &make_essential,
                    )?;
                    self.stats.fragmented += u64::from(fragmented);
                }
                self.history.insert(tick, snapshot);
            }
        }
        Ok(())
    }

    /// Counts one encoded snapshot; `baseline_age` is `None` for a full one.
    fn count(&mut self, bits: usize, changed: usize, entities: usize, baseline_age: Option<u32>) {
        self.stats.sent += 1;
        self.stats.bits += bits as u64;
        self.stats.changed_entities += changed as u64;
        self.stats.entities += entities as u64;
        match baseline_age {
            Some(age) => self.stats.baseline_age_ticks += u64::from(age),
            None => self.stats.full += 1,
        }
    }
}

/// Queues `bytes` for `id`. When they need several packets, the essential part goes too
/// (built by `make_essential` the first time a snapshot of this tick needs it, then kept
/// in `essential`), if it fits one packet. Returns whether `bytes` needed several packets.
fn send_one(
    server: &mut ServerSession<CubeInput>,
    id: ClientId,
    now: Duration,
    bytes: &[u8],
    essential: &mut Option<Vec<u8>>,
    make_essential: &dyn Fn() -> Vec<u8>,
) -> Result<bool, ProtocolError> {
    if bytes.len() <= FRAGMENT_PAYLOAD_BYTES {
        server.send_snapshot(id, now, bytes)?;
        return Ok(false);
    }
    let essential = essential.get_or_insert_with(make_essential);
    if essential.len() <= FRAGMENT_PAYLOAD_BYTES {
        server.send_snapshot_with_essential(id, now, essential, bytes)?;
    } else {
        server.send_snapshot(id, now, bytes)?;
    }
    Ok(true)
}

/// What a client's decoder counted.
#[derive(Debug, Clone, Default)]
pub struct ReceiverStats {
    /// Payloads that failed to decode (malformed).
    pub decode_errors: u64,
    /// Deltas against a baseline the client no longer held.
    pub missing_baseline: u64,
    /// CPU time per full (non-essential) decode, µs, including conversion to floats.
    pub decode_us: Vec<f64>,
}

/// A client's snapshot decoder.
pub struct SnapshotReceiver {
    choice: SnapshotCodecChoice,
    codec: SnapshotCodec,
    baselines: BaselineHistory<QuantizedSnapshot>,
    /// Essential parts are always sent in full: decoded against nothing.
    no_baselines: BaselineHistory<QuantizedSnapshot>,
    /// Floats of the last full snapshot converted, whatever its tick: consecutive
    /// snapshots share most cubes even when they arrive out of order.
    floats: DecodeCache,
    /// Counters.
    pub stats: ReceiverStats,
}

impl SnapshotReceiver {
    /// A decoder for `choice`, on `codec`'s grid.
    pub fn new(choice: SnapshotCodecChoice, codec: SnapshotCodec) -> Self {
        Self {
            choice,
            codec,
            baselines: BaselineHistory::new(CLIENT_BASELINES),
            no_baselines: BaselineHistory::new(1),
            floats: DecodeCache::new(),
            stats: ReceiverStats::default(),
        }
    }

    /// Decodes `snap`; a full snapshot that decodes is kept as a baseline and acknowledged
    /// through `session`. `None` (counted) when it does not decode.
    pub fn receive(
        &mut self,
        snap: &ReceivedSnapshot,
        session: &mut ClientSession<CubeInput>,
    ) -> Option<CubeSnapshot> {
        match self.choice {
            SnapshotCodecChoice::Plain => {
                let decoded = CubeSnapshot::decode(&snap.payload, SnapshotLimits::default());
                if decoded.is_err() {
                    self.stats.decode_errors += 1;
                }
                decoded.ok()
            }
            SnapshotCodecChoice::Delta => {
                let timer = CpuTimer::start();
                let history = if snap.essential {
                    &self.no_baselines
                } else {
                    &self.baselines
                };
                let decoded = match self.codec.decode(&snap.payload, snap.tick, history) {
                    Ok(q) if snap.essential && !q.cubes.is_empty() => {
                        self.stats.decode_errors += 1;
                        return None;
                    }
                    Ok(q) => q,
                    Err(SnapshotError::MissingBaseline(_)) => {
                        self.stats.missing_baseline += 1;
                        return None;
                    }
                    Err(SnapshotError::Wire(_)) => {
                        self.stats.decode_errors += 1;
                        return None;
                    }
                };
                let q = &self.codec.quantization;
                // An essential part has no cubes; through the cache it would evict the
                // world, and the next full snapshot would convert all of it again.
                let plain = if snap.essential {
                    decoded.to_snapshot(q)
                } else {
                    self.floats.to_snapshot(&decoded, q)
                };
                if !snap.essential {
                    self.stats.decode_us.push(timer.ms() * 1000.0);
                    if self.baselines.insert(snap.tick, decoded) {
                        session.acknowledge_snapshot(snap.tick);
                    }
                }
                Some(plain)
            }
        }
    }
}

/// Adds the `snapshot.*` metrics: LAB.md's plus the codec's own. `down_kbps_mean` is
/// `net.down_kbps_mean`, for the ratio to the naive stream.
pub fn snapshot_metrics(
    r: &mut Report,
    config: &RunConfig,
    sender: &SnapshotSender,
    receivers: &[&SnapshotReceiver],
    down_kbps_mean: Option<f64>,
) {
    let s = &sender.stats;
    let codec = match sender.choice {
        SnapshotCodecChoice::Delta => "delta",
        SnapshotCodecChoice::Plain => "plain",
    };
    r.set("snapshot.codec", Metric::Text(codec.into()));
    let per = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    r.number(
        "snapshot.bits_per_changed_entity",
        per(s.bits, s.changed_entities),
    );
    // Per client, like net.down_kbps_mean: every entity at 321 bits in every snapshot.
    let clients = u64::from(config.clients.max(1));
    let naive_kbps =
        s.entities as f64 * NAIVE_BITS_PER_ENTITY as f64 / 1000.0 / config.seconds / clients as f64;
    r.number("snapshot.naive_kbps", Some(naive_kbps));
    r.number(
        "snapshot.naive_ratio",
        down_kbps_mean.filter(|d| *d > 0.0).map(|d| naive_kbps / d),
    );
    r.number("snapshot.bytes_mean", per(s.bits, s.sent * 8));
    r.number(
        "snapshot.changed_entities_mean",
        per(s.changed_entities, s.sent),
    );
    r.number("snapshot.full_pct", per(s.full * 100, s.sent));
    r.number("snapshot.fragmented_pct", per(s.fragmented * 100, s.sent));
    r.number(
        "snapshot.baseline_age_ticks_mean",
        per(s.baseline_age_ticks, s.sent - s.full),
    );
    if sender.choice == SnapshotCodecChoice::Delta {
        r.number(
            "snapshot.position_resolution_mm",
            Some(f64::from(sender.codec.quantization.position_resolution()) * 1000.0),
        );
    }
    r.number("snapshot.capture_us_p50", percentile(&s.capture_us, 50.0));
    r.number("snapshot.encode_us_p50", percentile(&s.encode_us, 50.0));
    r.number("snapshot.encode_us_p99", percentile(&s.encode_us, 99.0));
    let decode: Vec<f64> = receivers
        .iter()
        .flat_map(|c| c.stats.decode_us.iter().copied())
        .collect();
    r.number("snapshot.decode_us_p50", percentile(&decode, 50.0));
    r.set(
        "snapshot.missing_baseline",
        Metric::Count(receivers.iter().map(|c| c.stats.missing_baseline).sum()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use lagless_core::{ClientConfig, ServerConfig};
    use lagless_scenes::cubes::CubeSceneConfig;

    /// A server and one client wired directly (no loss), with the lab's encoder and
    /// decoder between them.
    struct Pair {
        scene: CubeScene,
        server: ServerSession<CubeInput>,
        client: ClientSession<CubeInput>,
        sender: SnapshotSender,
        receiver: SnapshotReceiver,
        now: Duration,
        decoded: u64,
    }

    impl Pair {
        fn new() -> Self {
            let mut scene = CubeScene::new(CubeSceneConfig {
                grid: 4,
                ..CubeSceneConfig::default()
            });
            scene.add_player(1);
            let mut server = ServerSession::new(ServerConfig::default());
            server.add_client(1).unwrap();
            let codec = SnapshotCodec::default();
            Self {
                scene,
                server,
                client: ClientSession::new(ClientConfig::default()),
                sender: SnapshotSender::new(SnapshotCodecChoice::Delta, codec),
                receiver: SnapshotReceiver::new(SnapshotCodecChoice::Delta, codec),
                now: Duration::ZERO,
                decoded: 0,
            }
        }

        fn run(&mut self, ms: u64) {
            for _ in 0..ms {
                self.now += Duration::from_millis(1);
                let now = self.now;
                self.server.update(now);
                while self.server.next_tick().is_some() {
                    self.scene.step(&[(1, CubeInput::FORWARD)]);
                    if self.server.snapshot_due() {
                        self.sender
                            .send(&self.scene, &mut self.server, &[1], now)
                            .unwrap();
                    }
                }
                while let Some((_, p)) = self.server.poll_transmit() {
                    self.client.handle_packet(now, &p).unwrap();
                }
                while let Some(snap) = self.client.poll_snapshot() {
                    if snap.essential {
                        continue;
                    }
                    if let Some(plain) = self.receiver.receive(&snap, &mut self.client) {
                        self.decoded += 1;
                        // The incremental conversion gives what the plain one would.
                        let q = &self.receiver.codec.quantization;
                        let codes = self.receiver.baselines.get(snap.tick).unwrap();
                        assert_eq!(plain, codes.to_snapshot(q));
                    }
                }
                self.client.update(now);
                while let Some(t) = self.client.next_tick() {
                    self.client.set_input(t, CubeInput::FORWARD);
                }
                while let Some(p) = self.client.poll_transmit(now) {
                    self.server.handle_packet(1, now, &p).unwrap();
                }
            }
        }
    }

    #[test]
    fn acknowledged_snapshots_become_baselines() {
        let mut pair = Pair::new();
        pair.run(2000);
        let s = &pair.sender.stats;
        assert!(s.sent > 100);
        // Only those sent before the first acknowledgement came back.
        assert!(s.full <= 3, "{} full snapshots", s.full);
        assert_eq!(pair.decoded, s.sent);
        assert!(pair.client.snapshot_ack().is_some());
        assert_eq!(pair.receiver.stats.missing_baseline, 0);
    }

    #[test]
    fn a_client_that_lost_its_baselines_gets_a_full_snapshot() {
        let mut pair = Pair::new();
        pair.run(1000);
        let (full_before, decoded_before) = (pair.sender.stats.full, pair.decoded);
        // The client forgets everything it decoded (say, it reloaded the level).
        pair.receiver.baselines.clear();
        pair.run(2000);
        // Deltas against the forgotten baseline were rejected and counted; once the
        // acknowledged tick left the server's history, it sent a full snapshot, and
        // from then on deltas again.
        assert!(pair.receiver.stats.missing_baseline > 0);
        assert!(pair.receiver.stats.missing_baseline <= SERVER_BASELINES as u64 + 2);
        assert_eq!(pair.sender.stats.full, full_before + 1);
        assert!(pair.decoded > decoded_before + 30, "decoding resumed");
        assert_eq!(pair.receiver.stats.decode_errors, 0);
    }
}
