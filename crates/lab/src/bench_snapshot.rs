//! `lagless bench-snapshot`: what encoding and decoding one 900-cube snapshot costs, per
//! client, with the plain uncompressed codec measured in the same process as the baseline
//! (timings on shared machines are noisy; ratios are not).

use crate::bench::{busy_input, median};
use crate::cpu::CpuTimer;
use lagless_core::{BaselineHistory, Tick};
use lagless_scenes::cubes::delta::{QuantizedSnapshot, SnapshotCodec};
use lagless_scenes::cubes::snapshot::{CubeSnapshot, SnapshotLimits};
use lagless_scenes::cubes::{CubeScene, CubeSceneConfig};

/// One measured operation.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotBenchRow {
    /// What was timed.
    pub operation: String,
    /// Median µs per snapshot (CPU time).
    pub median_us: f64,
    /// Median payload bytes.
    pub bytes: usize,
}

/// Ticks of snapshots recorded after the player has reached the grid.
const RECORDED: usize = 64;

/// The default scene with a player driven into the grid for 2 s, then one snapshot per
/// tick for [`RECORDED`] ticks: cubes are being knocked about the whole time.
fn busy_snapshots(codec: &SnapshotCodec) -> (Vec<QuantizedSnapshot>, Vec<CubeSnapshot>) {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    let (mut quantized, mut plain) = (Vec::new(), Vec::new());
    for t in 0..(128 + RECORDED) as u32 {
        scene.step(&[(0, busy_input(t))]);
        if t >= 128 {
            quantized.push(QuantizedSnapshot::capture(&scene, &codec.quantization));
            plain.push(CubeSnapshot::capture(&scene));
        }
    }
    (quantized, plain)
}

/// Times `op` on every recorded tick from `start` on, `reps` times; returns the median µs
/// and the median of the byte counts `op` returns.
fn time<F: FnMut(usize) -> usize>(reps: usize, start: usize, mut op: F) -> (f64, usize) {
    let mut us = Vec::new();
    let mut bytes = Vec::new();
    for _ in 0..reps {
        for i in start..RECORDED {
            let timer = CpuTimer::start();
            let n = op(i);
            us.push(timer.ms() * 1000.0);
            bytes.push(n);
        }
    }
    bytes.sort_unstable();
    (median(us), bytes.get(bytes.len() / 2).copied().unwrap_or(0))
}

/// Measures capture, delta and full encodes, decodes, and the plain codec, `reps`
/// passes over [`RECORDED`] busy snapshots each. `progress(done, total)` after each row.
pub fn bench_snapshot(
    reps: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Vec<SnapshotBenchRow> {
    let codec = SnapshotCodec::default();
    let (q, plain) = busy_snapshots(&codec);
    let total = 8;
    let mut rows = Vec::new();
    let mut row =
        |rows: &mut Vec<SnapshotBenchRow>, operation: String, (us, bytes): (f64, usize)| {
            rows.push(SnapshotBenchRow {
                operation,
                median_us: us,
                bytes,
            });
            progress(rows.len(), total);
        };

    row(
        &mut rows,
        "quantize the world (once per tick)".into(),
        time(reps, 0, |i| {
            QuantizedSnapshot::from_snapshot(&plain[i], &codec.quantization)
                .cubes
                .len()
        }),
    );
    for age in [4usize, 16] {
        row(
            &mut rows,
            format!("delta encode, baseline {age} ticks old"),
            time(reps, age, |i| {
                let base = (Tick((i - age) as u32), &q[i - age]);
                codec.encode(&q[i], Tick(i as u32), Some(base)).bytes.len()
            }),
        );
    }
    row(
        &mut rows,
        "full encode (no baseline)".into(),
        time(reps, 0, |i| {
            codec.encode(&q[i], Tick(i as u32), None).bytes.len()
        }),
    );
    let age = 4;
    let encoded: Vec<Vec<u8>> = (0..RECORDED)
        .map(|i| {
            let base = (i >= age).then(|| (Tick((i - age) as u32), &q[i - age]));
            codec.encode(&q[i], Tick(i as u32), base).bytes
        })
        .collect();
    let mut history = BaselineHistory::new(RECORDED);
    for (i, s) in q.iter().enumerate() {
        history.insert(Tick(i as u32), s.clone());
    }
    row(
        &mut rows,
        format!("delta decode, baseline {age} ticks old"),
        time(reps, age, |i| {
            codec
                .decode(&encoded[i], Tick(i as u32), &history)
                .map_or(0, |s| s.cubes.len())
        }),
    );
    row(
        &mut rows,
        "to floats (decoded codes -> CubeSnapshot)".into(),
        time(reps, 0, |i| {
            q[i].to_snapshot(&codec.quantization).cubes.len()
        }),
    );
    row(
        &mut rows,
        "plain encode (baseline codec)".into(),
        time(reps, 0, |i| plain[i].to_bytes().len()),
    );
    let plain_bytes: Vec<Vec<u8>> = plain.iter().map(CubeSnapshot::to_bytes).collect();
    row(
        &mut rows,
        "plain decode (baseline codec)".into(),
        time(reps, 0, |i| {
            CubeSnapshot::decode(&plain_bytes[i], SnapshotLimits::default())
                .map_or(0, |s| s.cubes.len())
        }),
    );
    rows
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
            r.median_us / plain
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
        assert_eq!(rows.len(), 8);
        let get = |prefix: &str| {
            rows.iter()
                .find(|r| r.operation.starts_with(prefix))
                .unwrap()
        };
        // Decodes produced all 900 cubes (a failed decode would count 0).
        assert_eq!(get("delta decode").bytes, 900);
        assert_eq!(get("plain decode").bytes, 900);
        // A delta is far smaller than a full snapshot, which is smaller than plain.
        assert!(get("delta encode, baseline 4").bytes * 10 < get("full encode").bytes);
        assert!(get("full encode").bytes * 2 < get("plain encode").bytes);
        assert!(format_snapshot_rows(&rows).contains("delta encode"));
    }
}
