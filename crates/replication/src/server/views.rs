//! What each client acknowledged and what is in flight to it.
//!
//! Acknowledgement and view tracking: for every client, the view it holds by what it
//! acknowledged (the newest acknowledged snapshot's, with every snapshot acknowledged
//! since it was encoded merged in), the snapshots sent since, and what it may still hold.
//! Each acknowledgement says which snapshots arrived (the newest and the 32 ticks before
//! it), so the view is rebuilt from exactly what the acknowledged snapshots carried, and
//! a snapshot not among them is known lost: a change is sent once, and again only if the
//! snapshot that carried it was lost.

use super::select::Chosen;
use super::shown::{self, forget_shown};
use super::store::Store;
use super::{ClientState, Pending};
use crate::view::{Entry, MERGE_WINDOW, View};
use lagless_core::Tick;
use std::collections::VecDeque;
use std::time::Duration;

/// What a client acknowledged, and what is in flight to it.
#[derive(Default)]
pub(super) struct Views {
    /// The view it holds by its acknowledgements (`None`: none since it was added or
    /// started over).
    acked: Option<Acked>,
    /// Snapshots sent, oldest first: the acknowledged ones a later view may still have
    /// to merge (within [`MERGE_WINDOW`] ticks of the newest acknowledged), then the
    /// ones not acknowledged yet.
    pub(super) in_flight: VecDeque<InFlight>,
    /// The server no longer knows what the client shows (every snapshot in flight went
    /// unacknowledged): send the member list until an acknowledgement comes.
    pub(super) lost_track: bool,
    /// Entities the client may hold: sent to it alive, and no acknowledged snapshot has
    /// carried their despawn since. A despawn goes again in every snapshot until one
    /// that carried it is acknowledged: the server's idea of what the client shows can
    /// say "nothing" while it shows a projectile that ended long ago.
    pub(super) may_hold: Pending,
}

impl Views {
    /// The view a snapshot of `tick` goes against, the tick of its newest acknowledged
    /// snapshot, and the snapshots merged into it (bit `i`: that tick - 1 - i); `None`:
    /// a full snapshot.
    pub(super) fn base(&self, tick: Tick) -> Option<(Tick, &View, u64)> {
        match &self.acked {
            Some(a) if a.tick < tick => Some((a.tick, &a.view, a.merged)),
            _ => None,
        }
    }

    /// The view the client holds by its acknowledgements holds entity `id`.
    pub(super) fn holds(&self, id: u32) -> bool {
        self.acked
            .as_ref()
            .is_some_and(|a| a.view.get(id).is_some())
    }

    /// Snapshots sent and neither acknowledged nor given up on.
    pub(super) fn unacknowledged(&self) -> usize {
        self.in_flight.len() - self.in_flight.partition_point(|f| f.acked)
    }
}

/// A snapshot sent: its tick, what it changed, when it left, the view it was encoded
/// against, and whether it was acknowledged.
#[derive(Debug, Clone)]
pub(super) struct InFlight {
    pub(super) tick: Tick,
    /// What it carried, ascending by id (`None`: a despawn). Once acknowledged or given
    /// up on, what the client shows of these is to be worked out again.
    pub(super) changes: Vec<(u32, Option<Entry>)>,
    sent_at: Duration,
    /// The view it was encoded against: the client's acknowledged view of the time
    /// (nothing for a full snapshot), a copy sharing every chunk of 32 ids with it. Once
    /// this snapshot is acknowledged, the client holds it with `changes` applied.
    ///
    /// An acknowledgement builds that view from this copy. Rebuilding it instead by
    /// taking the present acknowledged view back to the baseline through a log of
    /// changes cost in proportion to everything sent while the snapshot was in flight:
    /// with a 94 ms round trip at 64 snapshots/s, 920 entries an acknowledgement and
    /// 20 ms a tick for 64 clients of the cube scene (`lagless bench-snapshot --clients
    /// 64`).
    base: View,
    /// The snapshots of the [`MERGE_WINDOW`] ticks before it whose changes its view
    /// holds (bit `i`: tick - 1 - i): those an acknowledgement of it need not merge.
    covered: u64,
    /// The client acknowledged it.
    acked: bool,
    /// Acknowledged and taken into what the client shows: each is once, when a view
    /// that holds it is adopted (again would undo what later sends decided).
    settled: bool,
}

/// The view a client holds by its acknowledgements.
#[derive(Debug, Default)]
struct Acked {
    /// The newest snapshot it acknowledged.
    tick: Tick,
    /// That snapshot's view with `merged` merged in.
    view: View,
    /// That snapshot's [`InFlight::covered`].
    covered: u64,
    /// The snapshots acknowledged that its view did not hold, merged in (bit `i`: tick
    /// - 1 - i): what every snapshot against this view names in its header.
    merged: u64,
}

/// The snapshot `back` ticks before one whose bit field this is: its bit (0 beyond the
/// window).
fn bit(back: u32) -> u64 {
    if (1..=MERGE_WINDOW).contains(&back) {
        1 << (back - 1)
    } else {
        0
    }
}

/// A bit field of the ticks before one tick as seen from `d` ticks later.
fn shifted(bits: u64, d: u32) -> u64 {
    if d >= 64 { 0 } else { bits << d }
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

    /// The client holds the snapshot of `newest` and those of the 32 ticks before it
    /// whose bits `older` sets (bit `i`: tick `newest - 1 - i`) (see
    /// [`super::ReplicationServer::acknowledge_many`]). Ticks never sent, repeated or
    /// forgotten change nothing.
    pub(super) fn acknowledge(&mut self, newest: Tick, older: u32, now: Duration) {
        let mut found_newest = false;
        let ticks = std::iter::once(newest).chain(
            (0..32u32)
                .filter(|i| older >> i & 1 == 1)
                .filter_map(|i| newest.0.checked_sub(1 + i).map(Tick)),
        );
        for t in ticks {
            if let Ok(k) = self.views.in_flight.binary_search_by_key(&t, |f| f.tick) {
                found_newest |= t == newest;
                let f = &mut self.views.in_flight[k];
                if !f.acked {
                    f.acked = true;
                    self.budget.on_outcome(true);
                }
            }
        }
        let known = self.views.acked.as_ref().map(|a| a.tick);
        if !found_newest && known.is_none_or(|a| newest > a) {
            // Older than what is remembered, or never sent: nothing to use.
            self.stats.stale_acks += 1;
        }
        let newest_acked = self
            .views
            .in_flight
            .iter()
            .rev()
            .find(|f| f.acked)
            .map(|f| f.tick);
        if let Some(n) = newest_acked.filter(|n| known.is_none_or(|a| *n > a)) {
            self.adopt(n, now);
        }
    }

    /// Makes the view of the snapshot of `tick`, just acknowledged at `now`, with every
    /// acknowledged snapshot its view lacks merged in, the client's acknowledged view;
    /// gives up on every older snapshot not acknowledged.
    fn adopt(&mut self, tick: Tick, now: Duration) {
        let Ok(k) = self.views.in_flight.binary_search_by_key(&tick, |f| f.tick) else {
            return;
        };
        let f = &self.views.in_flight[k];
        let rtt = now.saturating_sub(f.sent_at).as_secs_f64();
        self.budget.on_rtt(now, rtt);
        let mut view = f.base.clone();
        view.apply(tick, &f.changes);
        let covered = f.covered;
        let mut merged = 0u64;
        for g in self.views.in_flight.range(..k) {
            let b = bit(tick.0 - g.tick.0);
            if g.acked && b != 0 && covered & b == 0 {
                view.merge(g.tick, &g.changes);
                merged |= b;
            }
        }
        view.forget_gone_before(Tick(tick.0.saturating_sub(MERGE_WINDOW)));
        // The new view may differ from the old one in entities nobody touched since
        // (it was encoded against an older view still): they are to be looked at
        // again. Chunks the two views share are skipped unread.
        let (pending, shown) = (&mut self.pending, &mut self.shown);
        let nothing = View::new();
        let old = self.views.acked.as_ref().map_or(&nothing, |a| &a.view);
        old.diff(&view, |id, _, _| {
            pending.mark(id);
            forget_shown(shown, id);
        });
        self.views.acked = Some(Acked {
            tick,
            view,
            covered,
            merged,
        });
        self.views.lost_track = false;
        // What each acknowledged snapshot carried is what the client shows where that
        // was the newest send; what a lost one carried is sent again where it was.
        let mut lost = 0;
        for g in self.views.in_flight.range_mut(..=k) {
            let b = bit(tick.0 - g.tick.0);
            let in_view = g.tick == tick || (covered | merged) & b != 0;
            if g.acked && !in_view && !g.settled {
                // Acknowledged too late for any view to merge: as good as lost.
                g.acked = false;
            }
            if !g.acked {
                shown::given_up(&mut self.shown, &mut self.pending, &g.changes, g.tick);
                lost += 1;
            } else if !g.settled {
                shown::acknowledged(&mut self.shown, &g.changes, g.tick);
            }
        }
        for g in self
            .views
            .in_flight
            .range(..=k)
            .filter(|g| g.acked && !g.settled)
        {
            // Its despawns arrived: those entities are gone from the client for good,
            // unless a later snapshot brings them back.
            for (id, _) in g.changes.iter().filter(|(_, e)| e.is_none()) {
                let back = self.views.in_flight.iter().any(|later| {
                    later.tick > g.tick
                        && later
                            .changes
                            .binary_search_by_key(id, |(i, _)| *i)
                            .is_ok_and(|k| later.changes[k].1.is_some())
                });
                if !back {
                    self.views.may_hold.remove(*id);
                }
            }
        }
        for _ in 0..lost {
            self.budget.on_outcome(false);
        }
        for g in self.views.in_flight.range_mut(..=k) {
            g.settled |= g.acked;
        }
        // Lost snapshots go, and acknowledged ones too old for any later view to merge.
        let keep_from = Tick(tick.0.saturating_sub(MERGE_WINDOW));
        let mut i = 0;
        while i < self.views.in_flight.len() {
            let g = &self.views.in_flight[i];
            let drop = g.tick < tick && (!g.acked || g.tick < keep_from);
            if drop {
                if let Some(g) = self.views.in_flight.remove(i) {
                    recycle(&mut self.spare, g.changes);
                }
            } else {
                i += 1;
            }
        }
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
        let (view, covered) = match (&self.views.acked, base) {
            (Some(a), Some(_)) => {
                let d = tick.0.wrapping_sub(a.tick.0);
                (a.view.clone(), shifted(a.covered | a.merged, d) | bit(d))
            }
            _ => (View::new(), 0),
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
            covered,
            acked: false,
            settled: false,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_count_back_from_their_tick() {
        assert_eq!(bit(0), 0);
        assert_eq!(bit(1), 1);
        assert_eq!(bit(64), 1 << 63);
        assert_eq!(bit(65), 0);
        assert_eq!(shifted(0b101, 2), 0b10100);
        assert_eq!(shifted(u64::MAX, 64), 0);
    }
}
