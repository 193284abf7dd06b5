//! The server side: the authoritative entities, and one snapshot per client per send.
//!
//! The game spawns, updates and despawns entities as its world changes; an update that
//! quantizes to the codes the entity already has changes nothing. For each client the
//! server keeps the view the client acknowledged last and, per snapshot in flight, what
//! it changed (a view is rebuilt for the one acknowledged). A snapshot lists only entities that differ from the acknowledged view, each
//! as a delta against it, so an unchanged entity costs nothing and a lost snapshot
//! costs nothing either: the next one simply carries what is still different.
//!
//! # Budget and priorities
//! Each client has a byte budget per snapshot ([`BudgetController`]). Every entity that
//! differs from what the client holds gains priority each tick it waits: its kind's
//! priority × its relevance to the client × (1 + how wrong the client shows it, in
//! [`ServerConfig::error_tolerance`]s) (Fiedler's "State Synchronization" priority
//! accumulator; Unity Netcode for Entities' importance scaling). A snapshot takes the
//! highest until the budget is spent; the rest keep climbing.
//!
//! * **Relevance** is by default how near the entity is to the client's focus
//!   ([`ReplicationServer::set_focus`]): it halves at [`ServerConfig::relevance_distance`],
//!   and within [`ServerConfig::near_distance`] it is [`ServerConfig::near_boost`] times
//!   more, so what the player touches goes before the rest of a busy world.
//! * **How wrong** is the distance between where the client shows the entity, its last
//!   state carried on by its velocity as [`crate::ReplicationClient::values_at`] does, and
//!   where it is, plus the velocity's error over that carrying time. A body moving as the
//!   client predicts waits; one that hit something goes. With 16 players stirring 900
//!   cubes at 256 kbit/s this took the error of every interpolated cube (p99) from 73 to
//!   50 cm, and within 5 m of the player from 25 to 3 cm; a body moving evenly now waits
//!   longer (staleness p99 1.7 s to 2.6 s), since the client shows it right meanwhile.
//!
//! Despawns always go, and so does an entity the newest snapshot in flight already
//! carries a newer state of (the client shows the newest snapshot it decoded; leaving
//! such an entity out would take it back to the acknowledged state): once an update is
//! sent, it is sent again until acknowledged, as without a budget. A relevance of 0 (a
//! game's own [`ReplicationServer::set_relevance`]) keeps an entity from that client
//! altogether: interest management.
//!
//! # Shared work
//! The same entity's delta against the same baseline state at the same age is encoded
//! once per tick and copied into every snapshot that needs it.
//!
//! # Cost per client
//! Under a budget most changed entities wait many snapshots. The work per client per
//! tick follows what changes, not the world: only entities marked since they last
//! matched what the client holds are visited (in id order, so each client's arrays are
//! read front to back), and the acknowledged view changes in place. `lagless
//! bench-snapshot --clients 64` measures it against the physics step.

mod store;
mod views;

use crate::budget::{BudgetConfig, BudgetController, BudgetStats};
use crate::error::ReplicationError;
use crate::field::{self, Motion};
use crate::schema::{KindId, Schema};
use crate::snapshot::{self, Change, Limits};
use crate::state::StateWriter;
use crate::view::{Entry, View};
use lagless_core::Tick;
use lagless_wire::{BitWriter, var_u32_bits};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use store::{Live, Store};
use views::{InFlight, Views};

/// std's map with a faster hash: the keys are the server's own ids and versions.
type HashMap<K, V> = foldhash::HashMap<K, V>;

/// A client, as the game names it.
pub type ClientKey = u64;

/// Server settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Simulation ticks per second (positions are predicted from velocities over ticks).
    pub tick_hz: u32,
    /// Snapshots sent per second to each client, to turn the budget into bits.
    pub snapshot_hz: f64,
    /// The per-client budget.
    pub budget: BudgetConfig,
    /// Snapshots in flight remembered per client (their views): acknowledgements of older
    /// ones are ignored. Bounds memory whatever a client acknowledges.
    pub max_in_flight: usize,
    /// Entity counts and ids.
    pub limits: Limits,
    /// Largest snapshot payload, bytes, budget or not.
    pub max_snapshot_bytes: usize,
    /// Distance at which the default relevance halves, in the position field's units.
    pub relevance_distance: f32,
    /// Within this distance of the client's focus the default relevance is multiplied by
    /// [`Self::near_boost`]: what the player looks at and collides with goes before the
    /// rest of the world whenever the budget is short. In the position field's units.
    pub near_distance: f32,
    /// See [`Self::near_distance`]; 1 turns the near field off.
    pub near_boost: f32,
    /// The error, in the position field's units, that doubles how fast a waiting entity
    /// gains priority: the distance between where the client shows it (its last state
    /// carried on by its velocity, as [`crate::ReplicationClient::values_at`] does) and
    /// where it is. A body moving as the client predicts waits; one that hit something
    /// goes. 0 leaves error out (priority then grows with waiting alone).
    pub error_tolerance: f32,
    /// How long clients carry a held-back entity on by its velocity, s: the `max_secs`
    /// the game passes to [`crate::ReplicationClient::values_at`] and
    /// [`crate::ReplicationClient::read_all_at`]. The server weighs errors with it.
    pub dead_reckoning_secs: f32,
    /// Bytes each packet costs on the link beyond the snapshot payload (the session's
    /// header and UDP/IP's), taken off the budget so the budget is what the link carries.
    pub packet_overhead_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            tick_hz: 64,
            snapshot_hz: 64.0,
            budget: BudgetConfig::default(),
            max_in_flight: 256,
            limits: Limits::default(),
            max_snapshot_bytes: 60 * 1024,
            relevance_distance: 10.0,
            near_distance: 6.0,
            near_boost: 8.0,
            error_tolerance: 0.05,
            dead_reckoning_secs: 0.25,
            packet_overhead_bytes: 60,
        }
    }
}

/// One client's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientReplicationStats {
    /// Snapshots encoded.
    pub snapshots: u64,
    /// Of those, without a baseline.
    pub full: u64,
    /// Payload bits.
    pub bits: u64,
    /// Entities that differed from what the client held, summed over snapshots.
    pub candidates: u64,
    /// Of those, held back by the budget.
    pub deferred: u64,
    /// Entries sent (updates, spawns, despawns).
    pub sent: u64,
    /// Summed baseline age, ticks, over snapshots with one.
    pub baseline_age_ticks: u64,
    /// Acknowledgements of snapshots no longer remembered (ignored).
    pub stale_acks: u64,
    /// Times every snapshot in flight went unacknowledged (a long outage, or a client
    /// that lost its baselines): the server started again from nothing.
    pub resyncs: u64,
    /// Budget counters.
    pub budget: BudgetStats,
}

struct ClientState {
    /// What it acknowledged, and what is in flight.
    views: Views,
    priority: Vec<f32>,
    last_tick: Option<Tick>,
    focus: Option<[f32; 3]>,
    budget: BudgetController,
    limited: bool,
    /// Entities that may differ from what the client holds.
    pending: Pending,
    /// Per entity, what the client shows of it as the newest send and the acknowledged view say,
    /// worked out once and kept until an acknowledgement changes either: with a crowded
    /// world nearly every entity waits in every snapshot, and looking each up again for
    /// every client every tick was most of the encoding work.
    shown: Vec<Shown>,
    /// Encodes left before every entity is looked at again (with a game's relevance).
    scan_countdown: u32,
    /// Entities the client predicts, ascending: sent ahead of every priority.
    owned: Vec<u32>,
    /// Emptied change lists of acknowledged snapshots, for the next ones: memory the
    /// cache still holds, where a fresh allocation per snapshot missed it on every write.
    spare: Vec<Vec<(u32, Option<Entry>)>>,
    /// Bits sent beside snapshots since the last one ([`ReplicationServer::charge`]).
    charged: u64,
    stats: ClientReplicationStats,
}

/// With a game's relevance rule, every entity is looked at again this often (encodes):
/// its relevance may change while the entity does not.
const RESCAN_EVERY: u32 = 16;

/// Which state of which incarnation of an entity: equal ids mean equal codes (a new
/// version is taken only when the codes change).
#[derive(Debug, Clone, Copy, PartialEq)]
struct StateId {
    generation: u32,
    version: u64,
    /// The low half of [`codes_hash`] of its codes: a state that changed and changed back
    /// has a new version but the same codes, and only when the hashes agree are the codes
    /// compared.
    hash: u32,
    /// Its position, for how far the entity has moved since.
    position: Option<[f32; 3]>,
    /// Its position's velocity (zero if none): the client carries the position on by it.
    velocity: [f32; 3],
}

/// What a client shows of an entity, and what its acknowledged view holds: one record
/// per client and entity, read in id order by every encode and written for each entity a
/// snapshot carries. The newest state sent since the acknowledged view lives here too
/// (`in_flight`): it is the only send that decides what the client shows, since an older
/// one either arrived before it or went before the acknowledged view, which covers it.
/// (Kept apart, as a list per entity, it cost the encoder its worst cache misses.)
///
/// Laid out flat (56 bytes against 80 with `Option`s and the codes), since every encode
/// streams one per waiting entity and, with the caches cold, that stream was the largest
/// single cost of looking at the world. The codes a snapshot in flight carried are found
/// in that snapshot ([`sent_codes`]): they are needed only when an entity changed back.
#[derive(Debug, Clone, Copy, Default)]
struct Shown {
    /// Of the state shown (see [`StateId`]).
    version: u64,
    hash: u32,
    generation: u32,
    /// NaN: none.
    position: [f32; 3],
    velocity: [f32; 3],
    /// The generation the acknowledged view holds, if `has_held`, which decides whether
    /// an update can be a delta.
    held: u32,
    /// The tick of the snapshot that carried the state shown.
    since: Tick,
    /// False: not worked out since the last change of the acknowledged view.
    known: bool,
    /// A snapshot newer than the acknowledged view carried the state shown, and is
    /// assumed to have arrived until an acknowledgement says otherwise.
    in_flight: bool,
    /// The client shows a state (false: nothing).
    has_state: bool,
    has_held: bool,
}

impl Shown {
    /// The state the client shows (`None`: nothing).
    fn state(&self) -> Option<StateId> {
        self.has_state.then(|| StateId {
            generation: self.generation,
            version: self.version,
            hash: self.hash,
            position: (!self.position[0].is_nan()).then_some(self.position),
            velocity: self.velocity,
        })
    }

    fn set_state(&mut self, state: Option<StateId>) {
        self.has_state = state.is_some();
        let s = state.unwrap_or(StateId {
            generation: 0,
            version: 0,
            hash: 0,
            position: None,
            velocity: [0.0; 3],
        });
        self.generation = s.generation;
        self.version = s.version;
        self.hash = s.hash;
        self.position = s.position.unwrap_or([f32::NAN; 3]);
        self.velocity = s.velocity;
    }

    /// The generation the acknowledged view holds (`None`: nothing).
    fn held(&self) -> Option<u32> {
        self.has_held.then_some(self.held)
    }

    fn set_held(&mut self, held: Option<u32>) {
        self.has_held = held.is_some();
        self.held = held.unwrap_or(0);
    }
}

/// A set of entity ids, as bits: taken in ascending order, so what is looked up per
/// entity (each client's arrays) is read front to back rather than all over memory.
#[derive(Default)]
struct Pending {
    words: Vec<u64>,
}

impl Pending {
    fn mark(&mut self, id: u32) {
        let w = id as usize / 64;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (id % 64);
    }

    fn contains(&self, id: u32) -> bool {
        self.words
            .get(id as usize / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn remove(&mut self, id: u32) {
        if let Some(w) = self.words.get_mut(id as usize / 64) {
            *w &= !(1 << (id % 64));
        }
    }

    /// Empties the set into `out`, ascending.
    fn drain_into(&mut self, out: &mut Vec<u32>) {
        for (w, word) in self.words.iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                out.push(w as u32 * 64 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
    }
}

/// What [`ReplicationServer::encode`] made for one client.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedSnapshot {
    /// The payload.
    pub bytes: Vec<u8>,
    /// Bits before padding.
    pub bits: usize,
    /// The baseline used, `None` for none.
    pub baseline: Option<Tick>,
    /// Entries sent.
    pub entries: usize,
    /// Entities that differed from the baseline.
    pub candidates: usize,
    /// Of those, held back by the budget.
    pub deferred: usize,
    /// Entries sent again only because no acknowledgement has said an earlier send of
    /// the same state arrived (each snapshot decodes against the acknowledged view).
    pub resent: usize,
    /// The budget, bits, if any.
    pub budget_bits: Option<usize>,
}

/// A game's relevance rule: `(client, entity id, kind, codes) -> weight`; 0 keeps the
/// entity from the client.
pub type RelevanceFn = dyn Fn(ClientKey, u32, KindId, &[i32]) -> f32 + Send + Sync;

/// The server's side of replication. See the module docs.
pub struct ReplicationServer {
    schema: Arc<Schema>,
    config: ServerConfig,
    store: Store,
    clients: BTreeMap<ClientKey, ClientState>,
    cache: HashMap<(u32, u64, u64, u32), BitWriter>,
    /// Emptied body writers, for the next tick's cache.
    pool: Vec<BitWriter>,
    scratch: Scratch,
    cache_tick: Option<Tick>,
    relevance: Option<Box<RelevanceFn>>,
}

/// A candidate entry while a snapshot is built.
struct Candidate {
    id: u32,
    change: Change,
    priority: f32,
    /// The client predicts it ([`ReplicationServer::set_owned`]).
    owned: bool,
    /// Sent again only because no acknowledgement has said the newest send arrived: not
    /// a changed entity (counted apart, as [`EncodedSnapshot::resent`]), and not deferred
    /// when left out.
    resend: bool,
}

/// What looking at an entity for a client found.
enum Look {
    /// Despawned, or irrelevant to the client: a despawn if the client may show it.
    Gone { shown: bool, keep: bool },
    /// The client shows its state.
    Current { keep: bool },
    /// Differs from what the client shows; waiting gains `rate` per tick. A `resend`
    /// differs only from the acknowledged view: the newest send in flight carries it.
    Waiting {
        change: Change,
        rate: f32,
        resend: bool,
    },
}

impl ReplicationServer {
    /// A server replicating `schema`'s kinds.
    pub fn new(schema: Schema, config: ServerConfig) -> Self {
        Self {
            schema: Arc::new(schema),
            config,
            store: Store::default(),
            clients: BTreeMap::new(),
            cache: HashMap::default(),
            pool: Vec::new(),
            scratch: Scratch::default(),
            cache_tick: None,
            relevance: None,
        }
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The settings.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Live entities.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// True when no entity lives.
    pub fn is_empty(&self) -> bool {
        self.store.len() == 0
    }

    /// Spawns an entity of `kind` at the lowest free id, its state written by `write`.
    pub fn spawn(
        &mut self,
        kind: KindId,
        write: impl FnOnce(&mut StateWriter),
    ) -> Result<u32, ReplicationError> {
        let id = self.store.free_id();
        self.spawn_with_id(id, kind, write)?;
        Ok(id)
    }

    /// Spawns an entity of `kind` under `id` (which must be free and within the limits).
    pub fn spawn_with_id(
        &mut self,
        id: u32,
        kind: KindId,
        write: impl FnOnce(&mut StateWriter),
    ) -> Result<(), ReplicationError> {
        self.store
            .spawn(&self.schema, &self.config.limits, id, kind, write)?;
        self.touch(id);
        Ok(())
    }

    /// Sets entity `id`'s state. Returns whether its codes changed.
    pub fn update(
        &mut self,
        id: u32,
        write: impl FnOnce(&mut StateWriter),
    ) -> Result<bool, ReplicationError> {
        let changed = self.store.update(&self.schema, id, write)?;
        if changed {
            self.touch(id);
        }
        Ok(changed)
    }

    /// Sets entity `id`'s state, spawning it as `kind` if it does not live: what a game
    /// calls for each entity when it copies its world into the layer every tick. Returns
    /// whether anything changed (a spawn, or new codes). An entity living under another
    /// kind is updated as its own kind.
    pub fn put(
        &mut self,
        id: u32,
        kind: KindId,
        write: impl FnOnce(&mut StateWriter),
    ) -> Result<bool, ReplicationError> {
        if self.codes(id).is_some() {
            self.update(id, write)
        } else {
            self.spawn_with_id(id, kind, write).map(|()| true)
        }
    }

    /// Removes entity `id`; clients are told.
    pub fn despawn(&mut self, id: u32) -> Result<(), ReplicationError> {
        self.store.despawn(id)?;
        self.touch(id);
        Ok(())
    }

    /// The codes of entity `id`, and its kind.
    pub fn codes(&self, id: u32) -> Option<(KindId, &[i32])> {
        let e = self.store.get(id)?;
        Some((e.kind, &e.codes))
    }

    /// True if `client` acknowledged a snapshot whose view holds entity `id`: the client
    /// has it spawned. A game that sends an entity's motion some other way (dead
    /// reckoning, `crate::deadreckoning`) waits for this, since a receiver refuses
    /// messages for ids it never spawned, and a spawn the budget held back arrives
    /// snapshots after the first message would.
    pub fn client_holds(&self, client: ClientKey, id: u32) -> bool {
        self.clients
            .get(&client)
            .and_then(|c| c.views.acked.as_ref())
            .is_some_and(|a| a.view.get(id).is_some())
    }

    /// Live entity ids, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.store.ids()
    }

    /// A snapshot of `tick` that stands alone: entities `ids` (ascending; ids not live
    /// are left out) in full, against nothing and without a member list, so a fresh
    /// [`crate::ReplicationClient`] decodes it whatever it held before. Nothing about any
    /// client's views changes: it is the essential part a client reconciles its own
    /// entities with when the fragments of the full snapshot are lost
    /// ([`lagless_core::ServerSession::send_snapshot_with_essential`]).
    pub fn encode_standalone(&self, ids: &[u32], tick: Tick) -> Vec<u8> {
        let live: Vec<(u32, &Live)> = ids
            .iter()
            .filter_map(|&id| Some((id, self.store.get(id)?)))
            .collect();
        let mut w = BitWriter::new();
        snapshot::write_header(&mut w, 0, None, live.len());
        let mut next = 0u32;
        let mut changes = Vec::with_capacity(live.len());
        for &(id, e) in &live {
            w.write_var_u32(id - next);
            next = id + 1;
            snapshot::write_op(&mut w, Change::Spawned);
            snapshot::write_spawn_payload(&mut w, &self.schema, e.kind, e.generation, &e.codes);
            changes.push((id, Some(e.entry(tick))));
        }
        snapshot::write_checksum(&mut w, View::new().checksum_with(&changes));
        w.into_bytes()
    }

    /// The entities `client` predicts ([`ReplicationServer::set_owned`]), ascending.
    pub fn owned(&self, client: ClientKey) -> &[u32] {
        self.clients.get(&client).map_or(&[], |c| &c.owned)
    }

    /// Adds a client (nothing happens if it is there already).
    pub fn add_client(&mut self, client: ClientKey) {
        if self.clients.contains_key(&client) {
            return;
        }
        let budget = BudgetController::new(self.config.budget);
        let live: Vec<u32> = self.ids().collect();
        let c = self.clients.entry(client).or_insert_with(|| ClientState {
            views: Views::default(),
            priority: Vec::new(),
            last_tick: None,
            focus: None,
            budget,
            limited: false,
            pending: Pending::default(),
            shown: Vec::new(),
            scan_countdown: 1,
            owned: Vec::new(),
            spare: Vec::new(),
            charged: 0,
            stats: ClientReplicationStats::default(),
        });
        for id in live {
            c.pending.mark(id);
        }
    }

    /// Marks `id` as possibly differing from what every client holds.
    fn touch(&mut self, id: u32) {
        for c in self.clients.values_mut() {
            c.pending.mark(id);
        }
    }

    /// Takes `bits` the client's link carried beside its snapshots (the game's messages)
    /// out of its next snapshot's budget, so the budget stays what the link carries.
    pub fn charge(&mut self, client: ClientKey, bits: u64) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.charged = c.charged.saturating_add(bits);
        }
    }

    /// Forgets a client.
    pub fn remove_client(&mut self, client: ClientKey) {
        self.clients.remove(&client);
    }

    /// Where the client's player is: the default relevance favours what is near it.
    pub fn set_focus(&mut self, client: ClientKey, focus: Option<[f32; 3]>) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.focus = focus;
        }
    }

    /// Entities `client` predicts (its own player, say): when they differ from what it
    /// holds they go in every snapshot ahead of everything else, so its prediction is
    /// never compared with a state the budget held back. Replaces the previous set.
    pub fn set_owned(&mut self, client: ClientKey, entities: &[u32]) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.owned = entities.to_vec();
            c.owned.sort_unstable();
            c.owned.dedup();
        }
    }

    /// Replaces the default relevance (nearness to the client's focus) with the game's.
    pub fn set_relevance(&mut self, f: Box<RelevanceFn>) {
        self.relevance = Some(f);
    }

    /// The client's counters.
    pub fn client_stats(&self, client: ClientKey) -> Option<ClientReplicationStats> {
        self.clients.get(&client).map(|c| ClientReplicationStats {
            budget: c.budget.stats().clone(),
            ..c.stats.clone()
        })
    }

    /// The client's budget now, kbit/s (`None`: unlimited or unknown client).
    pub fn budget_kbps(&self, client: ClientKey) -> Option<f64> {
        self.clients.get(&client)?.budget.kbps()
    }

    /// The client's round trip as its acknowledgements show it, seconds.
    pub fn rtt(&self, client: ClientKey) -> Option<f64> {
        self.clients.get(&client)?.budget.srtt()
    }

    /// The client holds no view this server may send a delta against (it refused a
    /// snapshot whose checksum did not match, or forgot its baselines), as its session
    /// reports ([`lagless_core::ServerSession::resync_requested`]): the next snapshot goes
    /// against nothing, with the list of every entity it should show. Asking again before
    /// a snapshot against nothing was acknowledged changes nothing, so a client that asks
    /// in every packet until one arrives is answered once.
    pub fn resync(&mut self, client: ClientKey) {
        let store = &self.store;
        if let Some(c) = self.clients.get_mut(&client) {
            if c.views.acked.is_some() || !c.views.lost_track {
                c.start_over(store);
            }
        }
    }

    /// The client has decoded the snapshot of `tick` (its newest), as its session reports
    /// at `now` ([`lagless_core::ServerSession::snapshot_ack`]). Older or repeated
    /// acknowledgements change nothing.
    pub fn acknowledge(&mut self, client: ClientKey, tick: Tick, now: Duration) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.acknowledge(tick, now);
        }
    }

    /// The snapshot of `tick` for `client`, against the newest view it acknowledged, at
    /// `now`. The game sends it through its session
    /// ([`lagless_core::ServerSession::send_snapshot`]).
    pub fn encode(
        &mut self,
        client: ClientKey,
        tick: Tick,
        now: Duration,
    ) -> Result<EncodedSnapshot, ReplicationError> {
        if self.cache_tick != Some(tick) {
            // The bodies' memory is kept for the next tick's: with 64 clients a tick
            // encodes thousands, and allocating each was a tenth of the encoding time.
            for (_, mut w) in self.cache.drain() {
                w.clear();
                self.pool.push(w);
            }
            self.cache_tick = Some(tick);
        }
        let pool = &mut self.pool;
        let schema = Arc::clone(&self.schema);
        let config = self.config.clone();
        let relevance = self.relevance.as_deref();
        let store = &self.store;
        let cache = &mut self.cache;
        let c = self
            .clients
            .get_mut(&client)
            .ok_or(ReplicationError::UnknownClient(client))?;
        c.budget.update(now, c.limited);
        if c.views.in_flight.len() >= config.max_in_flight.max(1) {
            // Nothing the client can still acknowledge is remembered: it cannot decode
            // against what it acknowledged (or has been gone that long). Start over.
            c.start_over(store);
        }
        let elapsed = c
            .last_tick
            .map_or(1.0, |t| tick.0.wrapping_sub(t.0).clamp(1, 1024) as f32);
        c.last_tick = Some(tick);
        let empty = View::new();
        let (base_tick, base) = match &c.views.acked {
            Some(a) if a.tick < tick => (Some(a.tick), &a.view),
            _ => (None, &empty),
        };
        if c.priority.len() < store.slots() {
            c.priority.resize(store.slots(), 0.0);
        }

        // What differs from the client's view, and what it is worth.
        let focus = c.focus;
        let near_boost = if config.near_boost.is_finite() && config.near_boost > 0.0 {
            config.near_boost
        } else {
            1.0
        };
        let relevant = |id: u32, e: &Live| -> f32 {
            match relevance {
                Some(f) => f(client, id, e.kind, &e.codes),
                None => match (focus, e.position) {
                    (Some(f), Some(p)) => {
                        let d2: f32 = (0..3).map(|i| (f[i] - p[i]).powi(2)).sum();
                        let r = config.relevance_distance.max(1e-3);
                        let near = config.near_distance;
                        let boost = if d2 <= near * near { near_boost } else { 1.0 };
                        boost / (1.0 + d2 / (r * r))
                    }
                    _ => 1.0,
                },
            }
        };
        // Only entities marked since they last matched what the client holds can
        // differ from it: the work per client follows what changes, not the world.
        if relevance.is_some() {
            c.scan_countdown = c.scan_countdown.saturating_sub(1);
            if c.scan_countdown == 0 {
                // A game's relevance can change without the entity changing.
                c.scan_countdown = RESCAN_EVERY;
                for id in store.ids() {
                    c.pending.mark(id);
                }
            }
        }
        let tolerance = if config.error_tolerance.is_finite() {
            config.error_tolerance.max(0.0)
        } else {
            0.0
        };
        let dead_reckoning = if config.dead_reckoning_secs.is_finite() {
            config.dead_reckoning_secs.max(0.0)
        } else {
            0.0
        };
        let hz = config.tick_hz.max(1) as f32;
        // Lists kept between encodes for their memory (see [`Scratch`]).
        let Scratch {
            mut ids,
            mut candidates,
            mut keep,
            mut forced,
            mut chosen,
        } = std::mem::take(&mut self.scratch);
        ids.clear();
        candidates.clear();
        keep.clear();
        forced.clear();
        chosen.clear();
        // What the client shows of an entity against what it is now, and what waiting
        // is worth.
        let look = |shown: &mut Vec<Shown>,
                    may_hold: &Pending,
                    in_flight_snapshots: &VecDeque<InFlight>,
                    id: u32|
         -> Look {
            let i = id as usize;
            if shown.len() <= i {
                shown.resize(i + 1, Shown::default());
            }
            if !shown[i].known {
                shown[i] = work_out_shown(base, base_tick, &shown[i], id);
            }
            let now_shown = shown[i];
            let (state, held, in_flight, since) = (
                now_shown.state(),
                now_shown.held(),
                now_shown.in_flight,
                now_shown.since,
            );
            let keep = state.is_some() || in_flight;
            // Gone: tell the client if it may show it, until it is known not to.
            let gone = || {
                let held = state.is_some() || may_hold.contains(id);
                Look::Gone {
                    shown: held,
                    keep: keep || held,
                }
            };
            let Some(e) = store.get(id) else {
                return gone();
            };
            let weight = relevant(id, e);
            // NaN counts as irrelevant too.
            if weight.is_nan() || weight <= 0.0 {
                return gone();
            }
            let current = state.is_some_and(|s| {
                s.generation == e.generation
                    && (s.version == e.version
                        || (s.hash == e.hash as u32
                            && shown_codes(base, in_flight_snapshots, &now_shown, id)
                                .is_some_and(|codes| *codes == e.codes[..])))
            });
            // The acknowledged view holds this very state: every snapshot from now on
            // leaves the client with it, whatever the sends in flight since.
            let acknowledged = || {
                base.get(id).is_some_and(|b| {
                    b.generation == e.generation && (b.version == e.version || b.codes == e.codes)
                })
            };
            if current && (!in_flight || acknowledged()) {
                return Look::Current { keep: false };
            }
            if current {
                // The newest send carries this state and has probably arrived, but a
                // snapshot is decoded against the acknowledged view alone (Fiedler's
                // "Snapshot Compression"), so the entity goes again, with whatever room
                // is left, until an acknowledgement says which send arrived. Never
                // taking it on trust is what keeps a lost send from leaving the client
                // silently stale.
                let change = match held {
                    Some(g) if g == e.generation => Change::Updated,
                    Some(_) => Change::Replaced,
                    None => Change::Spawned,
                };
                return Look::Waiting {
                    change,
                    rate: 0.0,
                    resend: true,
                };
            }
            let (change, wrong) = match held {
                Some(g) if g == e.generation => {
                    // How wrong the client is by now, in tolerances.
                    let wrong = match (state, e.position) {
                        (Some(s), Some(p)) if tolerance > 0.0 => {
                            let a = s.position.unwrap_or(p);
                            let dt = (tick.0.saturating_sub(since.0) as f32 / hz)
                                .clamp(0.0, dead_reckoning);
                            let d2: f32 = (0..3)
                                .map(|k| (a[k] + s.velocity[k] * dt - p[k]).powi(2))
                                .sum();
                            let v2: f32 = (0..3)
                                .map(|k| (s.velocity[k] - e.velocity[k]).powi(2))
                                .sum();
                            (d2.sqrt() + v2.sqrt() * dead_reckoning) / tolerance
                        }
                        _ => 0.0,
                    };
                    // NaN (a non-finite position) counts as far off.
                    (Change::Updated, wrong.min(MAX_WRONG))
                }
                Some(_) => (Change::Replaced, UNSEEN_WRONG),
                None => (Change::Spawned, UNSEEN_WRONG),
            };
            let kind_weight = schema.get(e.kind).map_or(1.0, |k| k.priority_weight());
            Look::Waiting {
                change,
                rate: kind_weight * weight * (1.0 + wrong),
                resend: false,
            }
        };
        c.pending.drain_into(&mut ids);
        for &id in &ids {
            let i = id as usize;
            let owned = c.owned.binary_search(&id).is_ok();
            match look(&mut c.shown, &c.views.may_hold, &c.views.in_flight, id) {
                Look::Gone { shown, keep: k } => {
                    if shown {
                        forced.push((id, Change::Despawned));
                    }
                    if k {
                        keep.push(id);
                    }
                    c.priority[i] = 0.0;
                }
                Look::Current { keep: k } => {
                    if k {
                        keep.push(id);
                    }
                    c.priority[i] = 0.0;
                }
                Look::Waiting {
                    change,
                    rate,
                    resend,
                } => {
                    keep.push(id);
                    c.priority[i] += rate * elapsed;
                    // A resend of what the client predicts waits for room like any
                    // other: forced into every snapshot until acknowledged, a resting
                    // player's state crowded a thin link (128 kbit/s on `mobile`).
                    let owned = owned && !resend;
                    let priority = match (owned, resend) {
                        (true, _) => f32::MAX,
                        (false, true) => 0.0,
                        (false, false) => c.priority[i],
                    };
                    candidates.push(Candidate {
                        id,
                        change,
                        priority,
                        owned,
                        resend,
                    });
                }
            }
        }
        for &id in &keep {
            c.pending.mark(id);
        }

        // The budget.
        let limit_bits = config.max_snapshot_bytes.saturating_mul(8);
        let budget_bits = c.budget.bits_per_snapshot(config.snapshot_hz);
        // One packet's overhead per snapshot; a budget too small for more sends one
        // snapshot's worth anyway, so nothing starves outright.
        let overhead = config.packet_overhead_bytes * 8;
        let charged = usize::try_from(std::mem::take(&mut c.charged)).unwrap_or(usize::MAX);
        let mut cap = budget_bits.map_or(limit_bits, |b| {
            b.saturating_sub(overhead)
                .saturating_sub(charged)
                .max(MIN_SNAPSHOT_BITS)
                .min(limit_bits)
        });
        let resends = candidates.iter().filter(|c| c.resend).count();
        let n_candidates = candidates.len() - resends;
        // With a budget, the candidates are taken highest first; they are put in that
        // order a batch at a time, as far as the snapshot gets, and the rest, which waits
        // anyway, stays unordered.
        let by_priority = |a: &Candidate, b: &Candidate| b.priority.total_cmp(&a.priority);
        let mut ordered = if budget_bits.is_some() {
            0
        } else {
            candidates.len()
        };
        // Each entry's body, encoded once per tick for every client that needs the same
        // delta, and looked up by its key instead of copied.
        let mut payload = |cache: &mut HashMap<BodyKey, BitWriter>,
                           id: u32,
                           change: Change|
         -> Option<(BodyKey, usize)> {
            let e = store.get(id)?;
            let kind = schema.get(e.kind)?;
            let (key, from, age) = match (change, base.get(id)) {
                (Change::Updated, Some(b)) => {
                    let age = tick.0.wrapping_sub(b.tick.0);
                    ((id, b.version, e.version, age), Some(b), age)
                }
                _ => ((id, u64::MAX, e.version, 0), None, 0),
            };
            let w = cache.entry(key).or_insert_with(|| {
                let mut w = pool.pop().unwrap_or_default();
                match from {
                    Some(b) => {
                        let m = Motion {
                            age,
                            tick_hz: config.tick_hz,
                        };
                        field::write_entity(&mut w, kind, &b.codes, &e.codes, m);
                    }
                    None => snapshot::write_spawn_payload(
                        &mut w,
                        &schema,
                        e.kind,
                        e.generation,
                        &e.codes,
                    ),
                }
                w
            });
            Some((key, w.bit_len()))
        };
        // Despawns first, then by priority while the budget lasts. An entry's id gap and
        // operation are guessed at ENTRY_GUESS bits until the order is known; then the
        // lowest-priority entries go until the exact size fits.
        let mut used = 64 + CHECKSUM_BITS + forced.len() * ENTRY_GUESS;
        chosen.extend(forced.drain(..).map(|(id, change)| Chosen {
            id,
            change,
            body: None,
            rank: 0,
            resend: false,
        }));
        let mut deferred = 0usize;
        // Once a few in a row do not fit, the rest wait without being encoded: with a
        // crowded world that is most of them, and encoding them would cost more than
        // everything else a snapshot takes.
        let mut misses = 0;
        for k in 0..candidates.len() {
            if k == ordered {
                let rest = &mut candidates[k..];
                let n = rest.len().min(ORDER_BATCH);
                if rest.len() > n {
                    rest.select_nth_unstable_by(n, by_priority);
                }
                rest[..n].sort_unstable_by(by_priority);
                ordered += n;
            }
            let cand = &candidates[k];
            let change = cand.change;
            if cand.owned {
                // What the client predicts always goes (it reconciles against it), and
                // on top of the least a snapshot carries, so a small budget cannot spend
                // itself on the client's own player every time and starve everything
                // else for good (the ball of a car-and-ball game, say). Owned entities
                // sort first, so the room is set before anything else is chosen.
                let Some(body) = payload(cache, cand.id, change) else {
                    continue;
                };
                used += body.1 + ENTRY_GUESS;
                cap = cap.max((used + MIN_SNAPSHOT_BITS - 64).min(limit_bits));
                chosen.push(Chosen {
                    id: cand.id,
                    change,
                    body: Some(body),
                    rank: 0,
                    resend: cand.resend,
                });
                continue;
            }
            if misses >= MAX_MISSES || used + ENTRY_GUESS + 8 > cap {
                deferred += candidates.len() - k;
                break;
            }
            let Some(body) = payload(cache, cand.id, change) else {
                continue;
            };
            let cost = body.1 + ENTRY_GUESS;
            if used + cost > cap {
                deferred += 1;
                misses += 1;
                continue;
            }
            misses = 0;
            used += cost;
            let rank = chosen.len() + 1;
            chosen.push(Chosen {
                id: cand.id,
                change,
                body: Some(body),
                rank,
                resend: cand.resend,
            });
        }
        chosen.sort_unstable_by_key(|c| c.id);
        while exact_bits(&chosen) > cap {
            let Some(last) = chosen
                .iter()
                .enumerate()
                .filter(|(_, c)| c.rank > 0)
                .max_by_key(|(_, c)| c.rank)
                .map(|(i, _)| i)
            else {
                break;
            };
            chosen.remove(last);
            deferred += 1;
        }
        // Resends left out are not deferred: the client probably shows them right.
        let resent = chosen.iter().filter(|c| c.resend).count();
        deferred = deferred.saturating_sub(resends - resent);

        // Write it, and the view the client holds once it decodes it.
        let mut w = BitWriter::with_capacity(used / 8 + 16);
        let age = base_tick.map_or(0, |b| tick.0.wrapping_sub(b.0));
        let members: Option<Vec<u32>> = (c.views.lost_track && base_tick.is_none()).then(|| {
            store
                .ids()
                .filter(|&id| store.get(id).is_some_and(|e| relevant(id, e) > 0.0))
                .collect()
        });
        snapshot::write_header(&mut w, age, members.as_deref(), chosen.len());
        let mut changes = c.spare.pop().unwrap_or_default();
        changes.reserve(chosen.len());
        #[cfg(test)]
        let mut shadow = match (&c.views.acked, base_tick) {
            (Some(a), Some(_)) => a.shadow.clone(),
            _ => View::new(),
        };
        let mut next = 0u32;
        for ch in &chosen {
            let (id, i) = (ch.id, ch.id as usize);
            w.write_var_u32(id - next);
            next = id + 1;
            snapshot::write_op(&mut w, ch.change);
            if let Some((key, _)) = ch.body {
                c.priority[i] = 0.0;
                if let Some(body) = cache.get(&key) {
                    w.append(body);
                }
            }
            let live = store.get(id);
            let entry = live
                .filter(|_| ch.change != Change::Despawned)
                .map(|e| e.entry(tick));
            let state = live.filter(|_| entry.is_some()).map(|e| StateId {
                generation: e.generation,
                version: e.version,
                hash: e.hash as u32,
                position: e.position,
                velocity: e.velocity,
            });
            // Looked at above, so there is a slot: it now shows what this snapshot sent.
            if let Some(s) = c.shown.get_mut(i) {
                s.set_state(state);
                s.in_flight = true;
                s.since = tick;
            }
            #[cfg(test)]
            shadow.set(id, entry.clone());
            if entry.is_some() {
                c.views.may_hold.mark(id);
            }
            changes.push((id, entry));
        }
        snapshot::write_checksum(&mut w, base.checksum_with(&changes));
        c.views.in_flight.push_back(InFlight {
            tick,
            base: base_tick,
            changes,
            sent_at: now,
            #[cfg(test)]
            shadow,
        });
        c.limited = deferred > 0;

        let bits = w.bit_len();
        let s = &mut c.stats;
        s.snapshots += 1;
        s.full += u64::from(base_tick.is_none());
        s.bits += bits as u64;
        s.candidates += n_candidates as u64;
        s.deferred += deferred as u64;
        s.sent += chosen.len() as u64;
        s.baseline_age_ticks += u64::from(age);
        let entries = chosen.len();
        self.scratch = Scratch {
            ids,
            candidates,
            keep,
            forced,
            chosen,
        };
        Ok(EncodedSnapshot {
            bytes: w.into_bytes(),
            bits,
            baseline: base_tick,
            entries,
            candidates: n_candidates,
            deferred,
            resent,
            budget_bits,
        })
    }
}

/// The most a waiting entity's error counts for, in tolerances
/// ([`ServerConfig::error_tolerance`]): a body 5 m off (at the default 5 cm) is as urgent
/// as one farther, and the rate stays finite.
const MAX_WRONG: f32 = 100.0;

/// What an entity the client does not hold (a spawn, or a new incarnation) counts as, in
/// tolerances: ahead of small errors, behind a body that is plainly somewhere else. In
/// the busy-world run, 100 cost every held entity's error (all-entity error p99 57 cm
/// against 50), 1 left more entities unseen for longer (7.8% of entity frames against
/// 4.9%).
const UNSEEN_WRONG: f32 = 9.0;

/// The lists one encode fills and empties, kept for the next one's: allocating and
/// freeing them for each of 64 clients every tick showed in the encoding time.
#[derive(Default)]
struct Scratch {
    ids: Vec<u32>,
    candidates: Vec<Candidate>,
    keep: Vec<u32>,
    forced: Vec<(u32, Change)>,
    chosen: Vec<Chosen>,
}

/// Candidates put in priority order at a time (see [`ReplicationServer::encode`]):
/// about what a 256 kbit/s snapshot of moving bodies takes.
const ORDER_BATCH: usize = 48;

/// Least a snapshot may carry with a budget, bits (its 64-bit header included), besides
/// the entities the client predicts.
const MIN_SNAPSHOT_BITS: usize = 256;

/// The view checksum at the end of every snapshot.
const CHECKSUM_BITS: usize = 16;

/// Candidates in a row that may not fit before the rest of a snapshot's wait unencoded.
const MAX_MISSES: usize = 8;

/// Bits an entry's id gap and operation are guessed to take before the order is known
/// (a gap of up to 278 and a two-bit operation).
const ENTRY_GUESS: usize = 15;

/// An encoded entity body in the per-tick cache: (id, baseline version or `u64::MAX`
/// for none, version, baseline age).
type BodyKey = (u32, u64, u64, u32);

/// An entry a snapshot will carry.
struct Chosen {
    id: u32,
    change: Change,
    /// The body's cache key and length in bits (`None`: a despawn).
    body: Option<(BodyKey, usize)>,
    /// 0 for a despawn, which always goes; else its place in priority order.
    rank: usize,
    /// See [`Candidate::resend`].
    resend: bool,
}

/// The exact size of a snapshot of `chosen` (ascending ids), header bound included.
fn exact_bits(chosen: &[Chosen]) -> usize {
    let mut next = 0u32;
    let mut bits = 64 + CHECKSUM_BITS;
    for c in chosen {
        bits += var_u32_bits(c.id - next) as usize;
        bits += if c.change == Change::Updated { 1 } else { 2 };
        bits += c.body.map_or(0, |(_, len)| len);
        next = c.id + 1;
    }
    bits
}

/// The codes the client shows of entity `id` (see [`work_out_shown`]).
fn shown_codes<'a>(
    base: &'a View,
    in_flight: &'a VecDeque<InFlight>,
    shown: &Shown,
    id: u32,
) -> Option<&'a [i32]> {
    if shown.in_flight {
        sent_codes(in_flight, shown.since, id)
    } else {
        base.get(id).map(|b| &b.codes[..])
    }
}

/// The codes the snapshot of `tick`, still in flight, carried for entity `id` (`None`:
/// a despawn, or not found).
fn sent_codes(in_flight: &VecDeque<InFlight>, tick: Tick, id: u32) -> Option<&[i32]> {
    let f = &in_flight[in_flight.binary_search_by_key(&tick, |f| f.tick).ok()?];
    let k = f.changes.binary_search_by_key(&id, |(i, _)| *i).ok()?;
    f.changes[k].1.as_ref().map(|e| &e.codes[..])
}

/// What the client shows of entity `id` has to be worked out again.
fn forget_shown(shown: &mut [Shown], id: u32) {
    if let Some(s) = shown.get_mut(id as usize) {
        s.known = false;
    }
}

/// What the client shows of entity `id`: the newest state sent since the baseline
/// (`base`, of `base_tick`) if that snapshot arrived, else the baseline's. Until an
/// acknowledgement says which, the newest sent is assumed to have arrived (it is worked
/// out again then). `old` is what was worked out before: its newest send counts only if
/// it went after the baseline (what went before is in the baseline, or lost).
fn work_out_shown(base: &View, base_tick: Option<Tick>, old: &Shown, id: u32) -> Shown {
    let held = base.get(id);
    if old.in_flight && base_tick.is_none_or(|b| old.since > b) {
        let mut s = *old;
        s.known = true;
        s.set_held(held.map(|b| b.generation));
        return s;
    }
    let (state, since) = match held {
        Some(b) => {
            // From the entry, not its codes: those are an older allocation, and reading
            // them missed the cache for most entities of most clients.
            let state = StateId {
                generation: b.generation,
                version: b.version,
                hash: b.hash as u32,
                position: b.position,
                velocity: b.velocity,
            };
            (Some(state), b.tick)
        }
        None => (None, Tick(0)),
    };
    let mut s = Shown {
        known: true,
        since,
        ..Shown::default()
    };
    s.set_state(state);
    s.set_held(held.map(|b| b.generation));
    s
}

#[cfg(test)]
mod tests;
