//! The scenes `lagless run --scene` knows, each a [`LabScene`](crate::scene::LabScene) in
//! its own file. A new scene is one file here and one line in [`SCENES`] and in
//! [`with_scene!`](crate::with_scene), the one registry `run`, `view`, `serve`, `connect`
//! and `run --transport udp` all read.

mod cubes;
mod rocket;
mod shooter;
mod walkers;

pub use cubes::{CubeSetup, Cubes, MAX_GRID, Scripted};
pub use rocket::{Chase, Rocket, RocketSeen, RocketSetup};
pub use shooter::{Shooter, ShooterBot, ShooterSetup};
pub use walkers::{MAX_WALKERS, WalkerScripted, WalkerSetup, Walkers};

use crate::config::RunConfig;
use crate::runner::{RunError, RunOutcome, run_scene};

/// Scene names, the default first.
pub const SCENES: &[&str] = &["cubes", "rocket", "walkers", "shooter"];

/// The scene registry: evaluates `$body` with `$S` the scene type the name `$name`
/// names (one of [`SCENES`]), or `$unknown` for any other name.
///
/// ```ignore
/// with_scene!(config.scene.as_str(), S => run_scene::<S>(config, progress), else Err(..))
/// ```
#[macro_export]
macro_rules! with_scene {
    ($name:expr, $S:ident => $body:expr, else $unknown:expr) => {
        match $name {
            "cubes" => {
                type $S = $crate::scenes::Cubes;
                $body
            }
            "rocket" => {
                type $S = $crate::scenes::Rocket;
                $body
            }
            "walkers" => {
                type $S = $crate::scenes::Walkers;
                $body
            }
            "shooter" => {
                type $S = $crate::scenes::Shooter;
                $body
            }
            _ => $unknown,
        }
    };
}

/// Runs the scene `config.scene` names.
pub fn run_named(
    config: &RunConfig,
    progress: &mut dyn FnMut(f64),
) -> Result<RunOutcome, RunError> {
    crate::with_scene!(config.scene.as_str(), S => run_scene::<S>(config, progress),
        else Err(RunError::UnknownScene(config.scene.clone())))
}
