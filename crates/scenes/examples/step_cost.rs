//! Measures what one tick of the cube scene costs: a 30 s roam by one player.
//!
//! ```text
//! cargo run --release -p lagless-scenes --example step_cost [seed] [seconds]
//! ```

use std::time::{Duration, Instant};

use lagless_scenes::cubes::script::{InputScript, RoamScript};
use lagless_scenes::cubes::{CubeScene, CubeSceneConfig};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(30);

    let config = CubeSceneConfig::default();
    let started = Instant::now();
    let mut scene = CubeScene::new(config);
    let build = started.elapsed();
    scene.add_player(0);
    let mut script = RoamScript::new(seed, &config);

    let ticks = seconds * u64::from(config.tick_hz);
    let mut times = Vec::with_capacity(ticks as usize);
    let mut awake_sum = 0usize;
    let mut awake_max = 0usize;
    for tick in 0..ticks {
        let seen = scene.player_state(0);
        let input = script.input(tick, seen.as_ref());
        let started = Instant::now();
        scene.step(&[(0, input)]);
        times.push(started.elapsed());
        let awake = scene.awake_cube_count();
        awake_sum += awake;
        awake_max = awake_max.max(awake);
    }

    let started = Instant::now();
    let copy = scene.clone();
    let clone = started.elapsed();
    drop(copy);

    times.sort();
    let total: Duration = times.iter().sum();
    println!(
        "roam seed {seed}, {seconds} s at {} Hz ({ticks} steps)",
        config.tick_hz
    );
    println!(
        "step ms: median {:.3}  p99 {:.3}  max {:.3}  mean {:.3}",
        ms(percentile(&times, 0.5)),
        ms(percentile(&times, 0.99)),
        ms(percentile(&times, 1.0)),
        ms(total) / ticks as f64,
    );
    println!(
        "awake cubes: mean {:.0}  max {awake_max}",
        awake_sum as f64 / ticks as f64
    );
    println!(
        "construction {:.1} ms, clone {:.2} ms",
        ms(build),
        ms(clone)
    );
}
