//! The description of one direction of a link, and its validation.

use std::time::Duration;

use thiserror::Error;

use crate::{Bandwidth, Jitter, Loss, Trace};

/// Everything that shapes one direction of one connection.
///
/// Build one with struct-update syntax on top of [`LinkConfig::default`]
/// (a perfect link) or start from a named [`profile`](crate::profile).
/// See the [crate docs](crate) for the order in which the stages apply.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Base one-way propagation delay.
    pub delay: Duration,
    /// Random variation added to [`delay`](Self::delay) per packet.
    pub jitter: Jitter,
    /// Random packet loss.
    pub loss: Loss,
    /// Probability in `[0, 1]` that a delivered packet is delivered twice.
    pub duplicate_rate: f64,
    /// Probability in `[0, 1]` that a packet is held back by
    /// [`reorder_delay`](Self::reorder_delay) and exempt from FIFO ordering,
    /// so that packets sent after it can overtake it.
    pub reorder_rate: f64,
    /// Extra delay of a reordered packet.
    pub reorder_delay: Duration,
    /// Rate cap with a drop-tail byte queue, if any.
    pub bandwidth: Option<Bandwidth>,
    /// Mahimahi delivery trace, if any, served as Mahimahi serves it (each
    /// opportunity's bytes shared by the waiting packets; the crate docs,
    /// step 4).
    pub trace: Option<Trace>,
    /// Most packets that may wait for a trace delivery opportunity; further
    /// packets are dropped. Only used with [`trace`](Self::trace).
    pub trace_queue_packets: usize,
}

impl Default for LinkConfig {
    /// A perfect link: no delay, jitter, loss, duplication, reordering or
    /// rate limit. `reorder_delay` (30 ms) and `trace_queue_packets` (100)
    /// hold sensible values so that only the rate needs setting to enable
    /// reordering or a trace.
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            jitter: Jitter::None,
            loss: Loss::None,
            duplicate_rate: 0.0,
            reorder_rate: 0.0,
            reorder_delay: Duration::from_millis(30),
            bandwidth: None,
            trace: None,
            trace_queue_packets: 100,
        }
    }
}

impl LinkConfig {
    /// Checks that every probability is a finite number in `[0, 1]` and that
    /// rate limits and queues are non-zero.
    ///
    /// [`Link::new`](crate::Link::new) calls this, so a [`Link`](crate::Link)
    /// never runs with an invalid configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_probability("duplicate_rate", self.duplicate_rate)?;
        check_probability("reorder_rate", self.reorder_rate)?;
        self.loss.validate()?;
        if let Some(bandwidth) = &self.bandwidth {
            bandwidth.validate()?;
        }
        if self.trace.is_some() && self.trace_queue_packets == 0 {
            return Err(ConfigError::ZeroTraceQueue);
        }
        Ok(())
    }
}

/// Why a [`LinkConfig`] was rejected.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    /// A probability is NaN, infinite, or outside `[0, 1]`.
    #[error("`{field}` must be a probability in [0, 1], got {value}")]
    ProbabilityOutOfRange {
        /// Name of the offending field, e.g. `"loss.rate"`.
        field: &'static str,
        /// The rejected value.
        value: f64,
    },
    /// [`Bandwidth::kbps`] is zero, which would never deliver anything.
    #[error("bandwidth.kbps must be greater than 0")]
    ZeroBandwidth,
    /// [`Bandwidth::queue_bytes`] is zero, which would drop every packet.
    #[error("bandwidth.queue_bytes must be greater than 0")]
    ZeroQueueBytes,
    /// [`LinkConfig::trace_queue_packets`] is zero while a trace is set,
    /// which would drop every packet.
    #[error("trace_queue_packets must be greater than 0 when a trace is set")]
    ZeroTraceQueue,
}

/// Accepts `value` if it is a probability; NaN fails the range test too.
pub(crate) fn check_probability(field: &'static str, value: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::ProbabilityOutOfRange { field, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GilbertElliott;

    #[test]
    fn default_is_perfect_and_valid() {
        let config = LinkConfig::default();
        assert_eq!(config.delay, Duration::ZERO);
        assert_eq!(config.jitter, Jitter::None);
        assert_eq!(config.loss, Loss::None);
        assert_eq!(config.duplicate_rate, 0.0);
        assert_eq!(config.reorder_rate, 0.0);
        assert_eq!(config.reorder_delay, Duration::from_millis(30));
        assert_eq!(config.bandwidth, None);
        assert_eq!(config.trace, None);
        assert_eq!(config.trace_queue_packets, 100);
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn rejects_bad_rates() {
        for bad in [1.5, -0.1, f64::NAN, f64::INFINITY] {
            let config = LinkConfig {
                duplicate_rate: bad,
                ..LinkConfig::default()
            };
            assert!(
                matches!(
                    config.validate(),
                    Err(ConfigError::ProbabilityOutOfRange {
                        field: "duplicate_rate",
                        ..
                    })
                ),
                "{bad}"
            );
            let config = LinkConfig {
                reorder_rate: bad,
                ..LinkConfig::default()
            };
            assert!(config.validate().is_err(), "{bad}");
            let config = LinkConfig {
                loss: Loss::Uniform { rate: bad },
                ..LinkConfig::default()
            };
            assert!(
                matches!(
                    config.validate(),
                    Err(ConfigError::ProbabilityOutOfRange {
                        field: "loss.rate",
                        ..
                    })
                ),
                "{bad}"
            );
            let config = LinkConfig {
                loss: Loss::GilbertElliott(GilbertElliott {
                    p_good_to_bad: 0.1,
                    p_bad_to_good: 0.5,
                    loss_in_good: 0.0,
                    loss_in_bad: bad,
                }),
                ..LinkConfig::default()
            };
            assert!(config.validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn accepts_boundary_rates() {
        let config = LinkConfig {
            duplicate_rate: 1.0,
            reorder_rate: 0.0,
            loss: Loss::Uniform { rate: 1.0 },
            ..LinkConfig::default()
        };
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn rejects_zero_capacities() {
        let zero_rate = LinkConfig {
            bandwidth: Some(Bandwidth {
                kbps: 0,
                queue_bytes: 10_000,
            }),
            ..LinkConfig::default()
        };
        assert_eq!(zero_rate.validate(), Err(ConfigError::ZeroBandwidth));
        let zero_queue = LinkConfig {
            bandwidth: Some(Bandwidth {
                kbps: 1000,
                queue_bytes: 0,
            }),
            ..LinkConfig::default()
        };
        assert_eq!(zero_queue.validate(), Err(ConfigError::ZeroQueueBytes));
        let trace = Trace::from_opportunities(vec![1]).expect("valid trace");
        let zero_trace_queue = LinkConfig {
            trace: Some(trace),
            trace_queue_packets: 0,
            ..LinkConfig::default()
        };
        assert_eq!(
            zero_trace_queue.validate(),
            Err(ConfigError::ZeroTraceQueue)
        );
        // Without a trace the trace queue limit is irrelevant.
        let no_trace = LinkConfig {
            trace_queue_packets: 0,
            ..LinkConfig::default()
        };
        assert_eq!(no_trace.validate(), Ok(()));
    }

    #[test]
    fn error_messages_name_the_field() {
        let err = ConfigError::ProbabilityOutOfRange {
            field: "reorder_rate",
            value: 1.5,
        };
        assert_eq!(
            err.to_string(),
            "`reorder_rate` must be a probability in [0, 1], got 1.5"
        );
    }
}
