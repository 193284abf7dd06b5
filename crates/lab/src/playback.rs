//! Comparing interpolation delay policies on the same arrivals.
//!
//! An [`InterpolationBuffer`]'s delay and underruns depend only on *when* snapshots of
//! which tick arrived and *when* frames were sampled, never on the samples' values. So
//! next to the buffer that feeds the renderer, a client can run value-less shadow buffers
//! ([`PolicyShadows`]), one per policy under comparison, fed the very same arrivals and
//! frames. That is the only fair comparison: two runs with different policies would also
//! differ in everything the policy does not touch. A shadow costs a few hundred bytes and
//! a few sorted-window updates per frame, and no log grows with the run's length.

use lagless_core::Tick;
use lagless_core::interpolation::{
    DelayPolicy, InterpolationBuffer, InterpolationConfig, InterpolationStats,
};
use std::time::Duration;

/// The interpolation buffer settings a lab run or replay chooses besides the delay
/// policy; everything else is the core's default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlaybackSettings {
    /// How much adaptive buffers slow playback down over an overdue snapshot
    /// ([`InterpolationConfig::max_stretch`]).
    pub max_stretch: f32,
    /// When a snapshot counts as overdue for them
    /// ([`InterpolationConfig::overdue_quantile`]).
    pub overdue_quantile: f32,
    /// Arrivals the buffers' statistics look back over ([`InterpolationConfig::history`]).
    pub history: usize,
    /// Recent arrivals adaptive buffers watch for a change of link
    /// ([`InterpolationConfig::shift_window`]).
    pub shift_window: usize,
    /// How far they may slow down to reach the delay a worse link needs
    /// ([`InterpolationConfig::shift_slowdown`]).
    pub shift_slowdown: f32,
}

impl Default for PlaybackSettings {
    /// The core's defaults.
    fn default() -> Self {
        let core = InterpolationConfig::default();
        Self {
            max_stretch: core.max_stretch,
            overdue_quantile: core.overdue_quantile,
            history: core.history,
            shift_window: core.shift_window,
            shift_slowdown: core.shift_slowdown,
        }
    }
}

impl PlaybackSettings {
    /// Buffer settings for a server running at `tick_hz`: these choices, the core's
    /// default policy (callers set theirs) and the core's defaults for the rest.
    pub fn buffer_config(&self, tick_hz: u32) -> InterpolationConfig {
        InterpolationConfig {
            tick_hz,
            max_stretch: self.max_stretch,
            overdue_quantile: self.overdue_quantile,
            history: self.history,
            shift_window: self.shift_window,
            shift_slowdown: self.shift_slowdown,
            ..InterpolationConfig::default()
        }
    }
}

/// Value-less interpolation buffers, one per policy, fed what the real buffer is fed.
#[derive(Debug, Clone)]
pub struct PolicyShadows {
    buffers: Vec<InterpolationBuffer<f32>>,
}

impl PolicyShadows {
    /// One shadow per policy; every other setting from `base`.
    pub fn new(base: InterpolationConfig, policies: &[DelayPolicy]) -> Self {
        Self {
            buffers: policies
                .iter()
                .map(|&policy| InterpolationBuffer::new(InterpolationConfig { policy, ..base }))
                .collect(),
        }
    }

    /// A snapshot of `tick` arrived at `at` (refusals are counted by each shadow, as by
    /// the real buffer).
    pub fn push(&mut self, tick: Tick, at: Duration) {
        for b in &mut self.buffers {
            // The value is irrelevant to timing; the tick keeps it meaningful in a debugger.
            let _ = b.push(tick, at, tick.0 as f32);
        }
    }

    /// A frame was sampled at `at`.
    pub fn sample(&mut self, at: Duration) {
        for b in &mut self.buffers {
            let _ = b.sample_at(at);
        }
    }

    /// Each shadow's policy and counters, in the order given to [`PolicyShadows::new`].
    pub fn stats(&self) -> impl Iterator<Item = (DelayPolicy, &InterpolationStats)> {
        self.buffers.iter().map(|b| (b.config().policy, b.stats()))
    }
    /// Each policy's figures averaged over `sets` of shadows built with the same policies
    /// (one set per client or per link), in the policies' order. A policy no set sampled a
    /// frame for is left out.
    pub fn mean_figures(sets: &[&PolicyShadows]) -> Vec<PolicyFigures> {
        let Some(first) = sets.first() else {
            return Vec::new();
        };
        first
            .stats()
            .enumerate()
            .filter_map(|(i, (policy, _))| {
                let stats = sets
                    .iter()
                    .filter_map(|s| s.buffers.get(i).map(|b| b.stats()));
                PolicyFigures::mean_over(policy, stats)
            })
            .collect()
    }
}

/// One policy's figures over a set of logs (one per client), averaged over clients as
/// the run's `interpolation.*` metrics are.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyFigures {
    /// The policy replayed.
    pub policy: DelayPolicy,
    /// Mean over clients of `interpolation.delay_ms_mean`.
    pub delay_ms_mean: f64,
    /// Mean over clients of `interpolation.underrun_pct`.
    pub underrun_pct: f64,
    /// Mean over clients of the percentage of frames extrapolated (a subset of underruns).
    pub extrapolated_pct: f64,
    /// Mean over clients of `interpolation.stretched_pct`: frames played in slow motion
    /// to stretch the buffer over an overdue snapshot.
    pub stretched_pct: f64,
    /// Mean over clients of `interpolation.speed_error_pct`: how far playback speed
    /// strayed from real time, averaged over the time played (slow motion, catching up,
    /// slewing and jumps alike; see [`InterpolationStats::speed_error`]).
    pub speed_error_pct: f64,
    /// Mean over clients of how many frames a stretch lasts (0 without stretches): with
    /// `stretched_pct`, whether slow motion comes as many short moments or a few long.
    pub frames_per_stretch: f64,
    /// Mean over clients of the changes of link the buffer saw (worse and better, see
    /// [`InterpolationConfig::shift_window`]) per hour played: on a link that does not
    /// change, how often it was fooled.
    pub shifts_per_hour: f64,
}

impl PolicyFigures {
    /// Averages one policy's counters over clients, as the run's `interpolation.*`
    /// metrics are; `None` when no client sampled a frame.
    pub fn mean_over<'a>(
        policy: DelayPolicy,
        stats: impl IntoIterator<Item = &'a InterpolationStats>,
    ) -> Option<Self> {
        let stats: Vec<&InterpolationStats> = stats.into_iter().filter(|s| s.frames > 0).collect();
        if stats.is_empty() {
            return None;
        }
        let n = stats.len() as f64;
        let mean =
            |f: &dyn Fn(&InterpolationStats) -> f64| stats.iter().map(|s| f(s)).sum::<f64>() / n;
        Some(Self {
            policy,
            delay_ms_mean: mean(&|s| s.mean_delay_secs().unwrap_or(0.0) * 1000.0),
            underrun_pct: mean(&|s| s.underrun_ratio() * 100.0),
            extrapolated_pct: mean(&|s| s.extrapolated as f64 * 100.0 / s.frames as f64),
            stretched_pct: mean(&|s| s.stretched_ratio() * 100.0),
            speed_error_pct: mean(&|s| s.speed_error() * 100.0),
            frames_per_stretch: mean(&|s| {
                if s.stretches == 0 {
                    0.0
                } else {
                    s.stretched as f64 / s.stretches as f64
                }
            }),
            shifts_per_hour: mean(&|s| {
                if s.played_secs > 0.0 {
                    s.link_shifts() as f64 * 3600.0 / s.played_secs
                } else {
                    0.0
                }
            }),
        })
    }
}

/// The policies `lagless run --interpolation-sweep` compares: fixed buffers around the
/// classic three intervals, and the adaptive policy at a range of underrun targets.
pub fn sweep_policies() -> Vec<DelayPolicy> {
    let fixed = [1.5f32, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0]
        .into_iter()
        .map(|intervals| DelayPolicy::Fixed { intervals });
    let adaptive = [0.0004f32, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05]
        .into_iter()
        .map(DelayPolicy::adaptive_with_target);
    fixed.chain(adaptive).collect()
}

/// A policy as the command line spells it (`fixed:3`, `adaptive:1%`).
pub fn policy_label(policy: &DelayPolicy) -> String {
    policy.to_string()
}

/// Parses `fixed:N` (N send intervals), `adaptive` or `adaptive:P` (the core's text form
/// of a delay policy).
pub fn parse_policy(text: &str) -> Result<DelayPolicy, String> {
    text.parse()
        .map_err(|e: lagless_core::PolicyParseError| e.to_string())
}

/// The sweep as a table, with each row's delay cut against the classic fixed buffer
/// (three intervals) on the same arrivals.
pub fn format_sweep(rows: &[PolicyFigures]) -> String {
    let classic = rows
        .iter()
        .find(|r| r.policy == DelayPolicy::CLASSIC)
        .map(|r| r.delay_ms_mean);
    let mut out = format!(
        "{:<18} {:>14} {:>13} {:>16} {:>14} {:>16} {:>18} {:>14} {:>15}\n",
        "policy",
        "delay_ms_mean",
        "underrun_pct",
        "extrapolated_pct",
        "stretched_pct",
        "speed_error_pct",
        "frames_per_stretch",
        "shifts_per_h",
        "cut vs fixed:3"
    );
    for r in rows {
        let cut = classic
            .filter(|c| *c > 0.0)
            .map(|c| format!("{:+.0}%", (1.0 - r.delay_ms_mean / c) * 100.0))
            .unwrap_or_else(|| "-".into());
        out += &format!(
            "{:<18} {:>14.1} {:>13.3} {:>16.3} {:>14.2} {:>16.2} {:>18.1} {:>14.1} {:>15}\n",
            policy_label(&r.policy),
            r.delay_ms_mean,
            r.underrun_pct,
            r.extrapolated_pct,
            r.stretched_pct,
            r.speed_error_pct,
            r.frames_per_stretch,
            r.shifts_per_hour,
            cut
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lagless_core::interpolation::Pose;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn base() -> InterpolationConfig {
        InterpolationConfig {
            tick_hz: 60,
            ..InterpolationConfig::default()
        }
    }

    /// Snapshots every 6 ticks at 60 Hz, 40 ms on the way, every 7th lost; frames at 60
    /// fps: a stream where the policy makes a visible difference. Arrivals first at ties.
    fn lossy_events() -> Vec<(Duration, Option<Tick>)> {
        let mut events = Vec::new();
        for k in (0..1200u32).step_by(6) {
            if (k / 6) % 7 != 3 {
                events.push((ms(40 + u64::from(k) * 1000 / 60), Some(Tick(k))));
            }
        }
        for f in 0..1200u64 {
            events.push((
                Duration::from_nanos(f * 1_000_000_000 / 60 + 1_000_000),
                None,
            ));
        }
        events.sort_by_key(|(at, tick)| (*at, tick.is_none()));
        events
    }

    fn feed(shadows: &mut PolicyShadows) {
        for (at, tick) in lossy_events() {
            match tick {
                Some(t) => shadows.push(t, at),
                None => shadows.sample(at),
            }
        }
    }

    #[test]
    fn a_shadow_counts_what_the_real_buffer_counts() {
        let policies = [DelayPolicy::adaptive(), DelayPolicy::CLASSIC];
        let mut shadows = PolicyShadows::new(base(), &policies);
        feed(&mut shadows);
        for (policy, stats) in shadows.stats() {
            // The real buffer holds other values; its timing must not care.
            let mut real =
                InterpolationBuffer::<Pose>::new(InterpolationConfig { policy, ..base() });
            for (at, tick) in lossy_events() {
                match tick {
                    Some(t) => {
                        let pose = Pose::new([1.0, -2.0, t.0 as f32 * 0.25], [0.0, 0.0, 0.0, 1.0]);
                        let _ = real.push(t, at, pose);
                    }
                    None => {
                        let _ = real.sample_at(at);
                    }
                }
            }
            assert_eq!(stats, real.stats(), "{policy:?}");
            assert!(stats.frames > 1000);
        }
    }

    #[test]
    fn more_buffering_means_more_delay_and_fewer_underruns() {
        let policies = [
            DelayPolicy::Fixed { intervals: 0.5 },
            DelayPolicy::Fixed { intervals: 3.0 },
        ];
        let mut shadows = PolicyShadows::new(base(), &policies);
        feed(&mut shadows);
        let figures: Vec<PolicyFigures> = PolicyShadows::mean_figures(&[&shadows]);
        let [short, long] = &figures[..] else {
            panic!("two policies, two rows: {figures:?}");
        };
        assert!(
            long.delay_ms_mean > short.delay_ms_mean + 50.0,
            "{short:?} {long:?}"
        );
        // Every 7th snapshot lost: half an interval cannot ride the gaps, three can (what
        // is left are the first frames, before playback has a pair).
        assert!(short.underrun_pct > 5.0, "{short:?}");
        assert!(
            long.underrun_pct < short.underrun_pct / 4.0,
            "{short:?} {long:?}"
        );
        assert_eq!(
            PolicyFigures::mean_over(DelayPolicy::CLASSIC, [&InterpolationStats::default()]),
            None
        );
    }

    #[test]
    fn policies_parse_and_print_back() {
        for text in ["fixed:3", "fixed:2.5", "adaptive:1%", "adaptive:0.05%"] {
            let policy = parse_policy(text).expect(text);
            assert_eq!(policy_label(&policy), text);
        }
        assert_eq!(parse_policy("adaptive"), Ok(DelayPolicy::adaptive()));
        assert_eq!(parse_policy(" fixed "), Ok(DelayPolicy::CLASSIC));
        assert_eq!(parse_policy("adaptive:0.5"), parse_policy("adaptive:0.5%"));
        for bad in [
            "",
            "fixed:-1",
            "fixed:x",
            "adaptive:101",
            "adaptive:nan",
            "slow:1",
            "fixed:1e9",
        ] {
            assert!(parse_policy(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_sweep_includes_the_classic_buffer_and_reports_cuts() {
        let policies = sweep_policies();
        assert!(policies.contains(&DelayPolicy::CLASSIC));
        assert!(policies.contains(&DelayPolicy::adaptive()));
        let mut shadows = PolicyShadows::new(base(), &policies);
        feed(&mut shadows);
        let rows: Vec<PolicyFigures> = PolicyShadows::mean_figures(&[&shadows]);
        assert_eq!(rows.len(), policies.len());
        let table = format_sweep(&rows);
        assert!(table.contains("fixed:3 "), "{table}");
        assert!(table.contains("+0%"), "{table}");
        assert_eq!(table.lines().count(), rows.len() + 1);
    }
}
