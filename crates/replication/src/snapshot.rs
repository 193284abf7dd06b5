//! The snapshot format: a list of entity changes against a baseline view.
//!
//! ```text
//! base_age               var; 0: no baseline (against an empty view), else tick - baseline
//! [merged]               only with a baseline: var span (at most 64), then if span > 0 one
//!                        bit (1: every one of the span's ticks) or else span bits, bit i
//!                        for tick baseline - 1 - i (the top one set, not all set): the
//!                        snapshots the client acknowledged that the baseline's view does
//!                        not hold yet, merged into it before the entries apply
//! [members]              only without a baseline: 1 bit, then if set a var count and the
//!                        ids (gaps) of every entity the client should show: sent after
//!                        the server lost track of the client, so entities that went
//!                        meanwhile do not linger
//! count                  var; entries that follow, ids ascending
//! entry { id_gap op .. } id_gap: var, id - previous id - 1 (the first: the id)
//!   op 0                 update: the entity's delta against the baseline's (field.rs)
//!   op 10                despawn
//!   op 11 kind gen state spawn (or replace): var kind, var generation (how many times
//!                        the server spawned this id), the state against zero codes
//! checksum               16 bits: the view the client holds after decoding this snapshot
//!                        (the baseline's with the entries applied), folded from
//!                        [`View::checksum`]; a client whose view differs refuses the
//!                        snapshot and asks for one against nothing
//! ```
//!
//! The view after a snapshot is its baseline's view with the merged snapshots' entries
//! merged in ([`View::merge`]: per entity, the newest) and then its own entries applied;
//! entities it does not list are as there. A client therefore decodes a snapshot only
//! against a view it holds and snapshots it decoded, and the server only encodes against
//! a view and snapshots the client has acknowledged. A change is sent once: the next
//! snapshots leave it out while it is in flight, and once acknowledged it is merged into
//! their baseline; only a snapshot the acknowledgements show lost has its changes sent
//! again (Fiedler's "Snapshot Compression": Quake 3's acknowledgement bits, per snapshot).

use crate::error::ReplicationError;
use crate::field::{self, Motion};
use crate::schema::{KindId, Schema};
use crate::view::{Entry, MERGE_WINDOW, View, codes_hash};
use lagless_core::Tick;
use lagless_wire::{BitReader, BitWriter, WireError};
use std::sync::Arc;

/// What a snapshot did to one entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// New state of an entity the baseline held.
    Updated,
    /// A new entity.
    Spawned,
    /// A new entity in place of the baseline's one with the same id (the old one is
    /// gone). On the wire, a spawn.
    Replaced,
    /// Removed.
    Despawned,
}

/// Counts a decoder accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most entities in a view.
    pub max_entities: usize,
    /// Largest entity id.
    pub max_id: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_entities: 65_536,
            max_id: (1 << 20) - 1,
        }
    }
}

/// The header of a snapshot; `merged` (bit `i`: tick baseline - 1 - i) only with a
/// baseline, `members` only without one (`base_age` 0).
pub(crate) fn write_header(
    w: &mut BitWriter,
    base_age: u32,
    merged: u64,
    members: Option<&[u32]>,
    count: usize,
) {
    w.write_var_u32(base_age);
    if base_age != 0 {
        let span = 64 - merged.leading_zeros();
        w.write_var_u32(span);
        if span > 0 {
            let all = merged.count_ones() == span;
            w.write_bool(all);
            if !all {
                w.write_bits_u64(merged, span);
            }
        }
    }
    if base_age == 0 {
        w.write_bool(members.is_some());
        if let Some(ids) = members {
            w.write_var_u32(ids.len() as u32);
            let mut next = 0u32;
            for &id in ids {
                w.write_var_u32(id - next);
                next = id + 1;
            }
        }
    }
    w.write_var_u32(count as u32);
}

fn read_count(r: &mut BitReader<'_>, limits: Limits) -> Result<usize, ReplicationError> {
    let count = r.read_var_u32()? as usize;
    if count > limits.max_entities {
        return Err(ReplicationError::TooManyEntities {
            count,
            max: limits.max_entities,
        });
    }
    Ok(count)
}

/// An entry's operation bits.
pub(crate) fn write_op(w: &mut BitWriter, change: Change) {
    match change {
        Change::Updated => w.write_bool(false),
        Change::Despawned => w.write_bits(0b01, 2),
        Change::Spawned | Change::Replaced => w.write_bits(0b11, 2),
    }
}

/// The payload of a spawn: kind, generation and full state.
pub(crate) fn write_spawn_payload(
    w: &mut BitWriter,
    schema: &Schema,
    kind: KindId,
    generation: u32,
    codes: &[i32],
) {
    w.write_var_u32(u32::from(kind));
    w.write_var_u32(generation);
    if let Some(k) = schema.get(kind) {
        field::write_entity(w, k, &field::zero_codes(k), codes, NO_MOTION);
    }
}

/// A spawn's state is diffed against zero codes, where there is nothing to predict from.
const NO_MOTION: Motion = Motion { age: 0, tick_hz: 0 };

/// The bits a snapshot's merged set (see the module docs) takes in its header.
pub(crate) fn merged_bits(merged: u64) -> usize {
    let span = 64 - merged.leading_zeros();
    let set = match span {
        0 => 0,
        s if merged.count_ones() == s => 1,
        s => 1 + s as usize,
    };
    lagless_wire::var_u32_bits(span) as usize + set
}

/// Reads a snapshot's merged set: strictly the form [`write_header`] writes.
fn read_merged(r: &mut BitReader<'_>) -> Result<u64, ReplicationError> {
    let span = r.read_var_u32()?;
    if span > MERGE_WINDOW {
        return Err(WireError::Invalid {
            what: "merged span",
        }
        .into());
    }
    if span == 0 {
        return Ok(0);
    }
    let all_bits = if span == 64 {
        u64::MAX
    } else {
        (1u64 << span) - 1
    };
    if r.read_bool()? {
        return Ok(all_bits);
    }
    let bits = r.read_bits_u64(span)?;
    if bits >> (span - 1) != 1 || bits == all_bits {
        return Err(WireError::Invalid {
            what: "merged bits not in their shortest form",
        }
        .into());
    }
    Ok(bits)
}

/// A decoded snapshot.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// The baseline it was decoded against, `None` for none.
    pub baseline: Option<Tick>,
    /// The snapshots merged into the baseline before the entries applied, ascending.
    pub merged: Vec<Tick>,
    /// What it carried, ascending by id (`None`: a despawn): what a later snapshot
    /// merges of it.
    pub carried: Vec<(u32, Option<Entry>)>,
    /// The view after it.
    pub view: View,
    /// What it changed, by id ascending.
    pub changes: Vec<(u32, Change)>,
    /// Every entity the client should show, when the server lost track of the client.
    pub members: Option<Vec<u32>>,
    /// The checksum the server sent of `view` ([`View::checksum`], folded to 16 bits).
    pub checksum: u16,
}

/// The 16 bits of a view's checksum a snapshot carries: every bit of the sum counts.
pub(crate) fn fold_checksum(sum: u64) -> u16 {
    (sum ^ (sum >> 16) ^ (sum >> 32) ^ (sum >> 48)) as u16
}

/// Ends a snapshot with the checksum of the view its client holds after decoding it.
pub(crate) fn write_checksum(w: &mut BitWriter, sum: u64) {
    w.write_bits(u32::from(fold_checksum(sum)), 16);
}

/// What a decoder looks up: the view after a snapshot it decoded, and what that snapshot
/// carried, by its tick.
pub(crate) trait History {
    /// The view after the snapshot of `tick`.
    fn view(&self, tick: Tick) -> Option<&View>;
    /// What the snapshot of `tick` carried, ascending by id.
    fn carried(&self, tick: Tick) -> Option<&[(u32, Option<Entry>)]>;
}

/// Decodes a snapshot of `tick` against what `history` holds.
pub(crate) fn decode(
    schema: &Schema,
    limits: Limits,
    tick_hz: u32,
    bytes: &[u8],
    tick: Tick,
    history: &impl History,
) -> Result<Decoded, ReplicationError> {
    let mut r = BitReader::new(bytes);
    let age = r.read_var_u32()?;
    let mut members = None;
    let mut merged = Vec::new();
    let (baseline, mut view) = if age == 0 {
        if r.read_bool()? {
            let n = read_count(&mut r, limits)?;
            let mut ids = Vec::with_capacity(n.min(4096));
            let mut next: u64 = 0;
            for _ in 0..n {
                let id = next + u64::from(r.read_var_u32()?);
                if id > u64::from(limits.max_id) {
                    return Err(ReplicationError::IdOutOfRange(id));
                }
                ids.push(id as u32);
                next = id + 1;
            }
            members = Some(ids);
        }
        (None, View::new())
    } else {
        let at = Tick(tick.0.checked_sub(age).ok_or(WireError::Invalid {
            what: "baseline before tick 0",
        })?);
        let bits = read_merged(&mut r)?;
        let mut view = history
            .view(at)
            .ok_or(ReplicationError::MissingBaseline(at))?
            .clone();
        for i in (0..MERGE_WINDOW).rev().filter(|i| bits >> i & 1 == 1) {
            let t = Tick(at.0.checked_sub(1 + i).ok_or(WireError::Invalid {
                what: "merged snapshot before tick 0",
            })?);
            let carried = history
                .carried(t)
                .ok_or(ReplicationError::MissingBaseline(t))?;
            view.merge(t, carried);
            merged.push(t);
        }
        if view.len() > limits.max_entities {
            return Err(ReplicationError::TooManyEntities {
                count: view.len(),
                max: limits.max_entities,
            });
        }
        (Some(at), view)
    };
    let count = read_count(&mut r, limits)?;
    let mut changes = Vec::with_capacity(count.min(4096));
    let mut next: u64 = 0;
    for _ in 0..count {
        let id = next + u64::from(r.read_var_u32()?);
        if id > u64::from(limits.max_id) {
            return Err(ReplicationError::IdOutOfRange(id));
        }
        let id = id as u32;
        next = u64::from(id) + 1;
        let change = if !r.read_bool()? {
            let from = view
                .get(id)
                .ok_or(ReplicationError::UnknownEntity(id))?
                .clone();
            let kind = schema
                .get(from.kind)
                .ok_or(ReplicationError::UnknownKind(u32::from(from.kind)))?;
            let motion = Motion {
                age: tick.0.wrapping_sub(from.tick.0),
                tick_hz,
            };
            // An update may equal the baseline: the client showed a newer state that the
            // entity has since gone back from.
            let codes = field::read_entity(&mut r, kind, &from.codes, motion)?;
            view.set(
                id,
                Some(Entry {
                    hash: codes_hash(&codes),
                    codes: Arc::from(codes),
                    tick,
                    ..from
                }),
            );
            Change::Updated
        } else if !r.read_bool()? {
            view.remove_at(id, tick);
            Change::Despawned
        } else {
            let k = r.read_var_u32()?;
            let kind_id = KindId::try_from(k).map_err(|_| ReplicationError::UnknownKind(k))?;
            let generation = r.read_var_u32()?;
            let kind = schema
                .get(kind_id)
                .ok_or(ReplicationError::UnknownKind(k))?;
            let codes = field::read_entity(&mut r, kind, &field::zero_codes(kind), NO_MOTION)?;
            let replaced = view.get(id).is_some();
            view.set(
                id,
                Some(Entry {
                    kind: kind_id,
                    generation,
                    version: 0,
                    hash: codes_hash(&codes),
                    position: None,
                    velocity: [0.0; 3],
                    tick,
                    codes: Arc::from(codes),
                }),
            );
            if replaced {
                Change::Replaced
            } else {
                Change::Spawned
            }
        };
        if view.len() > limits.max_entities {
            return Err(ReplicationError::TooManyEntities {
                count: view.len(),
                max: limits.max_entities,
            });
        }
        changes.push((id, change));
    }
    let checksum = r.read_bits(16)? as u16;
    r.finish()?;
    let carried = changes
        .iter()
        .map(|&(id, change)| {
            let entry = (change != Change::Despawned)
                .then(|| view.get(id).cloned())
                .flatten();
            (id, entry)
        })
        .collect();
    // No merge into a later view asks about despawns older than this.
    view.forget_gone_before(Tick(tick.0.saturating_sub(MERGE_WINDOW)));
    Ok(Decoded {
        baseline,
        merged,
        carried,
        view,
        changes,
        members,
        checksum,
    })
}
