use std::time::Duration;

/// Round-trip time estimator in the style of RFC 6298 (TCP) and QUIC: a smoothed mean, a
/// mean deviation, and the minimum seen.
///
/// Samples come from the traffic itself: the client stamps its messages with its local
/// time, the server echoes the newest stamp together with how long it held it, and the
/// client subtracts the hold time.
#[derive(Debug, Clone, Default)]
pub struct RttEstimator {
    smoothed: Option<Duration>,
    variance: Duration,
    min: Option<Duration>,
    latest: Option<Duration>,
    samples: u64,
}

impl RttEstimator {
    /// A fresh estimator with no samples.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one round-trip sample.
    pub fn add_sample(&mut self, rtt: Duration) {
        self.samples += 1;
        self.latest = Some(rtt);
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
        match self.smoothed {
            None => {
                // RFC 6298 seeds the deviation with RTT/2 to keep retransmit timers safe; we
                // use it for a lead margin, where that would overshoot by half an RTT. The
                // deviation builds up within a few samples on a jittery link.
                self.smoothed = Some(rtt);
                self.variance = Duration::ZERO;
            }
            Some(srtt) => {
                // Gains 1/4 and 1/8 as in RFC 6298: the deviation tracks jitter, the mean
                // follows route changes within a few dozen samples.
                let dev = srtt.abs_diff(rtt);
                self.variance = (self.variance * 3 + dev) / 4;
                self.smoothed = Some((srtt * 7 + rtt) / 8);
            }
        }
    }

    /// Smoothed RTT, if any sample has arrived.
    pub fn smoothed(&self) -> Option<Duration> {
        self.smoothed
    }

    /// Mean deviation of the RTT (a jitter measure).
    pub fn deviation(&self) -> Duration {
        self.variance
    }

    /// Smallest RTT seen.
    pub fn min(&self) -> Option<Duration> {
        self.min
    }

    /// Most recent sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// Number of samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_to_the_mean_and_tracks_deviation() {
        let mut e = RttEstimator::new();
        assert_eq!(e.smoothed(), None);
        for i in 0..200 {
            let jitter = if i % 2 == 0 { 10 } else { 0 };
            e.add_sample(Duration::from_millis(195 + jitter));
        }
        let s = e.smoothed().unwrap().as_secs_f64() * 1000.0;
        assert!((s - 200.0).abs() < 3.0, "{s}");
        let d = e.deviation().as_secs_f64() * 1000.0;
        assert!((3.0..=7.0).contains(&d), "{d}");
        let mut one = RttEstimator::new();
        one.add_sample(Duration::from_millis(80));
        assert_eq!(one.deviation(), Duration::ZERO);
        assert_eq!(e.min(), Some(Duration::from_millis(195)));
    }
}
