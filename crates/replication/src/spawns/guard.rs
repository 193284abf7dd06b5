//! The server's check of its clients' spawn claims.

use super::{IdSpace, SpawnClaim, SpawnError};
use lagless_core::Tick;
use std::collections::{BTreeMap, HashMap};

/// Settings of a [`SpawnGuard`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpawnGuardConfig {
    /// The id layout the clients use.
    pub space: IdSpace,
    /// Fewest ticks between two accepted spawns of one kind by one client, for kinds
    /// without their own ([`SpawnGuard::set_min_interval`]); default 1 (one a tick).
    pub default_min_interval: u32,
    /// How far before the server's tick a claim's tick may lie (default 8 ticks, the
    /// 250 ms window at 30 ticks/s): the input it came with was that late.
    pub max_age: u32,
    /// How far after it (default 64 ticks: the most a client runs ahead).
    pub max_ahead: u32,
}

impl Default for SpawnGuardConfig {
    fn default() -> Self {
        Self {
            space: IdSpace::default(),
            default_min_interval: 1,
            max_age: 8,
            max_ahead: 64,
        }
    }
}

/// Counters of a [`SpawnGuard`], by outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpawnGuardStats {
    /// Claims accepted.
    pub accepted: u64,
    /// Claims repeated (the same id as the client's last accepted one of that kind):
    /// ignored, not abuse.
    pub duplicates: u64,
    /// Refused: an id outside the client's range (spoofed, or another client's).
    pub refused_id: u64,
    /// Refused: faster than the kind's fire rate.
    pub refused_rate: u64,
    /// Refused: a tick outside `[now - max_age, now + max_ahead]`.
    pub refused_tick: u64,
}

/// The server's check of spawn claims ([`SpawnClaim`]) and shots
/// ([`check_fire`](Self::check_fire)): a claim's id must lie in the
/// claiming client's range of the [`IdSpace`], the tick near the server's, and the
/// claims of one kind no faster than its fire rate. The rate is measured on claimed
/// ticks, which must increase by at least the kind's interval and cannot run past
/// `now + max_ahead`, so in the long run no client spawns faster than the rate
/// however it stamps its claims. Every refusal is counted; none panics.
#[derive(Debug, Clone)]
pub struct SpawnGuard {
    config: SpawnGuardConfig,
    intervals: HashMap<u16, u32>,
    /// Per (slot, kind): the last accepted claim's tick and id (none for a shot).
    last: BTreeMap<(u32, u16), (Tick, Option<u32>)>,
    stats: SpawnGuardStats,
}

impl SpawnGuard {
    /// A guard with no claims seen.
    pub fn new(config: SpawnGuardConfig) -> Self {
        Self {
            config,
            intervals: HashMap::new(),
            last: BTreeMap::new(),
            stats: SpawnGuardStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &SpawnGuardStats {
        &self.stats
    }

    /// Sets `kind`'s fire rate as the fewest ticks between two spawns (a weapon firing
    /// 10 a second at 30 ticks/s: 3).
    pub fn set_min_interval(&mut self, kind: u16, ticks: u32) {
        self.intervals.insert(kind, ticks);
    }

    /// Forgets client `slot` (it left; its slot may be reused).
    pub fn remove_client(&mut self, slot: u32) {
        self.last.retain(|&(s, _), _| s != slot);
    }

    /// Checks `claim` from the client in `slot` at server tick `now`. `Ok(true)`: spawn
    /// the server's entity (owner `slot`, the claim's tick and kind); `Ok(false)`: a
    /// repeat of the last accepted claim, already spawned.
    pub fn check(&mut self, slot: u32, now: Tick, claim: &SpawnClaim) -> Result<bool, SpawnError> {
        if self.config.space.slot_of(claim.id) != Some(slot) {
            self.stats.refused_id += 1;
            return Err(SpawnError::IdOutOfRange(claim.id));
        }
        self.rate(slot, now, claim.kind, claim.tick, Some(claim.id))
    }

    /// The same tick-window and fire-rate check for a shot that spawns nothing (a
    /// hitscan weapon's): `kind` is the weapon, `tick` the shot input's tick.
    /// `Ok(true)`: fire.
    pub fn check_fire(
        &mut self,
        slot: u32,
        now: Tick,
        kind: u16,
        tick: Tick,
    ) -> Result<bool, SpawnError> {
        self.rate(slot, now, kind, tick, None)
    }

    fn rate(
        &mut self,
        slot: u32,
        now: Tick,
        kind: u16,
        tick: Tick,
        id: Option<u32>,
    ) -> Result<bool, SpawnError> {
        let age = now.diff(tick);
        if age > i64::from(self.config.max_age) || -age > i64::from(self.config.max_ahead) {
            self.stats.refused_tick += 1;
            return Err(SpawnError::TickOutOfWindow);
        }
        let key = (slot, kind);
        let interval = self
            .intervals
            .get(&kind)
            .copied()
            .unwrap_or(self.config.default_min_interval);
        if let Some(&(last_tick, last_id)) = self.last.get(&key) {
            if id.is_some() && id == last_id {
                self.stats.duplicates += 1;
                return Ok(false);
            }
            if tick.diff(last_tick) < i64::from(interval) {
                self.stats.refused_rate += 1;
                return Err(SpawnError::TooFast);
            }
        }
        self.last.insert(key, (tick, id));
        self.stats.accepted += 1;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(guard: &SpawnGuard, slot: u32, n: u32, tick: u32) -> SpawnClaim {
        SpawnClaim {
            id: guard.config.space.range(slot).unwrap().start() + n,
            kind: 2,
            tick: Tick(tick),
            seq: 0,
        }
    }

    #[test]
    fn spoofed_ids_are_refused() {
        let mut g = SpawnGuard::new(SpawnGuardConfig::default());
        let theirs = claim(&g, 4, 0, 100);
        assert_eq!(
            g.check(3, Tick(100), &theirs),
            Err(SpawnError::IdOutOfRange(theirs.id))
        );
        let server_id = SpawnClaim { id: 5, ..theirs };
        assert_eq!(
            g.check(3, Tick(100), &server_id),
            Err(SpawnError::IdOutOfRange(5))
        );
        assert_eq!(g.check(4, Tick(100), &theirs), Ok(true));
        assert_eq!(g.stats().refused_id, 2);
    }

    #[test]
    fn the_fire_rate_and_the_tick_window_hold() {
        let mut g = SpawnGuard::new(SpawnGuardConfig::default());
        g.set_min_interval(2, 3);
        assert_eq!(g.check(0, Tick(100), &claim(&g, 0, 0, 104)), Ok(true));
        assert_eq!(g.check(0, Tick(100), &claim(&g, 0, 0, 104)), Ok(false));
        assert_eq!(
            g.check(0, Tick(100), &claim(&g, 0, 1, 106)),
            Err(SpawnError::TooFast)
        );
        assert_eq!(g.check(0, Tick(100), &claim(&g, 0, 1, 107)), Ok(true));
        // Claims can't go back in time to dodge the rate, nor far ahead.
        assert_eq!(
            g.check(0, Tick(100), &claim(&g, 0, 2, 91)),
            Err(SpawnError::TickOutOfWindow)
        );
        assert_eq!(
            g.check(0, Tick(100), &claim(&g, 0, 2, 165)),
            Err(SpawnError::TickOutOfWindow)
        );
        assert_eq!(
            g.check(0, Tick(100), &claim(&g, 0, 2, 92)),
            Err(SpawnError::TooFast)
        );
        // Another client, another kind: their own clocks.
        assert_eq!(g.check(1, Tick(100), &claim(&g, 1, 0, 100)), Ok(true));
        // A hitscan weapon: the rate alone.
        g.set_min_interval(7, 2);
        assert_eq!(g.check_fire(1, Tick(100), 7, Tick(100)), Ok(true));
        assert_eq!(
            g.check_fire(1, Tick(100), 7, Tick(101)),
            Err(SpawnError::TooFast)
        );
        assert_eq!(g.check_fire(1, Tick(100), 7, Tick(102)), Ok(true));
        let s = g.stats();
        assert_eq!(
            (s.accepted, s.duplicates, s.refused_rate, s.refused_tick),
            (5, 1, 3, 2)
        );
    }
}
