//! Whether a player stands on something it can jump off.

use glam::Vec3;
use rapier3d::parry::query;
use rapier3d::parry::shape::Cuboid;
use rapier3d::prelude::Pose;

/// How far below the player a surface may be and still count as underfoot,
/// metres. Resting contacts sit within a few millimetres; one tick of a jump
/// (≈ 5 m/s / 64 Hz) already clears this.
const SUPPORT_GAP: f32 = 0.05;

/// A contact whose normal is steeper than this (cosine with +Y) is a floor;
/// shallower ones are walls, which must not grant jumps.
const FLOOR_COS: f32 = 0.7;

/// A box in the world that might hold the player up.
pub(crate) struct Obstacle<'a> {
    pub pose: &'a Pose,
    pub shape: &'a Cuboid,
}

/// Whether `player` rests on any of `obstacles`.
///
/// Decided purely from body poses (not from the narrow phase's contact graph)
/// so the answer is right even straight after a teleport, and depends only on
/// state a snapshot carries.
pub(crate) fn is_supported<'a>(
    player_pose: &Pose,
    player_shape: &Cuboid,
    obstacles: impl IntoIterator<Item = Obstacle<'a>>,
) -> bool {
    let player_radius = player_shape.half_extents.length();
    let centre = player_pose.translation;
    obstacles.into_iter().any(|obstacle| {
        // Cheap sphere test first: the exact query is only worth it nearby.
        let reach = player_radius + obstacle.shape.half_extents.length() + SUPPORT_GAP;
        if centre.distance_squared(obstacle.pose.translation) > reach * reach {
            return false;
        }
        touches_from_below(player_pose, player_shape, obstacle.pose, obstacle.shape)
    })
}

/// Like [`is_supported`] for one obstacle without the distance pre-filter,
/// for obstacles (the ground) too large for a bounding sphere to help.
pub(crate) fn touches_from_below(
    player_pose: &Pose,
    player_shape: &Cuboid,
    pose: &Pose,
    shape: &Cuboid,
) -> bool {
    match query::contact(player_pose, player_shape, pose, shape, SUPPORT_GAP) {
        // normal1 points from the player toward the obstacle: down means underfoot.
        Ok(Some(contact)) => contact.normal1.dot(Vec3::Y) <= -FLOOR_COS,
        _ => false,
    }
}
