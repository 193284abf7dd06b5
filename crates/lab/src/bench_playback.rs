//! `lagless bench-playback`: what the interpolation buffer costs per snapshot arrival and
//! per rendered frame, for each delay policy, with the classic fixed buffer measured in
//! the same process as the baseline (timings on shared machines are noisy; ratios are
//! not).
//!
//! An adaptive buffer re-chooses its lag on every arrival: it replays its window of
//! snapshot pairs at candidate lags and evaluates its loss model (see
//! `ArrivalStats::lag_for_fraction`). A fixed buffer only records the arrival. This
//! measures the difference on a recorded link, after the windows have filled, one call
//! at a time, so the tail (the arrivals whose search took longest) shows as well as the
//! median.

use crate::bench::median;
use crate::cpu::CpuTimer;
use crate::link_replay::{LinkEvent, ReplayConfig, ReplayError, replay_link};
use crate::metrics::percentile;
use crate::playback::policy_label;
use lagless_core::interpolation::{DelayPolicy, InterpolationBuffer, InterpolationConfig};
use std::time::Duration;

/// Longest replay [`bench_playback`] accepts, warm-up included.
pub const MAX_SECONDS: f64 = 3600.0;

/// What to measure.
#[derive(Debug, Clone)]
pub struct PlaybackBenchConfig {
    /// The link and rates; its first link is recorded (`links` is ignored).
    pub replay: ReplayConfig,
    /// Seconds played before timing starts, so every policy's windows are full.
    pub warm_up_secs: f64,
    /// The policies to time; the first is the baseline of the ratios.
    pub policies: Vec<DelayPolicy>,
}

/// One policy's cost for one operation.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaybackBenchRow {
    /// The policy timed, or `None` for the timer's own cost (an empty measurement).
    pub policy: Option<DelayPolicy>,
    /// `push` (a snapshot arrived) or `sample` (a frame was rendered).
    pub operation: &'static str,
    /// Calls timed.
    pub calls: usize,
    /// Median µs per call (CPU time, timer included).
    pub median_us: f64,
    /// 99th percentile µs per call.
    pub p99_us: f64,
    /// Median over the baseline policy's median for the same operation.
    pub ratio: f64,
}

/// µs per call of each policy's `push` and `sample_at` over one recorded link, plus a row
/// for the timer alone (subtract it to compare cheap calls).
pub fn bench_playback(
    config: &PlaybackBenchConfig,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<PlaybackBenchRow>, ReplayError> {
    if config.policies.is_empty() {
        return Err(ReplayError::Invalid("at least one policy".into()));
    }
    if !(config.warm_up_secs.is_finite()
        && config.warm_up_secs >= 0.0
        && config.warm_up_secs < config.replay.seconds)
    {
        return Err(ReplayError::Invalid(
            "the warm-up must be shorter than the replay".into(),
        ));
    }
    // Every event is kept, so memory grows with the replay: an hour is 15 MB at 60 Hz.
    if config.replay.seconds > MAX_SECONDS {
        return Err(ReplayError::Invalid(format!(
            "replay at most {MAX_SECONDS} s: medians settle long before"
        )));
    }
    let mut events = Vec::new();
    replay_link(&config.replay, 0, &mut |e| events.push(e))?;
    let warm_up = Duration::from_secs_f64(config.warm_up_secs);
    let base = config.replay.buffer_config();
    let mut rows = Vec::new();
    for (k, &policy) in config.policies.iter().enumerate() {
        progress(k, config.policies.len());
        let (push, sample) = time_policy(InterpolationConfig { policy, ..base }, &events, warm_up);
        rows.push(row(Some(policy), "push", push));
        rows.push(row(Some(policy), "sample", sample));
    }
    progress(config.policies.len(), config.policies.len());
    let timer: Vec<f64> = (0..10_000)
        .map(|_| {
            let t = CpuTimer::start();
            t.ms() * 1e3
        })
        .collect();
    let mut timer = row(None, "timer", timer);
    timer.ratio = 1.0;
    // Each operation against the baseline policy's (the first two rows).
    let baseline: Vec<(&'static str, f64)> = rows
        .iter()
        .take(2)
        .map(|r| (r.operation, r.median_us))
        .collect();
    for r in &mut rows {
        if let Some((_, base)) = baseline.iter().find(|(op, _)| *op == r.operation) {
            r.ratio = r.median_us / base;
        }
    }
    rows.push(timer);
    Ok(rows)
}

/// µs of every `push` and every `sample_at` after `warm_up`, playing `events` through one
/// buffer.
fn time_policy(
    config: InterpolationConfig,
    events: &[LinkEvent],
    warm_up: Duration,
) -> (Vec<f64>, Vec<f64>) {
    let mut buffer = InterpolationBuffer::<f32>::new(config);
    let (mut push, mut sample) = (Vec::new(), Vec::new());
    for &event in events {
        match event {
            LinkEvent::Arrival { tick, at } => {
                let t = CpuTimer::start();
                // Refusals (duplicates, stale) cost time too, and a client pays it.
                let _ = std::hint::black_box(buffer.push(tick, at, tick.0 as f32));
                let us = t.ms() * 1e3;
                if at >= warm_up {
                    push.push(us);
                }
            }
            LinkEvent::Frame { at } => {
                let t = CpuTimer::start();
                std::hint::black_box(buffer.sample_at(at));
                let us = t.ms() * 1e3;
                if at >= warm_up {
                    sample.push(us);
                }
            }
            // The buffer only sees arrivals and frames.
            LinkEvent::LinkChanged { .. } => {}
        }
    }
    (push, sample)
}

/// A row of `us` per call, its ratio left for the caller.
fn row(policy: Option<DelayPolicy>, operation: &'static str, us: Vec<f64>) -> PlaybackBenchRow {
    PlaybackBenchRow {
        policy,
        operation,
        calls: us.len(),
        p99_us: percentile(&us, 99.0).unwrap_or(f64::NAN),
        median_us: median(us),
        ratio: f64::NAN,
    }
}

/// The rows as a table.
pub fn format_playback_rows(rows: &[PlaybackBenchRow]) -> String {
    let mut out = format!(
        "{:<18} {:<7} {:>8} {:>10} {:>10} {:>12}\n",
        "policy", "op", "calls", "median_us", "p99_us", "vs_baseline"
    );
    for r in rows {
        let policy = r
            .policy
            .map_or_else(|| "(timer alone)".to_string(), |p| policy_label(&p));
        out += &format!(
            "{:<18} {:<7} {:>8} {:>10.2} {:>10.2} {:>11.1}x\n",
            policy, r.operation, r.calls, r.median_us, r.p99_us, r.ratio
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lagless_netem::profile;

    fn config(seconds: f64, warm_up_secs: f64) -> PlaybackBenchConfig {
        PlaybackBenchConfig {
            replay: ReplayConfig {
                link: profile("snapshot-demo").unwrap(),
                seconds,
                ..ReplayConfig::default()
            },
            warm_up_secs,
            policies: vec![DelayPolicy::CLASSIC, DelayPolicy::adaptive()],
        }
    }

    #[test]
    fn times_every_call_after_the_warm_up_for_each_policy() {
        let rows = bench_playback(&config(20.0, 10.0), &mut |_, _| {}).unwrap();
        let ops: Vec<_> = rows.iter().map(|r| (r.policy, r.operation)).collect();
        assert_eq!(
            ops,
            [
                (Some(DelayPolicy::CLASSIC), "push"),
                (Some(DelayPolicy::CLASSIC), "sample"),
                (Some(DelayPolicy::adaptive()), "push"),
                (Some(DelayPolicy::adaptive()), "sample"),
                (None, "timer"),
            ]
        );
        // 10 timed seconds at 60 frames/s; ~5% of 600 snapshots lost on the way.
        for r in &rows[..4] {
            let expected = if r.operation == "sample" {
                600.0
            } else {
                570.0
            };
            assert!(
                (r.calls as f64 - expected).abs() < 40.0,
                "{r:?} expected about {expected} calls"
            );
            assert!(r.median_us.is_finite() && r.p99_us >= r.median_us, "{r:?}");
        }
        assert_eq!(rows[0].ratio, 1.0);
        assert_eq!(rows[1].ratio, 1.0);
    }

    #[test]
    fn bad_settings_are_errors() {
        let mut c = config(10.0, 10.0);
        assert!(bench_playback(&c, &mut |_, _| {}).is_err());
        c.warm_up_secs = 1.0;
        c.replay.seconds = MAX_SECONDS + 1.0;
        assert!(bench_playback(&c, &mut |_, _| {}).is_err());
        c.replay.seconds = 10.0;
        c.policies.clear();
        assert!(bench_playback(&c, &mut |_, _| {}).is_err());
    }
}
