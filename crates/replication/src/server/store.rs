//! The entity store: the state of every live entity as the game last wrote it.
//!
//! Each state carries what the rest of the server asks of it often enough that working
//! it out again would cost: a version (equal versions mean equal codes, so a delta can be
//! shared and a held state recognised without comparing codes), a hash of the codes, and
//! the position and velocity the codes hold (for relevance and for how wrong a client's
//! view is).

use crate::error::ReplicationError;
use crate::field;
use crate::schema::{KindId, Schema};
use crate::snapshot::Limits;
use crate::state::StateWriter;
use crate::view::{Entry, codes_hash};
use lagless_core::Tick;
use std::sync::Arc;

/// A live entity.
#[derive(Debug, Clone)]
pub(super) struct Live {
    pub(super) kind: KindId,
    pub(super) generation: u32,
    pub(super) version: u64,
    pub(super) codes: Arc<[i32]>,
    /// A hash of `codes` (the view's entry hash), a cheap test of whether two states may
    /// be equal before their codes are compared.
    pub(super) hash: u64,
    /// Its position, for relevance.
    pub(super) position: Option<[f32; 3]>,
    /// The velocity declared for its position (zero if none), for what a client
    /// dead-reckons from this state.
    pub(super) velocity: [f32; 3],
}

impl Live {
    /// What a view holds of this state once a snapshot of `tick` carried it.
    pub(super) fn entry(&self, tick: Tick) -> Entry {
        Entry {
            kind: self.kind,
            generation: self.generation,
            version: self.version,
            hash: self.hash,
            position: self.position,
            velocity: self.velocity,
            tick,
            codes: Arc::clone(&self.codes),
        }
    }
}

/// Every entity, by id.
#[derive(Debug, Default)]
pub(super) struct Store {
    entities: Vec<Option<Live>>,
    live: usize,
    /// Per id, the generation of its newest incarnation: an id's spawns are counted, so
    /// a despawn and a spawn of the same id (in one tick, or while snapshots were lost)
    /// are two entities on every client.
    generations: Vec<u32>,
    next_version: u64,
}

impl Store {
    /// Live entities.
    pub(super) fn len(&self) -> usize {
        self.live
    }

    /// Ids ever used, plus one: the length of every per-entity array.
    pub(super) fn slots(&self) -> usize {
        self.entities.len()
    }

    /// Entity `id`, if it lives.
    pub(super) fn get(&self, id: u32) -> Option<&Live> {
        self.entities.get(id as usize)?.as_ref()
    }

    /// Live entity ids, ascending.
    pub(super) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.entities
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|_| i as u32))
    }

    /// The lowest id no entity lives under.
    pub(super) fn free_id(&self) -> u32 {
        self.entities
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.entities.len()) as u32
    }

    /// Spawns an entity of `kind` under `id`, its state written by `write`.
    pub(super) fn spawn(
        &mut self,
        schema: &Schema,
        limits: &Limits,
        id: u32,
        kind: KindId,
        write: impl FnOnce(&mut StateWriter),
    ) -> Result<(), ReplicationError> {
        if id > limits.max_id {
            return Err(ReplicationError::IdOutOfRange(u64::from(id)));
        }
        if self.live >= limits.max_entities {
            return Err(ReplicationError::TooManyEntities {
                count: self.live + 1,
                max: limits.max_entities,
            });
        }
        if self.get(id).is_some() {
            return Err(ReplicationError::IdTaken(id));
        }
        let codes = write_codes(schema, kind, write)?;
        if self.entities.len() <= id as usize {
            self.entities.resize(id as usize + 1, None);
        }
        if self.generations.len() <= id as usize {
            self.generations.resize(id as usize + 1, 0);
        }
        let generation = self.generations[id as usize].wrapping_add(1);
        self.generations[id as usize] = generation;
        self.next_version += 1;
        let (position, velocity) = motion_in(schema, kind, &codes);
        self.entities[id as usize] = Some(Live {
            kind,
            generation,
            version: self.next_version,
            hash: codes_hash(&codes),
            codes: Arc::from(codes),
            position,
            velocity,
        });
        self.live += 1;
        Ok(())
    }

    /// Sets entity `id`'s state. Returns whether its codes changed.
    pub(super) fn update(
        &mut self,
        schema: &Schema,
        id: u32,
        write: impl FnOnce(&mut StateWriter),
    ) -> Result<bool, ReplicationError> {
        let kind = self.get(id).ok_or(ReplicationError::NoSuchEntity(id))?.kind;
        let codes = write_codes(schema, kind, write)?;
        let (position, velocity) = motion_in(schema, kind, &codes);
        let Some(Some(e)) = self.entities.get_mut(id as usize) else {
            return Err(ReplicationError::NoSuchEntity(id));
        };
        if e.codes[..] == codes[..] {
            return Ok(false);
        }
        // A new version only when the codes change: equal versions mean equal codes.
        self.next_version += 1;
        e.version = self.next_version;
        e.hash = codes_hash(&codes);
        e.codes = Arc::from(codes);
        e.position = position;
        e.velocity = velocity;
        Ok(true)
    }

    /// Removes entity `id`.
    pub(super) fn despawn(&mut self, id: u32) -> Result<(), ReplicationError> {
        match self.entities.get_mut(id as usize) {
            Some(slot @ Some(_)) => {
                *slot = None;
                self.live -= 1;
                Ok(())
            }
            _ => Err(ReplicationError::NoSuchEntity(id)),
        }
    }
}

/// The codes `write` gives an entity of `kind`.
fn write_codes(
    schema: &Schema,
    kind: KindId,
    write: impl FnOnce(&mut StateWriter),
) -> Result<Vec<i32>, ReplicationError> {
    let k = schema
        .get(kind)
        .ok_or(ReplicationError::UnknownKind(u32::from(kind)))?;
    let mut w = StateWriter::new(k);
    write(&mut w);
    Ok(w.finish()?)
}

/// The position codes of `kind` hold (its [`crate::Kind::position_field`]) and that
/// position's declared velocity (zero if none), padded to three components: for
/// relevance, and for how far what a client shows is from the truth.
fn motion_in(schema: &Schema, kind: KindId, codes: &[i32]) -> (Option<[f32; 3]>, [f32; 3]) {
    let Some(k) = schema.get(kind) else {
        return (None, [0.0; 3]);
    };
    let Some(f) = k.position_field() else {
        return (None, [0.0; 3]);
    };
    let read = |f: &crate::schema::Field| {
        let mut v = [0.0f32; 3];
        let n = f.ty.width().min(3);
        if let Some(c) = codes.get(f.offset..f.offset + n) {
            field::dequantize(f, c, &mut v[..n]);
        }
        v
    };
    let velocity = f
        .velocity
        .and_then(|v| k.fields().get(v))
        .map_or([0.0; 3], read);
    (Some(read(f)), velocity)
}
