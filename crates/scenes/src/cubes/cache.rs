//! Incremental snapshot capture (server) and conversion to floats (client).
//!
//! Most of the 900 cubes sleep, so from one snapshot to the next nearly every body is
//! unchanged, yet quantizing or dequantizing it (a smallest-three quaternion pack or
//! unpack each) is what a whole-world capture or conversion spends its time on. Both
//! caches here are memos keyed on exactly what determines their output: the capture
//! cache on a body's raw `f32` bits and sleep flag, the conversion cache on a cube's
//! codes. A hit therefore returns what the non-incremental path
//! ([`QuantizedSnapshot::capture`], [`QuantizedSnapshot::to_snapshot`]) would, bit for
//! bit, without knowing *why* a body is unchanged: no reliance on rapier's sleep flags
//! (a sleeping body the game teleports is still noticed), on tick order (snapshots
//! decoded out of order just miss more), or on which cube sits at an index (a changed
//! cube count only costs misses).

use super::delta::{CubeCodes, QuantizedSnapshot};
use super::quantize::{BodyCodes, StateQuantization};
use super::snapshot::{CubePose, CubeSnapshot};
use super::{BodyState, CubeScene, PlayerId};
use glam::{Quat, Vec3};
use rapier3d::prelude::RigidBody;

/// A body's raw state as bit patterns plus its sleep flag. Bits, not `f32` equality:
/// equal bits always quantize equally, while `==` calls `-0.0` and `0.0` equal (which
/// the quantizers need not treat alike) and would never let a NaN hit.
type StateKey = [u32; 14];

/// The key of a state given by parts.
fn state_key(p: Vec3, r: Quat, v: Vec3, w: Vec3, awake: bool) -> StateKey {
    let b = f32::to_bits;
    [
        b(p.x),
        b(p.y),
        b(p.z),
        b(r.x),
        b(r.y),
        b(r.z),
        b(r.w),
        b(v.x),
        b(v.y),
        b(v.z),
        b(w.x),
        b(w.y),
        b(w.z),
        u32::from(awake),
    ]
}

/// Whether `key` is the key of a state given by parts, without building the state's own
/// key: see [`RawBody`] for why.
#[inline]
fn is_key_of(key: &StateKey, p: Vec3, r: Quat, v: Vec3, w: Vec3, awake: bool) -> bool {
    let diff = (p.x.to_bits() ^ key[0])
        | (p.y.to_bits() ^ key[1])
        | (p.z.to_bits() ^ key[2])
        | (r.x.to_bits() ^ key[3])
        | (r.y.to_bits() ^ key[4])
        | (r.z.to_bits() ^ key[5])
        | (r.w.to_bits() ^ key[6])
        | (v.x.to_bits() ^ key[7])
        | (v.y.to_bits() ^ key[8])
        | (v.z.to_bits() ^ key[9])
        | (w.x.to_bits() ^ key[10])
        | (w.y.to_bits() ^ key[11])
        | (w.z.to_bits() ^ key[12])
        | (u32::from(awake) ^ key[13]);
    diff == 0
}

/// A body's raw state read where it lives (a rapier body, a plain snapshot's pose).
///
/// The comparison runs for every body of every capture and almost always succeeds, so
/// it must cost a few loads. Copying the state into a `BodyState` first and comparing
/// that made an incremental capture of the bench's ticks about 1.4x dearer (30 µs
/// against 22 µs): the copy is written with narrow stores that the comparison's wide
/// loads then wait on, a store-forwarding stall per body.
trait RawBody {
    /// Whether `key` is this body's key.
    fn is_keyed_by(&self, key: &StateKey) -> bool;
    /// The state and sleep flag, for a miss.
    fn state(&self) -> (BodyState, bool);
}

impl RawBody for RigidBody {
    #[inline]
    fn is_keyed_by(&self, key: &StateKey) -> bool {
        let pose = self.position();
        let (p, r) = (pose.translation, pose.rotation);
        is_key_of(key, p, r, self.linvel(), self.angvel(), !self.is_sleeping())
    }

    fn state(&self) -> (BodyState, bool) {
        (BodyState::of(self), !self.is_sleeping())
    }
}

impl RawBody for CubePose {
    #[inline]
    fn is_keyed_by(&self, key: &StateKey) -> bool {
        let c = self;
        is_key_of(key, c.position, c.rotation, c.linvel, c.angvel, c.awake)
    }

    fn state(&self) -> (BodyState, bool) {
        (self.body_state(), self.awake)
    }
}

/// The server's capture cache: captures the world like [`QuantizedSnapshot::capture`],
/// re-quantizing only the bodies whose raw state changed since the previous capture.
///
/// Keep one per scene and capture every snapshot tick through it. Any sequence of
/// captures, from any scenes, gives the same snapshots as the non-incremental path; only
/// the cost depends on how much changed.
#[derive(Debug, Clone, Default)]
pub struct CaptureCache {
    /// The grid the cached codes are on; codes on another grid are worthless.
    quantization: Option<StateQuantization>,
    /// Players at the previous capture, in id order.
    players: Vec<(PlayerId, StateKey, BodyCodes)>,
    /// Cubes at the previous capture, by position in the snapshot. Keys and codes apart,
    /// so the codes go into the snapshot as one copy.
    cube_keys: Vec<StateKey>,
    cube_codes: Vec<CubeCodes>,
    /// Bodies quantized afresh by the latest capture.
    requantized: usize,
}

impl CaptureCache {
    /// An empty cache: the first capture quantizes everything.
    pub fn new() -> Self {
        Self::default()
    }

    /// The scene's state in quantized form, equal to [`QuantizedSnapshot::capture`].
    pub fn capture(&mut self, scene: &CubeScene, q: &StateQuantization) -> QuantizedSnapshot {
        self.begin(q);
        let mut n_players = 0;
        for (j, (id, state)) in scene.player_states().enumerate() {
            self.player(j, id, &state, q);
            n_players = j + 1;
        }
        let mut n_cubes = 0;
        for (j, body) in scene.cube_bodies().enumerate() {
            self.cube(j, body, q);
            n_cubes = j + 1;
        }
        self.finish(n_players, n_cubes)
    }

    /// A plain snapshot in quantized form, equal to [`QuantizedSnapshot::from_snapshot`].
    pub fn quantize(
        &mut self,
        snapshot: &CubeSnapshot,
        q: &StateQuantization,
    ) -> QuantizedSnapshot {
        self.begin(q);
        for (j, (id, state)) in snapshot.players.iter().enumerate() {
            self.player(j, *id, state, q);
        }
        for (j, c) in snapshot.cubes.iter().enumerate() {
            self.cube(j, c, q);
        }
        self.finish(snapshot.players.len(), snapshot.cubes.len())
    }

    /// Bodies (players and cubes) the latest capture had to quantize; the rest reused
    /// their codes.
    pub fn requantized(&self) -> usize {
        self.requantized
    }

    /// Forgets everything, as if new.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    fn begin(&mut self, q: &StateQuantization) {
        if self.quantization != Some(*q) {
            self.clear();
            self.quantization = Some(*q);
        }
        self.requantized = 0;
    }

    /// Player `j` of this capture. Players are few, so they go by `BodyState`.
    fn player(&mut self, j: usize, id: PlayerId, s: &BodyState, q: &StateQuantization) {
        // Always awake as far as the key goes: players carry no sleep flag.
        let (p, r, v, w) = (s.position, s.rotation, s.linvel, s.angvel);
        match self.players.get_mut(j) {
            Some(entry) if entry.0 == id && is_key_of(&entry.1, p, r, v, w, true) => return,
            Some(entry) => *entry = (id, state_key(p, r, v, w, true), q.encode(s)),
            None => {
                let key = state_key(p, r, v, w, true);
                self.players.push((id, key, q.encode(s)));
            }
        }
        self.requantized += 1;
    }

    /// Cube `j` of this capture.
    #[inline]
    fn cube(&mut self, j: usize, body: &impl RawBody, q: &StateQuantization) {
        if self
            .cube_keys
            .get(j)
            .is_some_and(|key| body.is_keyed_by(key))
        {
            return;
        }
        let (s, awake) = body.state();
        let key = state_key(s.position, s.rotation, s.linvel, s.angvel, awake);
        let codes = CubeCodes::quantize(&s, awake, q);
        if j < self.cube_keys.len() {
            self.cube_keys[j] = key;
            self.cube_codes[j] = codes;
        } else {
            self.cube_keys.push(key);
            self.cube_codes.push(codes);
        }
        self.requantized += 1;
    }

    /// Drops what lies past this capture's counts (a player who left shifts the rest:
    /// they miss once, then hit again) and returns the snapshot.
    fn finish(&mut self, n_players: usize, n_cubes: usize) -> QuantizedSnapshot {
        self.players.truncate(n_players);
        self.cube_keys.truncate(n_cubes);
        self.cube_codes.truncate(n_cubes);
        QuantizedSnapshot {
            players: self.players.iter().map(|&(id, _, c)| (id, c)).collect(),
            cubes: self.cube_codes.clone(),
        }
    }
}

/// The client's conversion cache: turns decoded codes into floats like
/// [`QuantizedSnapshot::to_snapshot`], dequantizing only what differs from the snapshot
/// it converted last (whichever tick that was) and copying the rest.
#[derive(Debug, Clone, Default)]
pub struct DecodeCache {
    /// The grid the cached floats were computed on.
    quantization: Option<StateQuantization>,
    /// Players last converted, in snapshot order, codes with their floats.
    players: Vec<(PlayerId, BodyCodes, BodyState)>,
    /// Cubes last converted, by position: the codes compared against, and their floats
    /// apart so the result's cubes are one copy.
    cube_codes: Vec<CubeCodes>,
    cube_poses: Vec<CubePose>,
    /// Bodies dequantized afresh by the latest conversion.
    converted: usize,
}

impl DecodeCache {
    /// An empty cache: the first conversion dequantizes everything.
    pub fn new() -> Self {
        Self::default()
    }

    /// `snapshot` as floats, bit-identical to [`QuantizedSnapshot::to_snapshot`].
    ///
    /// The cache then holds `snapshot`. An essential part (players only) would leave it
    /// holding no cubes, so convert those with [`QuantizedSnapshot::to_snapshot`] instead.
    pub fn to_snapshot(
        &mut self,
        snapshot: &QuantizedSnapshot,
        q: &StateQuantization,
    ) -> CubeSnapshot {
        if self.quantization != Some(*q) {
            self.clear();
            self.quantization = Some(*q);
        }
        let mut converted = 0;

        for (j, &(id, codes)) in snapshot.players.iter().enumerate() {
            match self.players.get_mut(j) {
                Some(entry) if entry.0 == id && entry.1 == codes => {}
                Some(entry) => {
                    *entry = (id, codes, q.decode(&codes));
                    converted += 1;
                }
                None => {
                    self.players.push((id, codes, q.decode(&codes)));
                    converted += 1;
                }
            }
        }
        self.players.truncate(snapshot.players.len());

        for (j, codes) in snapshot.cubes.iter().enumerate() {
            match self.cube_codes.get_mut(j) {
                Some(cached) if cached == codes => {}
                Some(cached) => {
                    *cached = *codes;
                    self.cube_poses[j] = codes.to_pose(q);
                    converted += 1;
                }
                None => {
                    self.cube_codes.push(*codes);
                    self.cube_poses.push(codes.to_pose(q));
                    converted += 1;
                }
            }
        }
        self.cube_codes.truncate(snapshot.cubes.len());
        self.cube_poses.truncate(snapshot.cubes.len());
        self.converted = converted;

        CubeSnapshot {
            players: self.players.iter().map(|&(id, _, s)| (id, s)).collect(),
            cubes: self.cube_poses.clone(),
        }
    }

    /// Bodies (players and cubes) the latest conversion had to dequantize; the rest were
    /// copied.
    pub fn converted(&self) -> usize {
        self.converted
    }

    /// Forgets everything, as if new.
    pub fn clear(&mut self) {
        *self = Self::default();
    }
}
