//! Property tests for quantization: error bounds, decode == snap bit-for-bit,
//! encode -> decode -> encode identity, and arbitrary input never panicking.

use lagless_wire::{
    BitReader, BitWriter, BoundedFloat, QuantizedVec3, QuatCodec, dequantize_f32, quantize_f32,
    snap_f32,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// A valid range: min, span and resolution scaled so the grid has at most ~2^20 points.
fn bounded() -> impl Strategy<Value = BoundedFloat> {
    (-1000.0f32..1000.0, 0.0f32..2000.0, 1u32..1_000_000).prop_filter_map(
        "resolution too fine for f32",
        |(min, span, steps)| {
            let res = if span == 0.0 {
                1.0
            } else {
                span / steps as f32
            };
            BoundedFloat::try_new(min, min + span, res)
        },
    )
}

/// Uniformly random unit quaternion from three uniforms (Shoemake).
fn uniform_quat(u1: f64, u2: f64, u3: f64) -> [f32; 4] {
    let tau = std::f64::consts::TAU;
    let (a, b) = ((1.0 - u1).sqrt(), u1.sqrt());
    [
        (a * (tau * u2).sin()) as f32,
        (a * (tau * u2).cos()) as f32,
        (b * (tau * u3).sin()) as f32,
        (b * (tau * u3).cos()) as f32,
    ]
}

/// Rotation angle in degrees between two quaternions (either sign).
fn angle_deg(a: [f32; 4], b: [f32; 4]) -> f64 {
    let n = |q: [f32; 4]| q.iter().map(|&c| f64::from(c).powi(2)).sum::<f64>().sqrt();
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, y)| f64::from(x) * f64::from(y))
        .sum::<f64>();
    (2.0 * (dot / (n(a) * n(b))).abs().min(1.0).acos()).to_degrees()
}

/// Quaternions that stress the codec: uniform ones, near-ties between the two largest
/// components, and near-axis ones.
fn quat() -> impl Strategy<Value = [f32; 4]> {
    prop_oneof![
        (0.0f64..1.0, 0.0f64..1.0, 0.0f64..1.0).prop_map(|(a, b, c)| uniform_quat(a, b, c)),
        (
            0usize..4,
            0usize..4,
            0.5f32..0.7072,
            -1e-3f32..1e-3,
            any::<bool>(),
            any::<[bool; 2]>()
        )
            .prop_map(|(i, j, m, eps, neg, s)| {
                let mut q = [0.0f32; 4];
                let j = if i == j { (j + 1) % 4 } else { j };
                q[i] = m;
                q[j] = if neg { -(m + eps) } else { m + eps };
                let rest = (1.0 - q[i] * q[i] - q[j] * q[j]).max(0.0).sqrt();
                let others: Vec<usize> = (0..4).filter(|&k| k != i && k != j).collect();
                q[others[0]] = if s[0] { rest * 0.6 } else { -rest * 0.6 };
                q[others[1]] = if s[1] { rest * 0.8 } else { -rest * 0.8 };
                q
            }),
        any::<[i8; 4]>().prop_map(|q| q.map(|c| f32::from(c) / 8.0)),
    ]
}

/// Worst angle error (degrees) the quaternion tests accept, per bits per component.
/// Measured maxima are in `measure_quaternion_error`; bounds leave a little margin.
fn quat_bound(bits: u32) -> f64 {
    // Analytic worst case, at (1/2, 1/2, 1/2, 1/2) with every sent component off by half a
    // step h: 2 * sqrt(12) * h radians = 0.55 degrees at 9 bits, halving per extra bit.
    0.6 * 2f64.powi(9 - bits as i32)
}

#[test]
fn measure_quaternion_error() {
    // Deterministic xorshift so the figures in the docs are reproducible.
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    for bits in [9, 10, 11] {
        let codec = QuatCodec::new(bits);
        let mut worst = 0.0f64;
        let mut sum = 0.0;
        let n = 60_000;
        for i in 0..n {
            let q = if i % 2 == 0 {
                uniform_quat(next(), next(), next())
            } else {
                // Near the worst corner, where all four components are about 1/2.
                let h = 0.01;
                let c = |x: f64| (0.5 + h * (x - 0.5)) as f32;
                [c(next()), c(next()), c(next()), c(next())]
            };
            let got = codec.quantize_quat(q);
            let e = angle_deg(q, got);
            if i % 2 == 0 {
                sum += e;
            }
            worst = worst.max(e);
        }
        println!(
            "quaternion {bits} bits/component ({} bits): max {worst:.4} deg, mean (uniform) {:.4} deg",
            codec.bits(),
            sum / f64::from(n / 2)
        );
        assert!(worst < quat_bound(bits), "{bits} bits: {worst}");
    }
}

#[test]
fn measure_position_error() {
    let p = QuantizedVec3::uniform(-256.0, 256.0 - 1.0 / 512.0, 1.0 / 512.0);
    let mut worst = 0.0f64;
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..100_000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let v: [f32; 3] = std::array::from_fn(|i| {
            ((s >> (i * 21)) & 0x1f_ffff) as f32 / 0x1f_ffff as f32 * 511.99 - 256.0
        });
        let got = p.snap(v);
        for (g, x) in got.iter().zip(v) {
            worst = worst.max((f64::from(*g) - f64::from(x)).abs());
        }
    }
    println!(
        "position at 1/512 m in [-256, 256): {} bits, max error {worst:.6} m",
        p.bits()
    );
    assert!(worst <= 1.0 / 1024.0 + 1e-5);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 3000,
        // Failing cases are saved beside this file (tests/ has no lib.rs to find).
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn bounded_float_round_trip(b in bounded(), t in 0.0f64..=1.0, outside in -2.0f32..2.0, pick: bool) {
        let v = if pick {
            (f64::from(b.min()) + t * (f64::from(b.max()) - f64::from(b.min()))) as f32
        } else {
            b.min() + outside * (b.max() - b.min() + 1.0)
        };
        let mut w = BitWriter::new();
        b.write(&mut w, v);
        prop_assert_eq!(w.bit_len(), b.bits() as usize);
        let bytes = w.into_bytes();
        let mut r = BitReader::new(&bytes);
        let got = b.read(&mut r)?;
        r.finish()?;
        // Decoding gives exactly the sender's snap.
        prop_assert_eq!(got.to_bits(), b.snap(v).to_bits());
        // Within half a step (plus f32 rounding of the result) inside the range.
        if v >= b.min() && v <= b.max() {
            let err = (f64::from(got) - f64::from(v)).abs();
            let ulp = f64::from(v.abs().max(got.abs())) * f64::from(f32::EPSILON);
            prop_assert!(err <= f64::from(b.resolution()) / 2.0 + ulp, "err {} for {:?} v {}", err, b, v);
        }
        // Snapping is idempotent, and re-encoding is byte-identical.
        prop_assert_eq!(b.snap(got).to_bits(), got.to_bits());
        let mut w2 = BitWriter::new();
        b.write(&mut w2, got);
        prop_assert_eq!(w2.into_bytes(), bytes);
    }

    #[test]
    fn bounded_float_delta_round_trip(b in bounded(), t0 in 0.0f32..=1.0, t1 in 0.0f32..=1.0) {
        let at = |t: f32| b.min() + t * (b.max() - b.min());
        let (base, v) = (b.snap(at(t0)), at(t1));
        let mut w = BitWriter::new();
        b.write_delta(&mut w, base, v);
        let bytes = w.into_bytes();
        let mut r = BitReader::new(&bytes);
        prop_assert_eq!(b.read_delta(&mut r, base)?.to_bits(), b.snap(v).to_bits());
        r.finish()?;
    }

    #[test]
    fn vec3_round_trip(x in bounded(), y in bounded(), z in bounded(), t: [u16; 3]) {
        let p = QuantizedVec3::new(x, y, z);
        let axes = [x, y, z];
        let v: [f32; 3] = std::array::from_fn(|i| {
            axes[i].min() + f32::from(t[i]) / 65535.0 * (axes[i].max() - axes[i].min())
        });
        let mut w = BitWriter::new();
        p.write(&mut w, v);
        prop_assert_eq!(w.bit_len(), p.bits() as usize);
        let bytes = w.into_bytes();
        let got = p.read(&mut BitReader::new(&bytes))?;
        prop_assert_eq!(got.map(f32::to_bits), p.snap(v).map(f32::to_bits));
        let mut w2 = BitWriter::new();
        p.write(&mut w2, got);
        prop_assert_eq!(w2.into_bytes(), bytes);
    }

    /// Arbitrary bytes through a bounded reader: an error or a value that re-encodes to
    /// the same bits.
    #[test]
    fn bounded_float_arbitrary_bytes(b in bounded(), bytes in proptest::collection::vec(any::<u8>(), 0..5)) {
        let mut r = BitReader::new(&bytes);
        if let Ok(v) = b.read(&mut r) {
            let mut w = BitWriter::new();
            b.write(&mut w, v);
            let used = w.bit_len();
            let mut r2 = BitReader::new(&bytes);
            let raw = r2.read_bits(b.bits())?;
            prop_assert_eq!(BitReader::new(&w.into_bytes()).read_bits(b.bits())?, raw);
            prop_assert_eq!(used, b.bits() as usize);
        }
        let _ = BitReader::new(&bytes).read_var_i32().map(|_| b.read_delta(&mut BitReader::new(&bytes), b.max()));
    }

    #[test]
    fn unbounded_snap_is_exact(q in -(1i32 << 21)..(1 << 21), res in 1e-3f32..10.0, t in -2.0e6f64..2.0e6) {
        let x = dequantize_f32(q, res);
        prop_assert_eq!(quantize_f32(x, res), q);
        let v = (t * f64::from(res)) as f32;
        let s = snap_f32(v, res);
        prop_assert_eq!(snap_f32(s, res).to_bits(), s.to_bits());
        prop_assert!((f64::from(s) - f64::from(v)).abs() <= f64::from(res) / 2.0 + f64::from(v.abs()) * 1e-7);
    }

    #[test]
    fn quaternion_round_trip(q in quat(), bits in 2u32..=16) {
        let codec = QuatCodec::new(bits);
        let mut w = BitWriter::new();
        codec.write(&mut w, q);
        prop_assert_eq!(w.bit_len(), codec.bits() as usize);
        let bytes = w.into_bytes();
        let mut r = BitReader::new(&bytes);
        let got = codec.read(&mut r)?;
        r.finish()?;
        // Decoding gives exactly quantize_quat, which is idempotent.
        prop_assert_eq!(got.map(f32::to_bits), codec.quantize_quat(q).map(f32::to_bits));
        prop_assert_eq!(codec.quantize_quat(got).map(f32::to_bits), got.map(f32::to_bits));
        // encode -> decode -> encode: identical bytes.
        let mut w2 = BitWriter::new();
        codec.write(&mut w2, got);
        prop_assert_eq!(w2.into_bytes(), bytes);
        // Unit length, largest component positive.
        let norm: f64 = got.iter().map(|&c| f64::from(c).powi(2)).sum();
        prop_assert!((norm - 1.0).abs() < 1e-6);
        let k = (codec.pack(q) & 3) as usize;
        prop_assert!(got[k] > 0.0);
        if (5..=16).contains(&bits) {
            // Error bound (the near-tie nudge may add a step; allow double).
            let e = angle_deg(q, got);
            prop_assert!(e < 2.0 * quat_bound(bits), "{} bits: {} deg for {:?}", bits, e, q);
        }
    }

    /// Every accepted packed value is canonical: it re-packs to itself.
    #[test]
    fn quaternion_arbitrary_bits(packed: u64, bits in 2u32..=16) {
        let codec = QuatCodec::new(bits);
        let packed = packed & ((1u64 << codec.bits()) - 1);
        if let Ok(q) = codec.unpack(packed) {
            prop_assert!(q.iter().all(|c| c.is_finite()));
            prop_assert_eq!(codec.pack(q), packed);
        }
        // Set high bits are always rejected.
        prop_assert!(codec.unpack(packed | 1 << codec.bits()).is_err());
    }
}
