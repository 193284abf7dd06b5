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
    /// Most entities with a history; [`LagCompensator::record`] refuses more
    /// (default 4096).
    pub max_entities: usize,
}

impl Default for LagCompConfig {
    fn default() -> Self {
        Self {
            tick_rate: TickRate::new(30),
            window: Duration::from_millis(250),
            max_entities: 4096,
        }
    }
}

impl LagCompConfig {
    /// The window in ticks (fractional: 250 ms at 30 ticks/s is 7.5).
    pub fn window_ticks(&self) -> f64 {
        self.tick_rate.ticks_in(self.window)
    }

    /// Ticks of history kept per entity: the window rounded up, plus one on each side
    /// so a view at the window's edge always has samples on both sides.
    pub fn history_ticks(&self) -> u32 {
        (self.window_ticks().ceil() as u32).saturating_add(2)
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
    /// `[now - window, now]`.
    pub used_view: f64,
    /// Whether and which way the claim was moved.
    pub clamp: Clamp,
    /// `now - used_view`, in ticks.
    pub rewind_ticks: f64,
    /// The same in milliseconds: the value for `lagcomp.rewind_ms_p99`.
    pub rewind_ms: f64,
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
    /// Claims older than the window, moved to its edge.
    pub clamped_old: u64,
    /// Claims in the future, moved to the present.
    pub clamped_future: u64,
    /// Shots refused: NaN or infinite values, a zero direction, a bad range.
    pub refused: u64,
    /// The longest rewind done, in milliseconds (never above the window).
    pub rewind_ms_max: f64,
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
    pub fn rewind(&mut self, now: Tick, claimed_view: f64) -> Result<Rewind, LagCompError> {
        if !claimed_view.is_finite() {
            self.stats.refused += 1;
            return Err(LagCompError::NonFiniteView);
        }
        let present = f64::from(now.0);
        let edge = present - self.config.window_ticks();
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
        let rewind_ms = rewind_ticks * self.config.tick_rate.period_secs() * 1000.0;
        self.stats.rewinds += 1;
        self.stats.rewind_ms_max = self.stats.rewind_ms_max.max(rewind_ms);
        Ok(Rewind {
            claimed_view,
            used_view,
            clamp,
            rewind_ticks,
            rewind_ms,
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
        mut hittable: impl FnMut(u32) -> bool,
    ) -> Result<RewindResult, LagCompError> {
        let ray = match Ray::new(shot.origin, shot.direction, shot.max_distance) {
            Ok(ray) => ray,
            Err(e) => {
                self.stats.refused += 1;
                return Err(e);
            }
        };
        let rewind = self.rewind(now, shot.claimed_view)?;
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
        assert_eq!(keep, 10, "7.5 ticks rounded up, plus two");
        for t in 0..100 {
            c.record(Tick(t), 1, Pose::planar([t as f32, 0.0], 0.0), DISC)
                .unwrap();
            if t < 50 {
                c.record(Tick(t), 2, Pose::default(), DISC).unwrap();
            }
            assert!(c.entities[&1].len() <= keep as usize + 1);
        }
        assert_eq!(c.len(), 1, "entity 2 was not recorded for 50 ticks");
        assert_eq!(
            c.record(Tick(80), 1, Pose::default(), DISC),
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

    proptest::proptest! {
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
