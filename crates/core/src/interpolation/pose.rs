//! A ready-made rigid-body sample: position, orientation and optional velocities.

use super::Interpolate;
use crate::quat::{IDENTITY, mul, normalize, slerp};

/// The visual state of a rigid body, as a snapshot carries it.
///
/// * Position blends linearly, or as a cubic Hermite curve when both ends carry a linear
///   velocity (Fiedler's "Snapshot Interpolation": Hermite removes the corners linear interpolation cuts at each
///   snapshot).
/// * Rotation (a unit quaternion `[x, y, z, w]`) uses spherical interpolation along the
///   shorter arc; results are normalised.
/// * Extrapolation integrates the velocities (world-space linear velocity in units per
///   second, world-space angular velocity in radians per second). The buffer bounds how
///   long it extrapolates: rigid bodies do not move in straight lines for long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pose {
    /// Position.
    pub position: [f32; 3],
    /// Orientation, a unit quaternion `[x, y, z, w]`.
    pub rotation: [f32; 4],
    /// Linear velocity, units per second, if the snapshot carries it.
    pub linear_velocity: Option<[f32; 3]>,
    /// Angular velocity in world space, radians per second, if the snapshot carries it.
    pub angular_velocity: Option<[f32; 3]>,
}

impl Default for Pose {
    fn default() -> Self {
        Self::new([0.0; 3], IDENTITY)
    }
}

impl Pose {
    /// A pose without velocities.
    pub fn new(position: [f32; 3], rotation: [f32; 4]) -> Self {
        Self {
            position,
            rotation,
            linear_velocity: None,
            angular_velocity: None,
        }
    }

    /// A 2D pose: `position` in the plane z = 0, turned `angle` radians about z. The
    /// smoother, the interpolation buffer and the replication layer then treat 2D games
    /// like 3D ones; [`Pose::planar_position`] and [`Pose::heading`] read it back.
    pub fn planar(position: [f32; 2], angle: f32) -> Self {
        let (s, c) = (angle / 2.0).sin_cos();
        Self::new([position[0], position[1], 0.0], [0.0, 0.0, s, c])
    }

    /// The position in the plane z = 0.
    pub fn planar_position(&self) -> [f32; 2] {
        [self.position[0], self.position[1]]
    }

    /// The heading about z, radians in `(-π, π]` (for a pose turned about z only).
    pub fn heading(&self) -> f32 {
        use std::f32::consts::{PI, TAU};
        let a = 2.0 * self.rotation[2].atan2(self.rotation[3]);
        if a > PI {
            a - TAU
        } else if a <= -PI {
            a + TAU
        } else {
            a
        }
    }

    /// This pose with the given velocities.
    #[must_use]
    pub fn with_velocity(self, linear: [f32; 3], angular: [f32; 3]) -> Self {
        Self {
            linear_velocity: Some(linear),
            angular_velocity: Some(angular),
            ..self
        }
    }
}

impl Interpolate for Pose {
    fn lerp(a: &Self, b: &Self, t: f32) -> Self {
        Self {
            position: lerp3(a.position, b.position, t),
            rotation: slerp(a.rotation, b.rotation, t),
            linear_velocity: lerp_opt(a.linear_velocity, b.linear_velocity, t),
            angular_velocity: lerp_opt(a.angular_velocity, b.angular_velocity, t),
        }
    }

    /// Cubic Hermite on position with the linear velocities as tangents (scaled by
    /// `dt_secs`); the velocity returned is the curve's derivative. Rotation is slerped.
    /// Falls back to [`lerp`](Interpolate::lerp) without velocities or with a
    /// non-positive `dt_secs`.
    fn hermite(a: &Self, b: &Self, t: f32, dt_secs: f32) -> Self {
        let (Some(va), Some(vb)) = (a.linear_velocity, b.linear_velocity) else {
            return Self::lerp(a, b, t);
        };
        // `!(x > 0)` also catches NaN.
        if !(dt_secs > 0.0 && dt_secs.is_finite()) {
            return Self::lerp(a, b, t);
        }
        let (t2, t3) = (t * t, t * t * t);
        let h00 = 2.0 * t3 - 3.0 * t2 + 1.0;
        let h10 = t3 - 2.0 * t2 + t;
        let h01 = -2.0 * t3 + 3.0 * t2;
        let h11 = t3 - t2;
        // Derivatives with respect to t.
        let d00 = 6.0 * t2 - 6.0 * t;
        let d10 = 3.0 * t2 - 4.0 * t + 1.0;
        let d01 = -d00;
        let d11 = 3.0 * t2 - 2.0 * t;
        let (p0, p1) = (a.position, b.position);
        let mut position = [0.0; 3];
        let mut velocity = [0.0; 3];
        for i in 0..3 {
            let (m0, m1) = (va[i] * dt_secs, vb[i] * dt_secs);
            position[i] = h00 * p0[i] + h10 * m0 + h01 * p1[i] + h11 * m1;
            velocity[i] = (d00 * p0[i] + d10 * m0 + d01 * p1[i] + d11 * m1) / dt_secs;
        }
        Self {
            position,
            rotation: slerp(a.rotation, b.rotation, t),
            linear_velocity: Some(velocity),
            angular_velocity: lerp_opt(a.angular_velocity, b.angular_velocity, t),
        }
    }

    /// Moves the position along the linear velocity and turns the rotation about the
    /// angular velocity, both held constant. Without velocities the pose is held.
    fn extrapolate(a: &Self, dt_secs: f32) -> Self {
        let mut out = *a;
        if let Some(v) = a.linear_velocity {
            for (p, v) in out.position.iter_mut().zip(v) {
                *p += v * dt_secs;
            }
        }
        if let Some(w) = a.angular_velocity {
            let angle = len3(w) * dt_secs;
            if angle.is_finite() && angle != 0.0 {
                let s = (angle * 0.5).sin() / len3(w);
                let delta = [w[0] * s, w[1] * s, w[2] * s, (angle * 0.5).cos()];
                out.rotation = normalize(mul(delta, a.rotation));
            }
        }
        out
    }
}

fn lerp3(a: [f32; 3], b: [f32; 3], t: f32) -> [f32; 3] {
    [
        a[0] + (b[0] - a[0]) * t,
        a[1] + (b[1] - a[1]) * t,
        a[2] + (b[2] - a[2]) * t,
    ]
}

fn lerp_opt(a: Option<[f32; 3]>, b: Option<[f32; 3]>, t: f32) -> Option<[f32; 3]> {
    match (a, b) {
        (Some(a), Some(b)) => Some(lerp3(a, b, t)),
        (_, b) => b,
    }
}

fn len3(v: [f32; 3]) -> f32 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quat::tests::{close4, yaw};

    #[test]
    fn extrapolation_integrates_velocities() {
        let p =
            Pose::new([1.0, 0.0, 0.0], IDENTITY).with_velocity([2.0, 0.0, 0.0], [0.0, 1.0, 0.0]);
        let e = Pose::extrapolate(&p, 0.5);
        assert!((e.position[0] - 2.0).abs() < 1e-6);
        assert!(close4(e.rotation, yaw(0.5)));
        // Without velocities the pose is held.
        let still = Pose::new([1.0, 2.0, 3.0], yaw(0.2));
        assert_eq!(Pose::extrapolate(&still, 1.0), still);
    }

    #[test]
    fn hermite_without_velocity_is_lerp() {
        let a = Pose::new([0.0; 3], IDENTITY);
        let b = Pose::new([2.0, 0.0, 0.0], yaw(1.0));
        assert_eq!(Pose::hermite(&a, &b, 0.25, 0.1), Pose::lerp(&a, &b, 0.25));
        let av = a.with_velocity([1.0; 3], [0.0; 3]);
        let bv = b.with_velocity([1.0; 3], [0.0; 3]);
        assert_eq!(
            Pose::hermite(&av, &bv, 0.25, 0.0),
            Pose::lerp(&av, &bv, 0.25)
        );
        assert_eq!(
            Pose::hermite(&av, &bv, 0.25, f32::NAN),
            Pose::lerp(&av, &bv, 0.25)
        );
    }
}
