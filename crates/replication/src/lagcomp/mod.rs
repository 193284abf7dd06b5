//! Lag compensation: the server tests a shot against the world the shooter was
//! showing, not the one it has now.
//!
//! A client shows other players a little in the past (snapshot interpolation), so a
//! shot aimed at what it sees would miss on the server, which has them where they are
//! now. Valve's "Latency Compensating Methods in Client/Server In-game Protocol Design
//! and Optimization" answers with a rewind; the Pixonic shooter article does the same
//! on its ECS, and Overwatch's GDC 2017 talk ("Overwatch Gameplay Architecture and
//! Netcode") shows the bounded hitbox history it keeps for it:
//!
//! * Every input carries the tick of the world the client was showing
//!   ([`ViewClaim`]: its interpolation position, relative to the input's tick, in
//!   1/32 ticks).
//! * The server keeps a bounded history of every hittable entity's pose and shape
//!   ([`LagCompensator::record`], built-in [`Shape`]s or a game's own [`HitShape`]).
//! * For a shot it checks the claimed view lies within a trusted window (default
//!   250 ms): an older claim gets the window's edge, a claim in the future gets the
//!   present, both counted ([`LagCompStats`]). This bounds what a faked ping buys,
//!   the article's caveat.
//! * A real high ping is something the server measures itself; only the claim beyond
//!   it is unverifiable. [`LagCompensator::rewind_with_allowance`] takes, per claim,
//!   the latency the server attributes to the client (an *allowance*, capped at
//!   [`LagCompConfig::max_allowance`], default 1 s like Source's `sv_maxunlag`) and
//!   trusts `[now - allowance - window, now]`: an honest mobile client is compensated
//!   in full, a liar still gains at most the window beyond what the server measured
//!   ([`Rewind::excess_ms`]). With no allowance it is the absolute window above.
//! * It rewinds the other entities to that view, interpolating between the two
//!   recorded ticks around it (clients render between snapshots, so a view is a
//!   fractional tick), keeps the shooter in the present, and tests the shot
//!   ([`LagCompensator::rewind_query`]). The game applies damage in the present.
//!
//! The history holds poses and shapes, not a physics engine's internals, so it works
//! with any engine; [`LagCompensator::world_at`] hands the rewound poses to a game that
//! prefers its engine's own queries. Bad shots (NaN or infinite aim, a zero direction,
//! a non-positive range) are refused with a [`LagCompError`] and counted; nothing an
//! input carries can panic it.
//!
//! Memory: at most [`LagCompConfig::max_entities`] × ([`LagCompConfig::history_ticks`] + 1)
//! samples (a sample is a tick, a pose and a shape: 80 bytes with [`Shape`]). The
//! history covers the largest allowance plus the window: 41 samples at the defaults
//! (30 ticks/s, 1 s + 250 ms), so 4096 entities take about 13 MB at most; a game with
//! no allowance sets `max_allowance` to zero and keeps 11 (3.6 MB).
//!
//! # Example
//! ```
//! use lagless_replication::lagcomp::*;
//! use lagless_replication::{Pose, Tick};
//!
//! let mut lc = LagCompensator::new(LagCompConfig::default()); // 30 ticks/s, 250 ms
//! // A target crossing the line y = 0 upwards at 3 m/s (at tick 25), recorded after
//! // every tick.
//! for t in 0..=30u32 {
//!     let pose = Pose::planar([10.0, -2.5 + 0.1 * t as f32], 0.0);
//!     lc.record(Tick(t), 1, pose, Shape::Circle { radius: 0.2 }).unwrap();
//! }
//! // At tick 30 a client's input says it was showing tick 25.0 (167 ms back), and it
//! // shot along the x axis: the rewound target is on the line.
//! let claim = ViewClaim::new(Tick(30), 25.0);
//! let shot = Shot {
//!     claimed_view: claim.view(Tick(30)),
//!     origin: [0.0, 0.0, 0.0],
//!     direction: [1.0, 0.0, 0.0],
//!     max_distance: 50.0,
//!     shooter: Some(0),
//! };
//! let r = lc.rewind_query(Tick(30), &shot).unwrap();
//! assert_eq!(r.hit.map(|h| h.entity), Some(1));
//! assert!(!r.rewind.clamped());
//! // A liar claiming tick 15 gets the window's edge, 7.5 ticks back, where the target
//! // was at y = -0.25: a miss, and a clamp counted.
//! let lie = Shot { claimed_view: 15.0, ..shot };
//! let r = lc.rewind_query(Tick(30), &lie).unwrap();
//! assert_eq!((r.rewind.used_view, r.hit), (22.5, None));
//! assert_eq!(lc.stats().clamped(), 1);
//! ```

mod claim;
mod compensator;
mod shape;

pub use claim::ViewClaim;
pub use compensator::{
    Clamp, Hit, LagCompConfig, LagCompStats, LagCompensator, Rewind, RewindResult, Shot,
};
pub use shape::{HitShape, Ray, Shape};

use thiserror::Error;

/// Why lag compensation refused something. Shots refused are counted
/// ([`LagCompStats::refused`]); none is a panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum LagCompError {
    /// A shot's origin, direction or range is NaN or infinite.
    #[error("the shot is not finite")]
    NonFiniteRay,
    /// A shot's direction is zero.
    #[error("the shot has no direction")]
    ZeroDirection,
    /// A shot's range is not positive.
    #[error("the shot's range is not positive")]
    BadDistance,
    /// The claimed view is NaN or infinite.
    #[error("the claimed view is not finite")]
    NonFiniteView,
    /// A recorded pose is NaN or infinite.
    #[error("the pose is not finite")]
    NonFinitePose,
    /// A recorded shape's dimensions are NaN, infinite or negative.
    #[error("the shape is invalid")]
    BadShape,
    /// A record older than the entity's newest.
    #[error("a record older than the entity's newest")]
    OutOfOrder,
    /// A record older than the history keeps.
    #[error("a record older than the history")]
    Stale,
    /// A new entity beyond [`LagCompConfig::max_entities`].
    #[error("too many entities")]
    TooManyEntities,
}
