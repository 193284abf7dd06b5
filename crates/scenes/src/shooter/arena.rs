//! The arena: a walled square with cover, as a static rapier2d world that both ends
//! build the same and query (the players' kinematic controller, line of sight, the
//! rifle's ray and the projectiles' flight).

use rapier2d::control::{CharacterLength, KinematicCharacterController};
use rapier2d::math::{Pose, Vector};
use rapier2d::parry::query::Ray;
use rapier2d::parry::shape::Ball;
use rapier2d::prelude::{ColliderBuilder, PhysicsWorld};

/// A player's body radius for movement, m.
pub const BODY_RADIUS: f32 = 0.4;

/// One box of wall or cover: centre and half extents, m.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Block {
    /// Centre, m.
    pub centre: [f32; 2],
    /// Half extents along x and y, m.
    pub half: [f32; 2],
}

/// The static arena. No rigid bodies move in it: players are kinematic (moved by the
/// character controller), projectiles are rays, so the same queries give the same
/// answers on the client and the server.
pub struct Arena {
    half_size: f32,
    blocks: Vec<Block>,
    spawns: Vec<[f32; 2]>,
    world: PhysicsWorld,
    controller: KinematicCharacterController,
    shape: Ball,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("half_size", &self.half_size)
            .field("blocks", &self.blocks.len())
            .finish()
    }
}

impl Arena {
    /// The standard arena: 32 m square, four outer walls, and cover laid out
    /// symmetrically (a centre block, four L-ish pairs, two long low walls), so every
    /// spawn has some cover and some open ground.
    pub fn new() -> Self {
        Self::tiled(1)
    }

    /// `n` × `n` standard arenas side by side in one walled square `32 n` m across,
    /// without the walls between them (each tile keeps its cover and its eight spawn
    /// points): room for a large match, where the players are spread out. `tiled(1)` is
    /// [`Arena::new`]; 0 counts as 1.
    pub fn tiled(n: u32) -> Self {
        let n = n.max(1);
        let tile = 32.0;
        let h = tile * 0.5 * n as f32;
        let t = 0.5;
        let mut blocks = vec![
            // Outer walls, inside faces at ±h.
            Block {
                centre: [0.0, h + t],
                half: [h + 2.0 * t, t],
            },
            Block {
                centre: [0.0, -h - t],
                half: [h + 2.0 * t, t],
            },
            Block {
                centre: [h + t, 0.0],
                half: [t, h + 2.0 * t],
            },
            Block {
                centre: [-h - t, 0.0],
                half: [t, h + 2.0 * t],
            },
        ];
        let offsets: Vec<[f32; 2]> = (0..n * n)
            .map(|k| {
                let at = |i: u32| (i as f32 + 0.5) * tile - h;
                [at(k % n), at(k / n)]
            })
            .collect();
        let mut spawns = Vec::new();
        for o in &offsets {
            let tile = Self::tile(*o);
            blocks.extend(tile.0);
            spawns.extend(tile.1);
        }
        // Each tile's spawn points in turn, so consecutive players start in different
        // tiles.
        let per = spawns.len() / offsets.len();
        let spawns = (0..spawns.len())
            .map(|k| spawns[(k % offsets.len()) * per + k / offsets.len()])
            .collect();
        Self::build(h, blocks, spawns)
    }

    /// One standard arena's cover and spawn points, centred on `o`.
    fn tile(o: [f32; 2]) -> (Vec<Block>, Vec<[f32; 2]>) {
        // Centre block.
        let mut blocks = vec![Block {
            centre: [0.0, 0.0],
            half: [1.5, 1.5],
        }];
        for (sx, sy) in [(1.0, 1.0), (-1.0, 1.0), (1.0, -1.0), (-1.0, -1.0)] {
            blocks.push(Block {
                centre: [sx * 7.0, sy * 6.0],
                half: [2.5, 0.5],
            });
            blocks.push(Block {
                centre: [sx * 10.0, sy * 9.0],
                half: [0.5, 2.0],
            });
        }
        for sy in [1.0, -1.0] {
            blocks.push(Block {
                centre: [0.0, sy * 11.0],
                half: [3.0, 0.5],
            });
        }
        let spawns = [
            [-13.0, -13.0],
            [13.0, 13.0],
            [-13.0, 13.0],
            [13.0, -13.0],
            [0.0, -13.5],
            [0.0, 13.5],
            [-13.5, 0.0],
            [13.5, 0.0],
        ];
        let shift = |p: [f32; 2]| [p[0] + o[0], p[1] + o[1]];
        for b in &mut blocks {
            b.centre = shift(b.centre);
        }
        (blocks, spawns.into_iter().map(shift).collect())
    }

    /// The arena of half side `h` with `blocks` and `spawns`.
    fn build(h: f32, blocks: Vec<Block>, spawns: Vec<[f32; 2]>) -> Self {
        let mut world = PhysicsWorld {
            gravity: Vector::ZERO,
            ..PhysicsWorld::default()
        };
        for b in &blocks {
            world.insert_collider(
                ColliderBuilder::cuboid(b.half[0], b.half[1])
                    .translation(Vector::new(b.centre[0], b.centre[1])),
                None,
            );
        }
        // One step builds the broad phase's tree over the static colliders; nothing
        // moves in this world afterwards.
        world.step();
        Self {
            half_size: h,
            blocks,
            spawns,
            world,
            controller: KinematicCharacterController {
                // Top-down: no ground to snap to, no steps to climb.
                snap_to_ground: None,
                autostep: None,
                offset: CharacterLength::Absolute(0.02),
                ..KinematicCharacterController::default()
            },
            shape: Ball::new(BODY_RADIUS),
        }
    }

    /// Half the side of the open square, m.
    pub fn half_size(&self) -> f32 {
        self.half_size
    }

    /// Walls and cover.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Where player `n` (any number) respawns after death number `deaths`: the spawn
    /// points are visited in turn, offset by the player, so two players rarely share one.
    pub fn spawn_point(&self, player: u32, deaths: u32) -> [f32; 2] {
        let n = self.spawns.len();
        self.spawns[(player as usize + deaths as usize * 3) % n]
    }

    /// Where a body at `position` ends up trying to move by `wanted` in `dt` seconds:
    /// rapier's kinematic character controller slides it along the walls.
    pub fn move_body(&self, position: [f32; 2], wanted: [f32; 2], dt: f32) -> [f32; 2] {
        if wanted == [0.0, 0.0] || !wanted.iter().chain(&position).all(|v| v.is_finite()) {
            return position;
        }
        let queries = self.world.query_pipeline();
        let pose = Pose::from_translation(Vector::new(position[0], position[1]));
        let moved = self.controller.move_shape(
            dt,
            &queries,
            &self.shape,
            &pose,
            Vector::new(wanted[0], wanted[1]),
            |_| {},
        );
        let limit = self.half_size - BODY_RADIUS;
        [
            (position[0] + moved.translation.x).clamp(-limit, limit),
            (position[1] + moved.translation.y).clamp(-limit, limit),
        ]
    }

    /// Distance along the unit `direction` from `origin` to the first wall, if one is
    /// within `max` m.
    pub fn cast(&self, origin: [f32; 2], direction: [f32; 2], max: f32) -> Option<f32> {
        // NaN fails `max > 0.0` too.
        let positive = max > 0.0;
        if !origin.iter().chain(&direction).all(|v| v.is_finite()) || !positive {
            return None;
        }
        let queries = self.world.query_pipeline();
        let ray = Ray::new(
            Vector::new(origin[0], origin[1]),
            Vector::new(direction[0], direction[1]),
        );
        queries.cast_ray(&ray, max, true).map(|(_, toi)| toi)
    }

    /// True if nothing blocks the segment from `a` to `b`.
    pub fn line_of_sight(&self, a: [f32; 2], b: [f32; 2]) -> bool {
        let d = [b[0] - a[0], b[1] - a[1]];
        let len = d[0].hypot(d[1]);
        let long = len > 1e-4;
        if !long {
            return true;
        }
        self.cast(a, [d[0] / len, d[1] / len], len).is_none()
    }

    /// True if a body centred at `p` would overlap a block.
    pub fn blocked(&self, p: [f32; 2]) -> bool {
        self.blocks.iter().any(|b| {
            (p[0] - b.centre[0]).abs() < b.half[0] + BODY_RADIUS
                && (p[1] - b.centre[1]).abs() < b.half[1] + BODY_RADIUS
        })
    }
}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walls_stop_bodies_and_rays() {
        let a = Arena::new();
        // Walking into the centre block from the left stops at its face.
        let mut p = [-4.0, 0.0];
        for _ in 0..60 {
            p = a.move_body(p, [0.15, 0.0], 1.0 / 30.0);
        }
        assert!(p[0] < -1.5 - BODY_RADIUS + 0.05 && p[0] > -2.5, "{p:?}");
        // A ray through the centre hits the block 2.5 m away.
        let d = a
            .cast([-4.0, 0.0], [1.0, 0.0], 50.0)
            .expect("hits the block");
        assert!((d - 2.5).abs() < 1e-3, "{d}");
        assert!(!a.line_of_sight([-4.0, 0.0], [4.0, 0.0]));
        assert!(a.line_of_sight([-4.0, 3.0], [4.0, 3.0]));
        for i in 0..8 {
            assert!(!a.blocked(a.spawn_point(i, 0)));
        }
    }

    #[test]
    fn tiles_repeat_the_standard_arena() {
        let one = Arena::tiled(1);
        assert_eq!(one.blocks(), Arena::new().blocks());
        let a = Arena::tiled(4);
        assert_eq!(a.half_size(), 64.0);
        // Four outer walls and sixteen tiles' cover.
        assert_eq!(a.blocks().len(), 4 + 16 * (one.blocks().len() - 4));
        // 128 spawn points, none blocked, the first 16 in 16 different tiles.
        let points: Vec<[f32; 2]> = (0..128).map(|p| a.spawn_point(p, 0)).collect();
        assert!(points.iter().all(|&p| !a.blocked(p)));
        let tile = |p: [f32; 2]| ((p[0] + 64.0) / 32.0) as u32 + 4 * ((p[1] + 64.0) / 32.0) as u32;
        let mut first: Vec<u32> = points[..16].iter().map(|&p| tile(p)).collect();
        first.sort_unstable();
        first.dedup();
        assert_eq!(first.len(), 16);
        // A wall between two tiles is gone: the middle of the arena is open.
        assert!(a.line_of_sight([-1.0, 20.0], [1.0, 20.0]));
    }
}
