//! Prediction of the own player on the cube scene, driven by the core's Predictor with
//! snapshots that arrive a fixed number of ticks late.
#![allow(clippy::unwrap_used)]

use glam::Vec3;
use lagless_core::{ErrorSmoother, PredictionConfig, Predictor, Reconciled, SmoothingConfig, Tick};
use lagless_scenes::cubes::predict::{CubeRollback, PredictConfig};
use lagless_scenes::cubes::snapshot::CubeSnapshot;
use lagless_scenes::cubes::{BodyState, CubeInput, CubeScene, CubeSceneConfig};
use std::collections::VecDeque;
use std::time::Duration;

/// Snapshots reach the client this many ticks after the server produced them.
const DELAY: u32 = 12;

fn input_at(t: u32) -> CubeInput {
    // Back and forth along X with jumps: stays away from the grid (player 1 spawns on
    // the -Z side) so nothing but the ground interferes.
    let mut i = if (t / 48) % 2 == 0 {
        CubeInput::LEFT
    } else {
        CubeInput::RIGHT
    };
    if t % 80 < 4 {
        i = i.with(CubeInput::JUMP);
    }
    i
}

struct Rig {
    server: CubeScene,
    client: CubeRollback,
    predictor: Predictor<CubeRollback>,
    in_flight: VecDeque<(Tick, CubeSnapshot)>,
    inputs: Vec<CubeInput>,
    /// The predicted player just before the last reconciliation.
    pre_reconcile: Option<BodyState>,
}

impl Rig {
    fn new() -> Self {
        let scene = CubeSceneConfig::default();
        let mut server = CubeScene::new(scene);
        server.add_player(1);
        Self {
            server,
            client: CubeRollback::new(1, scene, PredictConfig::default()),
            predictor: Predictor::new(PredictionConfig::default()),
            in_flight: VecDeque::new(),
            inputs: Vec::new(),
            pre_reconcile: None,
        }
    }

    /// The server steps once (snapshots are always taken after a step) and the client
    /// loads that first snapshot, of state 1.
    fn start(&mut self) {
        self.inputs.push(CubeInput::NONE);
        self.server.step(&[]);
        let first = CubeSnapshot::capture(&self.server);
        self.predictor
            .reconcile(&mut self.client, Tick(1), &first, &|_| None);
    }

    /// One tick: the client predicts tick t; the server simulates tick t and its snapshot
    /// of state t + 1 goes in flight; the snapshot sent DELAY ticks ago arrives.
    fn tick(&mut self, t: u32, server_kick: Option<Vec3>) -> Option<Reconciled> {
        let input = input_at(t);
        self.inputs.push(input);
        let inputs = &self.inputs;
        let lookup = |k: Tick| inputs.get(k.0 as usize).copied();
        self.predictor
            .predict(&mut self.client, Tick(t), input, &lookup);
        self.server.step(&[(1, input)]);
        if let Some(kick) = server_kick {
            let mut s = self.server.player_state(1).unwrap();
            s.linvel += kick;
            self.server.set_player_state(1, &s);
        }
        self.in_flight
            .push_back((Tick(t + 1), CubeSnapshot::capture(&self.server)));
        if self.in_flight.len() > DELAY as usize {
            let (tick, snap) = self.in_flight.pop_front().unwrap();
            self.pre_reconcile = self.client.player_state();
            return Some(
                self.predictor
                    .reconcile(&mut self.client, tick, &snap, &lookup),
            );
        }
        None
    }
}

#[test]
fn untouched_player_is_predicted_bit_for_bit() {
    let mut rig = Rig::new();
    rig.start();
    let mut history: Vec<BodyState> = Vec::new();
    // 500 ticks: a little later, its tumbling brings a corner to the grid's edge.
    for t in 1..500 {
        rig.tick(t, None);
        history.push(rig.server.player_state(1).unwrap());
        // The predicted present equals what the server computes for the same tick.
        assert_eq!(
            rig.client.player_state(),
            history.last().copied(),
            "tick {t}"
        );
    }
    assert_eq!(rig.predictor.stats().rollbacks, 0);
    assert!(rig.predictor.stats().reconciles > 450);
    assert!(
        history[498].position.distance(history[0].position) > 1.0,
        "it moved"
    );
}

#[test]
fn a_server_kick_is_corrected_within_one_delay() {
    let mut rig = Rig::new();
    rig.start();
    let mut smoother = ErrorSmoother::new(SmoothingConfig::default());
    let period = Duration::from_secs(1) / 64;
    const KICK_AT: u32 = 100;
    let mut server_at = Vec::new();
    let mut worst_after = 0.0f32;
    let mut rendered_error = Vec::new();
    for t in 1..260 {
        // Away from the grid (player 1 starts on the -Z side), up and back.
        let kick = (t == KICK_AT).then_some(Vec3::new(0.0, 3.0, -6.0));
        let outcome = rig.tick(t, kick);
        let after = rig.client.player_state().unwrap();
        if matches!(outcome, Some(Reconciled::RolledBack { .. })) {
            let before = rig.pre_reconcile.unwrap();
            smoother.correct(
                before.position.to_array(),
                before.rotation.to_array(),
                after.position.to_array(),
                after.rotation.to_array(),
            );
        }
        smoother.decay(period);
        server_at.push(rig.server.player_state(1).unwrap());
        let truth = *server_at.last().unwrap();
        let err = after.position.distance(truth.position);
        // The client learns of the kick when the snapshot of tick KICK_AT + 1 arrives,
        // DELAY ticks later; from then on the prediction is right again.
        if t > KICK_AT + DELAY + 1 {
            worst_after = worst_after.max(err);
        }
        let shown = smoother
            .apply(after.position.to_array(), after.rotation.to_array())
            .0;
        rendered_error.push(Vec3::from(shown).distance(truth.position));
    }
    assert!(rig.predictor.stats().rollbacks >= 1);
    assert!(
        worst_after < 1e-4,
        "prediction converged: worst {worst_after} m"
    );
    // The rendered player eases onto the truth: within 1 cm about 50 ticks later.
    let t_ok = (KICK_AT + DELAY + 60) as usize - 1;
    assert!(
        rendered_error[t_ok..].iter().all(|&e| e < 0.01),
        "{:?}",
        &rendered_error[t_ok - 5..t_ok + 5]
    );
}
