//! The client side: decode snapshots against the views it holds, and keep the newest
//! known state of every entity (the registry) with spawn and despawn events.

use crate::error::ReplicationError;
use crate::field;
use crate::schema::{Kind, KindId, Schema};
use crate::snapshot::{self, Change, Limits};
use crate::state::StateReader;
use crate::view::View;
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
    /// Views (decoded snapshots) kept as possible baselines. At least the server's
    /// [`crate::ServerConfig::max_in_flight`], so the server never refers to one the client
    /// dropped.
    pub history: usize,
    /// Events kept until polled; older ones are dropped.
    pub max_events: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            tick_hz: 64,
            limits: Limits::default(),
            history: 272,
            max_events: 1 << 16,
        }
    }
}

/// The newest known state of one entity.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientEntity {
    /// Its kind.
    pub kind: KindId,
    /// The tick of the snapshot this state came in.
    pub tick: Tick,
    /// The state as codes.
    pub codes: Arc<[i32]>,
    /// The state as values; read them with [`ReplicationClient::reader`].
    pub values: Vec<f32>,
}

/// Something that happened to the set of entities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntityEvent {
    /// A new entity (its state is already in the registry).
    Spawned(u32),
    /// An entity is gone.
    Despawned(u32),
}

/// What decoding one snapshot did.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The snapshot's tick: acknowledge it through the session
    /// ([`lagless_core::ClientSession::acknowledge_snapshot`]).
    pub tick: Tick,
    /// The baseline it was a delta against.
    pub baseline: Option<Tick>,
    /// Entities whose state it carried (updated or spawned), ascending.
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
    /// Spawns beyond the entity limit, dropped.
    pub over_limit: u64,
    /// Events dropped because nobody polled them.
    pub events_dropped: u64,
}

/// The client's side of replication.
#[derive(Debug, Clone)]
pub struct ReplicationClient {
    schema: Arc<Schema>,
    config: ClientConfig,
    views: VecDeque<(Tick, View)>,
    entities: BTreeMap<u32, ClientEntity>,
    events: VecDeque<EntityEvent>,
    stats: ReplicationClientStats,
}

impl ReplicationClient {
    /// A client for `schema` (the server's).
    pub fn new(schema: Schema, config: ClientConfig) -> Self {
        Self {
            schema: Arc::new(schema),
            config,
            views: VecDeque::new(),
            entities: BTreeMap::new(),
            events: VecDeque::new(),
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
        self.views.back().map(|(t, _)| *t)
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
        let views = &self.views;
        let decoded = snapshot::decode(
            &self.schema,
            self.config.limits,
            self.config.tick_hz,
            bytes,
            tick,
            |at| {
                views
                    .binary_search_by_key(&at, |(t, _)| *t)
                    .ok()
                    .map(|i| &views[i].1)
            },
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
        self.stats.decoded += 1;
        let mut updated = Vec::new();
        for &(id, change) in &decoded.changes {
            match change {
                Change::Despawned => {
                    if self.entities.remove(&id).is_some() {
                        self.event(EntityEvent::Despawned(id));
                    }
                }
                Change::Updated | Change::Spawned | Change::Replaced => {
                    let Some(entry) = decoded.view.get(id) else {
                        continue;
                    };
                    let schema = Arc::clone(&self.schema);
                    let Some(kind) = schema.get(entry.kind) else {
                        continue;
                    };
                    let known = self.entities.get(&id).map(|e| e.kind);
                    // A spawn the client already has (it came in a snapshot the server
                    // had not heard of yet) is an update; a replacement, or a spawn of
                    // another kind under a known id, is a new entity.
                    let new = match (change, known) {
                        (_, None) => true,
                        (Change::Replaced, Some(_)) => true,
                        (_, Some(k)) => k != entry.kind,
                    };
                    if new && known.is_some() {
                        self.entities.remove(&id);
                        self.event(EntityEvent::Despawned(id));
                    }
                    if new && self.entities.len() >= self.config.limits.max_entities {
                        self.stats.over_limit += 1;
                        continue;
                    }
                    self.entities.insert(
                        id,
                        ClientEntity {
                            kind: entry.kind,
                            tick,
                            codes: Arc::clone(&entry.codes),
                            values: field::values_of(kind, &entry.codes),
                        },
                    );
                    if new {
                        self.event(EntityEvent::Spawned(id));
                    }
                    updated.push(id);
                }
            }
        }
        if let Some(members) = &decoded.members {
            let gone: Vec<u32> = self
                .entities
                .keys()
                .copied()
                .filter(|id| members.binary_search(id).is_err())
                .collect();
            for id in gone {
                self.entities.remove(&id);
                self.event(EntityEvent::Despawned(id));
            }
        }
        // The server never goes back to a baseline older than one it used.
        if let Some(b) = decoded.baseline {
            while self.views.front().is_some_and(|(t, _)| *t < b) {
                self.views.pop_front();
            }
        }
        self.views.push_back((tick, decoded.view));
        while self.views.len() > self.config.history.max(1) {
            self.views.pop_front();
        }
        Ok(Some(Applied {
            tick,
            baseline: decoded.baseline,
            updated,
        }))
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

    /// A typed reader over entity `id`'s state.
    pub fn reader(&self, id: u32) -> Option<StateReader<'_>> {
        let e = self.entities.get(&id)?;
        Some(StateReader::new(self.schema.get(e.kind)?, &e.values))
    }

    /// Forgets every view (as after a level reload): the next deltas fail with
    /// [`ReplicationError::MissingBaseline`] until the server sends against nothing.
    pub fn forget_baselines(&mut self) {
        self.views.clear();
    }
}
