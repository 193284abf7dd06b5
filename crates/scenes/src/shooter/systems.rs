//! The ECS components and systems. Every system here runs unchanged on the server
//! (over every player and projectile) and on the client (over its own player and
//! projectiles): the Pixonic shooter article's "same code on both ends", which is what
//! makes the client's prediction agree with the server without any lockstep.

use super::{
    Arena, BODY_RADIUS, HIT_RADIUS, MAX_HEALTH, PLAYER_SPEED, PROJECTILE_LIFE, PROJECTILE_RADIUS,
    PROJECTILE_SPEED, PlayerId, PlayerState, ShooterInput, Weapon, slot_of,
};
use lagless_core::Tick;
use lagless_replication::lagcomp::ViewClaim;

/// Which player an entity is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlayerTag(pub PlayerId);

/// Where a player is, how it moves and where it aims.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Body {
    /// Position, m.
    pub position: [f32; 2],
    /// Velocity, m/s.
    pub velocity: [f32; 2],
    /// Aim, radians.
    pub aim: f32,
}

/// Health, and death until a respawn tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Life {
    /// Health.
    pub health: i32,
    /// False while dead.
    pub alive: bool,
    /// The tick a dead player comes back at.
    pub respawn_at: u32,
    /// Deaths so far (where it comes back depends on it).
    pub deaths: u32,
}

/// The weapons' cooldowns: the first tick each may fire again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Arms {
    /// The rifle's.
    pub rifle_ready: u32,
    /// The launcher's.
    pub launcher_ready: u32,
}

/// The client slot that fired a projectile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The slot ([`slot_of`]).
    pub slot: u32,
}

/// A flying projectile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Projectile {
    /// Its id: a server id, or on the client a predicted id until the server's takes
    /// over.
    pub id: u32,
    /// The tick of the input that fired it.
    pub spawn_tick: u32,
    /// Where it started, m.
    pub origin: [f32; 2],
    /// Where it is, m.
    pub position: [f32; 2],
    /// Velocity, m/s.
    pub velocity: [f32; 2],
    /// The tick it falls out of the air at.
    pub expires: u32,
}

impl Projectile {
    /// Where it is in state `tick` (its flight is straight and fixed from the start,
    /// which is what lets the client compare its prediction at any server tick).
    pub fn position_at(&self, tick: u32, dt: f32) -> [f32; 2] {
        let s = tick.saturating_sub(self.spawn_tick) as f32 * dt;
        [
            self.origin[0] + self.velocity[0] * s,
            self.origin[1] + self.velocity[1] * s,
        ]
    }
}

/// Added to a client's predicted projectile when the server's takes it over (the
/// article's components added to and removed from predicted entities): it then stands
/// for the server's entity, and the offset between the two at the same tick is what a
/// renderer blends away.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HandedOver {
    /// The server's id.
    pub server_id: u32,
    /// Server pose minus predicted pose at the same tick, m.
    pub offset: [f32; 2],
}

/// The components of a new player at `position`.
pub fn player_bundle(
    p: PlayerId,
    position: [f32; 2],
    _tick: Tick,
) -> (PlayerTag, Body, Life, Arms) {
    (
        PlayerTag(p),
        Body {
            position,
            velocity: [0.0; 2],
            aim: 0.0,
        },
        Life {
            health: MAX_HEALTH,
            alive: true,
            respawn_at: 0,
            deaths: 0,
        },
        Arms::default(),
    )
}

/// A player entity's replicated state.
pub fn player_state(world: &hecs::World, e: hecs::Entity) -> Option<PlayerState> {
    let b = *world.get::<&Body>(e).ok()?;
    let l = *world.get::<&Life>(e).ok()?;
    Some(PlayerState {
        position: b.position,
        velocity: b.velocity,
        aim: b.aim,
        health: l.health,
        alive: l.alive,
        respawn_at: l.respawn_at,
        deaths: l.deaths,
    })
}

/// Checks an input's aim: a NaN, infinite or zero aim with a shot is refused (`true`),
/// and the input is made harmless: no shot, and an aim the movement system ignores.
pub fn sanitize(mut input: ShooterInput) -> (ShooterInput, bool) {
    let a = input.aim();
    let finite = a[0].is_finite() && a[1].is_finite();
    if finite && (input.fire == 0 || input.aim_dir().is_some()) {
        return (input, false);
    }
    input.fire = 0;
    input.shot = 0;
    input.spawn_id = 0;
    input.aim = [0, 0];
    (input, true)
}

/// What [`fire`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FireEvent {
    /// A rifle shot to test (on the server, in the rewound world).
    Rifle {
        /// The shooter.
        player: PlayerId,
        /// Where it left, m.
        origin: [f32; 2],
        /// Unit direction.
        direction: [f32; 2],
        /// Its number.
        shot: u16,
        /// The view the shooter claimed.
        view: ViewClaim,
    },
    /// A projectile spawned (already in the world).
    Launcher {
        /// The shooter.
        player: PlayerId,
        /// The new entity.
        entity: hecs::Entity,
    },
    /// A shot before the weapon was ready: refused.
    TooFast {
        /// The shooter.
        player: PlayerId,
    },
}

/// The firing system: for each live player whose input fires a ready weapon (and
/// `allow` agrees, returning the projectile's id), starts the cooldown and fires.
/// The shot leaves from where the player is in state `tick`, before it moves.
pub fn fire(
    world: &mut hecs::World,
    tick: Tick,
    inputs: &[(PlayerId, ShooterInput)],
    tick_hz: u32,
    mut allow: impl FnMut(PlayerId, &ShooterInput, Weapon) -> Option<u32>,
) -> Vec<FireEvent> {
    let mut out = Vec::new();
    let mut spawn = Vec::new();
    for (tag, body, life, arms) in world.query_mut::<(&PlayerTag, &Body, &Life, &mut Arms)>() {
        let Some((_, input)) = inputs.iter().find(|(p, _)| *p == tag.0) else {
            continue;
        };
        let (Some(weapon), Some(direction)) = (input.weapon(), input.aim_dir()) else {
            continue;
        };
        if !life.alive {
            continue;
        }
        let ready = match weapon {
            Weapon::Rifle => &mut arms.rifle_ready,
            Weapon::Launcher => &mut arms.launcher_ready,
        };
        if tick.0 < *ready {
            out.push(FireEvent::TooFast { player: tag.0 });
            continue;
        }
        let Some(id) = allow(tag.0, input, weapon) else {
            continue;
        };
        *ready = tick.0 + weapon.interval_ticks(tick_hz);
        match weapon {
            Weapon::Rifle => out.push(FireEvent::Rifle {
                player: tag.0,
                origin: body.position,
                direction,
                shot: input.shot,
                view: input.view,
            }),
            Weapon::Launcher => {
                let off = BODY_RADIUS + PROJECTILE_RADIUS + 0.05;
                let origin = [
                    body.position[0] + direction[0] * off,
                    body.position[1] + direction[1] * off,
                ];
                let life = (PROJECTILE_LIFE * tick_hz as f32).round() as u32;
                spawn.push((
                    tag.0,
                    Projectile {
                        id,
                        spawn_tick: tick.0,
                        origin,
                        position: origin,
                        velocity: [
                            direction[0] * PROJECTILE_SPEED,
                            direction[1] * PROJECTILE_SPEED,
                        ],
                        expires: tick.0 + life.max(1),
                    },
                ));
            }
        }
    }
    for (player, p) in spawn {
        let entity = world.spawn((
            p,
            Owner {
                slot: slot_of(player),
            },
        ));
        out.push(FireEvent::Launcher { player, entity });
    }
    out
}

/// The movement system: each live player with an input walks where its keys say at
/// [`PLAYER_SPEED`], slid along the walls by the character controller, and turns to
/// its aim. A player without an input this tick stands still.
pub fn movement(
    world: &mut hecs::World,
    arena: &Arena,
    inputs: &[(PlayerId, ShooterInput)],
    dt: f32,
) {
    for (tag, body, life) in world.query_mut::<(&PlayerTag, &mut Body, &Life)>() {
        let input = inputs.iter().find(|(p, _)| *p == tag.0).map(|(_, i)| i);
        let (Some(input), true) = (input, life.alive) else {
            body.velocity = [0.0; 2];
            continue;
        };
        if let Some(a) = input.aim_dir() {
            body.aim = a[1].atan2(a[0]);
        }
        let d = input.direction();
        let wanted = [d[0] * PLAYER_SPEED * dt, d[1] * PLAYER_SPEED * dt];
        let p = arena.move_body(body.position, wanted, dt);
        body.velocity = [
            (p[0] - body.position[0]) / dt,
            (p[1] - body.position[1]) / dt,
        ];
        body.position = p;
    }
}

/// A projectile's end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Impact {
    /// The projectile (already despawned).
    pub entity: hecs::Entity,
    /// Its owner's slot.
    pub owner: u32,
    /// The player it hit, if any (else a wall, or it expired).
    pub target: Option<PlayerId>,
}

/// The projectile system: each projectile flies one tick, stopping at the first wall
/// or live player (not its owner) on its way; those and the expired ones are
/// despawned and returned.
pub fn projectiles(world: &mut hecs::World, arena: &Arena, tick: Tick, dt: f32) -> Vec<Impact> {
    let players: Vec<(PlayerId, [f32; 2])> = world
        .query::<(&PlayerTag, &Body, &Life)>()
        .iter()
        .filter(|(_, _, l)| l.alive)
        .map(|(t, b, _)| (t.0, b.position))
        .collect();
    let mut out = Vec::new();
    for (e, (p, owner)) in world.query_mut::<(hecs::Entity, (&mut Projectile, &Owner))>() {
        let step = [p.velocity[0] * dt, p.velocity[1] * dt];
        let len = step[0].hypot(step[1]);
        let dir = if len > 0.0 {
            [step[0] / len, step[1] / len]
        } else {
            [1.0, 0.0]
        };
        let wall = arena.cast(p.position, dir, len + PROJECTILE_RADIUS);
        let others = players
            .iter()
            .copied()
            .filter(|(q, _)| slot_of(*q) != owner.slot);
        let hit = ray_circles(
            p.position,
            dir,
            wall.unwrap_or(len),
            others,
            HIT_RADIUS + PROJECTILE_RADIUS,
        );
        p.position = [p.position[0] + step[0], p.position[1] + step[1]];
        if hit.is_some() || wall.is_some() || tick.0 + 1 >= p.expires {
            out.push(Impact {
                entity: e,
                owner: owner.slot,
                target: hit,
            });
        }
    }
    for i in &out {
        let _ = world.despawn(i.entity);
    }
    out
}

/// Damage to player entity `e`: true if it killed it (it then waits for
/// `respawn_at`).
pub fn damage(world: &mut hecs::World, e: hecs::Entity, amount: i32, respawn_at: u32) -> bool {
    let Ok((life, body)) = world.query_one_mut::<(&mut Life, &mut Body)>(e) else {
        return false;
    };
    if !life.alive {
        return false;
    }
    life.health -= amount;
    if life.health > 0 {
        return false;
    }
    life.health = 0;
    life.alive = false;
    life.respawn_at = respawn_at;
    life.deaths = life.deaths.wrapping_add(1);
    body.velocity = [0.0; 2];
    true
}

/// The respawn system: dead players whose time has come (`tick` is the state being
/// made) come back with full health where `spawn_point` says for the player and its
/// deaths. Returns who came back. The client runs it too, for its own player: the
/// respawn tick and the deaths are replicated, so the teleport is predicted on the
/// tick the server makes it rather than seen a round trip late.
pub fn respawn(
    world: &mut hecs::World,
    tick: u32,
    mut spawn_point: impl FnMut(PlayerId, u32) -> [f32; 2],
) -> Vec<PlayerId> {
    let mut back = Vec::new();
    for (tag, body, life) in world.query_mut::<(&PlayerTag, &mut Body, &mut Life)>() {
        if !life.alive && life.respawn_at <= tick {
            life.alive = true;
            life.health = MAX_HEALTH;
            body.position = spawn_point(tag.0, life.deaths);
            body.velocity = [0.0; 2];
            back.push(tag.0);
        }
    }
    back
}

/// The nearest of `circles` (id, centre) of `radius` that the ray from `origin` along
/// the unit `direction` meets within `max` m.
pub fn ray_circles(
    origin: [f32; 2],
    direction: [f32; 2],
    max: f32,
    circles: impl IntoIterator<Item = (PlayerId, [f32; 2])>,
    radius: f32,
) -> Option<PlayerId> {
    let mut best: Option<(f32, PlayerId)> = None;
    for (id, c) in circles {
        let oc = [c[0] - origin[0], c[1] - origin[1]];
        let along = oc[0] * direction[0] + oc[1] * direction[1];
        let perp2 = oc[0] * oc[0] + oc[1] * oc[1] - along * along;
        let r2 = radius * radius;
        // A NaN distance misses too.
        let within = perp2 <= r2;
        if !within {
            continue;
        }
        let t = along - (r2 - perp2).sqrt();
        let t = if t < 0.0 {
            along + (r2 - perp2).sqrt()
        } else {
            t
        };
        if t >= 0.0 && t <= max && best.is_none_or(|(bt, _)| t < bt) {
            best = Some((t, id));
        }
    }
    best.map(|(_, id)| id)
}
