//! The cube scene on the wire: [`CubeInput`] as a protocol input, and [`CubeSnapshot`],
//! the server's picture of the world sent to clients.
//!
//! This is the plain, uncompressed encoding (full-precision floats for every body): the
//! baseline that the quantised, delta-encoded snapshots are measured against. Every
//! decoder checks counts and values, because these bytes come from the network.

use super::{BodyState, CubeInput, CubeScene, PlayerId};
use glam::{Quat, Vec3};
use lagless_wire::{Reader, WireError, Writer};

impl lagless_core::Input for CubeInput {
    fn encode(&self, w: &mut Writer) {
        w.write_u8(self.bits());
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        CubeInput::from_bits(r.read_u8()?).ok_or(WireError::Invalid {
            what: "cube input bits",
        })
    }
}

/// One non-player cube as replicated: its pose, whether it is moving ("interacting" in
/// Fiedler's "Snapshot Interpolation") and, when it is, its velocities (which prediction
/// needs to simulate it on).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CubePose {
    /// Centre of the cube.
    pub position: Vec3,
    /// Orientation (unit quaternion).
    pub rotation: Quat,
    /// False when the physics engine has put the cube to sleep.
    pub awake: bool,
    /// Linear velocity; zero for a sleeping cube.
    pub linvel: Vec3,
    /// Angular velocity; zero for a sleeping cube.
    pub angvel: Vec3,
}

impl CubePose {
    /// The full body state this pose describes.
    pub fn body_state(&self) -> BodyState {
        BodyState {
            position: self.position,
            rotation: self.rotation,
            linvel: self.linvel,
            angvel: self.angvel,
        }
    }
}

/// The state of the cube scene at one tick, as sent to clients.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CubeSnapshot {
    /// Every player's full rigid-body state (the client's own player included, which
    /// prediction needs), in id order.
    pub players: Vec<(PlayerId, BodyState)>,
    /// Every cube, in the scene's stable index order.
    pub cubes: Vec<CubePose>,
}

/// Bounds a decoder enforces before allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotLimits {
    /// Most players accepted.
    pub max_players: usize,
    /// Most cubes accepted.
    pub max_cubes: usize,
}

impl Default for SnapshotLimits {
    fn default() -> Self {
        Self {
            max_players: 256,
            max_cubes: 4096,
        }
    }
}

/// Quaternions further than this from unit length are rejected as corrupt.
const UNIT_TOLERANCE: f32 = 1e-3;

impl CubeSnapshot {
    /// Captures the scene's current state.
    pub fn capture(scene: &CubeScene) -> Self {
        let players = Self::capture_players(scene).players;
        let cubes = scene
            .cubes()
            .map(|(_, s, awake)| CubePose {
                position: s.position,
                rotation: s.rotation,
                awake,
                linvel: if awake { s.linvel } else { Vec3::ZERO },
                angvel: if awake { s.angvel } else { Vec3::ZERO },
            })
            .collect();
        Self { players, cubes }
    }

    /// Only the players' states: the *essential* part a client needs every tick to
    /// reconcile its own player, small enough for one packet (57 bytes a player).
    pub fn capture_players(scene: &CubeScene) -> Self {
        let players = scene.player_states().collect();
        Self {
            players,
            cubes: Vec::new(),
        }
    }

    /// True when the snapshot carries the world's cubes, not just the players.
    pub fn has_world(&self) -> bool {
        !self.cubes.is_empty()
    }

    /// The state of player `id`, if present.
    pub fn player(&self, id: PlayerId) -> Option<&BodyState> {
        self.players.iter().find(|(p, _)| *p == id).map(|(_, s)| s)
    }

    /// Appends the encoding: 52 bytes per player, 28 per cube plus one awake bit, and 24
    /// more per awake cube for its velocities.
    pub fn encode(&self, w: &mut Writer) {
        w.write_varint_u32(self.players.len() as u32);
        for (id, s) in &self.players {
            w.write_varint_u32(*id);
            write_vec3(w, s.position);
            write_quat(w, s.rotation);
            write_vec3(w, s.linvel);
            write_vec3(w, s.angvel);
        }
        w.write_varint_u32(self.cubes.len() as u32);
        for c in &self.cubes {
            write_vec3(w, c.position);
            write_quat(w, c.rotation);
        }
        for chunk in self.cubes.chunks(8) {
            let mut byte = 0u8;
            for (bit, c) in chunk.iter().enumerate() {
                byte |= u8::from(c.awake) << bit;
            }
            w.write_u8(byte);
        }
        for c in self.cubes.iter().filter(|c| c.awake) {
            write_vec3(w, c.linvel);
            write_vec3(w, c.angvel);
        }
    }

    /// Encodes into a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(16 + self.players.len() * 56 + self.cubes.len() * 29);
        self.encode(&mut w);
        w.into_bytes()
    }

    /// Decodes a whole snapshot; trailing bytes, non-finite numbers, non-unit quaternions,
    /// duplicate or unordered player ids and counts above `limits` are errors.
    pub fn decode(bytes: &[u8], limits: SnapshotLimits) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        let n_players = r.read_count(limits.max_players, "player count")?;
        let mut players: Vec<(PlayerId, BodyState)> = Vec::with_capacity(n_players);
        for _ in 0..n_players {
            let id = r.read_varint_u32()?;
            if players.last().is_some_and(|(last, _)| *last >= id) {
                return Err(WireError::Invalid {
                    what: "player id order",
                });
            }
            let state = BodyState {
                position: read_vec3(&mut r)?,
                rotation: read_quat(&mut r)?,
                linvel: read_vec3(&mut r)?,
                angvel: read_vec3(&mut r)?,
            };
            players.push((id, state));
        }
        let n_cubes = r.read_count(limits.max_cubes, "cube count")?;
        // Check the size up front so a lying count cannot make us allocate.
        let needed = n_cubes * 28 + n_cubes.div_ceil(8);
        if r.remaining() < needed {
            return Err(WireError::UnexpectedEnd {
                needed,
                remaining: r.remaining(),
            });
        }
        let mut cubes = Vec::with_capacity(n_cubes);
        for _ in 0..n_cubes {
            cubes.push(CubePose {
                position: read_vec3(&mut r)?,
                rotation: read_quat(&mut r)?,
                awake: false,
                linvel: Vec3::ZERO,
                angvel: Vec3::ZERO,
            });
        }
        for chunk in 0..n_cubes.div_ceil(8) {
            let byte = r.read_u8()?;
            for bit in 0..8 {
                let i = chunk * 8 + bit;
                match cubes.get_mut(i) {
                    Some(c) => c.awake = byte & (1 << bit) != 0,
                    None if byte & (1 << bit) != 0 => {
                        return Err(WireError::Invalid {
                            what: "awake padding bits",
                        });
                    }
                    None => {}
                }
            }
        }
        let awake = cubes.iter().filter(|c| c.awake).count();
        if r.remaining() != awake * 24 {
            return Err(WireError::Invalid {
                what: "awake cube velocity block",
            });
        }
        for c in cubes.iter_mut().filter(|c| c.awake) {
            c.linvel = read_vec3(&mut r)?;
            c.angvel = read_vec3(&mut r)?;
        }
        r.finish()?;
        Ok(Self { players, cubes })
    }
}

fn write_vec3(w: &mut Writer, v: Vec3) {
    w.write_f32(v.x);
    w.write_f32(v.y);
    w.write_f32(v.z);
}

fn write_quat(w: &mut Writer, q: Quat) {
    w.write_f32(q.x);
    w.write_f32(q.y);
    w.write_f32(q.z);
    w.write_f32(q.w);
}

fn read_vec3(r: &mut Reader<'_>) -> Result<Vec3, WireError> {
    Ok(Vec3::new(r.read_f32()?, r.read_f32()?, r.read_f32()?))
}

fn read_quat(r: &mut Reader<'_>) -> Result<Quat, WireError> {
    let q = Quat::from_xyzw(r.read_f32()?, r.read_f32()?, r.read_f32()?, r.read_f32()?);
    if (q.length() - 1.0).abs() > UNIT_TOLERANCE {
        return Err(WireError::Invalid {
            what: "non-unit quaternion",
        });
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cubes::CubeSceneConfig;
    use lagless_core::Input;

    fn small_scene() -> CubeScene {
        let mut scene = CubeScene::new(CubeSceneConfig {
            grid: 4,
            ..CubeSceneConfig::default()
        });
        scene.add_player(3);
        scene.add_player(9);
        for _ in 0..10 {
            scene.step(&[(3, CubeInput::FORWARD)]);
        }
        scene
    }

    #[test]
    fn round_trip_is_exact_and_byte_identical() {
        let snap = CubeSnapshot::capture(&small_scene());
        assert_eq!(snap.players.len(), 2);
        assert_eq!(snap.cubes.len(), 16);
        let bytes = snap.to_bytes();
        let awake = snap.cubes.iter().filter(|c| c.awake).count();
        assert_eq!(bytes.len(), 1 + 2 * (1 + 52) + 1 + 16 * 28 + 2 + awake * 24);
        let back = CubeSnapshot::decode(&bytes, SnapshotLimits::default()).unwrap();
        assert_eq!(back, snap);
        assert_eq!(back.to_bytes(), bytes);
        assert_eq!(back.player(3), snap.player(3));
        assert!(back.player(4).is_none());
    }

    #[test]
    fn awake_cubes_carry_their_velocities() {
        let mut scene = small_scene();
        let mut s = scene.cube_state(5).unwrap();
        s.linvel = Vec3::new(1.0, 2.0, -3.0);
        s.angvel = Vec3::new(0.5, 0.0, 0.25);
        scene.set_cube_state(5, &s, true);
        let snap = CubeSnapshot::capture(&scene);
        assert!(snap.cubes[5].awake);
        assert_eq!(snap.cubes[5].linvel, s.linvel);
        let bytes = snap.to_bytes();
        let back = CubeSnapshot::decode(&bytes, SnapshotLimits::default()).unwrap();
        assert_eq!(back, snap);
        assert_eq!(back.cubes[5].body_state(), snap.cubes[5].body_state());
        // A velocity block that disagrees with the awake bits is rejected.
        let mut short = bytes.clone();
        short.truncate(bytes.len() - 24);
        assert!(CubeSnapshot::decode(&short, SnapshotLimits::default()).is_err());
    }

    #[test]
    fn rejects_malformed_snapshots() {
        let bytes = CubeSnapshot::capture(&small_scene()).to_bytes();
        for n in 0..bytes.len() {
            assert!(
                CubeSnapshot::decode(&bytes[..n], SnapshotLimits::default()).is_err(),
                "prefix {n}"
            );
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(CubeSnapshot::decode(&extra, SnapshotLimits::default()).is_err());
        let tight = SnapshotLimits {
            max_players: 1,
            max_cubes: 4096,
        };
        assert!(matches!(
            CubeSnapshot::decode(&bytes, tight),
            Err(WireError::TooLarge { .. })
        ));
        // A NaN in the first player's x position.
        let mut nan = bytes.clone();
        nan[2..6].copy_from_slice(&f32::NAN.to_bits().to_le_bytes());
        assert!(CubeSnapshot::decode(&nan, SnapshotLimits::default()).is_err());
        // A quaternion scaled to length 2.
        let mut q = bytes.clone();
        q[14..18].copy_from_slice(&2.0f32.to_bits().to_le_bytes());
        assert!(CubeSnapshot::decode(&q, SnapshotLimits::default()).is_err());
        // A cube count far beyond the bytes present fails before allocating.
        let mut w = Writer::new();
        w.write_varint_u32(0);
        w.write_varint_u32(4000);
        assert!(matches!(
            CubeSnapshot::decode(w.as_bytes(), SnapshotLimits::default()),
            Err(WireError::UnexpectedEnd { .. })
        ));
    }

    #[test]
    fn input_codec_rejects_unknown_bits() {
        let mut w = Writer::new();
        CubeInput::FORWARD.with(CubeInput::JUMP).encode(&mut w);
        let mut r = Reader::new(w.as_bytes());
        assert_eq!(
            CubeInput::decode(&mut r).unwrap(),
            CubeInput::FORWARD.with(CubeInput::JUMP)
        );
        assert!(CubeInput::decode(&mut Reader::new(&[0x80])).is_err());
    }
}
