//! Writing a snapshot: the header (with the member list when the server lost track of
//! what the client shows), the chosen entries with their cached bodies, and the
//! checksum of the view the client holds once it decodes it.

use super::Sight;
use super::cache::BodyCache;
use super::select::Chosen;
use super::store::Store;
use crate::schema::Schema;
use crate::snapshot::{self, Change};
use crate::view::{Entry, View};
use lagless_core::Tick;
use lagless_wire::BitWriter;

/// What the snapshot's `chosen` entries (ascending) leave the client's view holding of
/// each, appended to `changes` (an emptied list, for its memory): the snapshot's record
/// while in flight, and what its checksum covers.
pub(super) fn carried(
    sight: &Sight,
    chosen: &[Chosen],
    mut changes: Vec<(u32, Option<Entry>)>,
) -> Vec<(u32, Option<Entry>)> {
    changes.reserve(chosen.len());
    for ch in chosen {
        let entry = sight
            .store
            .get(ch.id)
            .filter(|_| ch.change != Change::Despawned)
            .map(|e| e.entry(sight.tick));
        changes.push((ch.id, entry));
    }
    changes
}

/// The snapshot of `chosen` (ascending) with its bodies from `bodies`, and the checksum
/// of the view `changes` ([`carried`]) leave the client with; `used` bits are guessed.
pub(super) fn write(
    sight: &Sight,
    chosen: &[Chosen],
    changes: &[(u32, Option<Entry>)],
    bodies: &BodyCache,
    used: usize,
) -> BitWriter {
    let mut w = BitWriter::with_capacity(used / 8 + 16);
    // Against nothing after the server lost track, the client is told every entity it
    // should show, so it drops the rest.
    let members = (sight.views.lost_track && sight.base_tick.is_none())
        .then(|| sight.relevance.members(sight.store));
    snapshot::write_header(
        &mut w,
        sight.age(),
        sight.merged,
        members.as_deref(),
        chosen.len(),
    );
    let mut next = 0u32;
    for ch in chosen {
        w.write_var_u32(ch.id - next);
        next = ch.id + 1;
        snapshot::write_op(&mut w, ch.change);
        if let Some((key, _)) = ch.body {
            if let Some(body) = bodies.get(&key) {
                w.append(body);
            }
        }
    }
    snapshot::write_checksum(&mut w, sight.base.checksum_with(changes));
    w
}

/// A snapshot of `tick` that stands alone: entities `ids` (ascending; ids not live are
/// left out) in full, against nothing and without a member list (see
/// [`super::ReplicationServer::encode_standalone`]).
pub(super) fn standalone(schema: &Schema, store: &Store, ids: &[u32], tick: Tick) -> Vec<u8> {
    let live: Vec<_> = ids
        .iter()
        .filter_map(|&id| Some((id, store.get(id)?)))
        .collect();
    let mut w = BitWriter::new();
    snapshot::write_header(&mut w, 0, 0, None, live.len());
    let mut next = 0u32;
    let mut changes = Vec::with_capacity(live.len());
    for &(id, e) in &live {
        w.write_var_u32(id - next);
        next = id + 1;
        snapshot::write_op(&mut w, Change::Spawned);
        snapshot::write_spawn_payload(&mut w, schema, e.kind, e.generation, &e.codes);
        changes.push((id, Some(e.entry(tick))));
    }
    snapshot::write_checksum(&mut w, View::new().checksum_with(&changes));
    w.into_bytes()
}
