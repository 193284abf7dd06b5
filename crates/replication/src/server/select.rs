//! Priority and selection under the budget: what differs from what a client holds gains
//! priority each tick it waits, and a snapshot takes the highest until its room is spent
//! (Fiedler's "State Synchronization" priority accumulator).

use super::cache::{BodyCache, BodyKey};
use super::shown::{self, Look, Shown};
use super::{Pending, ReplicationConfig, Sight};
use crate::budget::BudgetController;
use crate::snapshot::Change;
use lagless_wire::var_u32_bits;

/// Candidates put in priority order at a time (see [`choose`]): about what a 256 kbit/s
/// snapshot of moving bodies takes.
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

/// A candidate entry while a snapshot is built.
struct Candidate {
    id: u32,
    change: Change,
    priority: f32,
    /// The client predicts it ([`super::ReplicationServer::set_owned`]).
    owned: bool,
    /// Sent again because the snapshot that carried its newest send was lost, or (see
    /// `redundant`) while it is in flight (counted apart, as
    /// [`super::EncodedSnapshot::resent`]).
    resend: bool,
    /// What the client predicts, its newest send in flight: not a changed entity, and
    /// not deferred when left out.
    redundant: bool,
}

/// An entry a snapshot will carry.
pub(super) struct Chosen {
    pub(super) id: u32,
    pub(super) change: Change,
    /// The body's cache key and length in bits (`None`: a despawn).
    pub(super) body: Option<(BodyKey, usize)>,
    /// 0 for a despawn, which always goes; else its place in priority order.
    rank: usize,
    /// See [`Candidate::resend`].
    pub(super) resend: bool,
    /// See [`Candidate::redundant`].
    redundant: bool,
}

/// The lists one encode fills and empties, kept for the next one's: allocating and
/// freeing them for every client every tick would show in the encoding time.
#[derive(Default)]
pub(super) struct Scratch {
    /// Entities to look at.
    ids: Vec<u32>,
    candidates: Vec<Candidate>,
    /// Entities to look at again next time.
    keep: Vec<u32>,
    /// Entries that go whatever the budget: despawns.
    forced: Vec<(u32, Change)>,
    /// What the snapshot carries, ascending by id once selected.
    pub(super) chosen: Vec<Chosen>,
}

impl Scratch {
    /// Empties every list, keeping their memory.
    pub(super) fn clear(&mut self) {
        self.ids.clear();
        self.candidates.clear();
        self.keep.clear();
        self.forced.clear();
        self.chosen.clear();
    }
}

/// The bits a snapshot may take.
pub(super) struct Room {
    /// The most its entries may take; raised for the entities the client predicts.
    pub(super) cap: usize,
    /// The most any snapshot may take ([`ReplicationConfig::max_snapshot_bytes`]).
    limit: usize,
    /// The client's budget per snapshot, if it has one.
    pub(super) budget_bits: Option<usize>,
}

impl Room {
    /// The room the client's `budget` leaves a snapshot, less `charged` bits its link
    /// carried beside the last one.
    pub(super) fn new(budget: &BudgetController, charged: u64, config: &ReplicationConfig) -> Self {
        let limit = config.max_snapshot_bytes.saturating_mul(8);
        // One packet's overhead per snapshot; a budget too small for more sends one
        // snapshot's worth anyway, so nothing starves outright. Sent fewer snapshots
        // (a link congested at the budget's floor), each has what the skipped had.
        let overhead = config.packet_overhead_bytes * 8;
        let stride = budget.snapshot_stride(config.snapshot_hz);
        let budget_bits = budget.bits_per_snapshot(config.snapshot_hz / f64::from(stride));
        let charged = usize::try_from(charged).unwrap_or(usize::MAX);
        let cap = budget_bits.map_or(limit, |b| {
            b.saturating_sub(overhead)
                .saturating_sub(charged)
                .max(MIN_SNAPSHOT_BITS)
                .min(limit)
        });
        Self {
            cap,
            limit,
            budget_bits,
        }
    }
}

/// What [`select`] chose, counted.
pub(super) struct Picked {
    /// Bits the entries were guessed to take (the writer's first allocation).
    pub(super) used: usize,
    /// Changed entities that wait for a later snapshot.
    pub(super) deferred: usize,
    /// Changed entities (resends of lost ones included).
    pub(super) candidates: usize,
    /// Resends chosen.
    pub(super) resent: usize,
    /// Entities looked at by [`rank`].
    pub(super) visited: usize,
}

/// Looks at every entity that may differ from what the client holds: the despawns it is
/// to be told, the rest candidates at their priority (which waiting raised by the ticks
/// `elapsed`), and what is to be looked at again at the next encode.
///
/// Only entities marked since they last matched what the client holds can differ from
/// it, so the work per client follows what changes, not the world.
pub(super) fn rank(
    sight: &Sight,
    shown: &mut Vec<Shown>,
    pending: &mut Pending,
    priority: &mut [f32],
    elapsed: f32,
    lists: &mut Scratch,
) {
    pending.drain_into(&mut lists.ids);
    for &id in &lists.ids {
        let i = id as usize;
        let owned = sight.owned.binary_search(&id).is_ok();
        match shown::look(sight, shown, id) {
            Look::Gone { shown, keep } => {
                if shown {
                    lists.forced.push((id, Change::Despawned));
                }
                if keep {
                    lists.keep.push(id);
                }
                priority[i] = 0.0;
            }
            Look::Current { keep } => {
                if keep {
                    lists.keep.push(id);
                }
                priority[i] = 0.0;
            }
            Look::Waiting {
                change,
                rate,
                resend,
                redundant,
            } => {
                lists.keep.push(id);
                priority[i] += rate * elapsed;
                // A redundant send of what the client predicts waits for room like any
                // other: forced into every snapshot until acknowledged, a resting
                // player's state would crowd a thin link.
                let owned = owned && !redundant;
                let priority = match (owned, redundant) {
                    (true, _) => f32::MAX,
                    (false, true) => 0.0,
                    (false, false) => priority[i],
                };
                lists.candidates.push(Candidate {
                    id,
                    change,
                    priority,
                    owned,
                    resend,
                    redundant,
                });
            }
        }
    }
    for &id in &lists.keep {
        pending.mark(id);
    }
}

/// Chooses what the snapshot carries within `room` (into `lists.chosen`, ascending by
/// id), encoding the bodies it takes into `bodies`.
pub(super) fn select(
    sight: &Sight,
    bodies: &mut BodyCache,
    lists: &mut Scratch,
    room: &mut Room,
) -> Picked {
    let redundant = lists.candidates.iter().filter(|c| c.redundant).count();
    let candidates = lists.candidates.len() - redundant;
    let (used, mut deferred) = choose(sight, bodies, lists, room);
    lists.chosen.sort_unstable_by_key(|c| c.id);
    deferred += fit(&mut lists.chosen, room.cap, header_bits(sight));
    let resent = lists.chosen.iter().filter(|c| c.resend).count();
    // Redundant sends left out are not deferred: the client probably shows them right.
    let redundant_sent = lists.chosen.iter().filter(|c| c.redundant).count();
    deferred = deferred.saturating_sub(redundant - redundant_sent);
    Picked {
        used,
        deferred,
        candidates,
        resent,
        visited: lists.ids.len(),
    }
}

/// Despawns first, then by priority while the room lasts: returns the bits guessed used
/// and how many candidates wait. An entry's id gap and operation are guessed at
/// [`ENTRY_GUESS`] bits until the order is known ([`fit`] makes the size exact).
fn choose(
    sight: &Sight,
    bodies: &mut BodyCache,
    lists: &mut Scratch,
    room: &mut Room,
) -> (usize, usize) {
    let Scratch {
        candidates,
        forced,
        chosen,
        ..
    } = lists;
    // With a budget, the candidates are taken highest first; they are put in that order
    // a batch at a time, as far as the snapshot gets, and the rest, which waits anyway,
    // stays unordered.
    let mut ordered = if room.budget_bits.is_some() {
        0
    } else {
        candidates.len()
    };
    let mut used = header_bits(sight) + forced.len() * ENTRY_GUESS;
    chosen.extend(forced.drain(..).map(|(id, change)| Chosen {
        id,
        change,
        body: None,
        rank: 0,
        resend: false,
        redundant: false,
    }));
    let mut deferred = 0usize;
    // Once a few in a row do not fit, the rest wait without being encoded: with a
    // crowded world that is most of them, and encoding them would cost more than
    // everything else a snapshot takes.
    let mut misses = 0;
    for k in 0..candidates.len() {
        if k == ordered {
            ordered += order_batch(&mut candidates[k..]);
        }
        let cand = &candidates[k];
        let change = cand.change;
        if cand.owned {
            // What the client predicts always goes (it reconciles against it), and on
            // top of the least a snapshot carries, so a small budget cannot spend itself
            // on the client's own player every time and starve everything else for good
            // (the ball of a car-and-ball game, say). Owned entities sort first, so the
            // room is set before anything else is chosen.
            let Some(body) = bodies.body(sight, cand.id, change) else {
                continue;
            };
            used += body.1 + ENTRY_GUESS;
            room.cap = room
                .cap
                .max((used + MIN_SNAPSHOT_BITS - 64).min(room.limit));
            chosen.push(Chosen {
                id: cand.id,
                change,
                body: Some(body),
                rank: 0,
                resend: cand.resend,
                redundant: cand.redundant,
            });
            continue;
        }
        // The first entity goes even if it alone is over the room: one larger than the
        // least a snapshot carries would otherwise never go at the budget's floor.
        let first = chosen.iter().all(|c| c.body.is_none());
        if !first && (misses >= MAX_MISSES || used + ENTRY_GUESS + 8 > room.cap) {
            deferred += candidates.len() - k;
            break;
        }
        let Some(body) = bodies.body(sight, cand.id, change) else {
            continue;
        };
        let cost = body.1 + ENTRY_GUESS;
        let alone = used + cost > room.cap;
        if alone && !first {
            deferred += 1;
            misses += 1;
            continue;
        }
        misses = 0;
        used += cost;
        // Over the room alone, it is not dropped to fit (rank 0, as a despawn).
        let rank = if alone { 0 } else { chosen.len() + 1 };
        chosen.push(Chosen {
            id: cand.id,
            change,
            body: Some(body),
            rank,
            resend: cand.resend,
            redundant: cand.redundant,
        });
    }
    (used, deferred)
}

/// Puts the highest-priority batch of `rest` at its front, in order: returns how many.
fn order_batch(rest: &mut [Candidate]) -> usize {
    let by_priority = |a: &Candidate, b: &Candidate| b.priority.total_cmp(&a.priority);
    let n = rest.len().min(ORDER_BATCH);
    if rest.len() > n {
        rest.select_nth_unstable_by(n, by_priority);
    }
    rest[..n].sort_unstable_by(by_priority);
    n
}

/// Drops the lowest-priority entries of `chosen` (ascending ids) until its exact size
/// fits `cap`: returns how many.
fn fit(chosen: &mut Vec<Chosen>, cap: usize, header: usize) -> usize {
    let mut dropped = 0;
    while exact_bits(chosen, header) > cap {
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
        dropped += 1;
    }
    dropped
}

/// A bound on a snapshot's header and checksum: the header's counts at 64 bits, and its
/// merged set.
fn header_bits(sight: &Sight) -> usize {
    64 + CHECKSUM_BITS + crate::snapshot::merged_bits(sight.merged)
}

/// The exact size of a snapshot of `chosen` (ascending ids), `header` bits of header
/// bound included.
fn exact_bits(chosen: &[Chosen], header: usize) -> usize {
    let mut next = 0u32;
    let mut bits = header;
    for c in chosen {
        bits += var_u32_bits(c.id - next) as usize;
        bits += if c.change == Change::Updated { 1 } else { 2 };
        bits += c.body.map_or(0, |(_, len)| len);
        next = c.id + 1;
    }
    bits
}
