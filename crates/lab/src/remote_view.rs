//! How interpolated entities (remote players and every cube the client does not predict)
//! look when shown through the interpolation buffer: where they are against the server's
//! truth, and how smoothly they move.

use crate::metrics::Histogram;
use lagless_core::interpolation::{Pose, Sampled};
use std::time::Duration;

/// The measurements of one client's view of the other players, frame by frame.
///
/// * **Error**: each rendered remote player against the server's truth at the tick the
///   frame shows (`interpolation.error_cm_p99`). Interpolation alone is exact up to
///   quantization; extrapolation and holds are not.
/// * **Jerk**: each frame's rendered motion against the motion the player truly made over
///   as much server time as the frame's real time, from where the last frame was shown
///   (`interpolation.jerk_cm_p99`). A frame at real speed scores its interpolation error
///   only; one slowed down, sped up, held or extrapolated wrongly scores the motion it
///   lost or gained. This is what the shown time's warping (stretching over an overdue
///   snapshot, catching up, slewing to a new delay) and every underrun cost the eye, in
///   the same unit as the predicted player's `render.jerk_cm_p99`; the error cannot see
///   a warp, since a warped frame still shows the truth at the time it shows.
///
/// Entities within [`NEAR_M`] of the client's own player also count in `near_error_cm`
/// (`interpolation.near_error_cm_p99`): what the player looks at and collides with.
#[derive(Debug, Default, Clone)]
pub struct RemoteView {
    /// Rendered vs truth at the displayed tick, cm, per entity per frame.
    pub error_cm: Histogram,
    /// The same, for entities near the client's own player.
    pub near_error_cm: Histogram,
    /// Rendered motion vs true motion over the frame's real time, cm, per entity per
    /// frame after the first, leaving out entities at rest and shown at rest.
    pub jerk_cm: Histogram,
    /// Entity frames shown, and entity frames of entities not received yet.
    pub seen: u64,
    /// See `seen`.
    pub unseen: u64,
    /// The age of what each frame showed, summed over frames, ms: how far the frame's
    /// displayed server time lay behind the server's present (`feel.view_age_ms_mean`).
    pub view_age_ms_sum: f64,
    /// Frames whose age is in `view_age_ms_sum`.
    pub view_age_frames: u64,
    /// The last frame: when it was drawn, the tick it showed and the positions shown.
    last: Option<(Duration, f64, Vec<[f32; 3]>)>,
}

/// The server's record of one entity's position, one per state tick, indexed by tick.
/// A run that lasts (`lagless view`) forgets the oldest ticks ([`Track::forget_before`]),
/// which only the frames of that time looked up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Track {
    /// The tick of `values[0]`.
    first: usize,
    values: Vec<[f32; 3]>,
}

impl Track {
    /// The position at `tick`, `None` if not recorded (yet, or any more).
    pub fn get(&self, tick: usize) -> Option<&[f32; 3]> {
        self.values.get(tick.checked_sub(self.first)?)
    }
    /// The newest position.
    pub fn last(&self) -> Option<&[f32; 3]> {
        self.values.last()
    }
    /// Records the next tick's position.
    pub fn push(&mut self, position: [f32; 3]) {
        self.values.push(position);
    }
    /// Ticks recorded, forgotten ones included.
    pub fn len(&self) -> usize {
        self.first + self.values.len()
    }
    /// The oldest tick still recorded.
    pub fn first(&self) -> usize {
        self.first
    }
    /// True before anything was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Forgets the positions before `tick`.
    pub fn forget_before(&mut self, tick: usize) {
        let n = tick.saturating_sub(self.first).min(self.values.len());
        self.values.drain(..n);
        self.first += n;
    }
}

impl From<Vec<[f32; 3]>> for Track {
    fn from(values: Vec<[f32; 3]>) -> Self {
        Self { first: 0, values }
    }
}

/// How near an entity must be to the client's player to count as near, m.
pub const NEAR_M: f32 = 5.0;

impl RemoteView {
    /// Records the frame drawn at local time `now`. `truth[j]` is the server's record of
    /// the `j`-th entity shown (one position per tick), in the order of `shown.value`;
    /// `period` is the tick length; `own` is where the client's player is.
    ///
    /// The frame's age is measured against the server's present, which a lab run's
    /// server clock puts at tick `now / period` (tick 0 at time 0); a frame shown past
    /// it (extrapolating) counts as age 0.
    pub fn record(
        &mut self,
        now: Duration,
        shown: &Sampled<Vec<Pose>>,
        truth: &[&Track],
        period: Duration,
        own: Option<[f32; 3]>,
    ) {
        let positions: Vec<[f32; 3]> = shown.value.iter().map(|p| p.position).collect();
        let present = now.as_secs_f64() / period.as_secs_f64();
        if present.is_finite() && shown.render_tick.is_finite() {
            let age_ticks = (present - shown.render_tick).max(0.0);
            self.view_age_ms_sum += age_ticks * period.as_secs_f64() * 1000.0;
            self.view_age_frames += 1;
        }
        for (p, record) in positions.iter().zip(truth) {
            if let Some(t) = truth_at(record, shown.render_tick) {
                // Not received yet (the budget has not got to it): nothing is shown, so
                // there is no distance to measure; counted apart.
                if !p.iter().all(|v| v.is_finite()) {
                    self.unseen += 1;
                    continue;
                }
                self.seen += 1;
                let e = dist_cm(*p, t);
                self.error_cm.record(e);
                if own.is_some_and(|o| dist_cm(o, t) <= f64::from(NEAR_M) * 100.0) {
                    self.near_error_cm.record(e);
                }
            }
        }
        if let Some((then, tick, before)) = &self.last {
            // Real time since the last frame, in ticks: what playback at real speed
            // would have advanced.
            let frame = now.saturating_sub(*then).as_secs_f64() / period.as_secs_f64();
            for ((p, b), record) in positions.iter().zip(before).zip(truth) {
                let (Some(from), Some(to)) =
                    (truth_at(record, *tick), truth_at(record, *tick + frame))
                else {
                    continue;
                };
                let shown_motion = sub(*p, *b);
                let true_motion = sub(to, from);
                // Something at rest and shown at rest shows no motion to judge; counting
                // it would bury the moving few under hundreds of resting cubes.
                if shown_motion == [0.0; 3] && true_motion == [0.0; 3] {
                    continue;
                }
                self.jerk_cm.record(dist_cm(shown_motion, true_motion));
            }
        }
        self.last = Some((now, shown.render_tick, positions));
    }
}

fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// The server's recorded position at a fractional tick, interpolated between the two
/// recorded ticks around it; `None` outside the record.
pub(crate) fn truth_at(record: &Track, tick: f64) -> Option<[f32; 3]> {
    if tick.is_nan() || tick < 0.0 {
        return None;
    }
    let t0 = tick.floor() as usize;
    let a = record.get(t0)?;
    let b = record.get(t0 + 1).unwrap_or(a);
    let f = (tick - tick.floor()) as f32;
    Some([0, 1, 2].map(|i| a[i] + (b[i] - a[i]) * f))
}

/// Distance between two points, cm (positions are in metres).
pub(crate) fn dist_cm(a: [f32; 3], b: [f32; 3]) -> f64 {
    let d: f64 = (0..3).map(|i| f64::from(a[i] - b[i]).powi(2)).sum();
    d.sqrt() * 100.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use lagless_core::Tick;
    use lagless_core::interpolation::SampleKind;

    const TICK: Duration = Duration::from_millis(10);

    /// A player moving 1 cm per tick along x.
    fn truth() -> Track {
        Track::from(
            (0..100)
                .map(|t| [t as f32 * 0.01, 0.0, 0.0])
                .collect::<Vec<_>>(),
        )
    }

    fn frame(render_tick: f64, x: f32) -> Sampled<Vec<Pose>> {
        Sampled {
            value: vec![Pose::new([x, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])],
            kind: SampleKind::Interpolated {
                from: Tick(0),
                to: Tick(1),
                t: 0.0,
            },
            render_tick,
        }
    }

    #[test]
    fn playback_at_real_speed_has_no_jerk() {
        let record = truth();
        let mut view = RemoteView::default();
        for f in 0..50u32 {
            let tick = 10.0 + f64::from(f);
            view.record(
                TICK * f,
                &frame(tick, tick as f32 * 0.01),
                &[&record],
                TICK,
                None,
            );
        }
        assert_eq!(view.error_cm.count(), 50);
        assert_eq!(view.jerk_cm.count(), 49);
        assert_eq!(view.jerk_cm.percentile(100.0), Some(0.0));
        assert_eq!(view.error_cm.percentile(100.0), Some(0.0));
    }

    /// A frame at half speed shows the truth at its tick (no error) but half the motion:
    /// its jerk is the half it lost. A held frame loses all of it.
    #[test]
    fn slow_motion_and_holds_show_as_jerk_not_error() {
        let record = truth();
        let mut view = RemoteView::default();
        view.record(Duration::ZERO, &frame(10.0, 0.10), &[&record], TICK, None);
        view.record(TICK * 1, &frame(10.5, 0.105), &[&record], TICK, None);
        view.record(TICK * 2, &frame(11.5, 0.115), &[&record], TICK, None);
        // Held where it was for a frame (an underrun), while the truth moved on.
        view.record(TICK * 3, &frame(12.5, 0.115), &[&record], TICK, None);
        // Errors 0, 0, 0, 1; jerks 0.5, 0, 1.
        let near = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 2e-3);
        assert!(near(view.error_cm.percentile(75.0), 0.0));
        assert!(near(view.error_cm.percentile(100.0), 1.0));
        assert!(near(view.jerk_cm.percentile(33.0), 0.0));
        assert!(near(view.jerk_cm.percentile(50.0), 0.5));
        assert!(near(view.jerk_cm.percentile(100.0), 1.0));
    }

    #[test]
    fn view_age_is_the_shown_time_behind_the_server_present() {
        let record = truth();
        let mut view = RemoteView::default();
        // At 300 ms the server is at tick 30: a frame showing tick 22.5 is 75 ms old,
        // one showing tick 29 at 310 ms is 20 ms old, one past the present is 0 old.
        view.record(TICK * 30, &frame(22.5, 0.225), &[&record], TICK, None);
        view.record(TICK * 31, &frame(29.0, 0.29), &[&record], TICK, None);
        view.record(TICK * 32, &frame(33.0, 0.33), &[&record], TICK, None);
        view.record(TICK * 33, &frame(f64::NAN, 0.33), &[&record], TICK, None);
        assert_eq!(view.view_age_frames, 3);
        assert!(
            (view.view_age_ms_sum - 95.0).abs() < 1e-9,
            "{}",
            view.view_age_ms_sum
        );
    }

    #[test]
    fn near_entities_are_counted_apart() {
        let record = truth();
        let mut view = RemoteView::default();
        view.record(
            Duration::ZERO,
            &frame(10.0, 0.2),
            &[&record],
            TICK,
            Some([0.0; 3]),
        );
        view.record(
            TICK,
            &frame(11.0, 0.3),
            &[&record],
            TICK,
            Some([50.0, 0.0, 0.0]),
        );
        assert_eq!(view.error_cm.count(), 2);
        assert_eq!(view.near_error_cm.count(), 1);
    }

    #[test]
    fn a_track_forgets_its_oldest_ticks_and_keeps_their_numbers() {
        let mut track = truth();
        track.forget_before(40);
        assert_eq!((track.first(), track.len()), (40, 100));
        assert_eq!(track.get(39), None);
        assert_eq!(track.get(40), Some(&[40.0 * 0.01, 0.0, 0.0]));
        track.push([1.0, 0.0, 0.0]);
        assert_eq!(track.get(100), Some(&[1.0, 0.0, 0.0]));
        track.forget_before(1000);
        assert_eq!((track.first(), track.len(), track.last()), (101, 101, None));
    }

    #[test]
    fn frames_outside_the_record_are_skipped() {
        let record = truth();
        let mut view = RemoteView::default();
        view.record(Duration::ZERO, &frame(-3.0, 0.0), &[&record], TICK, None);
        view.record(TICK * 1, &frame(150.0, 1.5), &[&record], TICK, None);
        view.record(TICK * 2, &frame(151.0, 1.51), &[&record], TICK, None);
        view.record(TICK * 3, &frame(f64::NAN, 1.52), &[&record], TICK, None);
        assert_eq!(view.error_cm.count(), 0);
        assert_eq!(view.jerk_cm.count(), 0);
    }
}
