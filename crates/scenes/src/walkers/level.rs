//! The level: an open square with box obstacles, as a static rapier world that the
//! characters' kinematic controller queries.

use glam::Vec3;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rapier3d::control::{CharacterLength, KinematicCharacterController};
use rapier3d::parry::shape::Capsule;
use rapier3d::prelude::{ColliderBuilder, PhysicsWorld, Pose};

/// Height of a character's centre above the floor, m (the capsule stands on y = 0).
pub const CENTRE_HEIGHT: f32 = 0.9;
/// Character capsule radius, m.
pub const RADIUS: f32 = 0.35;
/// Half height of the capsule's cylinder, m.
const HALF_HEIGHT: f32 = 0.55;

/// One box obstacle, standing on the floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Obstacle {
    /// Centre on the floor, x and z, m.
    pub centre: [f32; 2],
    /// Half extents along x and z, m.
    pub half: [f32; 2],
}

/// The static level both ends build from the same seed: obstacles in a square of
/// `2 * half_size` metres, and the rapier world the character controller queries.
///
/// There is no floor collider: characters move in the horizontal plane at
/// [`CENTRE_HEIGHT`] (a flat level needs no gravity, and the controller then casts
/// against the obstacles alone, which keeps 1000 walkers cheap).
pub struct Level {
    half_size: f32,
    obstacles: Vec<Obstacle>,
    world: PhysicsWorld,
    controller: KinematicCharacterController,
    shape: Capsule,
}

impl std::fmt::Debug for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Level")
            .field("half_size", &self.half_size)
            .field("obstacles", &self.obstacles.len())
            .finish()
    }
}

impl Level {
    /// A level of `2 * half_size` metres square with `obstacles` boxes placed from `seed`
    /// (none in the 6 m around the centre, where players start).
    pub fn new(half_size: f32, obstacles: u32, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x1e7e1);
        let mut list = Vec::new();
        while list.len() < obstacles as usize {
            let centre = [
                rng.random_range(-half_size..half_size),
                rng.random_range(-half_size..half_size),
            ];
            if centre[0].hypot(centre[1]) < 6.0 {
                continue;
            }
            let half = [rng.random_range(0.5..4.0), rng.random_range(0.5..4.0)];
            list.push(Obstacle { centre, half });
        }
        let mut world = PhysicsWorld {
            gravity: Vec3::ZERO,
            ..PhysicsWorld::default()
        };
        for o in &list {
            world.insert_collider(
                ColliderBuilder::cuboid(o.half[0], 1.5, o.half[1]).translation(Vec3::new(
                    o.centre[0],
                    1.5,
                    o.centre[1],
                )),
                None,
            );
        }
        // One step builds the broad phase's tree over the static colliders; nothing
        // moves in this world afterwards.
        world.step();
        Self {
            half_size,
            obstacles: list,
            world,
            controller: KinematicCharacterController {
                // A flat level: no snapping to a floor that is not there, no steps.
                snap_to_ground: None,
                autostep: None,
                offset: CharacterLength::Absolute(0.02),
                ..KinematicCharacterController::default()
            },
            shape: Capsule::new_y(HALF_HEIGHT, RADIUS),
        }
    }

    /// Half the side of the square, m.
    pub fn half_size(&self) -> f32 {
        self.half_size
    }

    /// The obstacles.
    pub fn obstacles(&self) -> &[Obstacle] {
        &self.obstacles
    }

    /// Where a character at `position` ends up when it tries to move by `wanted` (m,
    /// horizontal) in a tick of `dt` seconds: the rapier kinematic character controller
    /// slides it along the obstacles it meets, and the square's edge stops it. The same
    /// inputs give the same result on every machine build, which client prediction needs.
    pub fn move_character(&self, position: [f32; 3], wanted: [f32; 2], dt: f32) -> [f32; 3] {
        if wanted == [0.0, 0.0] {
            return position;
        }
        let queries = self.world.query_pipeline();
        let pose = Pose::from_translation(Vec3::new(position[0], CENTRE_HEIGHT, position[2]));
        let moved = self.controller.move_shape(
            dt,
            &queries,
            &self.shape,
            &pose,
            Vec3::new(wanted[0], 0.0, wanted[1]),
            |_| {},
        );
        let limit = self.half_size - RADIUS;
        [
            (position[0] + moved.translation.x).clamp(-limit, limit),
            CENTRE_HEIGHT,
            (position[2] + moved.translation.z).clamp(-limit, limit),
        ]
    }

    /// True if a character centred at `(x, z)` would overlap an obstacle.
    pub fn blocked(&self, x: f32, z: f32) -> bool {
        self.obstacles.iter().any(|o| {
            (x - o.centre[0]).abs() < o.half[0] + RADIUS
                && (z - o.centre[1]).abs() < o.half[1] + RADIUS
        })
    }
}
