//! What each client acknowledged and what is in flight to it.
//!
//! Acknowledgement and view tracking: for every client, the view of the newest snapshot it
//! acknowledged, the snapshots sent since, and what it may still hold; an acknowledgement
//! advances the view and settles what the client shows of what the snapshot carried.

use super::select::Chosen;
use super::shown::{self, forget_shown};
use super::store::Store;
use super::{ClientState, Pending};
use crate::view::{Entry, View};
use lagless_core::Tick;
use std::collections::VecDeque;
use std::time::Duration;

/// What a client acknowledged, and what is in flight to it.
#[derive(Default)]
pub(super) struct Views {
    /// The newest snapshot it acknowledged (`None`: none since it was added or started
    /// over).
    acked: Option<Acked>,
    /// Snapshots sent since, oldest first.
    pub(super) in_flight: VecDeque<InFlight>,
    /// The server no longer knows what the client shows (every snapshot in flight went
    /// unacknowledged): send the member list until an acknowledgement comes.
    pub(super) lost_track: bool,
    /// Entities the client may hold: sent to it alive, and no acknowledged snapshot has
    /// carried their despawn since. A despawn goes again in every snapshot until one
    /// that carried it is acknowledged. What the client shows of an entity a snapshot
    /// leaves out can come from a snapshot newer than that one's baseline (see
    /// `ReplicationClient`), which acknowledgements do not always reveal: the server's
    /// idea of what the client shows can say "nothing" while it shows a projectile that
    /// ended long ago.
    pub(super) may_hold: Pending,
}

impl Views {
    /// The acknowledged view a snapshot of `tick` goes against, and its tick (`None`: a
    /// full snapshot).
    pub(super) fn base(&self, tick: Tick) -> Option<(Tick, &View)> {
        match &self.acked {
            Some(a) if a.tick < tick => Some((a.tick, &a.view)),
            _ => None,
        }
    }

    /// The newest view the client acknowledged holds entity `id`.
    pub(super) fn holds(&self, id: u32) -> bool {
        self.acked
            .as_ref()
            .is_some_and(|a| a.view.get(id).is_some())
    }
}

/// A snapshot in flight: its tick, the baseline it was encoded against, what it
/// changed, and when it left. The client's view once it decodes it is the baseline's
/// with `changes` applied; the server builds that view only for the one snapshot
/// acknowledged (see [`Acked`]).
#[derive(Debug, Clone)]
pub(super) struct InFlight {
    pub(super) tick: Tick,
    /// The acknowledged snapshot it was encoded against (`None`: none, a full snapshot).
    base: Option<Tick>,
    /// What it carried, ascending by id (`None`: a despawn). Once acknowledged or given
    /// up on, what the client shows of these is to be worked out again.
    pub(super) changes: Vec<(u32, Option<Entry>)>,
    sent_at: Duration,
    /// In unit tests, the whole view the client holds once it decodes it, built the
    /// plain way (a copy of the baseline's, changed), to check [`Acked`] against.
    #[cfg(test)]
    shadow: View,
}

/// The view of the newest snapshot a client acknowledged, owned by the server alone so
/// it changes in place, and the log that takes it back to the older views snapshots
/// still in flight were encoded against.
///
/// A snapshot in flight keeps only its changes, not a copy of its view (which would
/// copy every chunk a snapshot touches, per client per tick); when one is acknowledged
/// its view is rebuilt from the present one: back to its baseline with the log, then its
/// changes on top.
#[derive(Debug, Default)]
struct Acked {
    tick: Tick,
    view: View,
    /// Every change made to `view`, oldest first: the tick of the acknowledged view it
    /// was made to (non-decreasing), the entity, and what it held before.
    undo: Vec<(Tick, u32, Option<Entry>)>,
    /// The oldest acknowledged view the log can take `view` back to.
    floor: Tick,
    /// In unit tests, the acknowledged snapshot's [`InFlight::shadow`].
    #[cfg(test)]
    shadow: View,
}

impl Acked {
    /// Makes the view that of snapshot `tick`, encoded against `base` (an acknowledged
    /// view this one came from, no newer than it; `None`: a full snapshot) with
    /// `changes`; `changed` is told every id whose entry it changed. False (and nothing
    /// changed) if `base` is one the log cannot take the view back to.
    fn advance(
        &mut self,
        tick: Tick,
        base: Option<Tick>,
        changes: &[(u32, Option<Entry>)],
        changed: &mut impl FnMut(u32),
    ) -> bool {
        let mut back: Vec<(u32, Option<Entry>)> = Vec::new();
        match base {
            Some(base) if base > self.tick || base < self.floor => return false,
            Some(base) => {
                // Back to the baseline: each id the log changed since then gets what it
                // held before its first change since.
                let from = self.undo.partition_point(|u| u.0 < base);
                let mut seen = std::collections::HashSet::new();
                for (_, id, old) in &self.undo[from..] {
                    if seen.insert(*id) {
                        back.push((*id, old.clone()));
                    }
                }
            }
            // A full snapshot: the view it stands on is empty. Emptied through the log,
            // so snapshots in flight against older views can still be rebuilt.
            None => back.extend(self.view.iter().map(|(id, _)| (id, None))),
        }
        let at = self.tick;
        // Only what differs is logged and told: an entry the view already holds leaves
        // what the client shows of it as it was, so the encoder need not look it up
        // again.
        let mut set = |view: &mut View, undo: &mut Vec<_>, id: u32, entry: Option<Entry>| {
            let old = view.get(id);
            if old != entry.as_ref() {
                undo.push((at, id, old.cloned()));
                view.set(id, entry);
                changed(id);
            }
        };
        for (id, old) in back {
            set(&mut self.view, &mut self.undo, id, old);
        }
        for (id, entry) in changes {
            set(&mut self.view, &mut self.undo, *id, entry.clone());
        }
        self.tick = tick;
        true
    }

    /// Forgets the log older than `oldest`, the oldest baseline a snapshot in flight
    /// may still need.
    fn trim(&mut self, oldest: Tick) {
        let keep = self.undo.partition_point(|u| u.0 < oldest);
        self.undo.drain(..keep);
        self.floor = self.floor.max(oldest);
    }
}

impl ClientState {
    /// Forgets what the client holds: the next snapshot goes against nothing, with the
    /// list of every entity it should show.
    pub(super) fn start_over(&mut self, store: &Store) {
        self.views.in_flight.clear();
        self.views.acked = None;
        self.views.lost_track = true;
        self.shown.clear();
        self.stats.resyncs += 1;
        for id in store.ids() {
            self.pending.mark(id);
        }
    }

    /// The client asked for a snapshot against nothing (see
    /// [`super::ReplicationServer::resync`]).
    pub(super) fn resync(&mut self, store: &Store) {
        if self.views.acked.is_some() || !self.views.lost_track {
            self.start_over(store);
        }
    }

    /// The client has decoded the snapshot of `tick` (see
    /// [`super::ReplicationServer::acknowledge`]).
    pub(super) fn acknowledge(&mut self, tick: Tick, now: Duration) {
        if self.views.acked.as_ref().is_some_and(|a| tick <= a.tick) {
            return;
        }
        if !self.views.in_flight.iter().any(|f| f.tick == tick) {
            // Older than what is remembered, or never sent: nothing to use.
            self.stats.stale_acks += 1;
            return;
        }
        // Every snapshot older than the one acknowledged is given up on.
        while let Some(f) = self.views.in_flight.pop_front() {
            shown::given_up(&mut self.shown, &f.changes, tick);
            if f.tick == tick {
                self.take_acknowledged(f, now);
                break;
            }
            self.budget.on_outcome(false);
            recycle(&mut self.spare, f.changes);
        }
    }

    /// Makes snapshot `f`, just acknowledged at `now` and taken off the list in flight,
    /// the client's acknowledged view.
    fn take_acknowledged(&mut self, f: InFlight, now: Duration) {
        let rtt = now.saturating_sub(f.sent_at).as_secs_f64();
        self.budget.on_rtt(now, rtt);
        self.budget.on_outcome(true);
        // Its despawns arrived: those entities are gone from the client for good,
        // unless a later snapshot brings them back.
        for (id, _) in f.changes.iter().filter(|(_, e)| e.is_none()) {
            let back = self.views.in_flight.iter().any(|later| {
                later
                    .changes
                    .binary_search_by_key(id, |(i, _)| *i)
                    .is_ok_and(|k| later.changes[k].1.is_some())
            });
            if !back {
                self.views.may_hold.remove(*id);
            }
        }
        // The new baseline may differ from the old one in entities nobody
        // touched since (it was encoded against an older baseline still): they
        // are to be looked at again.
        let (pending, shown) = (&mut self.pending, &mut self.shown);
        let mut changed = |id| {
            pending.mark(id);
            forget_shown(shown, id);
        };
        let a = self.views.acked.get_or_insert_with(Acked::default);
        if !a.advance(f.tick, f.base, &f.changes, &mut changed) {
            // A baseline the server never had (it cannot happen: every baseline
            // was the acknowledged view when its snapshot was encoded). Taken as
            // a full snapshot, so the server sends anything it is unsure of.
            self.stats.stale_acks += 1;
            a.advance(f.tick, None, &f.changes, &mut changed);
        }
        #[cfg(test)]
        {
            let mut differ = Vec::new();
            a.view.diff(&f.shadow, |id, _, _| differ.push(id));
            assert!(
                differ.is_empty(),
                "view of {:?} differs in {differ:?}",
                f.tick
            );
            a.shadow = f.shadow;
        }
        shown::acknowledged(&mut self.shown, &f.changes, f.tick);
        let oldest = self.views.in_flight.iter().filter_map(|f| f.base).min();
        a.trim(oldest.unwrap_or(a.tick));
        self.views.lost_track = false;
        recycle(&mut self.spare, f.changes);
    }

    /// Records the snapshot of `tick`, sent at `now` against `base` with `chosen`
    /// (ascending) leaving the client with `changes` ([`super::write::carried`]): the
    /// client is taken to show what it carried until an acknowledgement says otherwise.
    pub(super) fn track(
        &mut self,
        chosen: &[Chosen],
        changes: Vec<(u32, Option<Entry>)>,
        base: Option<Tick>,
        tick: Tick,
        now: Duration,
    ) {
        #[cfg(test)]
        let mut shadow = match (&self.views.acked, base) {
            (Some(a), Some(_)) => a.shadow.clone(),
            _ => View::new(),
        };
        for (ch, (id, entry)) in chosen.iter().zip(&changes) {
            if ch.body.is_some() {
                // Sent: it waits from nothing again.
                self.priority[*id as usize] = 0.0;
            }
            shown::sent(&mut self.shown, *id, entry.as_ref(), tick);
            #[cfg(test)]
            shadow.set(*id, entry.clone());
            if entry.is_some() {
                self.views.may_hold.mark(*id);
            }
        }
        self.views.in_flight.push_back(InFlight {
            tick,
            base,
            changes,
            sent_at: now,
            #[cfg(test)]
            shadow,
        });
    }
}

/// Keeps an emptied change list for the next snapshot (a few at most).
fn recycle(spare: &mut Vec<Vec<(u32, Option<Entry>)>>, mut changes: Vec<(u32, Option<Entry>)>) {
    if spare.len() < 4 {
        changes.clear();
        spare.push(changes);
    }
}
