//! Quantization: floats snapped to a grid and sent as small integers.
//!
//! Every type here has exact round-trip semantics: what a receiver decodes is bit-for-bit
//! the "snapped" value the sender can compute locally (`snap`; for rotations
//! [`QuatCodec::quantize_quat`](crate::QuatCodec::quantize_quat)), and snapping is
//! idempotent, so a server that snaps its state before simulating on it
//! holds exactly what clients decode (no mispredictions from quantization error), and
//! re-encoding a decoded value gives identical bits.
//!
//! All arithmetic is plain IEEE-754 (`f64` add, multiply, divide, square root and
//! round), with no fused or platform-specific operations, so every platform computes the
//! same bits.

use crate::{BitReader, BitWriter, WireError, bits_needed};

/// Grid spacing relative to the largest magnitude in range: at least 2^-21, so that grid
/// points are at least 4 f32 ulps apart and rounding a grid point to f32 never moves it
/// to a neighbouring grid cell (that is what makes snapping idempotent).
const MIN_RELATIVE_RESOLUTION: f64 = 1.0 / (1u64 << 21) as f64;

/// A float in `[min, max]` sent as an integer number of `resolution` steps above `min`.
///
/// * Width: [`bits`](Self::bits) = `ceil(log2(range / resolution + 1))`.
/// * Error: for `v` in `[min, max]`, `|snap(v) - v| <= resolution / 2` (plus half an f32
///   ulp of `v`, from rounding the result to f32). Values outside the range are clamped;
///   NaN snaps to `min`.
/// * Grid: `min + i * resolution` for `i` in `0..=max_index()`. When the range is not a
///   whole number of steps, the top grid point lies up to one step above `max`.
///   A range of exactly `2^k` steps has `2^k + 1` points and needs `k + 1` bits; taking
///   one step off `max` saves that bit (`[-256, 256 - 1/512]` at 1/512 is 18 bits).
///
/// ```
/// use lagless_wire::{BitReader, BitWriter, BoundedFloat};
///
/// const HEIGHT: BoundedFloat = BoundedFloat::new(-16.0, 112.0, 1.0 / 512.0);
/// assert_eq!(HEIGHT.bits(), 17); // 65537 grid points
/// let mut w = BitWriter::new();
/// HEIGHT.write(&mut w, 1.2345);
/// let bytes = w.into_bytes();
/// let got = HEIGHT.read(&mut BitReader::new(&bytes)).unwrap();
/// assert_eq!(got.to_bits(), HEIGHT.snap(1.2345).to_bits());
/// assert!((got - 1.2345).abs() <= HEIGHT.max_error());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundedFloat {
    min: f32,
    max: f32,
    resolution: f32,
    max_index: u32,
}

impl BoundedFloat {
    /// A range `[min, max]` quantized to steps of `resolution`.
    ///
    /// # Panics
    /// Under the conditions where [`BoundedFloat::try_new`] returns `None` (API misuse).
    pub const fn new(min: f32, max: f32, resolution: f32) -> Self {
        match Self::try_new(min, max, resolution) {
            Some(b) => b,
            None => panic!(
                "BoundedFloat: need finite min <= max and resolution >= max(|min|, |max|) * 2^-21"
            ),
        }
    }

    /// A range `[min, max]` quantized to steps of `resolution`, or `None` unless all are
    /// finite, `min <= max`, `resolution > 0` and `resolution >= max(|min|, |max|) * 2^-21`
    /// (finer than that, f32 cannot hold the grid points exactly; at most 23 bits result).
    pub const fn try_new(min: f32, max: f32, resolution: f32) -> Option<Self> {
        if !(min.is_finite() && max.is_finite() && resolution.is_finite()) {
            return None;
        }
        if resolution <= 0.0 || max < min {
            return None;
        }
        let (lo, hi, res) = (min as f64, max as f64, resolution as f64);
        let max_abs = if -lo > hi { -lo } else { hi };
        let max_abs = if max_abs < 0.0 { -max_abs } else { max_abs };
        if res < max_abs * MIN_RELATIVE_RESOLUTION {
            return None;
        }
        // Steps in the range, rounded up; a thousandth of a step of slack absorbs the
        // error of a resolution like 0.01 that f32 cannot hold exactly.
        let steps = (hi - lo) / res - 1e-3;
        let whole = steps as u64; // saturating; negative -> 0
        let max_index = if (whole as f64) < steps {
            whole + 1
        } else {
            whole
        };
        if max_index > (1 << 24) {
            return None;
        }
        Some(Self {
            min,
            max,
            resolution,
            max_index: max_index as u32,
        })
    }

    /// Lower bound.
    pub const fn min(&self) -> f32 {
        self.min
    }

    /// Upper bound as given (the top grid point may lie up to one step above it).
    pub const fn max(&self) -> f32 {
        self.max
    }

    /// Grid spacing.
    pub const fn resolution(&self) -> f32 {
        self.resolution
    }

    /// Largest integer on the wire; the grid has `max_index() + 1` points.
    pub const fn max_index(&self) -> u32 {
        self.max_index
    }

    /// Bits per value: `ceil(log2(max_index() + 1))`.
    pub const fn bits(&self) -> u32 {
        bits_needed(self.max_index as u64)
    }

    /// Largest error for values inside `[min, max]`: half a step (plus half an f32 ulp).
    pub fn max_error(&self) -> f32 {
        self.resolution / 2.0
    }

    /// The grid index nearest `v`, clamped to the range; NaN gives 0.
    pub fn quantize(&self, v: f32) -> u32 {
        let t = ((f64::from(v) - f64::from(self.min)) / f64::from(self.resolution)).round();
        // `as` saturates: negative and NaN become 0.
        (t as u64).min(u64::from(self.max_index)) as u32
    }

    /// The value of grid index `index` (clamped to `max_index()`).
    pub fn dequantize(&self, index: u32) -> f32 {
        let i = index.min(self.max_index);
        (f64::from(self.min) + f64::from(i) * f64::from(self.resolution)) as f32
    }

    /// `v` snapped to the grid: exactly what a receiver decodes after [`BoundedFloat::write`].
    pub fn snap(&self, v: f32) -> f32 {
        self.dequantize(self.quantize(v))
    }

    /// Appends `v` quantized, in [`bits`](Self::bits) bits.
    pub fn write(&self, w: &mut BitWriter, v: f32) {
        w.write_bits(self.quantize(v), self.bits());
    }

    /// Reads a grid index, rejecting indices above `max_index()`.
    pub fn read_index(&self, r: &mut BitReader<'_>) -> Result<u32, WireError> {
        let i = r.read_bits(self.bits())?;
        if i > self.max_index {
            return Err(WireError::Invalid {
                what: "quantized value out of range",
            });
        }
        Ok(i)
    }

    /// Reads a value written by [`BoundedFloat::write`].
    pub fn read(&self, r: &mut BitReader<'_>) -> Result<f32, WireError> {
        Ok(self.dequantize(self.read_index(r)?))
    }

    /// Appends `v` relative to `baseline` (a value the receiver already has): the
    /// difference in grid steps as a [variable-length integer](BitWriter::write_var_i32),
    /// so an unchanged value costs 1 bit and a change of one step 3 bits.
    pub fn write_delta(&self, w: &mut BitWriter, baseline: f32, v: f32) {
        // Both indices are at most 2^24, so the difference fits an i32.
        let d = i64::from(self.quantize(v)) - i64::from(self.quantize(baseline));
        w.write_var_i32(d as i32);
    }

    /// Reads a value written by [`BoundedFloat::write_delta`] against the same baseline;
    /// a result outside the grid is [`WireError::Invalid`].
    pub fn read_delta(&self, r: &mut BitReader<'_>, baseline: f32) -> Result<f32, WireError> {
        let d = r.read_var_i32()?;
        let i = i64::from(self.quantize(baseline)) + i64::from(d);
        if i < 0 || i > i64::from(self.max_index) {
            return Err(WireError::Invalid {
                what: "quantized delta out of range",
            });
        }
        Ok(self.dequantize(i as u32))
    }
}

/// Three [`BoundedFloat`]s for a position or a bounded velocity, as `[x, y, z]`.
///
/// A velocity is bounded by clamping: choose the range as the largest speed the game
/// allows, and snap the simulated velocity so the server keeps what clients see.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantizedVec3 {
    /// X axis.
    pub x: BoundedFloat,
    /// Y axis.
    pub y: BoundedFloat,
    /// Z axis.
    pub z: BoundedFloat,
}

impl QuantizedVec3 {
    /// Per-axis ranges.
    pub const fn new(x: BoundedFloat, y: BoundedFloat, z: BoundedFloat) -> Self {
        Self { x, y, z }
    }

    /// The same range on all three axes.
    ///
    /// # Panics
    /// As [`BoundedFloat::new`].
    pub const fn uniform(min: f32, max: f32, resolution: f32) -> Self {
        let b = BoundedFloat::new(min, max, resolution);
        Self { x: b, y: b, z: b }
    }

    const fn axes(&self) -> [&BoundedFloat; 3] {
        [&self.x, &self.y, &self.z]
    }

    /// Bits per vector.
    pub const fn bits(&self) -> u32 {
        self.x.bits() + self.y.bits() + self.z.bits()
    }

    /// Grid indices of `v`.
    pub fn quantize(&self, v: [f32; 3]) -> [u32; 3] {
        let a = self.axes();
        [
            a[0].quantize(v[0]),
            a[1].quantize(v[1]),
            a[2].quantize(v[2]),
        ]
    }

    /// Values of grid indices (each clamped to its axis range).
    pub fn dequantize(&self, i: [u32; 3]) -> [f32; 3] {
        let a = self.axes();
        [
            a[0].dequantize(i[0]),
            a[1].dequantize(i[1]),
            a[2].dequantize(i[2]),
        ]
    }

    /// `v` snapped to the grid: exactly what a receiver decodes.
    pub fn snap(&self, v: [f32; 3]) -> [f32; 3] {
        self.dequantize(self.quantize(v))
    }

    /// Appends `v` quantized, in [`bits`](Self::bits) bits.
    pub fn write(&self, w: &mut BitWriter, v: [f32; 3]) {
        for (axis, c) in self.axes().into_iter().zip(v) {
            axis.write(w, c);
        }
    }

    /// Reads a vector written by [`QuantizedVec3::write`].
    pub fn read(&self, r: &mut BitReader<'_>) -> Result<[f32; 3], WireError> {
        Ok([self.x.read(r)?, self.y.read(r)?, self.z.read(r)?])
    }

    /// Appends `v` relative to `baseline`, axis by axis (see [`BoundedFloat::write_delta`]).
    pub fn write_delta(&self, w: &mut BitWriter, baseline: [f32; 3], v: [f32; 3]) {
        for (i, axis) in self.axes().into_iter().enumerate() {
            axis.write_delta(w, baseline[i], v[i]);
        }
    }

    /// Reads a vector written by [`QuantizedVec3::write_delta`] against the same baseline.
    pub fn read_delta(
        &self,
        r: &mut BitReader<'_>,
        baseline: [f32; 3],
    ) -> Result<[f32; 3], WireError> {
        Ok([
            self.x.read_delta(r, baseline[0])?,
            self.y.read_delta(r, baseline[1])?,
            self.z.read_delta(r, baseline[2])?,
        ])
    }
}

/// The integer number of `resolution` steps nearest `v`, for unbounded values sent as
/// variable-length integers ([`BitWriter::write_var_i32`]), typically deltas.
///
/// Saturates at the i32 range; NaN gives 0. `dequantize_f32(quantize_f32(v, r), r)` is
/// [`snap_f32`]; it is exact and idempotent while `|v| / resolution <= 2^21`.
pub fn quantize_f32(v: f32, resolution: f32) -> i32 {
    // `as` saturates, and maps NaN to 0.
    (f64::from(v) / f64::from(resolution)).round() as i32
}

/// The value of `q` steps of `resolution`.
pub fn dequantize_f32(q: i32, resolution: f32) -> f32 {
    (f64::from(q) * f64::from(resolution)) as f32
}

/// `v` snapped to the nearest multiple of `resolution`: what a receiver of
/// [`quantize_f32`] decodes with [`dequantize_f32`].
pub fn snap_f32(v: f32, resolution: f32) -> f32 {
    dequantize_f32(quantize_f32(v, resolution), resolution)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_float_widths_and_grid() {
        let b = BoundedFloat::new(-256.0, 256.0, 1.0 / 512.0);
        assert_eq!(b.max_index(), 262_144);
        assert_eq!(b.bits(), 19);
        assert_eq!(
            BoundedFloat::new(-256.0, 256.0 - 1.0 / 512.0, 1.0 / 512.0).bits(),
            18
        );
        assert_eq!(b.dequantize(0), -256.0);
        assert_eq!(b.dequantize(b.max_index()), 256.0);
        assert_eq!(b.snap(1000.0), 256.0);
        assert_eq!(b.snap(f32::NEG_INFINITY), -256.0);
        assert_eq!(b.snap(f32::NAN), -256.0);
        // A resolution f32 cannot hold exactly still gives the intended step count.
        let c = BoundedFloat::new(-100.0, 100.0, 0.01);
        assert_eq!(c.max_index(), 20_000);
        assert_eq!(c.bits(), 15);
        assert!((c.dequantize(20_000) - 100.0).abs() < 1e-4);
        // Not a whole number of steps: the top point lies above max.
        let d = BoundedFloat::new(0.0, 1.05, 0.1);
        assert_eq!(d.max_index(), 11);
        assert_eq!(d.snap(1.09), d.dequantize(11));
        assert!((d.dequantize(11) - 1.1).abs() < 1e-6);
        // Degenerate range: zero bits.
        let e = BoundedFloat::new(3.0, 3.0, 1.0);
        assert_eq!(e.bits(), 0);
        assert_eq!(e.snap(-7.0), 3.0);
    }

    #[test]
    fn invalid_ranges_are_refused() {
        assert!(BoundedFloat::try_new(1.0, 0.0, 0.1).is_none());
        assert!(BoundedFloat::try_new(0.0, 1.0, 0.0).is_none());
        assert!(BoundedFloat::try_new(0.0, 1.0, -0.1).is_none());
        assert!(BoundedFloat::try_new(f32::NAN, 1.0, 0.1).is_none());
        assert!(BoundedFloat::try_new(0.0, f32::INFINITY, 0.1).is_none());
        // Too fine for f32 at this magnitude.
        assert!(BoundedFloat::try_new(-10_000.0, 10_000.0, 0.001).is_none());
        assert!(BoundedFloat::try_new(-10_000.0, 10_000.0, 0.005).is_some());
    }

    #[test]
    #[should_panic(expected = "BoundedFloat")]
    fn new_panics_on_misuse() {
        let _ = BoundedFloat::new(0.0, 1.0, 0.0);
    }

    #[test]
    fn out_of_range_index_is_rejected() {
        let b = BoundedFloat::new(0.0, 10.0, 1.0); // 11 points, 4 bits
        let mut w = BitWriter::new();
        w.write_bits(11, 4);
        let bytes = w.into_bytes();
        assert_eq!(
            b.read(&mut BitReader::new(&bytes)),
            Err(WireError::Invalid {
                what: "quantized value out of range"
            })
        );
    }

    #[test]
    fn every_grid_point_snaps_to_itself() {
        for b in [
            BoundedFloat::new(-256.0, 256.0, 1.0 / 512.0),
            BoundedFloat::new(-100.0, 100.0, 0.01),
            BoundedFloat::new(-1000.0, 1000.0, 0.001),
            BoundedFloat::new(0.5, 0.75, 0.003),
        ] {
            for i in 0..=b.max_index() {
                assert_eq!(b.quantize(b.dequantize(i)), i, "{b:?} index {i}");
            }
        }
    }

    #[test]
    fn deltas_are_cheap_and_checked() {
        let b = BoundedFloat::new(-256.0, 256.0, 1.0 / 512.0);
        let base = 10.0;
        let mut w = BitWriter::new();
        b.write_delta(&mut w, base, base);
        assert_eq!(w.bit_len(), 1);
        b.write_delta(&mut w, base, base + 1.0 / 512.0);
        assert_eq!(w.bit_len(), 4);
        b.write_delta(&mut w, base, -256.0);
        let bytes = w.into_bytes();
        let mut r = BitReader::new(&bytes);
        assert_eq!(b.read_delta(&mut r, base).unwrap(), base);
        assert_eq!(b.read_delta(&mut r, base).unwrap(), base + 1.0 / 512.0);
        assert_eq!(b.read_delta(&mut r, base).unwrap(), -256.0);
        // A delta leaving the grid is invalid.
        let mut w = BitWriter::new();
        w.write_var_i32(-1);
        let bytes = w.into_bytes();
        assert!(b.read_delta(&mut BitReader::new(&bytes), -256.0).is_err());
    }

    #[test]
    fn vec3_round_trip() {
        let p = QuantizedVec3::uniform(-256.0, 256.0, 1.0 / 512.0);
        assert_eq!(p.bits(), 57);
        let v = [1.2345, -200.0001, 99.9];
        let mut w = BitWriter::new();
        p.write(&mut w, v);
        p.write_delta(&mut w, v, [v[0], v[1] + 0.01, v[2]]);
        let bytes = w.into_bytes();
        let mut r = BitReader::new(&bytes);
        let got = p.read(&mut r).unwrap();
        assert_eq!(got, p.snap(v));
        for (g, x) in got.iter().zip(v) {
            assert!((g - x).abs() <= 1.0 / 1024.0 + 1e-5);
        }
        assert_eq!(
            p.read_delta(&mut r, v).unwrap(),
            p.snap([v[0], v[1] + 0.01, v[2]])
        );
        r.finish().unwrap();
    }

    #[test]
    fn unbounded_snapping_is_exact() {
        let r = 1.0 / 256.0;
        assert_eq!(quantize_f32(1.0, r), 256);
        assert_eq!(quantize_f32(-0.003, r), -1);
        assert_eq!(dequantize_f32(-1, r), -r);
        assert_eq!(snap_f32(snap_f32(0.123, r), r), snap_f32(0.123, r));
        assert_eq!(quantize_f32(f32::NAN, r), 0);
        assert_eq!(quantize_f32(f32::INFINITY, r), i32::MAX);
    }
}
