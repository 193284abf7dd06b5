//! Codes of one entity: quantizing, checking and delta coding them, field by field.
//!
//! # Delta format of one entity
//! The fields in the kind's wire order (velocities first), each against the same field of
//! the baseline entity (or of [`zero_codes`] for a new one):
//!
//! * vector, float, int: a width `w` (0 to 31, in the prefix code below), then each
//!   component's zig-zagged difference in `w` bits. The width is the smallest that fits,
//!   so an unchanged field costs 2 bits.
//!   A position with a velocity is diffed against where the two velocities take the
//!   baseline position over the baseline's age, `p + (v_old + v_new) / 2 * age / tick_hz`
//!   (exact under constant acceleration: a falling or sliding body), so a body moving
//!   steadily costs almost nothing even against an old baseline.
//! * angle: the same, with the difference taken the short way round the circle.
//! * bool: one bit, "flipped".
//! * rotation: one bit "changed"; if so one bit "same dropped component", then either the
//!   three smallest-three levels as a vector difference, or the absolute pattern.
//!
//! A width is one of a fixed prefix code (canonical Huffman, [`WIDTH_CODE_LENGTHS`]): 2
//! bits for 0, 3 for 2 to 5, 4 for 1 and 6, 5 for 7 and 14 (a position spawned against
//! zero), up to 8, and 12 for widths of 15 or more (an escape and 5 bits). The lengths come from the widths the cube
//! scene writes (a player pushing into 900 cubes, acknowledged 6 ticks late: 31% of them 0,
//! 13% 2, 12% 5, ...), where they take 3.1 bits on average against the 5 of a flat width.
//!
//! Decoding is strict: only what the encoder writes is accepted (the narrowest width, no
//! absolute rotation where a delta fits, every code within its field's range), so
//! re-encoding what was decoded gives the same bits.

use crate::schema::{Field, FieldType, Kind};
use lagless_wire::{BitReader, BitWriter, QuatCodec, WireError, unzigzag, zigzag};
use std::f32::consts::TAU;

/// Bits of each width's code: widths 0..=14, then an escape (15) followed by 5 bits of
/// `width - 15` for widths 15..=31. A canonical Huffman code of the widths the cube scene
/// writes (see the module docs), complete (every 8-bit string starts with one code).
const WIDTH_CODE_LENGTHS: [u8; 16] = [2, 4, 3, 3, 3, 3, 4, 5, 6, 6, 7, 8, 8, 7, 5, 7];

/// Each symbol's code, canonical for [`WIDTH_CODE_LENGTHS`] (written first bit first).
const WIDTH_CODES: [u8; 16] = [
    0, 12, 2, 3, 4, 5, 13, 28, 60, 61, 124, 254, 255, 125, 29, 126,
];

/// The symbol that escapes to a 5-bit width.
const WIDTH_ESCAPE: u32 = 15;

/// The longest code.
const WIDTH_CODE_MAX: usize = 8;

/// Symbols in canonical order (by code length, then symbol).
const WIDTHS_SORTED: [u8; 16] = [0, 2, 3, 4, 5, 1, 6, 7, 14, 8, 9, 10, 13, 15, 11, 12];

/// Per code length: the first code, how many codes, and where they start in
/// [`WIDTHS_SORTED`].
const WIDTH_FIRST: [u8; WIDTH_CODE_MAX + 1] = [0, 0, 0, 2, 12, 28, 60, 124, 254];
const WIDTH_COUNT: [u8; WIDTH_CODE_MAX + 1] = [0, 0, 1, 4, 2, 2, 2, 3, 2];
const WIDTH_OFFSET: [u8; WIDTH_CODE_MAX + 1] = [0, 0, 0, 1, 5, 7, 9, 11, 14];

/// Writes width `w` (at most 31) in its code.
fn write_width(w: &mut BitWriter, width: u32) {
    let width = width.min(31);
    let symbol = width.min(WIDTH_ESCAPE) as usize;
    let (code, len) = (WIDTH_CODES[symbol], WIDTH_CODE_LENGTHS[symbol]);
    for k in (0..len).rev() {
        w.write_bool(code >> k & 1 == 1);
    }
    if width >= WIDTH_ESCAPE {
        w.write_bits(width - WIDTH_ESCAPE, 5);
    }
}

/// Bits [`write_width`] spends on `width`.
#[cfg(test)]
fn width_bits(width: u32) -> u32 {
    let width = width.min(31);
    let escape = if width >= WIDTH_ESCAPE { 5 } else { 0 };
    u32::from(WIDTH_CODE_LENGTHS[width.min(WIDTH_ESCAPE) as usize]) + escape
}

/// Reads a width [`write_width`] wrote.
fn read_width(r: &mut BitReader<'_>) -> Result<u32, WireError> {
    let mut code = 0u8;
    for len in 1..=WIDTH_CODE_MAX {
        code = code << 1 | u8::from(r.read_bool()?);
        let (first, count) = (WIDTH_FIRST[len], WIDTH_COUNT[len]);
        if count > 0 && code >= first && code - first < count {
            let symbol = u32::from(WIDTHS_SORTED[usize::from(WIDTH_OFFSET[len] + (code - first))]);
            if symbol < WIDTH_ESCAPE {
                return Ok(symbol);
            }
            let width = WIDTH_ESCAPE + r.read_bits(5)?;
            if width > 31 {
                return Err(WireError::Invalid {
                    what: "width above 31",
                });
            }
            return Ok(width);
        }
    }
    Err(WireError::Invalid { what: "width code" })
}

/// The codes of a new entity's baseline: every field at zero (within its range), the
/// identity rotation.
pub fn zero_codes(kind: &Kind) -> Vec<i32> {
    let mut codes = vec![0; kind.width()];
    for f in kind.fields() {
        let out = &mut codes[f.offset..f.offset + f.ty.width()];
        match f.ty {
            FieldType::Rotation { .. } => {
                out.copy_from_slice(&rotation_codes(&f.ty, [0.0, 0.0, 0.0, 1.0]))
            }
            ty => {
                let (lo, hi) = ty.code_range();
                out.fill(0i32.clamp(lo, hi));
            }
        }
    }
    codes
}

fn quat_codec(ty: &FieldType) -> QuatCodec {
    ty.quat_codec()
        .unwrap_or(QuatCodec::new(QuatCodec::DEFAULT_BITS))
}

fn rotation_codes(ty: &FieldType, q: [f32; 4]) -> [i32; 4] {
    let codec = quat_codec(ty);
    let (k, levels) = codec.split(codec.pack(q));
    [
        k as i32,
        levels[0] as i32,
        levels[1] as i32,
        levels[2] as i32,
    ]
}

/// The packed pattern of rotation codes, if they are canonical.
fn rotation_pattern(ty: &FieldType, codes: &[i32]) -> Option<u64> {
    let codec = quat_codec(ty);
    let width = codec.bits_per_component();
    let k = u64::try_from(codes[0]).ok().filter(|&k| k < 4)?;
    let mut levels = [0u32; 3];
    for (l, &c) in levels.iter_mut().zip(&codes[1..4]) {
        *l = u32::try_from(c).ok().filter(|&l| l >> width == 0)?;
    }
    let packed = codec.join(k, levels);
    codec.unpack(packed).ok().map(|_| packed)
}

/// Quantizes field `f`'s `values` into `codes` (clamping to its range; NaN becomes the
/// nearest valid code of zero).
pub(crate) fn quantize(f: &Field, values: &[f32], codes: &mut [i32]) {
    match f.ty {
        FieldType::Vector { .. } => {
            for (c, &v) in codes.iter_mut().zip(values) {
                *c = f.ty.quantize_component(v);
            }
        }
        FieldType::Rotation { .. } => {
            let q = [values[0], values[1], values[2], values[3]];
            codes.copy_from_slice(&rotation_codes(&f.ty, q));
        }
        FieldType::Angle { bits } => {
            let steps = f64::from(1u32 << bits);
            let turns = f64::from(values[0]) / f64::from(TAU);
            let c = (turns * steps).round();
            codes[0] = if c.is_finite() {
                c.rem_euclid(steps) as i32
            } else {
                0
            };
        }
        FieldType::Int { min, max } => codes[0] = (values[0].round() as i32).clamp(min, max),
        FieldType::Bool => codes[0] = i32::from(values[0] > 0.5),
    }
}

/// The values field `f`'s `codes` stand for.
pub(crate) fn dequantize(f: &Field, codes: &[i32], values: &mut [f32]) {
    match f.ty {
        FieldType::Vector { .. } => {
            for (v, &c) in values.iter_mut().zip(codes) {
                *v = f.ty.dequantize_component(c);
            }
        }
        FieldType::Rotation { .. } => {
            let q = rotation_pattern(&f.ty, codes)
                .and_then(|p| quat_codec(&f.ty).unpack(p).ok())
                .unwrap_or([0.0, 0.0, 0.0, 1.0]);
            values.copy_from_slice(&q);
        }
        FieldType::Angle { bits } => {
            values[0] = (f64::from(codes[0]) / f64::from(1u32 << bits) * f64::from(TAU)) as f32;
        }
        FieldType::Int { .. } | FieldType::Bool => values[0] = codes[0] as f32,
    }
}

/// True when `codes` could have come from [`quantize`].
fn valid(f: &Field, codes: &[i32]) -> bool {
    match f.ty {
        FieldType::Rotation { .. } => rotation_pattern(&f.ty, codes).is_some(),
        ty => {
            let (lo, hi) = ty.code_range();
            codes.iter().all(|c| (lo..=hi).contains(c))
        }
    }
}

/// True when every field of `codes` is valid for `kind`.
pub fn codes_valid(kind: &Kind, codes: &[i32]) -> bool {
    codes.len() == kind.width()
        && kind
            .fields()
            .iter()
            .all(|f| valid(f, &codes[f.offset..f.offset + f.ty.width()]))
}

/// The values (floats) `codes` of `kind` stand for.
pub fn values_of(kind: &Kind, codes: &[i32]) -> Vec<f32> {
    let mut values = vec![0.0; kind.width()];
    for f in kind.fields() {
        let r = f.offset..f.offset + f.ty.width();
        dequantize(f, &codes[r.clone()], &mut values[r]);
    }
    values
}

/// How one entity is diffed: the baseline's age in ticks and the tick rate, for
/// positions predicted from velocities.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Motion {
    pub age: u32,
    pub tick_hz: u32,
}

/// Where the position field `pos` of `from` goes over `motion.age` ticks if its velocity
/// changed evenly from `from`'s to `to_vel`; computed the same way on both ends (IEEE
/// `f64`, rounded half away from zero), clamped to the field's range.
fn predicted(kind: &Kind, pos: &Field, from: &[i32], to_vel: &[i32], motion: Motion) -> Vec<i32> {
    let base = &from[pos.offset..pos.offset + pos.ty.width()];
    let Some(vel) = pos.velocity.map(|v| &kind.fields()[v]) else {
        return base.to_vec();
    };
    let (
        FieldType::Vector {
            resolution: pos_res,
            ..
        },
        FieldType::Vector {
            resolution: vel_res,
            ..
        },
    ) = (pos.ty, vel.ty)
    else {
        return base.to_vec();
    };
    if motion.age == 0 || motion.tick_hz == 0 {
        return base.to_vec();
    }
    let from_vel = &from[vel.offset..vel.offset + vel.ty.width()];
    let scale = f64::from(motion.age) * f64::from(vel_res)
        / (2.0 * f64::from(pos_res) * f64::from(motion.tick_hz));
    let (lo, hi) = pos.ty.code_range();
    base.iter()
        .zip(from_vel.iter().zip(to_vel))
        .map(|(&p, (&a, &b))| {
            let step = ((f64::from(a) + f64::from(b)) * scale).round();
            (f64::from(p) + step).clamp(f64::from(lo), f64::from(hi)) as i32
        })
        .collect()
}

/// Writes `to` as a delta against `from` (both codes of `kind`).
pub(crate) fn write_entity(w: &mut BitWriter, kind: &Kind, from: &[i32], to: &[i32], m: Motion) {
    for &i in kind.wire_order() {
        let f = &kind.fields()[i];
        let r = f.offset..f.offset + f.ty.width();
        match f.ty {
            FieldType::Bool => w.write_bool(from[f.offset] != to[f.offset]),
            FieldType::Rotation { bits } => write_rotation(w, bits, &from[r.clone()], &to[r]),
            FieldType::Angle { bits } => {
                let d = wrap(to[f.offset].wrapping_sub(from[f.offset]), bits);
                write_group(w, &[0], &[d]);
            }
            _ if f.velocity.is_some() => {
                let vel = &kind.fields()[f.velocity.unwrap_or(i)];
                let to_vel = &to[vel.offset..vel.offset + vel.ty.width()];
                write_group(w, &predicted(kind, f, from, to_vel, m), &to[r]);
            }
            _ => write_group(w, &from[r.clone()], &to[r]),
        }
    }
}

/// Reads a delta [`write_entity`] wrote against `from`; checks every code.
pub(crate) fn read_entity(
    r: &mut BitReader<'_>,
    kind: &Kind,
    from: &[i32],
    m: Motion,
) -> Result<Vec<i32>, WireError> {
    let mut to = from.to_vec();
    for &i in kind.wire_order() {
        let f = &kind.fields()[i];
        let range = f.offset..f.offset + f.ty.width();
        match f.ty {
            FieldType::Bool => {
                if r.read_bool()? {
                    to[f.offset] = 1 - from[f.offset].clamp(0, 1);
                }
            }
            FieldType::Rotation { bits } => {
                let codes = read_rotation(r, bits, &from[range.clone()])?;
                to[range.clone()].copy_from_slice(&codes);
            }
            FieldType::Angle { bits } => {
                let d = read_group(r, &[0])?[0];
                let half = 1i32 << (bits - 1);
                if !(-half < d && d <= half) {
                    return Err(WireError::Invalid {
                        what: "angle delta the long way round",
                    });
                }
                to[f.offset] = (from[f.offset] + d).rem_euclid(1 << bits);
            }
            _ if f.velocity.is_some() => {
                let vel = &kind.fields()[f.velocity.unwrap_or(i)];
                // Velocities come first on the wire, so `to` already holds the new one.
                let to_vel = to[vel.offset..vel.offset + vel.ty.width()].to_vec();
                let base = predicted(kind, f, from, &to_vel, m);
                let codes = read_group(r, &base)?;
                to[range.clone()].copy_from_slice(&codes);
            }
            _ => {
                let codes = read_group(r, &from[range.clone()])?;
                to[range.clone()].copy_from_slice(&codes);
            }
        }
        if !valid(f, &to[range]) {
            return Err(WireError::Invalid {
                what: "field outside its declared range",
            });
        }
    }
    Ok(to)
}

/// `d` taken the short way round a circle of `2^bits` steps: in `(-2^(bits-1), 2^(bits-1)]`.
fn wrap(d: i32, bits: u8) -> i32 {
    let n = 1i32 << bits;
    let half = n / 2;
    let m = d.rem_euclid(n);
    if m > half { m - n } else { m }
}

/// Codes stay below 2^29 in magnitude, so a difference zig-zags into 31 bits.
fn write_group(w: &mut BitWriter, from: &[i32], to: &[i32]) {
    let mut zz = [0u32; 4];
    for (z, (a, b)) in zz.iter_mut().zip(from.iter().zip(to)) {
        *z = zigzag(b.wrapping_sub(*a));
    }
    let n = from.len();
    let width = 32 - zz[..n].iter().fold(0, |a, &z| a | z).leading_zeros();
    write_width(w, width.min(31));
    if width > 0 {
        for &z in &zz[..n] {
            w.write_bits(z, width);
        }
    }
}

fn read_group(r: &mut BitReader<'_>, from: &[i32]) -> Result<Vec<i32>, WireError> {
    let width = read_width(r)?;
    if width == 0 {
        return Ok(from.to_vec());
    }
    let mut zz = [0u32; 4];
    for z in zz.iter_mut().take(from.len()) {
        *z = r.read_bits(width)?;
    }
    if zz.iter().fold(0, |a, &z| a | z) >> (width - 1) == 0 {
        return Err(WireError::Invalid {
            what: "delta wider than needed",
        });
    }
    from.iter()
        .zip(zz)
        .map(|(&a, z)| {
            a.checked_add(unzigzag(z)).ok_or(WireError::Invalid {
                what: "delta overflows",
            })
        })
        .collect()
}

fn write_rotation(w: &mut BitWriter, bits: u8, from: &[i32], to: &[i32]) {
    w.write_bool(from != to);
    if from == to {
        return;
    }
    w.write_bool(from[0] == to[0]);
    if from[0] == to[0] {
        write_group(w, &from[1..4], &to[1..4]);
    } else {
        w.write_bits(to[0] as u32 & 3, 2);
        for &l in &to[1..4] {
            w.write_bits(l as u32, u32::from(bits));
        }
    }
}

fn read_rotation(r: &mut BitReader<'_>, bits: u8, from: &[i32]) -> Result<Vec<i32>, WireError> {
    if !r.read_bool()? {
        return Ok(from.to_vec());
    }
    if r.read_bool()? {
        let levels = read_group(r, &from[1..4])?;
        if levels == from[1..4] {
            return Err(WireError::Invalid {
                what: "unchanged rotation sent",
            });
        }
        Ok([&from[..1], &levels[..]].concat())
    } else {
        let k = r.read_bits(2)? as i32;
        if k == from[0] {
            return Err(WireError::Invalid {
                what: "absolute rotation where a delta fits",
            });
        }
        let mut out = vec![k];
        for _ in 0..3 {
            out.push(r.read_bits(u32::from(bits))? as i32);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Schema;

    /// Every width reads back as itself, the code is complete (every string of the
    /// longest code's length starts with exactly one code) and canonical.
    #[test]
    fn width_codes_round_trip_and_are_complete() {
        for width in 0..32u32 {
            let mut w = BitWriter::new();
            write_width(&mut w, width);
            assert_eq!(w.bit_len() as u32, width_bits(width));
            let bytes = w.into_bytes();
            assert_eq!(read_width(&mut BitReader::new(&bytes)).unwrap(), width);
        }
        let kraft: f64 = WIDTH_CODE_LENGTHS
            .iter()
            .map(|&l| 0.5f64.powi(i32::from(l)))
            .sum();
        assert_eq!(kraft, 1.0);
        for s in 0..1u32 << WIDTH_CODE_MAX {
            let mut w = BitWriter::new();
            for k in (0..WIDTH_CODE_MAX).rev() {
                w.write_bool(s >> k & 1 == 1);
            }
            // Five more bits for an escape: width 15.
            w.write_bits(0, 5);
            let bytes = w.into_bytes();
            let width = read_width(&mut BitReader::new(&bytes)).expect("complete");
            let symbol = width.min(WIDTH_ESCAPE) as usize;
            let len = u32::from(WIDTH_CODE_LENGTHS[symbol]);
            assert_eq!(
                s >> (WIDTH_CODE_MAX as u32 - len),
                u32::from(WIDTH_CODES[symbol]),
                "{s:b}"
            );
        }
        // An escape to a width above 31 is refused.
        let mut w = BitWriter::new();
        let escape = WIDTH_ESCAPE as usize;
        for k in (0..WIDTH_CODE_LENGTHS[escape]).rev() {
            w.write_bool(WIDTH_CODES[escape] >> k & 1 == 1);
        }
        w.write_bits(17, 5);
        let bytes = w.into_bytes();
        assert!(read_width(&mut BitReader::new(&bytes)).is_err());
    }

    fn kind() -> Kind {
        Schema::new()
            .kind(
                Kind::new("k")
                    .vec3("position", 100.0, 1.0 / 512.0)
                    .rotation("rotation", 11)
                    .vec3("velocity", 64.0, 1.0 / 64.0)
                    .velocity_of("position")
                    .angle("heading", 12)
                    .int("hp", -5, 100)
                    .bool("alive"),
            )
            .build()
            .unwrap()
            .kinds()[0]
            .clone()
    }

    fn codes(kind: &Kind, values: &[f32]) -> Vec<i32> {
        let mut c = vec![0; kind.width()];
        for f in kind.fields() {
            let r = f.offset..f.offset + f.ty.width();
            quantize(f, &values[r.clone()], &mut c[r]);
        }
        c
    }

    #[test]
    fn round_trip_and_prediction() {
        let k = kind();
        let a = codes(
            &k,
            &[
                1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0, 4.0, 0.0, 0.0, 6.2, 50.0, 1.0,
            ],
        );
        // Moved at 4 m/s for 4 ticks of 64 Hz: exactly where prediction puts it.
        let b = codes(
            &k,
            &[
                1.25, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0, 4.0, 0.0, 0.0, 0.1, 49.0, 0.0,
            ],
        );
        assert!(codes_valid(&k, &a) && codes_valid(&k, &b));
        let m = Motion {
            age: 4,
            tick_hz: 64,
        };
        let mut w = BitWriter::new();
        write_entity(&mut w, &k, &a, &b, m);
        let bits = w.bit_len();
        let bytes = w.into_bytes();
        let mut r = BitReader::new(&bytes);
        assert_eq!(read_entity(&mut r, &k, &a, m).unwrap(), b);
        // velocity 5, position 5 (predicted exactly), rotation 1, heading 5+w, hp 5+w, bool 1.
        assert!(bits < 40, "{bits} bits");
        let v = values_of(&k, &b);
        assert_eq!(v[0], 1.25);
        assert!((v[10] - 0.1).abs() < 0.01, "heading wraps: {}", v[10]);
    }

    #[test]
    fn out_of_range_codes_are_refused() {
        let k = kind();
        let a = zero_codes(&k);
        let mut b = a.clone();
        b[11] = 101; // hp above its max
        let mut w = BitWriter::new();
        write_entity(
            &mut w,
            &k,
            &a,
            &b,
            Motion {
                age: 0,
                tick_hz: 64,
            },
        );
        let bytes = w.into_bytes();
        assert!(
            read_entity(
                &mut BitReader::new(&bytes),
                &k,
                &a,
                Motion {
                    age: 0,
                    tick_hz: 64
                }
            )
            .is_err()
        );
    }
}
