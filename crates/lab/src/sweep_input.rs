//! `lagless sweep-input`: lead policies over a long replay of one link, without the game.
//!
//! Starvation at a 0.5% target is a statement about rare events (a cellular link's bad
//! spells), which a one-minute run holds a handful of. What starves the server depends
//! only on when each input message left and arrived, so this replay runs the real
//! [`ServerSession`] and [`ClientSession`] (with one-byte inputs and small snapshots)
//! over the profile's emulated link for as long as asked, once per policy with the same
//! seed, and reports starvation, lead beyond RTT/2 and input delay side by side, overall
//! and per phase when the link changes.

use crate::config::{LinkChange, check_link_changes};
use crate::input_buffer::{OutageSpec, SyncProbe, lead_label};
use crate::metrics::Report;
use lagless_core::{ClientConfig, ClientSession, LeadPolicy, ServerConfig, ServerSession};
use lagless_netem::{ConfigError, Duplex, LinkConfig};
use std::fmt::Write as _;
use std::time::Duration;

/// What to replay.
#[derive(Debug, Clone)]
pub struct InputSweepConfig {
    /// Both directions' link at the start.
    pub link: LinkConfig,
    /// Changes of the link, in time order (both directions); figures are also given per
    /// phase.
    pub link_changes: Vec<LinkChange>,
    /// Outages.
    pub outages: Vec<OutageSpec>,
    /// Ticks per second (snapshots go out every tick).
    pub tick_hz: u32,
    /// Simulated seconds per policy.
    pub seconds: f64,
    /// Seed of the link.
    pub seed: u64,
    /// Snapshot payload bytes.
    pub snapshot_bytes: usize,
    /// Seconds at the start left out of the figures (the clock synchronising).
    pub warmup: f64,
}

impl Default for InputSweepConfig {
    fn default() -> Self {
        Self {
            link: LinkConfig::default(),
            link_changes: Vec::new(),
            outages: Vec::new(),
            tick_hz: 64,
            seconds: 600.0,
            seed: 1,
            snapshot_bytes: 200,
            warmup: 5.0,
        }
    }
}

/// One policy's figures over a stretch of the replay.
#[derive(Debug, Clone, PartialEq)]
pub struct InputFigures {
    /// The policy's label.
    pub policy: String,
    /// Server ticks without the client's input, percent.
    pub starved_pct: f64,
    /// Mean lead beyond RTT/2 (the client's smoothed RTT), ms.
    pub lead_ms_mean: f64,
    /// Mean time from the client sampling a tick's input to the server stepping that
    /// tick with it, ms.
    pub input_delay_ms_mean: f64,
    /// Clock jumps.
    pub clock_jumps: u64,
    /// `sync.recover_ms_max` over the whole replay (after each link change and outage's
    /// end; see [`SyncProbe`]); NaN without such events, and in the per-phase figures.
    pub recover_ms_max: f64,
}

/// Figures of every policy, overall and per phase.
#[derive(Debug, Clone)]
pub struct InputSweep {
    /// Over the whole replay after the warm-up.
    pub overall: Vec<InputFigures>,
    /// Per phase (from the start, then from each link change): its start and the figures.
    pub phases: Vec<(Duration, Vec<InputFigures>)>,
}

/// Why a sweep cannot run.
#[derive(Debug, thiserror::Error)]
pub enum InputSweepError {
    /// The link configuration is invalid.
    #[error(transparent)]
    Link(#[from] ConfigError),
    /// Another setting is out of range.
    #[error("{0}")]
    Invalid(String),
}

/// The policies compared by default: fixed buffers of 1-10 ticks, the adaptive policy at
/// 0.25%, 0.5%, 1% and 2%, and the peers' rules (lightyear, Unity).
pub fn default_policies() -> Vec<LeadPolicy> {
    let mut p: Vec<LeadPolicy> = (1..=10).map(|n| LeadPolicy::fixed(f64::from(n))).collect();
    for s in [0.0025, 0.005, 0.01, 0.02] {
        p.push(LeadPolicy::Adaptive { starvation: s });
    }
    p.push(LeadPolicy::LIGHTYEAR);
    p.push(LeadPolicy::CommandAge);
    p
}

/// Counters over one stretch.
#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    starved: u64,
    fed: u64,
    lead_ms: f64,
    leads: u64,
    delay_ms: f64,
    delays: u64,
}

impl Acc {
    fn figures(&self, policy: String, clock_jumps: u64, recover_ms_max: f64) -> InputFigures {
        let ratio = |a: f64, n: u64| if n > 0 { a / n as f64 } else { f64::NAN };
        InputFigures {
            policy,
            starved_pct: ratio(self.starved as f64 * 100.0, self.starved + self.fed),
            lead_ms_mean: ratio(self.lead_ms, self.leads),
            input_delay_ms_mean: ratio(self.delay_ms, self.delays),
            clock_jumps,
            recover_ms_max,
        }
    }
}

/// Replays `config`'s link once per policy.
pub fn sweep(
    config: &InputSweepConfig,
    policies: &[LeadPolicy],
) -> Result<InputSweep, InputSweepError> {
    if !(config.seconds > 0.0 && config.seconds <= 7.0 * 86400.0) {
        return Err(InputSweepError::Invalid(
            "seconds must be in (0, 604800]".into(),
        ));
    }
    if !(1..=1000).contains(&config.tick_hz) {
        return Err(InputSweepError::Invalid(
            "tick rate must be 1..=1000".into(),
        ));
    }
    check_link_changes(&config.link_changes, config.seconds).map_err(InputSweepError::Invalid)?;
    config.link.validate()?;
    let mut overall = Vec::new();
    let mut phases: Vec<(Duration, Vec<InputFigures>)> = std::iter::once(Duration::ZERO)
        .chain(config.link_changes.iter().map(|c| c.at))
        .map(|at| (at, Vec::new()))
        .collect();
    for policy in policies {
        let (all, per_phase, jumps, recover) = replay_one(config, *policy)?;
        let label = lead_label(policy);
        overall.push(all.figures(label.clone(), jumps, recover));
        for ((_, figs), acc) in phases.iter_mut().zip(per_phase) {
            figs.push(acc.figures(label.clone(), jumps, f64::NAN));
        }
    }
    Ok(InputSweep { overall, phases })
}

/// One policy over the link: overall and per-phase counters, clock jumps and the longest
/// recovery (NaN without link changes or outages).
fn replay_one(
    config: &InputSweepConfig,
    policy: LeadPolicy,
) -> Result<(Acc, Vec<Acc>, u64, f64), InputSweepError> {
    let hz = config.tick_hz;
    let mut server = ServerSession::<u8>::new(ServerConfig {
        tick_hz: hz,
        ..ServerConfig::default()
    });
    server
        .add_client(1)
        .map_err(|e| InputSweepError::Invalid(e.to_string()))?;
    let mut client_config = ClientConfig {
        tick_hz: hz,
        ..ClientConfig::default()
    };
    client_config.sync.lead = policy;
    let mut client = ClientSession::<u8>::new(client_config);
    let mut link = Duplex::symmetric(config.link.clone(), config.seed)?;
    for o in &config.outages {
        link.add_outage(o.outage, o.direction);
    }
    let step = Duration::from_micros(500);
    let end = Duration::from_secs_f64(config.seconds);
    let warmup = Duration::from_secs_f64(config.warmup.max(0.0));
    let mut changes = config.link_changes.iter().peekable();
    let mut phase = 0usize;
    let mut all = Acc::default();
    let mut per_phase = vec![Acc::default(); config.link_changes.len() + 1];
    let mut pending: std::collections::BTreeMap<u32, Duration> = Default::default();
    let mut next_lead = Duration::ZERO;
    let payload = vec![0u8; config.snapshot_bytes.max(1)];
    let hz_f = f64::from(hz);
    // The same recovery measure as a game run's (`sync.recover_ms_max`).
    let events = config
        .link_changes
        .iter()
        .map(|c| c.at)
        .chain(config.outages.iter().map(|o| o.outage.end()))
        .collect();
    let mut probe = SyncProbe::new(1, hz, events);
    let mut now = Duration::ZERO;
    while now <= end {
        while let Some(c) = changes.next_if(|c| c.at <= now) {
            c.apply_to(&mut link)?;
            phase += 1;
        }
        let counted = now >= warmup;
        while let Some(p) = link.up.poll(now) {
            let _ = server.handle_packet(1, now, &p);
        }
        server.update(now);
        while let Some(t) = server.next_tick() {
            let input = t
                .inputs
                .first()
                .and_then(|(_, i)| *i)
                .filter(|_| t.is_fed(1));
            let started = server
                .client_stats(1)
                .is_some_and(|s| s.ticks_with_input + s.ticks_starved > 0);
            probe.server_tick(now, t.tick, &[started.then_some(input.is_some())]);
            let sampled = pending.remove(&t.tick.0);
            while pending
                .first_key_value()
                .is_some_and(|(k, _)| *k < t.tick.0)
            {
                pending.pop_first();
            }
            if counted && started {
                for acc in [&mut all, &mut per_phase[phase]] {
                    if input.is_some() {
                        acc.fed += 1;
                        if let Some(s) = sampled {
                            acc.delay_ms += now.saturating_sub(s).as_secs_f64() * 1000.0;
                            acc.delays += 1;
                        }
                    } else {
                        acc.starved += 1;
                    }
                }
            }
            if server.snapshot_due() {
                let _ = server.send_snapshot(1, now, &payload);
            }
        }
        while let Some((_, bytes)) = server.poll_transmit() {
            link.down.send(now, bytes);
        }
        while let Some(p) = link.down.poll(now) {
            let _ = client.handle_packet(now, &p);
        }
        while client.poll_snapshot().is_some() {}
        client.update(now);
        let before = client.current_tick();
        while let Some(t) = client.next_tick() {
            client.set_input(t, 1);
            pending.insert(t.0, now);
        }
        let position = client.is_synced().then(|| client.position());
        let tracking = position
            .zip(client.server_position(now))
            .map(|(p, server)| p - server - client.target_lead_ticks());
        probe.client_ticks(
            0,
            now,
            (before, client.current_tick()),
            (position, client.rtt().smoothed(), tracking),
        );
        while let Some(p) = client.poll_transmit(now) {
            link.up.send(now, p);
        }
        if counted && client.is_synced() && now >= next_lead {
            next_lead = now + Duration::from_millis(10);
            if let Some(rtt) = client.rtt().smoothed() {
                let lead = (client.position() - now.as_secs_f64() * hz_f) / hz_f * 1000.0
                    - rtt.as_secs_f64() * 500.0;
                for acc in [&mut all, &mut per_phase[phase]] {
                    acc.lead_ms += lead;
                    acc.leads += 1;
                }
            }
        }
        now += step;
    }
    let mut report = Report::default();
    probe.fill(&mut report);
    let recover = report.get_f64("sync.recover_ms_max").unwrap_or(f64::NAN);
    Ok((all, per_phase, client.stats().clock_jumps, recover))
}

/// A table of figures, one line per policy.
pub fn format_input_sweep(figures: &[InputFigures]) -> String {
    let mut s = String::from(
        "policy               starved_%   lead_ms_mean   input_delay_ms   clock_jumps   recover_ms_max\n",
    );
    for f in figures {
        let _ = writeln!(
            s,
            "{:<20} {:>9.3} {:>14.1} {:>16.1} {:>13} {:>16.0}",
            f.policy,
            f.starved_pct,
            f.lead_ms_mean,
            f.input_delay_ms_mean,
            f.clock_jumps,
            f.recover_ms_max
        );
    }
    s
}

/// For each peer's rule and each adaptive target in `figures`: the smallest fixed buffer
/// (by lead) that starves no more, so a policy can be judged against a fixed buffer
/// picked in hindsight at the same starvation.
pub fn format_comparison(figures: &[InputFigures]) -> String {
    let fixed: Vec<&InputFigures> = figures
        .iter()
        .filter(|f| f.policy.starts_with("fixed:"))
        .collect();
    let mut s = String::new();
    for f in figures.iter().filter(|f| !f.policy.starts_with("fixed:")) {
        let best = fixed
            .iter()
            .filter(|x| x.starved_pct <= f.starved_pct)
            .min_by(|a, b| a.lead_ms_mean.total_cmp(&b.lead_ms_mean));
        let _ = match best {
            Some(b) => writeln!(
                s,
                "{:<20} starves {:.3}%, lead {:.1} ms; least fixed buffer as good: {} (lead {:.1} ms, {:+.0}%)",
                f.policy,
                f.starved_pct,
                f.lead_ms_mean,
                b.policy,
                b.lead_ms_mean,
                (f.lead_ms_mean / b.lead_ms_mean - 1.0) * 100.0
            ),
            None => writeln!(
                s,
                "{:<20} starves {:.3}%, lead {:.1} ms; no fixed buffer of 1-10 ticks starves as little",
                f.policy, f.starved_pct, f.lead_ms_mean
            ),
        };
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_longer_fixed_buffer_starves_less_and_leads_more_and_adaptive_meets_its_target() {
        let config = InputSweepConfig {
            link: lagless_netem::profile("wifi").expect("known"),
            seconds: 60.0,
            ..InputSweepConfig::default()
        };
        let policies = [
            LeadPolicy::fixed(1.0),
            LeadPolicy::fixed(6.0),
            LeadPolicy::ADAPTIVE,
        ];
        let s = sweep(&config, &policies).expect("runs");
        let (one, six, adaptive) = (&s.overall[0], &s.overall[1], &s.overall[2]);
        assert!(one.starved_pct > six.starved_pct, "{s:?}");
        assert!(one.lead_ms_mean < six.lead_ms_mean, "{s:?}");
        assert!(adaptive.starved_pct <= 1.0, "{adaptive:?}");
        assert!(one.input_delay_ms_mean > 0.0);
        assert_eq!(s.phases.len(), 1);
        let text = format_input_sweep(&s.overall);
        assert!(text.contains("adaptive:0.5%"), "{text}");
        // No link change, no outage: nothing to recover from.
        assert!(adaptive.recover_ms_max.is_nan(), "{adaptive:?}");
    }

    #[test]
    fn recovery_is_measured_after_a_link_change_as_in_a_game_run() {
        let config = InputSweepConfig {
            link: lagless_netem::profile("broadband").expect("known"),
            link_changes: vec![LinkChange::parse("20:mobile").expect("valid")],
            seconds: 40.0,
            ..InputSweepConfig::default()
        };
        let s = sweep(&config, &[LeadPolicy::ADAPTIVE]).expect("runs");
        let recover = s.overall[0].recover_ms_max;
        // Within the probe's 10 s watch, and not at its end (never back in step).
        assert!(recover > 0.0 && recover < 10_000.0, "{recover}");
        assert!(s.phases.iter().all(|(_, f)| f[0].recover_ms_max.is_nan()));
        assert!(format_input_sweep(&s.overall).contains("recover_ms_max"));
    }
}
