//! `link.*` and the way back from each interruption: `render.error_cm_p99_live`,
//! `interpolation.recover_ms_max`, `budget.recover_ms_max` (`docs/metrics.md`).
//!
//! Every figure is read from what the public `Client` reported (its link events) and what
//! the game got (frames, the interpolation delay, the server's budget for the client), so
//! it is what a game sees.

use super::Sim;
use super::client::ClientSim;
use crate::metrics::{Metric, Report, mean, percentile};
use crate::scene::LabScene;
use lagless_replication::LinkState;

/// The level before an interruption is the mean over this long before its silence began.
const BEFORE: f64 = 5.0;

/// A level must hold this long to count as back.
const HOLD: f64 = 0.5;

/// Within this share of the level before (and at least [`SLACK_MS`] ms) counts as back
/// for the interpolation delay.
const WITHIN: f64 = 0.2;
const SLACK_MS: f64 = 5.0;

/// The budget is back at this share of its level before.
const BUDGET_BACK: f64 = 0.8;

/// One interruption of a client's link: when the silence began and when the link was
/// heard again (seconds of the lab's clock).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Interruption {
    pub(crate) silent_since: f64,
    pub(crate) back: f64,
}

/// The interruptions a client's events show (those that ended).
pub(crate) fn interruptions<S: LabScene>(c: &ClientSim<S>) -> Vec<Interruption> {
    c.link_events
        .iter()
        .filter(|(_, s, _)| *s == LinkState::Recovering)
        .filter_map(|(at, _, since)| {
            Some(Interruption {
                silent_since: (*since)?.as_secs_f64(),
                back: at.as_secs_f64(),
            })
        })
        .collect()
}

/// Milliseconds from `i.back` until `series` (time, value) is back, as `back(before, v)`
/// says, for [`HOLD`] seconds in a row, where `before` is the series' mean over the
/// [`BEFORE`] seconds before the silence. `None` when there is no level before (the run
/// began with it); the run's end when it never comes back.
pub(crate) fn recover_ms(
    series: &[(f64, f64)],
    i: Interruption,
    back: impl Fn(f64, f64) -> bool,
) -> Option<f64> {
    let before: Vec<f64> = series
        .iter()
        .filter(|(t, _)| *t >= i.silent_since - BEFORE && *t < i.silent_since)
        .map(|(_, v)| *v)
        .collect();
    let level = mean(&before)?;
    let mut since: Option<f64> = None;
    let mut last = i.back;
    for &(t, v) in series.iter().filter(|(t, _)| *t >= i.back) {
        last = t;
        if back(level, v) {
            let s = *since.get_or_insert(t);
            if t - s >= HOLD {
                return Some((s - i.back).max(0.0) * 1000.0);
            }
        } else {
            since = None;
        }
    }
    // Still back at the run's end counts from when it came back; never: the whole rest.
    Some((since.unwrap_or(last) - i.back).max(0.0) * 1000.0)
}

/// Play resumes only once the own player is back under its live p99 too: folds
/// `render.recover_ms_max` into `sync.resume_ms_max` (after the probe filled it).
pub(crate) fn fold_resume(r: &mut Report) {
    if let (Some(w), Some(resume)) = (
        r.get_f64("render.recover_ms_max"),
        r.get_f64("sync.resume_ms_max"),
    ) {
        r.number("sync.resume_ms_max", Some(resume.max(w)));
    }
}

/// Adds the link figures of `sim` to `r`.
pub(crate) fn link<S: LabScene>(r: &mut Report, sim: &Sim<S>) {
    if sim.clients.is_empty() {
        return;
    }
    let per_client: Vec<_> = sim
        .clients
        .iter()
        .map(|c| c.game.client.stats().link)
        .collect();
    let n = per_client.len().max(1) as f64;
    let total: u64 = per_client.iter().map(|s| s.interruptions).sum();
    r.number("link.interruptions", Some(total as f64 / n));
    let ms: Vec<f64> = per_client
        .iter()
        .map(|s| s.interrupted.as_secs_f64() * 1000.0)
        .collect();
    r.number("link.interrupted_ms", mean(&ms));
    let withheld: u64 = per_client.iter().map(|s| s.inputs_withheld).sum();
    r.set("link.inputs_withheld", Metric::Count(withheld));

    // Each client's own-player errors per frame, read once: the live ones for the p99,
    // all of them for the way back under it.
    let errors: Vec<Vec<(u32, f64)>> = sim
        .clients
        .iter()
        .zip(&sim.auth.players)
        .map(|(c, a)| c.render_error_series(a))
        .collect();
    let live: Vec<f64> = sim
        .clients
        .iter()
        .zip(&errors)
        .flat_map(|(c, series)| {
            series
                .iter()
                .filter(|(t, _)| !c.not_live.contains(t))
                .map(|(_, e)| *e)
        })
        .collect();
    let live_p99 = percentile(&live, 99.0);
    r.number("render.error_cm_p99_live", live_p99);

    // The own player back under the live p99, for HOLD seconds, after each return: the
    // last condition of play resuming (`sync.resume_ms_max`).
    if let Some(p99) = live_p99 {
        let hz = f64::from(sim.config.server.tick_hz);
        let mut each = Vec::new();
        for (c, series) in sim.clients.iter().zip(&errors) {
            let series: Vec<(f64, f64)> = series
                .iter()
                .map(|&(t, cm)| (f64::from(t) / hz, cm))
                .collect();
            for i in interruptions(c) {
                each.extend(recover_ms(&series, i, |_, v| v <= p99));
            }
        }
        r.number(
            "render.recover_ms_max",
            each.iter().copied().reduce(f64::max),
        );
    }

    let mut interp = Vec::new();
    for c in &sim.clients {
        for i in interruptions(c) {
            let within =
                |before: f64, v: f64| (v - before).abs() <= (before * WITHIN).max(SLACK_MS);
            interp.extend(recover_ms(&c.interpolation_delays, i, within));
        }
    }
    r.number(
        "interpolation.recover_ms_max",
        interp.iter().copied().reduce(f64::max),
    );
    let budget = &sim.sender.stats.budget_series;
    if let Some(first) = sim.clients.first().filter(|_| !budget.is_empty()) {
        let back = |before: f64, v: f64| v >= before * BUDGET_BACK;
        let each: Vec<f64> = interruptions(first)
            .into_iter()
            .filter_map(|i| recover_ms(budget, i, back))
            .collect();
        r.number(
            "budget.recover_ms_max",
            each.iter().copied().reduce(f64::max),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_counts_from_the_return_until_the_level_holds() {
        // 40 ms before a silence at 10 s; back at 11 s at 500 ms, down to 40 by 13 s.
        let mut series: Vec<(f64, f64)> = (0..1000).map(|k| (k as f64 * 0.01, 40.0)).collect();
        for k in 1100..1300 {
            series.push((k as f64 * 0.01, 500.0 - (k - 1100) as f64 * 2.3));
        }
        for k in 1300..2000 {
            series.push((k as f64 * 0.01, 40.0));
        }
        let i = Interruption {
            silent_since: 10.0,
            back: 11.0,
        };
        let within = |b: f64, v: f64| (v - b).abs() <= (b * WITHIN).max(SLACK_MS);
        let ms = recover_ms(&series, i, within).expect("a level before");
        // Within 20% of 40 (<= 48) from 500 - 2.3 k <= 48, k >= 196.5: 12.97 s.
        assert!((ms - 1970.0).abs() < 11.0, "{ms}");
        // Never back within the run (cut at 12.5 s, still at 157): the rest of the run.
        let never = recover_ms(&series[..1150], i, within).expect("a level before");
        assert!((never - 1490.0).abs() < 11.0, "{never}");
        // Nothing before: no figure.
        let late = Interruption {
            silent_since: 0.0,
            back: 1.0,
        };
        assert_eq!(recover_ms(&series, late, within), None);
    }
}
