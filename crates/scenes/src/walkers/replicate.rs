//! The walker scene on the replication layer: players and walkers, declared once.
//!
//! Entity ids: walker `i` is entity `i`; player `p` is entity `walkers + p`.

use super::{PlayerId, PlayerState, WalkerScene, WalkersKnown};
use lagless_core::Tick;
use lagless_replication::{
    Kind, KindId, ReplicationClient, ReplicationError, ReplicationServer, Schema, StateWriter,
};

/// The players' kind.
pub const PLAYER: KindId = 0;
/// The walkers' kind.
pub const WALKER: KindId = 1;

/// Position grid of the walkers, m: the dead-reckoning codec's (1/64 m), so both ways of
/// sending them are compared at the same precision.
pub const WALKER_RESOLUTION: f32 = 1.0 / 64.0;
/// Position grid of the players, m: finer, since the owner's prediction is compared
/// with it (an error under 1 cm is not a misprediction).
pub const PLAYER_RESOLUTION: f32 = 1.0 / 512.0;

/// The schema: players with position and velocity (four times a walker's priority), walkers
/// with position, velocity and heading, on a level of up to 256 m across.
pub fn schema() -> Schema {
    let built = Schema::new()
        .kind(
            Kind::new("player")
                .vec3("position", 128.0, PLAYER_RESOLUTION)
                .vec3("velocity", 16.0, 1.0 / 256.0)
                .velocity_of("position")
                .priority(4.0),
        )
        .kind(
            Kind::new("walker")
                .vec3("position", 128.0, WALKER_RESOLUTION)
                .vec3("velocity", 8.0, 1.0 / 64.0)
                .velocity_of("position")
                .angle("heading", 12),
        )
        .build();
    // The declaration above is valid; an invalid one would give an empty schema that
    // refuses every entity with a typed error rather than panic here.
    built.unwrap_or_default()
}

/// The entity id of player `player` with `walkers` walkers.
pub fn player_entity(walkers: u32, player: PlayerId) -> Option<u32> {
    walkers.checked_add(player)
}

/// Writes the scene into `server`. With `walkers_in_snapshots` false the walkers are
/// spawned (so clients learn they exist, and the spawn gates their dead-reckoning
/// messages) but never updated: their motion travels by dead reckoning instead.
pub fn capture(
    scene: &WalkerScene,
    server: &mut ReplicationServer,
    walkers_in_snapshots: bool,
) -> Result<(), ReplicationError> {
    for (i, w) in scene.walkers().enumerate() {
        let id = i as u32;
        let (s, c) = w.motion_heading.sin_cos();
        let write = |wr: &mut StateWriter| {
            wr.vec3(w.position);
            wr.vec3([s * w.speed, 0.0, c * w.speed]);
            wr.angle(w.heading);
        };
        if server.codes(id).is_none() {
            server.spawn_with_id(id, WALKER, write)?;
        } else if walkers_in_snapshots {
            server.update(id, write)?;
        }
    }
    let n = scene.walkers().count() as u32;
    for (p, st) in scene.players() {
        let id = player_entity(n, p).ok_or(ReplicationError::IdOutOfRange(u64::from(p)))?;
        let write = |wr: &mut StateWriter| {
            wr.vec3(st.position);
            wr.vec3([st.velocity[0], 0.0, st.velocity[1]]);
        };
        server.put(id, PLAYER, write)?;
    }
    Ok(())
}

/// How far a state older than the snapshot is carried along its velocity, s.
pub const MAX_CARRY_SECS: f32 = 0.25;

/// What a client holding `client` knows at `tick`, with `walkers` walkers. A walker it
/// has no state of has a NaN position.
pub fn known(client: &ReplicationClient, walkers: u32, tick: Tick) -> WalkersKnown {
    let mut out = WalkersKnown {
        players: Vec::new(),
        walkers: vec![([f32::NAN; 3], 0.0); walkers as usize],
    };
    client.read_all_at(tick, MAX_CARRY_SECS, |id, e, mut r| match e.kind {
        PLAYER if id >= walkers => {
            let position = r.vec3();
            let v = r.vec3();
            out.players.push((
                id - walkers,
                PlayerState {
                    position,
                    velocity: [v[0], v[2]],
                },
            ));
        }
        WALKER if id < walkers => {
            let position = r.vec3();
            let _velocity = r.vec3();
            out.walkers[id as usize] = (position, r.angle());
        }
        _ => {}
    });
    out
}
