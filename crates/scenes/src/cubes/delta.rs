//! Compressed cube snapshots: quantized, bit-packed and delta-encoded against a snapshot
//! the client acknowledged (source 003; Fiedler's "Snapshot Compression").
//!
//! # Format
//! One bit stream, every integer a [`BitWriter::write_var_u32`] unless said otherwise:
//!
//! ```text
//! has_baseline:1 [baseline_age - 1]      age in ticks, so the baseline is tick - age
//! players  { id_gap  body_delta }        ids ascending; gap = id - previous id - 1
//!                                        (the first gap is the first id; any u32 id)
//! cubes    (must equal the baseline's count)
//! changed  { index_gap  cube_delta }     indices ascending
//! ```
//!
//! A delta is taken against the same entity in the baseline, or against a zero state
//! (origin, identity, at rest, asleep) when there is no baseline or the player is new.
//! So a full snapshot is simply a delta against nothing: one code path, and unchanged
//! cubes cost nothing at all beyond the gaps between changed ones.
//!
//! * `vector`: a 5-bit width `w`, then three zig-zagged differences of `w` bits each. The
//!   width is the smallest that fits, so a still vector costs 5 bits.
//! * `rotation`: 1 bit "changed"; if so, 1 bit "same dropped component", then either the
//!   three smallest-three indices as a `vector` of differences, or the absolute pattern.
//! * `body_delta` (players): linear and angular velocity, position, rotation.
//! * `cube_delta`: awake bit, velocities only when awake (a sleeping cube is at rest),
//!   position, rotation.
//! * **Positions are predicted.** A position is diffed not against the baseline's but
//!   against where the baseline's and the new linear velocity take it over the baseline's
//!   age, `p + (v_old + v_new) / 2 * age / tick_hz` (exact under constant acceleration:
//!   a falling or sliding cube), in integers so both ends agree to the bit. Velocities go
//!   first so the decoder has both. It pays off where baselines are older than a tick:
//!   on `broadband` (3-4 ticks) it cuts 116 to 107 kbit/s, on `lossy` 187 to 172; on
//!   `mobile`, where most changed cubes are settling or tumbling, it gains about
//!   nothing.
//!
//! Decoding is strict: only what [`SnapshotCodec::encode`] would write is accepted (the
//! narrowest width, no unchanged cube listed, no absolute rotation where a delta fits), so
//! `encode(decode(bytes)) == bytes` for every accepted input.

use super::quantize::{BodyCodes, StateQuantization};
use super::snapshot::{CubePose, CubeSnapshot, SnapshotLimits};
use super::{BodyState, CubeScene, PlayerId};
use lagless_core::{BaselineHistory, Tick};
use lagless_wire::{BitReader, BitWriter, WireError, unzigzag, zigzag};

/// A cube as replicated, in quantized form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct CubeCodes {
    /// Pose and velocities; velocities are zero when asleep.
    pub body: BodyCodes,
    /// False when the physics engine has put the cube to sleep.
    pub awake: bool,
}

impl CubeCodes {
    /// The codes of a cube in `state`. A sleeping cube's velocities are coded as zero
    /// whatever `state` says, so the codes depend only on what a snapshot carries.
    ///
    /// The one place a cube is quantized: the incremental capture
    /// ([`super::cache::CaptureCache`]) must produce exactly what
    /// [`QuantizedSnapshot::from_snapshot`] does.
    pub fn quantize(state: &BodyState, awake: bool, q: &StateQuantization) -> Self {
        let mut body = q.encode(state);
        if !awake {
            body.linvel = [0; 3];
            body.angvel = [0; 3];
        }
        Self { body, awake }
    }

    /// The pose these codes stand for; like [`Self::quantize`], shared by the plain and
    /// the incremental conversion so the two cannot drift apart.
    pub fn to_pose(&self, q: &StateQuantization) -> CubePose {
        let s = q.decode(&self.body);
        CubePose {
            position: s.position,
            rotation: s.rotation,
            awake: self.awake,
            linvel: s.linvel,
            angvel: s.angvel,
        }
    }
}

/// A snapshot in quantized form: what the server records as a baseline, what the client
/// decodes and keeps to decode the next one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuantizedSnapshot {
    /// Players, in ascending id order.
    pub players: Vec<(PlayerId, BodyCodes)>,
    /// Cubes, in the scene's index order (empty in an essential part).
    pub cubes: Vec<CubeCodes>,
}

/// What [`SnapshotCodec::encode`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// The payload.
    pub bytes: Vec<u8>,
    /// Bits written (before padding to whole bytes).
    pub bits: usize,
    /// Cubes that differ from the baseline, so were sent.
    pub changed_cubes: usize,
    /// Players sent (always all of them).
    pub players: usize,
    /// The baseline used; `None` for a full snapshot.
    pub baseline: Option<Tick>,
}

/// Why a compressed snapshot was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Malformed bytes.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The baseline it is encoded against is not (or no longer) held. The server falls
    /// back to a full snapshot once it sees the acknowledgements stop.
    #[error("snapshot refers to baseline tick {0:?}, which is not held")]
    MissingBaseline(Tick),
}

/// Encodes and decodes [`QuantizedSnapshot`]s with one quantization and set of limits.
/// Both ends must use equal codecs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotCodec {
    /// The grid the state lives on; must equal the server scene's.
    pub quantization: StateQuantization,
    /// Counts a decoder accepts.
    pub limits: SnapshotLimits,
    /// Ticks per second of the simulation whose ticks snapshots carry. A moving body's
    /// position is sent against where its velocities say it went since the baseline
    /// (see the module docs), which needs the length of a tick. 0 turns that off and
    /// diffs against the baseline's position. Both ends must use the same rate; one that
    /// does not match the simulation only costs bytes.
    pub tick_hz: u32,
}

impl Default for SnapshotCodec {
    fn default() -> Self {
        Self::new(StateQuantization::default())
    }
}

/// Width field of a vector delta: widths 0..=31.
const WIDTH_BITS: u32 = 5;

impl QuantizedSnapshot {
    /// The scene's state in quantized form. Players' codes are exactly their state when
    /// the scene snaps players ([`super::CubeSceneConfig::quantize`] with the same
    /// quantization); cubes, never snapped, are their state rounded to the grid.
    pub fn capture(scene: &CubeScene, q: &StateQuantization) -> Self {
        Self::from_snapshot(&CubeSnapshot::capture(scene), q)
    }

    /// Only the players: the essential part, small enough for one packet.
    pub fn players_only(&self) -> Self {
        Self {
            players: self.players.clone(),
            cubes: Vec::new(),
        }
    }

    /// Quantizes a plain snapshot.
    pub fn from_snapshot(snapshot: &CubeSnapshot, q: &StateQuantization) -> Self {
        let players = snapshot
            .players
            .iter()
            .map(|(id, s)| (*id, q.encode(s)))
            .collect();
        let cubes = snapshot
            .cubes
            .iter()
            .map(|c| CubeCodes::quantize(&c.body_state(), c.awake, q))
            .collect();
        Self { players, cubes }
    }

    /// The plain snapshot these codes stand for.
    pub fn to_snapshot(&self, q: &StateQuantization) -> CubeSnapshot {
        let players = self
            .players
            .iter()
            .map(|(id, c)| (*id, q.decode(c)))
            .collect();
        let cubes = self.cubes.iter().map(|c| c.to_pose(q)).collect();
        CubeSnapshot { players, cubes }
    }

    /// Codes of player `id`, if present.
    pub fn player(&self, id: PlayerId) -> Option<&BodyCodes> {
        self.players
            .binary_search_by_key(&id, |(p, _)| *p)
            .ok()
            .map(|i| &self.players[i].1)
    }
}

impl SnapshotCodec {
    /// A codec for `quantization` with default limits.
    pub fn new(quantization: StateQuantization) -> Self {
        Self {
            quantization,
            limits: SnapshotLimits::default(),
            tick_hz: super::CubeSceneConfig::default().tick_hz,
        }
    }

    /// This codec for a simulation running at `tick_hz`.
    pub fn with_tick_hz(self, tick_hz: u32) -> Self {
        Self { tick_hz, ..self }
    }

    /// Where a body at `from` would be `age` ticks later had its velocity changed evenly
    /// to `to_linvel`: `from + (v_from + v_to) / 2 * t`, exact for constant acceleration
    /// (falling, sliding to a stop under friction). Integer arithmetic, rounded to
    /// nearest, so encoder and decoder agree to the bit; clamped to the position limit,
    /// which keeps every difference against it within the vector codec's range.
    ///
    /// Computed in `i128`, where nothing can overflow for any age (the baseline age comes
    /// from the wire) and any quantization: `|sum| < 2^31`, `age << shift < 2^62`,
    /// `den < 2^63`. Wherever the product fits `i64` (always, with the default
    /// quantization), the result is the same as an `i64` computation's.
    fn predicted_position(&self, from: &BodyCodes, to_linvel: [i32; 3], age: u32) -> [i32; 3] {
        let q = &self.quantization;
        if age == 0 || self.tick_hz == 0 {
            return from.position;
        }
        // Position steps per (linvel step x tick): 2^p / (2^v * hz); doubled for the mean.
        let num_scale = i128::from(age) << q.position_shift.min(30);
        let den = (2i128 << q.linvel_shift.min(30)) * i128::from(self.tick_hz);
        let limit = i128::from(q.position_code_limit());
        [0, 1, 2].map(|i| {
            let sum = i128::from(from.linvel[i]) + i128::from(to_linvel[i]);
            let num = sum * num_scale;
            // Round half away from zero, the same on both ends.
            let step = ((num.abs() + den / 2) / den) * num.signum();
            (i128::from(from.position[i]) + step).clamp(-limit, limit) as i32
        })
    }

    /// What an entity is diffed against when the baseline lacks it: at the origin, with
    /// the identity rotation, at rest.
    fn zero_body(&self) -> BodyCodes {
        BodyCodes {
            rotation: self.quantization.identity_rotation(),
            ..BodyCodes::default()
        }
    }

    /// What player `id` is diffed against, and over how many ticks its velocities
    /// predict: its baseline state and the baseline's age, or a zero state (nothing to
    /// predict from) for a player the baseline lacks.
    fn player_base(
        &self,
        base: Option<&QuantizedSnapshot>,
        id: PlayerId,
        age: u32,
    ) -> (BodyCodes, u32) {
        match base.and_then(|b| b.player(id)) {
            Some(from) => (*from, age),
            None => (self.zero_body(), 0),
        }
    }

    /// [`Self::zero_body`], asleep.
    fn zero_cube(&self) -> CubeCodes {
        CubeCodes {
            body: self.zero_body(),
            awake: false,
        }
    }

    /// Encodes `snapshot`, the state at `tick` (players in ascending id order, codes as
    /// [`QuantizedSnapshot::from_snapshot`] makes them), against `baseline` (a tick the client
    /// acknowledged and the snapshot recorded for it), or in full when `baseline` is
    /// `None`. A baseline that is not older than `tick`, or has a different cube count
    /// (a different scene), is not usable and the snapshot is sent in full.
    pub fn encode(
        &self,
        snapshot: &QuantizedSnapshot,
        tick: Tick,
        baseline: Option<(Tick, &QuantizedSnapshot)>,
    ) -> Encoded {
        let baseline = baseline.filter(|(t, b)| *t < tick && b.cubes.len() == snapshot.cubes.len());
        let mut w = BitWriter::with_capacity(64 + snapshot.cubes.len() / 4);
        w.write_bool(baseline.is_some());
        if let Some((t, _)) = baseline {
            w.write_var_u32(tick.0 - t.0 - 1);
        }
        let base = baseline.map(|(_, b)| b);
        let age = baseline.map_or(0, |(t, _)| tick.0 - t.0);

        w.write_var_u32(snapshot.players.len() as u32);
        // u64: the id after `u32::MAX` is 2^32, which a `u32` cursor cannot hold.
        let mut next_id = 0u64;
        for (id, codes) in &snapshot.players {
            debug_assert!(
                u64::from(*id) >= next_id,
                "players must be in ascending id order"
            );
            // At most `id`, so it fits.
            w.write_var_u32(u64::from(*id).saturating_sub(next_id) as u32);
            next_id = u64::from(*id) + 1;
            let (from, age) = self.player_base(base, *id, age);
            self.write_body(&mut w, &from, codes, true, age);
        }

        w.write_var_u32(snapshot.cubes.len() as u32);
        let zero = self.zero_cube();
        let base_cube = |i: usize| base.map_or(zero, |b| b.cubes[i]);
        let changed: Vec<usize> = (0..snapshot.cubes.len())
            .filter(|&i| snapshot.cubes[i] != base_cube(i))
            .collect();
        w.write_var_u32(changed.len() as u32);
        let mut next = 0usize;
        for &i in &changed {
            w.write_var_u32((i - next) as u32);
            next = i + 1;
            let (from, to) = (base_cube(i), snapshot.cubes[i]);
            w.write_bool(to.awake);
            self.write_body(&mut w, &from.body, &to.body, to.awake, age);
        }
        let bits = w.bit_len();
        Encoded {
            bytes: w.into_bytes(),
            bits,
            changed_cubes: changed.len(),
            players: snapshot.players.len(),
            baseline: baseline.map(|(t, _)| t),
        }
    }

    /// Decodes a payload [`Self::encode`] made for `tick`, looking its baseline up in
    /// `baselines`. Everything is checked: counts against the limits and the baseline,
    /// codes against the quantization's limits, and canonical form (see the module docs).
    pub fn decode(
        &self,
        bytes: &[u8],
        tick: Tick,
        baselines: &BaselineHistory<QuantizedSnapshot>,
    ) -> Result<QuantizedSnapshot, SnapshotError> {
        let mut r = BitReader::new(bytes);
        let (base, age) = if r.read_bool()? {
            let age = r.read_var_u32()?.checked_add(1).ok_or(WireError::Invalid {
                what: "baseline age",
            })?;
            let at = Tick(tick.0.checked_sub(age).ok_or(WireError::Invalid {
                what: "baseline before tick 0",
            })?);
            let base = baselines
                .get(at)
                .ok_or(SnapshotError::MissingBaseline(at))?;
            (Some(base), age)
        } else {
            (None, 0)
        };

        let n_players = read_count(&mut r, self.limits.max_players, "player count")?;
        let mut players = Vec::with_capacity(n_players);
        // The encoder's cursor: u64, so `u32::MAX` is a valid last id.
        let mut next_id = 0u64;
        for _ in 0..n_players {
            let id = PlayerId::try_from(next_id + u64::from(r.read_var_u32()?))
                .map_err(|_| WireError::Invalid { what: "player id" })?;
            next_id = u64::from(id) + 1;
            let (from, age) = self.player_base(base, id, age);
            players.push((id, self.read_body(&mut r, &from, true, age)?));
        }

        let n_cubes = read_count(&mut r, self.limits.max_cubes, "cube count")?;
        if base.is_some_and(|b| b.cubes.len() != n_cubes) {
            return Err(WireError::Invalid {
                what: "cube count differs from the baseline",
            }
            .into());
        }
        let mut cubes = match base {
            Some(b) => b.cubes.clone(),
            None => vec![self.zero_cube(); n_cubes],
        };
        let n_changed = read_count(&mut r, n_cubes, "changed cube count")?;
        let mut next = 0usize;
        for _ in 0..n_changed {
            let i = next.saturating_add(r.read_var_u32()? as usize);
            let Some(slot) = cubes.get_mut(i) else {
                return Err(WireError::Invalid {
                    what: "changed cube index",
                }
                .into());
            };
            next = i + 1;
            let from = *slot;
            let awake = r.read_bool()?;
            let body = self.read_body(&mut r, &from.body, awake, age)?;
            let to = CubeCodes { body, awake };
            if to == from {
                return Err(WireError::Invalid {
                    what: "unchanged cube listed as changed",
                }
                .into());
            }
            *slot = to;
        }
        r.finish()?;
        Ok(QuantizedSnapshot { players, cubes })
    }

    /// Velocities first: the decoder needs the new linear velocity to predict the
    /// position the position is diffed against.
    fn write_body(
        &self,
        w: &mut BitWriter,
        from: &BodyCodes,
        to: &BodyCodes,
        moving: bool,
        age: u32,
    ) {
        if moving {
            write_vector(w, from.linvel, to.linvel);
            write_vector(w, from.angvel, to.angvel);
        }
        let predicted = self.predicted_position(from, to.linvel, age);
        write_vector(w, predicted, to.position);
        self.write_rotation(w, from.rotation, to.rotation);
    }

    fn read_body(
        &self,
        r: &mut BitReader<'_>,
        from: &BodyCodes,
        moving: bool,
        age: u32,
    ) -> Result<BodyCodes, WireError> {
        let (linvel, angvel) = if moving {
            (read_vector(r, from.linvel)?, read_vector(r, from.angvel)?)
        } else {
            ([0; 3], [0; 3])
        };
        let predicted = self.predicted_position(from, linvel, age);
        let position = read_vector(r, predicted)?;
        let rotation = self.read_rotation(r, from.rotation)?;
        let codes = BodyCodes {
            position,
            rotation,
            linvel,
            angvel,
        };
        if !self.quantization.codes_valid(&codes) {
            return Err(WireError::Invalid {
                what: "body state outside the quantization's limits",
            });
        }
        Ok(codes)
    }

    /// The dropped index and the three levels of a packed rotation, levels as signed
    /// numbers so they can be differenced like any vector.
    fn rotation_parts(&self, packed: u64) -> (u64, [i32; 3]) {
        let (k, levels) = self.quantization.rotation_codec().split(packed);
        (k, levels.map(|l| l as i32))
    }

    /// The inverse of `rotation_parts`; `None` when a level is outside the codec's width.
    fn rotation_from_parts(&self, k: u64, parts: [i32; 3]) -> Option<u64> {
        let codec = self.quantization.rotation_codec();
        let width = codec.bits_per_component();
        let mut levels = [0u32; 3];
        for (level, p) in levels.iter_mut().zip(parts) {
            *level = u32::try_from(p).ok().filter(|&l| l >> width == 0)?;
        }
        Some(codec.join(k, levels))
    }

    fn write_rotation(&self, w: &mut BitWriter, from: u64, to: u64) {
        w.write_bool(from != to);
        if from == to {
            return;
        }
        let (k_from, p_from) = self.rotation_parts(from);
        let (k_to, p_to) = self.rotation_parts(to);
        w.write_bool(k_from == k_to);
        if k_from == k_to {
            write_vector(w, p_from, p_to);
        } else {
            w.write_bits_u64(to, self.quantization.rotation_codec().bits());
        }
    }

    fn read_rotation(&self, r: &mut BitReader<'_>, from: u64) -> Result<u64, WireError> {
        if !r.read_bool()? {
            return Ok(from);
        }
        let (k_from, p_from) = self.rotation_parts(from);
        let to = if r.read_bool()? {
            let parts = read_vector(r, p_from)?;
            if parts == p_from {
                return Err(WireError::Invalid {
                    what: "unchanged rotation sent",
                });
            }
            self.rotation_from_parts(k_from, parts)
                .ok_or(WireError::Invalid {
                    what: "rotation component",
                })?
        } else {
            let codec = self.quantization.rotation_codec();
            let to = r.read_bits_u64(codec.bits())?;
            if to & 3 == k_from {
                return Err(WireError::Invalid {
                    what: "absolute rotation where a delta fits",
                });
            }
            to
        };
        // The pattern must be canonical; codes_valid checks it with the rest of the body.
        Ok(to)
    }
}

fn read_count(r: &mut BitReader<'_>, max: usize, what: &'static str) -> Result<usize, WireError> {
    let n = r.read_var_u32()? as usize;
    if n > max {
        return Err(WireError::TooLarge { what, len: n, max });
    }
    Ok(n)
}

/// Codes stay below 2^29 in magnitude, so a difference zig-zags into 31 bits.
fn write_vector(w: &mut BitWriter, from: [i32; 3], to: [i32; 3]) {
    let zz = [0, 1, 2].map(|i| zigzag(to[i].wrapping_sub(from[i])));
    let width = 32 - zz.iter().fold(0, |a, &z| a | z).leading_zeros();
    w.write_bits(width.min(31), WIDTH_BITS);
    if width > 0 {
        for z in zz {
            w.write_bits(z, width);
        }
    }
}

fn read_vector(r: &mut BitReader<'_>, from: [i32; 3]) -> Result<[i32; 3], WireError> {
    let width = r.read_bits(WIDTH_BITS)?;
    if width == 0 {
        return Ok(from);
    }
    let mut zz = [0u32; 3];
    for z in &mut zz {
        *z = r.read_bits(width)?;
    }
    if zz.iter().fold(0, |a, &z| a | z) >> (width - 1) == 0 {
        return Err(WireError::Invalid {
            what: "vector delta wider than needed",
        });
    }
    let mut out = [0i32; 3];
    for i in 0..3 {
        out[i] = from[i]
            .checked_add(unzigzag(zz[i]))
            .ok_or(WireError::Invalid {
                what: "vector delta overflows",
            })?;
    }
    Ok(out)
}
