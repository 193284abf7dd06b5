use crate::{RttEstimator, Tick, TickRate};
use std::time::Duration;

/// How far ahead of the server the client runs (source 002, item 15).
///
/// The client must simulate tick `n` early enough that its input for `n` reaches the
/// server before the server steps `n`: lead = one-way delay + a jitter margin + an input
/// buffer. Later policies (adaptive buffers driven by the server's reported input-buffer
/// fill) slot in as further variants without changing the session API.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LeadPolicy {
    /// `RTT/2 + jitter_factor * RTT deviation + buffer_ticks`, all measured from traffic.
    Fixed {
        /// Ticks of input kept buffered at the server beyond the estimated one-way delay.
        buffer_ticks: f64,
        /// Multiple of the RTT mean deviation added as a jitter margin.
        jitter_factor: f64,
    },
}

impl Default for LeadPolicy {
    fn default() -> Self {
        LeadPolicy::Fixed {
            buffer_ticks: 2.0,
            jitter_factor: 1.0,
        }
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
    /// Dilation per tick of error: how quickly small errors are corrected.
    pub gain: f64,
    /// An error larger than this many ticks is corrected at once: forward by jumping,
    /// backward by pausing the clock (ticks are never repeated).
    pub resync_ticks: f64,
    /// Weight of a new sample in the server-clock offset filter once warmed up.
    pub offset_smoothing: f64,
}

impl Default for SyncConfig {
    fn default() -> Self {
        Self {
            lead: LeadPolicy::default(),
            max_dilation: 0.1,
            gain: 0.05,
            resync_ticks: 8.0,
            offset_smoothing: 0.05,
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
    samples: u64,
}

impl ClockSync {
    /// A synchroniser for a server ticking at `rate`.
    pub fn new(rate: TickRate, config: SyncConfig) -> Self {
        Self {
            rate,
            config,
            offset_secs: None,
            samples: 0,
        }
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

    /// The lead over the server the policy asks for, in ticks.
    pub fn lead_ticks(&self, rtt: &RttEstimator) -> f64 {
        let srtt = rtt.smoothed().unwrap_or_default();
        match self.config.lead {
            LeadPolicy::Fixed {
                buffer_ticks,
                jitter_factor,
            } => {
                let one_way = srtt.as_secs_f64() / 2.0;
                let margin = jitter_factor * rtt.deviation().as_secs_f64() / 2.0;
                (one_way + margin) * f64::from(self.rate.hz()) + buffer_ticks
            }
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
        let error = target - position;
        if error > self.config.resync_ticks {
            ClockAdjust::Jump(target)
        } else if error < -self.config.resync_ticks {
            // Never run backwards (that would repeat ticks whose inputs were sent): stand still.
            ClockAdjust::Run(0.0)
        } else {
            let d = (error * self.config.gain)
                .clamp(-self.config.max_dilation, self.config.max_dilation);
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
        // Lead: 100 ms one way (6.4 ticks) + 50 ms margin (3.2 ticks, deviation=100ms/2) + 2 buffer.
        let lead = s.lead_ticks(&r);
        assert!((lead - (6.4 + 3.2 + 2.0)).abs() < 1e-6, "{lead}");
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
