//! Smallest-three quaternion encoding with exact, canonical round trips.

use crate::{BitReader, BitWriter, WireError};

/// Smallest-three quaternion codec: 2 bits name the largest-magnitude component, which
/// is dropped, and the other three are sent in `bits_per_component` bits each.
///
/// Quaternions are `[x, y, z, w]`. The encoder normalizes its input and negates it if
/// needed so the dropped component is positive (`q` and `-q` are the same rotation); the
/// other three then lie in `[-1/sqrt(2), 1/sqrt(2)]`, quantized to `2^b - 1` levels with
/// zero exact (so the identity is exact and quarter turns about an axis survive). The
/// decoder rebuilds the dropped component as `sqrt(1 - a^2 - b^2 - c^2)` and normalizes.
///
/// Every accepted encoding is canonical: the decoder rejects the unused top level and
/// any encoding whose dropped component would not be the largest, and the encoder only
/// produces canonical ones (in a near-tie it nudges a component one step toward zero),
/// so decode -> encode gives back identical bits.
///
/// Rotation error (angle between the input and decoded rotations), measured over 30 000
/// uniform random rotations plus 30 000 near the worst case, where all four components
/// are about 1/2 (`measure_quaternion_error` in `tests/quant_roundtrip.rs`):
///
/// | bits per component | bits per quaternion | max error | mean error (uniform) |
/// |--------------------|---------------------|-----------|----------------------|
/// | 9                  | 29                  | 0.53°     | 0.17°                |
/// | 10 (default)       | 32                  | 0.27°     | 0.085°               |
/// | 11                 | 35                  | 0.13°     | 0.042°               |
///
/// The analytic worst case is `2 * sqrt(12) * h` radians for a half step
/// `h = 1 / (2 * sqrt(2) * (2^(b-1) - 1))` (0.55° at 9 bits), halving with each extra bit.
///
/// ```
/// use lagless_wire::{BitReader, BitWriter, QuatCodec};
///
/// let codec = QuatCodec::default();
/// let q = [0.1, -0.7, 0.2, 0.68];
/// let mut w = BitWriter::new();
/// codec.write(&mut w, q);
/// assert_eq!(w.bit_len(), 32);
/// let bytes = w.into_bytes();
/// let got = codec.read(&mut BitReader::new(&bytes)).unwrap();
/// assert_eq!(got, codec.quantize_quat(q));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuatCodec {
    bits_per_component: u32,
}

impl Default for QuatCodec {
    /// [`QuatCodec::DEFAULT_BITS`] bits per component.
    fn default() -> Self {
        Self::new(Self::DEFAULT_BITS)
    }
}

/// Largest magnitude of a non-dropped component, 1/sqrt(2).
const QUAT_RANGE: f64 = std::f64::consts::FRAC_1_SQRT_2;

impl QuatCodec {
    /// Default bits per component: 10, so a quaternion is 32 bits.
    pub const DEFAULT_BITS: u32 = 10;

    /// A codec sending `bits_per_component` bits for each of the three smallest components.
    ///
    /// # Panics
    /// Unless `2 <= bits_per_component <= 16` (API misuse).
    pub const fn new(bits_per_component: u32) -> Self {
        assert!(
            bits_per_component >= 2 && bits_per_component <= 16,
            "QuatCodec: bits_per_component must be 2..=16"
        );
        Self { bits_per_component }
    }

    /// Bits for each of the three sent components.
    pub const fn bits_per_component(&self) -> u32 {
        self.bits_per_component
    }

    /// Bits per quaternion: `2 + 3 * bits_per_component`.
    pub const fn bits(&self) -> u32 {
        2 + 3 * self.bits_per_component
    }

    /// Largest component index; index `center()` is zero.
    const fn top(&self) -> u32 {
        (1 << self.bits_per_component) - 2
    }

    const fn center(&self) -> u32 {
        self.top() / 2
    }

    fn step(&self) -> f64 {
        QUAT_RANGE / f64::from(self.center())
    }

    fn component(&self, i: u32) -> f64 {
        (f64::from(i) - f64::from(self.center())) * self.step()
    }

    fn component_index(&self, v: f64) -> u32 {
        let t = (v / self.step()).round() + f64::from(self.center());
        // Saturating `as`; clamp to the top level.
        (t as u32).min(self.top())
    }

    /// Packs `q` into the low [`bits`](Self::bits) bits of a u64: the dropped index in
    /// bits 0..2, then the three other components in order, `bits_per_component` each.
    /// A non-finite or zero quaternion is sent as the identity.
    pub fn pack(&self, q: [f32; 4]) -> u64 {
        let (k, mut idx) = self.encode_parts(q);
        // Only a near-tie between the two largest components can make the dropped one
        // come out smaller than a sent one; nudge the largest sent component toward zero
        // until the encoding is canonical. All-zero is always canonical, so this ends.
        while self.decode_parts(k, idx).is_none() {
            let mut worst = 0;
            for j in 1..3 {
                if idx[j].abs_diff(self.center()) > idx[worst].abs_diff(self.center()) {
                    worst = j;
                }
            }
            if idx[worst] > self.center() {
                idx[worst] -= 1;
            } else {
                idx[worst] += 1;
            }
        }
        self.join(k as u64, idx)
    }

    /// The fields of a packed pattern: the dropped component's index (0..4) and the three
    /// sent component levels. No validation: [`QuatCodec::unpack`] checks a pattern.
    /// Delta encoders use this to send level differences.
    pub fn split(&self, packed: u64) -> (u64, [u32; 3]) {
        let b = self.bits_per_component;
        let mask = (1u64 << b) - 1;
        let level = |i: u32| ((packed >> (2 + i * b)) & mask) as u32;
        (packed & 3, [level(0), level(1), level(2)])
    }

    /// Packs fields as [`QuatCodec::split`] returns them; `dropped` and each level are
    /// masked to their widths.
    pub fn join(&self, dropped: u64, levels: [u32; 3]) -> u64 {
        let b = self.bits_per_component;
        let mask = (1u64 << b) - 1;
        (dropped & 3)
            | (u64::from(levels[0]) & mask) << 2
            | (u64::from(levels[1]) & mask) << (2 + b)
            | (u64::from(levels[2]) & mask) << (2 + 2 * b)
    }

    /// Unpacks a value made by [`QuatCodec::pack`]; rejects set bits above
    /// [`bits`](Self::bits), the unused top level, and non-canonical encodings.
    pub fn unpack(&self, packed: u64) -> Result<[f32; 4], WireError> {
        if packed >> self.bits() != 0 {
            return Err(WireError::Invalid {
                what: "quaternion bits",
            });
        }
        let (k, idx) = self.split(packed);
        self.decode_parts(k as usize, idx)
            .ok_or(WireError::Invalid {
                what: "quaternion encoding",
            })
    }

    /// `q` as a receiver decodes it: normalized, sign-canonical (largest component
    /// positive) and snapped to the grid. Idempotent, so a server can keep its rotations
    /// quantized and simulate on exactly what clients see.
    pub fn quantize_quat(&self, q: [f32; 4]) -> [f32; 4] {
        let k = self.pack(q);
        // `pack` only returns canonical encodings, which always unpack.
        self.unpack(k).unwrap_or([0.0, 0.0, 0.0, 1.0])
    }

    /// Appends `q` in [`bits`](Self::bits) bits.
    pub fn write(&self, w: &mut BitWriter, q: [f32; 4]) {
        w.write_bits_u64(self.pack(q), self.bits());
    }

    /// Reads a quaternion written by [`QuatCodec::write`]: unit length, largest
    /// component positive.
    pub fn read(&self, r: &mut BitReader<'_>) -> Result<[f32; 4], WireError> {
        let packed = r.read_bits_u64(self.bits())?;
        self.unpack(packed)
    }

    /// Dropped index and the three sent component indices, before canonical fix-up.
    fn encode_parts(&self, q: [f32; 4]) -> (usize, [u32; 3]) {
        let mut v = q.map(f64::from);
        let norm = v.iter().map(|c| c * c).sum::<f64>().sqrt();
        if !norm.is_finite() || norm < 1e-12 {
            v = [0.0, 0.0, 0.0, 1.0];
        } else {
            v = v.map(|c| c / norm);
        }
        let k = largest(&v);
        if v[k] < 0.0 {
            v = v.map(|c| -c);
        }
        let mut idx = [0u32; 3];
        let mut n = 0;
        for (i, c) in v.into_iter().enumerate() {
            if i != k {
                idx[n] = self.component_index(c);
                n += 1;
            }
        }
        (k, idx)
    }

    /// The quaternion an encoding stands for, or `None` if it is invalid or not canonical.
    fn decode_parts(&self, k: usize, idx: [u32; 3]) -> Option<[f32; 4]> {
        if idx.iter().any(|&i| i > self.top()) {
            return None;
        }
        let sent = idx.map(|i| self.component(i));
        let sum: f64 = sent.iter().map(|c| c * c).sum();
        if sum > 1.0 {
            return None;
        }
        let mut v = [0.0f64; 4];
        let mut n = 0;
        for (i, c) in v.iter_mut().enumerate() {
            if i == k {
                *c = (1.0 - sum).sqrt();
            } else {
                *c = sent[n];
                n += 1;
            }
        }
        let norm = v.iter().map(|c| c * c).sum::<f64>().sqrt();
        let q = v.map(|c| (c / norm) as f32);
        // Canonical: re-encoding must drop the same component, judged on the f32 output
        // a re-encoder would see.
        (largest(&q.map(f64::from)) == k).then_some(q)
    }
}

/// Index of the largest-magnitude component; the first one on ties.
fn largest(v: &[f64; 4]) -> usize {
    let mut k = 0;
    for i in 1..4 {
        if v[i].abs() > v[k].abs() {
            k = i;
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rotation angle in degrees between two unit quaternions.
    fn angle_deg(a: [f32; 4], b: [f32; 4]) -> f64 {
        let na = a.iter().map(|&c| f64::from(c).powi(2)).sum::<f64>().sqrt();
        let nb = b.iter().map(|&c| f64::from(c).powi(2)).sum::<f64>().sqrt();
        let dot: f64 = a
            .iter()
            .zip(b)
            .map(|(&x, y)| f64::from(x) * f64::from(y))
            .sum::<f64>()
            / (na * nb);
        (2.0 * dot.abs().min(1.0).acos()).to_degrees()
    }

    #[test]
    fn quaternion_layout_and_exact_values() {
        let c = QuatCodec::default();
        assert_eq!(c.bits(), 32);
        assert_eq!(QuatCodec::new(9).bits(), 29);
        let identity = [0.0, 0.0, 0.0, 1.0];
        assert_eq!(c.quantize_quat(identity), identity);
        // -identity is the same rotation; the largest component comes out positive.
        assert_eq!(c.quantize_quat([0.0, 0.0, 0.0, -1.0]), identity);
        assert_eq!(c.pack(identity) & 3, 3);
        // Zero and non-finite input are sent as the identity rather than panicking.
        assert_eq!(c.quantize_quat([0.0; 4]), identity);
        assert_eq!(c.quantize_quat([f32::NAN, 0.0, 0.0, 1.0]), identity);
        // A quarter turn about Y: exact components survive (w and y tie; x..z first wins).
        let h = std::f32::consts::FRAC_1_SQRT_2;
        let q = c.quantize_quat([0.0, h, 0.0, h]);
        assert!(angle_deg(q, [0.0, h, 0.0, h]) < 1e-3);
        assert_eq!(c.quantize_quat(q), q);
    }

    #[test]
    fn invalid_quaternion_data_is_rejected() {
        let c = QuatCodec::new(9);
        // Unused top level (511) in the first component.
        assert!(c.unpack(3 | 511 << 2).is_err());
        // Bits above the 29 used.
        assert!(c.unpack(1 << 29).is_err());
        // All three sent components at +1/sqrt(2): dropped one would be 0, not largest.
        let top = u64::from(c.top());
        assert!(c.unpack(top << 2 | top << 11 | top << 20).is_err());
        // Centre everywhere is the identity for any dropped index.
        let centre = u64::from(c.center());
        let all_centre = centre << 2 | centre << 11 | centre << 20;
        for k in 0..4u64 {
            let q = c.unpack(all_centre | k).unwrap();
            assert_eq!(q[k as usize], 1.0);
        }
    }

    #[test]
    fn near_ties_still_encode_canonically() {
        // Two equal largest components that quantization rounds upward.
        for bits in [2, 3, 4, 9, 10, 11, 16] {
            let c = QuatCodec::new(bits);
            for m in [
                0.5f32,
                0.55,
                0.6,
                0.65,
                0.7,
                0.705,
                std::f32::consts::FRAC_1_SQRT_2,
            ] {
                let rest = (1.0 - 2.0 * m * m).max(0.0).sqrt();
                for q in [
                    [m, m, rest, 0.0],
                    [m, 0.0, -m, rest],
                    [rest * 0.5, -m, rest * 0.866, m],
                ] {
                    let packed = c.pack(q);
                    let got = c.unpack(packed).unwrap();
                    assert_eq!(c.pack(got), packed, "bits {bits} q {q:?}");
                }
            }
        }
    }
}
