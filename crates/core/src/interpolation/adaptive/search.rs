//! Searching for the smallest lag that is enough.

/// The smallest lag in `[lo, hi]` that is `enough`, to a hundredth of a millisecond, for
/// an `enough` that holds at `hi` and, once it holds, holds for every longer lag.
pub(super) fn smallest_lag(lo: f64, hi: f64, enough: impl Fn(f64) -> bool) -> f64 {
    smallest_lag_near(lo, hi, None, enough)
}

/// First step of the search outward from a hint, seconds.
const GALLOP_STEP: f64 = 2e-4;

/// [`smallest_lag`], searching outward from `hint` first (in steps that double) when it
/// lies in `(lo, hi)`: the answer moves little from one arrival to the next, so a few
/// evaluations near the last one bracket it far tighter than the whole range.
pub(super) fn smallest_lag_near(
    mut lo: f64,
    mut hi: f64,
    hint: Option<f64>,
    enough: impl Fn(f64) -> bool,
) -> f64 {
    if let Some(hint) = hint.filter(|h| *h > lo && *h < hi) {
        let below = enough(hint);
        if below {
            hi = hint;
        } else {
            lo = hint;
        }
        let mut step = GALLOP_STEP;
        loop {
            let x = if below { hint - step } else { hint + step };
            if x <= lo || x >= hi {
                break;
            }
            match (enough(x), below) {
                (true, true) => hi = x,
                (false, false) => lo = x,
                (true, false) => {
                    hi = x;
                    break;
                }
                (false, true) => {
                    lo = x;
                    break;
                }
            }
            step *= 2.0;
        }
    }
    for _ in 0..40 {
        if hi - lo < 1e-5 {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if enough(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_finds_the_same_lag_sooner() {
        for answer in [0.0123, 0.05, 0.0999] {
            let calls = std::cell::Cell::new(0);
            let enough = |lag: f64| {
                calls.set(calls.get() + 1);
                lag >= answer
            };
            let cold = smallest_lag(0.0, 0.1, enough);
            let cold_calls = calls.replace(0);
            assert!((cold - answer).abs() < 1e-5, "{cold}");
            for hint in [answer - 3e-4, answer, answer + 1e-4, -1.0, 0.3] {
                let warm = smallest_lag_near(0.0, 0.1, Some(hint), enough);
                assert!((warm - answer).abs() < 1e-5, "{answer} from {hint}: {warm}");
                assert!(warm >= answer, "{warm}");
            }
            // Near the answer, a handful of evaluations instead of a bisection of the range.
            calls.set(0);
            smallest_lag_near(0.0, 0.1, Some(answer - 5e-5), enough);
            assert!(
                calls.get() <= cold_calls / 2,
                "{} vs {cold_calls}",
                calls.get()
            );
        }
    }
}
