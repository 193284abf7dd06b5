//! The server side: the authoritative entities, and one snapshot per client per send.
//!
//! The game spawns, updates and despawns entities as its world changes; an update that
//! quantizes to the codes the entity already has changes nothing. For each client the
//! server keeps the view the client holds by its acknowledgements and, per snapshot sent,
//! what it changed: the view is rebuilt from exactly what the acknowledged snapshots
//! carried (each acknowledgement names every snapshot that arrived). A snapshot lists
//! only entities whose newest send differs from what they are, each as a delta against
//! that view, so an unchanged entity costs nothing, and a lost snapshot costs only what
//! it carried that is still different.
//!
//! # Budget and priorities
//! Each client has a byte budget per snapshot ([`BudgetController`]). Every entity that
//! differs from what the client holds gains priority each tick it waits: its kind's
//! priority × its relevance to the client × (1 + how wrong the client shows it, in
//! [`ReplicationConfig::error_tolerance`]s) (Fiedler's "State Synchronization" priority
//! accumulator; Unity Netcode for Entities' importance scaling). A snapshot takes the
//! highest until the budget is spent; the rest keep climbing.
//!
//! * **Relevance** is by default how near the entity is to the client's focus
//!   ([`ReplicationServer::set_focus`]): it halves at [`ReplicationConfig::relevance_distance`],
//!   and within [`ReplicationConfig::near_distance`] it is [`ReplicationConfig::near_boost`] times
//!   more, so what the player touches goes before the rest of a busy world.
//! * **How wrong** is the distance between where the client shows the entity, its last
//!   state carried on by its velocity as [`crate::ReplicationClient::values_at`] does, and
//!   where it is, plus the velocity's error over that carrying time. A body moving as the
//!   client predicts waits; one that hit something goes, so the budget goes where the
//!   client is wrong rather than where the world merely moves.
//!
//! Despawns always go. An update is sent once: the client shows the newest state it
//! decoded of each entity, and the snapshots after it leave the entity out while that
//! send is in flight; once acknowledged it is merged into their baseline, and only if
//! the acknowledgements show it lost does the entity wait to be sent again. A relevance
//! of 0 (a game's own [`ReplicationServer::set_relevance`]) keeps an entity from that
//! client altogether: interest management.
//!
//! # Visibility
//! A game says which entities each client may see ([`ReplicationServer::set_visible`],
//! [`ReplicationServer::set_visible_by_default`]: rooms, teams, line of sight). An entity
//! a client may not see has relevance 0 whatever the rule: it is never sent, a client that
//! may show it is sent its despawn (again until one is acknowledged), and when it may see
//! it again it is sent afresh as a spawn with its current state. A change of visibility
//! marks only that entity for that client, so it costs nothing until the next encode.
//!
//! # Spatial cells
//! With cells on ([`ReplicationServer::set_cells`]; off by default) entities are placed
//! on a uniform grid by their position, and each client sees only the cells of its
//! interest ([`ReplicationServer::set_interest`]; by default those around its focus) and
//! the entities without a position. Outside its interest an entity is treated as one the
//! client may not see, and its changes are not even marked for that client: a client's
//! work follows the cells near it, not the world (`cells.rs`).
//!
//! # Shared work
//! The same entity's delta against the same baseline state at the same age is encoded
//! once per tick and copied into every snapshot that needs it.
//!
//! # Cost per client
//! Under a budget most changed entities wait many snapshots. The work per client per
//! tick follows what changes, not the world: only entities marked since they last
//! matched what the client holds are visited (in id order, so each client's arrays are
//! read front to back), and the acknowledged view changes in place. With cells on, only
//! those in the cells of its interest ([`ClientReplicationStats::visited`] counts them).
//!
//! # Where things are
//! One file per job: the entity store (`store.rs`); acknowledgement and view tracking
//! (`views.rs`); relevance and focus (`relevance.rs`); spatial cells (`cells.rs`); what each client shows and how
//! wrong (`shown.rs`); priority and selection under the budget (`select.rs`); the
//! per-tick body cache (`cache.rs`); writing a snapshot (`write.rs`). [`ReplicationServer`]
//! and its public surface are here, and [`ReplicationServer::encode`] is their pipeline:
//! `begin` (the budget, starting over when nothing in flight can be acknowledged),
//! `rescan`, `rank` (what may differ, looked at and given its priority), `select` (what
//! fits), `carried` and `write` (the entries, and the view they leave), `track` (what the
//! client is taken to show until acknowledged), `count`.
//!
//! Measured figures behind these choices and the design's history are in
//! `docs/replication-server.md`.

mod cache;
mod cells;
mod relevance;
mod select;
mod shown;
mod store;
mod views;
mod write;

use crate::budget::{BudgetConfig, BudgetController, BudgetStats};
use crate::error::ReplicationError;
use crate::schema::{KindId, Schema};
use crate::snapshot::Limits;
use crate::state::StateWriter;
use crate::view::{Entry, View};
use cache::BodyCache;
use cells::{Area, Grid};
pub use cells::{Cell, CellConfig, Interest};
use lagless_core::Tick;
use lagless_wire::BitWriter;
use relevance::{Relevance, Visibility};
use select::{Picked, Room, Scratch};
use shown::{ErrorScale, Shown};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use store::Store;
use views::Views;

pub use lagless_core::ClientId;

/// The replication server's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicationConfig {
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
    /// [`crate::ReplicationClient::read_all_at`]. The server weighs errors with it. Through
    /// [`crate::NetConfig::replication`] it is both ends' one setting: the [`crate::Client`]
    /// carries held-back entities this far (NaN counts as 0, at most 60 s).
    pub dead_reckoning_secs: f32,
    /// Bytes each packet costs on the link beyond the snapshot payload (the session's
    /// header and UDP/IP's), taken off the budget so the budget is what the link carries.
    pub packet_overhead_bytes: usize,
    /// Threads [`ReplicationServer::encode_many`] spreads the clients' snapshots over
    /// (the calling thread is one of them); 1 (or 0) encodes them one after the other
    /// on the calling thread. The snapshots are the same bytes whatever the count. The
    /// default is every core the process is given
    /// ([`std::thread::available_parallelism`]). On wasm32 the count is taken as 1
    /// whatever it is set to: std cannot start threads there.
    pub threads: usize,
}

/// Every core the process is given ([`std::thread::available_parallelism`]), 1 if
/// unknown: the default of [`ReplicationConfig::threads`]. Always 1 on wasm32, where std
/// cannot start threads.
pub fn available_threads() -> usize {
    if NO_THREADS {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// True where `std::thread::spawn` panics (wasm32-unknown-unknown, and std's other wasm32
/// targets without thread support), so [`ReplicationServer::encode_many`] must stay on the
/// calling thread.
const NO_THREADS: bool = cfg!(target_arch = "wasm32");

impl Default for ReplicationConfig {
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
            threads: available_threads(),
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
    /// Entities looked at (whether they differ from what the client holds), summed over
    /// snapshots: the encode's work, which spatial cells
    /// ([`ReplicationServer::set_cells`]) bound to the entities near the client.
    pub visited: u64,
    /// Budget counters.
    pub budget: BudgetStats,
}

/// One client's state: what it acknowledged and what is in flight to it, what it shows,
/// what waits for it and how much, and its budget.
struct ClientState {
    /// What it acknowledged, and what is in flight.
    views: Views,
    /// Per entity, the priority gained waiting.
    priority: Vec<f32>,
    /// The tick of its last snapshot, for how long entities waited since.
    last_tick: Option<Tick>,
    focus: Option<[f32; 3]>,
    budget: BudgetController,
    /// The last snapshot left something out for want of room: the budget is in use.
    limited: bool,
    /// Entities that may differ from what the client holds.
    pending: Pending,
    /// Per entity, what the client shows of it as the newest send and the acknowledged
    /// view say, worked out once and kept until an acknowledgement changes either: with a
    /// crowded world nearly every entity waits in every snapshot, and looking each up
    /// again for every client every tick would be most of the encoding work.
    shown: Vec<Shown>,
    /// Encodes left before every entity is looked at again (with a game's relevance).
    scan_countdown: u32,
    /// Entities the client predicts, ascending: sent ahead of every priority.
    owned: Vec<u32>,
    /// What it may see at all.
    visibility: Visibility,
    /// Its interest with cells on (`None`: the default, around its focus).
    interest: Option<Interest>,
    /// The cells its interest holds now ([`Area::Everything`] with cells off).
    area: Area,
    /// Emptied change lists of acknowledged snapshots, for the next ones: memory the
    /// cache still holds, which a fresh allocation per snapshot would not be.
    spare: Vec<Vec<(u32, Option<Entry>)>>,
    /// Bits sent beside snapshots since the last one ([`ReplicationServer::charge`]).
    charged: u64,
    stats: ClientReplicationStats,
}

impl ClientState {
    /// A client that holds nothing yet, under `budget`.
    fn new(budget: BudgetController) -> Self {
        Self {
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
            visibility: Visibility::default(),
            interest: None,
            area: Area::Everything,
            spare: Vec::new(),
            charged: 0,
            stats: ClientReplicationStats::default(),
        }
    }

    /// Readies the client for its snapshot of `tick` at `now`: returns the ticks its
    /// waiting entities waited since the last one.
    fn begin(
        &mut self,
        tick: Tick,
        now: Duration,
        config: &ReplicationConfig,
        store: &Store,
    ) -> f32 {
        self.budget.update(now, self.limited);
        if self.views.unacknowledged() >= config.max_in_flight.max(1) {
            // Nothing the client can still acknowledge is remembered: it cannot decode
            // against what it acknowledged (or has been gone that long). Start over.
            self.start_over(store);
        }
        let elapsed = self
            .last_tick
            .map_or(1.0, |t| tick.0.wrapping_sub(t.0).clamp(1, 1024) as f32);
        self.last_tick = Some(tick);
        if self.priority.len() < store.slots() {
            self.priority.resize(store.slots(), 0.0);
        }
        elapsed
    }

    /// Counts the snapshot `w`, against `base` (`age` ticks old) with `entries` entries,
    /// as `picked` and `room` chose them, and returns it.
    fn count(
        &mut self,
        w: BitWriter,
        base: Option<Tick>,
        age: u32,
        entries: usize,
        picked: &Picked,
        room: &Room,
    ) -> EncodedSnapshot {
        self.limited = picked.deferred > 0;
        let bits = w.bit_len();
        let s = &mut self.stats;
        s.snapshots += 1;
        s.full += u64::from(base.is_none());
        s.bits += bits as u64;
        s.candidates += picked.candidates as u64;
        s.visited += picked.visited as u64;
        s.deferred += picked.deferred as u64;
        s.sent += entries as u64;
        s.baseline_age_ticks += u64::from(age);
        EncodedSnapshot {
            bytes: w.into_bytes(),
            bits,
            baseline: base,
            entries,
            candidates: picked.candidates,
            deferred: picked.deferred,
            resent: picked.resent,
            visited: picked.visited,
            budget_bits: room.budget_bits,
        }
    }
}

/// A set of entity ids, as bits: taken in ascending order, so what is looked up per
/// entity (each client's arrays) is read front to back rather than all over memory.
#[derive(Default)]
struct Pending {
    words: Vec<u64>,
}

impl Pending {
    /// Adds `id`.
    fn mark(&mut self, id: u32) {
        let w = id as usize / 64;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (id % 64);
    }

    /// True if `id` is in the set.
    fn contains(&self, id: u32) -> bool {
        self.words
            .get(id as usize / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    /// Takes `id` out.
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
    /// Entries sent again because the acknowledgements showed the snapshot that carried
    /// the entity's newest send lost.
    pub resent: usize,
    /// Entities looked at: those that may have differed from what the client held
    /// (see [`ClientReplicationStats::visited`]).
    pub visited: usize,
    /// The budget, bits, if any.
    pub budget_bits: Option<usize>,
}

/// A game's relevance rule: `(client, entity id, kind, codes) -> weight`; 0 keeps the
/// entity from the client.
pub type RelevanceFn = dyn Fn(ClientId, u32, KindId, &[i32]) -> f32 + Send + Sync;

/// The server's side of replication. See the module docs.
pub struct ReplicationServer {
    schema: Arc<Schema>,
    config: ReplicationConfig,
    store: Store,
    clients: BTreeMap<ClientId, ClientState>,
    /// One per thread that encodes (the first for [`Self::encode`]), at least one.
    workers: Vec<Worker>,
    relevance: Option<Box<RelevanceFn>>,
    /// Spatial cells, if on ([`Self::set_cells`]).
    grid: Option<Grid>,
}

/// What one thread encodes with besides the client's own state: the tick's body cache
/// and the lists an encode fills, kept between encodes for their memory. Each thread has
/// its own, so threads share nothing they write; a body two threads need is encoded by
/// both (the same bits: a body is a function of its key).
#[derive(Default)]
struct Worker {
    bodies: BodyCache,
    scratch: Scratch,
}

/// What every client's encode reads and no encode writes: the world and the rules.
#[derive(Clone, Copy)]
struct Shared<'a> {
    schema: &'a Schema,
    config: &'a ReplicationConfig,
    store: &'a Store,
    relevance: Option<&'a RelevanceFn>,
    grid: Option<&'a Grid>,
}

/// One client's encode in [`ReplicationServer::encode_many`]: where its result goes, the
/// client, its state, and the result.
struct Job<'a> {
    at: usize,
    id: ClientId,
    state: &'a mut ClientState,
    out: Option<EncodedSnapshot>,
}

/// What one encode reads and leaves as it is: the world, the settings, and the client's
/// views and rules. Every step of the encode sees the same.
struct Sight<'a> {
    tick: Tick,
    schema: &'a Schema,
    config: &'a ReplicationConfig,
    store: &'a Store,
    views: &'a Views,
    /// The acknowledged view the snapshot goes against (empty: none), the tick of its
    /// newest acknowledged snapshot, and the snapshots merged into it (bit `i`: that
    /// tick - 1 - i).
    base: &'a View,
    base_tick: Option<Tick>,
    merged: u64,
    /// Entities the client predicts, ascending.
    owned: &'a [u32],
    relevance: Relevance<'a>,
    scale: ErrorScale,
}

impl Sight<'_> {
    /// The baseline's age, ticks (0: none).
    fn age(&self) -> u32 {
        self.base_tick.map_or(0, |b| self.tick.0.wrapping_sub(b.0))
    }
}

impl ReplicationServer {
    /// A server replicating `schema`'s kinds.
    pub fn new(schema: Schema, config: ReplicationConfig) -> Self {
        Self {
            schema: Arc::new(schema),
            config,
            store: Store::default(),
            clients: BTreeMap::new(),
            workers: vec![Worker::default()],
            relevance: None,
            grid: None,
        }
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The settings.
    pub fn config(&self) -> &ReplicationConfig {
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

    /// The generation of live entity `id`: how many times the id was spawned, the
    /// number a client's [`crate::ClientEntity::generation`] and
    /// [`crate::EntityEvent`]s carry, so a game can tell a reused id's new entity from
    /// the old one on both ends.
    pub fn generation(&self, id: u32) -> Option<u32> {
        Some(self.store.get(id)?.generation)
    }

    /// True if `client` acknowledged a snapshot whose view holds entity `id`: the client
    /// has it spawned. A game that sends an entity's motion some other way (dead
    /// reckoning, `crate::deadreckoning`) waits for this, since a receiver refuses
    /// messages for ids it never spawned, and a spawn the budget held back arrives
    /// snapshots after the first message would.
    pub fn client_holds(&self, client: ClientId, id: u32) -> bool {
        self.clients.get(&client).is_some_and(|c| c.views.holds(id))
    }

    /// Whether client `client` is due a snapshot of `tick`, one of the ticks snapshots
    /// are sent on: always, unless its budget is too thin to pay a packet for each,
    /// when it is sent every few ([`crate::BudgetController::snapshot_stride`], no fewer
    /// than [`BudgetConfig::min_snapshot_hz`] a second). True for a client not added:
    /// encoding its snapshot says what is wrong.
    pub fn snapshot_due(&self, client: ClientId, tick: Tick) -> bool {
        let Some(c) = self.clients.get(&client) else {
            return true;
        };
        let Some(last) = c.last_tick else {
            return true;
        };
        let stride = c.budget.snapshot_stride(self.config.snapshot_hz);
        // In snapshots: the ticks since the last one over the ticks between two.
        let ticks_between =
            f64::from(self.config.tick_hz.max(1)) / self.config.snapshot_hz.max(1e-3);
        let since = f64::from(tick.0.wrapping_sub(last.0));
        since / ticks_between.max(1.0) + 0.5 >= f64::from(stride)
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
        write::standalone(&self.schema, &self.store, ids, tick)
    }

    /// The entities `client` predicts ([`ReplicationServer::set_owned`]), ascending.
    pub fn owned(&self, client: ClientId) -> &[u32] {
        self.clients.get(&client).map_or(&[], |c| &c.owned)
    }

    /// Adds a client (nothing happens if it is there already).
    pub fn add_client(&mut self, client: ClientId) {
        if self.clients.contains_key(&client) {
            return;
        }
        let budget = BudgetController::new(self.config.budget);
        let mut c = ClientState::new(budget);
        match &self.grid {
            Some(grid) => {
                c.area = cells::area_of(grid, &c);
                grid.mark_area(&c.area, &mut c.pending);
            }
            None => self.store.ids().for_each(|id| c.pending.mark(id)),
        }
        self.clients.insert(client, c);
    }

    /// Marks `id` (just spawned, changed or despawned) as possibly differing from what
    /// every client holds: with cells on, only for the clients whose interest holds its
    /// cell, before or after.
    fn touch(&mut self, id: u32) {
        let Some(grid) = &mut self.grid else {
            for c in self.clients.values_mut() {
                c.pending.mark(id);
            }
            return;
        };
        let e = self.store.get(id);
        let old = grid.place(id, e.is_some(), e.and_then(|e| e.position));
        let new = grid.slot(id);
        for c in self.clients.values_mut() {
            if c.area.holds(old) || c.area.holds(new) {
                c.pending.mark(id);
            }
        }
    }

    /// Takes `bits` the client's link carried beside its snapshots (the game's messages)
    /// out of its next snapshot's budget, so the budget stays what the link carries.
    pub fn charge(&mut self, client: ClientId, bits: u64) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.charged = c.charged.saturating_add(bits);
        }
    }

    /// Forgets a client.
    pub fn remove_client(&mut self, client: ClientId) {
        self.clients.remove(&client);
    }

    /// Where the client's player is: the default relevance favours what is near it,
    /// and with cells on ([`Self::set_cells`]) its interest follows it.
    pub fn set_focus(&mut self, client: ClientId, focus: Option<[f32; 3]>) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.focus = focus;
            if let Some(grid) = &self.grid {
                cells::follow(grid, c);
            }
        }
    }

    /// Entities `client` predicts (its own player, say): when they differ from what it
    /// holds they go in every snapshot ahead of everything else, so its prediction is
    /// never compared with a state the budget held back. Replaces the previous set.
    pub fn set_owned(&mut self, client: ClientId, entities: &[u32]) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.owned = entities.to_vec();
            c.owned.sort_unstable();
            c.owned.dedup();
        }
    }

    /// Lets `client` see entity `id` or not (rooms, teams, line of sight: the game's
    /// rule). An entity a client may not see is never sent to it, whatever its relevance,
    /// and a client that shows it is sent its despawn; once it may see it again it is
    /// sent afresh, as a spawn with its current state. Every entity is visible until
    /// said otherwise ([`Self::set_visible_by_default`]). Holds for ids not live yet, and
    /// for every later incarnation of the id. Nothing happens for an unknown client.
    pub fn set_visible(&mut self, client: ClientId, id: u32, visible: bool) {
        if let Some(c) = self.clients.get_mut(&client) {
            if id <= self.config.limits.max_id && c.visibility.set(id, visible) {
                c.pending.mark(id);
            }
        }
    }

    /// Makes every entity visible to `client`, or none (a room the game fills with
    /// [`Self::set_visible`]), forgetting every exception made before.
    pub fn set_visible_by_default(&mut self, client: ClientId, visible: bool) {
        if let Some(c) = self.clients.get_mut(&client) {
            let mut changed = Vec::new();
            c.visibility.set_default(visible, &mut changed);
            for id in changed.into_iter().chain(self.store.ids()) {
                c.pending.mark(id);
            }
        }
    }

    /// True if `client` may see entity `id` ([`Self::set_visible`]); false for an
    /// unknown client.
    pub fn is_visible(&self, client: ClientId, id: u32) -> bool {
        self.clients
            .get(&client)
            .is_some_and(|c| c.visibility.visible(id))
    }

    /// Replaces the default relevance (nearness to the client's focus) with the game's.
    pub fn set_relevance(&mut self, f: Box<RelevanceFn>) {
        self.relevance = Some(f);
    }

    /// The client's counters.
    pub fn client_stats(&self, client: ClientId) -> Option<ClientReplicationStats> {
        self.clients.get(&client).map(|c| ClientReplicationStats {
            budget: c.budget.stats().clone(),
            ..c.stats.clone()
        })
    }

    /// The bits client `client`'s next snapshot may take by its budget now, less the
    /// packet's overhead and what was charged beside it ([`Self::charge`]); `None`:
    /// unlimited, or an unknown client. What a game sends inside the budget beside the
    /// snapshot (dead reckoning) is fitted to a share of it and charged.
    pub fn snapshot_room_bits(&self, client: ClientId) -> Option<usize> {
        let c = self.clients.get(&client)?;
        let room = Room::new(&c.budget, c.charged, &self.config);
        room.budget_bits.map(|_| room.cap)
    }

    /// How much a thing at `position` matters to `client` by the default relevance:
    /// nearness to its focus ([`Self::set_focus`]; 1 without one), the weight entities
    /// get without a game's rule. 0 for an unknown client.
    pub fn nearness(&self, client: ClientId, position: [f32; 3]) -> f32 {
        self.clients.get(&client).map_or(0.0, |c| {
            Relevance::new(None, None, client, c.focus, &self.config).nearness(Some(position))
        })
    }

    /// The client's budget now, kbit/s (`None`: unlimited or unknown client).
    pub fn budget_kbps(&self, client: ClientId) -> Option<f64> {
        self.clients.get(&client)?.budget.kbps()
    }

    /// The client's round trip as its acknowledgements show it, seconds.
    pub fn rtt(&self, client: ClientId) -> Option<f64> {
        self.clients.get(&client)?.budget.srtt()
    }

    /// The client holds no view this server may send a delta against (it refused a
    /// snapshot whose checksum did not match, or forgot its baselines), as its session
    /// reports ([`lagless_core::ServerSession::resync_requested`]): the next snapshot goes
    /// against nothing, with the list of every entity it should show. Asking again before
    /// a snapshot against nothing was acknowledged changes nothing, so a client that asks
    /// in every packet until one arrives is answered once.
    pub fn resync(&mut self, client: ClientId) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.resync(&self.store);
        }
    }

    /// The client has decoded the snapshot of `tick` (its newest), as its session reports
    /// at `now` ([`lagless_core::ServerSession::snapshot_ack`]), and no other since the
    /// one it acknowledged before: [`Self::acknowledge_many`] with no older ones.
    pub fn acknowledge(&mut self, client: ClientId, tick: Tick, now: Duration) {
        self.acknowledge_many(client, tick, 0, now);
    }

    /// The client has decoded the snapshot of `newest` and those of the 32 ticks before
    /// it whose bits `older` sets (bit `i`: tick `newest - 1 - i`), as its session
    /// reports at `now` ([`lagless_core::ServerSession::snapshot_acks`]). The view the
    /// client holds is rebuilt from exactly what those snapshots carried; any snapshot
    /// older than `newest` not acknowledged is taken as lost, and what it carried that
    /// is still the newest sent goes again. The client's word is checked: ticks never
    /// sent, repeated, or older than what is remembered change nothing.
    pub fn acknowledge_many(&mut self, client: ClientId, newest: Tick, older: u32, now: Duration) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.acknowledge(newest, older, now);
        }
    }

    /// The snapshot of `tick` for `client`, against the newest view it acknowledged, at
    /// `now`. The game sends it through its session
    /// ([`lagless_core::ServerSession::send_snapshot`]).
    ///
    /// Ask [`Self::snapshot_due`] first, as the high-level `Server` does: on a link too
    /// thin for a snapshot every tick the budget is spread over fewer snapshots, and one
    /// encoded every tick regardless would take that many times the budget.
    pub fn encode(
        &mut self,
        client: ClientId,
        tick: Tick,
        now: Duration,
    ) -> Result<EncodedSnapshot, ReplicationError> {
        let shared = Shared {
            schema: &self.schema,
            config: &self.config,
            store: &self.store,
            relevance: self.relevance.as_deref(),
            grid: self.grid.as_ref(),
        };
        let c = self
            .clients
            .get_mut(&client)
            .ok_or(ReplicationError::UnknownClient(client))?;
        let worker = &mut self.workers[0];
        Ok(encode_client(shared, worker, client, c, tick, now))
    }

    /// The snapshots of `tick` for each of `clients` at `now`, in their order: what
    /// [`Self::encode`] gives each in turn, spread over [`ReplicationConfig::threads`]
    /// threads. The bytes are the same whatever the thread count: each client's encode
    /// reads the world and writes only that client's state, and a body encoded on two
    /// threads is the same bits on both. An id listed twice encodes them one after the
    /// other on the calling thread (the second sees the first in flight), as does a
    /// single thread or a single client. On wasm32 it always runs on the calling thread.
    ///
    /// The threads are scoped ([`std::thread::scope`]), started for the call and joined
    /// before it returns: nothing runs between calls, and the game's own threads and
    /// pools (an engine's job system, a global rayon pool) are neither used nor
    /// contended with outside the call. Starting a thread costs tens of µs, against the
    /// milliseconds a tick's encodes take for the many clients that make threads worth
    /// it.
    pub fn encode_many(
        &mut self,
        clients: &[ClientId],
        tick: Tick,
        now: Duration,
    ) -> Vec<Result<EncodedSnapshot, ReplicationError>> {
        let threads = if NO_THREADS {
            1
        } else {
            self.config.threads.max(1).min(clients.len())
        };
        let at: BTreeMap<ClientId, usize> =
            clients.iter().enumerate().map(|(i, &c)| (c, i)).collect();
        if threads <= 1 || at.len() != clients.len() {
            return clients.iter().map(|&c| self.encode(c, tick, now)).collect();
        }
        let mut jobs: Vec<Job> = self
            .clients
            .iter_mut()
            .filter_map(|(&id, state)| {
                Some(Job {
                    at: *at.get(&id)?,
                    id,
                    state,
                    out: None,
                })
            })
            .collect();
        if self.workers.len() < threads {
            self.workers.resize_with(threads, Worker::default);
        }
        let shared = Shared {
            schema: &self.schema,
            config: &self.config,
            store: &self.store,
            relevance: self.relevance.as_deref(),
            grid: self.grid.as_ref(),
        };
        // Clients are taken a few at a time from a shared queue, so a thread that drew
        // cheap ones takes more: four batches per thread.
        let batch = jobs.len().div_ceil(threads * 4).max(1);
        let queue = Mutex::new(jobs.chunks_mut(batch).collect::<Vec<_>>());
        let run = |worker: &mut Worker| {
            loop {
                let next = queue.lock().unwrap_or_else(PoisonError::into_inner).pop();
                let Some(batch) = next else { break };
                for job in batch {
                    job.out = Some(encode_client(shared, worker, job.id, job.state, tick, now));
                }
            }
        };
        let run = &run;
        if let Some((first, rest)) = self.workers[..threads].split_first_mut() {
            std::thread::scope(|s| {
                for worker in rest {
                    s.spawn(move || run(worker));
                }
                run(first);
            });
        }
        drop(queue);
        let mut out: Vec<Result<EncodedSnapshot, ReplicationError>> = clients
            .iter()
            .map(|&c| Err(ReplicationError::UnknownClient(c)))
            .collect();
        for job in jobs {
            if let Some(snapshot) = job.out {
                out[job.at] = Ok(snapshot);
            }
        }
        out
    }
}

/// Client `client`'s (state `c`) snapshot of `tick` at `now`, with `worker`'s cache and
/// lists: [`ReplicationServer::encode`]'s pipeline.
fn encode_client(
    shared: Shared,
    worker: &mut Worker,
    client: ClientId,
    c: &mut ClientState,
    tick: Tick,
    now: Duration,
) -> EncodedSnapshot {
    let Shared {
        schema,
        config,
        store,
        relevance,
        grid,
    } = shared;
    worker.bodies.start(tick);
    let elapsed = c.begin(tick, now, config, store);
    if relevance.is_some() && relevance::rescan_due(&mut c.scan_countdown) {
        // A game's relevance can change while the entity does not: every entity the
        // client's interest holds is looked at again.
        match grid {
            Some(grid) => grid.mark_area(&c.area, &mut c.pending),
            None => store.ids().for_each(|id| c.pending.mark(id)),
        }
    }
    let lists = &mut worker.scratch;
    lists.clear();
    let empty = View::new();
    let (base_tick, base, merged) = match c.views.base(tick) {
        Some((t, view, merged)) => (Some(t), view, merged),
        None => (None, &empty, 0),
    };
    let sight = Sight {
        tick,
        schema,
        config,
        store,
        views: &c.views,
        base,
        base_tick,
        merged,
        owned: &c.owned,
        relevance: Relevance::new(relevance, Some(&c.visibility), client, c.focus, config)
            .within(grid.map(|g| (g, &c.area))),
        scale: ErrorScale::new(config),
    };
    select::rank(
        &sight,
        &mut c.shown,
        &mut c.pending,
        &mut c.priority,
        elapsed,
        lists,
    );
    let mut room = Room::new(&c.budget, std::mem::take(&mut c.charged), config);
    let picked = select::select(&sight, &mut worker.bodies, lists, &mut room);
    let changes = write::carried(&sight, &lists.chosen, c.spare.pop().unwrap_or_default());
    let w = write::write(&sight, &lists.chosen, &changes, &worker.bodies, picked.used);
    let age = sight.age();
    c.track(&lists.chosen, changes, base_tick, tick, now);
    let snapshot = c.count(w, base_tick, age, lists.chosen.len(), &picked, &room);
    let overhead = config.packet_overhead_bytes as u64 * 8;
    c.budget
        .on_sent(now, snapshot.bytes.len() as u64 * 8, overhead);
    snapshot
}

#[cfg(test)]
mod tests;
