//! The receiving side: a registry of remote characters shown by dead reckoning.

use super::steering::Plan;
use super::{DrCodec, DrError, DrLimits, DrMessage, Field, Motion, Steering};
use lagless_core::{RttEstimator, Tick};
use lagless_wire::BitReader;
use std::collections::BTreeMap;
use std::time::Duration;

/// How a [`DrReceiver`] shows characters and what it accepts.
///
/// Defaults: [`Steering::Arrive`] over each message's own interval (the character-sync
/// article), [`Steering::Pvb`] over 250 ms, 300 ms to settle on an idle character's spot, headings turning at up to
/// 2 turns a second, characters stopping 5 s after their last message, the default
/// [`DrLimits`], ticks at most 640 from the receiver's (10 s at 64 Hz), at most 1 s of
/// combined lag.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReceiverConfig {
    /// How shown characters are steered onto each new message.
    pub steering: Steering,
    /// [`Steering::Arrive`]'s steering time for moving messages: `None` steers over the
    /// message's own sync interval (arriving at the predicted point as the next message
    /// is due, as the article does); a shorter time converges sooner at the cost of
    /// sharper turns.
    pub steer_time: Option<Duration>,
    /// [`Steering::Pvb`]'s blend time for moving messages. Murphy blends over the time
    /// between updates; dead-reckoning messages come seconds apart, and a blend that
    /// long carries the old velocity on for seconds after a turn (over a metre off
    /// after a 70° turn at 3 m/s, in this crate's tests), so the blend is short.
    pub blend_time: Duration,
    /// Steering time onto an idle character's spot (a stop).
    pub settle: Duration,
    /// Fastest the shown heading turns, radians per second.
    pub turn_rate: f32,
    /// A character with no message for this long (or its interval, if longer) stops
    /// where it got to, rather than walk on forever through a lost link.
    pub max_coast: Duration,
    /// Values accepted.
    pub limits: DrLimits,
    /// Largest distance, in ticks, of a message's tick from the receiver's reference
    /// tick.
    pub max_tick_skew: u32,
    /// Largest combined lag (sender's plus receiver's one-way lag) used to predict.
    pub max_lag: Duration,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            steering: Steering::Arrive,
            steer_time: None,
            blend_time: Duration::from_millis(250),
            settle: Duration::from_millis(300),
            turn_rate: 4.0 * std::f32::consts::PI,
            max_coast: Duration::from_secs(5),
            limits: DrLimits::default(),
            max_tick_skew: 640,
            max_lag: Duration::from_secs(1),
        }
    }
}

/// Messages a [`DrReceiver`] accepted and refused, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrReceiverStats {
    /// Accepted messages.
    pub accepted: u64,
    /// Batches or messages that did not decode (truncated, bad codes, too many).
    pub malformed: u64,
    /// NaN or infinite values.
    pub non_finite: u64,
    /// Positions outside the limits.
    pub bad_position: u64,
    /// Speeds outside the limits.
    pub bad_speed: u64,
    /// Intervals outside the limits.
    pub bad_interval: u64,
    /// Sender lags outside the limits.
    pub bad_lag: u64,
    /// Ids never spawned (or already despawned).
    pub unknown_id: u64,
    /// Ticks not newer than the newest accepted for the character (late, reordered or
    /// duplicated).
    pub stale: u64,
    /// Ticks too far from the receiver's reference.
    pub tick_far_off: u64,
}

impl DrReceiverStats {
    /// Every refusal.
    pub fn rejected(&self) -> u64 {
        self.malformed
            + self.non_finite
            + self.bad_position
            + self.bad_speed
            + self.bad_interval
            + self.bad_lag
            + self.unknown_id
            + self.stale
            + self.tick_far_off
    }

    fn count(&mut self, e: &DrError) {
        let c = match e {
            DrError::Wire(_) | DrError::TooMany => &mut self.malformed,
            DrError::NonFinite(_) => &mut self.non_finite,
            DrError::OutOfLimits(Field::Position | Field::Heading) => &mut self.bad_position,
            DrError::OutOfLimits(Field::Speed) => &mut self.bad_speed,
            DrError::OutOfLimits(Field::Interval) => &mut self.bad_interval,
            DrError::OutOfLimits(Field::Lag) => &mut self.bad_lag,
            DrError::UnknownId(_) => &mut self.unknown_id,
            DrError::Stale => &mut self.stale,
            DrError::TickFarOff => &mut self.tick_far_off,
        };
        *c += 1;
    }
}

/// A remote character as shown at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shown {
    /// Where to draw it.
    pub position: [f32; 3],
    /// Its yaw (see [`DrMessage`] for the convention).
    pub heading: f32,
    /// Its shown velocity, m/s (for animation: walk or run).
    pub velocity: [f32; 3],
    /// The debug marker: the predicted point, `position + direction × speed × (lag +
    /// interval)` of the newest message, which the shown character passes through at
    /// [`Shown::predicted_at`] (its spot, for an idle one).
    pub predicted_point: [f32; 3],
    /// When it reaches the predicted point (the receiver's clock).
    pub predicted_at: Duration,
    /// The tick of the message it follows.
    pub tick: Tick,
}

#[derive(Debug, Clone, Default)]
struct Remote {
    newest: Option<Tick>,
    plan: Option<Plan>,
}

/// The receiving side of dead reckoning: the characters the game spawned, each shown
/// where its newest message says it is now and steered smoothly onto each new one.
///
/// The client loop:
/// ```text
/// receiver.spawn(id) / despawn(id)               // as the game learns of characters
/// receiver.set_rtt(session.rtt())                 // after each packet
/// receiver.receive_batch(now, server_tick, &codec, &mut bits)
/// for (id, shown) in receiver.shown_all(now) { draw(id, shown) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct DrReceiver {
    config: ReceiverConfig,
    remotes: BTreeMap<u32, Remote>,
    one_way_lag: Duration,
    stats: DrReceiverStats,
}

impl DrReceiver {
    /// A receiver with no characters.
    pub fn new(config: ReceiverConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// The settings.
    pub fn config(&self) -> &ReceiverConfig {
        &self.config
    }

    /// Switches the steering mode; each character switches at its next message.
    pub fn set_steering(&mut self, steering: Steering) {
        self.config.steering = steering;
    }

    /// Accepts messages for `id` from now on. Returns false if it was already spawned.
    pub fn spawn(&mut self, id: u32) -> bool {
        if self.remotes.contains_key(&id) {
            return false;
        }
        self.remotes.insert(id, Remote::default());
        true
    }

    /// Forgets `id`; its messages are refused again. Returns false if it was unknown.
    pub fn despawn(&mut self, id: u32) -> bool {
        self.remotes.remove(&id).is_some()
    }

    /// Whether `id` is spawned.
    pub fn is_spawned(&self, id: u32) -> bool {
        self.remotes.contains_key(&id)
    }

    /// This end's one-way lag from the sender: half the round trip.
    pub fn set_one_way_lag(&mut self, lag: Duration) {
        self.one_way_lag = lag;
    }

    /// This end's one-way lag from the core's RTT estimator: half its smoothed RTT
    /// (zero before the first sample).
    pub fn set_rtt(&mut self, rtt: &RttEstimator) {
        self.one_way_lag = rtt.smoothed().unwrap_or_default() / 2;
    }

    /// This end's one-way lag.
    pub fn one_way_lag(&self) -> Duration {
        self.one_way_lag
    }

    /// Takes in `message` at `now`. `reference` is the receiver's estimate of the
    /// sender's current tick (the newest snapshot tick will do): a message far from it
    /// is refused. Refusals are counted by reason and returned; nothing panics.
    ///
    /// The lag used to predict is the message's (how old the state was when sent)
    /// plus this end's one-way lag (the time it spent on the way here), capped at
    /// [`ReceiverConfig::max_lag`].
    pub fn receive(
        &mut self,
        now: Duration,
        reference: Tick,
        message: DrMessage,
    ) -> Result<(), DrError> {
        let result = self.accept(now, reference, message);
        match &result {
            Ok(()) => self.stats.accepted += 1,
            Err(e) => self.stats.count(e),
        }
        result
    }

    fn accept(&mut self, now: Duration, reference: Tick, m: DrMessage) -> Result<(), DrError> {
        m.check(&self.config.limits)?;
        let config = self.config;
        let lag = (self.one_way_lag + lag_of(&m)).min(config.max_lag);
        let remote = self
            .remotes
            .get_mut(&m.id)
            .ok_or(DrError::UnknownId(m.id))?;
        if m.tick.diff(reference).unsigned_abs() > u64::from(config.max_tick_skew) {
            return Err(DrError::TickFarOff);
        }
        if remote.newest.is_some_and(|t| m.tick <= t) {
            return Err(DrError::Stale);
        }
        remote.newest = Some(m.tick);
        let direction = DrMessage::direction(m.heading);
        let velocity = direction.map(|d| d * m.speed());
        let lag = lag.as_secs_f32();
        let known = [
            m.position[0] + velocity[0] * lag,
            m.position[1],
            m.position[2] + velocity[2] * lag,
        ];
        let steer = match m.motion {
            Motion::Idle => config.settle,
            Motion::Moving { interval, .. } => match config.steering {
                Steering::Arrive => config.steer_time.unwrap_or(interval),
                Steering::Pvb => config.blend_time,
            },
        }
        .as_secs_f32()
        // A zero steering time would divide by zero; a millisecond is a jump.
        .max(1e-3);
        let interval = match m.motion {
            Motion::Idle => config.settle,
            Motion::Moving { interval, .. } => interval,
        };
        let plan = Plan {
            mode: config.steering,
            t0: now,
            start: known,
            start_velocity: velocity,
            start_heading: m.heading,
            known,
            velocity,
            heading: m.heading,
            steer,
            interval: interval.as_secs_f32().max(1e-3),
            coast: config.max_coast.max(interval).as_secs_f32(),
            turn_rate: config.turn_rate,
        };
        remote.plan = Some(match remote.plan {
            // The first message shows its motion as it is: nothing to steer from.
            None => plan.settled(),
            // The same stop again (a resend, the idle sync clock): settling on the spot
            // goes on as it was, rather than start over from where it has got to.
            Some(old) if old.velocity == [0.0; 3] && velocity == [0.0; 3] && old.known == known => {
                Plan {
                    heading: m.heading,
                    ..old
                }
            }
            Some(old) => Plan {
                start: old.position(now),
                start_velocity: old.velocity(now),
                start_heading: old.heading(now),
                ..plan
            },
        });
        Ok(())
    }

    /// Reads a batch written by [`DrCodec::write_batch`] and takes in every message;
    /// returns how many were accepted. A batch that does not decode counts once as
    /// malformed and none of it is used.
    pub fn receive_batch(
        &mut self,
        now: Duration,
        reference: Tick,
        codec: &DrCodec,
        r: &mut BitReader<'_>,
    ) -> Result<usize, DrError> {
        let messages = self.decode_batch(reference, codec, r)?;
        Ok(messages
            .into_iter()
            .filter(|m| self.receive(now, reference, *m).is_ok())
            .count())
    }

    /// Reads a batch written by [`DrCodec::write_batch`] without taking it in (so the
    /// caller can spawn what the same packet spawns first); a batch that does not
    /// decode is counted as malformed.
    pub fn decode_batch(
        &mut self,
        reference: Tick,
        codec: &DrCodec,
        r: &mut BitReader<'_>,
    ) -> Result<Vec<DrMessage>, DrError> {
        codec
            .read_batch(r, reference)
            .inspect_err(|e| self.stats.count(e))
    }

    /// Character `id` as shown at `now` (`None` if not spawned or no message yet).
    pub fn shown(&self, id: u32, now: Duration) -> Option<Shown> {
        let remote = self.remotes.get(&id)?;
        Some(show(remote.plan.as_ref()?, remote.newest?, now))
    }

    /// Every character with a message, as shown at `now`, ascending id.
    pub fn shown_all(&self, now: Duration) -> impl Iterator<Item = (u32, Shown)> + '_ {
        self.remotes
            .iter()
            .filter_map(move |(id, r)| Some((*id, show(r.plan.as_ref()?, r.newest?, now))))
    }

    /// Spawned characters, with or without a message.
    pub fn len(&self) -> usize {
        self.remotes.len()
    }

    /// Whether no character is spawned.
    pub fn is_empty(&self) -> bool {
        self.remotes.is_empty()
    }

    /// Accepted and refused messages.
    pub fn stats(&self) -> &DrReceiverStats {
        &self.stats
    }
}

fn lag_of(m: &DrMessage) -> Duration {
    match m.motion {
        Motion::Idle => Duration::ZERO,
        Motion::Moving { lag, .. } => lag,
    }
}

fn show(plan: &Plan, tick: Tick, now: Duration) -> Shown {
    Shown {
        position: plan.position(now),
        heading: plan.heading(now),
        velocity: plan.velocity(now),
        predicted_point: plan.predicted_point(),
        predicted_at: Duration::try_from_secs_f32(plan.interval)
            .ok()
            .and_then(|d| plan.t0.checked_add(d))
            .unwrap_or(Duration::MAX),
        tick,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn walking(id: u32, tick: u32, position: [f32; 3], heading: f32) -> DrMessage {
        DrMessage {
            id,
            tick: Tick(tick),
            position,
            heading,
            motion: Motion::Moving {
                speed: 2.0,
                interval: Duration::from_secs(2),
                lag: ms(20),
            },
        }
    }

    fn dist(a: [f32; 3], b: [f32; 3]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y) * (x - y))
            .sum::<f32>()
            .sqrt()
    }

    #[test]
    fn the_prediction_adds_both_lags_and_the_interval() {
        let mut rx = DrReceiver::new(ReceiverConfig::default());
        rx.spawn(1);
        rx.set_one_way_lag(ms(30));
        rx.receive(ms(1000), Tick(64), walking(1, 64, [0.0; 3], 0.0))
            .unwrap();
        let s = rx.shown(1, ms(1000)).unwrap();
        // (20 ms + 30 ms) of lag along +Z at 2 m/s, then 2 s more for the marker.
        assert!(dist(s.position, [0.0, 0.0, 0.1]) < 1e-5, "{s:?}");
        assert!(dist(s.predicted_point, [0.0, 0.0, 4.1]) < 1e-5, "{s:?}");
        assert_eq!(s.predicted_at, ms(3000));
        // With no new message it keeps going.
        let s = rx.shown(1, ms(4000)).unwrap();
        assert!(dist(s.position, [0.0, 0.0, 6.1]) < 1e-4, "{s:?}");
    }

    #[test]
    fn arrive_reaches_the_predicted_point_when_the_interval_ends() {
        for steering in [Steering::Arrive, Steering::Pvb] {
            let mut rx = DrReceiver::new(ReceiverConfig {
                steering,
                ..ReceiverConfig::default()
            });
            rx.spawn(1);
            rx.receive(ms(0), Tick(0), walking(1, 0, [0.0; 3], 0.0))
                .unwrap();
            // A turn to +X, received 500 ms later, from somewhere else.
            let turn = walking(1, 32, [3.0, 0.0, 1.0], std::f32::consts::FRAC_PI_2);
            rx.receive(ms(500), Tick(32), turn).unwrap();
            let marker = rx.shown(1, ms(500)).unwrap();
            let end = rx.shown(1, marker.predicted_at).unwrap();
            assert!(
                dist(end.position, marker.predicted_point) < 1e-4,
                "{steering:?}: {end:?} vs {marker:?}"
            );
            assert!(dist(marker.predicted_point, [3.0 + 0.04 + 4.0, 0.0, 1.0]) < 1e-4);
            // Midway it is between where it was shown and the marker.
            let mid = rx.shown(1, ms(1500)).unwrap();
            assert!(dist(mid.position, end.position) < dist(marker.position, end.position));
        }
    }

    #[test]
    fn stale_reordered_and_duplicated_messages_are_dropped() {
        let mut rx = DrReceiver::new(ReceiverConfig::default());
        rx.spawn(1);
        rx.receive(ms(0), Tick(100), walking(1, 100, [0.0; 3], 0.0))
            .unwrap();
        let before = rx.shown(1, ms(50)).unwrap();
        for tick in [100, 99, 40] {
            let old = walking(1, tick, [50.0; 3], 1.0);
            assert_eq!(rx.receive(ms(50), Tick(100), old), Err(DrError::Stale));
        }
        assert_eq!(rx.shown(1, ms(50)).unwrap(), before);
        assert_eq!(rx.stats().stale, 3);
        assert_eq!(rx.stats().accepted, 1);
    }

    #[test]
    fn forged_and_absurd_messages_are_refused_and_counted() {
        let mut rx = DrReceiver::new(ReceiverConfig::default());
        rx.spawn(1);
        let good = walking(1, 10, [1.0; 3], 0.0);
        let with = |motion| DrMessage { motion, ..good };
        let moving = |speed, interval, lag| Motion::Moving {
            speed,
            interval,
            lag,
        };
        let cases = [
            (DrMessage { id: 2, ..good }, DrError::UnknownId(2)),
            (
                DrMessage {
                    position: [f32::NAN, 0.0, 0.0],
                    ..good
                },
                DrError::NonFinite(Field::Position),
            ),
            (
                DrMessage {
                    heading: f32::INFINITY,
                    ..good
                },
                DrError::NonFinite(Field::Heading),
            ),
            (
                with(moving(f32::NAN, ms(2000), ms(0))),
                DrError::NonFinite(Field::Speed),
            ),
            (
                with(moving(300.0, ms(2000), ms(0))),
                DrError::OutOfLimits(Field::Speed),
            ),
            (
                with(moving(-1.0, ms(2000), ms(0))),
                DrError::OutOfLimits(Field::Speed),
            ),
            (
                DrMessage {
                    position: [1e7, 0.0, 0.0],
                    ..good
                },
                DrError::OutOfLimits(Field::Position),
            ),
            (
                with(moving(1.0, ms(0), ms(0))),
                DrError::OutOfLimits(Field::Interval),
            ),
            (
                with(moving(1.0, Duration::from_secs(3600), ms(0))),
                DrError::OutOfLimits(Field::Interval),
            ),
            (
                with(moving(1.0, ms(2000), Duration::from_secs(60))),
                DrError::OutOfLimits(Field::Lag),
            ),
            (
                DrMessage {
                    tick: Tick(100_000),
                    ..good
                },
                DrError::TickFarOff,
            ),
        ];
        let n = cases.len() as u64;
        for (m, e) in cases {
            assert_eq!(rx.receive(ms(0), Tick(10), m), Err(e), "{m:?}");
        }
        let s = *rx.stats();
        assert_eq!(s.accepted, 0);
        assert_eq!(s.rejected(), n);
        assert_eq!(
            (s.unknown_id, s.non_finite, s.bad_speed, s.bad_position),
            (1, 3, 2, 1)
        );
        assert_eq!((s.bad_interval, s.bad_lag, s.tick_far_off), (2, 1, 1));
        assert!(rx.shown(1, ms(0)).is_none());
        // The good one still gets through, and a despawned id is refused again.
        rx.receive(ms(0), Tick(10), good).unwrap();
        assert!(rx.despawn(1));
        assert_eq!(
            rx.receive(ms(0), Tick(11), walking(1, 11, [1.0; 3], 0.0)),
            Err(DrError::UnknownId(1))
        );
    }

    #[test]
    fn a_malformed_batch_counts_once_and_changes_nothing() {
        let codec = DrCodec::default();
        let mut rx = DrReceiver::new(ReceiverConfig::default());
        rx.spawn(1);
        let mut w = lagless_wire::BitWriter::new();
        codec
            .write_batch(&mut w, &[walking(1, 5, [0.0; 3], 0.0)])
            .unwrap();
        let bytes = w.into_bytes();
        let cut = &bytes[..bytes.len() - 3];
        let got = rx.receive_batch(ms(0), Tick(5), &codec, &mut BitReader::new(cut));
        assert!(matches!(got, Err(DrError::Wire(_))), "{got:?}");
        assert_eq!(rx.stats().malformed, 1);
        assert!(rx.shown(1, ms(0)).is_none());
        let got = rx.receive_batch(ms(0), Tick(5), &codec, &mut BitReader::new(&bytes));
        assert_eq!(got, Ok(1));
    }

    #[test]
    fn a_stop_settles_on_the_spot_and_coasting_ends() {
        let mut rx = DrReceiver::new(ReceiverConfig::default());
        rx.spawn(1);
        rx.receive(ms(0), Tick(0), walking(1, 0, [0.0; 3], 0.0))
            .unwrap();
        let stop = DrMessage {
            motion: Motion::Idle,
            ..walking(1, 20, [0.0, 0.0, 0.5], 0.0)
        };
        rx.receive(ms(400), Tick(20), stop).unwrap();
        let settled = rx.shown(1, ms(400) + rx.config().settle).unwrap();
        assert!(
            dist(settled.position, [0.0, 0.0, 0.5]) < 1e-5,
            "{settled:?}"
        );
        assert_eq!(rx.shown(1, ms(9000)).unwrap().position, settled.position);
        // A walker whose messages stop is not walked on forever.
        rx.spawn(2);
        rx.receive(ms(0), Tick(0), walking(2, 0, [0.0; 3], 0.0))
            .unwrap();
        let a = rx.shown(2, Duration::from_secs(10)).unwrap();
        let b = rx.shown(2, Duration::from_secs(20)).unwrap();
        assert_eq!(a.position, b.position);
        assert_eq!(b.velocity, [0.0; 3]);
    }
}
