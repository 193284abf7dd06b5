//! Per-packet random variation of the propagation delay.

use std::time::Duration;

use rand::Rng;
use rand_distr::StandardNormal;

/// Random offset added to the base delay of each packet.
///
/// The total propagation delay (base delay + offset) is clamped at zero, so
/// a large negative offset never delivers a packet before it was sent. With
/// a normal distribution whose standard deviation is a sizeable fraction of
/// the base delay this clamp slightly raises the mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Jitter {
    /// Every packet gets exactly the base delay.
    #[default]
    None,
    /// Normally distributed offset with mean zero.
    Normal {
        /// Standard deviation of the offset.
        std_dev: Duration,
    },
    /// Offset uniformly distributed in `[-max, +max]`.
    Uniform {
        /// Largest offset in either direction.
        max: Duration,
    },
}

impl Jitter {
    /// Draws one offset in nanoseconds (may be negative).
    pub(crate) fn sample_nanos(&self, rng: &mut impl Rng) -> i128 {
        match self {
            Jitter::None => 0,
            Jitter::Normal { std_dev } => {
                let z: f64 = rng.sample(StandardNormal);
                // `as` saturates on overflow, which is the behaviour we want.
                (z * std_dev.as_nanos() as f64).round() as i128
            }
            Jitter::Uniform { max } => {
                // Integer sampling keeps the result exact and platform-independent.
                let max = i64::try_from(max.as_nanos()).unwrap_or(i64::MAX);
                i128::from(rng.random_range(-max..=max))
            }
        }
    }
}

/// `start + delay + offset`, with `delay + offset` clamped at zero.
pub(crate) fn apply_delay(start: Duration, delay: Duration, offset_nanos: i128) -> Duration {
    let total = (delay.as_nanos() as i128)
        .saturating_add(offset_nanos)
        .max(0);
    let total = u64::try_from(total).unwrap_or(u64::MAX);
    start.saturating_add(Duration::from_nanos(total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn none_is_zero() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert_eq!(Jitter::None.sample_nanos(&mut rng), 0);
    }

    #[test]
    fn uniform_stays_in_bounds() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let jitter = Jitter::Uniform {
            max: Duration::from_nanos(5),
        };
        let mut seen = [false; 11];
        for _ in 0..1000 {
            let offset = jitter.sample_nanos(&mut rng);
            assert!((-5..=5).contains(&offset), "{offset}");
            seen[(offset + 5) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "every value in [-5, 5] occurs");
    }

    #[test]
    fn zero_uniform_is_zero() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let jitter = Jitter::Uniform {
            max: Duration::ZERO,
        };
        assert_eq!(jitter.sample_nanos(&mut rng), 0);
    }

    #[test]
    fn apply_delay_clamps_at_zero() {
        let start = Duration::from_millis(100);
        let delay = Duration::from_millis(10);
        assert_eq!(apply_delay(start, delay, -20_000_000), start);
        assert_eq!(
            apply_delay(start, delay, 5_000_000),
            Duration::from_millis(115)
        );
        assert_eq!(apply_delay(Duration::MAX, delay, 0), Duration::MAX);
    }
}
