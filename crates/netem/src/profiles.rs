//! Named link profiles for experiments.
//!
//! The numbers are a contract with the lab's figures (docs/metrics.md and the
//! other docs/ pages cite runs on these profiles): change them only together
//! with the documentation that cites them.

use std::time::Duration;

use crate::{GilbertElliott, Jitter, LinkConfig, Loss};

/// Names accepted by [`profile`], from best to worst-ish.
pub const PROFILE_NAMES: &[&str] = &[
    "lan",
    "broadband",
    "wifi",
    "mobile",
    "lossy",
    "awful",
    "snapshot-demo",
];

/// The one-way link config of a named profile (use it for both directions),
/// or `None` for an unknown name. Names are matched exactly.
///
/// | name | delay | jitter | loss | other |
/// |---|---|---|---|---|
/// | `lan` | 1 ms | none | none | |
/// | `broadband` | 20 ms | normal, σ 2 ms | 0.5 % uniform | |
/// | `wifi` | 30 ms | normal, σ 15 ms | 2 % Gilbert-Elliott, bursts of 3 | |
/// | `mobile` | 100 ms | normal, σ 30 ms | 5 % Gilbert-Elliott, bursts of 4 | 1 % reordering |
/// | `lossy` | 75 ms | none | 25 % uniform | |
/// | `awful` | 250 ms | none | 10 % uniform | |
/// | `snapshot-demo` | 50 ms | uniform ±33 ms | 5 % uniform | |
pub fn profile(name: &str) -> Option<LinkConfig> {
    let ms = Duration::from_millis;
    let base = |delay: u64, jitter: Jitter, loss: Loss| LinkConfig {
        delay: ms(delay),
        jitter,
        loss,
        ..LinkConfig::default()
    };
    let normal = |std_dev: u64| Jitter::Normal {
        std_dev: ms(std_dev),
    };
    let uniform = |rate: f64| Loss::Uniform { rate };
    let bursty =
        |mean: f64, burst: f64| Loss::GilbertElliott(GilbertElliott::with_mean_loss(mean, burst));
    let config = match name {
        "lan" => base(1, Jitter::None, Loss::None),
        "broadband" => base(20, normal(2), uniform(0.005)),
        "wifi" => base(30, normal(15), bursty(0.02, 3.0)),
        "mobile" => LinkConfig {
            reorder_rate: 0.01,
            ..base(100, normal(30), bursty(0.05, 4.0))
        },
        "lossy" => base(75, Jitter::None, uniform(0.25)),
        "awful" => base(250, Jitter::None, uniform(0.10)),
        "snapshot-demo" => base(50, Jitter::Uniform { max: ms(33) }, uniform(0.05)),
        _ => return None,
    };
    Some(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn get(name: &str) -> LinkConfig {
        profile(name).unwrap_or_else(|| panic!("profile {name} exists"))
    }

    #[test]
    fn every_name_resolves_and_validates() {
        for name in PROFILE_NAMES {
            let config = get(name);
            assert_eq!(config.validate(), Ok(()), "{name}");
            assert!(crate::Link::new(config, 0).is_ok(), "{name}");
        }
    }

    #[test]
    fn unknown_names_are_none() {
        assert_eq!(profile("nope"), None);
        assert_eq!(profile("LAN"), None);
        assert_eq!(profile(""), None);
    }

    #[test]
    fn numbers_match_the_contract() {
        let lan = get("lan");
        assert_eq!(lan.delay, MS);
        assert_eq!(lan.jitter, Jitter::None);
        assert_eq!(lan.loss, Loss::None);

        let broadband = get("broadband");
        assert_eq!(broadband.delay, 20 * MS);
        assert_eq!(broadband.jitter, Jitter::Normal { std_dev: 2 * MS });
        assert_eq!(broadband.loss, Loss::Uniform { rate: 0.005 });

        let wifi = get("wifi");
        assert_eq!(wifi.delay, 30 * MS);
        assert_eq!(wifi.jitter, Jitter::Normal { std_dev: 15 * MS });
        assert_eq!(
            wifi.loss,
            Loss::GilbertElliott(GilbertElliott::with_mean_loss(0.02, 3.0))
        );
        assert!((wifi.loss.mean_loss() - 0.02).abs() < 1e-12);

        let mobile = get("mobile");
        assert_eq!(mobile.delay, 100 * MS);
        assert_eq!(mobile.jitter, Jitter::Normal { std_dev: 30 * MS });
        assert_eq!(
            mobile.loss,
            Loss::GilbertElliott(GilbertElliott::with_mean_loss(0.05, 4.0))
        );
        assert_eq!(mobile.reorder_rate, 0.01);

        let lossy = get("lossy");
        assert_eq!(lossy.delay, 75 * MS);
        assert_eq!(lossy.jitter, Jitter::None);
        assert_eq!(lossy.loss, Loss::Uniform { rate: 0.25 });

        let awful = get("awful");
        assert_eq!(awful.delay, 250 * MS);
        assert_eq!(awful.jitter, Jitter::None);
        assert_eq!(awful.loss, Loss::Uniform { rate: 0.10 });

        let demo = get("snapshot-demo");
        assert_eq!(demo.delay, 50 * MS);
        assert_eq!(demo.jitter, Jitter::Uniform { max: 33 * MS });
        assert_eq!(demo.loss, Loss::Uniform { rate: 0.05 });

        // Nothing else is switched on by any profile.
        for name in PROFILE_NAMES {
            let config = get(name);
            assert_eq!(config.duplicate_rate, 0.0, "{name}");
            assert_eq!(config.bandwidth, None, "{name}");
            assert_eq!(config.trace, None, "{name}");
            if *name != "mobile" {
                assert_eq!(config.reorder_rate, 0.0, "{name}");
            }
        }
    }
}
