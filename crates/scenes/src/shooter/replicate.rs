//! The shooter on the replication layer: players and projectiles, declared once.
//!
//! Entity ids: player `p` is entity `p` (1..=256); the server's projectiles take ids
//! from 1024 up to the layer's limit. Predicted projectiles live in the clients' own
//! ranges above it and never travel in snapshots.

use super::{PlayerState, ProjectileState, ShooterKnown, ShooterScene};
use lagless_core::Tick;
use lagless_replication::{
    Kind, KindId, ReplicationClient, ReplicationError, ReplicationServer, Schema, StateWriter,
};

/// The players' kind.
pub const PLAYER: KindId = 0;
/// The projectiles' kind.
pub const PROJECTILE: KindId = 1;
/// The highest player id.
pub const MAX_PLAYER: u32 = 256;
/// Position grid of the players, m: fine, since the owner's prediction is compared with
/// it at the article's 1 cm tolerance.
pub const PLAYER_RESOLUTION: f32 = 1.0 / 512.0;
/// How far a state older than the snapshot is carried along its velocity, s.
pub const MAX_CARRY_SECS: f32 = 0.25;

/// The schema: players (position, velocity, aim, health, alive; four times a
/// projectile's priority) and projectiles (position, velocity, owner slot, spawn tick:
/// what a client matches its predicted ones by), for the standard arena.
pub fn schema() -> Schema {
    schema_for(16.0)
}

/// [`schema`] for an arena of half side `half_size` (m, [`super::Arena::half_size`]):
/// positions range over the arena and the standard one's ±32 m, whichever is more.
pub fn schema_for(half_size: f32) -> Schema {
    let range = (2.0 * half_size).max(32.0);
    let built = Schema::new()
        .kind(
            Kind::new("player")
                .vec2("position", range, PLAYER_RESOLUTION)
                .vec2("velocity", 8.0, 1.0 / 256.0)
                .velocity_of("position")
                .angle("aim", 10)
                .int("health", 0, super::MAX_HEALTH)
                .bool("alive")
                .int("respawn_at", 0, (1 << 24) - 1)
                .int("deaths", 0, 255)
                .priority(4.0),
        )
        .kind(
            Kind::new("projectile")
                .vec2("position", range, 1.0 / 256.0)
                .vec2("velocity", 16.0, 1.0 / 128.0)
                .velocity_of("position")
                .int("owner", 0, 255)
                .int("spawn_tick", 0, (1 << 24) - 1),
        )
        .build();
    // The declaration above is valid; an invalid one would give an empty schema that
    // refuses every entity with a typed error rather than panic here.
    built.unwrap_or_default()
}

/// Writes the scene into `server`: every player, every projectile, and a despawn for
/// each projectile that is gone.
pub fn capture(
    scene: &ShooterScene,
    server: &mut ReplicationServer,
) -> Result<(), ReplicationError> {
    for (p, s) in scene.players() {
        server.put(p, PLAYER, |w: &mut StateWriter| {
            w.vec2(s.position);
            w.vec2(s.velocity);
            w.angle(s.aim);
            w.int(s.health);
            w.bool(s.alive);
            w.int((s.respawn_at & 0x00ff_ffff) as i32);
            w.int((s.deaths & 0xff) as i32);
        })?;
    }
    let projectiles = scene.projectiles();
    for p in &projectiles {
        server.put(p.id, PROJECTILE, |w: &mut StateWriter| {
            w.vec2(p.position);
            w.vec2(p.velocity);
            w.int(p.owner as i32);
            w.int((p.spawn_tick & 0x00ff_ffff) as i32);
        })?;
    }
    let gone: Vec<u32> = server
        .ids()
        .filter(|&id| {
            server.codes(id).is_some_and(|(k, _)| k == PROJECTILE)
                && projectiles.binary_search_by_key(&id, |p| p.id).is_err()
        })
        .collect();
    for id in gone {
        server.despawn(id)?;
    }
    Ok(())
}

/// What a client holding `client` knows at `tick`, at `tick_hz`.
pub fn known(client: &ReplicationClient, tick: Tick, tick_hz: u32) -> ShooterKnown {
    let mut out = ShooterKnown {
        tick: tick.0,
        ..ShooterKnown::default()
    };
    client.read_all_at(tick, MAX_CARRY_SECS, |id, e, mut r| {
        match e.kind {
            PLAYER if (1..=MAX_PLAYER).contains(&id) => {
                let position = r.vec2();
                let velocity = r.vec2();
                let aim = r.angle();
                let health = r.int();
                let alive = r.bool();
                let respawn_at = expand_tick(r.int().max(0) as u32, tick.0);
                let deaths = r.int().max(0) as u32;
                out.players.push((
                    id,
                    PlayerState {
                        position,
                        velocity,
                        aim,
                        health,
                        alive,
                        respawn_at,
                        deaths,
                    },
                ));
            }
            // A projectile changes every tick it lives: one whose newest state is older
            // than the carry limit is not shown (nobody knows where it is), while the
            // budget holds its updates back or a despawn is on its way again.
            PROJECTILE
                if (tick.0.saturating_sub(e.tick.0) as f32) <= MAX_CARRY_SECS * tick_hz as f32 =>
            {
                let position = r.vec2();
                let velocity = r.vec2();
                let owner = r.int().max(0) as u32;
                let spawn_tick = expand_tick(r.int().max(0) as u32, tick.0);
                out.projectiles.push(ProjectileState {
                    id,
                    owner,
                    spawn_tick,
                    position,
                    velocity,
                });
            }
            _ => {}
        }
    });
    out.players.sort_by_key(|(p, _)| *p);
    out
}

/// A tick sent in its low 24 bits, put back as the one nearest `near` (the snapshot's
/// own tick: the ticks sent lie seconds from it, far less than 2^23 ticks).
fn expand_tick(low: u32, near: u32) -> u32 {
    const SPAN: i64 = 1 << 24;
    let near = i64::from(near);
    let mut t = (near & !(SPAN - 1)) | i64::from(low & 0x00ff_ffff);
    if t - near > SPAN / 2 {
        t -= SPAN;
    } else if near - t > SPAN / 2 {
        t += SPAN;
    }
    t.clamp(0, i64::from(u32::MAX)) as u32
}
