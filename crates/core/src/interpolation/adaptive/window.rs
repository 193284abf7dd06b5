//! One window of arrivals as the adaptive policy keeps it: the statistics, what the
//! policy carries about them from one arrival to the next, and the two questions it asks
//! of them (what lag meets the target, and whether the link changed).

use super::arrivals::ArrivalStats;
use super::stretch::Stretch;
use super::{Target, model, seen};
use crate::interpolation::policy::WARMUP_PAIRS;
use crate::window::shift::{self, Shift};

/// Arrivals between two looks for a link that loses less: telling takes hundreds of
/// arrivals, and each look walks the whole loss window.
const LOSS_CHECK_EVERY: u32 = 16;

/// A window of arrivals and the policy's state about it.
#[derive(Debug, Clone)]
pub(super) struct ArrivalWindow {
    pub(super) stats: ArrivalStats,
    /// The window estimate at the last arrival, where its next search starts: it moves
    /// little between arrivals.
    hint: Option<f64>,
    /// Cut from a longer window at a change of link, rather than started afresh. It then
    /// holds the arrivals since the change, and its estimates are trusted from its first
    /// pair: the warm-up's three intervals are for a buffer that knows nothing yet, and
    /// would overshoot by far.
    cut: bool,
    /// Arrivals until the shift test next looks for a link that loses less.
    loss_check_in: u32,
    /// Room for the recent values the shift test sorts, kept to spare an allocation per
    /// arrival.
    scratch: Vec<f64>,
}

impl ArrivalWindow {
    /// An empty window of `history` arrivals.
    pub(super) fn new(history: usize) -> Self {
        Self {
            stats: ArrivalStats::new(history),
            hint: None,
            cut: false,
            loss_check_in: 0,
            scratch: Vec::new(),
        }
    }

    /// Forgets everything (a new timeline, which is not a window cut at a change of link:
    /// it warms up afresh).
    pub(super) fn clear(&mut self) {
        self.stats.clear();
        self.hint = None;
        self.cut = false;
        self.loss_check_in = 0;
    }

    /// The window over only its last `recent` arrivals, cut at a change of link.
    pub(super) fn tail(&self, recent: usize) -> Self {
        Self {
            stats: self.stats.tail(recent),
            hint: None,
            cut: true,
            loss_check_in: 0,
            scratch: Vec::new(),
        }
    }

    /// True once the window holds as many arrivals as it can.
    pub(super) fn is_full(&self) -> bool {
        self.stats.len() >= self.stats.history()
    }

    /// The playback lag that meets `target` over this window, seconds (see
    /// [`Clock::bound`](crate::interpolation::clock::Clock::bound)); `None` before any
    /// arrival. `min_miss` is the least a miss costs, `stretch` how playback stretches
    /// over an overdue snapshot.
    pub(super) fn lag(
        &mut self,
        target: &Target,
        min_miss: f64,
        stretch: Option<Stretch>,
    ) -> Option<f64> {
        let clock = self.stats.clock();
        let min = clock.min_offset()?;
        let safe = clock.behind_median(3.0, target.period)?;
        let warmed_up = if self.cut { 1 } else { WARMUP_PAIRS };
        let warm = if self.stats.needs_len() >= warmed_up {
            let (underrun, max_delay) = (target.underrun, target.max_delay);
            let seen = seen::lag(
                &self.stats,
                underrun,
                max_delay,
                min_miss,
                stretch,
                self.hint,
            );
            self.hint = seen;
            // The window's own pairs catch what the model cannot (correlated delay,
            // anything but the loss chain); the model covers the rare runs of losses the
            // window may happen not to hold. Both must agree the target is met.
            let floor = seen.unwrap_or(f64::NEG_INFINITY);
            model::lag(
                &self.stats,
                underrun,
                max_delay,
                target.period,
                floor,
                stretch,
            )
            .or(seen)
        } else {
            None
        };
        let lag = match warm {
            Some(lag) => lag.min(min + target.max_delay),
            None => safe
                .max(self.stats.max_need().unwrap_or(min))
                .min(min + target.max_delay),
        };
        clock.bound(lag)
    }

    /// Whether the link changed over the last `recent` arrivals: their pairs needed more
    /// lag, or they came later, than the window's earlier ones far more often than
    /// chance allows, or lost more snapshots; or all of them came faster than most
    /// earlier arrivals, or the loss window's last quarter lost far fewer. `None` too
    /// while the window holds too few earlier arrivals to tell.
    pub(super) fn shift(&mut self, recent: usize) -> Option<Shift> {
        let stats = &self.stats;
        let clock = stats.clock();
        // Needs show a link that loses more, as longer spans; offsets show a slower link
        // even when a few losses in the window put the needs' tail a whole send interval
        // up, out of reach of a few tens of milliseconds more delay.
        let by_needs = shift::worse_since(
            stats.sorted_needs(),
            stats.recent_needs(recent),
            &mut self.scratch,
        );
        let by_offsets = shift::worse_since(
            clock.sorted_offsets(),
            clock.recent_offsets(recent),
            &mut self.scratch,
        );
        // A link that loses more shows in the loss runs among the last arrivals' gaps.
        // Most arrivals are settled by those alone: were they all of the window's runs,
        // they still would not be rare enough.
        let gaps = stats.sorted_ticks().len().saturating_sub(1);
        let by_losses = stats
            .loss_runs(recent)
            .filter(|last| shift::may_be_more_losses(gaps, last.gaps, last.runs))
            .and_then(|last| {
                let all = stats.loss_runs(usize::MAX)?;
                shift::more_losses(all.gaps, all.runs, last.gaps, last.runs)
                    .then_some(last.since_first)
            });
        if let Some(since) = by_needs.max(by_offsets).max(by_losses) {
            return Some(Shift::Worse { since });
        }
        self.scratch.clear();
        self.scratch.extend(clock.recent_offsets(recent));
        if shift::better(clock.sorted_offsets(), &mut self.scratch) {
            return Some(Shift::Better { since: recent });
        }
        // One that loses less shows only over many arrivals: the loss window's last
        // quarter, looked at every few arrivals.
        self.loss_check_in = self.loss_check_in.saturating_sub(1);
        if self.loss_check_in > 0 {
            return None;
        }
        self.loss_check_in = LOSS_CHECK_EVERY;
        let long = stats.loss_window() / 4;
        let (last, all) = (stats.loss_runs(long)?, stats.loss_runs(usize::MAX)?);
        (all.gaps >= 2 * long && shift::fewer_losses(all.gaps, all.runs, long, last.runs))
            .then_some(Shift::Better { since: long })
    }
}

#[cfg(test)]
mod tests {
    use super::super::arrivals::streams::{hash, recorded, slow_then_fast, stream};
    use super::*;
    use crate::interpolation::policy::Need;

    /// The window over `stats`, as the policy keeps it.
    fn window(stats: ArrivalStats) -> ArrivalWindow {
        ArrivalWindow {
            stats,
            ..ArrivalWindow::new(1)
        }
    }

    #[test]
    fn adaptive_follows_needs_once_warm() {
        let mut w = ArrivalWindow::new(64);
        w.stats.add_offset(0.05);
        w.stats.add_gap(1);
        for _ in 0..WARMUP_PAIRS {
            w.stats.add_need(Need {
                need: 0.07,
                span: 0.01,
            });
        }
        let target = |max_delay: f64| Target {
            underrun: f64::from(0.01f32),
            max_delay,
            period: 0.01,
        };
        let lag = w.lag(&target(0.5), 0.0, None).unwrap();
        assert!((lag - 0.07).abs() < 1e-4, "{lag}");
        // Capped at max_delay past the earliest arrival.
        let capped = w.lag(&target(0.01), 0.0, None).unwrap();
        assert!((capped - 0.06).abs() < 1e-9, "{capped}");
    }

    #[test]
    fn a_window_cut_from_a_faster_link_keeps_its_last_arrivals() {
        // The test wants eight earlier arrivals per recent one: 54 cannot tell about 10.
        assert!(window(slow_then_fast(64, 100, 10)).shift(10).is_none());
        assert_eq!(
            window(slow_then_fast(1024, 700, 40)).shift(32),
            Some(Shift::Better { since: 32 })
        );
    }

    #[test]
    fn a_worse_link_is_cut_where_its_arrivals_begin() {
        // 500 arrivals needing 20-30 ms, then 12 needing 60-126 ms (every other tick of
        // 10 ms: a pair spans 20 ms, and needs that much more than its offset).
        let need = |k: u32| {
            if k < 500 {
                0.02 + f64::from(k * 7 % 11) * 0.001
            } else {
                0.06 + f64::from(k * 5 % 13) * 0.005
            }
        };
        let mut w = window(recorded(
            512,
            0.01,
            (0..512).map(|k| (k * 2, need(k) - 0.02)),
        ));
        assert_eq!(w.shift(32), Some(Shift::Worse { since: 12 }));
        let mut since = w.tail(12);
        assert!(since.cut && !w.cut);
        // Every one of them from the new link.
        assert_eq!(since.stats.len(), 12);
        let min = since.stats.clock().min_offset().unwrap();
        assert!(min > 0.039, "{since:?}");
        // Cleared for a new timeline, it is no longer a window cut at a change of link:
        // the policy must not trust its first pair.
        since.clear();
        assert!(!since.cut);
    }

    #[test]
    fn a_slower_link_shows_in_the_offsets_when_losses_fill_the_needs_tail() {
        // 10 snapshots a second, 20-24 ms on the way, one in 50 lost: the needs' tail is
        // the lost snapshots' pairs, 100 ms above the rest. Then 12 arrivals 40-70 ms on
        // the way: their needs stay below that tail, their offsets do not.
        let delay = |k: u32| {
            if k < 500 {
                0.02 + f64::from(k * 7 % 5) * 0.001
            } else {
                0.04 + f64::from(k * 5 % 13) * 0.0025
            }
        };
        let sent = (0..512).filter(|k| *k >= 500 || k % 50 != 25);
        let stats = recorded(512, 1.0 / 60.0, sent.map(|k| (k * 6, delay(k))));
        assert_eq!(window(stats).shift(32), Some(Shift::Worse { since: 12 }));
    }

    #[test]
    fn losses_that_start_or_stop_are_told() {
        // 60 snapshots a second, one in 20 lost until tick 2000, none after: no alarm
        // while the window's last quarter still holds losses, then the window keeps
        // only that quarter.
        let fewer = |until: u32, count: u32| {
            window(stream(count, |t| t < until && hash(t) % 20 == 0, |_| 0.0)).shift(32)
        };
        assert_eq!(fewer(2000, 2000), None);
        assert_eq!(fewer(2000, 2150), None);
        assert_eq!(fewer(2000, 2600), Some(Shift::Better { since: 512 }));
        // None lost until tick 2000, then four in the last 30: the losses started with
        // the first of them, and the 21 snapshots received since are the new link's.
        let lost = |t: u32| [2005, 2013, 2021, 2027].contains(&t);
        assert_eq!(
            window(stream(2000 + 30, lost, |_| 0.0)).shift(32),
            Some(Shift::Worse { since: 21 })
        );
        // Three are chance.
        let lost = |t: u32| [2005, 2013, 2021].contains(&t);
        assert_eq!(window(stream(2000 + 30, lost, |_| 0.0)).shift(32), None);
    }
}
