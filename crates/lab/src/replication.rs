//! Snapshot replication in the lab: what the server sends each client.
//!
//! The server is the public [`Server`] a game runs, with the scene's declaration
//! ([`LabScene::schema`]): the lab captures the scene into it once per snapshot tick and
//! lets it send. Beside it the lab counts what the same stream would cost as baselines
//! nobody sends: the scene's plain encoding, every body in full floats every time
//! (`snapshot.plain_kbps`, the uncompressed baseline), and lightyear on bevy_replicon
//! (`snapshot.peer_kbps`).

use crate::config::RunConfig;
use crate::cpu::CpuTimer;
use crate::metrics::{Histogram, Mean, Metric, Report};
use crate::runner::RunError;
use crate::scene::{LabScene, PlayerId, RawEntity};
use lagless_core::message::FRAGMENT_PAYLOAD_BYTES;
use lagless_core::{ClientId, ProtocolError};
use lagless_replication::deadreckoning::{CharacterState, DrConfig};
use lagless_replication::{
    BudgetConfig, ClientReplicationStats, DepartedClient, NetConfig, ReplicationClient,
    ReplicationConfig, ReplicationError, ReplicationServer, Server, SnapshotCounters,
};
use std::time::Duration;

/// Bits per entity of Fiedler's uncompressed encoding ("Snapshot Compression"): position and linear
/// velocity as 3 floats, orientation as 4, one "interacting" bit.
pub const NAIVE_BITS_PER_ENTITY: u64 = 321;

/// Per-packet UDP/IP header bytes, as `net.*` counts them.
const UDP_IP_HEADER_BYTES: usize = 28;

/// What the lab counted on the server side, beside what the server itself counts
/// ([`SnapshotSender::replication_totals`], [`SnapshotSender::counters`]).
#[derive(Debug, Clone, Default)]
pub struct SenderStats {
    /// Bytes the uncompressed baseline would have sent (the scene's plain encoding of
    /// every body, to every client at every snapshot tick), with the UDP/IP header of
    /// each fragment.
    pub plain_bytes: u64,
    /// Entities in the world at each snapshot, summed over snapshots and clients: what
    /// the naive encoding would send.
    pub entities: u64,
    /// Each client's budget at each snapshot, kbit/s.
    pub budget_kbps: Mean,
    /// The first client's budget over time: (seconds, kbit/s), one point a tenth of a
    /// second at most (`--timeline`, `budget.recover_ms_max`).
    pub budget_series: Vec<(f64, f64)>,
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
    /// CPU per snapshot tick of the delta codec's send, capture included, µs.
    pub send_us: Histogram,
}

/// The lab's side of a game's server for scene `S`: it builds the public
/// [`Server`] a game would run, captures the scene into it once per snapshot tick, and
/// measures what went out (the peer's stream beside it, and how stale each client's view
/// is).
pub struct SnapshotSender<S: LabScene> {
    setup: S::Setup,
    tick_hz: u32,
    /// The f32 state last sent per entity id, as bits, for the peer.
    peer_last: Vec<Option<Vec<u32>>>,
    raw: Vec<RawEntity>,
    /// Per client, per entity: the last snapshot tick at which the client held the
    /// server's state.
    last_true: std::collections::BTreeMap<ClientId, Vec<u32>>,
    /// Dead reckoning, when the scene sends its characters so.
    dr: Option<DrConfig>,
    /// What the server counted of clients that left, added in at the end.
    departed: Departed,
    /// Counters.
    pub stats: SenderStats,
    /// bevy_replicon replicating the same world (`--features replicon`).
    #[cfg(feature = "replicon")]
    pub replicon: Option<crate::replicon_peer::RepliconPeer>,
}

/// What the server counted of the clients that left a run.
#[derive(Debug, Clone, Copy, Default)]
struct Departed {
    replication: ReplicationTotals,
    counters: SnapshotCounters,
}

/// The replication layer's counters, summed over clients.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplicationTotals {
    /// Snapshots encoded.
    pub snapshots: u64,
    /// Of those, against no baseline.
    pub full: u64,
    /// Their payload bits.
    pub bits: u64,
    /// Entity entries they carried.
    pub entries: u64,
    /// Summed age of the baselines used, ticks.
    pub baseline_age_ticks: u64,
    /// Entities that differed from what a client held.
    pub candidates: u64,
    /// Of those, held back by the budget.
    pub deferred: u64,
}

impl ReplicationTotals {
    fn add(&mut self, s: &ClientReplicationStats) {
        self.snapshots += s.snapshots;
        self.full += s.full;
        self.bits += s.bits;
        self.entries += s.sent;
        self.baseline_age_ticks += s.baseline_age_ticks;
        self.candidates += s.candidates;
        self.deferred += s.deferred;
    }
}

fn add_counters(total: &mut SnapshotCounters, c: &SnapshotCounters) {
    total.snapshots += c.snapshots;
    total.fragmented += c.fragmented;
    total.essential += c.essential;
    total.event_bytes += c.event_bytes;
    total.dead_reckoning_messages += c.dead_reckoning_messages;
    total.dead_reckoning_bits += c.dead_reckoning_bits;
}

/// What the dead-reckoning side sent, all clients together.
#[derive(Debug, Clone, Copy, Default)]
pub struct DrSendStats {
    /// Messages handed to clients.
    pub messages: u64,
    /// Bits of the batches (the count and the messages).
    pub bits: u64,
}

/// The settings of the public server and clients of a run of scene `S` with `setup`.
pub fn net_config<S: LabScene>(setup: &S::Setup, config: &RunConfig) -> NetConfig {
    let tick_hz = config.server.tick_hz;
    let mut net = NetConfig::new(tick_hz);
    net.snapshot_hz = config.snapshot_hz.clamp(1, tick_hz);
    net.budget = BudgetConfig {
        max_kbps: config.budget_kbps,
        ..BudgetConfig::default()
    };
    net.replication = ReplicationConfig {
        relevance_distance: config.relevance_m,
        near_boost: config.near_boost,
        threads: config.threads.max(1),
        ..ReplicationConfig::default()
    };
    net.server_session = config.server.clone();
    net.client_session = config.client.clone();
    net.dead_reckoning = S::dead_reckoning(setup);
    net.snapshot_events = S::EVENTS_DOWN;
    net
}

impl<S: LabScene> SnapshotSender<S> {
    /// The game's server for `config`'s run of the scene `setup` describes, and the
    /// lab's sender beside it.
    pub fn new(setup: S::Setup, config: &RunConfig) -> Result<(Self, Server<S::Input>), RunError> {
        let net = net_config::<S>(&setup, config);
        let mut server =
            Server::new(S::schema(&setup), &net).map_err(|e| RunError::Invalid(e.to_string()))?;
        // Each client's interest follows its player: the sender sets the focus.
        server.set_cells(config.cells);
        let sender = Self {
            dr: net.dead_reckoning,
            setup,
            tick_hz: config.server.tick_hz,
            peer_last: Vec::new(),
            raw: Vec::new(),
            last_true: std::collections::BTreeMap::new(),
            departed: Departed::default(),
            stats: SenderStats::default(),
            #[cfg(feature = "replicon")]
            replicon: None,
        };
        Ok((sender, server))
    }

    /// The dead-reckoning settings, when the scene sends characters so.
    pub fn dead_reckoning(&self) -> Option<&DrConfig> {
        self.dr.as_ref()
    }

    /// What the dead-reckoning side sent (`None` without dead reckoning).
    pub fn dr_stats(&self, server: &Server<S::Input>) -> Option<DrSendStats> {
        self.dr.as_ref()?;
        let c = self.counters(server);
        Some(DrSendStats {
            messages: c.dead_reckoning_messages,
            bits: c.dead_reckoning_bits,
        })
    }

    /// What went out with every client's snapshots, those that left included.
    pub fn counters(&self, server: &Server<S::Input>) -> SnapshotCounters {
        let mut total = self.departed.counters;
        for id in server.session().clients() {
            if let Some(c) = server.snapshot_counters(id) {
                add_counters(&mut total, c);
            }
        }
        total
    }

    /// The replication counters of every client, those that left included.
    pub fn replication_totals(&self, server: &Server<S::Input>) -> ReplicationTotals {
        let mut total = self.departed.replication;
        for id in server.session().clients() {
            if let Some(s) = server.replication_stats(id) {
                total.add(&s);
            }
        }
        total
    }

    /// Feeds every character's true state after this tick's step to the server (every
    /// tick; nothing without dead reckoning). A state the codec refuses stays unsent.
    pub fn update_characters(
        &mut self,
        server: &mut Server<S::Input>,
        characters: &[(u32, CharacterState)],
    ) {
        if self.dr.is_some() {
            for &(id, state) in characters {
                let _ = server.update_character(id, state);
            }
        }
    }

    /// What both ends know of the scene.
    pub fn setup(&self) -> &S::Setup {
        &self.setup
    }

    /// Forgets a client that left (its views, budget and staleness record), keeping
    /// what the server counted of it.
    pub fn remove_client(&mut self, server: &mut Server<S::Input>, id: ClientId) {
        if let Some(departed) = server.disconnect(id) {
            self.client_left(id, &departed);
        }
    }

    /// Keeps the counters of a client that left the game's server (a host such as
    /// `lagless_transport::GameServer` disconnected it and handed them over).
    pub fn client_left(&mut self, id: ClientId, departed: &DepartedClient) {
        self.departed.replication.add(&departed.replication);
        add_counters(&mut self.departed.counters, &departed.snapshots);
        self.last_true.remove(&id);
    }

    /// Sends every client (each with its player) its snapshot of the scene's current
    /// state through the game's server.
    pub fn send(
        &mut self,
        scene: &S,
        server: &mut Server<S::Input>,
        clients: &[(ClientId, PlayerId)],
        now: Duration,
    ) -> Result<(), SendError> {
        let send = CpuTimer::start();
        let timer = CpuTimer::start();
        scene.capture(server.replication_mut())?;
        self.stats.capture_us.record(timer.ms() * 1000.0);
        let entities = server.replication().len() as u64;
        for &(id, player) in clients {
            server.set_focus(id, scene.player_position(player));
            if let Some(own) = S::player_entity(&self.setup, player) {
                server.set_owned(id, &[own]);
            }
            if S::EVENTS_DOWN {
                server.set_snapshot_events(id, scene.events_down(player))?;
            }
            self.stats.entities += entities;
        }
        let timer = CpuTimer::start();
        server.send_snapshots(now)?;
        // The server encodes every client in one call: each is given the mean.
        let per_client = timer.ms() * 1000.0 / clients.len().max(1) as f64;
        for (i, &(id, _)) in clients.iter().enumerate() {
            self.stats.encode_us.record(per_client);
            if let Some(kbps) = server.replication().budget_kbps(id) {
                self.stats.budget_kbps.add(kbps);
                let at = now.as_secs_f64();
                let due = self
                    .stats
                    .budget_series
                    .last()
                    .is_none_or(|(t, _)| at - t >= 0.1);
                if i == 0 && due {
                    self.stats.budget_series.push((at, kbps));
                }
            }
        }
        self.stats.send_us.record(send.ms() * 1000.0);
        Ok(())
    }

    /// How old client `id`'s view (`client`) is at server tick `tick`: for every entity
    /// whose state it holds differs from `server`'s, the age of that state.
    pub fn measure_staleness(
        &mut self,
        server: &ReplicationServer,
        id: ClientId,
        client: &ReplicationClient,
        tick: u32,
    ) {
        let ms_per_tick = 1000.0 / f64::from(self.tick_hz.max(1));
        let last_true = self.last_true.entry(id).or_default();
        for e in server.ids() {
            let (Some((_, codes)), Some(held)) = (server.codes(e), client.get(e)) else {
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

    /// What lightyear on bevy_replicon would send each of `clients` now: every entity whose
    /// f32 state changed in any bit since the last snapshot, as a varint entity id and its
    /// components serialized by postcard (floats at full width, flags a byte each).
    /// The uncompressed baseline is counted beside it (`count_plain`).
    /// Call once per snapshot tick, outside the server's timed work: it is the lab's
    /// measurement, not anything a server does.
    pub fn count_peer(&mut self, scene: &S, clients: usize) {
        self.count_plain(scene, clients);
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
        #[cfg(feature = "replicon")]
        self.replicon
            .get_or_insert_with(|| crate::replicon_peer::RepliconPeer::new(clients))
            .replicate(&raw);
        self.raw = raw;
        let packets = bytes.div_ceil(FRAGMENT_PAYLOAD_BYTES).max(1);
        self.stats.peer_bytes += ((bytes + packets * UDP_IP_HEADER_BYTES) * clients) as u64;
    }
}

impl<S: LabScene> SnapshotSender<S> {
    /// What the uncompressed baseline would send each of `clients` now: the scene's
    /// plain encoding of every body in full floats ([`LabScene::plain`]), in as many
    /// fragments as it takes, and, when it takes more than one, the players alone in one
    /// more packet (the essential part a client reconciles with whatever becomes of the
    /// fragments), each packet with its UDP/IP header. Nothing for a scene without one.
    fn count_plain(&mut self, scene: &S, clients: usize) {
        let Some((bytes, essential)) = scene.plain() else {
            return;
        };
        let fragments = bytes.len().div_ceil(FRAGMENT_PAYLOAD_BYTES).max(1);
        let mut size = bytes.len() + fragments * UDP_IP_HEADER_BYTES;
        if fragments > 1 && essential.len() <= FRAGMENT_PAYLOAD_BYTES {
            size += essential.len() + UDP_IP_HEADER_BYTES;
        }
        self.stats.plain_bytes += (size * clients) as u64;
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
    /// The game's server refused a call.
    #[error(transparent)]
    Server(#[from] lagless_replication::NetError),
}

/// Adds the `snapshot.*` metrics: `docs/metrics.md`'s plus the codec's own. `down_kbps_mean` is
/// `net.down_kbps_mean`, for the ratio to the naive stream.
pub fn snapshot_metrics<S: LabScene>(
    r: &mut Report,
    config: &RunConfig,
    sender: &SnapshotSender<S>,
    server: &Server<S::Input>,
    decoders: &[(u64, u64, &Histogram)],
    down_kbps_mean: Option<f64>,
) {
    let s = &sender.stats;
    let t = sender.replication_totals(server);
    let fragmented = sender.counters(server).fragmented;
    let per = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    r.number("snapshot.bits_per_changed_entity", per(t.bits, t.entries));
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
    if s.plain_bytes > 0 {
        let plain_kbps = per_client_kbps(s.plain_bytes as f64 * 8.0);
        r.number("snapshot.plain_kbps", Some(plain_kbps));
        r.number(
            "snapshot.plain_ratio",
            down_kbps_mean.filter(|d| *d > 0.0).map(|d| plain_kbps / d),
        );
    }
    r.number("snapshot.send_us_p50", s.send_us.percentile(50.0));
    r.number("snapshot.send_us_p99", s.send_us.percentile(99.0));
    #[cfg(feature = "replicon")]
    if let Some(replicon) = &sender.replicon {
        replicon.report(r, per_client_kbps, down_kbps_mean);
    }
    r.number("snapshot.bytes_mean", per(t.bits, t.snapshots * 8));
    r.number(
        "snapshot.changed_entities_mean",
        per(t.entries, t.snapshots),
    );
    r.number("snapshot.full_pct", per(t.full * 100, t.snapshots));
    r.number(
        "snapshot.fragmented_pct",
        per(fragmented * 100, t.snapshots),
    );
    let essential = sender.counters(server).essential;
    r.set("snapshot.essential_sent", Metric::Count(essential));
    r.number(
        "snapshot.baseline_age_ticks_mean",
        per(t.baseline_age_ticks, t.snapshots - t.full),
    );
    r.number(
        "snapshot.position_resolution_mm",
        position_resolution(server.replication().schema()).map(|m| f64::from(m) * 1000.0),
    );
    r.number("snapshot.budget_kbps_mean", s.budget_kbps.mean());
    r.number("snapshot.deferred_pct", per(t.deferred * 100, t.candidates));
    r.number("snapshot.staleness_ms_p99", s.staleness_ms.percentile(99.0));
    // The consistency check every snapshot carries: must be 0.
    r.set(
        "replication.view_mismatches",
        Metric::Count(decoders.iter().map(|(v, _, _)| v).sum()),
    );
    r.number("snapshot.capture_us_p50", s.capture_us.percentile(50.0));
    r.number("snapshot.encode_us_p50", s.encode_us.percentile(50.0));
    // The same figure under the server's name, as `lagless bench-snapshot` prints it.
    r.number(
        "server.encode_us_per_client_p50",
        s.encode_us.percentile(50.0),
    );
    r.number("snapshot.encode_us_p99", s.encode_us.percentile(99.0));
    let mut decode = Histogram::default();
    for (_, _, d) in decoders {
        decode.merge(d);
    }
    r.number("snapshot.decode_us_p50", decode.percentile(50.0));
    r.set(
        "snapshot.missing_baseline",
        Metric::Count(decoders.iter().map(|(_, m, _)| m).sum()),
    );
}
