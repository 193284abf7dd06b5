//! `lagless bench-snapshot`: what capturing, encoding and decoding one 900-cube snapshot
//! costs on the replication layer, per client, with the plain uncompressed codec measured
//! in the same process as the baseline (timings on shared machines are noisy; ratios are
//! not).
//!
//! A player drives into the grid for 2 s; then, for 64 ticks with cubes being knocked
//! about, the layer captures the scene, encodes a snapshot for a client that acknowledged
//! the one of four ticks before (as on `broadband`), and a client decodes it. With no
//! budget, so the encode does all the work a run's may.

use crate::bench::{busy_input, median};
use crate::cpu::CpuTimer;
use lagless_core::Tick;
use lagless_replication::{
    BudgetConfig, ClientConfig, ReplicationClient, ReplicationServer, ServerConfig,
};
use lagless_scenes::cubes::replicate;
use lagless_scenes::cubes::snapshot::{CubeSnapshot, SnapshotLimits};
use lagless_scenes::cubes::{CubeScene, CubeSceneConfig};
use std::time::Duration;

/// One measured operation.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotBenchRow {
    /// What was timed.
    pub operation: String,
    /// Median µs per snapshot (CPU time).
    pub median_us: f64,
    /// Median payload bytes (for decodes: entities the client knows after it).
    pub bytes: usize,
}

/// Ticks of snapshots measured after the player has reached the grid.
const RECORDED: u32 = 64;

/// Ticks the player drives before measuring starts: 2 s, enough to reach the grid.
const WARM_UP: u32 = 128;

/// Age of the baseline the client acknowledged, ticks.
const ACK_AGE: u32 = 4;

/// Measures every operation `reps` times over the recorded ticks; `progress` is told
/// `(done, total)` reps.
pub fn bench_snapshot(
    reps: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Vec<SnapshotBenchRow> {
    let mut samples: [(Vec<f64>, Vec<usize>); 5] = Default::default();
    for rep in 0..reps {
        progress(rep, reps);
        let config = CubeSceneConfig::default();
        let q = config.quantize.unwrap_or_default();
        let mut scene = CubeScene::new(config);
        scene.add_player(0);
        let mut server = ReplicationServer::new(
            replicate::schema(&q),
            ServerConfig {
                budget: BudgetConfig {
                    max_kbps: 0.0,
                    ..BudgetConfig::default()
                },
                ..ServerConfig::default()
            },
        );
        server.add_client(1);
        let mut client = ReplicationClient::new(replicate::schema(&q), ClientConfig::default());
        let cubes = scene.cube_count();
        for t in 0..WARM_UP + RECORDED {
            scene.step(&[(0, busy_input(t))]);
            let tick = Tick(t + 1);
            let now = Duration::from_millis(u64::from(t) * 1000 / 64);
            let measured = t >= WARM_UP;
            let mut timed = |row: usize, op: &mut dyn FnMut() -> usize| {
                let timer = CpuTimer::start();
                let n = op();
                if measured {
                    samples[row].0.push(timer.ms() * 1000.0);
                    samples[row].1.push(n);
                }
            };
            let mut plain = Vec::new();
            timed(0, &mut || {
                plain = CubeSnapshot::capture(&scene).to_bytes();
                plain.len()
            });
            timed(1, &mut || {
                CubeSnapshot::decode(&plain, SnapshotLimits::default()).map_or(0, |s| s.cubes.len())
            });
            timed(2, &mut || {
                replicate::capture(&scene, &mut server).map_or(0, |_| server.len())
            });
            if let Some(acked) = tick.0.checked_sub(ACK_AGE).filter(|a| *a > 0) {
                server.acknowledge(1, Tick(acked), now);
            }
            let mut bytes = Vec::new();
            timed(3, &mut || {
                bytes = server.encode(1, tick, now).map_or(Vec::new(), |e| e.bytes);
                bytes.len()
            });
            timed(4, &mut || {
                let _ = client.receive(tick, &bytes);
                replicate::snapshot(&client, cubes, tick).cubes.len()
            });
        }
    }
    progress(reps, reps);
    let names = [
        "plain encode (capture + floats)",
        "plain decode",
        "layer capture (quantize, find changes)",
        "layer encode, baseline 4 ticks old",
        "layer decode + registry + floats",
    ];
    names
        .iter()
        .zip(samples)
        .map(|(name, (us, bytes))| SnapshotBenchRow {
            operation: (*name).to_owned(),
            median_us: median(us),
            bytes: median_count(bytes),
        })
        .collect()
}

/// The median of byte (or entity) counts; 0 for none.
fn median_count(mut counts: Vec<usize>) -> usize {
    counts.sort_unstable();
    counts.get(counts.len() / 2).copied().unwrap_or(0)
}

/// The rows as a table, with each operation's cost relative to the plain encode.
pub fn format_snapshot_rows(rows: &[SnapshotBenchRow]) -> String {
    let plain = rows
        .iter()
        .find(|r| r.operation.starts_with("plain encode"))
        .map_or(f64::NAN, |r| r.median_us);
    let mut out = format!(
        "{:<44} {:>10} {:>9} {:>12}\n",
        "operation (900 cubes, 1 player)", "median µs", "bytes", "vs plain enc"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<44} {:>10.1} {:>9} {:>11.2}x\n",
            r.operation,
            r.median_us,
            r.bytes,
            r.median_us / plain,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_is_measured_on_real_data() {
        let rows = bench_snapshot(1, &mut |_, _| {});
        assert_eq!(rows.len(), 5);
        let get = |prefix: &str| {
            rows.iter()
                .find(|r| r.operation.starts_with(prefix))
                .map(|r| r.bytes)
                .unwrap_or(0)
        };
        // Decodes produced all 900 cubes (a failed decode would count 0).
        assert_eq!(get("layer decode"), 900);
        assert_eq!(get("plain decode"), 900);
        assert_eq!(get("layer capture"), 901);
        // A delta is far smaller than plain floats.
        assert!(get("layer encode") * 20 < get("plain encode"));
        assert!(format_snapshot_rows(&rows).contains("layer encode"));
    }
}
