//! Under a budget too small for every change, what waits is what the client would show
//! least wrong: a body moving as the client carries it on by its velocity waits, one that
//! turned goes; and bodies near the client's focus go before far ones.

use lagless_core::Tick;
use lagless_replication::*;
use std::time::Duration;

fn schema() -> Schema {
    Schema::new()
        .kind(
            Kind::new("body")
                .vec3("position", 500.0, 1.0 / 512.0)
                .vec3("velocity", 64.0, 1.0 / 64.0)
                .velocity_of("position"),
        )
        .build()
        .expect("schema")
}

/// A body: where it starts, and how it moves.
struct Body {
    start: [f32; 3],
    velocity: [f32; 3],
    /// Its velocity turns back every this many ticks (0: never).
    turn_every: u32,
}

impl Body {
    /// Position and velocity at tick `t`, exactly on the quantization grid, so a body
    /// moving in a straight line is where the client's dead reckoning puts it.
    fn at(&self, t: u32) -> ([f32; 3], [f32; 3]) {
        let dt = 1.0 / 64.0;
        let mut p = self.start;
        let mut v = self.velocity;
        for k in 0..t {
            if self.turn_every > 0 && k > 0 && k % self.turn_every == 0 {
                v = v.map(|c| -c);
            }
            for i in 0..3 {
                p[i] += v[i] * dt;
            }
        }
        (p, v)
    }
}

/// Runs `bodies` for `ticks` with the client's focus at the origin under a budget that
/// carries a few updates per snapshot, and returns each body's errors (m) as the client
/// shows it each tick: its newest state carried on by its velocity.
fn run(bodies: &[Body], config: ReplicationConfig, ticks: u32) -> Vec<Vec<f32>> {
    let mut server = ReplicationServer::new(schema(), config);
    server.add_client(1);
    server.set_focus(1, Some([0.0; 3]));
    let mut client = ReplicationClient::new(schema(), ClientConfig::default());
    let write = |w: &mut StateWriter, (p, v): ([f32; 3], [f32; 3])| {
        w.vec3(p);
        w.vec3(v);
    };
    for (id, b) in bodies.iter().enumerate() {
        server
            .spawn_with_id(id as u32, 0, |w| write(w, b.at(0)))
            .expect("spawn");
    }
    let mut errors = vec![Vec::new(); bodies.len()];
    for t in 1..=ticks {
        for (id, b) in bodies.iter().enumerate() {
            server
                .update(id as u32, |w| write(w, b.at(t)))
                .expect("update");
        }
        let now = Duration::from_millis(u64::from(t) * 1000 / 64);
        let s = server.encode(1, Tick(t), now).expect("encode");

        client.receive(Tick(t), &s.bytes).expect("decode");
        server.acknowledge(1, Tick(t), now);
        // Once every body has arrived, how far off the client shows each.
        if t > ticks / 4 {
            for (id, b) in bodies.iter().enumerate() {
                let Some(shown) = client.values_at(id as u32, Tick(t), 0.25) else {
                    continue;
                };
                let truth = b.at(t).0;
                let e = (0..3).map(|i| (shown[i] - truth[i]).powi(2)).sum::<f32>();
                errors[id].push(e.sqrt());
            }
        }
    }
    errors
}

/// 16 kbit/s for the entities, plus the 16-bit view checksum every snapshot carries
/// (1 kbit/s at 64 snapshots a second).
fn small_budget() -> ReplicationConfig {
    ReplicationConfig {
        budget: BudgetConfig {
            max_kbps: 17.024,
            min_kbps: 17.024,
            adaptive: false,
            ..BudgetConfig::default()
        },
        packet_overhead_bytes: 0,
        ..ReplicationConfig::default()
    }
}

fn worst(errors: &[f32]) -> f32 {
    errors.iter().copied().fold(0.0, f32::max)
}

#[test]
fn a_body_moving_as_predicted_waits_behind_one_that_turned() {
    // Sixty bodies in straight lines, and one (the last id, so an order by id would
    // serve it last) that turns back every 16 ticks; all about 20 m away.
    let mut bodies: Vec<Body> = (0..60)
        .map(|k| Body {
            start: [20.0, 0.0, k as f32 * 0.25 - 7.5],
            velocity: [0.0, 0.0, 0.5],
            turn_every: 0,
        })
        .collect();
    bodies.push(Body {
        start: [20.0, 1.0, 0.0],
        velocity: [0.0, 0.0, 4.0],
        turn_every: 16,
    });
    let with_error = run(&bodies, small_budget(), 256);
    let without = run(
        &bodies,
        ReplicationConfig {
            error_tolerance: 0.0,
            ..small_budget()
        },
        256,
    );
    let turner = bodies.len() - 1;
    let (w, wo) = (worst(&with_error[turner]), worst(&without[turner]));
    assert!(
        w * 2.0 < wo,
        "the turning body's worst error: {w} m weighing errors, {wo} m without"
    );
    // What the straight movers gave up is little: the client carries them on right.
    let straight = |e: &[Vec<f32>]| e[..turner].iter().map(|v| worst(v)).fold(0.0, f32::max);
    assert!(
        straight(&with_error) < 0.05,
        "straight movers off by {} m",
        straight(&with_error)
    );
}

#[test]
fn near_bodies_go_before_far_ones() {
    // A few turning bodies near the focus, and many far away that turn as often and
    // faster: seen from the focus, about as wrong when they wait.
    const NEAR: usize = 6;
    const FAR: usize = 30;
    let body = |x: f32, k: usize, speed: f32| Body {
        start: [x, 0.0, k as f32 * 0.3],
        velocity: [speed, 0.0, speed / 3.0],
        turn_every: 5 + k as u32 % 4,
    };
    let bodies: Vec<Body> = (0..NEAR)
        .map(|k| body(2.0, k, 3.0))
        .chain((0..FAR).map(|k| body(30.0, k, 12.0)))
        .collect();
    let p99 = |e: &[Vec<f32>]| {
        let mut all: Vec<f32> = e.iter().flatten().copied().collect();
        all.sort_by(f32::total_cmp);
        all[all.len() * 99 / 100]
    };
    let boosted = run(&bodies, small_budget(), 256);
    let flat = run(
        &bodies,
        ReplicationConfig {
            near_boost: 1.0,
            ..small_budget()
        },
        256,
    );
    let (near_b, near_f) = (p99(&boosted[..NEAR]), p99(&flat[..NEAR]));
    assert!(
        near_b * 1.5 < near_f,
        "near bodies' p99 error: {near_b} m with the near field, {near_f} m without"
    );
    // The far ones still move on the client.
    let far_b = p99(&boosted[NEAR..]);
    assert!(far_b < 4.0, "far bodies' p99 error {far_b} m");
}
