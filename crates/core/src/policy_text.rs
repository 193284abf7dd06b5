//! The text forms of the two policies a game or a tool picks by name: the client's lead
//! ([`LeadPolicy`]: `adaptive`, `adaptive:0.5%`, `fixed:3`, `lightyear`, `unity`) and the
//! interpolation delay ([`DelayPolicy`]: `fixed:3`, `adaptive`, `adaptive:1%`). Parsing
//! and printing round-trip, so a configuration file, a command line and a report all use
//! the same spelling.

use crate::interpolation::DelayPolicy;
use crate::sync::LeadPolicy;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use thiserror::Error;

/// Why a policy's text did not parse; the message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct PolicyParseError(pub String);

impl FromStr for LeadPolicy {
    type Err = PolicyParseError;

    /// `felt` (the starvation share of least felt cost, 0.1-10%), `felt:MAX%` (at most
    /// MAX), `adaptive` (0.5% starvation target), `adaptive:P%` (or `adaptive:P`), `fixed:N` (N
    /// ticks beyond RTT/2, no jitter margin), and the peers' rules `lightyear` and
    /// `unity`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let bad = |why: &str| PolicyParseError(format!("input buffer {text:?}: {why}"));
        match text.split_once(':') {
            None => match text {
                "adaptive" => Ok(LeadPolicy::ADAPTIVE),
                "felt" => Ok(LeadPolicy::FELT),
                "lightyear" => Ok(LeadPolicy::LIGHTYEAR),
                "unity" => Ok(LeadPolicy::CommandAge),
                _ => Err(bad(
                    "expected felt, felt:MAX%, adaptive, adaptive:P%, fixed:N, lightyear or unity",
                )),
            },
            Some(("adaptive", pct)) => {
                let pct: f64 = pct
                    .trim()
                    .trim_end_matches('%')
                    .parse()
                    .map_err(|_| bad("the target is a percentage, e.g. adaptive:0.5%"))?;
                if !(pct > 0.0 && pct <= 50.0) {
                    return Err(bad("the target must be in (0, 50] percent"));
                }
                Ok(LeadPolicy::Adaptive {
                    starvation: pct / 100.0,
                })
            }
            Some(("felt", pct)) => {
                let pct: f64 = pct
                    .trim()
                    .trim_end_matches('%')
                    .parse()
                    .map_err(|_| bad("the largest share is a percentage, e.g. felt:5%"))?;
                if !(0.1..=50.0).contains(&pct) {
                    return Err(bad("the largest share must be in [0.1, 50] percent"));
                }
                Ok(LeadPolicy::Felt {
                    min_starvation: 0.001,
                    max_starvation: pct / 100.0,
                })
            }
            Some(("fixed", n)) => {
                let n: f64 = n
                    .trim()
                    .parse()
                    .map_err(|_| bad("fixed:N wants a number of ticks"))?;
                if !(0.0..=1000.0).contains(&n) {
                    return Err(bad("the buffer must be 0..=1000 ticks"));
                }
                Ok(LeadPolicy::fixed(n))
            }
            Some(_) => Err(bad(
                "expected felt, felt:MAX%, adaptive, adaptive:P%, fixed:N, lightyear or unity",
            )),
        }
    }
}

impl fmt::Display for LeadPolicy {
    /// A short label, as the command line spells it where it can.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LeadPolicy::Adaptive { starvation } => write!(f, "adaptive:{}%", starvation * 100.0),
            LeadPolicy::FELT => f.write_str("felt"),
            LeadPolicy::Felt {
                min_starvation,
                max_starvation,
            } => write!(
                f,
                "felt:{}-{}%",
                min_starvation * 100.0,
                max_starvation * 100.0
            ),
            LeadPolicy::Fixed {
                buffer_ticks,
                jitter_factor: 0.0,
            } => write!(f, "fixed:{buffer_ticks}"),
            LeadPolicy::Fixed {
                buffer_ticks,
                jitter_factor,
            } => write!(f, "fixed:{buffer_ticks}+{jitter_factor}dev"),
            LeadPolicy::PingOnly { .. } if *self == LeadPolicy::LIGHTYEAR => {
                f.write_str("lightyear")
            }
            LeadPolicy::PingOnly {
                buffer_ticks,
                jitter_factor,
            } => write!(f, "ping:{buffer_ticks}+{jitter_factor}jit"),
            LeadPolicy::CommandAge => f.write_str("unity"),
        }
    }
}

impl FromStr for DelayPolicy {
    type Err = PolicyParseError;

    /// `fixed:N` (N send intervals), `fixed` (three), `adaptive` (the default target) or
    /// `adaptive:P` (P percent of frames allowed to underrun, with or without a `%`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let (name, arg) = match text.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (text, None),
        };
        let number = |a: &str, what: &str| -> Result<f32, PolicyParseError> {
            let v: f32 = a
                .trim_end_matches('%')
                .parse()
                .map_err(|_| PolicyParseError(format!("{what} in {text:?} is not a number")))?;
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(PolicyParseError(format!(
                    "{what} in {text:?} must be a non-negative number"
                )))
            }
        };
        match (name, arg) {
            ("fixed", Some(a)) => {
                let intervals = number(a, "the interval count")?;
                if intervals > 100.0 {
                    return Err(PolicyParseError(format!("{text:?}: at most 100 intervals")));
                }
                Ok(DelayPolicy::Fixed { intervals })
            }
            ("fixed", None) => Ok(DelayPolicy::CLASSIC),
            ("adaptive", None) => Ok(DelayPolicy::adaptive()),
            ("felt", None) => Ok(DelayPolicy::felt()),
            ("felt", Some(a)) => {
                let pct = number(a, "the largest underrun share")?;
                if pct > 100.0 {
                    return Err(PolicyParseError(format!(
                        "{text:?}: the largest underrun share is a percentage"
                    )));
                }
                Ok(DelayPolicy::Felt {
                    max_underrun: pct / 100.0,
                    max_delay: Duration::from_millis(500),
                })
            }
            ("adaptive", Some(a)) => {
                let pct = number(a, "the underrun target")?;
                if pct > 100.0 {
                    return Err(PolicyParseError(format!(
                        "{text:?}: the underrun target is a percentage"
                    )));
                }
                Ok(DelayPolicy::adaptive_with_target(pct / 100.0))
            }
            _ => Err(PolicyParseError(format!(
                "unknown interpolation policy {text:?} (expected fixed:N, felt, felt:MAX%, adaptive or adaptive:P%)"
            ))),
        }
    }
}

impl fmt::Display for DelayPolicy {
    /// As the command line spells it (`fixed:3`, `adaptive:1%`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DelayPolicy::Fixed { intervals } => write!(f, "fixed:{intervals}"),
            DelayPolicy::Adaptive {
                target_underrun, ..
            } => {
                // Through f64 and rounded, so 0.05% prints as typed, not as 0.049999997%.
                let pct = (f64::from(target_underrun) * 1e6).round() / 1e4;
                write!(f, "adaptive:{pct}%")
            }
            DelayPolicy::Felt { max_underrun, .. } => {
                let pct = (f64::from(max_underrun) * 1e6).round() / 1e4;
                write!(f, "felt:{pct}%")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_print_as_they_parse() {
        for text in ["adaptive:0.5%", "fixed:3", "lightyear", "unity"] {
            let p: LeadPolicy = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(p.to_string(), text);
        }
        for text in ["fixed:3", "adaptive:0.05%", "adaptive:1%"] {
            let p: DelayPolicy = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(p.to_string(), text);
        }
        for bad in [
            "",
            "adaptive:x",
            "adaptive:80%",
            "fixed:-1",
            "fixed:2000",
            "warp",
        ] {
            assert!(bad.parse::<LeadPolicy>().is_err(), "{bad:?}");
        }
        for bad in [
            "fixed:x",
            "fixed:101",
            "adaptive:101",
            "adaptive:-1",
            "warp",
        ] {
            assert!(bad.parse::<DelayPolicy>().is_err(), "{bad:?}");
        }
    }
}
