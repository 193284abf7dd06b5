//! Deterministic simulations ("scenes") that lagless synchronises over the network.
//!
//! [`cubes`]: a player cube pushing around a grid of 900 physics cubes;
//! [`rocket`]: cars and a ball in an arena, the ball owned by the server;
//! [`walkers`]: walking characters on a level with obstacles (dead reckoning);
//! [`shooter`]: a top-down 2D shooter on rapier2d and hecs (lag compensation, predicted
//! projectiles, cosmetic-first hits, partial simulation).
//!
//! A scene steps only when told to, one fixed tick at a time, so the same starting state and inputs always give the same result.
//!
//! ```
//! use lagless_scenes::cubes::{CubeInput, CubeScene, CubeSceneConfig};
//!
//! let mut scene = CubeScene::new(CubeSceneConfig::default());
//! scene.add_player(0);
//! let start = scene.player_state(0).unwrap();
//! for _ in 0..64 {
//!     scene.step(&[(0, CubeInput::FORWARD)]);
//! }
//! let end = scene.player_state(0).unwrap();
//! assert!(end.position.z < start.position.z - 1.0, "W moves toward -Z");
//! ```

#![deny(missing_docs)]

/// A player, as scenes number them: 1, 2, ... (client `k` of a run drives player `k + 1`).
///
/// Every `u32` is a valid id nonetheless, `0` and `u32::MAX` included: the scenes, their spawn
/// points and their snapshot codecs accept the whole range.
pub type PlayerId = u32;

pub mod cubes;
pub mod rocket;
pub mod shooter;
pub mod walkers;
