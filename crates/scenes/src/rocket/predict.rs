//! Client-side prediction for the car-and-ball scene: the [`Rollback`] the core's
//! [`Predictor`](lagless_core::Predictor) drives.
//!
//! The predicted world is the whole scene (a handful of bodies in a box, cheap to
//! replay): the own car, and per entity a policy ([`Policy`]):
//!
//! * The ball **predicted** (the Unity ball article; Rocket League): each server state
//!   resets the client's ball to the server's ball, and it is simulated forward in the
//!   same physics steps as the own car, so the car hits "the future ball".
//! * The ball **interpolated** (the Unity ball article's failure case): the ball in the client's
//!   physics is a kinematic body moved to where the client shows the server's ball, in
//!   the past; the predicted car collides with that, the server's car with the real one,
//!   and the two disagree.
//! * Remote cars **predicted** from the keys the server last saw them drive with, decayed
//!   toward neutral over [`PredictPolicy::remote_input_decay_secs`] (Rocket League: about
//!   150 ms), or
//!   **interpolated** (kinematic, as shown).
//!
//! As in the Unity ball article, every command the car executes is remembered with two flags,
//! executed locally and verified by the server. A server state for tick `n` verifies the
//! commands before `n`; after it is loaded, the predictor replays exactly the executed,
//! unverified ones ([`RocketRollback::commands`], [`CommandStats`]).

use super::replicate::RocketKnown;
use super::{CarInput, Controls, PlayerId, RocketConfig, RocketScene};
use crate::cubes::BodyState;
use lagless_core::{Rollback, Tick};
use std::collections::{BTreeMap, VecDeque};

/// How a client shows an entity it does not own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Simulated in the client's predicted world, ahead of the server like the own car.
    #[default]
    Predicted,
    /// Shown from the interpolation buffer, in the past; a kinematic body in the
    /// predicted world.
    Interpolated,
}

impl Policy {
    /// Parses "predicted" or "interpolated".
    pub fn parse(s: &str) -> Option<Policy> {
        match s {
            "predicted" => Some(Policy::Predicted),
            "interpolated" => Some(Policy::Interpolated),
            _ => None,
        }
    }

    /// The name [`Policy::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Predicted => "predicted",
            Policy::Interpolated => "interpolated",
        }
    }
}

/// How far a prediction may be from the server before it counts as wrong.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    /// Squared position error of the own car, m².
    pub car_position_sq: f32,
    /// `1 - |dot(q1, q2)|` of the own car's rotation.
    pub car_rotation: f32,
    /// Squared position error of the ball (predicted policy), m².
    pub ball_position_sq: f32,
    /// Squared position error of a predicted remote car, m².
    pub remote_position_sq: f32,
}

impl Default for Tolerances {
    fn default() -> Self {
        Self {
            // Both ends snap to a 1/512 m grid: an exact prediction matches exactly, and
            // anything beyond a grid step is a real difference.
            car_position_sq: 1e-6,
            car_rotation: 1e-5,
            ball_position_sq: 1e-6,
            remote_position_sq: 1e-4,
        }
    }
}

/// Prediction settings: the per-entity policies and tolerances.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PredictPolicy {
    /// The ball.
    pub ball: Policy,
    /// The other players' cars.
    pub remote_cars: Policy,
    /// Over how long a predicted remote car's last known keys fade linearly to neutral,
    /// s (Rocket League, GDC 2018: about 0.15). `f32::INFINITY` holds them.
    pub remote_input_decay_secs: f32,
    /// Mismatch tolerances.
    pub tolerances: Tolerances,
}

impl Default for PredictPolicy {
    fn default() -> Self {
        Self {
            ball: Policy::default(),
            remote_cars: Policy::default(),
            remote_input_decay_secs: 0.15,
            tolerances: Tolerances::default(),
        }
    }
}

/// A command's flags (the Unity ball article's `HAS_EXECUTED`, `VERIFIED`).
pub mod flags {
    /// Executed by the client's prediction.
    pub const EXECUTED: u8 = 1;
    /// Covered by a server state: never executed again.
    pub const VERIFIED: u8 = 2;
}

/// One tick's input as the predicted world keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    /// The tick it drives (`state(tick) + input = state(tick + 1)`).
    pub tick: Tick,
    /// The keys.
    pub input: CarInput,
    /// [`flags`].
    pub flags: u8,
}

/// Counters of the command log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommandStats {
    /// Commands executed the first time.
    pub executed: u64,
    /// Executions of an unverified command after a server state (replays).
    pub replayed: u64,
    /// Commands a server state verified.
    pub verified: u64,
    /// Executions asked for a tick the server had already verified (not done; always 0
    /// with the core's predictor, which replays from the server state's tick on).
    pub replayed_verified: u64,
}

/// What the predictor remembers per tick.
#[derive(Debug, Clone, PartialEq)]
pub struct RocketSaved {
    /// The own car.
    pub car: BodyState,
    /// The ball, when predicted.
    pub ball: Option<BodyState>,
    /// Remote cars, when predicted.
    pub remotes: Vec<(PlayerId, BodyState)>,
}

/// Where the client showed its interpolated entities at one tick.
#[derive(Debug, Clone, Default)]
struct Shown {
    cars: Vec<(PlayerId, BodyState)>,
    ball: Option<BodyState>,
}

/// Verified commands kept in the log for the record.
const VERIFIED_KEPT: usize = 16;

/// Ticks of shown poses kept for replays (more than any replay the predictor allows).
const SHOWN_HISTORY: usize = 256;

/// The client's predicted world for the car-and-ball scene.
pub struct RocketRollback {
    player: PlayerId,
    config: RocketConfig,
    policy: PredictPolicy,
    world: RocketScene,
    /// Per remote car: the keys the server last saw and the tick of that state.
    remote_inputs: BTreeMap<PlayerId, (CarInput, Tick)>,
    shown: BTreeMap<u32, Shown>,
    commands: VecDeque<Command>,
    /// Commands before this tick are verified.
    verified_before: Option<Tick>,
    stats: CommandStats,
}

impl RocketRollback {
    /// A predicted world for `player` in a scene built from `config` (the server's).
    pub fn new(player: PlayerId, config: RocketConfig, policy: PredictPolicy) -> Self {
        let mut world = RocketScene::new(config);
        world.add_car(player);
        world.set_kinematic_ball(policy.ball == Policy::Interpolated);
        Self {
            player,
            config,
            policy,
            world,
            remote_inputs: BTreeMap::new(),
            shown: BTreeMap::new(),
            commands: VecDeque::new(),
            verified_before: None,
            stats: CommandStats::default(),
        }
    }

    /// The player whose car this world predicts.
    pub fn player(&self) -> PlayerId {
        self.player
    }

    /// The predicted world.
    pub fn world(&self) -> &RocketScene {
        &self.world
    }

    /// The policies.
    pub fn policy(&self) -> &PredictPolicy {
        &self.policy
    }

    /// The own car now.
    pub fn car_state(&self) -> Option<BodyState> {
        self.world.car_state(self.player)
    }

    /// The ball now: predicted, or where the kinematic stand-in of the shown ball is.
    pub fn ball_state(&self) -> Option<BodyState> {
        self.world.ball_state()
    }

    /// Remote car `player` now.
    pub fn remote_state(&self, player: PlayerId) -> Option<BodyState> {
        (player != self.player)
            .then(|| self.world.car_state(player))
            .flatten()
    }

    /// Bodies simulated besides the own car (the predicted ball and remote cars).
    pub fn predicted_bodies(&self) -> usize {
        let ball = usize::from(self.world.ball_is_dynamic());
        let remotes = self
            .world
            .car_ids()
            .filter(|&p| p != self.player && self.world.car_is_dynamic(p))
            .count();
        ball + remotes
    }

    /// The command log, oldest first: the newest verified commands, then the executed,
    /// unverified ones (what the next server state may have the predictor replay).
    pub fn commands(&self) -> impl Iterator<Item = &Command> {
        self.commands.iter()
    }

    /// The executed commands the server has not verified yet.
    pub fn unverified(&self) -> impl Iterator<Item = &Command> {
        self.commands
            .iter()
            .filter(|c| c.flags & flags::VERIFIED == 0)
    }

    /// The command log's counters.
    pub fn command_stats(&self) -> CommandStats {
        self.stats
    }

    /// Tells the world where the client shows its interpolated entities at `tick` (the
    /// other cars, the ball), so the kinematic stand-ins of the interpolated ones are
    /// there when `tick` is stepped, the first time and in replays.
    pub fn show(&mut self, tick: Tick, cars: &[(PlayerId, BodyState)], ball: Option<BodyState>) {
        self.shown.insert(
            tick.0,
            Shown {
                cars: cars.to_vec(),
                ball,
            },
        );
        while self.shown.len() > SHOWN_HISTORY {
            self.shown.pop_first();
        }
    }

    /// Marks every command before `tick` verified (a server state for `tick` has taken
    /// them into account), keeping the newest [`VERIFIED_KEPT`] of those for the record.
    fn verify(&mut self, tick: Tick) {
        if self.verified_before.is_none_or(|v| tick > v) {
            self.verified_before = Some(tick);
        }
        for c in &mut self.commands {
            if c.tick < tick && c.flags & flags::VERIFIED == 0 {
                c.flags |= flags::VERIFIED;
                self.stats.verified += 1;
            }
        }
        let verified = self
            .commands
            .iter()
            .filter(|c| c.flags & flags::VERIFIED != 0)
            .count();
        for _ in VERIFIED_KEPT..verified {
            self.commands.pop_front();
        }
    }

    /// Records the execution of `input` at `tick`: a first execution, or the replay of an
    /// unverified command.
    fn execute(&mut self, tick: Tick, input: CarInput) {
        if self.verified_before.is_some_and(|v| tick < v) {
            // A tick the server already took into account: replaying it would be a bug.
            self.stats.replayed_verified += 1;
            return;
        }
        if let Some(c) = self.commands.iter_mut().find(|c| c.tick == tick) {
            c.input = input;
            self.stats.replayed += 1;
            return;
        }
        self.commands.push_back(Command {
            tick,
            input,
            flags: flags::EXECUTED,
        });
        self.stats.executed += 1;
        // Bounded: a client that never hears from the server keeps its newest history.
        while self.commands.len() > SHOWN_HISTORY {
            self.commands.pop_front();
        }
    }

    /// The kinematic stand-ins go where the client showed them at `tick` (or at the
    /// newest earlier tick it showed anything).
    fn place_shown(&mut self, tick: Tick) {
        let Some((_, shown)) = self.shown.range(..=tick.0).next_back() else {
            return;
        };
        let shown = shown.clone();
        if self.policy.ball == Policy::Interpolated {
            if let Some(b) = shown.ball {
                self.world.set_ball_state(&b);
            }
        }
        if self.policy.remote_cars == Policy::Interpolated {
            for (p, s) in shown.cars {
                if p != self.player {
                    self.world.set_car_state(p, &s);
                }
            }
        }
    }

    fn car_diverged(&self, p: &BodyState, s: &BodyState) -> bool {
        let tol = &self.policy.tolerances;
        p.position.distance_squared(s.position) > tol.car_position_sq
            || 1.0 - p.rotation.dot(s.rotation).abs() > tol.car_rotation
    }
}

impl Rollback for RocketRollback {
    type Input = CarInput;
    type Saved = RocketSaved;
    type Confirmed = RocketKnown;

    fn advance(&mut self, tick: Tick, input: CarInput) {
        self.execute(tick, input);
        self.place_shown(tick);
        let decay = self.policy.remote_input_decay_secs * self.config.tick_hz as f32;
        let mut controls: Vec<(PlayerId, Controls)> = vec![(self.player, input.controls())];
        if self.policy.remote_cars == Policy::Predicted {
            for (&p, &(keys, since)) in &self.remote_inputs {
                // The keys held at `since - 1` drove the step into `since`; from there on
                // they fade: full for the first step, neutral after the decay time.
                let age = tick.diff(since).max(0) as f32;
                // A decay of zero (or NaN) keeps nothing past the first step.
                let left = if decay > 0.0 { 1.0 - age / decay } else { 0.0 };
                controls.push((
                    p,
                    keys.controls().scaled(if age == 0.0 { 1.0 } else { left }),
                ));
            }
        }
        self.world.step_controls(&controls);
    }

    fn save(&self) -> RocketSaved {
        RocketSaved {
            car: self.car_state().unwrap_or_default(),
            ball: (self.policy.ball == Policy::Predicted)
                .then(|| self.world.ball_state())
                .flatten(),
            remotes: if self.policy.remote_cars == Policy::Predicted {
                self.world
                    .car_states()
                    .filter(|(p, _)| *p != self.player)
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    fn diverged(&self, predicted: &RocketSaved, known: &RocketKnown) -> bool {
        let Some(server) = known.car(self.player) else {
            return false; // not on the server yet: nothing to correct
        };
        if self.car_diverged(&predicted.car, &server.state) {
            return true;
        }
        let tol = &self.policy.tolerances;
        if let (Some(p), Some(s)) = (predicted.ball, known.ball) {
            if p.position.distance_squared(s.position) > tol.ball_position_sq {
                return true;
            }
        }
        // A car that joined or left changes what the own car can hit.
        let others = known.cars.iter().filter(|c| c.player != self.player);
        if others.clone().any(|c| !self.world.has_car(c.player))
            || self.world.car_ids().count() != known.cars.len()
        {
            return true;
        }
        if self.policy.remote_cars == Policy::Predicted {
            return others.into_iter().any(|c| {
                predicted
                    .remotes
                    .iter()
                    .find(|(p, _)| *p == c.player)
                    .is_none_or(|(_, s)| {
                        s.position.distance_squared(c.state.position) > tol.remote_position_sq
                    })
            });
        }
        false
    }

    fn load(&mut self, known: &RocketKnown, _predicted: Option<&RocketSaved>) {
        self.verify(known.tick);
        let present: Vec<PlayerId> = self.world.car_ids().collect();
        for p in present {
            if known.car(p).is_none() && p != self.player {
                self.world.remove_car(p);
                self.remote_inputs.remove(&p);
            }
        }
        for c in &known.cars {
            self.world.add_car(c.player);
            if c.player == self.player {
                self.world.set_car_state(c.player, &c.state);
                continue;
            }
            let predicted = self.policy.remote_cars == Policy::Predicted;
            self.world.set_kinematic_car(c.player, !predicted);
            self.world.set_car_state(c.player, &c.state);
            self.world.set_last_input(c.player, c.input);
            if predicted {
                self.remote_inputs.insert(c.player, (c.input, known.tick));
            }
        }
        if let Some(ball) = known.ball {
            // A kinematic ball takes the server's pose too until the client shows one.
            self.world.set_ball_state(&ball);
        }
    }

    fn confirmed(&mut self, known: &RocketKnown) {
        self.verify(known.tick);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rocket::replicate::KnownCar;
    use glam::{Quat, Vec3};
    use lagless_core::{PredictionConfig, Predictor, Reconciled};

    fn known_of(scene: &RocketScene, tick: Tick) -> RocketKnown {
        RocketKnown {
            tick,
            cars: scene
                .car_states()
                .map(|(player, state)| KnownCar {
                    player,
                    state,
                    input: scene.last_input(player).unwrap_or_default(),
                })
                .collect(),
            ball: scene.ball_state(),
        }
    }

    /// A server where car 1 sits in front of the ball, facing it.
    fn server() -> RocketScene {
        let mut s = RocketScene::new(RocketConfig::default());
        s.add_car(1);
        s.set_car_state(
            1,
            &BodyState {
                position: Vec3::new(0.0, 0.4, 12.0),
                rotation: Quat::from_rotation_y(std::f32::consts::PI),
                ..BodyState::default()
            },
        );
        for _ in 0..64 {
            s.step(&[]);
        }
        s
    }

    /// Runs a client `lag` ticks ahead of `server` for `ticks`, car 1 driving at the
    /// ball, with a server state every tick; returns the client's world.
    fn drive(policy: PredictPolicy, lag: u32, ticks: u32) -> RocketRollback {
        let mut server = server();
        let mut game = RocketRollback::new(1, *server.config(), policy);
        let mut p = Predictor::<RocketRollback>::new(PredictionConfig::default());
        let input = |_: Tick| Some(CarInput::FORWARD);
        p.reconcile(&mut game, Tick(0), &known_of(&server, Tick(0)), &input);
        let mut history = vec![server.ball_state().unwrap()];
        for t in 0..ticks {
            // The client predicts tick t + lag while the server steps tick t. An
            // interpolated ball is shown as the server had it `lag` ticks before.
            if policy.ball == Policy::Interpolated {
                game.show(Tick(t + lag), &[], Some(history[t as usize]));
            }
            p.predict(&mut game, Tick(t + lag), CarInput::FORWARD, &input);
            server.step(&[(1, CarInput::FORWARD)]);
            history.push(server.ball_state().unwrap());
            p.reconcile(
                &mut game,
                Tick(t + 1),
                &known_of(&server, Tick(t + 1)),
                &input,
            );
        }
        game
    }

    #[test]
    fn the_predicted_ball_is_hit_in_the_future_like_the_server_hits_it() {
        let game = drive(PredictPolicy::default(), 8, 120);
        let stats = game.command_stats();
        // Every command was executed once, replays only touched unverified ones.
        assert_eq!(stats.replayed_verified, 0);
        assert!(stats.executed >= 120);
        assert!(stats.verified > 100);
        // One server state per tick, 8 ticks behind: at most the 8 newest and the tick
        // just predicted are unverified; the log keeps a few verified ones.
        assert!(
            game.unverified().count() <= 9,
            "{}",
            game.unverified().count()
        );
        assert!(game.unverified().all(|c| c.flags & flags::EXECUTED != 0));
        let verified = game.commands().filter(|c| c.flags & flags::VERIFIED != 0);
        assert_eq!(verified.count(), VERIFIED_KEPT);
        assert!(game.commands().count() <= VERIFIED_KEPT + 9);
        // With the same inputs on both ends, the car hit the ball on the client as on the
        // server: the client's ball moved.
        let ball = game.ball_state().unwrap();
        assert!(ball.position.z < -1.0, "{ball:?}");
    }

    #[test]
    fn predicted_ball_agrees_with_the_server_and_the_interpolated_one_does_not() {
        let lag = 8;
        let predicted = drive(PredictPolicy::default(), lag, 150);
        let interpolated_policy = PredictPolicy {
            ball: Policy::Interpolated,
            ..PredictPolicy::default()
        };
        let interpolated = drive(interpolated_policy, lag, 150);
        let mut server = server();
        for _ in 0..150 + lag {
            server.step(&[(1, CarInput::FORWARD)]);
        }
        let truth = server.ball_state().unwrap().position;
        let p = predicted.ball_state().unwrap().position.distance(truth);
        let i = interpolated.ball_state().unwrap().position.distance(truth);
        assert!(p < 0.05, "predicted ball {p} m off");
        assert!(
            i > 4.0 * p.max(0.01),
            "interpolated {i} m vs predicted {p} m"
        );
        assert_eq!(interpolated.predicted_bodies(), 0);
        assert_eq!(predicted.predicted_bodies(), 1);
    }

    #[test]
    fn remote_cars_are_predicted_from_decaying_inputs_or_follow_what_is_shown() {
        let config = RocketConfig::default();
        let mut server = RocketScene::new(config);
        server.add_car(1);
        server.add_car(2);
        for _ in 0..20 {
            server.step(&[(2, CarInput::FORWARD)]);
        }
        let known = known_of(&server, Tick(20));
        let mut game = RocketRollback::new(1, config, PredictPolicy::default());
        game.load(&known, None);
        let start = server.car_state(2).unwrap();
        let decay_ticks = config.ticks(PredictPolicy::default().remote_input_decay_secs);
        let decay = decay_ticks;
        for t in 20..20 + 4 * decay {
            game.advance(Tick(t), CarInput::NONE);
        }
        let guessed = game.remote_state(2).unwrap();
        // It kept going forward (toward +z from the -z end) on its last keys.
        assert!(guessed.position.z > start.position.z + 0.5);
        // Keys held for good drive it further; no keys at all, less far.
        let reach = |decay: f32| {
            let policy = PredictPolicy {
                remote_input_decay_secs: decay,
                ..PredictPolicy::default()
            };
            let mut g = RocketRollback::new(1, config, policy);
            g.load(&known, None);
            for t in 20..20 + 4 * decay_ticks {
                g.advance(Tick(t), CarInput::NONE);
            }
            g.remote_state(2).unwrap().position.z
        };
        assert!(reach(f32::INFINITY) > guessed.position.z + 0.1);
        assert!(reach(0.0) < guessed.position.z - 0.01);
        // The keys faded: a car still driven goes further than the guess.
        for _ in 0..4 * decay {
            server.step(&[(2, CarInput::FORWARD)]);
        }
        assert!(server.car_state(2).unwrap().position.z > guessed.position.z + 0.5);

        let mut shown = RocketRollback::new(
            1,
            config,
            PredictPolicy {
                remote_cars: Policy::Interpolated,
                ..PredictPolicy::default()
            },
        );
        shown.load(&known, None);
        let at = BodyState {
            position: Vec3::new(3.0, 0.4, 3.0),
            ..BodyState::default()
        };
        shown.show(Tick(20), &[(2, at)], None);
        shown.advance(Tick(20), CarInput::NONE);
        shown.advance(Tick(21), CarInput::NONE);
        assert!(
            shown
                .remote_state(2)
                .unwrap()
                .position
                .distance(at.position)
                < 1e-3
        );
        assert_eq!(shown.predicted_bodies(), 1, "the ball only");
    }

    #[test]
    fn a_join_forces_a_rollback_and_inputs_of_others_do_not_move_the_own_car() {
        let config = RocketConfig::default();
        let mut server = RocketScene::new(config);
        server.add_car(1);
        let mut game = RocketRollback::new(1, config, PredictPolicy::default());
        let mut p = Predictor::<RocketRollback>::new(PredictionConfig::default());
        let none = |_: Tick| Some(CarInput::NONE);
        p.reconcile(&mut game, Tick(0), &known_of(&server, Tick(0)), &none);
        for t in 0..4 {
            p.predict(&mut game, Tick(t), CarInput::NONE, &none);
        }
        server.step(&[(1, CarInput::NONE)]);
        server.add_car(2);
        let r = p.reconcile(&mut game, Tick(1), &known_of(&server, Tick(1)), &none);
        assert!(matches!(r, Reconciled::RolledBack { .. }), "{r:?}");
        assert!(game.world().has_car(2));
        // Car 2's keys drive car 2 on the server; car 1 stays where it was.
        let before = server.car_state(1).unwrap();
        for _ in 0..30 {
            server.step(&[(2, CarInput::FORWARD | CarInput::BOOST)]);
        }
        assert!(
            server
                .car_state(1)
                .unwrap()
                .position
                .distance(before.position)
                < 0.01
        );
    }
}
