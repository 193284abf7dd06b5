//! Telling values from a link that changed from values that merely vary: the
//! interpolation buffer's adaptive delay asks it of its arrivals, the client's adaptive
//! lead of the server's slack reports.
//!
//! A window of recent values describes a mix of the old link and the new one until it has
//! turned over, which at 10 snapshots a second takes most of a minute; so at every new
//! value the caller asks whether the newest few sit apart from the window's earlier ones
//! more often than chance allows. On a link that has not changed the values come in random
//! order, whatever their distribution, so each test's chance of a false alarm is an exact
//! hypergeometric tail, held below [`SIGNIFICANCE`]. What each test looks at, and the
//! figures behind the constants, are in `docs/interpolation.md`.

/// Which way the link moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shift {
    /// Recent pairs need more lag than the window's earlier ones. The last `since` pairs
    /// are those from the first recent one that did on: as near to the change as the
    /// test can tell (a new link's first pairs may need no more than the old one's, but
    /// the old link's last ones rarely need more).
    Worse {
        /// Pairs since the change, the newest included.
        since: usize,
    },
    /// Recent arrivals came sooner, or lost fewer snapshots, than the window's earlier
    /// ones; the window should keep only its last `since` arrivals.
    Better {
        /// Arrivals to keep, the newest included.
        since: usize,
    },
}

/// The share of earlier values at each end that counts as their tail.
const TAIL: f64 = 0.01;

/// The chance, on a link that has not changed, that one test reports a shift (at most):
/// at 60 arrivals a second, once in five hours per buffer.
const SIGNIFICANCE: f64 = 1e-6;

/// Earlier pairs needed per recent one before the test is trusted: the tail of fewer is
/// too coarse (the 1% tail of 100 is the largest one).
const EARLIER_PER_RECENT: usize = 8;

/// How far beyond the earlier needs' tail (or median) a recent need must lie to count,
/// as a share of the earlier needs' spread between their two tails. Ranks alone would
/// call any pattern a shift: arrivals stamped at frame times, or a frame clock beating
/// against the tick clock, make needs wander by a frame and back on a link that has not
/// changed. A change worth acting on moves them by a good part of the spread.
const MARGIN_SHARE: f64 = 0.25;

/// The least such margin, seconds: on a link without jitter the spread is nothing, and a
/// need a millisecond longer is rounding.
const MIN_MARGIN: f64 = 0.002;

/// When more of the needs in `recent` (the last of the window, in any order; sorted
/// here unless a quick check settles it) than chance allows lie beyond the window's
/// earlier needs' 1% tail, by the margin, the need beyond which they count; `None`
/// otherwise, and when there are too few earlier needs to tell. `all` is every need in
/// the window, sorted, `recent` included.
///
/// "Than chance allows" is exact for a link that has not changed, whatever its
/// distribution: then the window's needs come in random order, and `c` recent needs lie
/// beyond the `k`-th largest earlier one exactly when at least `c` of the `c + k - 1`
/// largest in the window are recent ([`chance_among_extremes`]). With 480 earlier needs
/// and 32 recent that takes 7 of them; the margin only makes it rarer.
pub(crate) fn worse(all: &[f64], recent: &mut [f64]) -> Option<f64> {
    let (_, k) = sizes(all, recent)?;
    let (total, n) = (all.len(), recent.len());
    let rare = |c: usize| c > 0 && chance_among_extremes(total, n, k, c) < SIGNIFICANCE;
    // Most arrivals settle it without sorting: the k-th largest earlier need is at
    // least the value k + n from the top of the whole window, and the margin at least
    // its least, so no more recent needs can lie beyond the two together.
    let at_least = all[all.len() - k - recent.len()] + MIN_MARGIN;
    if !rare(recent.iter().filter(|x| **x > at_least).count()) {
        return None;
    }
    recent.sort_by(f64::total_cmp);
    let low = kth_earlier(all.iter(), recent.iter(), k)?;
    let high = kth_earlier(all.iter().rev(), recent.iter().rev(), k)?;
    let above = high + margin(low, high);
    rare(recent.iter().filter(|x| **x > above).count()).then_some(above)
}

/// Whether the `recent` values (the last of a window whose values are `all`, sorted) are
/// worse than the earlier ones ([`worse`]), and if so how many of them there are
/// from the first that lay beyond the earlier ones on: the arrivals since the change.
/// `scratch` is working space, reused to spare an allocation per arrival.
pub(crate) fn worse_since(
    all: &[f64],
    recent: impl Iterator<Item = f64> + Clone,
    scratch: &mut Vec<f64>,
) -> Option<usize> {
    scratch.clear();
    scratch.extend(recent.clone());
    let n = scratch.len();
    let above = worse(all, scratch)?;
    let first = recent.clone().position(|x| x > above).unwrap_or(0);
    Some(n - first)
}

/// True when every arrival offset in `recent` (as in [`worse`]) lies below the window's
/// earlier offsets' median, by the margin, and that many in a row below it are rarer than
/// [`SIGNIFICANCE`] on a link that has not changed.
///
/// Offsets rather than needs: a need spans a send interval or more, and at 10 snapshots
/// a second that span (and a lost snapshot's, twice as long) swamps the delay. What sets
/// the delay is the upper tail, and a few recent arrivals cannot show where a rarer
/// event's tail now lies; but a bulk of arrivals that moved down by a good part of the
/// spread is a link that changed, not a quiet spell. Every one of them, not nearly
/// every one: the window is about to be cut down to them, and one straggler from the
/// old link (a snapshot held up behind a slow one) would be a need as long as the old
/// link's, left alone in a short window. A link that only loses less is told by
/// [`fewer_losses`].
pub(crate) fn better(all: &[f64], recent: &mut [f64]) -> bool {
    let Some((earlier, k)) = sizes(all, recent) else {
        return false;
    };
    let n = recent.len();
    let middle = earlier.div_ceil(2);
    // Most arrivals settle it without sorting: the earlier median is at most the value
    // n past the whole window's middle.
    let at_most = all[middle - 1 + n];
    if recent.iter().any(|x| *x >= at_most) {
        return false;
    }
    // All n recent ones below the `middle`-th smallest earlier one: all n among the
    // `middle - 1 + n` smallest in the window.
    if chance_among_extremes(all.len(), n, middle, n) >= SIGNIFICANCE {
        return false;
    }
    recent.sort_by(f64::total_cmp);
    let (Some(low), Some(median), Some(high)) = (
        kth_earlier(all.iter(), recent.iter(), k),
        kth_earlier(all.iter(), recent.iter(), middle),
        kth_earlier(all.iter().rev(), recent.iter().rev(), k),
    ) else {
        return false;
    };
    let below = median - margin(low, high);
    recent.iter().all(|x| *x < below)
}

/// True when more of the loss runs among a window's `gaps` (the spaces between
/// consecutive snapshots received, in tick order; `runs` of them had snapshots missing)
/// fall among its last `recent` gaps (`recent_runs`) than chance allows.
///
/// Runs, not lost snapshots: on a bursty link one run loses several snapshots, but
/// whether a run begins hardly depends on when the last one did, so on a link that has
/// not changed the runs fall among the gaps in random order and `recent_runs` follows a
/// hypergeometric law, whatever the loss rate.
pub(crate) fn more_losses(gaps: usize, runs: usize, recent: usize, recent_runs: usize) -> bool {
    if recent_runs == 0 || gaps < EARLIER_PER_RECENT * recent {
        return false;
    }
    // Most arrivals are settled without the sum: a count within two standard deviations
    // (at most the root of the mean) of the mean is never that rare.
    let mean = (runs * recent) as f64 / gaps as f64;
    if recent_runs as f64 <= mean + 2.0 * mean.sqrt() + 1.0 {
        return false;
    }
    at_least(gaps, runs, recent, recent_runs) < SIGNIFICANCE
}

/// False when `recent_runs` runs among the last `recent` of `gaps` gaps could not be
/// rare enough for [`more_losses`] even if they were all the runs there are (the
/// rarest case): a test that needs no count of the whole window.
pub(crate) fn may_be_more_losses(gaps: usize, recent: usize, recent_runs: usize) -> bool {
    recent_runs > 0 && at_least(gaps, recent_runs, recent, recent_runs) < SIGNIFICANCE
}

/// True when fewer of the loss runs among a window's `gaps` fall among its last `recent`
/// gaps than chance allows (as in [`more_losses`]): the link loses less than it did. It
/// takes many recent gaps: a loss run is rare, so a stretch without one is common.
pub(crate) fn fewer_losses(gaps: usize, runs: usize, recent: usize, recent_runs: usize) -> bool {
    if recent > gaps || runs > gaps || recent_runs > runs {
        return false;
    }
    // As in `more_losses`, a count not far below the mean settles it at once.
    let mean = (runs * recent) as f64 / gaps as f64;
    if recent_runs as f64 >= mean - 2.5 * mean.sqrt() {
        return false;
    }
    // At most `recent_runs` runs among the recent gaps: at least `recent - recent_runs`
    // of them without one.
    at_least(gaps, gaps - runs, recent, recent - recent_runs) < SIGNIFICANCE
}

/// The chance that at least `c` of `drawn` items, drawn at random from `total` of which
/// `marked` are marked, are marked: [`chance_among_extremes`] with the roles of the
/// drawn and the marked exchanged (the law is the same).
fn at_least(total: usize, marked: usize, drawn: usize, c: usize) -> f64 {
    if c == 0 {
        return 1.0;
    }
    if c > marked.min(drawn) || marked > total {
        return 0.0;
    }
    chance_among_extremes(total, drawn, marked + 1 - c, c)
}

/// The number of earlier values and the [`TAIL`] share of them (at least one); `None`
/// when there are too few earlier values per recent one to tell.
fn sizes(all: &[f64], recent: &[f64]) -> Option<(usize, usize)> {
    let n = recent.len();
    let earlier = all.len().checked_sub(n)?;
    if n == 0 || earlier < EARLIER_PER_RECENT * n {
        return None;
    }
    Some((earlier, ((TAIL * earlier as f64).ceil() as usize).max(1)))
}

/// How far beyond the earlier values' tail (or median) a recent value must lie to count,
/// from the earlier values' `k`-th smallest and largest.
fn margin(low: f64, high: f64) -> f64 {
    (MARGIN_SHARE * (high - low)).max(MIN_MARGIN)
}

/// The `k`-th value (from 1) of `all` that is not one of `recent`, both walked in the
/// same order; `recent` is a sub-multiset of `all`, and an earlier value equal to a recent
/// one is the same value whichever of the two is skipped.
fn kth_earlier<'a>(
    all: impl Iterator<Item = &'a f64>,
    recent: impl Iterator<Item = &'a f64>,
    k: usize,
) -> Option<f64> {
    let mut recent = recent.peekable();
    let mut seen = 0;
    for x in all {
        if recent.next_if(|r| *r == x).is_some() {
            continue;
        }
        seen += 1;
        if seen == k {
            return Some(*x);
        }
    }
    None
}

/// The chance that at least `c` of `n` recent values lie beyond the `k`-th most extreme
/// of the others, when all `total` values come in random order (as they do from a link
/// that has not changed): that at least `c` of the `c + k - 1` most extreme values are
/// recent ones. A hypergeometric tail, summed in logarithms so that windows of any size
/// neither overflow nor round a rare event to nothing.
fn chance_among_extremes(total: usize, n: usize, k: usize, c: usize) -> f64 {
    let top = c + k - 1;
    if n > total || top > total || c > n.min(top) {
        return 0.0;
    }
    if c == 0 {
        return 1.0;
    }
    let others = total - n;
    let f = |x: usize| x as f64;
    // ln P(x recent among `top`) = ln C(n, x) + ln C(others, top - x) - ln C(total, top),
    // stepped from the smallest x possible.
    let first = top.saturating_sub(others);
    let mut ln_p = ln_choose(n, first) + ln_choose(others, top - first) - ln_choose(total, top);
    let mut sum = 0.0;
    for x in first..=n.min(top) {
        if x >= c {
            sum += ln_p.exp();
        }
        // From x to x + 1 recent among them.
        ln_p += (f(n - x) * f(top - x)).ln() - (f(x + 1) * f(others + x + 1 - top)).ln();
    }
    sum.min(1.0)
}

/// ln C(n, k), as a sum of logarithms (n is a window's length: thousands at most).
fn ln_choose(n: usize, k: usize) -> f64 {
    let k = k.min(n - k.min(n));
    (0..k).map(|i| ((n - i) as f64 / (i + 1) as f64).ln()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut v: Vec<f64>) -> Vec<f64> {
        v.sort_by(f64::total_cmp);
        v
    }

    /// A deterministic spread of needs in `[base, base + spread)`.
    fn needs(count: usize, base: f64, spread: f64, seed: u32) -> Vec<f64> {
        (0..count as u32)
            .map(|i| {
                let h = (i ^ seed).wrapping_mul(0x9E37_79B1).rotate_left(13) ^ seed;
                let h = h.wrapping_mul(0x85EB_CA6B);
                base + spread * f64::from(h) / f64::from(u32::MAX)
            })
            .collect()
    }

    fn test(earlier: &[f64], recent: &[f64]) -> Option<Shift> {
        let all = sorted(earlier.iter().chain(recent).copied().collect());
        if let Some(since) = worse_since(&all, recent.iter().copied(), &mut Vec::new()) {
            Some(Shift::Worse { since })
        } else if better(&all, &mut recent.to_vec()) {
            Some(Shift::Better {
                since: recent.len(),
            })
        } else {
            None
        }
    }

    #[test]
    fn chances_of_recent_values_among_the_extremes() {
        // All 3 recent of 10 among the 3 largest: one order in C(10, 3) = 120.
        assert!((chance_among_extremes(10, 3, 1, 3) - 1.0 / 120.0).abs() < 1e-12);
        // At least one recent among the largest of 4 values, 2 of them recent: 1/2.
        assert!((chance_among_extremes(4, 2, 1, 1) - 0.5).abs() < 1e-12);
        assert_eq!(chance_among_extremes(10, 3, 1, 0), 1.0);
        assert_eq!(chance_among_extremes(10, 3, 1, 4), 0.0);
        // The default window: how many of 32 recent needs beyond the 5th largest of 480
        // earlier ones are rare enough. More than a binomial with the tail's nominal 1%
        // would say (6), since the 5th largest of 480 is itself uncertain.
        let enough = (1..=32)
            .find(|c| chance_among_extremes(512, 32, 5, *c) < SIGNIFICANCE)
            .unwrap();
        assert_eq!(enough, 7);
        // All 32 below the median of 480: rare enough; all 16 is not.
        assert!(chance_among_extremes(512, 32, 240, 32) < SIGNIFICANCE);
        assert!(chance_among_extremes(512, 16, 248, 16) > SIGNIFICANCE);
        // Huge windows stay finite.
        let huge = chance_among_extremes(65_536, 4096, 600, 700);
        assert!(huge.is_finite() && (0.0..=1.0).contains(&huge));
    }

    /// Slides a 512-value window along `stream`, testing its last 32 at every step the
    /// way the buffer does; returns how often each test fired.
    fn firings(stream: &[f64]) -> (usize, usize) {
        let (window, n) = (512, 32);
        let mut sorted: Vec<f64> = Vec::new();
        let (mut worse_count, mut better_count) = (0, 0);
        for (i, v) in stream.iter().enumerate() {
            if i >= window {
                let old = stream[i - window];
                let at = sorted.partition_point(|x| *x < old);
                sorted.remove(at);
            }
            sorted.insert(sorted.partition_point(|x| x < v), *v);
            let recent = &stream[(i + 1).saturating_sub(n)..=i];
            worse_count += usize::from(worse(&sorted, &mut recent.to_vec()).is_some());
            better_count += usize::from(better(&sorted, &mut recent.to_vec()));
        }
        (worse_count, better_count)
    }

    /// A seeded stream of uniform values in `[0, 1)`.
    fn uniform(count: usize, mut state: u64) -> Vec<f64> {
        (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64
            })
            .collect()
    }

    #[test]
    fn a_link_that_does_not_change_raises_no_alarm() {
        // `snapshot-demo`'s arrivals: 50 ms, +-33 ms uniform, 5% lost (a need one send
        // interval longer), at 60 snapshots/s.
        let jitter = uniform(20_000, 0x9E37_79B9_7F4A_7C15);
        let fate = uniform(20_000, 0xD1B5_4A32_D192_ED03);
        let needs: Vec<f64> = jitter
            .iter()
            .zip(&fate)
            .map(|(j, f)| 0.050 + 0.066 * (j - 0.5) + if *f < 0.05 { 0.0333 } else { 0.0167 })
            .collect();
        assert_eq!(firings(&needs), (0, 0));
        // The same arrivals stamped when the next frame is drawn, with frames at 59.7 Hz
        // beating against the 60 Hz sends: the stamps wander by up to a frame, and back,
        // every few seconds. The margin keeps that from passing for a change.
        let stamped: Vec<f64> = needs
            .iter()
            .enumerate()
            .map(|(k, need)| {
                let arrival = k as f64 / 60.0 + need;
                let frame = 1.0 / 59.7;
                (arrival / frame).ceil() * frame - k as f64 / 60.0
            })
            .collect();
        assert_eq!(firings(&stamped), (0, 0));
    }

    #[test]
    fn the_chance_of_drawing_marked_items_is_hypergeometric() {
        // 2 of 3 drawn from 5 with 2 marked: C(2,2) C(3,1) / C(5,3) = 3/10.
        assert!((at_least(5, 2, 3, 2) - 0.3).abs() < 1e-12);
        // At least one: 1 - C(3,3) / C(5,3) = 9/10.
        assert!((at_least(5, 2, 3, 1) - 0.9).abs() < 1e-12);
        assert_eq!(at_least(5, 2, 3, 0), 1.0);
        assert_eq!(at_least(5, 2, 3, 3), 0.0);
    }

    #[test]
    fn losses_that_start_or_stop_are_told() {
        // No loss run in 1968 gaps, then runs among the last 32: four are enough.
        assert!(!more_losses(2000, 3, 32, 3));
        assert!(more_losses(2000, 4, 32, 4));
        // Whatever the window's other runs, three in the last 32 never tell; four may.
        assert!(!may_be_more_losses(2000, 32, 3));
        assert!(may_be_more_losses(2000, 32, 4));
        assert!(!may_be_more_losses(2000, 32, 0));
        // At 5% before, a few more in the last 32 are chance; eleven are not.
        assert!(!more_losses(2000, 104, 32, 6));
        assert!(more_losses(2000, 111, 32, 11));
        // Too few gaps to tell.
        assert!(!more_losses(200, 10, 32, 10));
        // None in the last 512 of 2048 at 5% before; the last 128 cannot tell.
        assert!(fewer_losses(2047, 77, 511, 0));
        assert!(!fewer_losses(2047, 77, 127, 0));
        // As many as before: nothing.
        assert!(!fewer_losses(2047, 100, 511, 25));
        assert!(!fewer_losses(10, 20, 5, 0));
    }

    /// Runs of losses at random on a link that does not change: the chance of a run
    /// beginning after each snapshot received is fixed (independent losses, or the
    /// Gilbert-Elliott bursts of `wifi` and `mobile`).
    #[test]
    fn losses_at_an_unchanged_rate_raise_no_alarm() {
        for (rate, seed) in [(0.005, 1u64), (0.02, 2), (0.05, 3), (0.2, 4)] {
            let fate = uniform(60_000, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let runs: Vec<bool> = fate.iter().map(|f| *f < rate).collect();
            let (window, short, long) = (2047, 32, 511);
            let (mut more, mut fewer) = (0, 0);
            // Runs among the window's gaps, its last `long` and its last `short`, slid
            // along one gap at a time.
            let count = |from: usize, to: usize| runs[from..to].iter().filter(|r| **r).count();
            let (mut total, mut in_long, mut in_short) = (
                count(0, window),
                count(window - long, window),
                count(window - short, window),
            );
            for end in window..runs.len() {
                if end > window {
                    let add = usize::from(runs[end - 1]);
                    total = total + add - usize::from(runs[end - 1 - window]);
                    in_long = in_long + add - usize::from(runs[end - 1 - long]);
                    in_short = in_short + add - usize::from(runs[end - 1 - short]);
                }
                more += usize::from(more_losses(window, total, short, in_short));
                fewer += usize::from(fewer_losses(window, total, long, in_long));
            }
            assert_eq!((more, fewer), (0, 0), "rate {rate}");
        }
    }

    #[test]
    fn a_slower_link_shows_within_seven_arrivals() {
        let earlier = needs(480, 0.02, 0.01, 1);
        let slower = needs(32, 0.06, 0.066, 2);
        let mut recent = needs(26, 0.02, 0.01, 3);
        recent.extend_from_slice(&slower[..6]);
        assert_eq!(test(&earlier, &recent[recent.len() - 32..]), None);
        recent.push(slower[6]);
        // The change is placed at the first of the slower link's pairs that needed more
        // than the old one ever did: here the first.
        assert_eq!(
            test(&earlier, &recent[recent.len() - 32..]),
            Some(Shift::Worse { since: 7 })
        );
    }

    #[test]
    fn a_faster_link_shows_too() {
        let earlier = needs(480, 0.06, 0.066, 4);
        let recent = needs(32, 0.02, 0.01, 5);
        assert_eq!(test(&earlier, &recent), Some(Shift::Better { since: 32 }));
    }

    #[test]
    fn too_few_earlier_needs_tell_nothing() {
        let earlier = needs(200, 0.02, 0.01, 1);
        let recent = needs(32, 0.5, 0.1, 2);
        assert_eq!(test(&earlier, &recent), None);
        assert_eq!(test(&[], &[]), None);
    }

    #[test]
    fn recent_needs_equal_to_earlier_ones_are_told_apart() {
        // Every need the same: nothing lies beyond anything.
        let earlier = vec![0.05; 480];
        let recent = vec![0.05; 32];
        assert_eq!(test(&earlier, &recent), None);
    }
}
