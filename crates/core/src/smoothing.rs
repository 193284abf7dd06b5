//! Correction smoothing (as in the Unity physics prediction article): the physics body is
//! corrected at once, and a render-only offset hides the jump and decays.
//!
//! The article decays the error by a factor of 0.9 per frame, which makes the correction
//! speed depend on the frame rate. Here the offset has a *half-life* in seconds, so it
//! decays the same way at 30, 60 or 144 fps. An error larger than the snap distance
//! (2 m by default) is not smoothed: the body is shown where it is.
//!
//! Positions are `[f32; 3]` and rotations unit quaternions `[x, y, z, w]`, so the core
//! needs no math library.

use crate::interpolation::Pose;
use crate::quat::{mul, normalize};
use std::time::Duration;

/// Smoothing settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SmoothingConfig {
    /// Time for the offset to halve. The article's 0.9 per frame at 60 fps is a half-life
    /// of about 110 ms. Zero disables smoothing: corrections show at once.
    pub half_life: Duration,
    /// Position errors longer than this (metres) snap instead of being smoothed.
    pub snap_distance: f32,
}

impl Default for SmoothingConfig {
    fn default() -> Self {
        Self {
            half_life: Duration::from_millis(110),
            snap_distance: 2.0,
        }
    }
}

/// A render offset for one body.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorSmoother {
    config: SmoothingConfig,
    offset: [f32; 3],
    rotation: [f32; 4],
    snaps: u64,
}

const IDENTITY: [f32; 4] = [0.0, 0.0, 0.0, 1.0];

impl ErrorSmoother {
    /// No offset.
    pub fn new(config: SmoothingConfig) -> Self {
        Self {
            config,
            offset: [0.0; 3],
            rotation: IDENTITY,
            snaps: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &SmoothingConfig {
        &self.config
    }

    /// Corrections that exceeded the snap distance.
    pub fn snaps(&self) -> u64 {
        self.snaps
    }

    /// The current position offset.
    pub fn offset(&self) -> [f32; 3] {
        self.offset
    }

    /// Records a correction: the body's simulated pose moved from `old` to `new` without
    /// moving in the world, so the offset takes up the difference and the rendered pose
    /// stays where it was. Non-finite input is ignored.
    pub fn correct(
        &mut self,
        old_position: [f32; 3],
        old_rotation: [f32; 4],
        new_position: [f32; 3],
        new_rotation: [f32; 4],
    ) {
        let all = old_position
            .iter()
            .chain(&old_rotation)
            .chain(&new_position)
            .chain(&new_rotation);
        if !all.into_iter().all(|v| v.is_finite()) {
            return;
        }
        if self.config.half_life.is_zero() {
            return;
        }
        let offset = [0, 1, 2].map(|i| self.offset[i] + old_position[i] - new_position[i]);
        if length(offset) > self.config.snap_distance {
            self.offset = [0.0; 3];
            self.rotation = IDENTITY;
            self.snaps += 1;
            return;
        }
        self.offset = offset;
        // rendered_rotation = offset * simulated: keep it where it was.
        let rendered = mul(self.rotation, old_rotation);
        self.rotation = normalize(mul(rendered, conjugate(new_rotation)));
    }

    /// Decays the offset over `elapsed` (call once per rendered frame).
    pub fn decay(&mut self, elapsed: Duration) {
        if self.config.half_life.is_zero() {
            self.offset = [0.0; 3];
            self.rotation = IDENTITY;
            return;
        }
        let keep = 0.5f64.powf(elapsed.as_secs_f64() / self.config.half_life.as_secs_f64()) as f32;
        self.offset = self.offset.map(|v| v * keep);
        self.rotation = nlerp(IDENTITY, self.rotation, keep);
    }

    /// The pose to render for a body simulated at `position` / `rotation`.
    pub fn apply(&self, position: [f32; 3], rotation: [f32; 4]) -> ([f32; 3], [f32; 4]) {
        let p = [0, 1, 2].map(|i| position[i] + self.offset[i]);
        (p, normalize(mul(self.rotation, rotation)))
    }
}

impl ErrorSmoother {
    /// [`ErrorSmoother::correct`] for a 2D body: a position in the plane and a heading in
    /// radians (about the axis out of the plane).
    pub fn correct_planar(
        &mut self,
        old_position: [f32; 2],
        old_angle: f32,
        new_position: [f32; 2],
        new_angle: f32,
    ) {
        self.correct(
            [old_position[0], old_position[1], 0.0],
            Pose::planar([0.0; 2], old_angle).rotation,
            [new_position[0], new_position[1], 0.0],
            Pose::planar([0.0; 2], new_angle).rotation,
        );
    }

    /// [`ErrorSmoother::apply`] for a 2D body: the position and heading to render.
    pub fn apply_planar(&self, position: [f32; 2], angle: f32) -> ([f32; 2], f32) {
        let shown = Pose::planar(position, angle);
        let (position, rotation) = self.apply(shown.position, shown.rotation);
        let shown = Pose::new(position, rotation);
        (shown.planar_position(), shown.heading())
    }
}

fn length(v: [f32; 3]) -> f32 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

fn conjugate(q: [f32; 4]) -> [f32; 4] {
    [-q[0], -q[1], -q[2], q[3]]
}

/// Normalised linear interpolation along the shorter arc: close enough to slerp for the
/// small angles a correction offset covers, and cheaper.
fn nlerp(a: [f32; 4], b: [f32; 4], t: f32) -> [f32; 4] {
    let dot: f32 = (0..4).map(|i| a[i] * b[i]).sum();
    let sign = if dot < 0.0 { -1.0 } else { 1.0 };
    normalize([0, 1, 2, 3].map(|i| a[i] + (sign * b[i] - a[i]) * t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaw(rad: f32) -> [f32; 4] {
        [0.0, (rad / 2.0).sin(), 0.0, (rad / 2.0).cos()]
    }

    #[test]
    fn correction_keeps_the_rendered_pose_then_decays_by_half_life() {
        let mut s = ErrorSmoother::new(SmoothingConfig::default());
        let (old_p, new_p) = ([1.0, 0.0, 0.0], [1.5, 0.0, 0.0]);
        s.correct(old_p, yaw(0.2), new_p, yaw(0.0));
        let (p, q) = s.apply(new_p, yaw(0.0));
        assert!((p[0] - 1.0).abs() < 1e-6);
        assert!((q[1] - yaw(0.2)[1]).abs() < 1e-5);
        // One half-life later, half the offset remains, however the time is sliced.
        let mut coarse = s.clone();
        coarse.decay(Duration::from_millis(110));
        for _ in 0..11 {
            s.decay(Duration::from_millis(10));
        }
        assert!((s.offset()[0] + 0.25).abs() < 1e-4, "{:?}", s.offset());
        assert!((coarse.offset()[0] - s.offset()[0]).abs() < 1e-5);
    }

    #[test]
    fn planar_corrections_keep_the_rendered_position_and_heading() {
        let mut s = ErrorSmoother::new(SmoothingConfig::default());
        s.correct_planar([1.0, 2.0], 0.5, [1.3, 1.8], 0.7);
        let (p, a) = s.apply_planar([1.3, 1.8], 0.7);
        assert!((p[0] - 1.0).abs() < 1e-5 && (p[1] - 2.0).abs() < 1e-5);
        assert!((a - 0.5).abs() < 1e-4, "heading {a}");
        s.decay(Duration::from_millis(110));
        let (p, a) = s.apply_planar([1.3, 1.8], 0.7);
        assert!(
            (p[0] - 1.15).abs() < 1e-3 && (a - 0.6).abs() < 1e-2,
            "{p:?} {a}"
        );
    }

    #[test]
    fn large_errors_snap() {
        let mut s = ErrorSmoother::new(SmoothingConfig::default());
        s.correct([0.0; 3], IDENTITY, [3.0, 0.0, 0.0], IDENTITY);
        assert_eq!(s.offset(), [0.0; 3]);
        assert_eq!(s.snaps(), 1);
        // Errors accumulate: two 1.2 m corrections in a row exceed 2 m and snap.
        s.correct([0.0; 3], IDENTITY, [1.2, 0.0, 0.0], IDENTITY);
        assert_eq!(s.snaps(), 1);
        s.correct([0.0; 3], IDENTITY, [1.2, 0.0, 0.0], IDENTITY);
        assert_eq!(s.snaps(), 2);
    }

    proptest::proptest! {
        /// Whatever corrections arrive: a correction that does not snap leaves the rendered
        /// body where it was; decay then moves it by at most the offset, which never
        /// exceeds the snap distance; a snap leaves no offset at all. So smoothing never
        /// moves the rendered body further than the snap distance in one tick.
        #[test]
        fn smoothing_moves_at_most_the_snap_distance(
            steps in proptest::collection::vec((-3.0f32..3.0, -3.0f32..3.0, 0u64..40, proptest::bool::ANY), 1..200)
        ) {
            let mut s = ErrorSmoother::new(SmoothingConfig::default());
            let snap = s.config().snap_distance;
            let mut sim = [0.0f32; 3];
            for (dx, dz, ms, correct) in steps {
                if correct {
                    let rendered_before = s.apply(sim, IDENTITY).0;
                    let snaps = s.snaps();
                    let new = [sim[0] + dx, sim[1], sim[2] + dz];
                    s.correct(sim, IDENTITY, new, IDENTITY);
                    sim = new;
                    let rendered = s.apply(sim, IDENTITY).0;
                    if s.snaps() == snaps {
                        let moved = length([0, 1, 2].map(|i| rendered[i] - rendered_before[i]));
                        proptest::prop_assert!(moved < 1e-4, "a smoothed correction moved {moved}");
                    } else {
                        proptest::prop_assert_eq!(s.offset(), [0.0; 3]);
                    }
                }
                let before = s.apply(sim, IDENTITY).0;
                s.decay(Duration::from_millis(ms));
                let after = s.apply(sim, IDENTITY).0;
                proptest::prop_assert!(length(s.offset()) <= snap + 1e-5);
                let moved = length([0, 1, 2].map(|i| after[i] - before[i]));
                proptest::prop_assert!(moved <= snap + 1e-5, "decay moved {moved}");
            }
        }
    }

    #[test]
    fn disabled_and_garbage() {
        let mut s = ErrorSmoother::new(SmoothingConfig {
            half_life: Duration::ZERO,
            ..SmoothingConfig::default()
        });
        s.correct([0.0; 3], IDENTITY, [0.5, 0.0, 0.0], IDENTITY);
        assert_eq!(s.apply([0.5, 0.0, 0.0], IDENTITY).0, [0.5, 0.0, 0.0]);
        let mut s = ErrorSmoother::new(SmoothingConfig::default());
        s.correct([f32::NAN; 3], IDENTITY, [0.5, 0.0, 0.0], IDENTITY);
        assert_eq!(s.offset(), [0.0; 3]);
    }
}
