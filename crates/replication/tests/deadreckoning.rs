//! Dead reckoning end to end: a server's `DrServer` feeding a client's `DrReceiver` over
//! a fixed one-way delay, with the shown characters compared against the truth at the
//! same instant.

use lagless_core::RttEstimator;
use lagless_replication::Tick;
use lagless_replication::deadreckoning::*;
use lagless_wire::{BitReader, BitWriter};
use std::collections::VecDeque;
use std::time::Duration;

const HZ: u32 = 64;
const DELAY: Duration = Duration::from_millis(60);

fn at(tick: u32) -> Duration {
    Duration::from_secs_f64(f64::from(tick) / f64::from(HZ))
}

fn dist(a: [f32; 3], b: [f32; 3]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f32>()
        .sqrt()
}

/// The triggers of the messages that became due, with their ticks.
type Triggers = Vec<(u32, Trigger)>;

/// One character driven by `truth(tick)`, sent every tick through the codec over a
/// fixed delay. Returns, per tick, the present-time error (m) once shown, and the
/// triggers of the messages that became due.
fn run(
    steering: Steering,
    ticks: u32,
    truth: impl Fn(u32) -> CharacterState,
) -> (Vec<(u32, Option<f32>)>, Triggers) {
    let codec = DrCodec::default();
    let mut server = DrServer::new(SenderConfig::default());
    let mut client = DrReceiver::new(ReceiverConfig {
        steering,
        ..ReceiverConfig::default()
    });
    server.add_client(1);
    client.spawn(9);
    // The one-way lag from the core's estimator, fed round trips over the same link.
    let mut rtt = RttEstimator::new();
    for _ in 0..8 {
        rtt.add_sample(DELAY * 2);
    }
    client.set_rtt(&rtt);
    let mut in_flight: VecDeque<(Duration, Vec<u8>)> = VecDeque::new();
    let mut errors = Vec::new();
    let mut triggers = Vec::new();
    for tick in 0..ticks {
        let now = at(tick);
        let state = truth(tick);
        if let Some(t) = server.update(9, now, Tick(tick), state) {
            triggers.push((tick, t));
        }
        let messages = server.poll_messages(1, |_| true);
        if !messages.is_empty() {
            let mut w = BitWriter::new();
            codec
                .write_batch(&mut w, &messages)
                .expect("valid messages");
            in_flight.push_back((now + DELAY, w.into_bytes()));
        }
        while in_flight.front().is_some_and(|(due, _)| *due <= now) {
            let (_, bytes) = in_flight.pop_front().expect("a packet due");
            let mut r = BitReader::new(&bytes);
            client
                .receive_batch(now, Tick(tick), &codec, &mut r)
                .expect("a batch we sent");
        }
        let shown = client.shown(9, now);
        errors.push((tick, shown.map(|s| dist(s.position, state.position))));
    }
    (errors, triggers)
}

fn walk(origin: [f32; 3], heading: f32, speed: f32, secs: f32) -> [f32; 3] {
    let d = DrMessage::direction(heading);
    [
        origin[0] + d[0] * speed * secs,
        origin[1],
        origin[2] + d[2] * speed * secs,
    ]
}

#[test]
fn a_straight_walker_is_shown_where_it_is_now() {
    let (heading, speed) = (0.7, 3.1);
    for steering in [Steering::Arrive, Steering::Pvb] {
        let (errors, triggers) = run(steering, 10 * HZ, |t| {
            let p = walk([5.0, 1.0, -3.0], heading, speed, at(t).as_secs_f32());
            CharacterState::new(p, heading, speed)
        });
        let shown: Vec<f32> = errors.iter().filter_map(|(_, e)| *e).collect();
        // Shown from the tick the first message arrives on.
        assert_eq!(errors.iter().position(|(_, e)| e.is_some()), Some(4));
        let worst = shown.iter().fold(0.0f32, |a, &b| a.max(b));
        // Quantization only: 1/64 m of position, 2π/4096 of heading and 1/64 m/s of
        // speed over a 2 s interval: under 3 cm.
        assert!(worst < 0.03, "{steering:?}: worst {worst} m");
        assert!(
            triggers
                .iter()
                .all(|(_, t)| matches!(t, Trigger::First | Trigger::Sync))
        );
    }
}

#[test]
fn a_turn_sends_one_message_and_the_shown_path_converges_within_one_interval() {
    let turn_tick = 3 * HZ + 10; // between two syncs
    let (h0, h1, speed) = (0.0, 1.2, 3.0);
    let turn_at = at(turn_tick).as_secs_f32();
    let turn_point = walk([0.0; 3], h0, speed, turn_at);
    let truth = |t: u32| {
        let s = at(t).as_secs_f32();
        if t < turn_tick {
            CharacterState::new(walk([0.0; 3], h0, speed, s), h0, speed)
        } else {
            CharacterState::new(walk(turn_point, h1, speed, s - turn_at), h1, speed)
        }
    };
    for steering in [Steering::Arrive, Steering::Pvb] {
        let (errors, triggers) = run(steering, 8 * HZ, truth);
        let after: Vec<Trigger> = triggers
            .iter()
            .filter(|(t, _)| (turn_tick..turn_tick + HZ).contains(t))
            .map(|(_, tr)| *tr)
            .collect();
        // One momentum change, and its resend a quarter of a second later.
        assert_eq!(after, vec![Trigger::Turn, Trigger::Resend], "{steering:?}");
        let error = |tick: u32| errors[tick as usize].1.unwrap();
        // The turn's message arrives DELAY later; until then the error grows.
        let arrival = turn_tick + (DELAY.as_secs_f64() * f64::from(HZ)).ceil() as u32;
        let at_arrival = error(arrival);
        assert!(at_arrival > 0.1, "{steering:?}: {at_arrival}");
        // Steered onto the truth within the message's 2 s interval, and on it after.
        let end = arrival + 2 * HZ;
        assert!(error(arrival + HZ) < at_arrival, "{steering:?}");
        for tick in end..end + HZ {
            assert!(
                error(tick) < 0.03,
                "{steering:?} at {tick}: {}",
                error(tick)
            );
        }
    }
}

#[test]
fn a_stop_is_followed_at_once_and_idles_cheaply() {
    let stop_tick = 2 * HZ + 20;
    let truth = |t: u32| {
        let s = at(t.min(stop_tick)).as_secs_f32();
        let speed = if t < stop_tick { 4.0 } else { 0.0 };
        CharacterState::new(walk([0.0; 3], 2.0, 4.0, s), 2.0, speed)
    };
    let (errors, triggers) = run(Steering::Arrive, 8 * HZ, truth);
    assert!(triggers.contains(&(stop_tick, Trigger::Stop)));
    // Settled on the spot within the settle time after the stop arrives.
    let settled = stop_tick + 4 + (0.3 * f64::from(HZ)).ceil() as u32;
    for (tick, e) in &errors[settled as usize..] {
        assert!(e.unwrap() < 0.01, "at {tick}: {e:?}");
    }
}
