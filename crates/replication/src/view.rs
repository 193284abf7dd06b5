//! What one client holds after decoding one snapshot: every entity's codes, by id.
//!
//! The client keeps one view per snapshot it decoded (each a copy of its baseline's,
//! changed a little), and the server one per client, changed in place. A view is a list
//! of chunks of 32 ids shared between copies ([`Arc`]): a copy costs one pointer per
//! chunk, and a change copies only the chunk it touches, if it is shared (32 rather than
//! 64: a snapshot changes a few dozen entities spread over the world, so most chunks it
//! touches are copied for one entry).

use crate::schema::KindId;
use lagless_core::Tick;
use std::collections::BTreeMap;
use std::sync::Arc;

const CHUNK: usize = 32;

/// Ticks before its baseline a snapshot may name as merged (see [`View::merge`]): the
/// width of the bit field in its header, and how long both ends keep what a snapshot
/// carried.
pub const MERGE_WINDOW: u32 = 64;

/// One entity as a view holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its kind.
    pub kind: KindId,
    /// The entity's incarnation: how many times its id has been spawned, so an id reused
    /// after a despawn is a new entity on both ends (sent with every spawn).
    pub generation: u32,
    /// Server side: which state of the entity the codes are (one number per change), to
    /// share encoding work between clients. Always 0 on the client.
    pub version: u64,
    /// A hash of `codes` (64-bit FNV-1a): on the server, so a state that changed and
    /// changed back can be told from a new one without comparing codes; on both ends, for
    /// the view's checksum.
    pub hash: u64,
    /// Server side: the position the codes hold, for how far the entity has moved since.
    /// Always `None` on the client.
    pub position: Option<[f32; 3]>,
    /// Server side: that position's velocity (zero if none), for where the client carries
    /// it. Always zero on the client.
    pub velocity: [f32; 3],
    /// The tick of the snapshot that carried these codes.
    pub tick: Tick,
    /// The state.
    pub codes: Arc<[i32]>,
}

type Chunk = [Option<Entry>; CHUNK];

/// Entities by id; cheap to copy.
///
/// A view keeps a running checksum of what it holds ([`View::checksum`]): the sum of one
/// hash per entity (id, kind, generation and codes), kept up to date by every
/// [`View::set`], so two views with the same entities have the same checksum whatever
/// order they were built in, and keeping it costs one hash per change. The server sends
/// it with each snapshot for the view the client holds after decoding it, and the client
/// checks it (Unity Netcode for Entities' ghost hash; GGRS's sync test).
///
/// It also remembers, for ids it does not hold, the tick of the snapshot that took each
/// away (a despawn), so a merge of an older snapshot's state of that id ([`View::merge`])
/// does not bring it back. They are not part of the checksum, and are forgotten once no
/// merge can ask ([`View::forget_gone_before`]).
#[derive(Debug, Clone, Default)]
pub struct View {
    chunks: Vec<Option<Arc<Chunk>>>,
    len: usize,
    sum: u64,
    gone: Arc<BTreeMap<u32, Tick>>,
}

impl View {
    /// An empty view.
    pub fn new() -> Self {
        Self::default()
    }

    /// Entities held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entity `id`.
    pub fn get(&self, id: u32) -> Option<&Entry> {
        let (c, i) = split(id);
        self.chunks.get(c)?.as_ref()?[i].as_ref()
    }

    /// Sets entity `id` (`None` removes it).
    pub fn set(&mut self, id: u32, entry: Option<Entry>) {
        let (c, i) = split(id);
        if entry.is_none() && self.get(id).is_none() {
            return;
        }
        if self.chunks.len() <= c {
            self.chunks.resize(c + 1, None);
        }
        let chunk = self.chunks[c].get_or_insert_with(|| Arc::new(std::array::from_fn(|_| None)));
        let slot = &mut Arc::make_mut(chunk)[i];
        self.len = self.len + usize::from(entry.is_some()) - usize::from(slot.is_some());
        if let Some(old) = slot.as_ref() {
            self.sum = self.sum.wrapping_sub(entry_hash(id, old));
        }
        if let Some(new) = entry.as_ref() {
            self.sum = self.sum.wrapping_add(entry_hash(id, new));
        }
        *slot = entry;
    }

    /// Applies what the snapshot of `tick` carried (`None`: a despawn), in id order,
    /// whatever the view held: what a snapshot does to its own baseline.
    pub fn apply(&mut self, tick: Tick, changes: &[(u32, Option<Entry>)]) {
        for (id, entry) in changes {
            match entry {
                Some(e) => self.set(*id, Some(e.clone())),
                None => self.remove_at(*id, tick),
            }
        }
    }

    /// Removes entity `id` as a snapshot of `tick` did (a despawn), remembering when.
    pub fn remove_at(&mut self, id: u32, tick: Tick) {
        self.set(id, None);
        let gone = Arc::make_mut(&mut self.gone);
        let t = gone.entry(id).or_insert(tick);
        *t = (*t).max(tick);
    }

    /// Merges what the snapshot of `tick` carried (`None`: a despawn) into the view, each
    /// entity only where the view holds nothing newer: a state from an older snapshot, or
    /// nothing and no despawn since `tick`. What a view holds after merging a set of
    /// snapshots is the newest each of them says of each entity, whatever order they are
    /// merged in, and merging one again changes nothing: a server and a client that
    /// merge the same snapshots into the same view hold the same view.
    pub fn merge(&mut self, tick: Tick, changes: &[(u32, Option<Entry>)]) {
        for (id, entry) in changes {
            let newer = match self.get(*id) {
                Some(held) => held.tick >= tick,
                None => self.gone.get(id).is_some_and(|g| *g >= tick),
            };
            if newer {
                continue;
            }
            match entry {
                Some(e) => self.set(*id, Some(e.clone())),
                None => self.remove_at(*id, tick),
            }
        }
    }

    /// The tick of the snapshot that took entity `id` away, if the view remembers one
    /// (see [`View`]).
    pub fn gone_at(&self, id: u32) -> Option<Tick> {
        if self.get(id).is_some() {
            return None;
        }
        self.gone.get(&id).copied()
    }

    /// Forgets the despawns of snapshots older than `tick` (no merge asks about those).
    pub fn forget_gone_before(&mut self, tick: Tick) {
        if self.gone.values().any(|t| *t < tick) {
            Arc::make_mut(&mut self.gone).retain(|_, t| *t >= tick);
        }
    }

    /// The checksum of what the view holds (see [`View`]).
    pub fn checksum(&self) -> u64 {
        self.sum
    }

    /// The checksum the view would have with `changes` made (`None`: removed), without
    /// making them.
    pub(crate) fn checksum_with(&self, changes: &[(u32, Option<Entry>)]) -> u64 {
        changes.iter().fold(self.sum, |sum, (id, new)| {
            let old = self.get(*id).map_or(0, |e| entry_hash(*id, e));
            let new = new.as_ref().map_or(0, |e| entry_hash(*id, e));
            sum.wrapping_sub(old).wrapping_add(new)
        })
    }

    /// Every entity, in ascending id order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Entry)> {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk.iter().flat_map(move |chunk| {
                chunk
                    .iter()
                    .enumerate()
                    .filter_map(move |(i, e)| Some(((c * CHUNK + i) as u32, e.as_ref()?)))
            })
        })
    }
}

impl View {
    /// Calls `f(id, old, new)` for every id whose entry differs between `self` (old) and
    /// `new`, ascending. Chunks the two share are skipped without a look, so comparing a
    /// view with the next one costs what changed between them.
    pub fn diff(&self, new: &View, mut f: impl FnMut(u32, Option<&Entry>, Option<&Entry>)) {
        let n = self.chunks.len().max(new.chunks.len());
        for c in 0..n {
            let a = self.chunks.get(c).and_then(Option::as_ref);
            let b = new.chunks.get(c).and_then(Option::as_ref);
            if let (Some(a), Some(b)) = (a, b) {
                if Arc::ptr_eq(a, b) {
                    continue;
                }
            }
            for i in 0..CHUNK {
                let x = a.and_then(|a| a[i].as_ref());
                let y = b.and_then(|b| b[i].as_ref());
                let same = match (x, y) {
                    (Some(x), Some(y)) => {
                        x.kind == y.kind && x.tick == y.tick && x.codes == y.codes
                    }
                    (None, None) => true,
                    _ => false,
                };
                if !same {
                    f((c * CHUNK + i) as u32, x, y);
                }
            }
        }
    }
}

/// A 64-bit FNV-1a hash of an entity's codes: what [`Entry::hash`] holds.
pub(crate) fn codes_hash(codes: &[i32]) -> u64 {
    codes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &c| {
        (h ^ u64::from(c as u32)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One entity's part of a view's checksum: its id, kind, generation and codes, mixed so
/// that the sum over a view changes when any of them does (SplitMix64's finaliser).
fn entry_hash(id: u32, e: &Entry) -> u64 {
    let mut x = e.hash
        ^ (u64::from(id) << 32 | u64::from(e.generation)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ u64::from(e.kind).rotate_left(17);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn split(id: u32) -> (usize, usize) {
    (id as usize / CHUNK, id as usize % CHUNK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(v: i32) -> Entry {
        Entry {
            kind: 0,
            generation: 0,
            version: 0,
            hash: 0,
            position: None,
            velocity: [0.0; 3],
            tick: Tick(0),
            codes: Arc::from(vec![v]),
        }
    }

    #[test]
    fn copies_are_independent() {
        let mut a = View::new();
        for id in [3, 64, 700] {
            a.set(id, Some(entry(id as i32)));
        }
        let mut b = a.clone();
        b.set(64, None);
        b.set(5, Some(entry(5)));
        assert_eq!(a.len(), 3);
        assert_eq!(b.len(), 3);
        assert!(a.get(64).is_some() && b.get(64).is_none());
        assert_eq!(b.iter().map(|(id, _)| id).collect::<Vec<_>>(), [3, 5, 700]);
        b.set(9999, None);
        assert_eq!(b.len(), 3);
        let mut seen = Vec::new();
        a.diff(&b, |id, old, new| {
            seen.push((id, old.is_some(), new.is_some()))
        });
        assert_eq!(seen, [(5, false, true), (64, true, false)]);
    }

    /// The checksum follows the entities, not the order they were set in, and any change
    /// of codes, generation or id changes it.
    #[test]
    fn checksum_follows_the_entities() {
        let with = |e: &[(u32, Entry)]| {
            let mut v = View::new();
            for (id, x) in e {
                v.set(*id, Some(x.clone()));
            }
            v
        };
        let hashed = |v: i32| Entry {
            hash: codes_hash(&[v]),
            ..entry(v)
        };
        let a = with(&[(3, hashed(1)), (70, hashed(2))]);
        let mut b = with(&[(70, hashed(2)), (9, hashed(5)), (3, hashed(1))]);
        assert_ne!(a.checksum(), b.checksum());
        b.set(9, None);
        assert_eq!(
            a.checksum(),
            b.checksum(),
            "order and removals do not matter"
        );
        b.set(3, Some(hashed(4)));
        assert_ne!(a.checksum(), b.checksum(), "codes");
        b.set(
            3,
            Some(Entry {
                generation: 1,
                ..hashed(1)
            }),
        );
        assert_ne!(a.checksum(), b.checksum(), "generation");
        b.set(3, Some(hashed(1)));
        assert_eq!(a.checksum(), b.checksum());
        let moved = with(&[(4, hashed(1)), (70, hashed(2))]);
        assert_ne!(a.checksum(), moved.checksum(), "id");
        assert_eq!(View::new().checksum(), 0);
    }
}
