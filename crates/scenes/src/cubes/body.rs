//! The full dynamic state of one rigid body, in the scene's own terms.

use glam::{Quat, Vec3};
use rapier3d::prelude::{Pose, RigidBody};

/// Full rigid-body state: everything the solver integrates for a body.
///
/// Velocities are in world space (m/s and rad/s). This is what a snapshot
/// carries per body; sleeping is tracked separately (see
/// [`CubeScene::cube_awake`](super::CubeScene::cube_awake)).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BodyState {
    /// Centre of the body, metres.
    pub position: Vec3,
    /// Orientation; expected to be a unit quaternion.
    pub rotation: Quat,
    /// Linear velocity, m/s.
    pub linvel: Vec3,
    /// Angular velocity about the centre, rad/s, world axes.
    pub angvel: Vec3,
}

impl BodyState {
    /// Reads the state out of a rapier body.
    pub(crate) fn of(body: &RigidBody) -> BodyState {
        let pose = body.position();
        BodyState {
            position: pose.translation,
            rotation: pose.rotation,
            linvel: body.linvel(),
            angvel: body.angvel(),
        }
    }

    /// The pose rapier wants. A quaternion that drifted from unit length (for
    /// example after lossy network compression) is renormalised, but a unit one
    /// is passed through untouched so that `set` followed by `get` is exact.
    pub(crate) fn pose(&self) -> Pose {
        let len2 = self.rotation.length_squared();
        let rotation = if (len2 - 1.0).abs() > 1e-5 {
            self.rotation.normalize()
        } else {
            self.rotation
        };
        Pose::from_parts(self.position, rotation)
    }

    /// Whether every component is finite and the rotation usable; a state that
    /// fails this would poison the whole simulation, so the scene ignores it.
    pub fn is_finite(&self) -> bool {
        self.position.is_finite()
            && self.rotation.is_finite()
            && self.rotation.length_squared() > 1e-6
            && self.linvel.is_finite()
            && self.angvel.is_finite()
    }
}
