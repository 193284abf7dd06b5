//! Client-side prediction with rollback and replay (the Unity physics
//! prediction article and the Pixonic mobile shooter article).
//!
//! The game keeps its own predicted world and implements [`Rollback`]: step it, save
//! what it predicts, compare a saved prediction with the server's state, and load the
//! server's state. [`Predictor`] keeps the per-tick history of saved predictions and
//! decides when to roll back and how far to replay.
//!
//! What "the predicted world" holds is the game's choice. Rolling back a whole physics
//! world is too slow for a frame (restore plus 20 replayed steps of a 900-body Rapier
//! scene takes 10-73 ms). The intended pattern is a *predicted set*: the local player and
//! whatever it is interacting with, simulated by the same code as the server's world.
//! Everything else is shown from snapshots.

use crate::{Input, Tick, TickBuffer};

/// The game's side of prediction.
pub trait Rollback {
    /// The player input type.
    type Input: Input;
    /// What is remembered per tick: the predicted state after that tick's step.
    type Saved;
    /// The server's authoritative state for one tick, as the client decoded it.
    type Confirmed: ?Sized;

    /// Steps the predicted world from `state(tick)` to `state(tick + 1)` with `input`.
    fn advance(&mut self, tick: Tick, input: Self::Input);
    /// The predicted world's current state, to be kept in the history.
    fn save(&self) -> Self::Saved;
    /// True if the prediction `predicted` for a tick disagrees with the server's
    /// `confirmed` state for that tick (beyond the game's tolerances). It may also ask for
    /// a rollback for other reasons, such as a new body entering the predicted set.
    fn diverged(&self, predicted: &Self::Saved, confirmed: &Self::Confirmed) -> bool;
    /// Replaces the predicted world with the server's state (it may also choose a new
    /// predicted set). `predicted` is what the client had predicted for the same tick, if
    /// still in history: a partial server state (an essential part with only the players,
    /// say) can take the rest from it instead of leaving it at the present.
    fn load(&mut self, confirmed: &Self::Confirmed, predicted: Option<&Self::Saved>);
    /// Called when a server state confirmed a prediction without a rollback. Lets the game
    /// adopt changes that need no replay, such as new sleeping bodies nearby. The default
    /// does nothing.
    fn confirmed(&mut self, _confirmed: &Self::Confirmed) {}
}

/// Prediction settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredictionConfig {
    /// Ticks of predicted state kept. A server state older than this forces a resync
    /// (the Pixonic mobile shooter article uses 32 ticks at 30 Hz; the Unity physics
    /// prediction article, 1024 at 64 Hz).
    pub history_ticks: usize,
    /// Most ticks replayed in one reconciliation. A deeper one replays only the newest
    /// ticks and counts as a resync, so a stall cannot freeze the frame.
    pub max_replay_ticks: u32,
}

impl Default for PredictionConfig {
    fn default() -> Self {
        Self {
            history_ticks: 256,
            max_replay_ticks: 128,
        }
    }
}

/// Prediction counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PredictionStats {
    /// Ticks predicted (not counting replays).
    pub ticks_predicted: u64,
    /// Server states compared with a prediction.
    pub reconciles: u64,
    /// Reconciliations that re-simulated at least one tick.
    pub rollbacks: u64,
    /// Ticks re-simulated in all.
    pub replayed_ticks: u64,
    /// Deepest replay.
    pub max_rollback_ticks: u32,
    /// Server states older than the history, or replays deeper than allowed: the world
    /// was reloaded and only the newest ticks replayed.
    pub resyncs: u64,
    /// Server states at or ahead of the prediction (normal before prediction starts).
    pub loads_ahead: u64,
    /// Server states older than one already reconciled (reordered snapshots).
    pub stale: u64,
}

/// What a reconciliation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconciled {
    /// The prediction for that tick matched: nothing was re-simulated.
    Confirmed,
    /// Mismatch: the server state was loaded and this many ticks replayed.
    RolledBack {
        /// Ticks re-simulated.
        depth: u32,
    },
    /// The server state was older than the history or needed too deep a replay: loaded,
    /// and the newest `depth` ticks replayed.
    Resynced {
        /// Ticks re-simulated.
        depth: u32,
    },
    /// The server state was at or ahead of the prediction: loaded as the present.
    LoadedAhead,
    /// Older than a state already reconciled: ignored.
    Stale,
}

/// Predicted-state history and the rollback decision.
///
/// Drive it with [`Predictor::predict`] once per client tick, after recording the input,
/// and [`Predictor::reconcile`] for each server state the client receives.
pub struct Predictor<G: Rollback> {
    config: PredictionConfig,
    history: TickBuffer<G::Saved>,
    /// The predicted world is at `state(present)`.
    present: Option<Tick>,
    newest_confirmed: Option<Tick>,
    stats: PredictionStats,
}

impl<G: Rollback> Predictor<G> {
    /// An empty predictor: the first server state is loaded as is.
    pub fn new(config: PredictionConfig) -> Self {
        Self {
            history: TickBuffer::new(config.history_ticks.max(2), Tick(0)),
            config,
            present: None,
            newest_confirmed: None,
            stats: PredictionStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &PredictionStats {
        &self.stats
    }

    /// Forgets the predicted history and the present (counters are kept), for a new
    /// server timeline ([`crate::ClientSession::epoch`]): the next server state is loaded
    /// as is, whatever its tick, as the first one was.
    pub fn reset(&mut self) {
        self.history.reset(Tick(0));
        self.present = None;
        self.newest_confirmed = None;
    }

    /// The tick of the predicted world's state, once a server state has been loaded.
    pub fn present(&self) -> Option<Tick> {
        self.present
    }

    /// The saved prediction for `tick`, if still in history.
    pub fn saved(&self, tick: Tick) -> Option<&G::Saved> {
        self.history.get(tick)
    }

    fn record(&mut self, tick: Tick, saved: G::Saved) {
        // A write below the window only happens after a resync moved it; dropping it is right.
        let _ = self.history.insert_advancing(tick, saved);
    }

    /// Advances the predicted world through `tick` (to `state(tick + 1)`) with `input`.
    ///
    /// Ticks between the present and `tick` (skipped by a clock jump) are stepped with the
    /// inputs `inputs` returns for them, or the default input. A `tick` already predicted
    /// is ignored. Before any server state has been loaded, nothing happens.
    pub fn predict(
        &mut self,
        game: &mut G,
        tick: Tick,
        input: G::Input,
        inputs: &dyn Fn(Tick) -> Option<G::Input>,
    ) {
        let Some(mut present) = self.present else {
            return;
        };
        if tick < present {
            return;
        }
        // Bounded: a huge jump is fast-forwarded at most one history's worth.
        if tick.diff(present) > self.history.capacity() as i64 {
            present = tick.saturating_sub(self.history.capacity() as u32);
        }
        while present < tick {
            game.advance(present, inputs(present).unwrap_or_default());
            present = present.next();
            self.record(present, game.save());
        }
        game.advance(tick, input);
        present = tick.next();
        self.record(present, game.save());
        self.present = Some(present);
        self.stats.ticks_predicted += 1;
    }

    /// Compares the server's state for `tick` with the prediction, rolling back and
    /// replaying the recorded inputs (`inputs`) up to the present on a mismatch.
    pub fn reconcile(
        &mut self,
        game: &mut G,
        tick: Tick,
        confirmed: &G::Confirmed,
        inputs: &dyn Fn(Tick) -> Option<G::Input>,
    ) -> Reconciled {
        // The same tick may come twice: an essential part first, the full snapshot later.
        // Comparing it again only makes sense while its prediction is still in history.
        let repeat_out_of_history =
            self.newest_confirmed == Some(tick) && self.history.get(tick).is_none();
        if self.newest_confirmed.is_some_and(|n| tick < n) || repeat_out_of_history {
            self.stats.stale += 1;
            return Reconciled::Stale;
        }
        self.newest_confirmed = Some(tick);
        let present = match self.present {
            Some(p) if tick <= p => p,
            _ => {
                // Nothing predicted beyond this state yet: it becomes the present.
                game.load(confirmed, None);
                self.history.reset(tick);
                self.record(tick, game.save());
                self.present = Some(tick);
                self.stats.loads_ahead += 1;
                return Reconciled::LoadedAhead;
            }
        };
        self.stats.reconciles += 1;
        let in_history = match self.history.get(tick) {
            Some(predicted) => {
                if !game.diverged(predicted, confirmed) {
                    game.confirmed(confirmed);
                    return Reconciled::Confirmed;
                }
                game.load(confirmed, Some(predicted));
                true
            }
            None => {
                game.load(confirmed, None);
                false
            }
        };
        let depth = u32::try_from(present.diff(tick)).unwrap_or(u32::MAX);
        let replay = depth.min(self.config.max_replay_ticks);
        let resync = !in_history || replay < depth;
        // On a resync the skipped ticks are lost: the loaded state stands in for the oldest
        // replayed tick, which keeps the present where the client clock is.
        let mut t = present.saturating_sub(replay);
        self.history.reset(t);
        self.record(t, game.save());
        while t < present {
            game.advance(t, inputs(t).unwrap_or_default());
            t = t.next();
            self.record(t, game.save());
        }
        if replay > 0 {
            self.stats.rollbacks += 1;
        }
        self.stats.replayed_ticks += u64::from(replay);
        self.stats.max_rollback_ticks = self.stats.max_rollback_ticks.max(replay);
        if resync {
            self.stats.resyncs += 1;
            Reconciled::Resynced { depth: replay }
        } else {
            Reconciled::RolledBack { depth: replay }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1-D body: input adds to velocity, velocity moves position. The "server" may
    /// apply an extra push the client cannot predict.
    #[derive(Default)]
    struct Toy {
        pos: i64,
        vel: i64,
        steps: u64,
    }

    impl Rollback for Toy {
        type Input = u8;
        type Saved = (i64, i64);
        type Confirmed = (i64, i64);
        fn advance(&mut self, _tick: Tick, input: u8) {
            self.vel += i64::from(input);
            self.pos += self.vel;
            self.steps += 1;
        }
        fn save(&self) -> (i64, i64) {
            (self.pos, self.vel)
        }
        fn diverged(&self, p: &(i64, i64), c: &(i64, i64)) -> bool {
            p != c
        }
        fn load(&mut self, c: &(i64, i64), _predicted: Option<&(i64, i64)>) {
            (self.pos, self.vel) = *c;
        }
    }

    fn server_states(inputs: &[u8], push_at: Option<u32>) -> Vec<(i64, i64)> {
        let mut s = Toy::default();
        let mut out = vec![s.save()];
        for (t, &i) in inputs.iter().enumerate() {
            s.advance(Tick(t as u32), i);
            if push_at == Some(t as u32) {
                s.vel += 5;
            }
            out.push(s.save());
        }
        out
    }

    #[test]
    fn matching_predictions_never_roll_back() {
        let inputs: Vec<u8> = (0..100).map(|t| (t % 3) as u8).collect();
        let server = server_states(&inputs, None);
        let mut game = Toy::default();
        let mut p = Predictor::<Toy>::new(PredictionConfig::default());
        let lookup = |t: Tick| inputs.get(t.0 as usize).copied();
        assert_eq!(
            p.reconcile(&mut game, Tick(0), &server[0], &lookup),
            Reconciled::LoadedAhead
        );
        for t in 0..100u32 {
            p.predict(&mut game, Tick(t), inputs[t as usize], &lookup);
            // The server's state arrives 10 ticks late (tick 0 was the starting load).
            if t >= 11 {
                let st = t - 10;
                assert_eq!(
                    p.reconcile(&mut game, Tick(st), &server[st as usize], &lookup),
                    Reconciled::Confirmed
                );
            }
        }
        assert_eq!(p.stats().rollbacks, 0);
        assert_eq!(game.save(), server[100]);
    }

    #[test]
    fn misprediction_rolls_back_and_converges() {
        let inputs: Vec<u8> = vec![1; 60];
        let server = server_states(&inputs, Some(20));
        let mut game = Toy::default();
        let mut p = Predictor::<Toy>::new(PredictionConfig::default());
        let lookup = |t: Tick| inputs.get(t.0 as usize).copied();
        p.reconcile(&mut game, Tick(0), &server[0], &lookup);
        let mut outcomes = Vec::new();
        for t in 0..60u32 {
            p.predict(&mut game, Tick(t), 1, &lookup);
            if t >= 9 {
                let st = t - 8;
                outcomes.push(p.reconcile(&mut game, Tick(st), &server[st as usize], &lookup));
            }
        }
        // Exactly one rollback when the pushed state (tick 21) arrived with the present at
        // 30: 9 ticks replayed.
        assert_eq!(p.stats().rollbacks, 1);
        assert!(
            outcomes.contains(&Reconciled::RolledBack { depth: 9 }),
            "{outcomes:?}"
        );
        // After it, the prediction equals the server exactly.
        assert_eq!(game.save(), server[60]);
        assert_eq!(p.saved(Tick(45)), Some(&server[45]));
    }

    #[test]
    fn too_old_server_state_resyncs_with_bounded_replay() {
        let config = PredictionConfig {
            history_ticks: 16,
            max_replay_ticks: 10,
        };
        let inputs: Vec<u8> = vec![1; 100];
        let server = server_states(&inputs, Some(3));
        let mut game = Toy::default();
        let mut p = Predictor::<Toy>::new(config);
        let lookup = |t: Tick| inputs.get(t.0 as usize).copied();
        p.reconcile(&mut game, Tick(0), &server[0], &lookup);
        for t in 0..50u32 {
            p.predict(&mut game, Tick(t), 1, &lookup);
        }
        game.steps = 0;
        // Tick 5 is 45 ticks old: beyond the history; replay is capped at 10 steps.
        let out = p.reconcile(&mut game, Tick(5), &server[5], &lookup);
        assert_eq!(out, Reconciled::Resynced { depth: 10 });
        assert_eq!(game.steps, 10);
        assert_eq!(p.present(), Some(Tick(50)));
        assert_eq!(p.stats().resyncs, 1);
        // Stale and duplicate states are ignored.
        assert_eq!(
            p.reconcile(&mut game, Tick(5), &server[5], &lookup),
            Reconciled::Stale
        );
        assert_eq!(
            p.reconcile(&mut game, Tick(4), &server[4], &lookup),
            Reconciled::Stale
        );
    }

    #[test]
    fn skipped_ticks_are_filled_from_recorded_inputs() {
        let inputs: Vec<u8> = vec![2; 20];
        let server = server_states(&inputs, None);
        let mut game = Toy::default();
        let mut p = Predictor::<Toy>::new(PredictionConfig::default());
        let lookup = |t: Tick| inputs.get(t.0 as usize).copied();
        p.reconcile(&mut game, Tick(0), &server[0], &lookup);
        p.predict(&mut game, Tick(0), 2, &lookup);
        // A clock jump: ticks 1..5 were never produced.
        p.predict(&mut game, Tick(5), 2, &lookup);
        assert_eq!(p.present(), Some(Tick(6)));
        assert_eq!(game.save(), server[6]);
        // Predicting an old tick again changes nothing.
        p.predict(&mut game, Tick(3), 9, &lookup);
        assert_eq!(game.save(), server[6]);
    }
}
