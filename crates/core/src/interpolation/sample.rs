//! What the buffer blends, the [`Interpolate`] trait (with impls for plain numbers and
//! vectors of samples), and what it answers: a [`Sampled`] value and its [`SampleKind`].

use crate::Tick;
use std::time::Duration;

// Named in the docs only.
#[cfg(doc)]
use super::InterpolationConfig;

/// A value the [`InterpolationBuffer`](super::InterpolationBuffer) can blend between two
/// snapshots.
///
/// Only [`lerp`](Interpolate::lerp) is required. A game with velocities in its state
/// overrides [`hermite`](Interpolate::hermite) (smooth curves through the snapshots) and
/// [`extrapolate`](Interpolate::extrapolate) (dead reckoning past the newest snapshot,
/// which the buffer bounds in time). The game decides what blending means for each field:
/// discrete flags usually take `b`'s value once `t` reaches 1, or `a`'s until then.
pub trait Interpolate: Clone {
    /// Linear blend: `a` at `t = 0`, `b` at `t = 1`.
    fn lerp(a: &Self, b: &Self, t: f32) -> Self;

    /// Cubic blend using the samples' derivatives, `dt_secs` being the time between `a`
    /// and `b` (velocities are scaled by it). Defaults to [`lerp`](Interpolate::lerp).
    fn hermite(a: &Self, b: &Self, t: f32, dt_secs: f32) -> Self {
        let _ = dt_secs;
        Self::lerp(a, b, t)
    }

    /// `a` carried `dt_secs` into the future. Defaults to holding `a`.
    fn extrapolate(a: &Self, dt_secs: f32) -> Self {
        let _ = dt_secs;
        a.clone()
    }
}

impl Interpolate for f32 {
    fn lerp(a: &Self, b: &Self, t: f32) -> Self {
        a + (b - a) * t
    }
}

impl Interpolate for f64 {
    fn lerp(a: &Self, b: &Self, t: f32) -> Self {
        a + (b - a) * f64::from(t)
    }
}

/// Element by element, for a snapshot of many entities (say every cube in a scene).
/// Elements are matched by index; when the lengths differ, the extra elements come from
/// `b` unblended (and `a`'s extras are dropped), so the result always has `b`'s length.
/// Games whose entity sets change should keep entities at stable indices.
impl<T: Interpolate> Interpolate for Vec<T> {
    fn lerp(a: &Self, b: &Self, t: f32) -> Self {
        blend(a, b, |x, y| T::lerp(x, y, t))
    }

    fn hermite(a: &Self, b: &Self, t: f32, dt_secs: f32) -> Self {
        blend(a, b, |x, y| T::hermite(x, y, t, dt_secs))
    }

    fn extrapolate(a: &Self, dt_secs: f32) -> Self {
        a.iter().map(|x| T::extrapolate(x, dt_secs)).collect()
    }
}

fn blend<T: Clone>(a: &[T], b: &[T], f: impl Fn(&T, &T) -> T) -> Vec<T> {
    let mut out: Vec<T> = a.iter().zip(b).map(|(x, y)| f(x, y)).collect();
    if b.len() > a.len() {
        out.extend_from_slice(&b[a.len()..]);
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_blend_linearly() {
        assert_eq!(f32::lerp(&2.0, &4.0, 0.5), 3.0);
        assert_eq!(f64::lerp(&2.0, &4.0, 0.25), 2.5);
        // Defaults: Hermite falls back to lerp, extrapolation holds.
        assert_eq!(f32::hermite(&2.0, &4.0, 0.5, 0.1), 3.0);
        assert_eq!(f32::extrapolate(&2.0, 10.0), 2.0);
    }

    #[test]
    fn vectors_blend_by_index_and_take_b_length() {
        let a = vec![0.0f32, 10.0];
        let b = vec![2.0f32, 20.0, 7.0];
        assert_eq!(Vec::lerp(&a, &b, 0.5), vec![1.0, 15.0, 7.0]);
        assert_eq!(Vec::lerp(&b, &a, 0.5), vec![1.0, 15.0]);
        assert_eq!(Vec::<f32>::extrapolate(&a, 1.0), a);
        assert!(Vec::<f32>::lerp(&Vec::new(), &Vec::new(), 0.3).is_empty());
    }
}
