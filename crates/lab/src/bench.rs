//! `lagless bench-reconcile`: what one reconciliation costs against rollback depth and
//! predicted-set size, with the naive full-world restore-and-replay measured in the same
//! process as the baseline (timings on shared machines are noisy; ratios are not).

use lagless_core::{Rollback, Tick};
use lagless_scenes::cubes::predict::{CubeRollback, PredictConfig, PredictMode};
use lagless_scenes::cubes::snapshot::CubeSnapshot;
use lagless_scenes::cubes::{CubeInput, CubeScene, CubeSceneConfig};
use std::time::Instant;

/// One measured configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRow {
    /// "set" or "full".
    pub mode: &'static str,
    /// Predicted-set radius, m (full world: all bodies).
    pub radius: f32,
    /// Bodies simulated besides the player.
    pub bodies: usize,
    /// Ticks replayed.
    pub depth: u32,
    /// Median ms per reconciliation (load + replay).
    pub median_ms: f64,
    /// Median ms of the full world at the same depth, measured alongside.
    pub full_median_ms: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A server world with the player driven into the grid, so cubes are awake around it,
/// and the snapshot a client would reconcile with.
fn busy_world(scene: CubeSceneConfig) -> CubeSnapshot {
    let mut server = CubeScene::new(scene);
    server.add_player(0);
    for t in 0..96u32 {
        let input = if t % 32 < 24 {
            CubeInput::FORWARD
        } else {
            CubeInput::FORWARD.with(CubeInput::LEFT)
        };
        server.step(&[(0, input)]);
    }
    CubeSnapshot::capture(&server)
}

fn time_reconcile(
    game: &mut CubeRollback,
    snapshot: &CubeSnapshot,
    depth: u32,
    reps: usize,
) -> Vec<f64> {
    (0..reps)
        .map(|_| {
            let started = Instant::now();
            game.load(snapshot);
            for t in 0..depth {
                game.advance(Tick(t), CubeInput::FORWARD);
            }
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect()
}

/// Runs the benchmark grid: every radius at a fixed depth, and every depth at the
/// default radius. `reps` repetitions per cell; medians reported.
pub fn bench_reconcile(reps: usize, progress: &mut dyn FnMut(usize, usize)) -> Vec<BenchRow> {
    let scene = CubeSceneConfig::default();
    let snapshot = busy_world(scene);
    let default = PredictConfig::default();
    let mut cells: Vec<(f32, u32)> = [0.0f32, 1.5, 2.5, 4.0, 6.0, 10.0]
        .iter()
        .map(|&r| (r, 16))
        .collect();
    cells.extend([1u32, 4, 8, 32, 64].iter().map(|&d| (default.radius, d)));
    let mut full = CubeRollback::new(
        0,
        scene,
        PredictConfig {
            mode: PredictMode::FullWorld,
            ..default
        },
    );
    let mut rows = Vec::new();
    for (k, &(radius, depth)) in cells.iter().enumerate() {
        progress(k, cells.len());
        let mut set = CubeRollback::new(0, scene, PredictConfig { radius, ..default });
        // Interleave the two so machine noise hits both alike.
        let mut ours = Vec::new();
        let mut base = Vec::new();
        for _ in 0..reps.div_ceil(5) {
            ours.extend(time_reconcile(&mut set, &snapshot, depth, 5));
            base.extend(time_reconcile(&mut full, &snapshot, depth, 1));
        }
        set.load(&snapshot);
        rows.push(BenchRow {
            mode: "set",
            radius,
            bodies: set.predicted_cubes(),
            depth,
            median_ms: median(ours),
            full_median_ms: median(base),
        });
    }
    progress(cells.len(), cells.len());
    rows
}

/// The rows as a table.
pub fn format_rows(rows: &[BenchRow]) -> String {
    let mut out = format!(
        "{:>8} {:>7} {:>6} {:>12} {:>14} {:>8}\n",
        "radius_m", "bodies", "depth", "set_ms_p50", "full_ms_p50", "ratio"
    );
    for r in rows {
        out.push_str(&format!(
            "{:>8.1} {:>7} {:>6} {:>12.3} {:>14.3} {:>7.1}x\n",
            r.radius,
            r.bodies,
            r.depth,
            r.median_ms,
            r.full_median_ms,
            r.full_median_ms / r.median_ms.max(1e-9)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_predicted_set_is_cheaper_than_the_world() {
        let rows = bench_reconcile(5, &mut |_, _| {});
        assert_eq!(rows.len(), 11);
        let at = |r: f32| {
            rows.iter()
                .find(|x| x.radius == r && x.depth == 16)
                .unwrap()
        };
        // More radius, more bodies; zero radius, only the player.
        assert_eq!(at(0.0).bodies, 0);
        assert!(at(2.5).bodies > 0 && at(10.0).bodies > at(2.5).bodies);
        // Cost falls with the set (generous margins: this machine is shared).
        assert!(at(2.5).median_ms < at(2.5).full_median_ms, "{rows:?}");
        assert!(format_rows(&rows).contains("ratio"));
    }
}
