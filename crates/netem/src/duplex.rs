//! Both directions of one connection.

use crate::config::{ConfigError, LinkConfig};
use crate::link::Link;
use crate::outage::{Direction, Outage};
use crate::seed::derive_seed;

/// Both directions of one client's connection.
#[derive(Debug, Clone)]
pub struct Duplex {
    /// Client → server.
    pub up: Link,
    /// Server → client.
    pub down: Link,
}

impl Duplex {
    /// Creates both directions; each gets its own random stream derived
    /// from `seed` (streams 0 for up and 1 for down), so their fates are
    /// independent even with identical configs.
    pub fn new(up: LinkConfig, down: LinkConfig, seed: u64) -> Result<Duplex, ConfigError> {
        Ok(Duplex {
            up: Link::new(up, derive_seed(seed, 0))?,
            down: Link::new(down, derive_seed(seed, 1))?,
        })
    }

    /// Both directions with the same config, e.g. a named
    /// [`profile`](crate::profile).
    pub fn symmetric(config: LinkConfig, seed: u64) -> Result<Duplex, ConfigError> {
        Self::new(config.clone(), config, seed)
    }

    /// Adds `outage` to the directions `direction` names.
    pub fn add_outage(&mut self, outage: Outage, direction: Direction) {
        if direction.up() {
            self.up.add_outage(outage);
        }
        if direction.down() {
            self.down.add_outage(outage);
        }
    }

    /// Switches both directions to new configs (see [`Link::reconfigure`]). Both are
    /// checked first, so an invalid one leaves the connection unchanged.
    pub fn reconfigure(&mut self, up: LinkConfig, down: LinkConfig) -> Result<(), ConfigError> {
        up.validate()?;
        down.validate()?;
        self.up.reconfigure(up)?;
        self.down.reconfigure(down)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Loss;
    use std::time::Duration;

    fn survivors(link: &mut Link) -> Vec<u16> {
        for i in 0..1000u16 {
            link.send(Duration::ZERO, i.to_le_bytes().to_vec());
        }
        std::iter::from_fn(|| link.poll(Duration::ZERO))
            .map(|p| u16::from_le_bytes([p[0], p[1]]))
            .collect()
    }

    #[test]
    fn directions_are_independent_and_reproducible() {
        let config = LinkConfig {
            loss: Loss::Uniform { rate: 0.5 },
            ..LinkConfig::default()
        };
        let mut a = Duplex::symmetric(config.clone(), 11).expect("valid");
        let mut b = Duplex::symmetric(config, 11).expect("valid");
        let up = survivors(&mut a.up);
        let down = survivors(&mut a.down);
        assert_ne!(up, down, "up and down use different streams");
        assert_eq!(up, survivors(&mut b.up));
        assert_eq!(down, survivors(&mut b.down));
    }

    #[test]
    fn rejects_invalid_direction() {
        let bad = LinkConfig {
            reorder_rate: 2.0,
            ..LinkConfig::default()
        };
        assert!(Duplex::new(LinkConfig::default(), bad.clone(), 0).is_err());
        assert!(Duplex::new(bad, LinkConfig::default(), 0).is_err());
    }

    #[test]
    fn reconfiguring_checks_both_directions_first() {
        let calm = LinkConfig::default();
        let mut duplex = Duplex::symmetric(calm.clone(), 3).expect("valid");
        let lossy = LinkConfig {
            loss: Loss::Uniform { rate: 1.0 },
            ..LinkConfig::default()
        };
        let bad = LinkConfig {
            reorder_rate: -1.0,
            ..LinkConfig::default()
        };
        assert!(duplex.reconfigure(lossy.clone(), bad).is_err());
        assert_eq!(duplex.up.config(), &calm, "nothing changed");
        duplex.reconfigure(calm.clone(), lossy).expect("valid");
        assert!(!survivors(&mut duplex.up).is_empty());
        assert!(survivors(&mut duplex.down).is_empty());
    }
}
