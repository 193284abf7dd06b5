//! Snapshot interpolation (Fiedler's "Snapshot Interpolation"): show remote state a little in the past, blended
//! between the two snapshots around the displayed time.
//!
//! The game supplies the sample type through [`Interpolate`] (or uses the ready-made
//! [`Pose`]); the [`InterpolationBuffer`] holds snapshots by server tick, estimates the
//! server clock from arrival times, picks a playback delay with a [`DelayPolicy`], and
//! answers "what should be on screen now" with a [`Sampled`] value that says how it was
//! produced ([`SampleKind`]) and which server tick it shows.
//!
//! Nothing here reads a clock: arrivals and render times come in as
//! [`Duration`](std::time::Duration)s since any epoch.
//!
//! * **Clock.** The server's clock is read off the arrival offsets (`arrival - tick *
//!   period`) by order statistics over a window, so one late packet moves nothing.
//! * **Delay.** [`DelayPolicy::Fixed`] trails the median arrival by N measured send
//!   intervals ([`DelayPolicy::CLASSIC`] is Fiedler's three); [`DelayPolicy::Adaptive`]
//!   picks the shortest delay that would have left at most a target fraction of playback
//!   time without a snapshot pair, and follows a change of link within a few arrivals
//!   ([`InterpolationConfig::shift_window`]). Playback follows delay changes by speeding
//!   up or slowing down a little, never by jumping; if asked to
//!   ([`InterpolationConfig::max_stretch`]), it also slows down while a snapshot is
//!   overdue, and the adaptive policy picks a shorter delay for it.
//! * **Output.** [`Sampled::render_tick`] is the (fractional) server tick shown, to
//!   compare against the server's state at that tick; [`SampleKind`] says whether the
//!   value was interpolated, extrapolated (bounded by
//!   [`InterpolationConfig::max_extrapolation`]), held, or shown early;
//!   [`InterpolationStats`] counts them, and every refused snapshot.
//!
//! `docs/interpolation.md` tells the adaptive policy's story and what it measured, and
//! maps the files.
//!
//! ```
//! use lagless_core::interpolation::{DelayPolicy, InterpolationBuffer, InterpolationConfig};
//! use lagless_core::Tick;
//! use std::time::Duration;
//!
//! // A one-dimensional game: the sample is an f32 position.
//! let mut buffer = InterpolationBuffer::<f32>::new(InterpolationConfig {
//!     tick_hz: 60,
//!     policy: DelayPolicy::CLASSIC,
//!     ..InterpolationConfig::default()
//! });
//! let ms = Duration::from_millis;
//! // Snapshots every 6 ticks (10 per second), 40 ms on the way.
//! for k in (0..120u32).step_by(6) {
//!     buffer.push(Tick(k), ms(40 + u64::from(k) * 1000 / 60), k as f32).unwrap();
//! }
//! let shown = buffer.sample_at(ms(2000)).unwrap();
//! // Three send intervals (18 ticks) behind the typical arrival.
//! assert!((shown.render_tick - (120.0 - 2.4 - 18.0)).abs() < 0.01);
//! assert!((shown.value - shown.render_tick as f32).abs() < 1e-3);
//! ```

mod adaptive;
mod buffer;
mod clock;
mod config;
mod fixed;
mod policy;
mod pose;
mod sample;
mod stats;

pub use buffer::{InterpolationBuffer, PushError};
pub use config::{
    Curve, DEFAULT_HISTORY, DEFAULT_MAX_STRETCH, DEFAULT_OUTAGE, DEFAULT_OVERDUE_QUANTILE,
    DEFAULT_SHIFT_SLOWDOWN, DEFAULT_SHIFT_WINDOW, InterpolationConfig, MAX_STRETCH,
    MIN_OVERDUE_QUANTILE, OUTAGE_LEARN_AFTER,
};
pub use policy::{DelayPolicy, MAX_LAG_SECS};
pub use pose::Pose;
pub use sample::{Interpolate, SampleKind, Sampled};
pub use stats::InterpolationStats;
