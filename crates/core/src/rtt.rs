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

/// The largest sample that enters the mean as it is: twice the smoothed RTT, four
/// deviations or 50 ms above it, whichever is largest.
fn outlier_bound(srtt: Duration, deviation: Duration) -> Duration {
    (srtt * 2)
        .max(srtt + deviation * 4)
        .max(srtt + Duration::from_millis(50))
}

impl RttEstimator {
    /// A fresh estimator with no samples.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one round-trip sample. A sample more than twice the smoothed RTT, four
    /// deviations above it and 50 ms above it enters the mean and deviation as the
    /// largest of those three bounds (it still counts for [`min`](Self::min) and
    /// [`latest`](Self::latest)).
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
                // One absurd sample (a corrupt or forged echo) must not drag the mean by
                // seconds: a sample beyond the outlier bound counts as the bound. A real
                // rise is still followed, by at least an eighth of the bound's margin per
                // sample, so a route change is caught up within a few dozen samples.
                let rtt = rtt.min(outlier_bound(srtt, self.variance));
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
    fn an_absurd_sample_barely_moves_the_mean_but_a_real_rise_is_followed() {
        let ms = Duration::from_millis;
        let mut e = RttEstimator::new();
        for _ in 0..20 {
            e.add_sample(ms(40));
        }
        e.add_sample(Duration::from_secs(10));
        // At most an eighth of the 50 ms margin: 6.25 ms, not 1.25 s.
        assert!(e.smoothed().unwrap() <= ms(47), "{:?}", e.smoothed());
        assert_eq!(e.latest(), Some(Duration::from_secs(10)));
        // A route that really got slower, 40 -> 300 ms, is followed within 40 samples.
        for _ in 0..40 {
            e.add_sample(ms(300));
        }
        assert!(e.smoothed().unwrap() >= ms(280), "{:?}", e.smoothed());
    }

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
