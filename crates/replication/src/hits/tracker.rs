//! The shooter's client: hits shown at once, resolved by the server's word.

use super::HitReport;
use lagless_core::{Tick, TickRate};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Settings of a [`HitTracker`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HitConfig {
    /// The simulation's tick rate (30 ticks/s by default).
    pub tick_rate: TickRate,
    /// Added to the round trip to make the deadline for the server's word (default
    /// 250 ms: the server's input buffer, the downlink's jitter, and a shot whose input
    /// came late, which the server still fires, up to
    /// `lagless_core::ServerConfig::max_late_ticks` after its tick). On the shooter
    /// over `mobile` (seeds 1-10), 100 ms gave up 4-12 shown hits a run whose word then
    /// came, 250 ms 0-1, and 400 ms none more: see `docs/shooter.md`.
    pub margin: Duration,
    /// Hits awaiting the server at most; the oldest beyond it is given up as a miss
    /// (default 256).
    pub max_pending: usize,
}

impl Default for HitConfig {
    fn default() -> Self {
        Self {
            tick_rate: TickRate::new(30),
            margin: Duration::from_millis(250),
            max_pending: 256,
        }
    }
}

/// Why a shown hit is now a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissReason {
    /// The server said the shot missed (or hit something else).
    Rejected,
    /// No word from the server by the deadline (the report was lost, or the shot).
    Timeout,
}

/// What the game shows next ([`HitTracker::poll_event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitEvent {
    /// The server confirmed a hit the client showed: apply what follows a hit (health
    /// comes with the server's state anyway).
    Confirmed {
        /// The client's shot number.
        shot: u16,
        /// The entity hit.
        target: u32,
    },
    /// A hit the client showed did not happen: show a miss now (undo the marker).
    ShowMiss {
        /// The client's shot number.
        shot: u16,
        /// The entity the client thought it hit.
        target: u32,
        /// Why.
        reason: MissReason,
    },
    /// The server hit something the client had not shown (a miss on screen that the
    /// rewound world counted, or a report after the deadline): show the hit now.
    ServerOnly {
        /// The client's shot number.
        shot: u16,
        /// The entity hit.
        target: u32,
    },
}

/// Counters of a [`HitTracker`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HitStats {
    /// Hits shown: `hits.shown`.
    pub shown: u64,
    /// Shown hits the server confirmed.
    pub confirmed: u64,
    /// Shown hits the server rejected.
    pub rejected: u64,
    /// Shown hits with no word by the deadline (shown as misses; also rejected for
    /// the player).
    pub expired: u64,
    /// Hits the server counted that the client had not shown.
    pub server_only: u64,
    /// Server words that came after their shot's deadline.
    pub late: u64,
    /// Reports repeated for a shot already resolved (ignored).
    pub duplicates: u64,
}

impl HitStats {
    /// `hits.confirmed_pct`: shown hits the server confirmed, in percent of those
    /// resolved (100 when none was).
    pub fn confirmed_pct(&self) -> f64 {
        pct(
            self.confirmed,
            self.confirmed + self.rejected + self.expired,
        )
    }

    /// `hits.server_only_pct`: of the hits the server counted, the share the client had
    /// not shown, in percent (0 when none).
    pub fn server_only_pct(&self) -> f64 {
        100.0 - pct(self.confirmed, self.confirmed + self.server_only)
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        100.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// Cosmetic-first hits on the shooter's client (the Pixonic article: what is not
/// predicted, damage, is hidden cosmetically; Overwatch shows the hit marker at once
/// and the damage number when the server agrees). The game shows the hit effect the
/// moment its own ray meets a target and calls [`shown`](Self::shown); the server
/// tests the shot in the rewound world ([`LagCompensator`](crate::lagcomp::LagCompensator))
/// and reports every shot's outcome ([`HitReport`]); [`report`](Self::report) resolves
/// it. A hit with no word one round trip plus a margin later is given up:
/// [`HitEvent::ShowMiss`] at most that late.
#[derive(Debug, Clone)]
pub struct HitTracker {
    config: HitConfig,
    deadline_ticks: i64,
    /// Shown hits awaiting the server: shot → (target, tick shown).
    pending: BTreeMap<u16, (u32, Tick)>,
    /// Shots recently resolved, to ignore repeated reports.
    resolved: VecDeque<u16>,
    /// Shots given up at the deadline, whose word may still come.
    late_shots: VecDeque<u16>,
    events: VecDeque<HitEvent>,
    stats: HitStats,
}

impl HitTracker {
    /// A tracker whose deadline is the margin alone until [`set_rtt`](Self::set_rtt).
    pub fn new(config: HitConfig) -> Self {
        let mut t = Self {
            config,
            deadline_ticks: 0,
            pending: BTreeMap::new(),
            resolved: VecDeque::new(),
            late_shots: VecDeque::new(),
            events: VecDeque::new(),
            stats: HitStats::default(),
        };
        t.set_rtt(Duration::ZERO);
        t
    }

    /// The counters.
    pub fn stats(&self) -> &HitStats {
        &self.stats
    }

    /// The current round trip (the session's smoothed RTT): the deadline becomes
    /// `rtt + margin`, in ticks rounded up.
    pub fn set_rtt(&mut self, rtt: Duration) {
        let wait = rtt.saturating_add(self.config.margin);
        self.deadline_ticks = self.config.tick_rate.ticks_in(wait).ceil() as i64;
    }

    /// The deadline in ticks after a hit is shown.
    pub fn deadline_ticks(&self) -> i64 {
        self.deadline_ticks
    }

    /// Hits awaiting the server.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The client showed shot `shot` hitting `target` at its tick `tick`.
    pub fn shown(&mut self, shot: u16, target: u32, tick: Tick) {
        self.stats.shown += 1;
        self.pending.insert(shot, (target, tick));
        self.resolved.retain(|&s| s != shot);
        self.late_shots.retain(|&s| s != shot);
        if self.pending.len() > self.config.max_pending {
            let oldest = self.pending.iter().min_by_key(|(_, (_, t))| *t);
            if let Some((&shot, &(target, _))) = oldest {
                self.give_up(shot, target);
            }
        }
    }

    /// The server's word on shot `report.shot`.
    pub fn report(&mut self, report: &HitReport) {
        if self.resolved.contains(&report.shot) {
            self.stats.duplicates += 1;
            return;
        }
        let shot = report.shot;
        if let Some(i) = self.late_shots.iter().position(|&s| s == shot) {
            self.late_shots.remove(i);
            self.stats.late += 1;
            if let Some(target) = report.target {
                self.stats.server_only += 1;
                self.events.push_back(HitEvent::ServerOnly { shot, target });
            }
            self.remember(shot);
            return;
        }
        match (self.pending.remove(&shot), report.target) {
            (Some((shown, _)), Some(hit)) if shown == hit => {
                self.stats.confirmed += 1;
                self.events
                    .push_back(HitEvent::Confirmed { shot, target: hit });
            }
            (Some((shown, _)), other) => {
                self.stats.rejected += 1;
                self.events.push_back(HitEvent::ShowMiss {
                    shot,
                    target: shown,
                    reason: MissReason::Rejected,
                });
                if let Some(target) = other {
                    self.stats.server_only += 1;
                    self.events.push_back(HitEvent::ServerOnly { shot, target });
                }
            }
            (None, Some(target)) => {
                self.stats.server_only += 1;
                self.events.push_back(HitEvent::ServerOnly { shot, target });
            }
            (None, None) => {}
        }
        self.remember(shot);
    }

    /// Gives up the hits shown more than the deadline before client tick `now`: each
    /// becomes a [`HitEvent::ShowMiss`] with [`MissReason::Timeout`].
    pub fn update(&mut self, now: Tick) {
        let late: Vec<(u16, u32)> = self
            .pending
            .iter()
            .filter(|(_, (_, t))| now.diff(*t) >= self.deadline_ticks)
            .map(|(&s, &(target, _))| (s, target))
            .collect();
        for (shot, target) in late {
            self.give_up(shot, target);
        }
    }

    /// The next thing to show, oldest first.
    pub fn poll_event(&mut self) -> Option<HitEvent> {
        self.events.pop_front()
    }

    fn give_up(&mut self, shot: u16, target: u32) {
        self.pending.remove(&shot);
        self.stats.expired += 1;
        self.events.push_back(HitEvent::ShowMiss {
            shot,
            target,
            reason: MissReason::Timeout,
        });
        // A word after the deadline is late, not new: it shows as server-only.
        self.remember_late(shot);
    }

    fn remember(&mut self, shot: u16) {
        self.resolved.push_back(shot);
        while self.resolved.len() > 256 {
            self.resolved.pop_front();
        }
    }

    fn remember_late(&mut self, shot: u16) {
        self.late_shots.push_back(shot);
        while self.late_shots.len() > 256 {
            self.late_shots.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(shot: u16, target: Option<u32>) -> HitReport {
        HitReport { shot, target }
    }

    fn events(t: &mut HitTracker) -> Vec<HitEvent> {
        std::iter::from_fn(|| t.poll_event()).collect()
    }

    #[test]
    fn confirmed_rejected_and_server_only() {
        let mut t = HitTracker::new(HitConfig::default());
        t.set_rtt(Duration::from_millis(200));
        assert_eq!(t.deadline_ticks(), 14, "450 ms at 30 ticks/s");
        t.shown(1, 7, Tick(10));
        t.shown(2, 7, Tick(11));
        t.shown(3, 8, Tick(12));
        t.report(&hit(1, Some(7)));
        t.report(&hit(2, None));
        t.report(&hit(3, Some(9)));
        t.report(&hit(4, Some(8)));
        t.report(&hit(5, None));
        t.report(&hit(1, Some(7)));
        use HitEvent::*;
        assert_eq!(
            events(&mut t),
            [
                Confirmed { shot: 1, target: 7 },
                ShowMiss {
                    shot: 2,
                    target: 7,
                    reason: MissReason::Rejected
                },
                ShowMiss {
                    shot: 3,
                    target: 8,
                    reason: MissReason::Rejected
                },
                ServerOnly { shot: 3, target: 9 },
                ServerOnly { shot: 4, target: 8 },
            ]
        );
        let s = *t.stats();
        assert_eq!(
            (s.shown, s.confirmed, s.rejected, s.server_only),
            (3, 1, 2, 2)
        );
        assert_eq!(s.duplicates, 1);
        assert!((s.confirmed_pct() - 100.0 / 3.0).abs() < 1e-9);
        assert!((s.server_only_pct() - 200.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn no_word_by_the_deadline_is_a_miss_and_a_late_word_is_server_only() {
        let mut t = HitTracker::new(HitConfig::default());
        t.set_rtt(Duration::from_millis(200));
        t.shown(1, 7, Tick(10));
        t.shown(2, 7, Tick(10));
        t.update(Tick(23));
        assert_eq!(t.poll_event(), None, "not yet: deadline 14 ticks");
        t.update(Tick(24));
        let miss = |shot| HitEvent::ShowMiss {
            shot,
            target: 7,
            reason: MissReason::Timeout,
        };
        assert_eq!(events(&mut t), [miss(1), miss(2)]);
        t.report(&hit(1, Some(7)));
        t.report(&hit(2, None));
        assert_eq!(
            events(&mut t),
            [HitEvent::ServerOnly { shot: 1, target: 7 }]
        );
        let s = t.stats();
        assert_eq!(
            (s.expired, s.late, s.server_only, s.confirmed),
            (2, 2, 1, 0)
        );
    }

    #[test]
    fn pending_is_bounded() {
        let mut t = HitTracker::new(HitConfig {
            max_pending: 2,
            ..HitConfig::default()
        });
        for shot in 0..5 {
            t.shown(shot, 1, Tick(u32::from(shot)));
        }
        assert_eq!(t.pending(), 2);
        assert_eq!(t.stats().expired, 3);
    }
}
