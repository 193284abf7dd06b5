//! How wrong each client's view is: what the client shows of each entity, against what
//! the entity is now, and so what waiting is worth.
//!
//! What a client shows of an entity is its last state carried on by its velocity, as
//! [`crate::ReplicationClient::values_at`] does; the error is the distance from there to
//! where the entity is, plus the velocity's error over that carrying time. A body moving
//! as the client predicts waits; one that hit something goes.

use super::store::Live;
use super::views::InFlight;
use super::{Pending, Sight};
use crate::ReplicationConfig;
use crate::snapshot::Change;
use crate::view::{Entry, View};
use lagless_core::Tick;
use std::collections::VecDeque;

/// The most a waiting entity's error counts for, in tolerances
/// ([`ReplicationConfig::error_tolerance`]): a body 5 m off (at the default 5 cm) is as urgent
/// as one farther, and the rate stays finite.
const MAX_WRONG: f32 = 100.0;

/// What an entity the client does not hold (a spawn, or a new incarnation) counts as, in
/// tolerances: ahead of small errors, behind a body that is plainly somewhere else.
const UNSEEN_WRONG: f32 = 9.0;

/// Which state of which incarnation of an entity: equal ids mean equal codes (a new
/// version is taken only when the codes change).
#[derive(Debug, Clone, Copy, PartialEq)]
struct StateId {
    generation: u32,
    version: u64,
    /// The low half of [`crate::view::codes_hash`] of its codes: a state that changed and
    /// changed back has a new version but the same codes, and only when the hashes agree
    /// are the codes compared.
    hash: u32,
    /// Its position, for how far the entity has moved since.
    position: Option<[f32; 3]>,
    /// Its position's velocity (zero if none): the client carries the position on by it.
    velocity: [f32; 3],
}

impl StateId {
    /// The state a view entry holds. From the entry, not its codes: those are an older
    /// allocation, and reading them would miss the cache for most entities.
    fn of(e: &Entry) -> Self {
        Self {
            generation: e.generation,
            version: e.version,
            hash: e.hash as u32,
            position: e.position,
            velocity: e.velocity,
        }
    }
}

/// What a client shows of an entity, and what its acknowledged view holds: one record
/// per client and entity, read in id order by every encode and written for each entity a
/// snapshot carries. The newest state sent since the acknowledged view lives here too
/// (`in_flight`): it is the only send that decides what the client shows, since an older
/// one either arrived before it or went before the acknowledged view, which covers it.
///
/// Laid out flat (no `Option`s, no codes), since every encode streams one per waiting
/// entity, mostly from cold caches. The codes a snapshot in flight carried are found in
/// that snapshot ([`sent_codes`]): they are needed only when an entity changed back.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Shown {
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
    /// The snapshot that carried the newest send was lost: what the client shows is one
    /// of the older sends or the acknowledged view's, so the entity goes again.
    lost: bool,
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

/// What looking at an entity for a client found.
pub(super) enum Look {
    /// Despawned, or irrelevant to the client: a despawn if the client may show it.
    Gone { shown: bool, keep: bool },
    /// The client shows its state.
    Current { keep: bool },
    /// Differs from what the client shows; waiting gains `rate` per tick. A `resend`
    /// follows a lost send; a `redundant` one is what the client predicts, sent again
    /// while its newest send is in flight.
    Waiting {
        change: Change,
        rate: f32,
        resend: bool,
        redundant: bool,
    },
}

/// How errors are weighed ([`ReplicationConfig::error_tolerance`],
/// [`ReplicationConfig::dead_reckoning_secs`]), made safe to compute with.
pub(super) struct ErrorScale {
    /// 0: errors left out.
    tolerance: f32,
    dead_reckoning: f32,
    hz: f32,
}

impl ErrorScale {
    /// The scale `config` sets; a negative or non-finite setting counts as 0.
    pub(super) fn new(config: &ReplicationConfig) -> Self {
        let finite = |v: f32| if v.is_finite() { v.max(0.0) } else { 0.0 };
        Self {
            tolerance: finite(config.error_tolerance),
            dead_reckoning: finite(config.dead_reckoning_secs),
            hz: config.tick_hz.max(1) as f32,
        }
    }

    /// How wrong the client is by now about `e`, in tolerances, if it shows `state`
    /// (of the same incarnation), carried by a snapshot of `since`: where it carries
    /// that state to against where `e` is, plus the velocity's error over the carrying
    /// time. NaN for a non-finite position.
    fn wrong(&self, state: Option<StateId>, e: &Live, since: Tick, tick: Tick) -> f32 {
        match (state, e.position) {
            (Some(s), Some(p)) if self.tolerance > 0.0 => {
                let a = s.position.unwrap_or(p);
                let dt = (tick.0.saturating_sub(since.0) as f32 / self.hz)
                    .clamp(0.0, self.dead_reckoning);
                let d2: f32 = (0..3)
                    .map(|k| (a[k] + s.velocity[k] * dt - p[k]).powi(2))
                    .sum();
                let v2: f32 = (0..3)
                    .map(|k| (s.velocity[k] - e.velocity[k]).powi(2))
                    .sum();
                (d2.sqrt() + v2.sqrt() * self.dead_reckoning) / self.tolerance
            }
            _ => 0.0,
        }
    }
}

/// What the client shows of entity `id` against what it is now, and what waiting is
/// worth: its kind's priority × its relevance × (1 + how wrong the client is).
pub(super) fn look(sight: &Sight, shown: &mut Vec<Shown>, id: u32) -> Look {
    let seen = work_out(sight, shown, id);
    let state = seen.state();
    let Some(e) = sight.store.get(id) else {
        return gone(sight, &seen, id);
    };
    let weight = sight.relevance.weight(id, e);
    // NaN counts as irrelevant too.
    if weight.is_nan() || weight <= 0.0 {
        return gone(sight, &seen, id);
    }
    // A lost newest send leaves the client showing an older one, or the acknowledged
    // view's: which, the server cannot tell, so the entity goes again.
    let current = !seen.lost
        && state.is_some_and(|s| {
            s.generation == e.generation
                && (s.version == e.version
                    || (s.hash == e.hash as u32
                        && shown_codes(sight.base, &sight.views.in_flight, &seen, id)
                            .is_some_and(|codes| *codes == e.codes[..])))
        });
    let held_change = || match seen.held() {
        Some(g) if g == e.generation => Change::Updated,
        Some(_) => Change::Replaced,
        None => Change::Spawned,
    };
    if current {
        let acknowledged = || {
            sight.base.get(id).is_some_and(|b| {
                b.generation == e.generation && (b.version == e.version || b.codes == e.codes)
            })
        };
        if seen.in_flight && sight.owned.binary_search(&id).is_ok() && !acknowledged() {
            // What the client predicts goes again, with whatever room is left, until
            // acknowledged: it reconciles against every snapshot, and a lost send would
            // have it replay from a stale state for a round trip.
            return Look::Waiting {
                change: held_change(),
                rate: 0.0,
                resend: true,
                redundant: true,
            };
        }
        // Sent once: while the send is in flight it is taken to have arrived, and the
        // acknowledgements say if it did not (then `lost` is set and it goes again).
        return Look::Current { keep: false };
    }
    let (change, wrong) = match seen.held() {
        Some(g) if g == e.generation => {
            let wrong = sight.scale.wrong(state, e, seen.since, sight.tick);
            // NaN (a non-finite position) counts as far off.
            (Change::Updated, wrong.min(MAX_WRONG))
        }
        Some(_) => (Change::Replaced, UNSEEN_WRONG),
        None => (Change::Spawned, UNSEEN_WRONG),
    };
    let kind_weight = sight
        .schema
        .get(e.kind)
        .map_or(1.0, |k| k.priority_weight());
    Look::Waiting {
        change,
        rate: kind_weight * weight * (1.0 + wrong),
        resend: seen.lost,
        redundant: false,
    }
}

/// Entity `id` is gone for the client (despawned, or irrelevant to it): tell the client if
/// it may show it, until it is known not to.
fn gone(sight: &Sight, seen: &Shown, id: u32) -> Look {
    let keep = seen.has_state || seen.in_flight;
    // Unlike an update, a despawn goes in every snapshot until one that carried it is
    // acknowledged: it costs an id and two bits, and taken to arrive like an update it
    // left a projectile on the client a round trip longer for every loss in a row
    // (`tests/convergence.rs`, `short_lived_entities_under_reused_ids_converge`: 40
    // ticks after its end against at most 30).
    let held = seen.has_state || sight.views.may_hold.contains(id);
    Look::Gone {
        shown: held,
        keep: keep || held,
    }
}

/// What the client shows of entity `id`, worked out again if an acknowledgement made it
/// unknown.
fn work_out(sight: &Sight, shown: &mut Vec<Shown>, id: u32) -> Shown {
    let i = id as usize;
    if shown.len() <= i {
        shown.resize(i + 1, Shown::default());
    }
    if !shown[i].known {
        shown[i] = work_out_shown(sight.base, sight.base_tick, &shown[i], id);
    }
    shown[i]
}

/// A snapshot of `tick` carried `entry` of entity `id` (`None`: its despawn): the client
/// is taken to show it until an acknowledgement says otherwise.
pub(super) fn sent(shown: &mut [Shown], id: u32, entry: Option<&Entry>, tick: Tick) {
    // Looked at when the snapshot was ranked, so there is a slot.
    if let Some(s) = shown.get_mut(id as usize) {
        s.set_state(entry.map(StateId::of));
        s.in_flight = true;
        s.lost = false;
        s.since = tick;
    }
}

/// The snapshot of `tick`, lost, carried `changes`: where it carried the newest send of
/// an entity, the client shows an older one or the acknowledged view's, and the entity
/// is to be looked at (and sent) again.
pub(super) fn given_up(
    shown: &mut [Shown],
    pending: &mut Pending,
    changes: &[(u32, Option<Entry>)],
    tick: Tick,
) {
    for (id, _) in changes {
        if let Some(s) = shown.get_mut(*id as usize) {
            if s.in_flight && s.since == tick {
                s.in_flight = false;
                s.lost = true;
                s.known = false;
                pending.mark(*id);
            }
        }
    }
}

/// The snapshot of `tick`, acknowledged and merged into the client's acknowledged view,
/// carried `changes`: where it carried the newest send of an entity, that is what the
/// acknowledged view holds and the client shows, known without looking the view up again.
pub(super) fn acknowledged(shown: &mut [Shown], changes: &[(u32, Option<Entry>)], tick: Tick) {
    for (id, entry) in changes {
        if let Some(s) = shown.get_mut(*id as usize) {
            if s.in_flight && s.since == tick {
                s.set_held(entry.as_ref().map(|e| e.generation));
                s.in_flight = false;
                s.known = true;
            }
        }
    }
}

/// What the client shows of entity `id` has to be worked out again.
pub(super) fn forget_shown(shown: &mut [Shown], id: u32) {
    if let Some(s) = shown.get_mut(id as usize) {
        s.known = false;
    }
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

/// What the client shows of entity `id`: the newest state sent since the baseline
/// (`base`, of `base_tick`) if that snapshot arrived, else the baseline's. Until an
/// acknowledgement says which, the newest sent is assumed to have arrived (it is worked
/// out again then). `old` is what was worked out before: its newest send counts only if
/// it went after the baseline (what went before is in the baseline, or lost).
fn work_out_shown(base: &View, base_tick: Option<Tick>, old: &Shown, id: u32) -> Shown {
    let held = base.get(id);
    if old.in_flight && !old.lost && base_tick.is_none_or(|b| old.since > b) {
        let mut s = *old;
        s.known = true;
        s.set_held(held.map(|b| b.generation));
        return s;
    }
    let (state, since) = match held {
        Some(b) => (Some(StateId::of(b)), b.tick),
        None => (None, Tick(0)),
    };
    let mut s = Shown {
        known: true,
        since,
        lost: old.lost,
        ..Shown::default()
    };
    s.set_state(state);
    s.set_held(held.map(|b| b.generation));
    s
}
