//! `lagless bench-reconcile`: what one reconciliation costs against rollback depth and
//! predicted-set size, with the naive full-world restore-and-replay measured in the same
//! process as the baseline (timings on shared machines are noisy; ratios are not).

use lagless_core::{Rollback, Tick};
use lagless_scenes::cubes::predict::{CubeRollback, PredictConfig, PredictMode};
use lagless_scenes::cubes::snapshot::CubeSnapshot;
use lagless_scenes::cubes::{CubeInput, CubeScene, CubeSceneConfig};

/// One measured configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRow {
    /// "set" or "full".
    pub mode: &'static str,
    /// Most cubes predicted (the set's cap).
    pub max_cubes: usize,
    /// Bodies simulated besides the player.
    pub bodies: usize,
    /// Ticks replayed.
    pub depth: u32,
    /// Median ms per reconciliation (load + replay).
    pub median_ms: f64,
    /// Median ms of the full world at the same depth, measured alongside.
    pub full_median_ms: f64,
}

/// The middle value (upper middle for an even count); NaN when empty.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The benchmarks' driver at tick `t`: forward into the grid, veering left a quarter of
/// the time, so the player keeps knocking fresh cubes about.
pub(crate) fn busy_input(t: u32) -> CubeInput {
    if t % 32 < 24 {
        CubeInput::FORWARD
    } else {
        CubeInput::FORWARD.with(CubeInput::LEFT)
    }
}

/// A server world with the player driven into the grid, so cubes are awake around it,
/// and the snapshot a client would reconcile with.
fn busy_world(scene: CubeSceneConfig) -> CubeSnapshot {
    let mut server = CubeScene::new(scene);
    server.add_player(0);
    for t in 0..96u32 {
        server.step(&[(0, busy_input(t))]);
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
            let started = crate::cpu::CpuTimer::start();
            game.load(snapshot, None);
            for t in 0..depth {
                game.advance(Tick(t), CubeInput::FORWARD);
            }
            started.ms()
        })
        .collect()
}

/// Runs the benchmark grid: predicted sets of 0 to 64 cubes at a fixed depth (16 ticks,
/// about a 250 ms round trip at 64 Hz), and depths from 1 to 64 ticks at the default
/// set. `reps` repetitions per cell; medians of CPU time reported.
pub fn bench_reconcile(reps: usize, progress: &mut dyn FnMut(usize, usize)) -> Vec<BenchRow> {
    let scene = CubeSceneConfig::default();
    let snapshot = busy_world(scene);
    let default = PredictConfig::default();
    // A wide radius so the cap, not the radius, sets the size.
    let mut cells: Vec<(usize, f32, u32)> = [0usize, 2, 4, 8, 16, 32, 64]
        .iter()
        .map(|&n| (n, 10.0, 16))
        .collect();
    cells.extend(
        [1u32, 4, 8, 32, 64]
            .iter()
            .map(|&d| (default.max_cubes, default.radius, d)),
    );
    let mut full = CubeRollback::new(
        0,
        scene,
        PredictConfig {
            mode: PredictMode::FullWorld,
            ..default
        },
    );
    let mut rows = Vec::new();
    for (k, &(max_cubes, radius, depth)) in cells.iter().enumerate() {
        progress(k, cells.len());
        let config = PredictConfig {
            radius,
            max_cubes,
            ..default
        };
        let mut set = CubeRollback::new(0, scene, config);
        // Interleave the two so machine noise hits both alike.
        let mut ours = Vec::new();
        let mut base = Vec::new();
        for _ in 0..reps.div_ceil(5) {
            ours.extend(time_reconcile(&mut set, &snapshot, depth, 5));
            base.extend(time_reconcile(&mut full, &snapshot, depth, 1));
        }
        set.load(&snapshot, None);
        rows.push(BenchRow {
            mode: "set",
            max_cubes,
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
        "max", "bodies", "depth", "set_ms_p50", "full_ms_p50", "ratio"
    );
    for r in rows {
        out.push_str(&format!(
            "{:>8} {:>7} {:>6} {:>12.3} {:>14.3} {:>7.1}x\n",
            r.max_cubes,
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
        assert_eq!(rows.len(), 12);
        let at = |n: usize| {
            rows.iter()
                .find(|x| x.max_cubes == n && x.depth == 16)
                .unwrap()
        };
        // The cap sets the size: none, then exactly as many as allowed.
        assert_eq!(at(0).bodies, 0);
        assert_eq!(at(8).bodies, 8);
        assert!(at(64).bodies > at(8).bodies);
        // The default set is far cheaper than the world (generous: the machine is shared).
        assert!(at(8).median_ms * 2.0 < at(8).full_median_ms, "{rows:?}");
        assert!(format_rows(&rows).contains("ratio"));
    }
}
