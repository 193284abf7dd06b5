//! The [`InterpolationBuffer`]: snapshots in, smooth past states out.

use super::config::PREALLOCATE;
use super::policy::{Arrival, Delay, Need, WARMUP_PAIRS};
use super::{Curve, Interpolate, InterpolationConfig, InterpolationStats};
use crate::window::shift::Shift;
use crate::{Tick, TickRate};
use std::collections::VecDeque;
use std::time::Duration;
use thiserror::Error;

// Named in the docs only.
#[cfg(doc)]
use super::DelayPolicy;

/// Foreign-timeline snapshots in a row (ticks too far from the newest, but close to each
/// other) after which the buffer concludes the server's tick numbering restarted or jumped,
/// and starts over on the new timeline.
const RESYNC_AFTER: u32 = 3;

/// Why [`InterpolationBuffer::push`] refused a snapshot. Every refusal is also counted in
/// [`InterpolationStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PushError {
    /// Playback has already passed this tick (or it is far older than the newest snapshot).
    #[error("tick {tick} is older than the played-back tick {floor}")]
    Stale {
        /// The refused tick.
        tick: Tick,
        /// The newest tick playback has started from (or the newest snapshot, for a tick
        /// from another timeline).
        floor: Tick,
    },
    /// A snapshot for this tick is already buffered.
    #[error("tick {tick} is already buffered")]
    Duplicate {
        /// The refused tick.
        tick: Tick,
    },
    /// The tick is further ahead of the newest snapshot than
    /// [`InterpolationConfig::max_tick_jump`].
    #[error("tick {tick} is too far ahead of the newest tick {newest}")]
    TooFarAhead {
        /// The refused tick.
        tick: Tick,
        /// The newest buffered tick.
        newest: Tick,
    },
    /// The buffer is full and the tick is older than everything in it.
    #[error("buffer full and tick {tick} is older than the oldest buffered tick {oldest}")]
    Full {
        /// The refused tick.
        tick: Tick,
        /// The oldest buffered tick.
        oldest: Tick,
    },
}

/// How a [`Sampled`] value was produced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SampleKind {
    /// Blended between the snapshots of ticks `from` and `to` at `t` in `[0, 1]`
    /// (`from == to` when playback sits exactly on the newest snapshot; on an older one,
    /// `t` is 0 and `to` is the next).
    Interpolated {
        /// The earlier snapshot.
        from: Tick,
        /// The later snapshot.
        to: Tick,
        /// Position between them.
        t: f32,
    },
    /// Playback ran past the newest snapshot, `from`, by `by` (at most
    /// [`InterpolationConfig::max_extrapolation`]): the value is
    /// [`Interpolate::extrapolate`]d. An underrun.
    Extrapolated {
        /// The newest snapshot.
        from: Tick,
        /// How far past it.
        by: Duration,
    },
    /// Playback ran past the newest snapshot, `from`, by `by`, beyond the extrapolation
    /// limit: the value is held where extrapolation stopped. An underrun.
    Held {
        /// The newest snapshot.
        from: Tick,
        /// How far past it.
        by: Duration,
    },
    /// Playback has not reached the oldest buffered snapshot, `to`, yet (start-up, or a
    /// new timeline): that snapshot is shown. An underrun.
    Early {
        /// The oldest buffered snapshot.
        to: Tick,
    },
}

impl SampleKind {
    /// True unless the value was interpolated between two snapshots.
    pub fn is_underrun(&self) -> bool {
        !matches!(self, SampleKind::Interpolated { .. })
    }
}

/// A value for the renderer, and where in server time it sits.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled<T> {
    /// The value to show.
    pub value: T,
    /// How it was produced.
    pub kind: SampleKind,
    /// The (fractional) server tick the value represents: compare against the server's
    /// state at this tick to measure the error of what is shown.
    pub render_tick: f64,
}

/// A snapshot interpolation buffer (source 003): holds snapshots by server tick and plays
/// them back a little in the past, so the next snapshot has usually arrived by the time
/// it is needed.
///
/// # Clock
/// The buffer estimates the server's tick clock from arrivals alone. A snapshot of tick
/// `k` arriving at local time `a` has offset `a - k * period`; the window's smallest
/// offset is the fastest path through the network and its median the typical one. Order
/// statistics over hundreds of arrivals barely move with jitter, so neither does playback.
/// The [`DelayPolicy`] turns them into a playback *lag*: the server tick shown at local
/// time `now` is `(now - lag) / period`. When the lag changes, playback speeds up or slows
/// down by at most [`InterpolationConfig::max_time_scale`] to follow it.
///
/// # Robustness
/// Stale, duplicate, far-away and overflowing snapshots are refused with a [`PushError`]
/// and counted; nothing panics on any input, and memory is bounded by
/// [`InterpolationConfig::capacity`] and [`InterpolationConfig::history`]. Settings out
/// of range act as their bounds (an infinite delay is [`MAX_LAG_SECS`](super::MAX_LAG_SECS)),
/// so delays and render ticks are always finite. Copies of one stray snapshot never
/// reset the buffer onto another timeline; only newer and newer ones do.
///
/// # Example
/// ```
/// use lagless_core::interpolation::{InterpolationBuffer, InterpolationConfig, Pose};
/// use lagless_core::Tick;
/// use std::time::Duration;
///
/// let mut buffer = InterpolationBuffer::<Pose>::new(InterpolationConfig {
///     tick_hz: 60,
///     ..InterpolationConfig::default()
/// });
/// let ms = Duration::from_millis;
/// for k in 0..60u32 {
///     // A body moving at 1 m/s, one snapshot per tick, 50 ms on the way.
///     let x = k as f32 / 60.0;
///     let pose = Pose::new([x, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]);
///     buffer.push(Tick(k), ms(50) + ms(u64::from(k)) * 1000 / 60, pose).unwrap();
/// }
/// let shown = buffer.sample_at(ms(1040)).unwrap();
/// assert!(!shown.kind.is_underrun());
/// // Shown a little in the past, at the state of the tick it reports.
/// assert!(shown.render_tick < 59.0);
/// assert!((shown.value.position[0] - shown.render_tick as f32 / 60.0).abs() < 1e-4);
/// ```
#[derive(Debug, Clone)]
pub struct InterpolationBuffer<T: Interpolate> {
    config: InterpolationConfig,
    period: f64,
    max_jump_ticks: i64,
    entries: VecDeque<(Tick, T)>,
    newest: Option<Tick>,
    floor: Option<Tick>,
    delay: Delay,
    pos: Option<f64>,
    last_now: Option<Duration>,
    foreign: Option<(Tick, u32)>,
    /// Playback is behind its target because it stretched, and catches up at full speed.
    catching_up: bool,
    /// The link was seen to get worse and playback has not yet slowed down to the delay
    /// it needs: it may slow down by `shift_slowdown`.
    rising: bool,
    /// The last frame was stretched (a stretched frame after one that was not begins a
    /// stretch).
    stretching: bool,
    frame_secs: Option<f64>,
    stats: InterpolationStats,
}

impl<T: Interpolate> InterpolationBuffer<T> {
    /// An empty buffer.
    ///
    /// # Panics
    /// If `config.tick_hz` is outside 1..=1000 (as [`TickRate::new`]).
    pub fn new(config: InterpolationConfig) -> Self {
        let rate = TickRate::new(config.tick_hz);
        let config = InterpolationConfig {
            capacity: config.capacity.max(2),
            // A shorter window would never hold enough pairs to leave the warm-up.
            history: config.history.max(WARMUP_PAIRS),
            ..config
        };
        // Less than a second would refuse the next snapshot of a slow sender as coming
        // from another timeline, and the one after it too: the buffer would never move.
        let max_jump_ticks = rate
            .ticks_in(config.max_tick_jump)
            .ceil()
            .max(f64::from(config.tick_hz)) as i64;
        Self {
            period: rate.period_secs(),
            max_jump_ticks,
            entries: VecDeque::with_capacity(config.capacity.min(PREALLOCATE)),
            newest: None,
            floor: None,
            delay: Delay::new(&config, rate.period_secs()),
            pos: None,
            last_now: None,
            foreign: None,
            catching_up: false,
            rising: false,
            stretching: false,
            frame_secs: None,
            stats: InterpolationStats::default(),
            config,
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &InterpolationConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &InterpolationStats {
        &self.stats
    }

    /// Zeroes the counters (say, after a warm-up), keeping everything else.
    pub fn reset_stats(&mut self) {
        self.stats = InterpolationStats::default();
    }

    /// Snapshots buffered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The newest snapshot tick accepted on the current timeline.
    pub fn newest_tick(&self) -> Option<Tick> {
        self.newest
    }

    /// The server tick shown by the last [`sample_at`](Self::sample_at).
    pub fn render_tick(&self) -> Option<f64> {
        self.pos
    }

    /// The snapshot send interval measured from arriving ticks.
    pub fn send_interval(&self) -> Option<u32> {
        self.delay.clock().interval()
    }

    /// The delay the policy currently targets, beyond the earliest arrival of snapshots
    /// (so it excludes the network's minimum one-way delay).
    pub fn target_delay(&self) -> Option<Duration> {
        let lag = self.delay.lag()?;
        let min = self.delay.clock().min_offset()?;
        Some(secs_to_duration(lag - min))
    }

    /// How far the shown state trailed the newest snapshot at the last
    /// [`sample_at`](Self::sample_at) (zero while extrapolating).
    pub fn delay_behind_newest(&self) -> Option<Duration> {
        let behind = self.newest?.0 as f64 - self.pos?;
        Some(secs_to_duration(behind * self.period))
    }

    /// Empties the buffer and forgets the clock (counters are kept), for a new server
    /// timeline. Happens by itself when snapshots from another timeline keep arriving.
    pub fn reset(&mut self) {
        self.entries.clear();
        self.newest = None;
        self.floor = None;
        self.delay.clear();
        self.pos = None;
        self.last_now = None;
        self.foreign = None;
        self.catching_up = false;
        self.rising = false;
        self.stretching = false;
    }

    /// Adds the snapshot of server tick `tick`, received at local time `arrival`.
    pub fn push(&mut self, tick: Tick, arrival: Duration, sample: T) -> Result<(), PushError> {
        if let Some(newest) = self.newest {
            let ahead = tick.diff(newest);
            if ahead.abs() > self.max_jump_ticks {
                if !self.foreign_timeline(tick) {
                    return Err(if ahead > 0 {
                        self.stats.too_far_ahead += 1;
                        PushError::TooFarAhead { tick, newest }
                    } else {
                        self.stats.stale += 1;
                        PushError::Stale {
                            tick,
                            floor: newest,
                        }
                    });
                }
                self.reset();
                self.stats.resyncs += 1;
            }
        }
        let slot = self.entries.partition_point(|(t, _)| *t < tick);
        if self.entries.get(slot).is_some_and(|(t, _)| *t == tick) {
            self.stats.duplicates += 1;
            return Err(PushError::Duplicate { tick });
        }
        if let Some(floor) = self.floor.filter(|f| tick <= *f) {
            self.stats.stale += 1;
            return Err(PushError::Stale { tick, floor });
        }
        let mut slot = slot;
        if self.entries.len() >= self.config.capacity {
            if slot == 0 {
                self.stats.full += 1;
                let oldest = self.entries.front().map_or(tick, |(t, _)| *t);
                return Err(PushError::Full { tick, oldest });
            }
            self.entries.pop_front();
            self.stats.evicted += 1;
            slot -= 1;
        }
        self.entries.insert(slot, (tick, sample));
        self.stats.accepted += 1;
        self.foreign = None;
        self.learn(tick, arrival);
        Ok(())
    }

    /// Counts a snapshot from another timeline; true once enough consistent ones arrived.
    /// Only a newer one counts: copies of one stray packet, or a late one of the same
    /// timeline, neither count nor start the count over.
    fn foreign_timeline(&mut self, tick: Tick) -> bool {
        self.foreign = match self.foreign {
            Some((last, n)) if tick.diff(last).abs() <= self.max_jump_ticks => {
                if tick > last {
                    Some((tick, n + 1))
                } else {
                    Some((last, n))
                }
            }
            _ => Some((tick, 1)),
        };
        self.foreign.is_some_and(|(_, n)| n >= RESYNC_AFTER)
    }

    /// Updates the clock statistics with an accepted arrival.
    fn learn(&mut self, tick: Tick, arrival: Duration) {
        let p = self.period;
        let at = arrival.as_secs_f64();
        let pair = match self.newest {
            Some(newest) if tick > newest => {
                let gap = u32::try_from(tick.diff(newest)).unwrap_or(u32::MAX);
                self.newest = Some(tick);
                let need = Need {
                    need: at - f64::from(newest.0) * p,
                    span: f64::from(gap) * p,
                };
                Some((gap, need))
            }
            // A late snapshot filling a hole: its pair was already counted, spanning it.
            Some(_) => None,
            None => {
                self.newest = Some(tick);
                None
            }
        };
        let arrival = Arrival {
            tick: tick.0,
            offset: at - f64::from(tick.0) * p,
            pair,
        };
        // A miss costs at least half a frame: a renderer locked to the tick rate samples
        // the same phase every time.
        let min_miss = 0.5 * self.frame_secs.unwrap_or(0.0);
        match self.delay.arrive(&arrival, min_miss) {
            Some(Shift::Worse { .. }) => {
                self.stats.shifts_worse += 1;
                self.rising = true;
            }
            Some(Shift::Better { .. }) => {
                self.stats.shifts_better += 1;
                self.rising = false;
            }
            None => {}
        }
    }

    /// The value to show at local time `now`, or `None` before the first snapshot.
    ///
    /// Call it once per rendered frame with a non-decreasing `now`: it advances playback
    /// (an earlier `now` than before is treated as no time passing).
    pub fn sample_at(&mut self, now: Duration) -> Option<Sampled<T>> {
        if self.entries.is_empty() {
            return None;
        }
        let pos = self.advance(now);
        self.delay.frame(now.as_secs_f64());
        let i = self.entries.partition_point(|(t, _)| f64::from(t.0) <= pos);
        let (value, kind) = if i == 0 {
            let (to, v) = self.entries.front()?;
            self.stats.early += 1;
            // `floor` is set once playback has passed a snapshot: until then it is filling.
            self.stats.filling += u64::from(self.floor.is_none());
            (v.clone(), SampleKind::Early { to: *to })
        } else {
            // Everything before the pair's start is played out.
            self.entries.drain(..i - 1);
            let (from, a) = self.entries.front()?;
            let from = *from;
            self.floor = Some(self.floor.map_or(from, |f| f.max(from)));
            match self.entries.get(1) {
                Some((to, b)) => {
                    let span = to.diff(from) as f64;
                    let t = ((pos - f64::from(from.0)) / span).clamp(0.0, 1.0) as f32;
                    let value = match self.config.curve {
                        Curve::Linear => T::lerp(a, b, t),
                        Curve::Hermite => T::hermite(a, b, t, (span * self.period) as f32),
                    };
                    self.stats.interpolated += 1;
                    let to = *to;
                    (value, SampleKind::Interpolated { from, to, t })
                }
                None => {
                    let past = (pos - f64::from(from.0)) * self.period;
                    let limit = self.config.max_extrapolation.as_secs_f64();
                    if past <= 0.0 {
                        self.stats.interpolated += 1;
                        let kind = SampleKind::Interpolated {
                            from,
                            to: from,
                            t: 0.0,
                        };
                        (a.clone(), kind)
                    } else if past <= limit {
                        self.stats.extrapolated += 1;
                        let by = secs_to_duration(past);
                        (
                            T::extrapolate(a, past as f32),
                            SampleKind::Extrapolated { from, by },
                        )
                    } else {
                        self.stats.held += 1;
                        let by = secs_to_duration(past);
                        (
                            T::extrapolate(a, limit as f32),
                            SampleKind::Held { from, by },
                        )
                    }
                }
            }
        };
        self.stats.frames += 1;
        if let Some(newest) = self.newest {
            // A frame past the newest snapshot is an extrapolation (an underrun), not a
            // negative delay: a stall would otherwise drive the mean below zero.
            self.stats.delay_sum_secs += ((f64::from(newest.0) - pos) * self.period).max(0.0);
        }
        Some(Sampled {
            value,
            kind,
            render_tick: pos,
        })
    }

    /// Moves the playback position to `now` and returns it (fractional ticks).
    fn advance(&mut self, now: Duration) -> f64 {
        let p = self.period;
        let now_secs = now.as_secs_f64();
        let Some(lag) = self.delay.lag() else {
            // Unreachable with entries present; show the oldest snapshot.
            return self.entries.front().map_or(0.0, |(t, _)| f64::from(t.0));
        };
        let target = (now_secs - lag) / p;
        let (Some(pos), Some(last)) = (self.pos, self.last_now) else {
            if !target.is_finite() {
                return self.entries.front().map_or(0.0, |(t, _)| f64::from(t.0));
            }
            self.pos = Some(target);
            self.last_now = Some(now);
            return target;
        };
        let dt = now.saturating_sub(last).as_secs_f64();
        self.last_now = Some(last.max(now));
        if dt > 0.0 && dt < 0.25 {
            self.frame_secs = Some(self.frame_secs.map_or(dt, |f| f + (dt - f) * 0.05));
        }
        let natural = pos + dt / p;
        let error = (target - natural) * p;
        let snap = self.config.snap_threshold.as_secs_f64();
        // While still learning the clock, errors are large and short-lived: act on them
        // sooner than on a drift of a known clock.
        let snap = if self.delay.warming_up() {
            snap.min(0.05)
        } else {
            snap
        };
        let stretch = if error.abs() < snap {
            self.starving(now_secs, pos)
        } else {
            None
        };
        self.stats.stretches += u64::from(stretch.is_some() && !self.stretching);
        self.stretching = stretch.is_some();
        let next = if let Some(rate) = stretch {
            // Stretching takes precedence over following the target, up to the point
            // where it would have to jump back to it.
            self.stats.stretched += 1;
            self.catching_up = true;
            pos + rate * dt / p
        } else if error > snap {
            // Far behind: jump.
            target
        } else if error < -snap {
            // Far ahead: wait for the target rather than replaying the past, which
            // would also step back before snapshots already played out (and dropped).
            pos.max(target)
        } else {
            let max_scale = self.config.bounded_max_time_scale();
            let slew = self.config.slew_time.as_secs_f64().max(1e-6);
            // What a stretch put behind is made up at the full time-scale bound, not
            // eased back like a clock change: the replacement has come, and every
            // moment spent behind the target is delay paid for nothing.
            self.catching_up &= error > 0.0;
            let gain = if self.catching_up {
                1.0
            } else {
                (dt / slew).min(1.0)
            };
            // After the link got worse, playback ahead of its target is running past the
            // newest snapshot or soon will: the delay is reached at once, not eased into.
            self.rising &= error < 0.0;
            let (gain, slow_down) = if self.rising {
                (1.0, self.config.bounded_shift_slowdown().max(max_scale))
            } else {
                (gain, max_scale)
            };
            let step = (error * gain).clamp(-slow_down * dt, max_scale * dt);
            natural + step / p
        };
        let next = if next.is_finite() { next } else { target };
        self.pos = Some(next);
        self.stats.played_secs += dt;
        self.stats.warp_secs += ((next - pos) * p - dt).abs();
        next
    }
}

impl<T: Interpolate> InterpolationBuffer<T> {
    /// Playback speed, as a fraction of real time, when playback should slow down now
    /// (`None` otherwise): the snapshot after the newest is overdue (later than
    /// [`InterpolationConfig::overdue_quantile`] of the window's arrivals: late, or lost)
    /// and playback is about to run past the newest. It stretches until a newer snapshot
    /// arrives, not only as far as the next one would need: a second loss in a row is
    /// what a short delay cannot ride out, and a rule this simple is one the policy can
    /// count on when it picks the delay (the policy's `Stretch` is the very rule).
    fn starving(&self, now_secs: f64, pos: f64) -> Option<f64> {
        let (newest, stretch, lag) = (self.newest?, self.delay.stretch()?, self.delay.lag()?);
        let n = f64::from(newest.0);
        // About to reach the newest: see `Stretch::slack` for why not whenever short of it.
        stretch
            .applies(now_secs - n * self.period, (n - pos) * self.period, lag)
            .then_some(stretch.rate)
    }
}

/// Seconds to a `Duration`, clamping negatives, NaN and overflow instead of panicking.
fn secs_to_duration(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(if secs > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpolation::{DelayPolicy, MAX_STRETCH};

    const MS: Duration = Duration::from_millis(1);

    /// 100 Hz ticks so one tick is 10 ms; classic policy; samples are the tick as f64.
    fn buffer(policy: DelayPolicy) -> InterpolationBuffer<f64> {
        InterpolationBuffer::new(InterpolationConfig {
            tick_hz: 100,
            policy,
            capacity: 8,
            max_tick_jump: Duration::from_secs(1),
            ..InterpolationConfig::default()
        })
    }

    /// Pushes ticks `from..to` step `step`, each arriving `latency` after its tick time.
    fn feed(b: &mut InterpolationBuffer<f64>, ticks: impl Iterator<Item = u32>, latency: Duration) {
        for k in ticks {
            let at = MS * (k * 10) + latency;
            b.push(Tick(k), at, f64::from(k)).unwrap();
        }
    }

    #[test]
    fn a_stall_never_makes_the_delay_negative() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        feed(&mut b, 0..40, MS * 30);
        // Three seconds with no snapshot: every frame past the newest is extrapolated.
        for t in 0..300u32 {
            b.sample_at(MS * (400 + t * 10));
        }
        let s = b.stats();
        assert!(s.extrapolated + s.frames - s.interpolated > 200, "{s:?}");
        assert!(s.mean_delay_secs().is_some_and(|d| d >= 0.0), "{s:?}");
    }

    #[test]
    fn empty_buffer_answers_nothing() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        assert!(b.is_empty());
        assert_eq!(b.sample_at(MS * 100), None);
        assert_eq!(b.stats().frames, 0);
        assert_eq!(b.render_tick(), None);
    }

    #[test]
    fn classic_plays_three_intervals_behind_the_median_arrival() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        feed(&mut b, (0..40).step_by(2), MS * 30);
        assert_eq!(b.send_interval(), Some(2));
        // Arrivals sit 30 ms after their ticks; three intervals are 60 ms more.
        let s = b.sample_at(MS * 390).unwrap();
        assert!((s.render_tick - 30.0).abs() < 1e-6, "{s:?}");
        assert!(
            matches!(s.kind, SampleKind::Interpolated { from: Tick(30), to: Tick(32), t } if t < 1e-6),
            "{s:?}"
        );
        assert!((s.value - 30.0).abs() < 1e-9);
        assert_eq!(b.target_delay(), Some(MS * 60));
        let s = b.sample_at(MS * 395).unwrap();
        assert!((s.value - 30.5).abs() < 1e-6, "{s:?}");
        // Played-out snapshots are dropped, the pair's start is kept.
        assert_eq!(b.len(), 5);
        assert_eq!(b.delay_behind_newest(), Some(MS * 75));
    }

    #[test]
    fn counts_since_an_earlier_copy_cover_just_the_time_between() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        feed(&mut b, (0..40).step_by(2), MS * 30);
        for t in 0..20u32 {
            b.sample_at(MS * (300 + t * 10));
        }
        let before = b.stats().clone();
        // A second stretch of playback, then stale and duplicate refusals.
        feed(&mut b, (40..80).step_by(2), MS * 30);
        for t in 20..60u32 {
            b.sample_at(MS * (300 + t * 10));
        }
        let _ = b.push(Tick(10), MS * 900, 0.0);
        let _ = b.push(Tick(78), MS * 900, 0.0);
        let after = b.stats();
        let between = after.since(&before);
        assert_eq!(between.frames, 40);
        assert_eq!(between.accepted, 20);
        assert_eq!(between.stale + between.duplicates, 2);
        assert_eq!(between.filling, 0, "the fill happened before");
        assert_eq!(between.frames + before.frames, after.frames);
        let delay = between.mean_delay_secs().expect("frames");
        assert!(
            (delay * 40.0 + before.delay_sum_secs - after.delay_sum_secs).abs() < 1e-9,
            "the delay sum splits exactly"
        );
        assert_eq!(before.since(after).frames, 0, "backwards gives zeros");
        assert_eq!(after.since(after), InterpolationStats::default());
    }

    #[test]
    fn refusals_are_typed_and_counted() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        feed(&mut b, (0..20).step_by(2), MS * 30);
        assert_eq!(
            b.push(Tick(10), MS * 500, 0.0),
            Err(PushError::Duplicate { tick: Tick(10) })
        );
        b.sample_at(MS * 220).unwrap(); // plays around tick 13
        assert_eq!(
            b.push(Tick(11), MS * 500, 0.0),
            Err(PushError::Stale {
                tick: Tick(11),
                floor: Tick(12)
            })
        );
        assert_eq!(
            b.push(Tick(500), MS * 500, 0.0),
            Err(PushError::TooFarAhead {
                tick: Tick(500),
                newest: Tick(18)
            })
        );
        let st = b.stats();
        assert_eq!((st.duplicates, st.stale, st.too_far_ahead), (1, 1, 1));
        assert_eq!(st.accepted, 10);
        // A hole between the floor and the newest is still welcome.
        assert_eq!(b.push(Tick(13), MS * 500, 13.0), Ok(()));
    }

    #[test]
    fn capacity_is_bounded() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        feed(&mut b, 0..8, MS * 30);
        assert_eq!(b.len(), 8);
        // Full: a newer tick evicts the oldest, an older one is refused.
        feed(&mut b, 8..9, MS * 30);
        assert_eq!(b.len(), 8);
        assert_eq!(b.stats().evicted, 1);
        assert_eq!(
            b.push(Tick(0), MS * 100, 0.0),
            Err(PushError::Full {
                tick: Tick(0),
                oldest: Tick(1)
            })
        );
        assert_eq!(b.stats().full, 1);
    }

    #[test]
    fn a_new_timeline_takes_over_after_a_few_consistent_snapshots() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        feed(&mut b, 100..110, MS * 30);
        // The server restarted at tick 0: two refusals, then a reset onto the new numbers.
        assert!(matches!(
            b.push(Tick(0), MS * 2000, 0.0),
            Err(PushError::Stale { .. })
        ));
        assert!(b.push(Tick(1), MS * 2010, 1.0).is_err());
        assert_eq!(b.push(Tick(2), MS * 2020, 2.0), Ok(()));
        assert_eq!(b.stats().resyncs, 1);
        assert_eq!(b.len(), 1);
        assert_eq!(b.newest_tick(), Some(Tick(2)));
        // Unrelated far-away ticks do not add up to a resync.
        assert!(b.push(Tick(5000), MS * 2030, 0.0).is_err());
        assert!(b.push(Tick(9000), MS * 2030, 0.0).is_err());
        assert!(b.push(Tick(13000), MS * 2030, 0.0).is_err());
        assert_eq!(b.stats().resyncs, 1);
    }

    #[test]
    fn extrapolation_is_bounded_then_held() {
        let mut b = buffer(DelayPolicy::Fixed { intervals: 0.0 });
        feed(&mut b, 0..10, MS * 30);
        // Playback at the median arrival: the newest (tick 9) is shown at 120 ms.
        let s = b.sample_at(MS * 120).unwrap();
        assert!(!s.kind.is_underrun(), "{s:?}");
        let s = b.sample_at(MS * 170).unwrap();
        assert_eq!(
            s.kind,
            SampleKind::Extrapolated {
                from: Tick(9),
                by: MS * 50
            }
        );
        let s = b.sample_at(MS * 300).unwrap();
        assert_eq!(
            s.kind,
            SampleKind::Held {
                from: Tick(9),
                by: MS * 180
            }
        );
        let st = b.stats();
        assert_eq!((st.interpolated, st.extrapolated, st.held), (1, 1, 1));
        assert_eq!(st.underruns(), 2);
        assert!((st.underrun_ratio() - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn playback_before_the_oldest_snapshot_shows_it_early() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        b.push(Tick(50), MS * 530, 50.0).unwrap();
        let s = b.sample_at(MS * 530).unwrap();
        assert_eq!(s.kind, SampleKind::Early { to: Tick(50) });
        assert_eq!(s.value, 50.0);
        assert_eq!(b.stats().early, 1);
        // Filling up to the delay at the start is not running dry.
        assert_eq!(b.stats().filling, 1);
        assert_eq!(b.stats().underruns(), 0);
        assert_eq!(b.stats().underrun_ratio(), 0.0);
        // Once playback has passed a snapshot, running out is an underrun again.
        for k in 51..60 {
            b.push(Tick(k), MS * (30 + 10 * k), f64::from(k)).unwrap();
        }
        let s = b.sample_at(MS * 600).unwrap();
        assert!(matches!(s.kind, SampleKind::Interpolated { .. }), "{s:?}");
        let s = b.sample_at(MS * 700).unwrap();
        assert!(s.kind.is_underrun(), "{s:?}");
        let st = b.stats();
        assert_eq!((st.filling, st.underruns(), st.frames), (1, 1, 3));
        assert!((st.underrun_ratio() - 0.5).abs() < 1e-12);
        // A reset starts a new fill.
        b.reset();
        b.push(Tick(900), MS * 1300, 900.0).unwrap();
        let s = b.sample_at(MS * 1300).unwrap();
        assert!(matches!(s.kind, SampleKind::Early { .. }), "{s:?}");
        assert_eq!((b.stats().filling, b.stats().underruns()), (2, 1));
    }

    /// While the clock is still being learned the target lag moves a lot. Moving forward
    /// it jumps; moving back it waits, rather than stepping before snapshots it has
    /// already played out (showing them "early", an underrun with data in hand).
    #[test]
    fn warming_up_never_steps_playback_back() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        let mut now = Duration::ZERO;
        let mut last = f64::NEG_INFINITY;
        // Eight ticks: the test buffer holds eight, so none is evicted unplayed.
        for k in 0..8u32 {
            // The first arrivals are fast, the rest 80 ms slower: the median offset, and
            // with it the target, moves back by 80 ms while warming up.
            let latency = if k < 4 { MS * 10 } else { MS * 90 };
            b.push(Tick(k), MS * (k * 10) + latency, f64::from(k))
                .unwrap();
            for _ in 0..5 {
                now += MS * 2;
                let shown = b.sample_at(now).unwrap();
                assert!(shown.render_tick >= last, "{k}: {shown:?} after {last}");
                last = shown.render_tick;
            }
        }
        assert_eq!(b.stats().early, b.stats().filling, "{:?}", b.stats());
    }

    #[test]
    fn time_running_backwards_does_not_move_playback() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        feed(&mut b, 0..40, MS * 30);
        let a = b.sample_at(MS * 400).unwrap().render_tick;
        let c = b.sample_at(MS * 350).unwrap().render_tick;
        assert_eq!(a, c);
    }

    #[test]
    fn delay_changes_are_followed_by_bounded_time_scaling() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        feed(&mut b, 0..40, MS * 30);
        let mut last = b.sample_at(MS * 400).unwrap().render_tick;
        // The link gets 40 ms slower: the median moves, playback slows by at most 10%.
        let mut now = MS * 400;
        let mut slowed = 0;
        b.reset_stats();
        let mut warp = 0.0;
        for k in 40..100u32 {
            b.push(Tick(k), MS * (k * 10) + MS * 70, f64::from(k))
                .unwrap();
            now += MS * 10;
            let pos = b.sample_at(now).unwrap().render_tick;
            let step = pos - last;
            assert!((0.9 - 1e-9..=1.1 + 1e-9).contains(&step), "{k}: {step}");
            slowed += usize::from(step < 0.95);
            // A tick is 10 ms, as is a frame: the frame's share of speed error.
            warp += (step - 1.0).abs() * 0.01;
            last = pos;
        }
        assert!(slowed > 10, "playback followed the longer delay: {slowed}");
        // The speed error counts exactly what the slewing cost, over the time played.
        let stats = b.stats();
        assert!((stats.played_secs - 0.6).abs() < 1e-9, "{stats:?}");
        assert!((stats.warp_secs - warp).abs() < 1e-9, "{stats:?} vs {warp}");
        // Never more slow motion than the 40 ms the longer delay asked for.
        assert!(stats.warp_secs < 0.04, "{stats:?}");
    }

    #[test]
    fn hostile_settings_do_not_panic() {
        let mut b = InterpolationBuffer::<f64>::new(InterpolationConfig {
            tick_hz: 1000,
            policy: DelayPolicy::Fixed {
                intervals: f32::NAN,
            },
            capacity: usize::MAX,
            history: usize::MAX,
            max_extrapolation: Duration::MAX,
            max_tick_jump: Duration::MAX,
            max_time_scale: f32::NAN,
            slew_time: Duration::ZERO,
            snap_threshold: Duration::MAX,
            ..InterpolationConfig::default()
        });
        for k in 0..50u32 {
            b.push(Tick(k), MS * k, f64::from(k)).unwrap();
            b.sample_at(MS * (k * 3)).unwrap();
        }
        b.push(Tick(u32::MAX), Duration::MAX, 0.0).unwrap();
        assert!(b.sample_at(Duration::MAX).is_some());
        let mut a = InterpolationBuffer::<f64>::new(InterpolationConfig {
            policy: DelayPolicy::Adaptive {
                target_underrun: f32::NAN,
                max_delay: Duration::MAX,
            },
            max_time_scale: f32::INFINITY,
            ..InterpolationConfig::default()
        });
        for k in 0..50u32 {
            a.push(Tick(k * 2), MS * (k * 40), f64::from(k)).unwrap();
            assert!(a.sample_at(MS * (k * 40)).unwrap().render_tick.is_finite());
        }
    }

    /// Snapshots every 6 ticks at 60 Hz, 50 ms ± 30 ms on the way, one in 20 lost (and
    /// a few lost twice in a row), sampled every frame: what a strict target stands on.
    fn lossy_ten_per_second(config: InterpolationConfig) -> InterpolationBuffer<f64> {
        let mut b = InterpolationBuffer::<f64>::new(InterpolationConfig {
            tick_hz: 60,
            ..config
        });
        for k in 0..600u32 {
            let lost = k % 20 == 7 || (k % 100 == 8);
            let tick = k * 6;
            if !lost {
                let jitter =
                    f64::from(crate::interpolation::adaptive::streams::hash(k) % 61) - 30.0;
                let at = f64::from(tick) / 60.0 + 0.05 + jitter / 1000.0;
                let _ = b.push(Tick(tick), Duration::from_secs_f64(at), f64::from(tick));
            }
            for f in 0..6u32 {
                b.sample_at(Duration::from_secs_f64(f64::from(tick + f) / 60.0));
            }
        }
        b
    }

    #[test]
    fn limitless_settings_give_finite_bounded_delays() {
        // An infinite fixed delay is an hour, not minus infinity on screen.
        let mut b = InterpolationBuffer::<f64>::new(InterpolationConfig {
            tick_hz: 60,
            policy: DelayPolicy::Fixed {
                intervals: f32::INFINITY,
            },
            ..InterpolationConfig::default()
        });
        for k in 0..10u32 {
            b.push(Tick(k), MS * (k * 17 + 50), 0.0).unwrap();
        }
        for t in [300, 320, 340] {
            assert!(b.sample_at(MS * t).unwrap().render_tick.is_finite());
        }
        let delay = b.target_delay().unwrap().as_secs_f64();
        let most = crate::interpolation::MAX_LAG_SECS + 1.0;
        assert!(delay > 3000.0 && delay <= most, "{delay}");
        assert!(b.stats().warp_secs.is_finite());
        // An unbounded adaptive delay is searched as precisely as a bounded one: the
        // answer was once off by 194 days.
        let adaptive = |max_delay| {
            let config = InterpolationConfig {
                policy: DelayPolicy::Adaptive {
                    target_underrun: 0.0005,
                    max_delay,
                },
                ..InterpolationConfig::default()
            };
            let b = lossy_ten_per_second(config);
            b.target_delay().unwrap().as_secs_f64()
        };
        let (unbounded, hour) = (adaptive(Duration::MAX), adaptive(Duration::from_secs(3600)));
        assert!(
            unbounded < 1.0 && (unbounded - hour).abs() < 1e-4,
            "{unbounded} vs {hour}"
        );
        // A target that is not a number is the default 1%, not "always the longest".
        let nan = adaptive_target(f32::NAN);
        assert!((nan - adaptive_target(0.01)).abs() < 1e-9, "{nan}");
    }

    fn adaptive_target(target_underrun: f32) -> f64 {
        let config = InterpolationConfig {
            policy: DelayPolicy::adaptive_with_target(target_underrun),
            ..InterpolationConfig::default()
        };
        lossy_ten_per_second(config)
            .target_delay()
            .unwrap()
            .as_secs_f64()
    }

    #[test]
    fn settings_beyond_their_bounds_act_as_the_bounds() {
        // An infinite stretch is the largest stretch, not none; a history too short to
        // warm up on is the shortest that does.
        let run = |max_stretch: f32, history: usize| {
            let b = lossy_ten_per_second(InterpolationConfig {
                max_stretch,
                history,
                ..InterpolationConfig::default()
            });
            (b.target_delay(), b.stats().stretched, b.render_tick())
        };
        assert_eq!(run(f32::INFINITY, 512), run(MAX_STRETCH, 512));
        assert_ne!(run(f32::INFINITY, 512), run(0.0, 512));
        assert_eq!(run(0.0, 4), run(0.0, WARMUP_PAIRS));
    }

    #[test]
    fn copies_of_one_stray_snapshot_do_not_reset_the_buffer() {
        let mut b = buffer(DelayPolicy::CLASSIC);
        feed(&mut b, 0..50, MS * 30);
        for _ in 0..5 {
            assert!(matches!(
                b.push(Tick(1_000_000), MS * 600, 0.0),
                Err(PushError::TooFarAhead { .. })
            ));
        }
        assert_eq!((b.stats().resyncs, b.len()), (0, 8));
        // A late one of a real new timeline neither counts nor starts the count over.
        assert!(b.push(Tick(5000), MS * 610, 0.0).is_err());
        assert!(b.push(Tick(5002), MS * 620, 0.0).is_err());
        assert!(b.push(Tick(5001), MS * 630, 0.0).is_err());
        assert_eq!(b.push(Tick(5003), MS * 640, 0.0), Ok(()));
        assert_eq!(b.stats().resyncs, 1);
    }

    #[test]
    fn a_jump_limit_below_the_send_interval_still_follows_the_server() {
        let mut b = InterpolationBuffer::<f64>::new(InterpolationConfig {
            tick_hz: 60,
            max_tick_jump: Duration::ZERO,
            ..InterpolationConfig::default()
        });
        for k in (0..600u32).step_by(6) {
            b.push(Tick(k), MS * (k * 1000 / 60 + 50), f64::from(k))
                .unwrap();
        }
        assert_eq!(b.newest_tick(), Some(Tick(594)));
    }

    #[test]
    fn durations_never_panic() {
        assert_eq!(secs_to_duration(-1.0), Duration::ZERO);
        assert_eq!(secs_to_duration(f64::NAN), Duration::ZERO);
        assert_eq!(secs_to_duration(f64::INFINITY), Duration::MAX);
        assert_eq!(secs_to_duration(0.25), MS * 250);
    }
}
