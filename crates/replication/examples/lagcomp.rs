//! Lag compensation, measured: a target runs up and down a corridor, a client that
//! shows the world 150 ms late shoots at what it sees, and the server tests each shot
//! three ways: rewound to the client's claimed view (lag compensation), in the present
//! (none), and for a lying client that claims a view 1000 ms older than it shows (the
//! faked-ping attack). Each shot's hit is shown at once on the client and resolved by
//! the server's report (cosmetic-first hits).
//!
//! Run: `cargo run -p lagless-replication --example lagcomp`

use lagless_replication::hits::{HitConfig, HitReport, HitStats, HitTracker};
use lagless_replication::lagcomp::*;
use lagless_replication::{Pose, Tick};
use std::time::Duration;

const HZ: f64 = 30.0;
const SECONDS: u32 = 120;
const TARGET: u32 = 2;
const SHOOTER: u32 = 1;
const BODY: Shape = Shape::Circle { radius: 0.3 };
/// How far behind the server the client shows the world.
const SHOWN_LATE_MS: f64 = 150.0;
/// What the liar adds to its claim.
const LIE_MS: f64 = 1000.0;

/// The target at fractional tick `t`: 15 m down the corridor, running across it
/// (y in [-2, 2]) at 4 m/s, turning at the walls and pausing now and then.
fn target_at(t: f64) -> Pose {
    let secs = t / HZ;
    let crossing = (secs / 1.75).floor();
    let into = (secs - crossing * 1.75).min(1.5);
    let up = crossing as i64 % 2 == 0;
    let y = if up {
        -3.0 + 4.0 * into
    } else {
        3.0 - 4.0 * into
    };
    Pose::planar([15.0, y.clamp(-2.0, 2.0) as f32], 0.0)
}

/// Shot `n`'s aim error, metres off the target's centre as the client sees it.
fn aim_error(n: u32) -> f32 {
    [0.0, 0.15, -0.25, 0.35, -0.1, 0.45, -0.4, 0.2][(n % 8) as usize]
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Compensated,
    Present,
    Liar,
}

/// Shots, hits, clamps, the p99 rewind in ms, and the client's hit counters.
fn run(mode: Mode) -> (u32, u32, u64, f64, HitStats) {
    let mut lc = LagCompensator::new(LagCompConfig::default()); // 30 ticks/s, 250 ms
    let mut tracker = HitTracker::new(HitConfig::default());
    tracker.set_rtt(Duration::from_millis(150));
    let late_ticks = SHOWN_LATE_MS / 1000.0 * HZ;
    let (mut shots, mut hits, mut rewinds) = (0u32, 0u32, Vec::new());
    for now in 0..SECONDS * 30 {
        let now_tick = Tick(now);
        let me = Pose::planar([0.0, 0.0], 0.0);
        lc.record(now_tick, TARGET, target_at(f64::from(now)), BODY)
            .expect("valid");
        lc.record(now_tick, SHOOTER, me, BODY).expect("valid");
        if now < 40 || now % 5 != 0 {
            continue;
        }
        // The client sees the target 150 ms back and aims at it, a little off.
        let view = f64::from(now) - late_ticks;
        let seen = target_at(view).planar_position();
        let aim = [seen[0], seen[1] + aim_error(shots)];
        let ray = Ray::planar([0.0, 0.0], aim, 50.0).expect("finite aim");
        let shot_id = shots as u16;
        if BODY.cast(&Pose::planar(seen, 0.0), &ray).is_some() {
            tracker.shown(shot_id, TARGET, now_tick); // the hit effect, at once
        }
        let claimed = match mode {
            Mode::Compensated => view,
            Mode::Present => f64::from(now),
            Mode::Liar => view - LIE_MS / 1000.0 * HZ,
        };
        let claim = ViewClaim::new(now_tick, claimed); // what the input carries
        let shot = Shot {
            claimed_view: claim.view(now_tick),
            origin: [0.0, 0.0, 0.0],
            direction: [aim[0], aim[1], 0.0],
            max_distance: 50.0,
            shooter: Some(SHOOTER),
        };
        let result = lc.rewind_query(now_tick, &shot).expect("valid shot");
        rewinds.push(result.rewind.rewind_ms);
        let target = result.hit.map(|h| h.entity);
        hits += u32::from(target.is_some());
        shots += 1;
        tracker.report(&HitReport {
            shot: shot_id,
            target,
        });
        tracker.update(now_tick);
    }
    rewinds.sort_by(f64::total_cmp);
    let p99 = rewinds[(rewinds.len() * 99 / 100).min(rewinds.len() - 1)];
    let clamped = lc.stats().clamped();
    (shots, hits, clamped, p99, *tracker.stats())
}

fn main() {
    println!(
        "target crossing a corridor at 4 m/s, radius 0.3 m; client shows the world {SHOWN_LATE_MS} ms late; \
         {SECONDS} s at 30 ticks/s, a shot every 5 ticks, aim errors up to 0.45 m"
    );
    println!(
        "{:<34} {:>6} {:>9} {:>8} {:>15} {:>16} {:>18}",
        "server test",
        "shots",
        "hit rate",
        "clamped",
        "rewind p99 ms",
        "confirmed_pct",
        "server_only_pct"
    );
    for (mode, name) in [
        (Mode::Compensated, "rewound to the claimed view"),
        (Mode::Present, "present (no compensation)"),
        (Mode::Liar, "rewound, liar claims +1000 ms"),
    ] {
        let (shots, hits, clamped, p99, h) = run(mode);
        println!(
            "{name:<34} {shots:>6} {:>8.1}% {clamped:>8} {p99:>15.1} {:>15.1}% {:>17.1}%",
            100.0 * f64::from(hits) / f64::from(shots),
            h.confirmed_pct(),
            h.server_only_pct()
        );
    }
}
