//! The physics cube scene of the "Zen of networked physics" demo.
//!
//! A 200 m ground slab, a 30 × 30 grid of unit cubes centred on the origin,
//! and one 2 m player cube per connected client, driven by forces:
//!
//! * W / S push toward -Z / +Z, A / D toward -X / +X, each with a torque
//!   about the perpendicular horizontal axis so the player tumbles along.
//! * Space jumps (an upward impulse) when the player rests on the ground, a
//!   cube or another player, once per landing.
//! * A body that falls off the ground is put back where it started, at rest, once it is
//!   below [`CubeSceneConfig::kill_height`] (-20 m).
//!
//! Everything is a function of the physics state and the inputs, so replaying
//! the same inputs from the same state is bit-identical. Players spawn just
//! outside the grid; player 0 sits on the +Z side, so W drives it into the grid.

mod body;
mod config;
mod input;
pub mod predict;
pub mod quantize;
pub mod replicate;
mod scene;
pub mod script;
pub mod snapshot;
mod spawn;
mod support;

pub use body::BodyState;
pub use config::CubeSceneConfig;
pub use input::CubeInput;
pub use scene::{CubeScene, PlayerId};
