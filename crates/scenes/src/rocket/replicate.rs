//! The car-and-ball scene on the replication layer: two kinds declared once, and the
//! conversions between the scene and the layer's entities.
//!
//! Entity ids: the ball is entity 0, car `p` is entity `p + 1`.

use super::{CarInput, PlayerId, RocketScene};
use crate::cubes::BodyState;
use crate::cubes::quantize::StateQuantization;
use crate::cubes::replicate::{body_kind, read_body, write_body};
use lagless_core::Tick;
use lagless_replication::{KindId, ReplicationClient, ReplicationError, ReplicationServer, Schema};

/// The ball's kind.
pub const BALL: KindId = 0;
/// The cars' kind.
pub const CAR: KindId = 1;
/// The ball's entity id.
pub const BALL_ENTITY: u32 = 0;

/// The entity id of car `player` (`None` for the one id that has none, `u32::MAX`).
pub fn car_entity(player: PlayerId) -> Option<u32> {
    player.checked_add(1)
}

/// The scene's schema on `q`'s grid: both kinds carry position, rotation and both
/// velocities (as in the Unity ball article); a car also carries the keys it was last driven with,
/// so a client can predict a remote car from them. The ball matters most to every client
/// (everyone plays it), so it has the highest priority when the budget is short.
pub fn schema(q: &StateQuantization) -> Schema {
    let body = |name: &str| body_kind(q, name);
    let built = Schema::new()
        .kind(body("ball").priority(8.0))
        .kind(
            body("car")
                .int("input", 0, i32::from(CarInput::VALID))
                .priority(4.0),
        )
        .build();
    // Every valid quantization builds; an invalid one gives an empty schema, which refuses
    // every entity with a typed error instead of panicking here.
    built.unwrap_or_default()
}

/// Writes the scene into `server`: spawns what it lacks, updates the rest, despawns cars
/// that left.
pub fn capture(
    scene: &RocketScene,
    server: &mut ReplicationServer,
) -> Result<(), ReplicationError> {
    if let Some(ball) = scene.ball_state() {
        server.put(BALL_ENTITY, BALL, |w| write_body(w, &ball))?;
    }
    let mut cars = Vec::new();
    for (p, state) in scene.car_states() {
        let id = car_entity(p).ok_or(ReplicationError::IdOutOfRange(u64::from(p)))?;
        let input = scene.last_input(p).unwrap_or_default();
        cars.push(id);
        server.put(id, CAR, |w| {
            write_body(w, &state);
            w.int(i32::from(input.bits()));
        })?;
    }
    let gone: Vec<u32> = server
        .ids()
        .filter(|&id| id != BALL_ENTITY && !cars.contains(&id))
        .collect();
    for id in gone {
        server.despawn(id)?;
    }
    Ok(())
}

/// One car as a client knows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KnownCar {
    /// Its player.
    pub player: PlayerId,
    /// Its state.
    pub state: BodyState,
    /// The keys it was driven with in the server's last step before this state.
    pub input: CarInput,
}

/// What a client knows of the server's world at one tick (the prediction's confirmed
/// state, and what it interpolates).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RocketKnown {
    /// The server tick the state is for.
    pub tick: Tick,
    /// Every car the client holds, ascending by player.
    pub cars: Vec<KnownCar>,
    /// The ball, once received.
    pub ball: Option<BodyState>,
}

impl RocketKnown {
    /// Car `player`, if known.
    pub fn car(&self, player: PlayerId) -> Option<&KnownCar> {
        self.cars.iter().find(|c| c.player == player)
    }
}

/// How far a body whose newest state is older than the snapshot is carried forward by its
/// velocity, s: a bouncing ball leaves a straight line quickly.
pub const MAX_DEAD_RECKONING_SECS: f32 = 0.1;

/// The scene as `client` knows it at `tick`. Values come from the network but were
/// checked by the layer's decoder; an input code the keys do not define reads as no keys.
pub fn known(client: &ReplicationClient, tick: Tick) -> RocketKnown {
    let mut out = RocketKnown {
        tick,
        ..RocketKnown::default()
    };
    client.read_all_at(tick, MAX_DEAD_RECKONING_SECS, |id, e, mut r| {
        match (e.kind, id) {
            (BALL, BALL_ENTITY) => out.ball = Some(read_body(&mut r)).filter(BodyState::is_finite),
            (CAR, id) if id != BALL_ENTITY => {
                let state = read_body(&mut r);
                let input = u8::try_from(r.int())
                    .ok()
                    .and_then(CarInput::from_bits)
                    .unwrap_or_default();
                if state.is_finite() {
                    out.cars.push(KnownCar {
                        player: id - 1,
                        state,
                        input,
                    });
                }
            }
            _ => {}
        }
    });
    out.cars.sort_by_key(|c| c.player);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rocket::RocketConfig;
    use lagless_replication::{BudgetConfig, ClientConfig, ReplicationConfig};
    use std::time::Duration;

    #[test]
    fn the_client_holds_exactly_what_the_server_simulates() {
        let config = RocketConfig::default();
        let mut scene = RocketScene::new(config);
        scene.add_car(1);
        scene.add_car(2);
        let mut server = ReplicationServer::new(
            schema(&config.quantize),
            ReplicationConfig {
                budget: BudgetConfig {
                    max_kbps: 0.0,
                    ..Default::default()
                },
                ..ReplicationConfig::default()
            },
        );
        server.add_client(1);
        let mut client = ReplicationClient::new(schema(&config.quantize), ClientConfig::default());
        for t in 1..100u32 {
            scene.step(&[
                (1, CarInput::FORWARD | CarInput::LEFT),
                (2, CarInput::BOOST),
            ]);
            capture(&scene, &mut server).unwrap();
            let s = server.encode(1, Tick(t), Duration::ZERO).unwrap();
            client.receive(Tick(t), &s.bytes).unwrap();
            server.acknowledge(1, Tick(t), Duration::ZERO);
        }
        let k = known(&client, Tick(99));
        assert_eq!(k.tick, Tick(99));
        // The scene snaps every body to the grid the wire carries: nothing is lost.
        assert_eq!(k.ball, scene.ball_state());
        assert_eq!(k.cars.len(), 2);
        assert_eq!(Some(k.car(1).unwrap().state), scene.car_state(1));
        assert_eq!(k.car(1).unwrap().input, CarInput::FORWARD | CarInput::LEFT);
        assert_eq!(k.car(2).unwrap().input, CarInput::BOOST);
        // A car that leaves is despawned.
        scene.remove_car(2);
        capture(&scene, &mut server).unwrap();
        let s = server.encode(1, Tick(100), Duration::ZERO).unwrap();
        client.receive(Tick(100), &s.bytes).unwrap();
        assert!(known(&client, Tick(100)).car(2).is_none());
    }
}
