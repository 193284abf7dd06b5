//! Snapshot replication in the lab: what the server sends each client, and how a client
//! decodes it, for either codec ([`SnapshotCodecChoice`]).
//!
//! The delta codec is the replication layer ([`lagless_replication`]) with the scene's
//! declaration ([`LabScene::schema`]): the lab captures the scene
//! once per snapshot tick, hands each client's acknowledgements to the layer, and sends
//! what it encodes. The plain codec sends every body in full floats every time: the
//! uncompressed baseline. Beside them the lab counts what the same stream would cost as
//! lightyear on bevy_replicon sends it (`snapshot.peer_kbps`).

use crate::config::{RunConfig, SnapshotCodecChoice};
use crate::cpu::CpuTimer;
use crate::metrics::{Histogram, Mean, Metric, Report};
use crate::scene::{LabScene, PlayerId, RawEntity};
use lagless_core::message::FRAGMENT_PAYLOAD_BYTES;
use lagless_core::{ClientId, ClientSession, ProtocolError, ReceivedSnapshot, ServerSession};
use lagless_replication::deadreckoning::{
    CharacterState, DrCodec, DrConfig, DrError, DrLimits, DrMessage, DrReceiver, DrServer, Motion,
};
use lagless_replication::{
    BudgetConfig, ClientConfig, EntityEvent, ReplicationClient, ReplicationError,
    ReplicationServer, ServerConfig,
};
use lagless_wire::{BitReader, BitWriter};
use std::marker::PhantomData;
use std::time::Duration;

/// Bits per entity of Fiedler's uncompressed encoding (source 003): position and linear
/// velocity as 3 floats, orientation as 4, one "interacting" bit.
pub const NAIVE_BITS_PER_ENTITY: u64 = 321;

/// Per-packet UDP/IP header bytes, as `net.*` counts them.
const UDP_IP_HEADER_BYTES: usize = 28;

/// What the server side counted.
#[derive(Debug, Clone, Default)]
pub struct SenderStats {
    /// Snapshots encoded (one per client per snapshot tick).
    pub sent: u64,
    /// Of those, encoded without a baseline.
    pub full: u64,
    /// Payload bits of all of them.
    pub bits: u64,
    /// Entity entries they carried (updates, spawns, despawns; every body with plain).
    pub changed_entities: u64,
    /// Entities in the world at each, summed: what the naive encoding would send.
    pub entities: u64,
    /// Summed age of the baselines used, ticks.
    pub baseline_age_ticks: u64,
    /// Snapshots that needed more than one packet.
    pub fragmented: u64,
    /// Entities that differed from what a client held, summed over snapshots.
    pub candidates: u64,
    /// Of those, held back by the budget.
    pub deferred: u64,
    /// Each client's budget at each snapshot, kbit/s.
    pub budget_kbps: Mean,
    /// CPU time per client encode, µs.
    pub encode_us: Histogram,
    /// CPU time to capture the world once per snapshot tick, µs.
    pub capture_us: Histogram,
    /// Bytes the same snapshots would take as lightyear on bevy_replicon sends them,
    /// packet headers included, summed over clients.
    pub peer_bytes: u64,
    /// Age of the state each client holds of each changed entity, ms: per client, per
    /// snapshot tick, for every entity whose held state differs from the server's, the time
    /// since that state was last true (the later of the tick that carried it and the last
    /// tick the server still had it).
    pub staleness_ms: Histogram,
}

/// The server's snapshot encoder for scene `S`.
pub struct SnapshotSender<S: LabScene> {
    choice: SnapshotCodecChoice,
    setup: S::Setup,
    layer: ReplicationServer,
    tick_hz: u32,
    /// The f32 state last sent per entity id, as bits, for the peer.
    peer_last: Vec<Option<Vec<u32>>>,
    raw: Vec<RawEntity>,
    /// Per client, per entity: the last snapshot tick at which the client held the
    /// server's state.
    last_true: std::collections::BTreeMap<ClientId, Vec<u32>>,
    /// Dead reckoning, when the scene sends its characters so.
    dr: Option<DrSend>,
    dr_stats: DrSendStats,
    /// Counters.
    pub stats: SenderStats,
}

/// The server's dead-reckoning side: the characters' senders and what went out.
///
/// Each client's messages ride in front of its snapshot, as the high-level
/// `lagless_replication::Server` frames them: the batch ([`DrCodec::write_batch`]), then
/// the replication bytes from the next whole byte.
struct DrSend {
    server: DrServer,
    config: DrConfig,
    /// Every Nth snapshot to a client also carries a forged message (0: never).
    forge_every: u32,
    /// Snapshots sent per client, for `forge_every`.
    sent: std::collections::BTreeMap<ClientId, u64>,
}

/// What the dead-reckoning side sent, all clients together.
#[derive(Debug, Clone, Copy, Default)]
pub struct DrSendStats {
    /// Messages handed to clients.
    pub messages: u64,
    /// Bits of the batches (the count and the messages).
    pub bits: u64,
    /// Forged messages slipped in (`--dr-forge`).
    pub forged: u64,
}

/// A forged message, of the `n`th kind in turn (six kinds), looking like `real` (a real character's
/// newest message at `tick`): each is one a receiver must refuse.
fn forge(n: u64, real: Option<DrMessage>, tick: lagless_core::Tick) -> DrMessage {
    let base = real.unwrap_or(DrMessage {
        id: 0,
        tick,
        position: [0.0; 3],
        heading: 0.0,
        motion: Motion::Idle,
    });
    let moving = |speed: f32, interval_ms: u64, lag_ms: u64| Motion::Moving {
        speed,
        interval: std::time::Duration::from_millis(interval_ms),
        lag: std::time::Duration::from_millis(lag_ms),
    };
    match n % 6 {
        // An id nobody spawned.
        0 => DrMessage {
            id: 1 << 30,
            ..base
        },
        // Faster than anyone walks (the codec carries up to 32 m/s, the limit is 20).
        1 => DrMessage {
            motion: moving(31.0, 2000, 0),
            ..base
        },
        // An interval beyond the 10 s limit.
        2 => DrMessage {
            motion: moving(1.0, 10_200, 0),
            ..base
        },
        // A sender lag beyond the 1 s limit.
        3 => DrMessage {
            motion: moving(1.0, 2000, 1_020),
            ..base
        },
        // A tick 5000 ahead (78 s at 64 Hz): the 16-bit wire tick carries it, the
        // receiver refuses it as too far from its own.
        4 => DrMessage {
            tick: lagless_core::Tick(tick.0.wrapping_add(5000)),
            ..base
        },
        // An old tick: stale against what the client already has.
        _ => DrMessage {
            tick: lagless_core::Tick(tick.0.saturating_sub(600)),
            ..base
        },
    }
}

impl<S: LabScene> SnapshotSender<S> {
    /// An encoder for `choice`, for the scene `setup` describes, for `config`'s run.
    pub fn new(choice: SnapshotCodecChoice, setup: S::Setup, config: &RunConfig) -> Self {
        let tick_hz = config.server.tick_hz;
        let snapshot_hz = f64::from(config.snapshot_hz.clamp(1, tick_hz));
        let layer = ReplicationServer::new(
            S::schema(&setup),
            ServerConfig {
                tick_hz,
                snapshot_hz,
                budget: BudgetConfig {
                    max_kbps: config.budget_kbps,
                    ..BudgetConfig::default()
                },
                relevance_distance: config.relevance_m,
                near_boost: config.near_boost,
                ..ServerConfig::default()
            },
        );
        let forge_every = config.walkers.forge_every;
        let dr = S::dead_reckoning(&setup).map(|config| DrSend {
            server: DrServer::new(config.sender),
            config,
            forge_every,
            sent: std::collections::BTreeMap::new(),
        });
        Self {
            choice,
            setup,
            layer,
            tick_hz,
            peer_last: Vec::new(),
            raw: Vec::new(),
            last_true: std::collections::BTreeMap::new(),
            dr,
            dr_stats: DrSendStats::default(),
            stats: SenderStats::default(),
        }
    }

    /// The dead-reckoning settings, when the scene sends characters so.
    pub fn dead_reckoning(&self) -> Option<&DrConfig> {
        self.dr.as_ref().map(|d| &d.config)
    }

    /// What the dead-reckoning side sent (`None` without dead reckoning).
    pub fn dr_stats(&self) -> Option<DrSendStats> {
        self.dr.as_ref().map(|_| self.dr_stats)
    }

    /// The dead-reckoning senders' counters (messages due by trigger), if any.
    pub fn dr_server_stats(&self) -> Option<&lagless_replication::deadreckoning::DrServerStats> {
        self.dr.as_ref().map(|d| d.server.stats())
    }

    /// Feeds every character's true state of `tick` to its sender (every tick; nothing
    /// without dead reckoning).
    pub fn update_characters(
        &mut self,
        now: Duration,
        tick: lagless_core::Tick,
        characters: &[(u32, CharacterState)],
    ) {
        if let Some(dr) = &mut self.dr {
            for &(id, state) in characters {
                dr.server.update(id, now, tick, state);
            }
        }
    }

    /// `snapshot` for client `id`, with its dead-reckoning messages in front (the
    /// snapshot alone without dead reckoning).
    fn frame(
        &mut self,
        id: ClientId,
        tick: lagless_core::Tick,
        snapshot: &[u8],
    ) -> Result<Vec<u8>, SendError> {
        let Some(dr) = &mut self.dr else {
            return Ok(snapshot.to_vec());
        };
        // Only characters the client has spawned (it refuses the others): a spawn the
        // budget held back would otherwise cost the character's first message.
        let layer = &self.layer;
        let mut messages = dr.server.poll_messages(id, |c| layer.client_holds(id, c));
        self.dr_stats.messages += messages.len() as u64;
        let sent = dr.sent.entry(id).or_default();
        *sent += 1;
        let mut codec = dr.config.codec;
        if dr.forge_every > 0 && *sent % u64::from(dr.forge_every) == 0 {
            let real = dr
                .server
                .ids()
                .next()
                .and_then(|c| dr.server.sender(c)?.message());
            messages.push(forge(self.dr_stats.forged, real, tick));
            self.dr_stats.forged += 1;
            // The forger's codec writes what the honest one refuses to: the same bits,
            // wider limits.
            codec.limits = DrLimits {
                max_speed: 32.0,
                max_interval: Duration::from_secs(11),
                max_lag: Duration::from_secs(2),
                ..codec.limits
            };
        }
        let mut bits = BitWriter::new();
        codec.write_batch(&mut bits, &messages)?;
        self.dr_stats.bits += bits.bit_len() as u64;
        bits.write_bytes_aligned(snapshot);
        Ok(bits.into_bytes())
    }

    /// The layer's client settings matching this sender.
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig {
            tick_hz: self.tick_hz,
            ..ClientConfig::default()
        }
    }

    /// Client `id`'s snapshot round trip as its acknowledgements show it (sent to
    /// acknowledged, smoothed): the server's own measurement.
    pub fn rtt(&self, id: ClientId) -> Option<Duration> {
        let secs = self.layer.rtt(id)?;
        Duration::try_from_secs_f64(secs).ok()
    }

    /// What both ends know of the scene.
    pub fn setup(&self) -> &S::Setup {
        &self.setup
    }

    /// Registers a client.
    pub fn add_client(&mut self, id: ClientId) {
        self.layer.add_client(id);
        if let Some(dr) = &mut self.dr {
            dr.server.add_client(id);
        }
    }

    /// Forgets a client that left (its views, budget and staleness record).
    pub fn remove_client(&mut self, id: ClientId) {
        self.layer.remove_client(id);
        self.last_true.remove(&id);
        if let Some(dr) = &mut self.dr {
            dr.server.remove_client(id);
            dr.sent.remove(&id);
        }
    }

    /// Hands each client's newest acknowledgement, as its session has it at `now`, to
    /// the layer (it times round trips from them).
    pub fn acknowledge(&mut self, server: &ServerSession<S::Input>, now: Duration) {
        let ids: Vec<ClientId> = server.clients().collect();
        for id in ids {
            if server.resync_requested(id) {
                // The client refused a snapshot whose view checksum differed.
                self.layer.resync(id);
            } else if let Some(t) = server.snapshot_ack(id) {
                self.layer.acknowledge(id, t, now);
            }
        }
    }

    /// Encodes the scene's current state for every client (each with its player) and
    /// queues it on `server`.
    pub fn send(
        &mut self,
        scene: &S,
        server: &mut ServerSession<S::Input>,
        clients: &[(ClientId, PlayerId)],
        now: Duration,
    ) -> Result<(), SendError> {
        let tick = server.current_tick();
        match self.choice {
            SnapshotCodecChoice::Plain => {
                let (bytes, essential) = scene.plain().ok_or(SendError::NoPlainCodec)?;
                // Counted by `count_peer`, which runs first.
                let entities = self.raw.len();
                for &(id, _) in clients {
                    self.count(bytes.len() * 8, entities, entities, None);
                    let fragmented = bytes.len() > FRAGMENT_PAYLOAD_BYTES;
                    if fragmented && essential.len() <= FRAGMENT_PAYLOAD_BYTES {
                        // The players alone in one packet, so a client can reconcile
                        // its own player whatever becomes of the fragments.
                        server.send_snapshot_with_essential(id, now, &essential, &bytes)?;
                    } else {
                        server.send_snapshot(id, now, &bytes)?;
                    }
                    self.stats.fragmented += u64::from(fragmented);
                }
            }
            SnapshotCodecChoice::Delta => {
                let timer = CpuTimer::start();
                scene.capture(&mut self.layer)?;
                self.stats.capture_us.record(timer.ms() * 1000.0);
                let entities = self.layer.len();
                for &(id, player) in clients {
                    self.layer.set_focus(id, scene.player_position(player));
                    if let Some(own) = S::player_entity(&self.setup, player) {
                        self.layer.set_owned(id, &[own]);
                    }
                    let timer = CpuTimer::start();
                    let encoded = self.layer.encode(id, tick, now)?;
                    self.stats.encode_us.record(timer.ms() * 1000.0);
                    let age = encoded.baseline.map(|b| tick.0 - b.0);
                    self.count(encoded.bits, encoded.entries, entities, age);
                    self.stats.candidates += encoded.candidates as u64;
                    self.stats.deferred += encoded.deferred as u64;
                    if let Some(kbps) = self.layer.budget_kbps(id) {
                        self.stats.budget_kbps.add(kbps);
                    }
                    let mut bytes = self.frame(id, tick, &encoded.bytes)?;
                    if S::EVENTS_DOWN {
                        // The scene's events ride in front, length-prefixed, so the
                        // receiver finds the snapshot after them.
                        let mut w = lagless_wire::Writer::new();
                        w.write_len_prefixed(&scene.events_down(player));
                        let mut framed = w.into_bytes();
                        framed.extend_from_slice(&bytes);
                        bytes = framed;
                    }
                    self.stats.fragmented += u64::from(bytes.len() > FRAGMENT_PAYLOAD_BYTES);
                    server.send_snapshot(id, now, &bytes)?;
                }
            }
        }
        Ok(())
    }

    /// How old client `id`'s view (`client`) is at server tick `tick`: for every entity
    /// whose state it holds differs from the server's, the age of that state.
    pub fn measure_staleness(&mut self, id: ClientId, client: &ReplicationClient, tick: u32) {
        let ms_per_tick = 1000.0 / f64::from(self.tick_hz.max(1));
        let last_true = self.last_true.entry(id).or_default();
        for e in self.layer.ids() {
            let (Some((_, codes)), Some(held)) = (self.layer.codes(e), client.get(e)) else {
                continue;
            };
            let i = e as usize;
            if last_true.len() <= i {
                last_true.resize(i + 1, 0);
            }
            if held.codes[..] == *codes {
                last_true[i] = tick;
            } else {
                let since = last_true[i].max(held.tick.0);
                self.stats
                    .staleness_ms
                    .record(f64::from(tick.saturating_sub(since)) * ms_per_tick);
            }
        }
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

    /// What lightyear on bevy_replicon would send each of `clients` now: every entity whose
    /// f32 state changed in any bit since the last snapshot, as a varint entity id and its
    /// components serialized by postcard (floats at full width, flags a byte each).
    /// Call once per snapshot tick, outside the server's timed work: it is the lab's
    /// measurement, not anything a server does.
    pub fn count_peer(&mut self, scene: &S, clients: usize) {
        let mut raw = std::mem::take(&mut self.raw);
        raw.clear();
        scene.raw(&mut raw);
        let mut bytes = 0usize;
        for e in &raw {
            let bits: Vec<u32> = e
                .floats
                .iter()
                .map(|f| f.to_bits())
                .chain(e.flags.iter().map(|b| u32::from(*b)))
                .collect();
            let slot = e.id as usize;
            if self.peer_last.len() <= slot {
                self.peer_last.resize(slot + 1, None);
            }
            if self.peer_last[slot].as_ref() == Some(&bits) {
                continue;
            }
            self.peer_last[slot] = Some(bits);
            bytes += postcard_len(&e.id);
            bytes += e.floats.iter().map(postcard_len).sum::<usize>();
            bytes += e.flags.iter().map(postcard_len).sum::<usize>();
        }
        self.raw = raw;
        let packets = bytes.div_ceil(FRAGMENT_PAYLOAD_BYTES).max(1);
        self.stats.peer_bytes += ((bytes + packets * UDP_IP_HEADER_BYTES) * clients) as u64;
    }
}

/// Bytes postcard writes for `v`.
fn postcard_len<T: serde::Serialize>(v: &T) -> usize {
    let mut buf = [0u8; 16];
    postcard::to_slice(v, &mut buf).map_or(0, |b| b.len())
}

/// The grid step of the first position a schema declares, m.
fn position_resolution(schema: &lagless_replication::Schema) -> Option<f32> {
    schema
        .kinds()
        .iter()
        .find_map(|k| match k.position_field()?.ty {
            lagless_replication::FieldType::Vector { resolution, .. } => Some(resolution),
            _ => None,
        })
}

/// Why a snapshot could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The session refused it.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The replication layer refused the scene's state.
    #[error(transparent)]
    Layer(#[from] ReplicationError),
    /// The scene has no plain codec.
    #[error("this scene has no plain codec")]
    NoPlainCodec,
    /// A dead-reckoning batch could not be written.
    #[error(transparent)]
    DeadReckoning(#[from] DrError),
}

/// What a client's decoder counted.
#[derive(Debug, Clone, Default)]
pub struct ReceiverStats {
    /// Payloads that failed to decode (malformed).
    pub decode_errors: u64,
    /// Deltas against a baseline the client no longer held.
    pub missing_baseline: u64,
    /// CPU time per decode, µs, including conversion to floats.
    pub decode_us: Histogram,
}

/// A client's snapshot decoder for scene `S`.
pub struct SnapshotReceiver<S: LabScene> {
    choice: SnapshotCodecChoice,
    /// The replication layer's client.
    pub layer: ReplicationClient,
    setup: S::Setup,
    /// Counters.
    pub stats: ReceiverStats,
    /// Dead reckoning, when the scene sends characters so: the receiver that shows them
    /// and the codec.
    pub dr: Option<(DrReceiver, DrCodec)>,
    /// With [`LabScene::EVENTS_DOWN`]: the events in front of each snapshot received,
    /// for the client to take ([`LabScene::events_received`]).
    pub events: Vec<Vec<u8>>,
    scene: PhantomData<fn() -> S>,
}

impl<S: LabScene> SnapshotReceiver<S> {
    /// A decoder for `choice`, matching `sender`.
    pub fn new(choice: SnapshotCodecChoice, sender: &SnapshotSender<S>) -> Self {
        Self {
            choice,
            layer: ReplicationClient::new(S::schema(sender.setup()), sender.client_config()),
            setup: sender.setup().clone(),
            stats: ReceiverStats::default(),
            dr: sender
                .dead_reckoning()
                .map(|c| (DrReceiver::new(c.receiver), c.codec)),
            events: Vec::new(),
            scene: PhantomData,
        }
    }

    /// Decodes `snap`; a snapshot that decodes is acknowledged through `session`.
    /// `None` (counted) when it does not decode, or is older than one decoded already.
    pub fn receive(
        &mut self,
        snap: &ReceivedSnapshot,
        session: &mut ClientSession<S::Input>,
    ) -> Option<S::Known> {
        self.receive_at(snap, session, Duration::ZERO)
    }

    /// [`SnapshotReceiver::receive`] at local time `now`, which the dead-reckoning
    /// receiver times its characters' motion from (scenes with dead reckoning must use
    /// this one).
    pub fn receive_at(
        &mut self,
        snap: &ReceivedSnapshot,
        session: &mut ClientSession<S::Input>,
        now: Duration,
    ) -> Option<S::Known> {
        match self.choice {
            SnapshotCodecChoice::Plain => {
                let decoded = S::decode_plain(&self.setup, &snap.payload);
                if decoded.is_none() {
                    self.stats.decode_errors += 1;
                }
                decoded
            }
            SnapshotCodecChoice::Delta => {
                let timer = CpuTimer::start();
                let mut payload = &snap.payload[..];
                if S::EVENTS_DOWN {
                    let mut r = lagless_wire::Reader::new(payload);
                    let Ok(events) =
                        r.read_len_prefixed(FRAGMENT_PAYLOAD_BYTES * 64, "scene events")
                    else {
                        self.stats.decode_errors += 1;
                        return None;
                    };
                    self.events.push(events.to_vec());
                    payload = r.read_rest();
                }
                // With dead reckoning the messages come first, then the snapshot from the
                // next whole byte; a batch that does not decode loses the packet (the
                // receiver counts it as malformed).
                let (messages, payload) = match &mut self.dr {
                    None => (Vec::new(), payload),
                    Some((dr, codec)) => {
                        let mut bits = BitReader::new(payload);
                        let decoded = dr.decode_batch(snap.tick, codec, &mut bits);
                        let Ok(messages) = decoded.and_then(|m| {
                            bits.align().map_err(DrError::from)?;
                            Ok(m)
                        }) else {
                            self.stats.decode_errors += 1;
                            return None;
                        };
                        (messages, &payload[bits.bit_position() / 8..])
                    }
                };
                let received = self.layer.receive(snap.tick, payload);
                session.set_resync(self.layer.needs_resync());
                // After the snapshot, which spawns the characters these messages may be
                // the first of; refusals (stale ones after reordering, forged ones) are
                // counted by the receiver.
                if let Some((dr, _)) = &mut self.dr {
                    while let Some(event) = self.layer.poll_event() {
                        match event {
                            EntityEvent::Spawned { id, .. } => _ = dr.spawn(id),
                            EntityEvent::Despawned { id, .. } => _ = dr.despawn(id),
                        }
                    }
                    dr.set_rtt(session.rtt());
                    for m in messages {
                        let _ = dr.receive(now, snap.tick, m);
                    }
                }
                match received {
                    Ok(Some(applied)) => {
                        session.acknowledge_snapshot(applied.tick);
                        let plain = S::known(&self.setup, &self.layer, applied.tick);
                        self.stats.decode_us.record(timer.ms() * 1000.0);
                        Some(plain)
                    }
                    Ok(None) => None,
                    Err(ReplicationError::MissingBaseline(_)) => {
                        self.stats.missing_baseline += 1;
                        None
                    }
                    Err(_) => {
                        self.stats.decode_errors += 1;
                        None
                    }
                }
            }
        }
    }
}

/// Adds the `snapshot.*` metrics: LAB.md's plus the codec's own. `down_kbps_mean` is
/// `net.down_kbps_mean`, for the ratio to the naive stream.
pub fn snapshot_metrics<S: LabScene>(
    r: &mut Report,
    config: &RunConfig,
    sender: &SnapshotSender<S>,
    receivers: &[&SnapshotReceiver<S>],
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
    let clients = f64::from(config.clients.max(1));
    let per_client_kbps = |bits: f64| bits / 1000.0 / config.seconds / clients;
    let naive_kbps = per_client_kbps(s.entities as f64 * NAIVE_BITS_PER_ENTITY as f64);
    r.number("snapshot.naive_kbps", Some(naive_kbps));
    r.number(
        "snapshot.naive_ratio",
        down_kbps_mean.filter(|d| *d > 0.0).map(|d| naive_kbps / d),
    );
    let peer_kbps = per_client_kbps(s.peer_bytes as f64 * 8.0);
    r.number("snapshot.peer_kbps", Some(peer_kbps));
    r.number(
        "snapshot.peer_ratio",
        down_kbps_mean.filter(|d| *d > 0.0).map(|d| peer_kbps / d),
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
            position_resolution(sender.layer.schema()).map(|m| f64::from(m) * 1000.0),
        );
        r.number("snapshot.budget_kbps_mean", s.budget_kbps.mean());
        r.number("snapshot.deferred_pct", per(s.deferred * 100, s.candidates));
        r.number("snapshot.staleness_ms_p99", s.staleness_ms.percentile(99.0));
        // The consistency check every snapshot carries: must be 0.
        r.set(
            "replication.view_mismatches",
            Metric::Count(
                receivers
                    .iter()
                    .map(|c| c.layer.stats().view_mismatches)
                    .sum(),
            ),
        );
    }
    r.number("snapshot.capture_us_p50", s.capture_us.percentile(50.0));
    r.number("snapshot.encode_us_p50", s.encode_us.percentile(50.0));
    r.number("snapshot.encode_us_p99", s.encode_us.percentile(99.0));
    let mut decode = Histogram::default();
    for c in receivers {
        decode.merge(&c.stats.decode_us);
    }
    r.number("snapshot.decode_us_p50", decode.percentile(50.0));
    r.set(
        "snapshot.missing_baseline",
        Metric::Count(receivers.iter().map(|c| c.stats.missing_baseline).sum()),
    );
}
