//! The scenes `lagless run --scene` knows, each a [`LabScene`](crate::scene::LabScene) in
//! its own file. A new scene is one file here and one line in [`SCENES`] and
//! [`run_named`], and one in `crate::view::Viewer::start` to be viewable in the browser.

mod cubes;
mod rocket;
mod shooter;
mod walkers;

pub use cubes::{CubeSetup, Cubes, Scripted};
pub use rocket::{Chase, Rocket, RocketSeen, RocketSetup};
pub use shooter::{Shooter, ShooterBot, ShooterSetup};
pub use walkers::{MAX_WALKERS, WalkerScripted, WalkerSetup, Walkers};

use crate::config::RunConfig;
use crate::runner::{RunError, RunOutcome, run_scene};

/// Scene names, the default first.
pub const SCENES: &[&str] = &["cubes", "rocket", "walkers", "shooter"];

/// Runs the scene `config.scene` names.
pub fn run_named(
    config: &RunConfig,
    progress: &mut dyn FnMut(f64),
) -> Result<RunOutcome, RunError> {
    match config.scene.as_str() {
        "cubes" => run_scene::<Cubes>(config, progress),
        "rocket" => run_scene::<Rocket>(config, progress),
        "walkers" => run_scene::<Walkers>(config, progress),
        "shooter" => run_scene::<Shooter>(config, progress),
        other => Err(RunError::UnknownScene(other.to_owned())),
    }
}
