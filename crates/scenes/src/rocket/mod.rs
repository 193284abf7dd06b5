//! The car-and-ball scene (Rocket League style; "Unity network sync from scratch, part 8:
//! predicting server-owned physics objects", here "the Unity ball article").
//!
//! A closed arena (floor, four walls, ceiling), one box car per player driven by forces
//! (throttle, turn torque, jump, boost) and a bouncy ball the server owns, which only cars
//! move. Every body's state is position, rotation, linear and angular velocity (as in the
//! Unity ball article), snapped after each step to the grid snapshots carry, so a client
//! that loads a snapshot holds exactly what the server simulates on.
//!
//! * [`RocketScene`]: the world, stepped by the server and, per client, by prediction.
//! * [`replicate`]: its declaration on the replication layer.
//! * [`predict`]: the client's predicted world ([`predict::RocketRollback`]), with a
//!   per-entity policy: the ball and the remote cars predicted or interpolated.
//! * [`script`]: a driver that chases the ball and hits it from varied angles.
//!
//! ```
//! use lagless_scenes::rocket::{CarInput, RocketConfig, RocketScene};
//!
//! let mut scene = RocketScene::new(RocketConfig::default());
//! scene.add_car(1);
//! let start = scene.car_state(1).unwrap();
//! for _ in 0..64 {
//!     scene.step(&[(1, CarInput::FORWARD)]);
//! }
//! // Car 1 starts at the +z end facing the middle.
//! assert!(scene.car_state(1).unwrap().position.z < start.position.z - 3.0);
//! ```

mod config;
mod input;
pub mod predict;
pub mod replicate;
mod scene;
pub mod script;

pub use config::RocketConfig;
pub use input::{CarInput, Controls};
pub use scene::{CONTACT_MARGIN, PlayerId, RocketScene, ball_spawn, car_spawn, car_touches_ball};
