//! The server's bounded history of hitboxes and the rewound shot test.

use super::{HitShape, LagCompError, Ray, Shape};
use lagless_core::interpolation::{Interpolate, Pose};
use lagless_core::{Tick, TickRate};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Settings of a [`LagCompensator`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LagCompConfig {
    /// The simulation's tick rate (the shooter article's 30 ticks/s by default).
    pub tick_rate: TickRate,
    /// How far back a client may claim to see: the trusted window (default 250 ms). A
    /// claim older than this is moved to the window's edge and counted, which bounds
    /// what a faked ping buys.
    pub window: Duration,
    /// The largest allowance a claim may be given on top of the window
    /// ([`LagCompensator::rewind_with_allowance`]): the latency the server measured for
    /// the client, capped here (default 1 s, Source's `sv_maxunlag`) so the history
    /// stays bounded and nothing a client does can stretch the rewind further.
    pub max_allowance: Duration,
    /// Most entities with a history; [`LagCompensator::record`] refuses more
    /// (default 4096).
    pub max_entities: usize,
}

impl Default for LagCompConfig {
    fn default() -> Self {
        Self {
            tick_rate: TickRate::new(30),
            window: Duration::from_millis(250),
            max_allowance: Duration::from_secs(1),
            max_entities: 4096,
        }
    }
}

impl LagCompConfig {
    /// The window in ticks (fractional: 250 ms at 30 ticks/s is 7.5).
    pub fn window_ticks(&self) -> f64 {
        self.tick_rate.ticks_in(self.window)
    }

    /// The largest allowance in ticks (fractional: 1 s at 30 ticks/s is 30).
    pub fn max_allowance_ticks(&self) -> f64 {
        self.tick_rate.ticks_in(self.max_allowance)
    }

    /// Ticks of history kept per entity: the longest rewind (largest allowance plus the
    /// window) rounded up, plus one on each side so a view at the edge always has
    /// samples on both sides.
    pub fn history_ticks(&self) -> u32 {
        let span = self.max_allowance_ticks() + self.window_ticks();
        (span.ceil() as u32).saturating_add(2)
    }
}

/// A shot to test in the past. The fields are raw (as decoded from a client's input);
/// [`LagCompensator::rewind_query`] validates them, and refuses and counts bad ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shot {
    /// The world the client was showing, in fractional ticks (its interpolation
    /// position, as [`ViewClaim::view`](super::ViewClaim::view) gives it).
    pub claimed_view: f64,
    /// Where the shot starts (the shooter's muzzle, in the present).
    pub origin: [f32; 3],
    /// Where it goes (any non-zero length).
    pub direction: [f32; 3],
    /// The weapon's range.
    pub max_distance: f32,
    /// The shooter's own entity, never hit by its own shot. The server sets it (and
    /// the origin) from the connection's own player, never from the input: a client
    /// acts only through its own player.
    pub shooter: Option<u32>,
}

/// How a claimed view was moved into the trusted window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clamp {
    /// Inside the window: used as claimed.
    None,
    /// Older than the window: moved to its edge (the faked-ping attack, or a client
    /// too far behind).
    Old,
    /// Newer than the server's present: moved to the present.
    Future,
}

/// Where a rewind went: the view used and how far back it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rewind {
    /// The view the client claimed (finite).
    pub claimed_view: f64,
    /// The view used, in fractional ticks: the claim moved into
    /// `[now - allowance - window, now]`.
    pub used_view: f64,
    /// The allowance used, ms: the one given, capped at
    /// [`LagCompConfig::max_allowance`] (0 for [`LagCompensator::rewind`]).
    pub allowance_ms: f64,
    /// Whether and which way the claim was moved.
    pub clamp: Clamp,
    /// `now - used_view`, in ticks.
    pub rewind_ticks: f64,
    /// The same in milliseconds: the value for `lagcomp.rewind_ms_p99`.
    pub rewind_ms: f64,
    /// The rewind beyond the allowance, ms (0 within it): the part the server's own
    /// measurements do not explain, never above the window. For a client faking its
    /// ping this is all the lie buys; `lagcomp.excess_ms_p99`.
    pub excess_ms: f64,
}

impl Rewind {
    /// Whether the claim was moved into the window.
    pub fn clamped(&self) -> bool {
        self.clamp != Clamp::None
    }
}

/// What a rewound shot met first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// The entity hit.
    pub entity: u32,
    /// Where, in the rewound world.
    pub point: [f32; 3],
    /// How far along the shot.
    pub distance: f32,
}

/// The result of [`LagCompensator::rewind_query`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RewindResult {
    /// The nearest entity hit, if any (ties go to the lower id).
    pub hit: Option<Hit>,
    /// The rewind: the view used, whether it was clamped, how far back.
    pub rewind: Rewind,
}

/// Counters of a [`LagCompensator`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LagCompStats {
    /// Rewinds done (each query is one).
    pub rewinds: u64,
    /// Queries that hit something.
    pub hits: u64,
    /// Claims older than the window (beyond the allowance), moved to its edge.
    pub clamped_old: u64,
    /// Claims in the future, moved to the present.
    pub clamped_future: u64,
    /// Shots refused: NaN or infinite values, a zero direction, a bad range.
    pub refused: u64,
    /// The longest rewind done, in milliseconds (never above the largest allowance plus
    /// the window).
    pub rewind_ms_max: f64,
    /// Allowances given above [`LagCompConfig::max_allowance`] (or NaN, infinite),
    /// capped.
    pub allowance_capped: u64,
    /// The longest rewind beyond the allowance, ms (never above the window).
    pub excess_ms_max: f64,
}

impl LagCompStats {
    /// Claims moved into the window either way: `lagcomp.clamped`.
    pub fn clamped(&self) -> u64 {
        self.clamped_old + self.clamped_future
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample<S> {
    tick: Tick,
    pose: Pose,
    shape: S,
}

/// The server's lag compensation (Valve's "Latency Compensating Methods in
/// Client/Server In-game Protocol Design and Optimization"; the Pixonic shooter
/// article's rewind; Overwatch's "Overwatch Gameplay Architecture and Netcode").
///
/// After each tick the game [`record`](Self::record)s every hittable entity's pose and
/// shape; when a shot comes in, [`rewind_query`](Self::rewind_query) tests it against
/// the entities as the shooter saw them. The history is poses and shapes, not a
/// physics engine's internals, so it works with any physics; a game that wants its
/// engine's queries instead reads the rewound poses with [`pose_at`](Self::pose_at)
/// after [`rewind`](Self::rewind).
///
/// Memory is bounded: at most [`LagCompConfig::max_entities`] histories of
/// [`LagCompConfig::history_ticks`] + 1 samples each; an entity not recorded for longer
/// than the history is forgotten.
#[derive(Debug, Clone)]
pub struct LagCompensator<S: HitShape = Shape> {
    config: LagCompConfig,
    entities: BTreeMap<u32, VecDeque<Sample<S>>>,
    newest: Option<Tick>,
    stats: LagCompStats,
}

impl<S: HitShape> LagCompensator<S> {
    /// An empty history.
    pub fn new(config: LagCompConfig) -> Self {
        Self {
            config,
            entities: BTreeMap::new(),
            newest: None,
            stats: LagCompStats::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &LagCompConfig {
        &self.config
    }

    /// The counters.
    pub fn stats(&self) -> &LagCompStats {
        &self.stats
    }

    /// Entities with a history.
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// True when no entity has a history.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Records `entity`'s `pose` and `shape` at `tick` (the state after the server's
    /// step to `tick`). Recording the same tick again replaces it. Refused: an older
    /// tick than the entity's newest or than the history holds, a non-finite pose, an
    /// invalid shape, a new entity beyond [`LagCompConfig::max_entities`].
    pub fn record(
        &mut self,
        tick: Tick,
        entity: u32,
        pose: Pose,
        shape: S,
    ) -> Result<(), LagCompError> {
        let finite = pose.position.iter().chain(&pose.rotation);
        if !finite.into_iter().all(|v| v.is_finite()) {
            return Err(LagCompError::NonFinitePose);
        }
        if !shape.is_valid() {
            return Err(LagCompError::BadShape);
        }
        let keep = self.config.history_ticks();
        match self.newest {
            Some(newest) if tick < newest.saturating_sub(keep) => {
                return Err(LagCompError::Stale);
            }
            Some(newest) if tick <= newest => {}
            _ => {
                self.newest = Some(tick);
                let floor = tick.saturating_sub(keep);
                self.entities.retain(|_, h| {
                    while h.front().is_some_and(|s| s.tick < floor) {
                        h.pop_front();
                    }
                    !h.is_empty()
                });
            }
        }
        if !self.entities.contains_key(&entity) && self.entities.len() >= self.config.max_entities {
            return Err(LagCompError::TooManyEntities);
        }
        let history = self.entities.entry(entity).or_default();
        let sample = Sample { tick, pose, shape };
        match history.back_mut() {
            Some(last) if last.tick == tick => *last = sample,
            Some(last) if last.tick > tick => return Err(LagCompError::OutOfOrder),
            _ => {
                history.push_back(sample);
                // One more than the span, so the floor's tick itself stays.
                while history.len() > keep as usize + 1 {
                    history.pop_front();
                }
            }
        }
        Ok(())
    }

    /// Forgets `entity` at once (despawned and no longer hittable in the past either).
    pub fn remove(&mut self, entity: u32) {
        self.entities.remove(&entity);
    }

    /// Moves `claimed_view` into the trusted window `[now - window, now]` and counts the
    /// rewind (and the clamp, if any). A NaN or infinite claim is refused and counted.
    /// The absolute window: [`rewind_with_allowance`](Self::rewind_with_allowance) with
    /// no allowance.
    pub fn rewind(&mut self, now: Tick, claimed_view: f64) -> Result<Rewind, LagCompError> {
        self.rewind_with_allowance(now, claimed_view, Duration::ZERO)
    }

    /// Moves `claimed_view` into `[now - allowance - window, now]` and counts the rewind
    /// (and the clamp, if any). `allowance` is the latency the server itself measured for
    /// this client (round trip, input lead, interpolation): a real high ping is
    /// compensated in full, and only the claim beyond what the server can explain is
    /// bounded by the window. That is what the window is for in the Pixonic article:
    /// bounding the advantage of a *faked* high ping. The allowance is capped at
    /// [`LagCompConfig::max_allowance`] (a NaN or infinite one counts as the cap), so the
    /// history needed stays bounded whatever is measured. A NaN or infinite claim is
    /// refused and counted.
    pub fn rewind_with_allowance(
        &mut self,
        now: Tick,
        claimed_view: f64,
        allowance: Duration,
    ) -> Result<Rewind, LagCompError> {
        if !claimed_view.is_finite() {
            self.stats.refused += 1;
            return Err(LagCompError::NonFiniteView);
        }
        let max = self.config.max_allowance;
        let allowance = if allowance > max {
            self.stats.allowance_capped += 1;
            max
        } else {
            allowance
        };
        let allowance_ticks = self.config.tick_rate.ticks_in(allowance);
        let present = f64::from(now.0);
        let edge = present - allowance_ticks - self.config.window_ticks();
        let (used_view, clamp) = if claimed_view < edge {
            self.stats.clamped_old += 1;
            (edge, Clamp::Old)
        } else if claimed_view > present {
            self.stats.clamped_future += 1;
            (present, Clamp::Future)
        } else {
            (claimed_view, Clamp::None)
        };
        let rewind_ticks = present - used_view;
        // Seconds before milliseconds, as before the allowance: a rewind to the window's
        // edge is then exactly the window (250.0, not 250.00000000000003).
        let period = self.config.tick_rate.period_secs();
        let to_ms = |ticks: f64| ticks * period * 1000.0;
        let rewind_ms = to_ms(rewind_ticks);
        let allowance_ms = to_ms(allowance_ticks);
        let excess_ms = to_ms((rewind_ticks - allowance_ticks).max(0.0));
        self.stats.rewinds += 1;
        self.stats.rewind_ms_max = self.stats.rewind_ms_max.max(rewind_ms);
        self.stats.excess_ms_max = self.stats.excess_ms_max.max(excess_ms);
        Ok(Rewind {
            claimed_view,
            used_view,
            allowance_ms,
            clamp,
            rewind_ticks,
            rewind_ms,
            excess_ms,
        })
    }

    /// `entity`'s pose and shape at fractional tick `view`, interpolated between the
    /// two samples around it (position linearly, rotation by slerp; the shape of the
    /// nearer sample). `None` when the entity has no samples on both sides (not yet
    /// spawned then, or no longer recorded).
    pub fn pose_at(&self, entity: u32, view: f64) -> Option<(Pose, S)> {
        let history = self.entities.get(&entity)?;
        // The first sample at or after `view`.
        let after = history.partition_point(|s| f64::from(s.tick.0) < view);
        let b = history.get(after)?;
        if f64::from(b.tick.0) == view {
            return Some((b.pose, b.shape));
        }
        let a = history.get(after.checked_sub(1)?)?;
        let span = f64::from(b.tick.0) - f64::from(a.tick.0);
        let t = ((view - f64::from(a.tick.0)) / span) as f32;
        let shape = if t < 0.5 { a.shape } else { b.shape };
        Some((Pose::lerp(&a.pose, &b.pose, t), shape))
    }

    /// Every entity present at fractional tick `view`, as [`pose_at`](Self::pose_at)
    /// places it, in id order: what a game puts into its own physics engine's query
    /// structure to test shots its own way.
    pub fn world_at(&self, view: f64) -> impl Iterator<Item = (u32, Pose, S)> + '_ {
        self.entities
            .keys()
            .filter_map(move |&id| self.pose_at(id, view).map(|(p, s)| (id, p, s)))
    }

    /// Tests `shot` against every recorded entity (but the shooter) as it was at the
    /// claimed view, moved into the trusted window: the Pixonic article's
    /// "rewind the others, keep the shooter in the present". The game applies the
    /// damage in the present.
    pub fn rewind_query(&mut self, now: Tick, shot: &Shot) -> Result<RewindResult, LagCompError> {
        self.rewind_query_with(now, shot, |_| true)
    }

    /// [`rewind_query`](Self::rewind_query) over the entities `hittable` accepts (team
    /// mates, the dead).
    pub fn rewind_query_with(
        &mut self,
        now: Tick,
        shot: &Shot,
        hittable: impl FnMut(u32) -> bool,
    ) -> Result<RewindResult, LagCompError> {
        self.rewind_query_allowing(now, shot, Duration::ZERO, hittable)
    }

    /// [`rewind_query_with`](Self::rewind_query_with) with the trusted range widened by
    /// `allowance`, the latency the server measured for the shooter, as
    /// [`rewind_with_allowance`](Self::rewind_with_allowance) does.
    pub fn rewind_query_allowing(
        &mut self,
        now: Tick,
        shot: &Shot,
        allowance: Duration,
        mut hittable: impl FnMut(u32) -> bool,
    ) -> Result<RewindResult, LagCompError> {
        let ray = match Ray::new(shot.origin, shot.direction, shot.max_distance) {
            Ok(ray) => ray,
            Err(e) => {
                self.stats.refused += 1;
                return Err(e);
            }
        };
        let rewind = self.rewind_with_allowance(now, shot.claimed_view, allowance)?;
        let mut hit: Option<Hit> = None;
        for (entity, pose, shape) in self.world_at(rewind.used_view) {
            if Some(entity) == shot.shooter || !hittable(entity) {
                continue;
            }
            if let Some(distance) = shape.cast(&pose, &ray)
                && hit.is_none_or(|h| distance < h.distance)
            {
                hit = Some(Hit {
                    entity,
                    point: ray.at(distance),
                    distance,
                });
            }
        }
        if hit.is_some() {
            self.stats.hits += 1;
        }
        Ok(RewindResult { hit, rewind })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comp() -> LagCompensator {
        LagCompensator::new(LagCompConfig::default())
    }

    const DISC: Shape = Shape::Circle { radius: 0.5 };

    #[test]
    fn history_is_bounded_and_forgets_the_silent() {
        let mut c = comp();
        let keep = c.config().history_ticks();
        assert_eq!(
            keep, 40,
            "30 ticks of allowance and 7.5 of window rounded up, plus two"
        );
        for t in 0..100 {
            c.record(Tick(t), 1, Pose::planar([t as f32, 0.0], 0.0), DISC)
                .unwrap();
            if t < 20 {
                c.record(Tick(t), 2, Pose::default(), DISC).unwrap();
            }
            assert!(c.entities[&1].len() <= keep as usize + 1);
        }
        assert_eq!(c.len(), 1, "entity 2 was not recorded for 80 ticks");
        assert_eq!(
            c.record(Tick(50), 1, Pose::default(), DISC),
            Err(LagCompError::Stale)
        );
        assert_eq!(
            c.record(Tick(98), 1, Pose::default(), DISC),
            Err(LagCompError::OutOfOrder)
        );
        let nan = Pose::planar([f32::NAN, 0.0], 0.0);
        assert_eq!(
            c.record(Tick(100), 1, nan, DISC),
            Err(LagCompError::NonFinitePose)
        );
        let bad = Shape::Circle { radius: -1.0 };
        assert_eq!(
            c.record(Tick(100), 1, Pose::default(), bad),
            Err(LagCompError::BadShape)
        );
    }

    #[test]
    fn a_sample_is_80_bytes() {
        assert_eq!(std::mem::size_of::<Sample<Shape>>(), 80);
    }

    #[test]
    fn too_many_entities_are_refused() {
        let mut c = LagCompensator::<Shape>::new(LagCompConfig {
            max_entities: 2,
            ..LagCompConfig::default()
        });
        c.record(Tick(1), 1, Pose::default(), DISC).unwrap();
        c.record(Tick(1), 2, Pose::default(), DISC).unwrap();
        assert_eq!(
            c.record(Tick(1), 3, Pose::default(), DISC),
            Err(LagCompError::TooManyEntities)
        );
        c.remove(1);
        c.record(Tick(1), 3, Pose::default(), DISC).unwrap();
    }

    #[test]
    fn fractional_views_interpolate() {
        let mut c = comp();
        c.record(Tick(10), 1, Pose::planar([0.0, 0.0], 0.0), DISC)
            .unwrap();
        c.record(Tick(11), 1, Pose::planar([1.0, 0.0], 0.0), DISC)
            .unwrap();
        let (p, _) = c.pose_at(1, 10.25).unwrap();
        assert!((p.position[0] - 0.25).abs() < 1e-6);
        assert_eq!(c.pose_at(1, 11.0).unwrap().0.position[0], 1.0);
        assert_eq!(c.pose_at(1, 9.5), None, "before it was recorded");
        assert_eq!(c.pose_at(1, 11.5), None, "after its newest sample");
    }

    #[test]
    fn the_shooter_is_not_hit_and_the_nearest_is() {
        let mut c = comp();
        for (id, x) in [(1, 0.0), (2, 5.0), (3, 3.0)] {
            c.record(Tick(20), id, Pose::planar([x, 0.0], 0.0), DISC)
                .unwrap();
        }
        let shot = Shot {
            claimed_view: 20.0,
            origin: [0.0; 3],
            direction: [1.0, 0.0, 0.0],
            max_distance: 100.0,
            shooter: Some(1),
        };
        let r = c.rewind_query(Tick(20), &shot).unwrap();
        let hit = r.hit.unwrap();
        assert_eq!(hit.entity, 3);
        assert!((hit.distance - 2.5).abs() < 1e-6);
        assert_eq!(hit.point, [2.5, 0.0, 0.0]);
        assert_eq!(r.rewind.clamp, Clamp::None);
        let only_2 = c.rewind_query_with(Tick(20), &shot, |e| e == 2).unwrap();
        assert_eq!(only_2.hit.map(|h| h.entity), Some(2));
        assert_eq!(c.stats().hits, 2);
    }

    #[test]
    fn claims_are_clamped_into_the_window() {
        let mut c = comp();
        let r = c.rewind(Tick(100), 100.0 - 30.0).unwrap();
        assert_eq!(r.clamp, Clamp::Old);
        assert_eq!(r.used_view, 92.5);
        assert!((r.rewind_ms - 250.0).abs() < 1e-9);
        let r = c.rewind(Tick(100), 103.0).unwrap();
        assert_eq!(
            (r.clamp, r.used_view, r.rewind_ms),
            (Clamp::Future, 100.0, 0.0)
        );
        let r = c.rewind(Tick(100), 97.0).unwrap();
        assert_eq!((r.clamp, r.used_view), (Clamp::None, 97.0));
        assert!((r.rewind_ms - 100.0).abs() < 1e-9);
        assert_eq!(
            c.rewind(Tick(100), f64::NAN),
            Err(LagCompError::NonFiniteView)
        );
        let s = c.stats();
        assert_eq!((s.rewinds, s.clamped(), s.refused), (3, 2, 1));
        assert!((s.rewind_ms_max - 250.0).abs() < 1e-9);
    }

    /// 30 ticks/s: a tick is 33.3 ms, 250 ms of window 7.5 ticks.
    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn an_honest_high_latency_claim_is_not_clamped() {
        let mut c = comp();
        // A mobile client: 600 ms behind (18 ticks), of which the server measured 500
        // ms; the remaining 100 ms lies within the window.
        let r = c.rewind_with_allowance(Tick(100), 82.0, 500 * MS).unwrap();
        assert_eq!((r.clamp, r.used_view), (Clamp::None, 82.0));
        assert!((r.rewind_ms - 600.0).abs() < 1e-9);
        assert!((r.allowance_ms - 500.0).abs() < 1e-9);
        assert!((r.excess_ms - 100.0).abs() < 1e-9);
        // The same claim with the absolute window: clamped to 250 ms.
        let r = c.rewind(Tick(100), 82.0).unwrap();
        assert_eq!((r.clamp, r.used_view), (Clamp::Old, 92.5));
        // Within the allowance, nothing is unexplained.
        let r = c.rewind_with_allowance(Tick(100), 88.0, 500 * MS).unwrap();
        assert_eq!((r.clamp, r.excess_ms), (Clamp::None, 0.0));
        assert_eq!(c.stats().clamped(), 1);
    }

    #[test]
    fn a_claim_beyond_the_allowance_is_clamped_to_allowance_plus_window() {
        let mut c = comp();
        // The server measured 300 ms (9 ticks); the client claims 1000 ms more.
        let r = c
            .rewind_with_allowance(Tick(100), 100.0 - 9.0 - 30.0, 300 * MS)
            .unwrap();
        assert_eq!(r.clamp, Clamp::Old);
        assert!((r.used_view - (100.0 - 9.0 - 7.5)).abs() < 1e-9);
        assert!((r.rewind_ms - 550.0).abs() < 1e-9);
        assert!(
            (r.excess_ms - 250.0).abs() < 1e-9,
            "the lie buys the window only"
        );
        assert!((c.stats().excess_ms_max - 250.0).abs() < 1e-9);
        assert_eq!(c.stats().clamped_old, 1);
    }

    #[test]
    fn an_allowance_above_the_maximum_is_capped() {
        let mut c = comp();
        for allowance in [5000 * MS, Duration::MAX] {
            let r = c.rewind_with_allowance(Tick(1000), 0.0, allowance).unwrap();
            assert_eq!(r.clamp, Clamp::Old);
            assert!((r.allowance_ms - 1000.0).abs() < 1e-9);
            assert!((r.rewind_ms - 1250.0).abs() < 1e-9);
            assert!((r.excess_ms - 250.0).abs() < 1e-9);
        }
        assert_eq!(c.stats().allowance_capped, 2);
        // The longest rewind still finds its samples: the history covers it.
        for t in 0..=1000u32 {
            c.record(Tick(t), 1, Pose::planar([t as f32, 0.0], 0.0), DISC)
                .unwrap();
        }
        let r = c
            .rewind_with_allowance(Tick(1000), 0.0, Duration::MAX)
            .unwrap();
        assert!(c.pose_at(1, r.used_view).is_some());
        assert_eq!(
            c.rewind_with_allowance(Tick(1000), f64::INFINITY, 100 * MS),
            Err(LagCompError::NonFiniteView)
        );
        assert_eq!(
            c.rewind_with_allowance(Tick(1000), f64::NAN, 100 * MS),
            Err(LagCompError::NonFiniteView)
        );
        assert_eq!(c.stats().refused, 2);
    }

    proptest::proptest! {
        /// Whatever a client claims and whatever allowance is given, the rewind stays
        /// within the capped allowance plus the window, and its unexplained part within
        /// the window.
        #[test]
        fn rewinds_stay_within_allowance_and_window(
            now in 0u32..1_000_000, claim in proptest::num::f64::ANY, allowance_ms in 0u64..10_000,
        ) {
            let mut c = comp();
            if let Ok(r) = c.rewind_with_allowance(Tick(now), claim, Duration::from_millis(allowance_ms)) {
                let capped = (allowance_ms as f64).min(1000.0);
                proptest::prop_assert!(r.used_view <= f64::from(now));
                proptest::prop_assert!(r.rewind_ms <= capped + 250.0 + 1e-6);
                proptest::prop_assert!(r.excess_ms >= 0.0 && r.excess_ms <= 250.0 + 1e-6);
            }
        }


        /// Whatever a client claims, the rewind stays in the window, and a claim is
        /// clamped exactly when it lies outside it.
        #[test]
        fn rewinds_stay_in_the_window(now in 0u32..1_000_000, claim in proptest::num::f64::ANY) {
            let mut c = comp();
            match c.rewind(Tick(now), claim) {
                Err(e) => proptest::prop_assert_eq!(e, LagCompError::NonFiniteView),
                Ok(r) => {
                    let present = f64::from(now);
                    proptest::prop_assert!(r.used_view <= present);
                    proptest::prop_assert!(r.used_view >= present - 7.5);
                    proptest::prop_assert!(r.rewind_ms >= 0.0 && r.rewind_ms <= 250.0 + 1e-9);
                    let inside = claim >= present - 7.5 && claim <= present;
                    proptest::prop_assert_eq!(r.clamped(), !inside);
                }
            }
        }

        /// The rewound hit is the ray's first entry into the entity as `pose_at` places
        /// it: the point lies on the disc's edge (or the ray starts inside).
        #[test]
        fn hits_lie_on_the_rewound_shape(
            x in -20.0f32..20.0, y in -20.0f32..20.0, dx in -1.0f32..1.0, dy in -1.0f32..1.0,
            view in 12.5f64..20.0,
        ) {
            let mut c = comp();
            for t in 10..=20u32 {
                let p = Pose::planar([t as f32 * 0.5, (t as f32 * 0.3).sin()], 0.0);
                c.record(Tick(t), 7, p, DISC).expect("valid");
            }
            let shot = Shot {
                claimed_view: view,
                origin: [x, y, 0.0],
                direction: [dx, dy, 0.0],
                max_distance: 100.0,
                shooter: None,
            };
            let Ok(r) = c.rewind_query(Tick(20), &shot) else {
                return Ok(());
            };
            if let Some(hit) = r.hit {
                let (pose, _) = c.pose_at(7, view).expect("present");
                let d = ((hit.point[0] - pose.position[0]).powi(2)
                    + (hit.point[1] - pose.position[1]).powi(2))
                .sqrt();
                proptest::prop_assert!(hit.distance == 0.0 || (d - 0.5).abs() < 1e-3, "{d}");
            }
        }
    }
}
