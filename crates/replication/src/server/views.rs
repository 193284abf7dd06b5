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

/// A snapshot in flight: its tick, what it changed, when it left, and the view it was
/// encoded against.
#[derive(Debug, Clone)]
pub(super) struct InFlight {
    pub(super) tick: Tick,
    /// What it carried, ascending by id (`None`: a despawn). Once acknowledged or given
    /// up on, what the client shows of these is to be worked out again.
    pub(super) changes: Vec<(u32, Option<Entry>)>,
    sent_at: Duration,
    /// The view it was encoded against: the acknowledged view of the time (nothing for
    /// a full snapshot), a copy sharing every chunk of 32 ids with it. Once this
    /// snapshot is acknowledged, the client holds it with `changes` applied.
    ///
    /// An acknowledgement builds that view from this copy. Rebuilding it instead by
    /// taking the present acknowledged view back to the baseline through a log of
    /// changes cost in proportion to everything sent while the snapshot was in flight:
    /// with a 94 ms round trip at 64 snapshots/s, 920 entries an acknowledgement and
    /// 20 ms a tick for 64 clients of the cube scene (`lagless bench-snapshot --clients
    /// 64`).
    base: View,
}

/// The view of the newest snapshot a client acknowledged.
#[derive(Debug, Default)]
struct Acked {
    tick: Tick,
    view: View,
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
        // are to be looked at again. Chunks the two views share are skipped unread.
        let (pending, shown) = (&mut self.pending, &mut self.shown);
        let mut changed = |id| {
            pending.mark(id);
            forget_shown(shown, id);
        };
        let mut view = f.base;
        for (id, entry) in &f.changes {
            view.set(*id, entry.clone());
        }
        let nothing = View::new();
        let old = self.views.acked.as_ref().map_or(&nothing, |a| &a.view);
        old.diff(&view, |id, _, _| changed(id));
        shown::acknowledged(&mut self.shown, &f.changes, f.tick);
        self.views.acked = Some(Acked { tick: f.tick, view });
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
        let view = match (&self.views.acked, base) {
            (Some(a), Some(_)) => a.view.clone(),
            _ => View::new(),
        };
        for (ch, (id, entry)) in chosen.iter().zip(&changes) {
            if ch.body.is_some() {
                // Sent: it waits from nothing again.
                self.priority[*id as usize] = 0.0;
            }
            shown::sent(&mut self.shown, *id, entry.as_ref(), tick);
            if entry.is_some() {
                self.views.may_hold.mark(*id);
            }
        }
        self.views.in_flight.push_back(InFlight {
            tick,
            changes,
            sent_at: now,
            base: view,
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
