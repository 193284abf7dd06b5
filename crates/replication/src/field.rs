//! Codes of one entity: quantizing, checking and delta coding them, field by field.
//!
//! # Delta format of one entity
//! The fields in the kind's wire order (velocities first), each against the same field of
//! the baseline entity (or of [`zero_codes`] for a new one):
//!
//! * vector, float, int: a 5-bit width `w`, then each component's zig-zagged difference
//!   in `w` bits. The width is the smallest that fits, so an unchanged field costs 5 bits.
//!   A position with a velocity is diffed against where the two velocities take the
//!   baseline position over the baseline's age, `p + (v_old + v_new) / 2 * age / tick_hz`
//!   (exact under constant acceleration: a falling or sliding body), so a body moving
//!   steadily costs almost nothing even against an old baseline.
//! * angle: the same, with the difference taken the short way round the circle.
//! * bool: one bit, "flipped".
//! * rotation: one bit "changed"; if so one bit "same dropped component", then either the
//!   three smallest-three levels as a vector difference, or the absolute pattern.
//!
//! Decoding is strict: only what the encoder writes is accepted (the narrowest width, no
//! absolute rotation where a delta fits, every code within its field's range), so
//! re-encoding what was decoded gives the same bits.

use crate::schema::{Field, FieldType, Kind};
use lagless_wire::{BitReader, BitWriter, QuatCodec, WireError, unzigzag, zigzag};
use std::f32::consts::TAU;

/// Width field of a vector delta: widths 0..=31.
const WIDTH_BITS: u32 = 5;

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
    w.write_bits(width.min(31), WIDTH_BITS);
    if width > 0 {
        for &z in &zz[..n] {
            w.write_bits(z, width);
        }
    }
}

fn read_group(r: &mut BitReader<'_>, from: &[i32]) -> Result<Vec<i32>, WireError> {
    let width = r.read_bits(WIDTH_BITS)?;
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
