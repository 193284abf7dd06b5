//! How a client shows the walking characters (the walkers scene), by dead reckoning or through the
//! interpolation buffer, against where the server has them *at the same instant*: the
//! `deadreckoning.*` metrics (docs/metrics.md, section Dead reckoning).
//!
//! Each frame the client records where it shows every character; a frame is judged once
//! the server's record reaches past it, against the server's positions interpolated to
//! the frame's own time. So an interpolated character shown 150 ms in the past is 150 ms
//! of its motion off, as the player sees it, and a dead-reckoned one is off by what its
//! prediction missed.

use crate::metrics::{Histogram, Mean};
use crate::remote_view::dist_cm;
use std::collections::VecDeque;
use std::time::Duration;

/// The server's record of the characters: their positions after every tick, and when
/// (on the lab's clock) the server computed each tick.
#[derive(Debug, Default, Clone)]
pub struct CharacterTruth {
    /// When each recorded state became the server's present.
    pub times: Vec<Duration>,
    /// Per character (in `LabScene::characters`' order), its position per record.
    pub positions: Vec<Vec<[f32; 3]>>,
}

impl CharacterTruth {
    /// Appends the server's state at `now`.
    pub fn push(&mut self, now: Duration, positions: impl Iterator<Item = [f32; 3]>) {
        self.times.push(now);
        for (j, p) in positions.enumerate() {
            if self.positions.len() <= j {
                self.positions.push(Vec::new());
            }
            self.positions[j].push(p);
        }
    }

    /// Where character `j` was at `at`, between the two records around it; `None` before
    /// the first record or once `at` is past the newest (not known yet).
    pub fn at(&self, j: usize, at: Duration) -> Option<[f32; 3]> {
        let k = self.times.partition_point(|t| *t <= at).checked_sub(1)?;
        let (t0, t1) = (self.times[k], *self.times.get(k + 1)?);
        let track = self.positions.get(j)?;
        let (a, b) = (track.get(k)?, track.get(k + 1)?);
        let f = if t1 > t0 {
            ((at - t0).as_secs_f64() / (t1 - t0).as_secs_f64()) as f32
        } else {
            0.0
        };
        Some([0, 1, 2].map(|i| a[i] + (b[i] - a[i]) * f))
    }

    /// True once the record reaches past `at`.
    fn covers(&self, at: Duration) -> bool {
        self.times.last().is_some_and(|t| *t > at)
    }
}

/// One client's view of the characters, frame by frame.
#[derive(Debug, Default, Clone)]
pub struct CharacterView {
    /// Shown against true position at the same instant, cm, per character per frame.
    pub error_cm: Histogram,
    /// Its mean.
    pub error_mean: Mean,
    /// Per frame and character, length of (shown motion since the previous frame - true
    /// motion over the same time), cm; a character at rest and shown at rest is left out.
    pub jerk_cm: Histogram,
    /// Character frames shown, and frames of characters not shown yet.
    pub seen: u64,
    /// See `seen`.
    pub unseen: u64,
    pending: VecDeque<(Duration, Vec<[f32; 3]>)>,
    last: Option<(Duration, Vec<[f32; 3]>)>,
}

impl CharacterView {
    /// Records the frame drawn at `now`: where each character is shown (NaN: not shown).
    pub fn record(&mut self, now: Duration, shown: Vec<[f32; 3]>) {
        self.pending.push_back((now, shown));
    }

    /// Judges every recorded frame that `truth` now reaches past.
    pub fn judge(&mut self, truth: &CharacterTruth) {
        while self.pending.front().is_some_and(|(t, _)| truth.covers(*t)) {
            let Some((now, shown)) = self.pending.pop_front() else {
                break;
            };
            for (j, p) in shown.iter().enumerate() {
                let Some(t) = truth.at(j, now) else { continue };
                if !p.iter().all(|v| v.is_finite()) {
                    self.unseen += 1;
                    continue;
                }
                self.seen += 1;
                let e = dist_cm(*p, t);
                self.error_cm.record(e);
                self.error_mean.add(e);
            }
            if let Some((then, before)) = &self.last {
                for (j, (p, b)) in shown.iter().zip(before).enumerate() {
                    let (Some(from), Some(to)) = (truth.at(j, *then), truth.at(j, now)) else {
                        continue;
                    };
                    if !(p.iter().chain(b).all(|v| v.is_finite())) {
                        continue;
                    }
                    let shown_motion = [0, 1, 2].map(|i| p[i] - b[i]);
                    let true_motion = [0, 1, 2].map(|i| to[i] - from[i]);
                    if shown_motion == [0.0; 3] && true_motion == [0.0; 3] {
                        continue;
                    }
                    self.jerk_cm.record(dist_cm(shown_motion, true_motion));
                }
            }
            self.last = Some((now, shown));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// One character walking 1 m/s along x, recorded every 10 ms.
    fn truth() -> CharacterTruth {
        let mut t = CharacterTruth::default();
        for k in 0..100u64 {
            t.push(ms(10 * k), std::iter::once([k as f32 * 0.01, 0.0, 0.0]));
        }
        t
    }

    #[test]
    fn present_time_error_counts_a_delay_against_the_view() {
        let truth = truth();
        assert_eq!(truth.at(0, ms(15)), Some([0.015, 0.0, 0.0]));
        assert_eq!(truth.at(0, ms(990)), None, "not known yet");
        let mut exact = CharacterView::default();
        let mut late = CharacterView::default();
        for f in 10..50u64 {
            let x = f as f32 * 0.01;
            exact.record(ms(10 * f), vec![[x, 0.0, 0.0]]);
            // Shown 100 ms in the past: 10 cm behind, but moving just as smoothly.
            late.record(ms(10 * f), vec![[x - 0.1, 0.0, 0.0]]);
        }
        exact.judge(&truth);
        late.judge(&truth);
        assert_eq!(exact.seen, 40);
        assert!(exact.error_mean.mean().unwrap() < 0.01);
        let e = late.error_mean.mean().unwrap();
        assert!((e - 10.0).abs() < 0.01, "{e}");
        assert!(late.jerk_cm.percentile(100.0).unwrap() < 0.01);
    }

    #[test]
    fn a_pop_is_jerk_and_an_unshown_character_is_counted_apart() {
        let truth = truth();
        let mut view = CharacterView::default();
        view.record(ms(100), vec![[f32::NAN; 3]]);
        view.record(ms(110), vec![[0.11, 0.0, 0.0]]);
        view.record(ms(120), vec![[0.42, 0.0, 0.0]]);
        view.record(ms(2000), vec![[0.0; 3]]); // beyond the record: waits
        view.judge(&truth);
        assert_eq!((view.seen, view.unseen), (2, 1));
        let jerk = view.jerk_cm.percentile(100.0).unwrap();
        assert!((jerk - 30.0).abs() < 0.2, "{jerk}");
        assert_eq!(view.pending.len(), 1);
    }
}
