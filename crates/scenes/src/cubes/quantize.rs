//! Quantized body state: what a snapshot can say exactly.
//!
//! The server snaps every *player* to this grid after each step
//! ([`CubeSceneConfig::quantize`] turns it on), and client-side prediction's scene does
//! the same. A client therefore decodes exactly the player state the server simulates on,
//! so quantizing players never triggers a rollback (Fiedler's "Snapshot
//! Compression": quantize on both sides).
//!
//! Cubes are not snapped: the server simulates them in full `f32` precision (snapping a
//! resting cube every tick keeps rapier from ever putting it to sleep), so they are
//! quantized on the wire only. A client decodes them within the quantization error of the
//! server's state, and prediction compares cubes with tolerances above that error
//! ([`Tolerances`]) so it does not cost a rollback either.
//!
//! [`CubeSceneConfig::quantize`]: super::CubeSceneConfig::quantize
//! [`Tolerances`]: super::predict::Tolerances

use super::BodyState;
use glam::{Quat, Vec3};
use lagless_wire::{QuatCodec, dequantize_f32, quantize_f32};

/// Resolutions and limits of the quantized state.
///
/// Resolutions are powers of two, so every grid value is an exact `f32` and snapping is
/// idempotent. Codes outside a limit are clamped to it. For players, which the scene snaps
/// after every step, that holds a player flung beyond ±`position_limit` or faster than a
/// velocity limit at the limit. Cubes are not snapped: one beyond a limit keeps its real
/// state on the server while snapshots carry the clamped one. The scene's kill plane
/// ([`CubeSceneConfig::kill_height`]) returns bodies that fall off the ground before a fall
/// gets there.
///
/// [`CubeSceneConfig::kill_height`]: super::CubeSceneConfig::kill_height
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateQuantization {
    /// Position step is `2^-position_shift` m (9: 1/512 m, at most 0.98 mm off).
    pub position_shift: u32,
    /// Largest |coordinate|, m.
    pub position_limit: u32,
    /// Linear velocity step is `2^-linvel_shift` m/s (6: 1/64 m/s; over a 0.3 s replay
    /// the rounding moves a body at most 2.3 mm, well inside prediction's cube tolerance).
    pub linvel_shift: u32,
    /// Largest |linear velocity component|, m/s.
    pub linvel_limit: u32,
    /// Angular velocity step is `2^-angvel_shift` rad/s.
    pub angvel_shift: u32,
    /// Largest |angular velocity component|, rad/s.
    pub angvel_limit: u32,
    /// Bits per smallest-three component (11: 35 bits, at most 0.13° off).
    pub rotation_bits: u32,
}

impl Default for StateQuantization {
    fn default() -> Self {
        Self {
            position_shift: 9,
            position_limit: 2048,
            linvel_shift: 6,
            linvel_limit: 64,
            angvel_shift: 6,
            angvel_limit: 64,
            rotation_bits: 11,
        }
    }
}

/// A body state as integers: positions and velocities in steps of their resolution, the
/// rotation as a packed smallest-three pattern ([`QuatCodec::pack`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct BodyCodes {
    /// Position, in position steps.
    pub position: [i32; 3],
    /// Packed rotation.
    pub rotation: u64,
    /// Linear velocity, in its steps.
    pub linvel: [i32; 3],
    /// Angular velocity, in its steps.
    pub angvel: [i32; 3],
}

impl StateQuantization {
    /// Position resolution, m.
    pub fn position_resolution(&self) -> f32 {
        step(self.position_shift)
    }

    /// Largest error snapping adds to a coordinate, m.
    pub fn position_max_error(&self) -> f32 {
        self.position_resolution() * 0.5
    }

    /// The rotation codec.
    pub fn rotation_codec(&self) -> QuatCodec {
        QuatCodec::new(self.rotation_bits.clamp(2, 16))
    }

    /// Largest position code in magnitude.
    pub fn position_code_limit(&self) -> i32 {
        code_limit(self.position_limit, self.position_shift)
    }

    /// Largest linear velocity code in magnitude.
    pub fn linvel_code_limit(&self) -> i32 {
        code_limit(self.linvel_limit, self.linvel_shift)
    }

    /// Largest angular velocity code in magnitude.
    pub fn angvel_code_limit(&self) -> i32 {
        code_limit(self.angvel_limit, self.angvel_shift)
    }

    /// True when every code this quantization produces, and every difference of two, fits
    /// the codecs (|code| < 2^29), and grid values are exact `f32`s (below 2^24 steps).
    pub fn is_valid(&self) -> bool {
        let fits =
            |limit: u32, shift: u32| shift <= 16 && u64::from(limit.max(1)) << shift < 1 << 24;
        fits(self.position_limit, self.position_shift)
            && fits(self.linvel_limit, self.linvel_shift)
            && fits(self.angvel_limit, self.angvel_shift)
            && (2..=16).contains(&self.rotation_bits)
    }

    /// The codes of `state` (clamped to the limits).
    pub fn encode(&self, state: &BodyState) -> BodyCodes {
        let codec = self.rotation_codec();
        let r = state.rotation;
        BodyCodes {
            position: vec_codes(
                state.position,
                self.position_shift,
                self.position_code_limit(),
            ),
            rotation: codec.pack([r.x, r.y, r.z, r.w]),
            linvel: vec_codes(state.linvel, self.linvel_shift, self.linvel_code_limit()),
            angvel: vec_codes(state.angvel, self.angvel_shift, self.angvel_code_limit()),
        }
    }

    /// The state `codes` stand for. An invalid rotation pattern (which
    /// [`Self::codes_valid`] rules out) decodes as the identity.
    pub fn decode(&self, codes: &BodyCodes) -> BodyState {
        let [x, y, z, w] = self
            .rotation_codec()
            .unpack(codes.rotation)
            .unwrap_or([0.0, 0.0, 0.0, 1.0]);
        BodyState {
            position: vec_value(codes.position, self.position_shift),
            rotation: Quat::from_xyzw(x, y, z, w),
            linvel: vec_value(codes.linvel, self.linvel_shift),
            angvel: vec_value(codes.angvel, self.angvel_shift),
        }
    }

    /// True when `codes` could have come from [`Self::encode`]: within the limits, with a
    /// canonical rotation pattern. Decoders check this on everything from the network.
    pub fn codes_valid(&self, codes: &BodyCodes) -> bool {
        let within = |v: [i32; 3], limit: i32| v.iter().all(|c| c.abs() <= limit);
        within(codes.position, self.position_code_limit())
            && within(codes.linvel, self.linvel_code_limit())
            && within(codes.angvel, self.angvel_code_limit())
            && self.rotation_codec().unpack(codes.rotation).is_ok()
    }

    /// `state` snapped to the grid: `decode(encode(state))`.
    pub fn snap(&self, state: &BodyState) -> BodyState {
        self.decode(&self.encode(state))
    }

    /// The codes of the identity rotation, the rotation of a zero [`BodyCodes`] baseline.
    pub fn identity_rotation(&self) -> u64 {
        self.rotation_codec().pack([0.0, 0.0, 0.0, 1.0])
    }
}

fn step(shift: u32) -> f32 {
    1.0 / (1u64 << shift.min(31)) as f32
}

fn code_limit(limit: u32, shift: u32) -> i32 {
    let codes = u64::from(limit) << shift.min(31);
    // Below 2^29, so the difference of two codes zig-zags into 31 bits.
    codes.min((1 << 29) - 1) as i32
}

fn vec_codes(v: Vec3, shift: u32, limit: i32) -> [i32; 3] {
    let res = step(shift);
    [v.x, v.y, v.z].map(|c| quantize_f32(c, res).clamp(-limit, limit))
}

fn vec_value(c: [i32; 3], shift: u32) -> Vec3 {
    let res = step(shift);
    Vec3::from(c.map(|q| dequantize_f32(q, res)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> BodyState {
        BodyState {
            position: Vec3::new(1.2345, 0.4999, -17.0001),
            rotation: Quat::from_euler(glam::EulerRot::XYZ, 0.3, -1.1, 2.0),
            linvel: Vec3::new(3.21, -9.81, 0.001),
            angvel: Vec3::new(-0.7, 12.5, 0.0),
        }
    }

    #[test]
    fn snapping_is_idempotent_and_close() {
        let q = StateQuantization::default();
        assert!(q.is_valid());
        let s = state();
        let snapped = q.snap(&s);
        assert_eq!(q.snap(&snapped), snapped);
        assert_eq!(q.encode(&snapped), q.encode(&s));
        assert!((snapped.position - s.position).abs().max_element() <= q.position_max_error());
        let linvel_step = 1.0 / (1u32 << q.linvel_shift) as f32;
        assert!((snapped.linvel - s.linvel).abs().max_element() <= linvel_step * 0.5);
        let angle = snapped.rotation.angle_between(s.rotation).to_degrees();
        assert!(angle < 0.14, "{angle}°");
        assert!(q.codes_valid(&q.encode(&s)));
    }

    #[test]
    fn limits_clamp_and_invalid_codes_are_caught() {
        let q = StateQuantization::default();
        let mut s = state();
        s.position.y = -1e9;
        s.linvel.x = 1e4;
        let codes = q.encode(&s);
        assert_eq!(codes.position[1], -q.position_code_limit());
        assert_eq!(q.decode(&codes).linvel.x, q.linvel_limit as f32);
        let mut bad = codes;
        bad.position[0] = q.position_code_limit() + 1;
        assert!(!q.codes_valid(&bad));
        let mut bad = codes;
        bad.rotation = u64::MAX;
        assert!(!q.codes_valid(&bad));
        let zero = BodyCodes {
            rotation: q.identity_rotation(),
            ..BodyCodes::default()
        };
        assert!(q.codes_valid(&zero));
        assert_eq!(q.decode(&zero).rotation, Quat::IDENTITY);
    }

    #[test]
    fn oversized_settings_are_invalid() {
        let q = StateQuantization {
            position_shift: 16,
            position_limit: 4096,
            ..StateQuantization::default()
        };
        assert!(!q.is_valid());
    }
}
