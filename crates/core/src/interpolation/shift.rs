//! Telling a link that changed from one that merely varies.
//!
//! The adaptive delay comes from a window of arrivals (512 by default), so after the link
//! changes it describes a mix of the old link and the new one until the window has turned
//! over: 8.5 s at 60 snapshots/s, but 51 s at 10. Meanwhile a slower link underruns and a
//! faster one pays delay it no longer needs.
//!
//! So the buffer also asks, at every arrival, whether the last few pairs' needs (32 by
//! default, [`InterpolationConfig::shift_window`](super::InterpolationConfig::shift_window))
//! sit apart from the window's earlier needs more often than chance allows ([`worse`]).
//! On a link that has not changed each recent need lands beyond the earlier ones' 1% tail
//! with a chance of about 1%, so 6 of 32 doing so happens less than once in a million
//! tests; after a change to a link 30 ms slower nearly every new pair does, and six or
//! seven arrivals tell. The test looks at needs (arrival time minus the previous
//! snapshot's server time) rather than arrival offsets, so more losses show too, as
//! longer spans. The other way round ([`better`]), it asks whether all recent
//! arrivals came faster than most earlier ones.
//!
//! What the buffer does with the answer is in
//! [`InterpolationConfig::shift_window`](super::InterpolationConfig::shift_window).

/// Which way the link moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shift {
    /// Recent pairs need more lag than the window's earlier ones.
    Worse,
    /// Recent pairs need less lag than the window's earlier ones.
    Better,
}

/// The share of earlier needs at each end that counts as their tail.
const TAIL: f64 = 0.01;

/// The chance, on a link that has not changed, that one test reports a shift: at 60
/// arrivals a second, about once in five hours per buffer.
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

/// True when more of the needs in `recent` (the last of the window, in any order;
/// sorted here) than chance allows lie beyond the window's earlier needs' 1% tail, by the
/// margin: six of 32 on a link that has not changed happen less than once in a million
/// tests. `all` is every need in the window, sorted, `recent` included. False too when
/// there are too few earlier needs to tell.
pub(crate) fn worse(all: &[f64], recent: &mut [f64]) -> bool {
    let Some((earlier, k)) = sizes(all, recent) else {
        return false;
    };
    let Some(enough) = significant_count(recent.len(), k as f64 / (earlier + 1) as f64) else {
        return false;
    };
    // Most arrivals settle it without sorting: the k-th largest earlier need is at
    // least the value k + n from the top of the whole window, and the margin at least
    // its least.
    let at_least = all[all.len() - k - recent.len()] + MIN_MARGIN;
    if recent.iter().filter(|x| **x > at_least).count() < enough {
        return false;
    }
    recent.sort_by(f64::total_cmp);
    let (Some(low), Some(high)) = (
        kth_earlier(all.iter(), recent.iter(), k),
        kth_earlier(all.iter().rev(), recent.iter().rev(), k),
    ) else {
        return false;
    };
    let above = high + margin(low, high);
    recent.iter().filter(|x| **x > above).count() >= enough
}

/// True when every arrival offset in `recent` (as in [`worse`]) lies below the window's
/// earlier offsets' median, by the margin: on a link that has not changed, 32 in a row
/// below the median happen once in four billion tests (and fewer than 20 recent ones
/// are never enough).
///
/// Offsets rather than needs: a need spans a send interval or more, and at 10 snapshots
/// a second that span (and a lost snapshot's, twice as long) swamps the delay. What sets
/// the delay is the upper tail, and a few recent arrivals cannot show where a rarer
/// event's tail now lies; but a bulk of arrivals that moved down by a good part of the
/// spread is a link that changed, not a quiet spell. Every one of them, not nearly
/// every one: the window is about to be cut down to them, and one straggler from the
/// old link (a snapshot held up behind a slow one) would be a need as long as the old
/// link's, left alone in a short window. A link that only loses less is not told: its
/// delay comes down as the window turns over.
pub(crate) fn better(all: &[f64], recent: &mut [f64]) -> bool {
    let Some((earlier, k)) = sizes(all, recent) else {
        return false;
    };
    if !i32::try_from(recent.len()).is_ok_and(|n| 0.5f64.powi(n) < SIGNIFICANCE) {
        return false;
    }
    // Most arrivals settle it without sorting: the earlier median is at most the value
    // n past the whole window's middle.
    let middle = earlier.div_ceil(2);
    let at_most = all[middle - 1 + recent.len()];
    if recent.iter().any(|x| *x >= at_most) {
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

/// The smallest count `c` such that `n` independent trials, each a success with chance
/// `p`, reach `c` successes with chance below [`SIGNIFICANCE`]; `None` when even `n`
/// successes are not that rare.
fn significant_count(n: usize, p: f64) -> Option<usize> {
    if !(p > 0.0 && p < 1.0) {
        return None;
    }
    // The binomial probabilities, each from the last, summed until what is left is rare.
    let mut pmf = (1.0 - p).powi(i32::try_from(n).ok()?);
    let mut cdf = 0.0;
    for j in 0..n {
        cdf += pmf;
        if 1.0 - cdf < SIGNIFICANCE {
            return Some(j + 1);
        }
        pmf *= (n - j) as f64 / (j + 1) as f64 * p / (1.0 - p);
    }
    // Only all `n` is left: its chance is `p^n`.
    (p.powi(i32::try_from(n).ok()?) < SIGNIFICANCE).then_some(n)
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
        if worse(&all, &mut recent.to_vec()) {
            Some(Shift::Worse)
        } else if better(&all, &mut recent.to_vec()) {
            Some(Shift::Better)
        } else {
            None
        }
    }

    #[test]
    fn six_of_thirty_two_beyond_the_one_percent_tail_is_rare_enough() {
        assert_eq!(significant_count(32, 0.01), Some(6));
        // A coarser tail needs more of them.
        assert!(significant_count(32, 0.05).unwrap() > 6);
        // Four recent needs can never be rare enough at a 5% chance each.
        assert_eq!(significant_count(4, 0.05), None);
        assert_eq!(significant_count(4, 0.01), Some(4));
        assert_eq!(significant_count(10, 0.0), None);
    }

    #[test]
    fn an_unchanged_link_shows_no_shift() {
        let all = needs(512, 0.05, 0.066, 7);
        for end in (288..=512).step_by(8) {
            let (earlier, recent) = all[..end].split_at(end - 32);
            assert_eq!(test(earlier, recent), None, "at {end}");
        }
    }

    #[test]
    fn a_slower_link_shows_within_six_arrivals() {
        let earlier = needs(480, 0.02, 0.01, 1);
        let slower = needs(32, 0.06, 0.066, 2);
        let mut recent = needs(26, 0.02, 0.01, 3);
        recent.extend_from_slice(&slower[..5]);
        recent.insert(0, earlier[0]);
        assert_eq!(test(&earlier, &recent[recent.len() - 32..]), None);
        recent.push(slower[5]);
        assert_eq!(
            test(&earlier, &recent[recent.len() - 32..]),
            Some(Shift::Worse)
        );
    }

    #[test]
    fn a_faster_link_shows_too() {
        let earlier = needs(480, 0.06, 0.066, 4);
        let recent = needs(32, 0.02, 0.01, 5);
        assert_eq!(test(&earlier, &recent), Some(Shift::Better));
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
