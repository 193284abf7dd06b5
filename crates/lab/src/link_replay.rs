//! Interpolation policies over hours of one emulated link, without the game.
//!
//! A strict underrun target is a statement about rare events: at 5% loss and 10
//! snapshots/s, the classic three-interval buffer misses about one frame in 2000, a few
//! frames a minute, almost all of them from two snapshots lost in a row. A two-minute lab
//! run holds a handful of such events, too few to tell two policies apart. A buffer's
//! timing depends only on which tick arrived when and when frames were sampled (see
//! [`crate::playback`]), so this replay sends tick-stamped packets of a given size through
//! the profile's downlink and feeds the arrivals to one value-less buffer per policy: no
//! physics, no codec, and an hour of link in seconds.

use crate::config::{LinkChange, check_link_changes};
use crate::playback::{PlaybackSettings, PolicyFigures, PolicyShadows};
use lagless_core::Tick;
use lagless_core::interpolation::{DelayPolicy, InterpolationConfig, InterpolationStats};
use lagless_netem::{ConfigError, Link, LinkConfig, derive_seed};
use std::time::Duration;

/// What to replay.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// The link snapshots travel over (a profile's downlink).
    pub link: LinkConfig,
    /// Changes of the link's conditions part-way through each link's replay, in time
    /// order; the figures are then also reported per phase.
    pub link_changes: Vec<LinkChange>,
    /// Server ticks per second.
    pub tick_hz: u32,
    /// Snapshots per second (the server sends every `round(tick_hz / snapshot_hz)` ticks,
    /// as in a lab run).
    pub snapshot_hz: u32,
    /// Rendered frames per second; frames are sampled at exact multiples of the frame
    /// period, as by a renderer locked to a steady clock.
    pub frame_hz: f64,
    /// Simulated seconds per link.
    pub seconds: f64,
    /// Independent links (each with its own seed), averaged like a run's clients.
    pub links: u32,
    /// Seed of the first link; the others derive from it.
    pub seed: u64,
    /// Bytes per snapshot packet (matters on links with a bandwidth cap or trace).
    pub packet_bytes: usize,
    /// Granularity at which packets are sent and collected, as in a lab run.
    pub clock_step: Duration,
    /// Settings of the buffers besides the policy (stretch, overdue moment, history).
    pub playback: PlaybackSettings,
}

impl Default for ReplayConfig {
    /// `snapshot-demo`-like defaults are left to the caller; this is a perfect link at
    /// 60 ticks, 60 snapshots and 60 frames per second for ten minutes.
    fn default() -> Self {
        Self {
            link: LinkConfig::default(),
            link_changes: Vec::new(),
            tick_hz: 60,
            snapshot_hz: 60,
            frame_hz: 60.0,
            seconds: 600.0,
            links: 1,
            seed: 1,
            packet_bytes: 200,
            clock_step: Duration::from_micros(500),
            playback: PlaybackSettings::default(),
        }
    }
}

impl ReplayConfig {
    /// The settings of the buffers a replay plays arrivals through, but for the policy.
    pub fn buffer_config(&self) -> InterpolationConfig {
        self.playback.buffer_config(self.tick_hz)
    }
}

/// Why a replay cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The link configuration is invalid.
    #[error(transparent)]
    Link(#[from] ConfigError),
    /// A rate, duration or size is out of range.
    #[error("{0}")]
    Invalid(String),
}

/// What a replayed link delivers, in time order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkEvent {
    /// The snapshot of `tick` arrived at `at`.
    Arrival {
        /// The snapshot's server tick.
        tick: Tick,
        /// When it came out of the link.
        at: Duration,
    },
    /// A frame is rendered at `at`.
    Frame {
        /// When.
        at: Duration,
    },
    /// From `at` on, the link runs with the `index`-th of
    /// [`ReplayConfig::link_changes`].
    LinkChanged {
        /// Which change.
        index: usize,
        /// When it took effect.
        at: Duration,
    },
}

/// What a replay measured.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayFigures {
    /// Each policy's figures over the whole replay, averaged over links, in the order the
    /// policies were given.
    pub overall: Vec<PolicyFigures>,
    /// With [link changes](ReplayConfig::link_changes), the same per phase, in time order
    /// (the first on the starting link); empty without.
    pub phases: Vec<PhaseFigures>,
}

/// Each policy's figures over one phase of a replay whose link changes.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseFigures {
    /// When the phase begins.
    pub from: Duration,
    /// When it ends (the next change, or the end of the replay).
    pub to: Duration,
    /// The change that began it; `None` for the starting link.
    pub change: Option<LinkChange>,
    /// Each policy's figures over the phase, averaged over links.
    pub figures: Vec<PolicyFigures>,
}

/// Replays `policies` over `config.links` links of `config.seconds` each and returns each
/// policy's figures averaged over links, overall and per phase of a changing link.
/// `progress` receives the simulated seconds done so far, over all links.
pub fn replay(
    config: &ReplayConfig,
    policies: &[DelayPolicy],
    progress: &mut dyn FnMut(f64),
) -> Result<ReplayFigures, ReplayError> {
    check(config)?;
    let base = config.buffer_config();
    let counters = |s: &PolicyShadows| -> Vec<InterpolationStats> {
        s.stats().map(|(_, s)| s.clone()).collect()
    };
    let mut per_link = Vec::new();
    // Per link, each shadow's counters at the start, at each link change and at the end.
    let mut boundaries: Vec<Vec<Vec<InterpolationStats>>> = Vec::new();
    for k in 0..config.links {
        let mut shadows = PolicyShadows::new(base, policies);
        let mut marks = vec![counters(&shadows)];
        let done = f64::from(k) * config.seconds;
        let mut next_progress = Duration::ZERO;
        drive(config, k, &mut |event| match event {
            LinkEvent::Arrival { tick, at } => shadows.push(tick, at),
            LinkEvent::Frame { at } => {
                shadows.sample(at);
                if at >= next_progress {
                    progress(done + at.as_secs_f64());
                    next_progress += Duration::from_secs(1);
                }
            }
            LinkEvent::LinkChanged { .. } => marks.push(counters(&shadows)),
        })?;
        marks.push(counters(&shadows));
        per_link.push(shadows);
        boundaries.push(marks);
    }
    progress(f64::from(config.links) * config.seconds);
    let sets: Vec<&PolicyShadows> = per_link.iter().collect();
    let overall = PolicyShadows::mean_figures(&sets);
    let phases = if config.link_changes.is_empty() {
        Vec::new()
    } else {
        phase_figures(config, policies, &boundaries)
    };
    Ok(ReplayFigures { overall, phases })
}

/// Each phase's counts (the counters at its end since those at its start) averaged over
/// links; `boundaries` holds, per link, every shadow's counters at the start, at each
/// change and at the end.
fn phase_figures(
    config: &ReplayConfig,
    policies: &[DelayPolicy],
    boundaries: &[Vec<Vec<InterpolationStats>>],
) -> Vec<PhaseFigures> {
    let end = Duration::from_secs_f64(config.seconds);
    let starts = std::iter::once(Duration::ZERO).chain(config.link_changes.iter().map(|c| c.at));
    let ends = config.link_changes.iter().map(|c| c.at).chain([end]);
    starts
        .zip(ends)
        .enumerate()
        .map(|(phase, (from, to))| {
            // Per link, each policy's counts over this phase.
            let counts: Vec<Vec<InterpolationStats>> = boundaries
                .iter()
                .map(|marks| {
                    let (start, end) = (&marks[phase], &marks[phase + 1]);
                    end.iter().zip(start).map(|(a, b)| a.since(b)).collect()
                })
                .collect();
            let figures = policies
                .iter()
                .enumerate()
                .filter_map(|(i, &policy)| {
                    PolicyFigures::mean_over(policy, counts.iter().filter_map(|c| c.get(i)))
                })
                .collect();
            PhaseFigures {
                from,
                to,
                change: phase.checked_sub(1).map(|i| config.link_changes[i].clone()),
                figures,
            }
        })
        .collect()
}

/// Sends `config.seconds` of tick-stamped snapshots through link number `index` (seeded
/// as [`replay`] seeds it) and hands `on_event` each arrival and each frame, in time
/// order: the raw material of a replay, for studies that play it back their own way.
pub fn replay_link(
    config: &ReplayConfig,
    index: u32,
    on_event: &mut dyn FnMut(LinkEvent),
) -> Result<(), ReplayError> {
    check(config)?;
    drive(config, index, on_event)
}

/// Every check a replay needs before it starts.
fn check(config: &ReplayConfig) -> Result<(), ReplayError> {
    validate(config)?;
    config.link.validate()?;
    check_link_changes(&config.link_changes, config.seconds).map_err(ReplayError::Invalid)
}

/// [`replay_link`] on a validated configuration.
fn drive(
    config: &ReplayConfig,
    index: u32,
    on_event: &mut dyn FnMut(LinkEvent),
) -> Result<(), ReplayError> {
    let interval = (f64::from(config.tick_hz) / f64::from(config.snapshot_hz))
        .round()
        .max(1.0) as u64;
    let tick_nanos = 1e9 / f64::from(config.tick_hz);
    let frame_nanos = 1e9 / config.frame_hz;
    let end = Duration::from_secs_f64(config.seconds);
    let seed = derive_seed(config.seed, u64::from(index));
    let mut link = Link::new(config.link.clone(), seed)?;
    let mut changes = config.link_changes.iter().enumerate().peekable();
    let mut tick: u64 = 0;
    let mut frame: u64 = 0;
    let mut now = Duration::ZERO;
    while now <= end {
        while let Some((index, change)) = changes.next_if(|(_, c)| c.at <= now) {
            // The replay is the downlink: a change of the uplink alone leaves it be.
            if change.direction.down() {
                link.reconfigure(change.link.clone())?;
            }
            on_event(LinkEvent::LinkChanged { index, at: now });
        }
        // Every server tick due by now; a snapshot on each `interval`-th.
        while Duration::from_nanos((tick as f64 * tick_nanos) as u64) <= now {
            if tick % interval == 0 {
                link.send(now, packet(tick as u32, config.packet_bytes));
            }
            tick += 1;
        }
        while let Some(p) = link.poll(now) {
            if let Some(t) = p.first_chunk::<4>() {
                let tick = Tick(u32::from_le_bytes(*t));
                on_event(LinkEvent::Arrival { tick, at: now });
            }
        }
        while Duration::from_nanos((frame as f64 * frame_nanos) as u64) <= now {
            on_event(LinkEvent::Frame { at: now });
            frame += 1;
        }
        now += config.clock_step;
    }
    Ok(())
}

fn validate(c: &ReplayConfig) -> Result<(), ReplayError> {
    let bad = |what: &str| Err(ReplayError::Invalid(what.to_string()));
    if !(1..=1000).contains(&c.tick_hz) {
        return bad("tick rate must be 1..=1000 Hz");
    }
    if c.snapshot_hz == 0 || c.snapshot_hz > c.tick_hz {
        return bad("snapshot rate must be 1..=tick rate");
    }
    if !(c.frame_hz.is_finite() && (1.0..=1000.0).contains(&c.frame_hz)) {
        return bad("frame rate must be 1..=1000 Hz");
    }
    if !(c.seconds.is_finite() && c.seconds > 0.0 && c.seconds <= 1e6) {
        return bad("seconds must be positive and at most 1e6");
    }
    if c.links == 0 {
        return bad("at least one link");
    }
    if !(4..=65_536).contains(&c.packet_bytes) {
        return bad("packet size must be 4..=65536 bytes");
    }
    if c.clock_step.is_zero() || c.clock_step > Duration::from_millis(100) {
        return bad("clock step must be positive and at most 100 ms");
    }
    Ok(())
}

/// A packet of `bytes` bytes carrying `tick` in its first four.
fn packet(tick: u32, bytes: usize) -> Vec<u8> {
    let mut p = vec![0; bytes];
    p[..4].copy_from_slice(&tick.to_le_bytes());
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use lagless_netem::{Loss, profile};

    /// `snapshot-demo` (50 ms, ±33 ms uniform jitter) with the given loss, at 10/s.
    fn lossy(loss: f64) -> ReplayConfig {
        ReplayConfig {
            link: LinkConfig {
                loss: Loss::Uniform { rate: loss },
                ..profile("snapshot-demo").unwrap()
            },
            snapshot_hz: 10,
            seconds: 120.0,
            ..ReplayConfig::default()
        }
    }

    #[test]
    fn a_perfect_link_never_underruns_and_trails_by_the_policy() {
        let c = ReplayConfig {
            seconds: 30.0,
            ..ReplayConfig::default()
        };
        let rows = replay(&c, &[DelayPolicy::CLASSIC], &mut |_| {})
            .unwrap()
            .overall;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].underrun_pct, 0.0);
        // Three 1/60 s intervals behind the newest snapshot, give or take a clock step.
        assert!(
            (rows[0].delay_ms_mean - 50.0).abs() < 2.0,
            "{}",
            rows[0].delay_ms_mean
        );
    }

    #[test]
    fn loss_costs_underruns_that_a_longer_buffer_rides_out() {
        let policies = [
            DelayPolicy::Fixed { intervals: 1.5 },
            DelayPolicy::Fixed { intervals: 4.0 },
        ];
        let rows = replay(&lossy(0.05), &policies, &mut |_| {})
            .unwrap()
            .overall;
        assert!(rows[0].underrun_pct > 1.0, "{:?}", rows[0]);
        assert!(rows[1].underrun_pct < 0.2, "{:?}", rows[1]);
        assert!(rows[1].delay_ms_mean > rows[0].delay_ms_mean + 200.0);
    }

    #[test]
    fn the_same_seed_replays_the_same_figures_and_links_differ() {
        let c = ReplayConfig {
            seconds: 20.0,
            ..lossy(0.1)
        };
        let p = [DelayPolicy::adaptive()];
        let a = replay(&c, &p, &mut |_| {}).unwrap();
        assert_eq!(a, replay(&c, &p, &mut |_| {}).unwrap());
        let other = ReplayConfig { seed: 2, ..c };
        assert_ne!(a, replay(&other, &p, &mut |_| {}).unwrap());
    }

    /// `broadband`, switched to `snapshot-demo` at `worse` and back at `better` seconds.
    fn changing(worse: u64, better: u64, seconds: f64) -> ReplayConfig {
        let change = |at: u64, name: &str| LinkChange::new(Duration::from_secs(at), name);
        ReplayConfig {
            link: profile("broadband").unwrap(),
            link_changes: vec![
                change(worse, "snapshot-demo").unwrap(),
                change(better, "broadband").unwrap(),
            ],
            seconds,
            ..ReplayConfig::default()
        }
    }

    #[test]
    fn phases_split_the_replay_at_its_link_changes() {
        let policies = [DelayPolicy::CLASSIC, DelayPolicy::adaptive()];
        let c = changing(20, 40, 60.0);
        let figures = replay(&c, &policies, &mut |_| {}).unwrap();
        let spans: Vec<(u64, u64, Option<&str>)> = figures
            .phases
            .iter()
            .map(|p| {
                let name = p.change.as_ref().map(|c| c.profile.as_str());
                (p.from.as_secs(), p.to.as_secs(), name)
            })
            .collect();
        assert_eq!(
            spans,
            [
                (0, 20, None),
                (20, 40, Some("snapshot-demo")),
                (40, 60, Some("broadband"))
            ]
        );
        // Frames are spread evenly, so the phases' delays, weighted by length, make up
        // the whole replay's.
        for (i, whole) in figures.overall.iter().enumerate() {
            let weighted: f64 = figures
                .phases
                .iter()
                .map(|p| p.figures[i].delay_ms_mean * (p.to - p.from).as_secs_f64() / 60.0)
                .sum();
            assert!(
                (weighted - whole.delay_ms_mean).abs() < 0.01 * whole.delay_ms_mean,
                "{weighted} vs {whole:?}"
            );
        }
        // The worse link shows in its phase only.
        let underruns = |p: usize| figures.phases[p].figures[0].underrun_pct;
        assert!(underruns(1) > underruns(0) && underruns(1) > underruns(2));
        // A change to the link already in use changes nothing, and without changes
        // there are no phases.
        let same = ReplayConfig {
            link_changes: vec![LinkChange::new(Duration::from_secs(30), "broadband").unwrap()],
            ..changing(20, 40, 60.0)
        };
        let plain = ReplayConfig {
            link_changes: Vec::new(),
            ..same.clone()
        };
        let a = replay(&same, &policies, &mut |_| {}).unwrap();
        let b = replay(&plain, &policies, &mut |_| {}).unwrap();
        assert_eq!(a.overall, b.overall);
        assert!(b.phases.is_empty());
    }

    /// The point of an adaptive delay: a calm link needs little of it, a worse one more,
    /// and the buffer finds out by itself, both ways, while the classic buffer keeps its
    /// three intervals whatever the link.
    #[test]
    fn adaptive_follows_a_link_that_worsens_and_recovers() {
        let policies = [DelayPolicy::CLASSIC, DelayPolicy::adaptive()];
        let c = ReplayConfig {
            links: 2,
            ..changing(60, 180, 300.0)
        };
        let figures = replay(&c, &policies, &mut |_| {}).unwrap();
        let phase = |p: usize| {
            let f = &figures.phases[p].figures;
            (&f[0], &f[1])
        };
        let (classic_calm, calm) = phase(0);
        let (_, rough) = phase(1);
        let (_, calm_again) = phase(2);
        assert!(
            calm.delay_ms_mean < 0.5 * classic_calm.delay_ms_mean,
            "{figures:?}"
        );
        assert!(calm.underrun_pct < 1.0, "{figures:?}");
        assert!(
            rough.delay_ms_mean > 2.0 * calm.delay_ms_mean,
            "{figures:?}"
        );
        // Near the 1% target over the rough phase, the switch itself included.
        assert!(rough.underrun_pct < 2.0, "{figures:?}");
        assert!(
            calm_again.delay_ms_mean < 0.6 * rough.delay_ms_mean,
            "{figures:?}"
        );
    }

    #[test]
    fn bad_settings_are_errors() {
        for c in [
            ReplayConfig {
                snapshot_hz: 0,
                ..ReplayConfig::default()
            },
            ReplayConfig {
                seconds: f64::NAN,
                ..ReplayConfig::default()
            },
            ReplayConfig {
                packet_bytes: 2,
                ..ReplayConfig::default()
            },
            ReplayConfig {
                links: 0,
                ..ReplayConfig::default()
            },
            ReplayConfig {
                seconds: 30.0,
                ..changing(20, 40, 60.0)
            },
        ] {
            assert!(matches!(
                replay(&c, &[DelayPolicy::CLASSIC], &mut |_| {}),
                Err(ReplayError::Invalid(_))
            ));
        }
    }
}

#[cfg(test)]
mod target_tests {
    use super::*;
    use lagless_netem::profile;

    /// Fiedler's "Snapshot Interpolation" test link at 10 snapshots/s for an hour, and the
    /// adaptive buffer's target: at an underrun rate no worse than the classic
    /// three-interval buffer, a mean delay at least 30% lower. A strict target rests on two
    /// losses in a row (one pair in 400), which a short window may not hold and no constant
    /// delay 30% shorter rides out; stretching playback to half speed over each loss does
    /// (`max_stretch` 0.5, which the target needs and the default leaves off), and the
    /// policy counts on it. A looser target must still hold.
    ///
    /// The strict target is 0.04%: the policy keeps under its target with some room (at
    /// 0.05% it underruns 0.035% here, against the classic buffer's 0.032%), so the
    /// target that matches the classic buffer's rate sits a little above that rate.
    #[test]
    fn adaptive_meets_the_brief_on_the_source_link() {
        let c = ReplayConfig {
            link: profile("snapshot-demo").unwrap(),
            snapshot_hz: 10,
            seconds: 3600.0,
            playback: PlaybackSettings {
                max_stretch: 0.5,
                ..PlaybackSettings::default()
            },
            ..ReplayConfig::default()
        };
        let policies = [
            DelayPolicy::adaptive_with_target(0.0004),
            DelayPolicy::adaptive_with_target(0.001),
            DelayPolicy::CLASSIC,
        ];
        let rows = replay(&c, &policies, &mut |_| {}).unwrap().overall;
        let (strict, loose, classic) = (&rows[0], &rows[1], &rows[2]);
        assert!(strict.underrun_pct <= classic.underrun_pct, "{rows:?}");
        assert!(
            strict.delay_ms_mean <= 0.7 * classic.delay_ms_mean,
            "{rows:?}"
        );
        assert!(loose.underrun_pct <= 0.1, "{rows:?}");
        // Classic buffers never stretch; adaptive ones do after each loss (5%).
        assert_eq!(classic.stretched_pct, 0.0, "{rows:?}");
        assert!((1.0..10.0).contains(&strict.stretched_pct), "{rows:?}");
        // At half speed, each stretched frame loses half a frame and catching up repays
        // it: the speed error matches the stretched share. The classic buffer only slews.
        let repaid = strict.speed_error_pct / strict.stretched_pct;
        assert!((0.8..1.3).contains(&repaid), "{rows:?}");
        assert!(classic.speed_error_pct < 0.2, "{rows:?}");
    }
}
