use crate::lead::AdaptiveLead;
use crate::{RttEstimator, Tick, TickRate};
use std::time::Duration;

/// How far ahead of the server the client runs (the Pixonic mobile shooter article's
/// run-ahead and dynamic input buffer).
///
/// The client must simulate tick `n` early enough that its input for `n` reaches the
/// server before the server steps `n`: lead = one-way delay + a jitter margin + an input
/// buffer. [`LeadPolicy::Felt`] (the default) and [`LeadPolicy::Adaptive`] size all of it from the server's
/// reports of how early inputs arrive; the other variants are fixed buffers and the
/// rules of two peers, kept so that `lagless sweep-input` can compare them on one link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LeadPolicy {
    /// `RTT/2 + jitter_factor * RTT deviation + buffer_ticks`, all measured from traffic,
    /// corrected by the server's slack reports so that inputs arrive `buffer_ticks` (plus
    /// the jitter margin) early.
    Fixed {
        /// Ticks by which inputs should arrive early at the server, on top of the jitter margin.
        buffer_ticks: f64,
        /// Multiple of the jitter (RTT mean deviation before slack reports exist, slack mean
        /// deviation after) added as a margin.
        jitter_factor: f64,
    },
    /// The least lead at which the server starves of our input on at most `starvation`
    /// of its ticks (a fraction: 0.005 is 0.5%), from the distribution of the server's
    /// slack reports (see [`crate::lead`]).
    Adaptive {
        /// Target share of server ticks without our input.
        starvation: f64,
    },
    /// [`LeadPolicy::Adaptive`] with the starvation share chosen by what the player
    /// feels: the share within `min_starvation..=max_starvation` whose lead costs least,
    /// a tick of lead costing what it adds to every prediction's error and a starved tick
    /// what the server's wrong guesses cost ([`crate::ClientSession::set_lead_costs`],
    /// which the replication layer's client measures from its own corrections). Until
    /// costs are given it holds 0.5%.
    Felt {
        /// The least share of server ticks it may choose to starve.
        min_starvation: f64,
        /// The largest.
        max_starvation: f64,
    },
    /// lightyear's rule (0.29): `RTT/2 + jitter_factor * jitter + buffer_ticks`, from the
    /// client's own pings alone (the RTT mean deviation as jitter), with no feedback from
    /// the server. lightyear uses 4 and 1.
    PingOnly {
        /// Ticks added.
        buffer_ticks: f64,
        /// Multiple of the RTT mean deviation added.
        jitter_factor: f64,
    },
    /// Unity Netcode for Entities' rule (1.13): the server's smoothed "command age"
    /// (7/8 old + 1/8 new; here the negated slack reports, smoothed by the client) drives
    /// the client's time scale, `clamp(1 + 0.1 (age + 2), 0.9, 1.1)`, snapping when the
    /// age is more than 10 ticks off. No lead target: the clock steers on the age alone.
    CommandAge,
}

impl LeadPolicy {
    /// The classic fixed buffer of `ticks` ticks (no jitter margin on top).
    pub fn fixed(ticks: f64) -> Self {
        LeadPolicy::Fixed {
            buffer_ticks: ticks,
            jitter_factor: 0.0,
        }
    }

    /// The default adaptive policy: 0.5% starvation.
    pub const ADAPTIVE: LeadPolicy = LeadPolicy::Adaptive { starvation: 0.005 };

    /// The felt policy with its default range: 0.1% to 10% of ticks starved (the runs
    /// that chose the top: docs/lead.md, "The felt lead").
    pub const FELT: LeadPolicy = LeadPolicy::Felt {
        min_starvation: 0.001,
        max_starvation: 0.1,
    };

    /// lightyear's rule with its constants (4 jitters + 1 tick).
    pub const LIGHTYEAR: LeadPolicy = LeadPolicy::PingOnly {
        buffer_ticks: 1.0,
        jitter_factor: 4.0,
    };
}

impl Default for LeadPolicy {
    fn default() -> Self {
        LeadPolicy::FELT
    }
}

/// Clock synchronisation settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyncConfig {
    /// How far ahead of the server to run.
    pub lead: LeadPolicy,
    /// Largest speed-up or slow-down of the client clock while converging, as a fraction
    /// (0.1 = run between 90% and 110% of real time). Small values hide the correction.
    pub max_dilation: f64,
    /// Largest slow-down while the clock is further ahead than its target (after the
    /// link got better), as a fraction: larger than [`SyncConfig::max_dilation`], so a
    /// lead the link no longer needs is given back within about a second (ten ticks at
    /// 40% take 25 ticks), while small corrections stay within `max_dilation`. More than
    /// a tick ahead, the clock also slows at twice [`SyncConfig::gain`].
    pub max_slowdown: f64,
    /// Dilation per tick of error: how quickly small errors are corrected.
    pub gain: f64,
    /// An error larger than this many ticks is corrected at once: forward by jumping
    /// (up to [`crate::limits::FAST_FORWARD_TICKS`] by producing the ticks between at
    /// once, further by skipping them), backward by pausing the clock (ticks are never
    /// repeated).
    pub resync_ticks: f64,
    /// A clock this many ticks or more behind its target (but within `resync_ticks`)
    /// catches up at once too, by producing the ticks between in one burst (see
    /// [`crate::limits::FAST_FORWARD_TICKS`]): dilating by 10% would take ten times the gap,
    /// starving the server all along. Infinite turns it off.
    pub catch_up_ticks: f64,
    /// [`SyncConfig::catch_up_ticks`] while the adaptive policy's window is too young to
    /// resolve its target ([`AdaptiveLead::is_young`]: just after a change of link, or
    /// at the start): the lead it asks for then grows in steps as the new link's tail
    /// shows, and each step dilated up to at 10% starves the server for ten times its
    /// length. In steady state the bursts of a low threshold show (the predicted
    /// player's error on `mobile` rose with a threshold of 2), so it holds only then.
    pub catch_up_young_ticks: f64,
    /// Weight of a new sample in the server-clock offset filter once warmed up.
    pub offset_smoothing: f64,
    /// Time constant, in seconds, of the lead correction driven by slack reports. Longer
    /// than a round trip, so the loop stays stable.
    pub slack_time_constant: f64,
    /// Largest lead correction, in ticks, either way; also how far beyond RTT/2 the
    /// adaptive policy may lead, however the server's reports lie.
    pub max_correction_ticks: f64,
    /// A packet from the server that arrives this many seconds later than its tick and
    /// the packets before it suggest (beyond four mean deviations of that lateness) sat
    /// in a queue, as through an outage: its clock stamp and echo are not used, so they
    /// cannot drag the clock and the RTT estimate back. Once such packets have kept
    /// coming for [`SyncConfig::stale_accept_secs`], the link itself got slower and they
    /// are believed.
    pub stale_margin_secs: f64,
    /// See [`SyncConfig::stale_margin_secs`].
    pub stale_accept_secs: f64,
}

impl Default for SyncConfig {
    fn default() -> Self {
        Self {
            lead: LeadPolicy::default(),
            max_dilation: 0.1,
            max_slowdown: 0.4,
            gain: 0.05,
            resync_ticks: 8.0,
            catch_up_ticks: 4.0,
            catch_up_young_ticks: 1.0,
            offset_smoothing: 0.05,
            slack_time_constant: 2.0,
            max_correction_ticks: 64.0,
            stale_margin_secs: 0.03,
            stale_accept_secs: 0.5,
        }
    }
}

/// What the client clock should do this frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClockAdjust {
    /// Not synchronised yet: no ticks.
    Wait,
    /// Run at this multiple of real time.
    Run(f64),
    /// Jump to this fractional tick position.
    Jump(f64),
}

/// Estimates the server's clock from its tick stamps and decides how the client clock moves.
///
/// Every server packet says which tick the server was at when it sent it. With the RTT
/// known, `tick * period + RTT/2` is a sample of the server's time when the packet arrives;
/// the difference to the local clock is filtered into an offset.
#[derive(Debug, Clone)]
pub struct ClockSync {
    rate: TickRate,
    config: SyncConfig,
    offset_secs: Option<f64>,
    /// The offset as first estimated, never moved since: the frame of the adaptive
    /// policy's needs (see [`ClockSync::frame_position`]).
    anchor_secs: Option<f64>,
    samples: u64,
    slack_mean: Option<f64>,
    slack_dev: f64,
    correction: f64,
    last_slack_at: Option<Duration>,
    adaptive: Option<AdaptiveLead>,
    /// [`LeadPolicy::CommandAge`]'s smoothed age, ticks.
    command_age: Option<f64>,
    /// Lateness of server packets behind their ticks (ticks): mean, mean deviation,
    /// samples; and since when packets have been stale in a row.
    lateness: (f64, f64, u64),
    stale_since: Option<Duration>,
    stale_packets: u64,
}

impl ClockSync {
    /// A synchroniser for a server ticking at `rate`.
    pub fn new(rate: TickRate, config: SyncConfig) -> Self {
        Self {
            rate,
            config,
            offset_secs: None,
            anchor_secs: None,
            samples: 0,
            slack_mean: None,
            slack_dev: 0.0,
            correction: 0.0,
            last_slack_at: None,
            adaptive: match config.lead {
                LeadPolicy::Adaptive { starvation } => Some(AdaptiveLead::new(starvation)),
                LeadPolicy::Felt {
                    min_starvation,
                    max_starvation,
                } => Some(AdaptiveLead::felt(0.005, min_starvation, max_starvation)),
                _ => None,
            },
            command_age: None,
            lateness: (0.0, 0.0, 0),
            stale_since: None,
            stale_packets: 0,
        }
    }

    /// Whether a server packet stamped `tick`, arriving at `now`, came about as late as
    /// packets do on this link, rather than after sitting in a queue (see
    /// [`SyncConfig::stale_margin_secs`]). The caller skips the clock stamp and the RTT
    /// sample of a stale packet. Always true before the clock exists.
    pub fn is_fresh(&mut self, now: Duration, tick: Tick) -> bool {
        let Some(server) = self.server_position(now) else {
            return true;
        };
        let late = server - f64::from(tick.0);
        if !late.is_finite() {
            return false;
        }
        let (mean, dev, n) = self.lateness;
        let hz = f64::from(self.rate.hz());
        let bound = mean + (4.0 * dev).max(self.config.stale_margin_secs * hz);
        let warm = n >= 16;
        if warm && late > bound {
            let since = *self.stale_since.get_or_insert(now);
            if now.saturating_sub(since).as_secs_f64() < self.config.stale_accept_secs {
                self.stale_packets += 1;
                return false;
            }
            // Stale for long enough: that is how late packets are now.
            self.lateness = (late, 0.0, n);
        }
        self.stale_since = None;
        self.lateness = if n == 0 {
            (late, 0.0, 1)
        } else {
            let (mean, dev, _) = self.lateness;
            let w = (1.0 / (n + 1) as f64).max(1.0 / 16.0);
            (
                mean + w * (late - mean),
                0.75 * dev + 0.25 * (late - mean).abs(),
                n + 1,
            )
        };
        true
    }

    /// Server packets found stale by [`ClockSync::is_fresh`].
    pub fn stale_packets(&self) -> u64 {
        self.stale_packets
    }

    /// Feeds one *need* (in ticks): the lead the inputs whose slack the server just
    /// reported would have needed to arrive just in time (our lead when we sent the
    /// message it echoes, minus the `slack`), standing for `ticks` ticks (the messages
    /// since the previous report's). Only [`LeadPolicy::Adaptive`] and [`LeadPolicy::Felt`] use it.
    pub fn on_need(&mut self, need: f64, slack: f64, ticks: usize) {
        if let Some(a) = &mut self.adaptive {
            a.add_report(need, slack, ticks);
        }
    }

    /// Gives the felt policy its costs ([`AdaptiveLead::set_costs`]); others ignore them.
    pub fn set_lead_costs(&mut self, per_lead_tick: f64, per_starved_tick: f64) {
        if let Some(a) = &mut self.adaptive {
            a.set_costs(per_lead_tick, per_starved_tick);
        }
    }

    /// The adaptive policy's state, with [`LeadPolicy::Adaptive`] or [`LeadPolicy::Felt`].
    pub fn adaptive(&self) -> Option<&AdaptiveLead> {
        self.adaptive.as_ref()
    }

    /// The settings in force.
    pub fn config(&self) -> &SyncConfig {
        &self.config
    }

    /// Feeds the tick stamp of a server packet received at local time `now`.
    pub fn on_server_tick(&mut self, now: Duration, server_tick: Tick, rtt: &RttEstimator) {
        let Some(srtt) = rtt.smoothed() else {
            return;
        };
        let server_time =
            f64::from(server_tick.0) * self.rate.period_secs() + srtt.as_secs_f64() / 2.0;
        let sample = server_time - now.as_secs_f64();
        self.samples += 1;
        // Average the first samples evenly, then track slowly so jitter does not shake the clock.
        let w = (1.0 / self.samples as f64).max(self.config.offset_smoothing);
        self.offset_secs = Some(match self.offset_secs {
            None => sample,
            Some(o) => o + w * (sample - o),
        });
        self.anchor_secs.get_or_insert(sample);
    }

    /// Feeds the server's report (received at `now`) of how early, in ticks, our newest
    /// input message arrived. Drives the lead correction toward
    /// `buffer_ticks + jitter_factor * slack deviation`.
    ///
    /// `position` is the client clock's fractional tick now. While the clock is still
    /// converging on its target, the slack reflects the clock's actual lead rather than the
    /// target; that part of the error is subtracted so the correction learns only what the
    /// open-loop estimate gets wrong (route asymmetry), and does not wind up.
    pub fn on_input_slack(&mut self, now: Duration, slack: f64, position: f64, rtt: &RttEstimator) {
        if !slack.is_finite() {
            return;
        }
        // Whatever a report claims, a slack beyond the tick range is nonsense.
        let slack = slack.clamp(-1e6, 1e6);
        if self.config.lead == LeadPolicy::CommandAge {
            // Unity smooths the age on the server, per command; the reports are what the
            // client sees of it.
            let age = -slack;
            self.command_age = Some(self.command_age.map_or(age, |a| a + (age - a) / 8.0));
        }
        let tracking = self.target_position(now, rtt).map_or(0.0, |t| t - position);
        let (mean, dev) = match self.slack_mean {
            None => (slack, 0.0),
            Some(m) => {
                // Same gains as the RTT filter: the deviation tracks jitter quickly.
                let dev = 0.75 * self.slack_dev + 0.25 * (slack - m).abs();
                (m + 0.125 * (slack - m), dev)
            }
        };
        self.slack_mean = Some(mean);
        self.slack_dev = dev;
        let LeadPolicy::Fixed {
            buffer_ticks,
            jitter_factor,
        } = self.config.lead
        else {
            return;
        };
        let desired = buffer_ticks + jitter_factor * dev;
        // Integrate the error in time, not per report, so the loop speed does not depend
        // on the snapshot rate.
        let dt = self
            .last_slack_at
            .map_or(0.0, |t| now.saturating_sub(t).as_secs_f64());
        self.last_slack_at = Some(now);
        let k = (dt / self.config.slack_time_constant.max(1e-3)).min(1.0);
        let limit = self.config.max_correction_ticks;
        self.correction = (self.correction + k * (desired - slack - tracking)).clamp(-limit, limit);
    }

    /// Smoothed slack of our inputs at the server, in ticks.
    pub fn slack_mean(&self) -> Option<f64> {
        self.slack_mean
    }

    /// Mean deviation of the slack, in ticks (the uplink's jitter as the server sees it).
    pub fn slack_deviation(&self) -> f64 {
        self.slack_dev
    }

    /// Lead correction learned from slack reports, in ticks.
    pub fn correction(&self) -> f64 {
        self.correction
    }

    /// True once the server clock has been estimated.
    pub fn is_synced(&self) -> bool {
        self.offset_secs.is_some()
    }

    /// The server's estimated position (fractional tick) at local time `now`.
    pub fn server_position(&self, now: Duration) -> Option<f64> {
        self.offset_secs
            .map(|o| (now.as_secs_f64() + o) * f64::from(self.rate.hz()))
    }

    /// The server's position at `now` as first estimated and carried forward by the local
    /// clock alone (fractional ticks): the frame in which the client measures its lead
    /// when it sends an input message, and so the frame of the adaptive policy's needs
    /// (see [`crate::lead`]).
    ///
    /// Unlike [`ClockSync::server_position`], it never moves when the estimate does. On
    /// a link that changes, the estimate is wrong for a second or two: stamps of packets
    /// that look queued are skipped for [`SyncConfig::stale_accept_secs`], the RTT
    /// climbs to the new one by an eighth a sample, the offset follows by
    /// [`SyncConfig::offset_smoothing`]. Needs measured against it were off by that
    /// error (three ticks when `broadband` turned `mobile`) and stayed in the window,
    /// and the lead asked for moved with every step of the estimate. What starves the
    /// server depends only on when inputs leave the client, by its own clock, and when
    /// they arrive, so a fixed frame loses nothing; the needs are the same as against
    /// the estimate while it stands still. A client clock that drifts against the
    /// server's shows as needs that drift along, which the window follows (100 ppm is
    /// under a tick over the window's two minutes).
    pub fn frame_position(&self, now: Duration) -> Option<f64> {
        self.anchor_secs
            .map(|o| (now.as_secs_f64() + o) * f64::from(self.rate.hz()))
    }

    /// The lead over the server the policy asks for, in ticks.
    pub fn lead_ticks(&self, rtt: &RttEstimator) -> f64 {
        let srtt = rtt.smoothed().unwrap_or_default();
        let hz = f64::from(self.rate.hz());
        let one_way = srtt.as_secs_f64() / 2.0 * hz;
        let deviation = rtt.deviation().as_secs_f64() * hz;
        match self.config.lead {
            LeadPolicy::Fixed {
                buffer_ticks,
                jitter_factor,
            } => one_way + jitter_factor * deviation / 2.0 + buffer_ticks + self.correction,
            LeadPolicy::Adaptive { .. } | LeadPolicy::Felt { .. } => {
                // Until the server's reports tell, a generous buffer on top of the RTT
                // (four deviations and four ticks): catching up later costs starved
                // ticks, coming down costs nothing.
                let open_loop = one_way + 4.0 * deviation + 4.0;
                // The window's lead is over the fixed frame; over the estimate it is
                // shorter by how far the estimate moved since it was first made.
                let frame = match (self.anchor_secs, self.offset_secs) {
                    (Some(a), Some(o)) => (a - o) * hz,
                    _ => 0.0,
                };
                let lead = self
                    .adaptive
                    .as_ref()
                    .and_then(AdaptiveLead::lead)
                    .map_or(open_loop, |l| l + frame);
                // However the reports lie: never less than RTT/2 ahead of the server
                // (inputs could not arrive in time), never further ahead than the
                // correction bound beyond it.
                lead.clamp(one_way, one_way + self.config.max_correction_ticks)
            }
            LeadPolicy::PingOnly {
                buffer_ticks,
                jitter_factor,
            } => one_way + jitter_factor * deviation + buffer_ticks,
            // The start; from then on the clock steers on the age (see `adjust`).
            LeadPolicy::CommandAge => one_way + 2.0,
        }
    }

    /// Where the client clock should be at `now`, in fractional ticks.
    pub fn target_position(&self, now: Duration, rtt: &RttEstimator) -> Option<f64> {
        self.server_position(now).map(|s| s + self.lead_ticks(rtt))
    }

    /// Decides how the client clock, at fractional position `position` (after adding this
    /// frame's time at normal speed), should move.
    pub fn adjust(&self, now: Duration, position: f64, rtt: &RttEstimator) -> ClockAdjust {
        let Some(target) = self.target_position(now, rtt) else {
            return ClockAdjust::Wait;
        };
        if let (LeadPolicy::CommandAge, Some(age)) = (self.config.lead, self.command_age) {
            let error = age + 2.0;
            return if error > 10.0 {
                ClockAdjust::Jump(position + error)
            } else if error < -10.0 {
                // Unity snaps back; ticks are never produced twice here, so stand still.
                ClockAdjust::Run(0.0)
            } else {
                ClockAdjust::Run((1.0 + 0.1 * error).clamp(0.9, 1.1))
            };
        }
        let error = target - position;
        let catch_up = if self.adaptive.as_ref().is_some_and(AdaptiveLead::is_young) {
            self.config.catch_up_young_ticks
        } else {
            self.config.catch_up_ticks
        };
        if error > self.config.resync_ticks.min(catch_up) {
            ClockAdjust::Jump(target)
        } else if error < -self.config.resync_ticks {
            // Never run backwards (that would repeat ticks whose inputs were sent): stand still.
            ClockAdjust::Run(0.0)
        } else {
            // Ahead of the target by more than a tick (the link got better), the lead it
            // no longer needs is given back twice as eagerly, up to `max_slowdown`: being
            // ahead costs only latency, and every tick of it is felt.
            let gain = if error < -1.0 {
                2.0 * self.config.gain
            } else {
                self.config.gain
            };
            let d = (error * gain).clamp(
                -self.config.max_slowdown.max(self.config.max_dilation),
                self.config.max_dilation,
            );
            ClockAdjust::Run(1.0 + d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtt(ms: u64) -> RttEstimator {
        let mut r = RttEstimator::new();
        r.add_sample(Duration::from_millis(ms));
        r
    }

    #[test]
    fn estimates_server_position_and_lead() {
        let rate = TickRate::new(64);
        let mut s = ClockSync::new(rate, SyncConfig::default());
        let r = rtt(200);
        // A packet stamped tick 640 (10 s of server time) arrives at local 3 s, after 100 ms.
        s.on_server_tick(Duration::from_secs(3), Tick(640), &r);
        let pos = s.server_position(Duration::from_secs(3)).unwrap();
        assert!((pos - (640.0 + 6.4)).abs() < 1e-6, "{pos}");
        // Lead before any report (the adaptive policy's open loop): 100 ms one way (6.4
        // ticks) + no jitter margin yet (one sample) + 4 ticks.
        let lead = s.lead_ticks(&r);
        assert!((lead - (6.4 + 4.0)).abs() < 1e-6, "{lead}");
    }

    #[test]
    fn small_errors_dilate_large_ones_jump_or_pause() {
        let rate = TickRate::new(64);
        let mut s = ClockSync::new(rate, SyncConfig::default());
        let r = rtt(0);
        s.on_server_tick(Duration::ZERO, Tick(100), &r);
        let target = s.target_position(Duration::ZERO, &r).unwrap();
        assert_eq!(s.adjust(Duration::ZERO, target, &r), ClockAdjust::Run(1.0));
        match s.adjust(Duration::ZERO, target - 1.0, &r) {
            ClockAdjust::Run(v) => assert!(v > 1.0 && v <= 1.1),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            s.adjust(Duration::ZERO, target - 20.0, &r),
            ClockAdjust::Jump(target)
        );
        assert_eq!(
            s.adjust(Duration::ZERO, target + 20.0, &r),
            ClockAdjust::Run(0.0)
        );
    }

    #[test]
    fn slack_reports_correct_an_asymmetric_route() {
        let rate = TickRate::new(64);
        let config = SyncConfig {
            lead: LeadPolicy::Fixed {
                buffer_ticks: 2.0,
                jitter_factor: 1.0,
            },
            ..SyncConfig::default()
        };
        let mut s = ClockSync::new(rate, config);
        let r = rtt(200);
        s.on_server_tick(Duration::ZERO, Tick(0), &r);
        let open_loop = s.lead_ticks(&r);
        // The uplink is 2 ticks slower than RTT/2 suggests: inputs arrive with 0 slack
        // instead of 2. Every tick of extra lead shows up as a tick of extra slack.
        // The clock is assumed to follow its target exactly.
        let mut now = Duration::ZERO;
        for _ in 0..1280 {
            now += rate.period();
            let slack = s.lead_ticks(&r) - open_loop;
            let position = s.target_position(now, &r).unwrap();
            s.on_input_slack(now, slack, position, &r);
        }
        let gained = s.lead_ticks(&r) - open_loop;
        assert!((gained - 2.0).abs() < 0.05, "{gained}");
        assert!(s.slack_mean().unwrap() > 1.9);
        // Garbage is ignored.
        s.on_input_slack(now, f64::NAN, 0.0, &r);
        assert!((s.lead_ticks(&r) - open_loop - gained).abs() < 1e-9);
    }

    #[test]
    fn waits_without_rtt() {
        let mut s = ClockSync::new(TickRate::new(30), SyncConfig::default());
        s.on_server_tick(Duration::ZERO, Tick(5), &RttEstimator::new());
        assert!(!s.is_synced());
        assert_eq!(
            s.adjust(Duration::ZERO, 0.0, &RttEstimator::new()),
            ClockAdjust::Wait
        );
    }
}
