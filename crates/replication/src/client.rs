//! The client side: decode snapshots against the views it holds, and show the newest
//! view (the registry), with spawn and despawn events.
//!
//! What the client shows of each entity is what the newest snapshot it decoded that said
//! anything of it said (its state, or its despawn): a snapshot's view holds only what the
//! server knew the client had, while a change the client decoded since may not be
//! acknowledged yet. The server assumes the newest state it sent arrived until the
//! acknowledgements say it did not, and then sends it again.

use crate::error::ReplicationError;
use crate::field;
use crate::schema::{Kind, KindId, Schema};
use crate::snapshot::{self, Change, Decoded, History, Limits};
use crate::state::StateReader;
use crate::view::{Entry, MERGE_WINDOW, View};
use lagless_core::Tick;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Client settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Simulation ticks per second; must be the server's.
    pub tick_hz: u32,
    /// Counts a decoder accepts.
    pub limits: Limits,
    /// Views (decoded snapshots) kept as possible baselines, and what each carried for
    /// merges. At least the server's [`crate::ReplicationConfig::max_in_flight`] plus
    /// [`crate::MERGE_WINDOW`], so the server never refers to one the client dropped.
    pub history: usize,
    /// Events kept until polled; older ones are dropped.
    pub max_events: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            tick_hz: 64,
            limits: Limits::default(),
            history: 336,
            max_events: 1 << 16,
        }
    }
}

/// The shown state of one entity.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientEntity {
    /// Its kind.
    pub kind: KindId,
    /// Its incarnation: the server counts the spawns of each id, so an id despawned and
    /// spawned again (a coin picked up and put back) is a new entity with a new
    /// generation, whatever snapshots were lost in between.
    pub generation: u32,
    /// The tick of the snapshot this state came in (older than the newest snapshot when
    /// the entity has not changed since, or waited on the budget).
    pub tick: Tick,
    /// The state as codes.
    pub codes: Arc<[i32]>,
    /// The state as values; read them with [`ReplicationClient::reader`].
    pub values: Vec<f32>,
}

/// Something that happened to the set of entities. An id reused by the server (a
/// despawn and a spawn of the same id, even in one tick) is two events: the old
/// generation's `Despawned`, then the new one's `Spawned`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntityEvent {
    /// A new entity (its state is already in the registry).
    Spawned {
        /// Its id.
        id: u32,
        /// Its generation ([`ClientEntity::generation`]).
        generation: u32,
        /// Its kind.
        kind: KindId,
    },
    /// An entity is gone.
    Despawned {
        /// Its id.
        id: u32,
        /// The generation that went.
        generation: u32,
    },
}

impl EntityEvent {
    /// The entity's id.
    pub fn id(&self) -> u32 {
        match *self {
            Self::Spawned { id, .. } | Self::Despawned { id, .. } => id,
        }
    }
}

/// What decoding one snapshot did.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The snapshot's tick: acknowledge it through the session
    /// ([`lagless_core::ClientSession::acknowledge_snapshot`]).
    pub tick: Tick,
    /// The baseline it was a delta against.
    pub baseline: Option<Tick>,
    /// Entities whose shown state it changed (updated or spawned), ascending.
    pub updated: Vec<u32>,
}

/// Counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicationClientStats {
    /// Snapshots decoded.
    pub decoded: u64,
    /// Snapshots no newer than one decoded already (reordered): skipped.
    pub stale: u64,
    /// Malformed snapshots.
    pub malformed: u64,
    /// Deltas against a baseline no longer held.
    pub missing_baseline: u64,
    /// Updates of an entity the baseline lacks.
    pub unknown_entity: u64,
    /// Events dropped because nobody polled them.
    pub events_dropped: u64,
    /// Snapshots whose checksum said the view they leave the client with is not the one
    /// the server believes it holds: refused, and a snapshot against nothing asked for
    /// ([`ReplicationClient::needs_resync`]). Zero unless something is wrong.
    pub view_mismatches: u64,
}

/// A snapshot the client decoded: what a later one may go against or merge.
#[derive(Debug, Clone)]
struct Held {
    tick: Tick,
    view: View,
    carried: Vec<(u32, Option<Entry>)>,
}

/// The snapshots a client holds, as the decoder looks them up.
struct HeldViews<'a>(&'a VecDeque<Held>);

impl HeldViews<'_> {
    fn find(&self, tick: Tick) -> Option<&Held> {
        let i = self.0.binary_search_by_key(&tick, |h| h.tick).ok()?;
        Some(&self.0[i])
    }
}

impl History for HeldViews<'_> {
    fn view(&self, tick: Tick) -> Option<&View> {
        self.find(tick).map(|h| &h.view)
    }

    fn carried(&self, tick: Tick) -> Option<&[(u32, Option<Entry>)]> {
        self.find(tick).map(|h| &h.carried[..])
    }
}

/// The client's side of replication.
#[derive(Debug, Clone)]
pub struct ReplicationClient {
    schema: Arc<Schema>,
    config: ClientConfig,
    /// Per snapshot decoded, ascending: its view and what it carried.
    views: VecDeque<Held>,
    /// What the registry shows: per entity, the newest state decoded (kept apart from
    /// `views`, which [`ReplicationClient::forget_baselines`] may clear).
    shown: View,
    /// Entities a snapshot despawned, by its tick, while a view or a merge may still
    /// hold an older state of them.
    gone: BTreeMap<u32, Tick>,
    newest: Option<Tick>,
    entities: BTreeMap<u32, ClientEntity>,
    events: VecDeque<EntityEvent>,
    /// The client holds no view the server may send a delta against.
    needs_resync: bool,
    stats: ReplicationClientStats,
}

impl ReplicationClient {
    /// A client for `schema` (the server's).
    pub fn new(schema: Schema, config: ClientConfig) -> Self {
        Self {
            schema: Arc::new(schema),
            config,
            views: VecDeque::new(),
            shown: View::new(),
            gone: BTreeMap::new(),
            newest: None,
            entities: BTreeMap::new(),
            events: VecDeque::new(),
            needs_resync: false,
            stats: ReplicationClientStats::default(),
        }
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Counters.
    pub fn stats(&self) -> &ReplicationClientStats {
        &self.stats
    }

    /// The newest snapshot decoded.
    pub fn newest(&self) -> Option<Tick> {
        self.newest
    }

    /// Decodes the snapshot of `tick`. `Ok(None)` when it is not newer than the newest
    /// decoded (reordered on the way): the newer one already says more. Errors are
    /// counted as well as returned; the registry is untouched by a refused snapshot.
    pub fn receive(
        &mut self,
        tick: Tick,
        bytes: &[u8],
    ) -> Result<Option<Applied>, ReplicationError> {
        if self.newest().is_some_and(|n| tick <= n) {
            self.stats.stale += 1;
            return Ok(None);
        }
        let decoded = snapshot::decode(
            &self.schema,
            self.config.limits,
            self.config.tick_hz,
            bytes,
            tick,
            &HeldViews(&self.views),
        );
        let decoded = match decoded {
            Ok(d) => d,
            Err(e) => {
                match e {
                    ReplicationError::MissingBaseline(_) => self.stats.missing_baseline += 1,
                    ReplicationError::UnknownEntity(_) => self.stats.unknown_entity += 1,
                    _ => self.stats.malformed += 1,
                }
                return Err(e);
            }
        };
        if snapshot::fold_checksum(decoded.view.checksum()) != decoded.checksum {
            self.stats.view_mismatches += 1;
            tracing::warn!(
                tick = tick.0,
                baseline = ?decoded.baseline.map(|b| b.0),
                expected = decoded.checksum,
                held = snapshot::fold_checksum(decoded.view.checksum()),
                entries = decoded.changes.len(),
                "replicated view differs from the server's; asking for a snapshot against nothing"
            );
            // None of the views can be trusted as a baseline any more: which of them went
            // wrong is unknown. The registry stays as it was until the new snapshot.
            self.views.clear();
            self.needs_resync = true;
            return Err(ReplicationError::ViewMismatch {
                tick,
                baseline: decoded.baseline,
            });
        }
        if decoded.baseline.is_none() {
            self.needs_resync = false;
        }
        self.stats.decoded += 1;
        // What the client shows is the newest view, exactly as the server tracks it.
        let shown = self.show(&decoded, tick);
        let previous = std::mem::replace(&mut self.shown, shown);
        let shown = self.shown.clone();
        let schema = Arc::clone(&self.schema);
        let mut updated = Vec::new();
        let mut events = Vec::new();
        previous.diff(&shown, |id, old, new| {
            let Some(new) = new else {
                self.entities.remove(&id);
                if let Some(old) = old {
                    events.push(EntityEvent::Despawned {
                        id,
                        generation: old.generation,
                    });
                }
                return;
            };
            let Some(kind) = schema.get(new.kind) else {
                return;
            };
            // A spawn sent again (its first send's acknowledgement was not back yet) is
            // the entity the client shows already: the generation tells them apart.
            let fresh = old.is_none_or(|o| o.generation != new.generation || o.kind != new.kind);
            if let Some(old) = old.filter(|_| fresh) {
                events.push(EntityEvent::Despawned {
                    id,
                    generation: old.generation,
                });
            }
            self.entities.insert(
                id,
                ClientEntity {
                    kind: new.kind,
                    generation: new.generation,
                    tick: new.tick,
                    codes: Arc::clone(&new.codes),
                    values: field::values_of(kind, &new.codes),
                },
            );
            if fresh {
                events.push(EntityEvent::Spawned {
                    id,
                    generation: new.generation,
                    kind: new.kind,
                });
            }
            updated.push(id);
        });
        for e in events {
            self.event(e);
        }
        // The server never goes back to a baseline older than one it used, nor merges a
        // snapshot more than the window older than its baseline.
        if let Some(b) = decoded.baseline {
            let keep = Tick(b.0.saturating_sub(MERGE_WINDOW));
            while self.views.front().is_some_and(|h| h.tick < keep) {
                self.views.pop_front();
            }
        }
        self.newest = Some(tick);
        self.views.push_back(Held {
            tick,
            view: decoded.view,
            carried: decoded.carried,
        });
        while self.views.len() > self.config.history.max(1) {
            self.views.pop_front();
        }
        Ok(Some(Applied {
            tick,
            baseline: decoded.baseline,
            updated,
        }))
    }

    /// What the client shows after snapshot `tick`: what it lists; for the rest, the
    /// state shown before, unless the view it decoded against holds something newer of
    /// the entity (the newest snapshot decoded that said anything of it wins).
    fn show(&mut self, decoded: &Decoded, tick: Tick) -> View {
        let mut shown = self.shown.clone();
        for &(id, change) in &decoded.changes {
            if change == Change::Despawned {
                shown.set(id, None);
                self.gone.insert(id, tick);
            } else {
                shown.set(id, decoded.view.get(id).cloned());
                self.gone.remove(&id);
            }
        }
        if let Some(b) = decoded.baseline {
            let listed = |id: u32| {
                decoded
                    .changes
                    .binary_search_by_key(&id, |(i, _)| *i)
                    .is_ok()
            };
            let gone = &self.gone;
            let view = &decoded.view;
            let mut fixes = Vec::new();
            self.shown.diff(view, |id, old, new| {
                // When each side last heard of the entity.
                let shown_at = old.map(|o| o.tick).or_else(|| gone.get(&id).copied());
                let view_at = new.map(|n| n.tick).or_else(|| view.gone_at(id));
                if !listed(id) && view_at > shown_at {
                    fixes.push((id, new.cloned()));
                }
            });
            for (id, entry) in fixes {
                shown.set(id, entry);
            }
            let keep = Tick(b.0.saturating_sub(MERGE_WINDOW));
            self.gone.retain(|_, t| *t >= keep);
        }
        if let Some(members) = &decoded.members {
            let strays: Vec<u32> = shown
                .iter()
                .map(|(id, _)| id)
                .filter(|id| members.binary_search(id).is_err())
                .collect();
            for id in strays {
                shown.set(id, None);
            }
        }
        shown
    }

    fn event(&mut self, e: EntityEvent) {
        if self.events.len() >= self.config.max_events.max(1) {
            self.events.pop_front();
            self.stats.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    /// The next spawn or despawn, oldest first.
    pub fn poll_event(&mut self) -> Option<EntityEvent> {
        self.events.pop_front()
    }

    /// Entity `id`'s newest known state.
    pub fn get(&self, id: u32) -> Option<&ClientEntity> {
        self.entities.get(&id)
    }

    /// Every known entity, ascending id.
    pub fn entities(&self) -> impl Iterator<Item = (u32, &ClientEntity)> {
        self.entities.iter().map(|(id, e)| (*id, e))
    }

    /// Known entities.
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// True when no entity is known.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Kind `kind`'s declaration.
    pub fn kind(&self, kind: KindId) -> Option<&Kind> {
        self.schema.get(kind)
    }

    /// Entity `id`'s state carried forward to `tick` by dead reckoning: every position with
    /// a declared velocity moves by it over the time since the state's own tick, at most
    /// `max_secs`. For an entity the budget has held back, this is a better guess of where
    /// it is than the state itself; a fresh or resting one is unchanged.
    pub fn values_at(&self, id: u32, tick: Tick, max_secs: f32) -> Option<Vec<f32>> {
        let e = self.entities.get(&id)?;
        let kind = self.schema.get(e.kind)?;
        let mut values = e.values.clone();
        let hz = self.config.tick_hz.max(1) as f32;
        let dt = (tick.0.saturating_sub(e.tick.0) as f32 / hz).clamp(0.0, max_secs.max(0.0));
        if dt > 0.0 {
            for f in kind.fields() {
                if let Some(v) = f.velocity.map(|v| &kind.fields()[v]) {
                    for k in 0..f.ty.width() {
                        values[f.offset + k] += values[v.offset + k] * dt;
                    }
                }
            }
        }
        Some(values)
    }

    /// Every entity held, with a typed reader over its state carried forward to `tick`
    /// as [`Self::values_at`] does (at most `max_secs`): what a game reads its world
    /// from each frame.
    pub fn read_all_at(
        &self,
        tick: Tick,
        max_secs: f32,
        mut f: impl FnMut(u32, &ClientEntity, StateReader<'_>),
    ) {
        for (id, e) in self.entities() {
            let (Some(kind), Some(values)) =
                (self.kind(e.kind), self.values_at(id, tick, max_secs))
            else {
                continue;
            };
            f(id, e, StateReader::new(kind, &values));
        }
    }

    /// A typed reader over entity `id`'s state.
    pub fn reader(&self, id: u32) -> Option<StateReader<'_>> {
        let e = self.entities.get(&id)?;
        Some(StateReader::new(self.schema.get(e.kind)?, &e.values))
    }

    /// This registry with `part`'s entities laid over it: every entity held here, and
    /// those `part` holds at `part`'s state, its newest tick the newer of the two. A
    /// snapshot's essential part (the predicted entities alone) decodes into a registry
    /// of its own; laid over the full one it is what a predicted world reconciles from
    /// when the rest of that snapshot is late: its own entities at the newer tick, the
    /// others as last known. The result holds no baselines: decode nothing into it.
    pub fn overlaid_with(&self, part: &ReplicationClient) -> ReplicationClient {
        let mut entities = self.entities.clone();
        for (&id, e) in &part.entities {
            entities.insert(id, e.clone());
        }
        ReplicationClient {
            schema: Arc::clone(&self.schema),
            config: self.config.clone(),
            views: VecDeque::new(),
            shown: View::new(),
            gone: BTreeMap::new(),
            newest: self.newest.max(part.newest),
            entities,
            events: VecDeque::new(),
            needs_resync: false,
            stats: ReplicationClientStats::default(),
        }
    }

    /// Starts over for a new server timeline (the session started over,
    /// [`lagless_core::ClientSession::epoch`]: the server restarted, or the ticks it went
    /// by were bogus): every entity shown is despawned (an event each), every view and the
    /// newest tick are forgotten, so the next snapshot decodes whatever its tick, and a
    /// snapshot against nothing is asked for ([`ReplicationClient::needs_resync`]).
    /// Counters are kept.
    pub fn start_over(&mut self) {
        let gone: Vec<EntityEvent> = self
            .entities
            .iter()
            .map(|(&id, e)| EntityEvent::Despawned {
                id,
                generation: e.generation,
            })
            .collect();
        for e in gone {
            self.event(e);
        }
        self.entities.clear();
        self.views.clear();
        self.shown = View::new();
        self.gone.clear();
        self.newest = None;
        self.needs_resync = true;
    }

    /// Forgets every view (as after a level reload): the next deltas fail with
    /// [`ReplicationError::MissingBaseline`] until the server sends against nothing,
    /// which [`ReplicationClient::needs_resync`] asks for.
    pub fn forget_baselines(&mut self) {
        self.views.clear();
        self.needs_resync = true;
    }

    /// True while the client holds no view the server may send a delta against (after a
    /// view mismatch, or [`ReplicationClient::forget_baselines`]), until a snapshot against
    /// nothing decodes: tell the server
    /// ([`lagless_core::ClientSession::set_resync`]), and it sends one.
    pub fn needs_resync(&self) -> bool {
        self.needs_resync
    }
}
