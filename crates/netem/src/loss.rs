//! Random packet loss: independent (uniform) or bursty (Gilbert-Elliott).

use rand::Rng;

use crate::config::{ConfigError, check_probability};

/// How packets are randomly lost.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Loss {
    /// No random loss.
    #[default]
    None,
    /// Every packet is lost independently with probability `rate`.
    Uniform {
        /// Loss probability in `[0, 1]`.
        rate: f64,
    },
    /// Bursty loss from a two-state Markov chain.
    GilbertElliott(GilbertElliott),
}

impl Loss {
    /// Long-run fraction of packets lost.
    pub fn mean_loss(&self) -> f64 {
        match self {
            Loss::None => 0.0,
            Loss::Uniform { rate } => *rate,
            Loss::GilbertElliott(ge) => ge.mean_loss(),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match self {
            Loss::None => Ok(()),
            Loss::Uniform { rate } => check_probability("loss.rate", *rate),
            Loss::GilbertElliott(ge) => {
                check_probability("loss.p_good_to_bad", ge.p_good_to_bad)?;
                check_probability("loss.p_bad_to_good", ge.p_bad_to_good)?;
                check_probability("loss.loss_in_good", ge.loss_in_good)?;
                check_probability("loss.loss_in_bad", ge.loss_in_bad)
            }
        }
    }
}

/// Gilbert-Elliott loss model: a "good" and a "bad" state, each with its own
/// loss probability.
///
/// Per packet the chain first takes one step (good → bad with
/// `p_good_to_bad`, bad → good with `p_bad_to_good`), then the packet is
/// lost with the loss probability of the state it landed in. The chain
/// starts in the good state. Real wireless links lose packets in bursts,
/// which hurts netcode far more than the same rate of isolated losses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GilbertElliott {
    /// Per-packet probability of moving from the good to the bad state.
    pub p_good_to_bad: f64,
    /// Per-packet probability of moving from the bad to the good state.
    pub p_bad_to_good: f64,
    /// Loss probability while in the good state.
    pub loss_in_good: f64,
    /// Loss probability while in the bad state.
    pub loss_in_bad: f64,
}

impl GilbertElliott {
    /// Bursty loss with the given long-run mean loss rate and mean burst
    /// length (in packets); `loss_in_bad = 1`, `loss_in_good = 0`.
    ///
    /// With those loss probabilities a loss burst is exactly a stay in the
    /// bad state, whose length is geometric with mean `1 / p_bad_to_good`.
    /// `mean_burst_len` below 1 is treated as 1. If `mean_loss` exceeds
    /// `mean_burst_len / (1 + mean_burst_len)` the chain cannot reach it
    /// (it would need `p_good_to_bad > 1`), so `p_good_to_bad` saturates at 1
    /// and [`mean_loss`](Self::mean_loss) reports the lower achievable rate.
    /// NaN inputs are kept as NaN so that validation rejects them.
    pub fn with_mean_loss(mean_loss: f64, mean_burst_len: f64) -> Self {
        // Written as a comparison rather than `max` so that NaN survives.
        let burst = if mean_burst_len < 1.0 {
            1.0
        } else {
            mean_burst_len
        };
        let p_bad_to_good = 1.0 / burst;
        // Stationary P(bad) = p_gb / (p_gb + p_bg) = mean_loss, solved for p_gb.
        let p_good_to_bad = (mean_loss * p_bad_to_good / (1.0 - mean_loss)).clamp(0.0, 1.0);
        Self {
            p_good_to_bad,
            p_bad_to_good,
            loss_in_good: 0.0,
            loss_in_bad: 1.0,
        }
    }

    /// Stationary (long-run) loss rate of the chain.
    pub fn mean_loss(&self) -> f64 {
        let leave_rates = self.p_good_to_bad + self.p_bad_to_good;
        if leave_rates == 0.0 {
            // The chain never moves, so it stays in its starting (good) state.
            return self.loss_in_good;
        }
        let p_bad = self.p_good_to_bad / leave_rates;
        (1.0 - p_bad) * self.loss_in_good + p_bad * self.loss_in_bad
    }

    /// Mean number of consecutive packets spent in the bad state.
    pub fn mean_bad_run(&self) -> f64 {
        1.0 / self.p_bad_to_good
    }
}

/// The per-link state a loss model needs between packets.
#[derive(Debug, Clone, Default)]
pub(crate) struct LossProcess {
    in_bad_state: bool,
}

impl LossProcess {
    /// Decides the fate of one packet. Every call consumes the same number
    /// of random numbers for a given model, whatever the outcome, so that
    /// identical seeds keep packet fates aligned.
    pub(crate) fn is_lost(&mut self, loss: &Loss, rng: &mut impl Rng) -> bool {
        match loss {
            Loss::None => false,
            Loss::Uniform { rate } => rng.random::<f64>() < *rate,
            Loss::GilbertElliott(ge) => {
                let step = rng.random::<f64>();
                self.in_bad_state = if self.in_bad_state {
                    step >= ge.p_bad_to_good
                } else {
                    step < ge.p_good_to_bad
                };
                let loss_probability = if self.in_bad_state {
                    ge.loss_in_bad
                } else {
                    ge.loss_in_good
                };
                rng.random::<f64>() < loss_probability
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn with_mean_loss_solves_the_chain() {
        let ge = GilbertElliott::with_mean_loss(0.05, 4.0);
        assert_eq!(ge.loss_in_bad, 1.0);
        assert_eq!(ge.loss_in_good, 0.0);
        assert!((ge.p_bad_to_good - 0.25).abs() < 1e-12);
        assert!((ge.mean_loss() - 0.05).abs() < 1e-12);
        assert!((ge.mean_bad_run() - 4.0).abs() < 1e-12);
        assert_eq!(Loss::GilbertElliott(ge).validate(), Ok(()));
    }

    #[test]
    fn with_mean_loss_edge_cases() {
        let none = GilbertElliott::with_mean_loss(0.0, 3.0);
        assert_eq!(none.p_good_to_bad, 0.0);
        assert_eq!(none.mean_loss(), 0.0);
        // Burst length below one packet is meaningless: treat as one.
        let short = GilbertElliott::with_mean_loss(0.1, 0.2);
        assert_eq!(short.p_bad_to_good, 1.0);
        // Unreachable mean saturates rather than producing an invalid chain.
        let saturated = GilbertElliott::with_mean_loss(0.9, 1.0);
        assert_eq!(saturated.p_good_to_bad, 1.0);
        assert!((saturated.mean_loss() - 0.5).abs() < 1e-12);
        assert_eq!(Loss::GilbertElliott(saturated).validate(), Ok(()));
        // NaN must not be laundered into a valid config.
        let nan = GilbertElliott::with_mean_loss(f64::NAN, 2.0);
        assert!(Loss::GilbertElliott(nan).validate().is_err());
        let nan_burst = GilbertElliott::with_mean_loss(0.1, f64::NAN);
        assert!(Loss::GilbertElliott(nan_burst).validate().is_err());
    }

    #[test]
    fn frozen_chain_mean_is_good_state_loss() {
        let ge = GilbertElliott {
            p_good_to_bad: 0.0,
            p_bad_to_good: 0.0,
            loss_in_good: 0.3,
            loss_in_bad: 1.0,
        };
        assert_eq!(ge.mean_loss(), 0.3);
    }

    #[test]
    fn loss_mean_by_model() {
        assert_eq!(Loss::None.mean_loss(), 0.0);
        assert_eq!(Loss::Uniform { rate: 0.25 }.mean_loss(), 0.25);
    }

    #[test]
    fn extreme_rates_are_exact() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut process = LossProcess::default();
        for _ in 0..1000 {
            assert!(process.is_lost(&Loss::Uniform { rate: 1.0 }, &mut rng));
            assert!(!process.is_lost(&Loss::Uniform { rate: 0.0 }, &mut rng));
            assert!(!process.is_lost(&Loss::None, &mut rng));
        }
    }

    #[test]
    fn bad_state_with_certain_loss_loses_everything() {
        let ge = GilbertElliott {
            p_good_to_bad: 1.0,
            p_bad_to_good: 0.0,
            loss_in_good: 0.0,
            loss_in_bad: 1.0,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut process = LossProcess::default();
        // The chain steps before deciding, so even the first packet is lost.
        for _ in 0..100 {
            assert!(process.is_lost(&Loss::GilbertElliott(ge), &mut rng));
        }
    }
}
