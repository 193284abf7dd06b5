//! The [`InterpolationBuffer`]: snapshots in, smooth past states out.

use super::config::{OUTAGE_LEARN_AFTER, PREALLOCATE};
use super::policy::{Arrival, Delay, Need, WARMUP_PAIRS};
use super::{Curve, Interpolate, InterpolationConfig, InterpolationStats, SampleKind, Sampled};
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

/// A snapshot interpolation buffer (Fiedler's "Snapshot Interpolation"): holds snapshots by server tick and plays
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
    /// The delay policy's state: arrivals in, the playback lag out.
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
    /// The newest accepted arrival's local time, seconds: a long silence after it is a
    /// hole.
    last_arrival: Option<f64>,
    /// Since a hole in the link: when it ended and the lag before it (see
    /// [`InterpolationConfig::outage`]).
    hole: Option<Hole>,
    stats: InterpolationStats,
}

/// The buffer's memory of a hole in the link it has not yet seen the end of.
#[derive(Debug, Clone, Copy)]
struct Hole {
    /// Local time of the arrival that ended the silence, seconds.
    ended: f64,
    /// The playback lag before the hole.
    lag: f64,
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
            last_arrival: None,
            hole: None,
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

    /// What a tick of delay and an underrun tick cost the player, per tick of play, in one
    /// unit: [`DelayPolicy::Felt`](super::DelayPolicy::Felt) chooses its underrun target
    /// by them; other policies ignore them. Non-finite or negative costs are ignored.
    pub fn set_costs(&mut self, per_delay_tick: f64, per_underrun_tick: f64) {
        self.delay.set_costs(per_delay_tick, per_underrun_tick);
    }

    /// The underrun share the adaptive policies aim at now (the felt one's choice);
    /// `None` for a fixed delay.
    pub fn target_underrun(&self) -> Option<f64> {
        self.delay.target_underrun()
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
        self.last_arrival = None;
        self.hole = None;
    }

    /// Adds the snapshot of server tick `tick`, received at local time `arrival`.
    pub fn push(&mut self, tick: Tick, arrival: Duration, sample: T) -> Result<(), PushError> {
        if let Some(newest) = self.newest {
            let ahead = tick.diff(newest);
            if ahead.abs() > self.max_jump_ticks && !self.moved_on(tick, ahead, arrival) {
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

    /// True when a snapshot of `tick`, `ahead` ticks past the newest, arriving at
    /// `arrival`, is the same timeline moved on through a silence of the link (an outage
    /// longer than [`InterpolationConfig::max_tick_jump`]). Taking it as a new timeline
    /// would throw away the delay the buffer had learned and play the next seconds at a
    /// warm-up's safe delay, then slew back from it at the time-scale bound: after an 8 s
    /// outage on the lab's `mobile`, 3-8 s shown up to 380 ms further in the past.
    ///
    /// Either test tells: the snapshot was not sent later than the clock the buffer
    /// learned says it could have been (its offset no earlier than the fastest arrival,
    /// give or take the outage threshold: a tick from the future is another timeline),
    /// or the ticks it skipped took about as long as the silence before it. The clock is
    /// the test that holds when a link that queued through the outage delivers its stale
    /// snapshots first: they end the silence, and the fresh snapshots behind them skip
    /// seconds of ticks milliseconds later, however long they queued. A server that
    /// restarted numbers its ticks from far behind, which is never ahead.
    fn moved_on(&self, tick: Tick, ahead: i64, arrival: Duration) -> bool {
        if ahead <= 0 {
            return false;
        }
        let at = arrival.as_secs_f64();
        let slack = self.config.outage.as_secs_f64();
        let offset = at - f64::from(tick.0) * self.period;
        let on_clock = self
            .delay
            .clock()
            .min_offset()
            .is_some_and(|min| offset >= min - slack);
        let after_silence = self.last_arrival.is_some_and(|last| {
            let silence = at - last;
            let skipped = ahead as f64 * self.period;
            let jump = self.max_jump_ticks as f64 * self.period;
            silence >= slack && skipped <= silence + jump
        });
        on_clock || after_silence
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

    /// Tells the delay policy about an accepted arrival, and counts a change of link it
    /// saw.
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
        if self.in_hole(at, arrival.offset) {
            return;
        }
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

    /// True when an arrival at `at` (seconds) with `offset` ends a hole in the link or is
    /// queued behind one: it is played, but the delay policy does not learn it (see
    /// [`InterpolationConfig::outage`]).
    fn in_hole(&mut self, at: f64, offset: f64) -> bool {
        let silence = self.last_arrival.map(|last| at - last);
        self.last_arrival = Some(self.last_arrival.map_or(at, |last| last.max(at)));
        let interval = f64::from(self.send_interval().unwrap_or(1)) * self.period;
        let outage = self.config.outage.as_secs_f64().max(4.0 * interval);
        if let Some(lag) = self.delay.lag().filter(|_| !self.delay.warming_up()) {
            if silence.is_some_and(|s| s >= outage) {
                self.stats.outages += 1;
                // The lag before the first hole of a run of them is the one to return to.
                let lag = self.hole.map_or(lag, |h| h.lag);
                self.hole = Some(Hole { ended: at, lag });
                return true;
            }
        }
        let Some(hole) = self.hole else {
            return false;
        };
        if offset <= hole.lag || at - hole.ended >= OUTAGE_LEARN_AFTER.as_secs_f64() {
            // On time for the old delay (the queue has drained), or late for too long to
            // be the outage's queue: learn again from here.
            self.hole = None;
            return false;
        }
        self.stats.outage_arrivals += 1;
        true
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
mod tests;
