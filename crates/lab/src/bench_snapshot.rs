//! `lagless bench-snapshot`: what encoding and decoding one 900-cube snapshot costs, per
//! client, with the plain uncompressed codec measured in the same process as the baseline
//! (timings on shared machines are noisy; ratios are not).
//!
//! The incremental capture and conversion ([`CaptureCache`], [`DecodeCache`]) are timed
//! next to the whole-world operations they replace, each fed the recorded ticks in order
//! so it always holds the previous tick, as in a run. Their results are compared with
//! the reference outside the timer, and a row says when they differ.

use crate::bench::{busy_input, median};
use crate::cpu::CpuTimer;
use lagless_core::{BaselineHistory, Tick};
use lagless_scenes::cubes::cache::{CaptureCache, DecodeCache};
use lagless_scenes::cubes::delta::{QuantizedSnapshot, SnapshotCodec};
use lagless_scenes::cubes::snapshot::{CubeSnapshot, SnapshotLimits};
use lagless_scenes::cubes::{BodyState, CubeScene, CubeSceneConfig};

/// One measured operation.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotBenchRow {
    /// What was timed.
    pub operation: String,
    /// Median µs per snapshot (CPU time).
    pub median_us: f64,
    /// Median payload bytes (for captures, decodes and conversions: cubes produced).
    pub bytes: usize,
    /// For an incremental operation, whether every result equalled the non-incremental
    /// reference's; `None` for the others.
    pub matches_reference: Option<bool>,
}

/// Ticks of snapshots recorded after the player has reached the grid.
const RECORDED: usize = 64;

/// Ticks the player drives before recording starts: 2 s, enough to reach the grid.
const WARM_UP: u32 = 128;

/// What [`busy_snapshots`] recorded.
struct Recorded {
    /// The reference capture of every recorded tick.
    quantized: Vec<QuantizedSnapshot>,
    /// The plain snapshot of every recorded tick.
    plain: Vec<CubeSnapshot>,
    /// µs of each reference capture from the scene.
    capture_us: Vec<f64>,
    /// µs of each incremental capture from the scene.
    incremental_capture_us: Vec<f64>,
    /// Whether every incremental capture equalled the reference.
    incremental_matches: bool,
}

/// The default scene with a player driven into the grid for 2 s, then one snapshot per
/// tick for [`RECORDED`] ticks: cubes are being knocked about the whole time.
///
/// Capturing from the scene is timed here, `reps` times a tick, because only here is
/// there a scene to read. Each incremental rep starts from a copy of the cache as the
/// previous tick left it; otherwise every rep after the first would find nothing changed.
fn busy_snapshots(codec: &SnapshotCodec, reps: usize) -> Recorded {
    let q = &codec.quantization;
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    let mut rec = Recorded {
        quantized: Vec::new(),
        plain: Vec::new(),
        capture_us: Vec::new(),
        incremental_capture_us: Vec::new(),
        incremental_matches: true,
    };
    let mut warm = CaptureCache::new();
    for t in 0..WARM_UP + RECORDED as u32 {
        scene.step(&[(0, busy_input(t))]);
        if t + 1 == WARM_UP {
            warm.capture(&scene, q);
        }
        if t < WARM_UP {
            continue;
        }
        let mut reference = QuantizedSnapshot::default();
        for _ in 0..reps {
            let timer = CpuTimer::start();
            reference = QuantizedSnapshot::capture(&scene, q);
            rec.capture_us.push(timer.ms() * 1000.0);
        }
        let mut next = warm.clone();
        for _ in 0..reps {
            next = warm.clone();
            let timer = CpuTimer::start();
            let snapshot = next.capture(&scene, q);
            rec.incremental_capture_us.push(timer.ms() * 1000.0);
            rec.incremental_matches &= snapshot == reference;
        }
        warm = next;
        rec.quantized.push(reference);
        rec.plain.push(CubeSnapshot::capture(&scene));
    }
    rec
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
    (median(us), median_count(bytes))
}

/// The median of byte (or cube) counts; 0 for none.
fn median_count(mut counts: Vec<usize>) -> usize {
    counts.sort_unstable();
    counts.get(counts.len() / 2).copied().unwrap_or(0)
}

/// Times an incremental operation over the recorded ticks in order, `reps` passes. Each
/// pass takes a `fresh` cache and feeds it tick 0 untimed, so every timed call (ticks 1
/// on) finds the previous tick in it. `check(i, result)` runs outside the timer and
/// returns the row's byte count and whether the result equals the reference.
fn time_in_sequence<C, T>(
    reps: usize,
    mut fresh: impl FnMut() -> C,
    mut op: impl FnMut(&mut C, usize) -> T,
    mut check: impl FnMut(usize, &T) -> (usize, bool),
) -> ((f64, usize), bool) {
    let mut us = Vec::new();
    let mut bytes = Vec::new();
    let mut matches = true;
    for _ in 0..reps {
        let mut cache = fresh();
        op(&mut cache, 0);
        for i in 1..RECORDED {
            let timer = CpuTimer::start();
            let result = op(&mut cache, i);
            us.push(timer.ms() * 1000.0);
            let (n, ok) = check(i, &result);
            bytes.push(n);
            matches &= ok;
        }
    }
    ((median(us), median_count(bytes)), matches)
}

/// Measures capture, delta and full encodes, decodes, and the plain codec, `reps`
/// passes over the recorded busy snapshots each. `progress(done, total)` after each row.
pub fn bench_snapshot(
    reps: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Vec<SnapshotBenchRow> {
    let codec = SnapshotCodec::default();
    let quant = &codec.quantization;
    let rec = busy_snapshots(&codec, reps);
    let (q, plain) = (&rec.quantized, &rec.plain);
    let total = 12;
    let mut rows = Vec::new();
    let mut row = |rows: &mut Vec<SnapshotBenchRow>,
                   operation: String,
                   (us, bytes): (f64, usize),
                   matches_reference: Option<bool>| {
        rows.push(SnapshotBenchRow {
            operation,
            median_us: us,
            bytes,
            matches_reference,
        });
        progress(rows.len(), total);
    };
    let cubes = q.first().map_or(0, |s| s.cubes.len());

    row(
        &mut rows,
        "capture from the scene (reference)".into(),
        (median(rec.capture_us), cubes),
        None,
    );
    row(
        &mut rows,
        "capture from the scene, incremental".into(),
        (median(rec.incremental_capture_us), cubes),
        Some(rec.incremental_matches),
    );
    row(
        &mut rows,
        "quantize the world (once per tick)".into(),
        time(reps, 0, |i| {
            QuantizedSnapshot::from_snapshot(&plain[i], quant)
                .cubes
                .len()
        }),
        None,
    );
    let (timed, matches) = time_in_sequence(
        reps,
        CaptureCache::new,
        |cache, i| cache.quantize(&plain[i], quant),
        |i, s| (s.cubes.len(), *s == q[i]),
    );
    row(
        &mut rows,
        "quantize the world, incremental".into(),
        timed,
        Some(matches),
    );
    for age in [4usize, 16] {
        row(
            &mut rows,
            format!("delta encode, baseline {age} ticks old"),
            time(reps, age, |i| {
                let base = (Tick((i - age) as u32), &q[i - age]);
                codec.encode(&q[i], Tick(i as u32), Some(base)).bytes.len()
            }),
            None,
        );
    }
    row(
        &mut rows,
        "full encode (no baseline)".into(),
        time(reps, 0, |i| {
            codec.encode(&q[i], Tick(i as u32), None).bytes.len()
        }),
        None,
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
        None,
    );
    row(
        &mut rows,
        "to floats (decoded codes -> CubeSnapshot)".into(),
        time(reps, 0, |i| q[i].to_snapshot(quant).cubes.len()),
        None,
    );
    let floats: Vec<CubeSnapshot> = q.iter().map(|s| s.to_snapshot(quant)).collect();
    let (timed, matches) = time_in_sequence(
        reps,
        DecodeCache::new,
        |cache, i| cache.to_snapshot(&q[i], quant),
        |i, s| (s.cubes.len(), bit_identical(s, &floats[i])),
    );
    row(
        &mut rows,
        "to floats, incremental".into(),
        timed,
        Some(matches),
    );
    row(
        &mut rows,
        "plain encode (baseline codec)".into(),
        time(reps, 0, |i| plain[i].to_bytes().len()),
        None,
    );
    let plain_bytes: Vec<Vec<u8>> = plain.iter().map(CubeSnapshot::to_bytes).collect();
    row(
        &mut rows,
        "plain decode (baseline codec)".into(),
        time(reps, 0, |i| {
            CubeSnapshot::decode(&plain_bytes[i], SnapshotLimits::default())
                .map_or(0, |s| s.cubes.len())
        }),
        None,
    );
    rows
}

/// Equality of every float's bits: `==` on floats would accept `-0.0` for `0.0`.
fn bit_identical(a: &CubeSnapshot, b: &CubeSnapshot) -> bool {
    let body = |s: &BodyState| {
        [s.position, s.linvel, s.angvel]
            .iter()
            .flat_map(|v| v.to_array())
            .chain(s.rotation.to_array())
            .map(f32::to_bits)
            .collect::<Vec<u32>>()
    };
    let players = |s: &CubeSnapshot| {
        s.players
            .iter()
            .map(|(id, b)| (*id, body(b)))
            .collect::<Vec<_>>()
    };
    let cubes = |s: &CubeSnapshot| {
        s.cubes
            .iter()
            .map(|c| (c.awake, body(&c.body_state())))
            .collect::<Vec<_>>()
    };
    players(a) == players(b) && cubes(a) == cubes(b)
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
            "{:<44} {:>10.1} {:>9} {:>11.2}x{}\n",
            r.operation,
            r.median_us,
            r.bytes,
            r.median_us / plain,
            if r.matches_reference == Some(false) {
                "  DIFFERS FROM THE REFERENCE"
            } else {
                ""
            }
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
        assert_eq!(rows.len(), 12);
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
        // The incremental paths give exactly what the whole-world ones do.
        let incremental: Vec<_> = rows
            .iter()
            .filter(|r| r.operation.contains("incremental"))
            .collect();
        assert_eq!(incremental.len(), 3);
        for r in incremental {
            assert_eq!(r.matches_reference, Some(true), "{}", r.operation);
            assert_eq!(r.bytes, 900, "{}", r.operation);
        }
    }
}
