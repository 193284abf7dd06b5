//! The first estimate of the adaptive delay: what the window saw. Playback of the window's
//! pairs is replayed, in arrival order, at a candidate lag, and the time it would have run
//! past the newest snapshot is what counts.

use super::arrivals::ArrivalStats;
use super::search::smallest_lag_near;
use super::stretch::Stretch;

/// The smallest playback lag at which the fraction of server time the window's pairs
/// would *not* have been ready for is at most `fraction`. Pairs spanning more than
/// `max_span` seconds (outages) are left out: no sensible lag rides them over.
///
/// Playback is replayed over the window's pairs in arrival order at that lag
/// ([`missed`]), so a `stretch` is credited as the buffer does it: a pair whose snapshot
/// is overdue waits as long as at the [effective](Stretch::effective) lag, and the lag a
/// stretch adds carries over to the pairs after it until playback has caught up. That
/// matters when snapshots come faster than jitter spreads them: a late snapshot holds
/// back the ones sent after it, and the stretch over the first of them covers the rest
/// of the run.
///
/// A miss costs at least `min_miss` (the caller passes half a rendered frame): a
/// renderer whose frame rate is locked to the tick rate samples the same phase every
/// time, and when the lag sits just inside a tight cluster of needs, a miss of a
/// fraction of a millisecond costs a whole frame, every time.
///
/// `hint`, the last answer, only makes the search faster.
pub(super) fn lag(
    stats: &ArrivalStats,
    fraction: f64,
    max_span: f64,
    min_miss: f64,
    stretch: Option<Stretch>,
    hint: Option<f64>,
) -> Option<f64> {
    let usable = || stats.needs().filter(|n| n.span <= max_span);
    let total: f64 = usable().map(|n| n.span).sum();
    if total <= 0.0 {
        return None;
    }
    let budget = fraction.clamp(0.0, 1.0) * total;
    let hi = usable().map(|n| n.need).max_by(f64::total_cmp)?;
    let lo = usable().map(|n| n.need - n.span).min_by(f64::total_cmp)?;
    // At `hi` every pair is ready before playback reaches it; the missed time falls
    // monotonically with the lag (a longer lag is at least as long at every moment
    // of the replay).
    Some(smallest_lag_near(lo, hi, hint, |lag| {
        missed(stats, lag, max_span, min_miss, stretch, budget) <= budget
    }))
}

/// Server time playback at a target `lag` would have run past the newest snapshot,
/// over the window's pairs in arrival order; the sum stops growing past `enough`
/// (the caller only asks whether it is within a budget).
///
/// Each pair starts when its first snapshot arrived (then the newest), at the lag
/// playback had then, and follows the buffer's rules: playback catches up with `lag`
/// after a stretch, stretches while the snapshot after the newest is overdue and
/// playback has not reached the newest, and runs past the newest (misses) from the
/// moment it reaches it until the pair's second snapshot arrives.
pub(super) fn missed(
    stats: &ArrivalStats,
    lag: f64,
    max_span: f64,
    min_miss: f64,
    stretch: Option<Stretch>,
    enough: f64,
) -> f64 {
    let mut missed = 0.0;
    // The current playback lag, and the newest snapshot's offset (its age when it
    // arrived).
    let mut current = lag;
    let mut newest_offset = None;
    // Most pairs are quiet: playback at its target, the snapshot in before it is
    // overdue or due. They change nothing.
    let quiet = stretch.map_or(lag, |s| s.from.min(lag));
    for pair in stats.needs() {
        let offset = pair.need - pair.span;
        let start = newest_offset
            .replace(offset)
            .unwrap_or(offset)
            .min(pair.need);
        if pair.span > max_span {
            // An outage: the buffer starts over at its target.
            current = lag;
            continue;
        }
        if current <= lag && pair.need <= quiet {
            continue;
        }
        let (miss, after) = replay_pair(lag, current, start, pair.need, stretch);
        if miss > 0.0 {
            missed += miss.max(min_miss);
            if missed > enough {
                return missed;
            }
        }
        current = after;
    }
    missed
}

/// One pair of [`missed`], in the newest snapshot's age `u` (local time minus its server
/// time): the pair starts at age `start` (when that snapshot arrived) with playback
/// `current` behind real time, and its second snapshot arrives at age `need`. Playback
/// is past the newest once its lag is below the age. Returns the time missed and the
/// playback lag when the second snapshot arrives.
fn replay_pair(
    lag: f64,
    current: f64,
    start: f64,
    need: f64,
    stretch: Option<Stretch>,
) -> (f64, f64) {
    let catch_up = stretch.map_or(0.0, |s| s.catch_up);
    // Playback lag at age `u` while following the target: catching up after a stretch.
    let following = |u: f64| (current - catch_up * (u - start)).max(lag);
    // The first age from `earliest` on at which playback is short of the newest by at
    // most `runway` (`following(u) - u <= runway`): at once, during the catch-up if it is
    // steep enough, else once back at `lag`.
    let within = |earliest: f64, runway: f64| -> f64 {
        if following(earliest) - earliest <= runway {
            return earliest;
        }
        let during = (current - runway + catch_up * start) / (1.0 + catch_up);
        if current - catch_up * (during - start) >= lag {
            during
        } else {
            (lag - runway).max(earliest)
        }
    };
    if let Some(s) = stretch {
        // Stretching starts once the newest is overdue (`u >= from`) and playback is
        // within `max_runway` of it: later while it is still catching up.
        let begin = within(s.from.max(start), s.max_runway(lag));
        let at = following(begin);
        // Before the second snapshot arrived, with playback still short of the newest:
        // it slows to `rate` until the snapshot comes or playback reaches the newest (at
        // age `reach`).
        if begin < need && at > begin {
            let reach = begin + (at - begin) / s.rate;
            return if need <= reach {
                (0.0, at + (1.0 - s.rate) * (need - begin))
            } else {
                (need - reach, (reach - catch_up * (need - reach)).max(lag))
            };
        }
    }
    // Playback reaches the newest where its lag meets the age.
    let reach = within(start, 0.0);
    ((need - reach).max(0.0), following(need))
}

#[cfg(test)]
mod tests {
    use super::super::arrivals::streams::{fifo_stream, hash};
    use super::*;
    use crate::interpolation::policy::Need;

    #[test]
    fn lag_covers_the_requested_fraction_of_time() {
        let mut s = ArrivalStats::new(100);
        // 99 pairs ready at lag 0.1, one needing 0.2; each spans 0.1 s.
        for _ in 0..99 {
            s.add_need(Need {
                need: 0.1,
                span: 0.1,
            });
        }
        s.add_need(Need {
            need: 0.2,
            span: 0.1,
        });
        let full = lag(&s, 0.0, 1.0, 0.0, None, None).unwrap();
        assert!((full - 0.2).abs() < 1e-4, "{full}");
        // Missing 0.5% of 10 s = 0.05 s of the late pair's 0.1 s.
        let half = lag(&s, 0.005, 1.0, 0.0, None, None).unwrap();
        assert!((half - 0.15).abs() < 1e-4, "{half}");
        // 1% can be missed by skipping the late pair entirely.
        let most = lag(&s, 0.01, 1.0, 0.0, None, None).unwrap();
        assert!((most - 0.1).abs() < 1e-4, "{most}");
        // Outages are ignored.
        assert_eq!(lag(&s, 0.0, 0.05, 0.0, None, None), None);
        assert_eq!(lag(&ArrivalStats::new(3), 0.01, 1.0, 0.0, None, None), None);
    }

    /// Plays `arrivals` back at a target `lag` in small steps by the buffer's rules (stretch
    /// while the snapshot after the newest is overdue and playback is about to reach the
    /// newest, then catch up at the time-scale bound) and returns the time playback spent past the
    /// newest snapshot: what `missed` computes in closed form.
    fn step_through(arrivals: &[(f64, u32)], period: f64, lag: f64, stretch: Stretch) -> f64 {
        let dt = 1e-5;
        let (mut next, mut newest) = (1, f64::from(arrivals[0].1) * period);
        let mut now = arrivals[0].0;
        let mut shown = now - lag;
        let mut missed = 0.0;
        while next < arrivals.len() {
            now += dt;
            while next < arrivals.len() && arrivals[next].0 <= now {
                newest = newest.max(f64::from(arrivals[next].1) * period);
                next += 1;
            }
            if stretch.applies(now - newest, newest - shown, lag) {
                shown += stretch.rate * dt;
            } else {
                let behind = (now - lag) - (shown + dt);
                shown += dt + behind.clamp(0.0, stretch.catch_up * dt);
            }
            if shown > newest {
                missed += dt;
            }
        }
        missed
    }

    #[test]
    fn the_replay_plays_back_as_the_buffer_does() {
        let period = 1.0 / 60.0;
        // 60/s, one in 40 held up by 20-60 ms (holding back those behind it), 2% lost.
        let jitter = |t: u32| {
            if hash(t) % 40 == 0 {
                f64::from(20 + hash(t + 7) % 41) / 1000.0
            } else {
                f64::from(hash(t) % 6) / 1000.0
            }
        };
        let (s, arrivals) = fifo_stream(3000, |t| hash(t ^ 0x55) % 50 == 0, jitter);
        let stretch = Stretch::new(s.clock(), period, 0.5, 0.9, 0.1).unwrap();
        // Overdue one interval after nine arrivals in ten.
        let q90 = s.clock().offset_quantile(0.9).unwrap();
        assert!((stretch.from - (q90 + period)).abs() < 1e-12);
        assert!(stretch.from < s.clock().max_offset().unwrap());
        let min = s.clock().min_offset().unwrap();
        for extra in [0.0, 0.01, 0.02, 0.03, 0.045] {
            let lag = min + extra;
            let closed = missed(&s, lag, 1.0, 0.0, Some(stretch), f64::INFINITY);
            let stepped = step_through(&arrivals, period, lag, stretch);
            // Each event is off by at most a step or two.
            assert!(
                (closed - stepped).abs() < 1e-3 + 0.02 * stepped,
                "lag +{extra}: {closed} vs {stepped}"
            );
        }
        // Without stretching, playback misses exactly what arrives after it is due.
        let plain = missed(&s, min + 0.02, 1.0, 0.0, None, f64::INFINITY);
        let none = Stretch {
            from: f64::INFINITY,
            rate: 0.5,
            catch_up: 0.1,
            slack: 0.0,
        };
        let stepped = step_through(&arrivals, period, min + 0.02, none);
        assert!(
            (plain - stepped).abs() < 1e-3 + 0.02 * stepped,
            "{plain} vs {stepped}"
        );
    }

    #[test]
    fn a_stretch_carries_over_a_slow_spell() {
        let period = 1.0 / 60.0;
        // Every two seconds, a slow spell: six snapshots in a row each 8 ms later than the
        // one before (a queue building up), then back to 50 ms.
        let jitter = |t: u32| 0.008 * f64::from((t % 120).saturating_sub(113));
        let (s, _) = fifo_stream(3000, |_| false, jitter);
        let stretch = Stretch::new(s.clock(), period, 0.5, 0.9, 0.1).unwrap();
        assert!((stretch.from - (0.05 + period)).abs() < 1e-9, "{stretch:?}");
        let target = 0.001;
        let plain = lag(&s, target, 1.0, 0.0, None, None).unwrap();
        let stretched = lag(&s, target, 1.0, 0.0, Some(stretch), None).unwrap();
        // Without stretching, the lag waits for the latest of the spell, 48 ms past the
        // others (less the budget: 0.1% of two seconds per spell).
        assert!((plain - (0.098 + period)).abs() < 2e-3, "{plain}");
        // Each pair of the spell needs 8 ms more than the one before. Credited alone,
        // a pair gets `effective(lag)`, so the lag would have to bridge the last one on its
        // own. Played back in order, the lag each stretch adds is still there for the
        // next pair: the spell is bridged with much less.
        let alone = stretch.from + stretch.rate * (plain - stretch.from);
        assert!(stretched < alone - 0.01, "{stretched} vs {alone}");
        let miss = missed(&s, stretched, 1.0, 0.0, Some(stretch), f64::INFINITY);
        assert!(miss <= target * 50.0 + 1e-9, "{miss}");
        println!("plain {plain}, alone {alone}, in order {stretched}");
    }
}
