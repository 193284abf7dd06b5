//! The car-and-ball scene (`lagless_scenes::rocket`) in the lab: one car per client, a
//! ball the server owns, and the `ball.*` metrics: how the ball a client rendered
//! compares with the server's ball at the same tick, and whether the car-ball contacts a
//! client showed happened on the server too (docs/metrics.md, "Scene rocket").

use crate::config::{RunConfig, ScriptChoice};
use crate::metrics::{Metric, Report, percentile};
use crate::runner::RunError;
use crate::scene::{LabScene, PlayerId, RawEntity, RenderedFrames, Script};
use glam::{Quat, Vec3};
use lagless_core::Tick;
use lagless_core::interpolation::Pose;
use lagless_replication::{ReplicationClient, ReplicationError, ReplicationServer, Schema};
use lagless_scenes::cubes::BodyState;
use lagless_scenes::rocket::predict::{Policy, PredictPolicy, RocketRollback};
use lagless_scenes::rocket::replicate::{self, BALL_ENTITY, RocketKnown, car_entity};
use lagless_scenes::rocket::script::ChaseDriver;
use lagless_scenes::rocket::{CarInput, RocketConfig, RocketScene, car_touches_ball};

/// Script names the scene knows (`roam`, the CLI's default, selects the chase too).
pub const ROCKET_SCRIPTS: &[&str] = &["chase", "roam"];

/// A contact a client showed counts as agreed when the server had the same car touching
/// the ball within this many ticks of it (`ball.contacts_agreed_pct` in docs/metrics.md).
pub const CONTACT_WINDOW_TICKS: usize = 2;

/// The car-and-ball scene, with what the lab follows of it on the server: the ball and
/// which cars touch it, per state tick.
pub struct Rocket {
    /// The scene itself.
    pub scene: RocketScene,
    policy: PredictPolicy,
    /// The server's ball per state tick (index = tick).
    ball: Vec<[f32; 3]>,
    /// Per state tick, the cars touching the ball.
    contacts: Vec<Vec<PlayerId>>,
    /// Per state tick, every car's position, ascending by player.
    cars: Vec<Vec<(PlayerId, [f32; 3])>>,
}

/// What both ends know before the start: the scene's configuration and the policies.
#[derive(Debug, Clone, Copy)]
pub struct RocketSetup {
    /// The scene's configuration (the same on both ends).
    pub config: RocketConfig,
}

/// What a script sees: its car and the ball, as the client shows them.
#[derive(Debug, Clone, Copy)]
pub struct RocketSeen {
    /// The own car.
    pub car: BodyState,
    /// The ball (predicted, or as shown), once known.
    pub ball: Option<BodyState>,
}

/// The chasing driver as the lab's [`Script`].
pub struct Chase(pub ChaseDriver);

impl Script<Rocket> for Chase {
    fn input(&mut self, tick: u64, seen: Option<&RocketSeen>) -> CarInput {
        self.0.input(
            tick,
            seen.map(|s| &s.car),
            seen.and_then(|s| s.ball.as_ref()),
        )
    }
}

fn pose(b: &BodyState) -> Pose {
    Pose::new(b.position.to_array(), b.rotation.to_array())
        .with_velocity(b.linvel.to_array(), b.angvel.to_array())
}

fn body(p: &Pose) -> BodyState {
    BodyState {
        position: Vec3::from(p.position),
        rotation: Quat::from_array(p.rotation),
        linvel: p.linear_velocity.map_or(Vec3::ZERO, Vec3::from),
        angvel: p.angular_velocity.map_or(Vec3::ZERO, Vec3::from),
    }
}

fn floats(s: &BodyState) -> Vec<f32> {
    [
        s.position.to_array().as_slice(),
        &s.rotation.to_array(),
        &s.linvel.to_array(),
        &s.angvel.to_array(),
    ]
    .concat()
}

fn missing() -> Pose {
    Pose::new([f32::NAN; 3], [0.0, 0.0, 0.0, 1.0])
}

/// A rendered position and the server's at one tick.
type Sample = (u32, [f32; 3], [f32; 3]);

/// The players other than `own`, in the order [`LabScene::shown`] lists them.
fn others_of(own: PlayerId, players: PlayerId) -> impl Iterator<Item = PlayerId> {
    (1..=players).filter(move |&p| p != own)
}

impl Rocket {
    /// Car `player`'s position on the server at state tick `tick`.
    fn car_at(&self, player: PlayerId, tick: usize) -> Option<[f32; 3]> {
        let cars = self.cars.get(tick)?;
        cars.iter().find(|(p, _)| *p == player).map(|(_, x)| *x)
    }

    fn server_touching(&self, player: PlayerId, tick: usize) -> bool {
        let lo = tick.saturating_sub(CONTACT_WINDOW_TICKS);
        let hi = (tick + CONTACT_WINDOW_TICKS).min(self.contacts.len().saturating_sub(1));
        (lo..=hi).any(|t| self.contacts.get(t).is_some_and(|c| c.contains(&player)))
    }
}

impl LabScene for Rocket {
    type Input = CarInput;
    type Known = RocketKnown;
    type World = RocketRollback;
    type Setup = RocketSetup;
    type Seen = RocketSeen;

    const RECORDS_FRAMES: bool = true;

    fn build(config: &RunConfig) -> Result<(Self, RocketSetup), RunError> {
        let scene_config = RocketConfig {
            tick_hz: config.server.tick_hz,
            ..RocketConfig::default()
        };
        let scene = RocketScene::new(scene_config);
        let ball = scene.ball_state().map(|b| b.position.to_array());
        Ok((
            Self {
                scene,
                policy: config.rocket,
                ball: vec![ball.unwrap_or([f32::NAN; 3])],
                contacts: vec![Vec::new()],
                cars: vec![Vec::new()],
            },
            RocketSetup {
                config: scene_config,
            },
        ))
    }

    fn add_player(&mut self, player: PlayerId) {
        self.scene.add_car(player);
        if let (Some(first), Some(s)) = (self.cars.first_mut(), self.scene.car_state(player)) {
            first.push((player, s.position.to_array()));
        }
    }

    fn step(&mut self, inputs: &[(PlayerId, CarInput)]) {
        self.scene.step(inputs);
    }

    fn schema(setup: &RocketSetup) -> Schema {
        replicate::schema(&setup.config.quantize)
    }

    fn capture(&self, server: &mut ReplicationServer) -> Result<(), ReplicationError> {
        replicate::capture(&self.scene, server)
    }

    fn player_entity(_: &RocketSetup, player: PlayerId) -> Option<u32> {
        car_entity(player)
    }

    fn player_position(&self, player: PlayerId) -> Option<[f32; 3]> {
        self.scene.car_state(player).map(|s| s.position.to_array())
    }

    fn others(&self, out: &mut Vec<[f32; 3]>) {
        out.push(
            self.scene
                .ball_state()
                .map_or([f32::NAN; 3], |b| b.position.to_array()),
        );
    }

    fn raw(&self, out: &mut Vec<RawEntity>) {
        if let Some(b) = self.scene.ball_state() {
            out.push(RawEntity {
                id: BALL_ENTITY,
                floats: floats(&b),
                flags: Vec::new(),
            });
        }
        for (p, s) in self.scene.car_states() {
            if let Some(id) = car_entity(p) {
                out.push(RawEntity {
                    id,
                    floats: floats(&s),
                    flags: Vec::new(),
                });
            }
        }
    }

    fn known(_: &RocketSetup, client: &ReplicationClient, tick: Tick) -> RocketKnown {
        replicate::known(client, tick)
    }

    fn is_whole(_: &RocketKnown) -> bool {
        true
    }

    fn shown_ids(_: &RocketSetup, own: PlayerId, players: PlayerId) -> Vec<u32> {
        others_of(own, players)
            .map(|p| car_entity(p).unwrap_or(u32::MAX))
            .chain(std::iter::once(BALL_ENTITY))
            .collect()
    }

    fn predicted_ids(
        _: &RocketSetup,
        config: &RunConfig,
        own: PlayerId,
        players: PlayerId,
    ) -> Vec<u32> {
        let mut ids = Vec::new();
        if config.rocket.remote_cars == Policy::Predicted {
            ids.extend(others_of(own, players).filter_map(car_entity));
        }
        if config.rocket.ball == Policy::Predicted {
            ids.push(BALL_ENTITY);
        }
        ids
    }

    fn shown(_: &RocketSetup, known: &RocketKnown, own: PlayerId, players: PlayerId) -> Vec<Pose> {
        others_of(own, players)
            .map(|p| known.car(p).map_or_else(missing, |c| pose(&c.state)))
            .chain(std::iter::once(
                known.ball.as_ref().map_or_else(missing, pose),
            ))
            .collect()
    }

    fn seen_in(known: &RocketKnown, player: PlayerId) -> Option<RocketSeen> {
        Some(RocketSeen {
            car: known.car(player)?.state,
            ball: known.ball,
        })
    }

    fn seen_pose(seen: &RocketSeen) -> Pose {
        pose(&seen.car)
    }

    fn world(
        setup: &RocketSetup,
        player: PlayerId,
        config: &RunConfig,
        naive: bool,
    ) -> Option<RocketRollback> {
        // The predicted world is already the whole scene: there is no cheaper set to time
        // a naive baseline against.
        (!naive).then(|| RocketRollback::new(player, setup.config, config.rocket))
    }

    fn predicted(world: &RocketRollback) -> Option<RocketSeen> {
        Some(RocketSeen {
            car: world.car_state()?,
            ball: world.ball_state(),
        })
    }

    fn predicted_entities(world: &RocketRollback) -> usize {
        world.predicted_bodies()
    }

    fn script(
        config: &RunConfig,
        setup: &RocketSetup,
        seed: u64,
    ) -> Result<Box<dyn Script<Self>>, RunError> {
        match &config.script {
            ScriptChoice::Named(name) if ROCKET_SCRIPTS.contains(&name.as_str()) => {
                Ok(Box::new(Chase(ChaseDriver::new(setup.config, seed))))
            }
            ScriptChoice::Named(name) => Err(RunError::UnknownScript(format!(
                "{name} (known: {})",
                ROCKET_SCRIPTS.join(", ")
            ))),
            ScriptChoice::Custom(_) => Err(RunError::UnknownScript(
                "a custom script (those drive cubes; scene rocket knows: chase)".into(),
            )),
        }
    }

    fn moves(input: &CarInput) -> bool {
        input.moves()
    }

    fn input_from_keys(keys: crate::scene::Keys) -> Option<CarInput> {
        // W/S throttle and reverse, A/D steer, space jumps.
        let held = [
            (keys.forward, CarInput::FORWARD),
            (keys.back, CarInput::BACK),
            (keys.left, CarInput::LEFT),
            (keys.right, CarInput::RIGHT),
            (keys.jump, CarInput::JUMP),
        ];
        Some(
            held.into_iter()
                .filter(|(down, _)| *down)
                .fold(CarInput::NONE, |input, (_, key)| input.with(key)),
        )
    }

    fn observe(&mut self) {
        let ball = self.scene.ball_state();
        self.ball
            .push(ball.map_or([f32::NAN; 3], |b| b.position.to_array()));
        let touching = self
            .scene
            .car_ids()
            .filter(|&p| self.scene.car_touches_ball(p))
            .collect();
        self.contacts.push(touching);
        let cars = self
            .scene
            .car_states()
            .map(|(p, s)| (p, s.position.to_array()))
            .collect();
        self.cars.push(cars);
    }

    fn show(world: &mut RocketRollback, tick: Tick, shown: &[Pose]) {
        let Some((ball, cars)) = shown.split_last() else {
            return;
        };
        let players = cars.len() as PlayerId + 1;
        let me = world.player();
        let cars: Vec<(PlayerId, BodyState)> = others_of(me, players)
            .zip(cars)
            .filter(|(_, p)| p.position[0].is_finite())
            .map(|(id, p)| (id, body(p)))
            .collect();
        let ball = ball.position[0].is_finite().then(|| body(ball));
        world.show(tick, &cars, ball);
    }

    fn render_predicted(
        world: &RocketRollback,
        own: PlayerId,
        players: PlayerId,
        shown: &mut [Pose],
    ) {
        let Some((ball, cars)) = shown.split_last_mut() else {
            return;
        };
        if world.policy().ball == Policy::Predicted {
            if let Some(b) = world.ball_state() {
                *ball = pose(&b);
            }
        }
        if world.policy().remote_cars == Policy::Predicted {
            for (p, slot) in others_of(own, players).zip(cars) {
                if let Some(s) = world.remote_state(p) {
                    *slot = pose(&s);
                }
            }
        }
    }

    fn report(&self, r: &mut Report) {
        r.set("ball.policy", Metric::Text(self.policy.ball.name().into()));
        r.set(
            "remote_cars.policy",
            Metric::Text(self.policy.remote_cars.name().into()),
        );
        // Contacts that began on the server, all cars.
        let mut onsets = 0u64;
        for w in self.contacts.windows(2) {
            onsets += w[1].iter().filter(|p| !w[0].contains(p)).count() as u64;
        }
        r.set("ball.contacts_server", Metric::Count(onsets));
        r.set("rocket.escapes", Metric::Count(self.scene.escapes()));
    }

    fn report_worlds(worlds: &[&RocketRollback], r: &mut Report) {
        // The Unity ball article's command flags, summed over clients: every command executed once,
        // replayed only while unverified, never after the server verified it.
        let mut total = lagless_scenes::rocket::predict::CommandStats::default();
        for w in worlds {
            let s = w.command_stats();
            total.executed += s.executed;
            total.replayed += s.replayed;
            total.verified += s.verified;
            total.replayed_verified += s.replayed_verified;
        }
        r.set(
            "prediction.commands_executed",
            Metric::Count(total.executed),
        );
        r.set(
            "prediction.commands_replayed",
            Metric::Count(total.replayed),
        );
        r.set(
            "prediction.commands_verified",
            Metric::Count(total.verified),
        );
        r.set(
            "prediction.commands_replayed_verified",
            Metric::Count(total.replayed_verified),
        );
    }

    fn report_frames(&self, clients: &[&RenderedFrames], r: &mut Report) {
        let config = self.scene.config();
        let mut errors = Vec::new();
        let mut jerks = Vec::new();
        let (mut shown, mut agreed) = (0u64, 0u64);
        let players = clients.len() as PlayerId;
        let mut remote_errors = Vec::new();
        let mut remote_jerks = Vec::new();
        for c in clients {
            let mut prev_remote: Vec<Option<Sample>> = Vec::new();
            for (&t, f) in &c.frames {
                let remotes = others_of(c.player, players).zip(&f.others);
                prev_remote.resize(f.others.len().saturating_sub(1), None);
                for (k, (p, rendered)) in remotes.enumerate() {
                    let truth = self.car_at(p, t as usize);
                    let (Some(truth), true) = (truth, rendered.position[0].is_finite()) else {
                        prev_remote[k] = None;
                        continue;
                    };
                    let x = rendered.position;
                    remote_errors.push(crate::remote_view::dist_cm(x, truth));
                    if let Some((pt, px, ptruth)) = prev_remote[k] {
                        if pt + 1 == t {
                            let moved = [0, 1, 2].map(|i| x[i] - px[i]);
                            let actual = [0, 1, 2].map(|i| truth[i] - ptruth[i]);
                            remote_jerks.push(crate::remote_view::dist_cm(moved, actual));
                        }
                    }
                    prev_remote[k] = Some((t, x, truth));
                }
            }
        }
        for c in clients {
            let mut prev: Option<(u32, [f32; 3], [f32; 3])> = None;
            let mut was_touching = false;
            for (&t, f) in &c.frames {
                let truth = self.ball.get(t as usize).filter(|b| b[0].is_finite());
                let rendered = f.others.last().filter(|b| b.position[0].is_finite());
                let (Some(&truth), Some(rendered)) = (truth, rendered) else {
                    prev = None;
                    was_touching = false;
                    continue;
                };
                let p = rendered.position;
                errors.push(crate::remote_view::dist_cm(p, truth));
                if let Some((pt, pp, ptruth)) = prev {
                    if pt + 1 == t {
                        let moved = [0, 1, 2].map(|i| p[i] - pp[i]);
                        let actual = [0, 1, 2].map(|i| truth[i] - ptruth[i]);
                        jerks.push(crate::remote_view::dist_cm(moved, actual));
                    }
                }
                prev = Some((t, p, truth));
                let touching = car_touches_ball(config, &body(&f.own), Vec3::from(p));
                if touching && !was_touching {
                    shown += 1;
                    if self.server_touching(c.player, t as usize) {
                        agreed += 1;
                    }
                }
                was_touching = touching;
            }
        }
        r.number("ball.error_cm_p99", percentile(&errors, 99.0));
        r.number("ball.jerk_cm_p99", percentile(&jerks, 99.0));
        r.number(
            "ball.contacts_agreed_pct",
            (shown > 0).then(|| 100.0 * agreed as f64 / shown as f64),
        );
        r.set("ball.contacts_client_only", Metric::Count(shown - agreed));
        r.set("ball.contacts_shown", Metric::Count(shown));
        r.number("remote_cars.error_cm_p99", percentile(&remote_errors, 99.0));
        r.number("remote_cars.jerk_cm_p99", percentile(&remote_jerks, 99.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::run;

    fn rocket(profile: &str, ball: Policy, seconds: f64, clients: u32) -> Report {
        let config = RunConfig {
            scene: "rocket".into(),
            profile: profile.into(),
            seconds,
            seed: 3,
            clients,
            rocket: PredictPolicy {
                ball,
                ..PredictPolicy::default()
            },
            ..RunConfig::default()
        };
        run(&config, &mut |_| {}).expect("runs").report
    }

    fn get(r: &Report, name: &str) -> f64 {
        r.get_f64(name).unwrap_or_else(|| panic!("{name} missing"))
    }

    #[test]
    fn on_lan_client_and_server_ball_agree_through_repeated_hits() {
        let r = rocket("lan", Policy::Predicted, 20.0, 2);
        assert!(get(&r, "ball.contacts_shown") >= 4.0, "{r:?}");
        assert!(get(&r, "ball.contacts_server") >= 4.0);
        assert!(get(&r, "ball.error_cm_p99") < 5.0, "{r:?}");
        assert!(get(&r, "ball.contacts_agreed_pct") >= 90.0);
        assert!(get(&r, "ball.jerk_cm_p99") < 5.0);
        // Unverified commands are replayed after server states; verified ones never.
        assert!(
            get(&r, "prediction.commands_verified") > 0.9 * get(&r, "prediction.commands_executed")
        );
        assert_eq!(get(&r, "prediction.commands_replayed_verified"), 0.0);
    }

    #[test]
    fn on_mobile_the_predicted_ball_beats_the_interpolated_one() {
        let predicted = rocket("mobile", Policy::Predicted, 15.0, 1);
        let interpolated = rocket("mobile", Policy::Interpolated, 15.0, 1);
        let (p, i) = (
            get(&predicted, "ball.error_cm_p99"),
            get(&interpolated, "ball.error_cm_p99"),
        );
        assert!(p * 4.0 < i, "predicted {p} cm vs interpolated {i} cm");
        let (pa, ia) = (
            get(&predicted, "ball.contacts_agreed_pct"),
            get(&interpolated, "ball.contacts_agreed_pct"),
        );
        assert!(pa > ia, "agreed: predicted {pa}% vs interpolated {ia}%");
        assert!(get(&predicted, "ball.contacts_shown") >= 2.0);
        assert!(
            get(&predicted, "prediction.commands_replayed") > 0.0,
            "rollbacks replay commands"
        );
        // The car hits the past ball on the client: its own prediction fails too.
        assert!(get(&predicted, "render.error_cm_p99") < get(&interpolated, "render.error_cm_p99"));
    }

    #[test]
    fn remote_cars_can_be_predicted_or_interpolated() {
        for remote_cars in [Policy::Predicted, Policy::Interpolated] {
            let config = RunConfig {
                scene: "rocket".into(),
                profile: "broadband".into(),
                seconds: 6.0,
                seed: 5,
                clients: 2,
                rocket: PredictPolicy {
                    remote_cars,
                    ..PredictPolicy::default()
                },
                ..RunConfig::default()
            };
            let r = run(&config, &mut |_| {}).expect("runs").report;
            // The ball, plus the other car when it is predicted.
            let bodies = get(&r, "prediction.predicted_cubes_mean");
            let want = if remote_cars == Policy::Predicted {
                2.0
            } else {
                1.0
            };
            assert!((bodies - want).abs() < 0.05, "{remote_cars:?}: {bodies}");
            assert!(get(&r, "ball.error_cm_p99").is_finite());
        }
    }

    #[test]
    fn unknown_scripts_are_refused() {
        let config = RunConfig {
            scene: "rocket".into(),
            script: ScriptChoice::Named("pattern".into()),
            seconds: 1.0,
            ..RunConfig::default()
        };
        let err = run(&config, &mut |_| {}).err().expect("refused");
        assert!(err.to_string().contains("chase"), "{err}");
    }
}
