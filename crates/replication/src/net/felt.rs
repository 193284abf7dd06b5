//! What a tick of lead and a late input cost the player, measured from the client's own
//! corrections, for the core's felt lead policy ([`lagless_core::LeadPolicy::Felt`]).
//!
//! Every reconciliation is one sample: how far it moved the predicted entities (the
//! correction the player would see, before smoothing), how many ticks the prediction ran
//! ahead of the server state (its horizon), and how many of the ticks it newly confirms
//! the server simulated with another input than the player's (a late input the server
//! guessed wrong, [`lagless_core::ClientStats::guesses_wrong`]).
//!
//! - **A tick of lead**: the prediction's error grows with its horizon (what the others
//!   did meanwhile is unknown), so the samples without a wrong tick give the error per
//!   tick of horizon, `sum(correction) / sum(horizon)`. A tick more of lead adds that to
//!   every reconciliation, one per tick.
//! - **A wrong tick**: the samples with wrong ticks, less what their horizon explains,
//!   divided by the wrong ticks they cover.
//!
//! A reconciliation that moved a predicted entity no further than one grid step of its
//! position on each axis ([`rounding`]) counts as one that moved nothing: loading the
//! server's quantized state moves a player predicted right that far, whatever made the
//! rollback (a score only the server changes, say), and no lead would have avoided it.
//!
//! Both are decaying sums (a minute's worth at 64 Hz), so a scene whose play changes is
//! followed. Until wrong ticks have been seen, a wrong tick is taken to cost as much as
//! [`PRIOR_WRONG_TICK_IN_LEAD_TICKS`] ticks of lead, a prior that the first few dozen
//! measured ones outweigh.

use crate::{FieldType, Kind};

/// The weight a sample keeps after each new one: about a minute of ticks at 64 Hz.
const DECAY: f64 = 1.0 - 1.0 / 4096.0;

/// Reconciliations before the cost of a tick of lead is trusted.
const MIN_SAMPLES: f64 = 64.0;

/// Before any is measured, a wrong tick's cost in ticks of lead (per tick of play). A
/// wrong input moves the player one tick's worth of its action away from what was
/// predicted, and that correction shows as often as the horizon's error does: the
/// measured ratio on the lab's scenes lies within a few times of it (docs/lead.md).
pub const PRIOR_WRONG_TICK_IN_LEAD_TICKS: f64 = 16.0;

/// The weight, in wrong ticks, of that prior.
const PRIOR_WEIGHT: f64 = 8.0;

/// The measured costs (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeltCosts {
    samples: f64,
    plain_correction: f64,
    plain_horizon: f64,
    wrong_excess: f64,
    wrong_ticks: f64,
}

impl FeltCosts {
    /// Takes one reconciliation: the largest distance it moved a predicted entity
    /// (metres; 0 when the prediction was confirmed), the prediction's horizon in ticks,
    /// and the wrong ticks it newly confirms.
    pub fn record(&mut self, correction: f64, horizon: f64, wrong: u32) {
        if !correction.is_finite() || !horizon.is_finite() || correction < 0.0 || horizon < 0.0 {
            return;
        }
        self.samples = self.samples * DECAY + 1.0;
        if wrong == 0 {
            self.plain_correction = self.plain_correction * DECAY + correction;
            self.plain_horizon = self.plain_horizon * DECAY + horizon;
        } else {
            let explained = self.per_lead_tick().unwrap_or(0.0) * horizon;
            self.wrong_excess = self.wrong_excess * DECAY + (correction - explained);
            self.wrong_ticks = self.wrong_ticks * DECAY + f64::from(wrong);
        }
    }

    /// The correction a tick of lead adds to every reconciliation, metres; `None` until
    /// enough reconciliations were seen.
    pub fn per_lead_tick(&self) -> Option<f64> {
        (self.samples >= MIN_SAMPLES && self.plain_horizon > 0.0)
            .then(|| self.plain_correction / self.plain_horizon)
    }

    /// The correction one wrong tick costs, metres (never negative): the measured excess
    /// per wrong tick, drawn toward the prior while few were seen.
    pub fn per_wrong_tick(&self) -> Option<f64> {
        let lead = self.per_lead_tick()?;
        let prior = PRIOR_WRONG_TICK_IN_LEAD_TICKS * lead;
        Some(
            ((self.wrong_excess + prior * PRIOR_WEIGHT) / (self.wrong_ticks + PRIOR_WEIGHT))
                .max(0.0),
        )
    }

    /// Wrong ticks seen (decayed).
    pub fn wrong_ticks(&self) -> f64 {
        self.wrong_ticks
    }
}

/// Interpolated entities an [`UnderrunCosts`] follows per frame: a sample is enough, and
/// it keeps the cost of watching off a world of thousands.
pub const UNDERRUN_SAMPLE: usize = 64;

/// What an underrun of the interpolation buffer costs the player: the jump the others
/// make on screen when real snapshots return after the buffer ran dry (extrapolated or
/// held them), beyond how much their motion changes from frame to frame anyway, per tick
/// spent in underrun. The interpolation policy weighs it against a tick of delay
/// ([`lagless_core::interpolation::DelayPolicy::Felt`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnderrunCosts {
    /// Per entity followed, in id order: its last position and last step.
    last: Vec<(u32, [f32; 3], Option<[f32; 3]>)>,
    was_underrun: bool,
    /// Decaying sums: frames' mean change of step while interpolating, and their count.
    steady: f64,
    steady_frames: f64,
    /// Decaying sums: the excess jump where underruns ended, and the ticks in underrun.
    jumps: f64,
    underrun_ticks: f64,
}

impl UnderrunCosts {
    /// Takes one rendered frame: the interpolated entities' positions (the first
    /// [`UNDERRUN_SAMPLE`] are followed), whether the frame was an underrun, and how many
    /// ticks of time it stands for.
    pub fn frame(&mut self, shown: &[(u32, [f32; 3])], underrun: bool, ticks: f64) {
        let mut changes = (0.0f64, 0usize);
        let mut next = Vec::with_capacity(shown.len().min(UNDERRUN_SAMPLE));
        for &(id, p) in shown.iter().take(UNDERRUN_SAMPLE) {
            let old = self
                .last
                .binary_search_by_key(&id, |(i, _, _)| *i)
                .ok()
                .map(|k| &self.last[k]);
            let step = old.map(|(_, q, _)| sub(p, *q));
            if let (Some(step), Some((_, _, Some(before)))) = (step, old) {
                changes.0 += f64::from(norm(sub(step, *before)));
                changes.1 += 1;
            }
            next.push((id, p, step));
        }
        // Kept in id order, so the next frame finds each entity without a scan (this
        // runs every rendered frame).
        next.sort_unstable_by_key(|(i, _, _)| *i);
        self.last = next;
        if changes.1 > 0 {
            let change = changes.0 / changes.1 as f64;
            if !underrun && self.was_underrun {
                let steady = if self.steady_frames > 0.0 {
                    self.steady / self.steady_frames
                } else {
                    0.0
                };
                self.jumps = self.jumps * DECAY + (change - steady).max(0.0);
            } else if !underrun {
                self.steady = self.steady * DECAY + change;
                self.steady_frames = self.steady_frames * DECAY + 1.0;
            }
        }
        if underrun && ticks.is_finite() && ticks > 0.0 {
            self.underrun_ticks = self.underrun_ticks * DECAY + ticks;
        }
        self.was_underrun = underrun;
    }

    /// The jump an underrun tick costs, metres; `None` before any underrun.
    pub fn per_underrun_tick(&self) -> Option<f64> {
        (self.underrun_ticks > 0.0).then(|| self.jumps / self.underrun_ticks)
    }
}

/// How far loading the server's state may move an entity of `kind` that was predicted
/// right, metres: one grid step of its position field on each axis (the position shown
/// before is the prediction's, rounded or not, and the one after starts from the
/// server's rounded value). 0 for a kind without a vector position.
pub(super) fn rounding(kind: &Kind) -> f32 {
    match kind.position_field().map(|f| f.ty) {
        Some(FieldType::Vector {
            dims, resolution, ..
        }) => resolution * f32::from(dims).sqrt(),
        _ => 0.0,
    }
}

/// The straight-line distance between two positions.
pub(super) fn distance(a: [f32; 3], b: [f32; 3]) -> f32 {
    norm(sub(a, b))
}

fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn norm(a: [f32; 3]) -> f32 {
    (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_underrun_costs_the_jump_when_it_ends() {
        let mut u = UnderrunCosts::default();
        assert_eq!(u.per_underrun_tick(), None);
        // An entity moving 1 cm a frame; every 50th frame an underrun of 2 frames (half a
        // tick each) held it still, after which it jumps 3 cm to where it is.
        let mut x = 0.0f32;
        let mut shown = 0.0f32;
        for frame in 0..5000 {
            x += 0.01;
            let underrun = frame % 50 >= 48;
            if !underrun {
                shown = x;
            }
            u.frame(&[(7, [shown, 0.0, 0.0])], underrun, 0.5);
        }
        // The end's step is 3 cm after a step of 0: a change of 3 cm; steady changes are
        // 0 (or 1 cm going into the hold). Per underrun tick: 3 cm over one tick.
        let cost = u.per_underrun_tick().unwrap();
        assert!((cost - 0.03).abs() < 0.002, "{cost}");
    }

    #[test]
    fn the_horizon_cost_and_the_wrong_tick_cost_are_told_apart() {
        let mut f = FeltCosts::default();
        assert_eq!(f.per_lead_tick(), None);
        // Corrections of 1 cm per tick of horizon, and a wrong tick adding 30 cm.
        for i in 0..20_000u32 {
            let horizon = f64::from(10 + i % 7);
            let wrong = u32::from(i % 50 == 0);
            f.record(0.01 * horizon + 0.3 * f64::from(wrong), horizon, wrong);
        }
        let lead = f.per_lead_tick().unwrap();
        assert!((lead - 0.01).abs() < 1e-6, "{lead}");
        let wrong = f.per_wrong_tick().unwrap();
        assert!((wrong - 0.3).abs() < 0.02, "{wrong}");
    }

    #[test]
    fn the_prior_holds_until_wrong_ticks_are_seen_and_garbage_is_ignored() {
        let mut f = FeltCosts::default();
        for _ in 0..1000 {
            f.record(0.1, 10.0, 0);
            f.record(f64::NAN, 10.0, 1);
            f.record(-1.0, 10.0, 1);
        }
        let lead = f.per_lead_tick().unwrap();
        assert!((lead - 0.01).abs() < 1e-9);
        let wrong = f.per_wrong_tick().unwrap();
        assert!((wrong - PRIOR_WRONG_TICK_IN_LEAD_TICKS * lead).abs() < 1e-9);
        // Wrong ticks that cost nothing beyond their horizon bring it down to 0.
        for _ in 0..2000 {
            f.record(0.1, 10.0, 1);
        }
        assert!(
            f.per_wrong_tick().unwrap() < 0.1 * lead,
            "{:?}",
            f.per_wrong_tick()
        );
    }
}
