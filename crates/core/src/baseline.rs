//! The snapshots a delta encoder may refer to.
//!
//! Delta snapshots (source 003) are encoded against a *baseline*: an earlier snapshot the
//! client has confirmed it holds. Both ends keep the recent ones in a [`BaselineHistory`]:
//!
//! * the server records every snapshot it builds, under its tick, and encodes each
//!   client's next one against the newest tick that client acknowledged
//!   ([`crate::ServerSession::snapshot_ack`]), or in full when that tick has left its
//!   history;
//! * the client records every snapshot it decoded, then reports it with
//!   [`crate::ClientSession::acknowledge_snapshot`]. The acknowledgement rides in its
//!   input messages, so it costs no extra packets.
//!
//! A client keeping at least as many snapshots as the server never lacks a baseline the
//! server picks: the server only refers to ticks the client acknowledged, and drops them
//! no later than the client does. A decoder must still reject a reference to a tick it no
//! longer has (the server may be configured differently, or lying).

use crate::Tick;
use std::collections::VecDeque;

/// The newest `capacity` snapshots, by tick. Ticks are recorded in increasing order.
#[derive(Debug, Clone)]
pub struct BaselineHistory<T> {
    capacity: usize,
    entries: VecDeque<(Tick, T)>,
}

impl<T> BaselineHistory<T> {
    /// An empty history keeping at most `capacity` snapshots (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            entries: VecDeque::with_capacity(capacity),
        }
    }

    /// Most snapshots kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Snapshots held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records `value` as the snapshot of `tick`, dropping the oldest when full.
    ///
    /// Returns false, and keeps nothing, unless `tick` is newer than every tick held: a
    /// late duplicate must not evict a baseline still in use.
    pub fn insert(&mut self, tick: Tick, value: T) -> bool {
        if self.newest().is_some_and(|n| tick <= n) {
            return false;
        }
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back((tick, value));
        true
    }

    /// The snapshot of `tick`, if still held.
    pub fn get(&self, tick: Tick) -> Option<&T> {
        let i = self.entries.binary_search_by_key(&tick, |(t, _)| *t).ok()?;
        self.entries.get(i).map(|(_, v)| v)
    }

    /// The newest tick held.
    pub fn newest(&self) -> Option<Tick> {
        self.entries.back().map(|(t, _)| *t)
    }

    /// The oldest tick held.
    pub fn oldest(&self) -> Option<Tick> {
        self.entries.front().map(|(t, _)| *t)
    }

    /// Forgets everything (a reconnect, or a new scene).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_in_order() {
        let mut h = BaselineHistory::new(3);
        assert!(h.get(Tick(1)).is_none());
        for t in [2, 4, 6, 8] {
            assert!(h.insert(Tick(t), t * 10));
        }
        assert_eq!(h.len(), 3);
        assert_eq!(h.oldest(), Some(Tick(4)));
        assert_eq!(h.newest(), Some(Tick(8)));
        assert_eq!(h.get(Tick(2)), None, "evicted");
        assert_eq!(h.get(Tick(6)), Some(&60));
        assert_eq!(h.get(Tick(5)), None, "never recorded");
    }

    #[test]
    fn refuses_old_or_repeated_ticks() {
        let mut h = BaselineHistory::new(2);
        assert!(h.insert(Tick(5), 'a'));
        assert!(!h.insert(Tick(5), 'b'));
        assert!(!h.insert(Tick(3), 'c'));
        assert_eq!(h.get(Tick(5)), Some(&'a'));
        assert_eq!(h.len(), 1);
        h.clear();
        assert!(h.is_empty());
        assert!(h.insert(Tick(1), 'd'), "a cleared history starts over");
    }
}
