//! The cube scene on the replication layer: its two kinds, declared once, and the
//! conversions between the scene and the layer's entities.
//!
//! Entity ids: cube `i` is entity `i`; player `p` is entity `cube_count + p`.

use super::quantize::StateQuantization;
use super::snapshot::{CubePose, CubeSnapshot};
use super::{BodyState, CubeScene, PlayerId};
use glam::{Quat, Vec3};
use lagless_core::Tick;
use lagless_replication::{
    Kind, KindId, ReplicationClient, ReplicationError, ReplicationServer, Schema, StateReader,
    StateWriter,
};

/// The players' kind.
pub const PLAYER: KindId = 0;
/// The cubes' kind.
pub const CUBE: KindId = 1;

/// The scene's schema on the grid of `q`: players and cubes carry position, rotation and
/// both velocities; cubes also whether they are awake. Players matter four times as much
/// as a cube when the budget is short.
pub fn schema(q: &StateQuantization) -> Schema {
    let body = |name: &str| body_kind(q, name);
    let built = Schema::new()
        .kind(body("player").priority(4.0))
        .kind(body("cube").bool("awake"))
        .build();
    // Every valid quantization builds; an invalid one gives an empty schema, which
    // refuses every entity with a typed error rather than panicking here.
    built.unwrap_or_default()
}

/// The entity id of player `player` in a scene of `cubes` cubes.
pub fn player_entity(cubes: usize, player: PlayerId) -> Option<u32> {
    u32::try_from(cubes).ok()?.checked_add(player)
}

/// A rigid body's kind on `q`'s grid: position, rotation, and both velocities (the linear
/// one declared as the position's, for blending and the predicted-position delta).
pub(crate) fn body_kind(q: &StateQuantization, name: &str) -> Kind {
    let step = |shift: u32| 1.0 / (1u64 << shift.min(31)) as f32;
    Kind::new(name)
        .vec3("position", q.position_limit as f32, step(q.position_shift))
        .rotation("rotation", q.rotation_bits.clamp(2, 16) as u8)
        .vec3("linvel", q.linvel_limit as f32, step(q.linvel_shift))
        .velocity_of("position")
        .vec3("angvel", q.angvel_limit as f32, step(q.angvel_shift))
}

/// Writes a body's state as [`body_kind`] declares it.
pub(crate) fn write_body(w: &mut StateWriter, s: &BodyState) {
    w.vec3(s.position.to_array());
    w.rotation(s.rotation.to_array());
    w.vec3(s.linvel.to_array());
    w.vec3(s.angvel.to_array());
}

/// Reads what [`write_body`] wrote.
pub(crate) fn read_body(r: &mut StateReader) -> BodyState {
    BodyState {
        position: Vec3::from(r.vec3()),
        rotation: Quat::from_array(r.rotation()),
        linvel: Vec3::from(r.vec3()),
        angvel: Vec3::from(r.vec3()),
    }
}

/// Writes the scene's state into `server`: spawns what it lacks, updates the rest (an
/// update that quantizes to the same codes changes nothing), despawns players that left.
/// A sleeping cube is at rest: its velocities are sent as zero.
pub fn capture(scene: &CubeScene, server: &mut ReplicationServer) -> Result<(), ReplicationError> {
    let n = scene.cube_count();
    for (i, state, awake) in scene.cubes() {
        let write = |w: &mut StateWriter| {
            let s = if awake {
                state
            } else {
                BodyState {
                    linvel: Vec3::ZERO,
                    angvel: Vec3::ZERO,
                    ..state
                }
            };
            write_body(w, &s);
            w.bool(awake);
        };
        server.put(i as u32, CUBE, write)?;
    }
    let mut players = Vec::new();
    for (p, state) in scene.player_states() {
        let id = player_entity(n, p).ok_or(ReplicationError::IdOutOfRange(u64::from(p)))?;
        players.push(id);
        server.put(id, PLAYER, |w| write_body(w, &state))?;
    }
    let gone: Vec<u32> = server
        .ids()
        .filter(|&id| id as usize >= n && !players.contains(&id))
        .collect();
    for id in gone {
        server.despawn(id)?;
    }
    Ok(())
}

/// How far a body whose newest state is older than the snapshot is carried forward by its
/// velocity, s ([`ReplicationClient::values_at`]): beyond a quarter second a guess
/// ignores too much (floors, collisions) to beat holding still.
pub const MAX_DEAD_RECKONING_SECS: f32 = 0.25;

/// The scene as the client knows it at `tick`: every player and the `cubes` cubes, bodies
/// the budget held back carried forward by their velocity. A cube not yet received has a
/// NaN position, asleep, so nothing mistakes it for one at the origin.
pub fn snapshot(client: &ReplicationClient, cubes: usize, tick: Tick) -> CubeSnapshot {
    let mut out = CubeSnapshot {
        players: Vec::new(),
        cubes: vec![
            CubePose {
                position: Vec3::NAN,
                rotation: Quat::IDENTITY,
                awake: false,
                linvel: Vec3::ZERO,
                angvel: Vec3::ZERO,
            };
            cubes
        ],
    };
    client.read_all_at(tick, MAX_DEAD_RECKONING_SECS, |id, e, mut r| match e.kind {
        PLAYER if id as usize >= cubes => {
            out.players.push((id - cubes as u32, read_body(&mut r)));
        }
        CUBE if (id as usize) < cubes => {
            let s = read_body(&mut r);
            out.cubes[id as usize] = CubePose {
                position: s.position,
                rotation: s.rotation,
                awake: r.bool(),
                linvel: s.linvel,
                angvel: s.angvel,
            };
        }
        _ => {}
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cubes::{CubeInput, CubeSceneConfig};
    use lagless_replication::{ClientConfig, ReplicationConfig};
    use std::time::Duration;

    #[test]
    fn the_client_sees_the_scene_on_the_grid() {
        let config = CubeSceneConfig {
            grid: 4,
            ..CubeSceneConfig::default()
        };
        let q = config.quantize.unwrap_or_default();
        let mut scene = CubeScene::new(config);
        scene.add_player(1);
        let mut server = ReplicationServer::new(
            schema(&q),
            ReplicationConfig {
                budget: lagless_replication::BudgetConfig {
                    max_kbps: 0.0,
                    ..Default::default()
                },
                ..ReplicationConfig::default()
            },
        );
        server.add_client(1);
        let mut client = ReplicationClient::new(schema(&q), ClientConfig::default());
        for t in 1..120u32 {
            scene.step(&[(1, CubeInput::FORWARD)]);
            capture(&scene, &mut server).unwrap();
            let s = server.encode(1, Tick(t), Duration::ZERO).unwrap();
            client.receive(Tick(t), &s.bytes).unwrap();
            server.acknowledge(1, Tick(t), Duration::ZERO);
        }
        let seen = snapshot(&client, scene.cube_count(), Tick(119));
        let truth = CubeSnapshot::capture(&scene);
        // Players are snapped by the scene: the client has them exactly.
        assert_eq!(seen.players, truth.players);
        for (a, b) in seen.cubes.iter().zip(&truth.cubes) {
            assert!((a.position - b.position).abs().max_element() <= q.position_max_error());
            assert_eq!(a.awake, b.awake);
        }
    }
}
