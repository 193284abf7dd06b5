//! The per-tick body cache: the same entity's delta against the same baseline state at
//! the same age is the same bits for every client, so it is encoded once per tick and
//! copied into every snapshot that needs it.

use super::Sight;
use crate::field::{self, Motion};
use crate::snapshot::{self, Change};
use lagless_core::Tick;
use lagless_wire::BitWriter;

/// std's map with a faster hash: the keys are the server's own ids and versions.
type HashMap<K, V> = foldhash::HashMap<K, V>;

/// An encoded entity body in the cache: (id, baseline version or `u64::MAX` for none,
/// version, baseline age).
pub(super) type BodyKey = (u32, u64, u64, u32);

/// Entity bodies encoded for one tick.
#[derive(Default)]
pub(super) struct BodyCache {
    bodies: HashMap<BodyKey, BitWriter>,
    /// Emptied body writers, for the next tick's cache.
    pool: Vec<BitWriter>,
    /// The tick the bodies are for.
    tick: Option<Tick>,
}

impl BodyCache {
    /// Readies the cache for snapshots of `tick`: a body is a delta at a baseline age,
    /// so the previous tick's are of no use.
    pub(super) fn start(&mut self, tick: Tick) {
        if self.tick != Some(tick) {
            // The bodies' memory is kept for the next tick's: a tick encodes one body
            // per entry per client, and allocating each would show.
            for (_, mut w) in self.bodies.drain() {
                w.clear();
                self.pool.push(w);
            }
            self.tick = Some(tick);
        }
    }

    /// The body of entity `id` for `change` in the snapshot `sight` describes, encoded
    /// unless another client's snapshot encoded it already: its key (for
    /// [`Self::get`], so it is looked up instead of copied) and length in bits. `None` if
    /// the entity does not live.
    pub(super) fn body(
        &mut self,
        sight: &Sight,
        id: u32,
        change: Change,
    ) -> Option<(BodyKey, usize)> {
        let e = sight.store.get(id)?;
        let kind = sight.schema.get(e.kind)?;
        let (key, from, age) = match (change, sight.base.get(id)) {
            (Change::Updated, Some(b)) => {
                let age = sight.tick.0.wrapping_sub(b.tick.0);
                ((id, b.version, e.version, age), Some(b), age)
            }
            _ => ((id, u64::MAX, e.version, 0), None, 0),
        };
        let pool = &mut self.pool;
        let w = self.bodies.entry(key).or_insert_with(|| {
            let mut w = pool.pop().unwrap_or_default();
            match from {
                Some(b) => {
                    let m = Motion {
                        age,
                        tick_hz: sight.config.tick_hz,
                    };
                    field::write_entity(&mut w, kind, &b.codes, &e.codes, m);
                }
                None => snapshot::write_spawn_payload(
                    &mut w,
                    sight.schema,
                    e.kind,
                    e.generation,
                    &e.codes,
                ),
            }
            w
        });
        Some((key, w.bit_len()))
    }

    /// The body [`Self::body`] encoded under `key` this tick.
    pub(super) fn get(&self, key: &BodyKey) -> Option<&BitWriter> {
        self.bodies.get(key)
    }
}
