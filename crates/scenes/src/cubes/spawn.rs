//! Where players appear.

use glam::Vec3;

use super::CubeSceneConfig;

/// Spawn point of player `id`: resting on the ground just outside the grid.
///
/// Points lie on square rings around the grid, one player pitch
/// (1.5 × `player_size`) apart in every direction, so distinct slots never
/// overlap even if a player spawns rotated. Ids 0..4 take the middle of the
/// +Z, -Z, +X and -X sides (id 0 faces the grid with W), later ids fan out
/// along the sides and then onto outer rings. Rings stop at the ground's edge;
/// ids beyond the resulting capacity (thousands with the defaults) wrap around.
pub(crate) fn spawn_point(config: &CubeSceneConfig, id: u32) -> Vec3 {
    let pitch = config.player_size * 1.5;
    let first = config.grid_half_extent() + pitch;
    let last = config.ground_half_extent - pitch;
    let rings = ((last - first) / pitch).floor().max(0.0) as u64 + 1;

    let per_side = |ring: u64| -> u64 {
        let half = first + ring as f32 * pitch;
        // Offsets stop a pitch short of the corner so neighbouring sides keep clear.
        1 + 2 * ((half - pitch) / pitch).floor().max(0.0) as u64
    };
    let capacity: u64 = (0..rings).map(|r| 4 * per_side(r)).sum();

    let mut slot = u64::from(id) % capacity;
    let mut ring = 0;
    while slot >= 4 * per_side(ring) {
        slot -= 4 * per_side(ring);
        ring += 1;
    }
    let half = first + ring as f32 * pitch;
    let along = slot / 4;
    let side = slot % 4;
    // 0, +1, -1, +2, -2, ... pitches from the middle of the side.
    let steps = along.div_ceil(2) as f32;
    let offset = if along % 2 == 1 { steps } else { -steps } * pitch;
    let (x, z) = match side {
        0 => (offset, half),
        1 => (-offset, -half),
        2 => (half, -offset),
        _ => (-half, offset),
    };
    Vec3::new(x, config.player_size * 0.5, z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_players_sit_mid_side_and_all_slots_are_apart() {
        let config = CubeSceneConfig::default();
        let h = config.grid_half_extent();
        let p0 = spawn_point(&config, 0);
        assert_eq!(p0.x, 0.0);
        assert!(p0.z > h + config.player_size * 0.5);
        assert!(spawn_point(&config, 1).z < -h);
        assert!(spawn_point(&config, 2).x > h);
        assert!(spawn_point(&config, 3).x < -h);

        let points: Vec<Vec3> = (0..400).map(|id| spawn_point(&config, id)).collect();
        let min_gap = config.player_size * 1.5 - 1e-3;
        for (i, a) in points.iter().enumerate() {
            assert!(a.x.abs().max(a.z.abs()) > h + config.player_size * 0.5);
            assert!(a.x.abs().max(a.z.abs()) < config.ground_half_extent);
            for b in &points[i + 1..] {
                assert!(a.distance(*b) >= min_gap, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn huge_ids_stay_on_the_ground() {
        let config = CubeSceneConfig::default();
        for id in [u32::MAX, u32::MAX - 1, 1 << 31, 123_456_789] {
            let p = spawn_point(&config, id);
            assert!(p.x.abs() < config.ground_half_extent && p.z.abs() < config.ground_half_extent);
        }
    }
}
