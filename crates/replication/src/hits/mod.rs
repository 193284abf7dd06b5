//! Cosmetic-first hits: the shooter sees its hit at once, the server decides.
//!
//! Damage is not predicted (the Pixonic shooter article: what is not predicted is
//! hidden cosmetically; the hit effect is shown at once, health changes when the
//! server confirms). Overwatch ("Overwatch Gameplay Architecture and Netcode", GDC
//! 2017) does the same with its hit markers. The flow:
//!
//! 1. The client's own ray meets a target it shows: it draws the hit effect and calls
//!    [`HitTracker::shown`] with the shot's number (which its shot input carries, with
//!    a [`ViewClaim`](crate::lagcomp::ViewClaim)).
//! 2. The server tests the shot in the rewound world
//!    ([`LagCompensator::rewind_query`](crate::lagcomp::LagCompensator::rewind_query)),
//!    applies damage in the present, and sends a [`HitReport`] for every shot
//!    (hit or miss), bit-packed by [`HitReportCodec`]; it may send a report again
//!    until the client acknowledges it (repeats are ignored).
//! 3. The client's [`HitTracker::report`] resolves it: [`HitEvent::Confirmed`], or
//!    [`HitEvent::ShowMiss`] (the server disagreed: undo the effect), or
//!    [`HitEvent::ServerOnly`] (a hit the client had not shown). A shown hit with no
//!    word one round trip plus a margin later is given up as a miss
//!    ([`HitTracker::update`]), so a rejected hit shows as a miss at most that late.
//!
//! # Example
//! ```
//! use lagless_replication::hits::*;
//! use lagless_replication::Tick;
//! use lagless_wire::{BitReader, BitWriter};
//! use std::time::Duration;
//!
//! let mut tracker = HitTracker::new(HitConfig::default());
//! tracker.set_rtt(Duration::from_millis(150));
//! tracker.shown(41, 7, Tick(300)); // shot 41 hit player 7 on screen
//! tracker.shown(42, 7, Tick(303));
//!
//! // The server: 41 hit, 42 missed in the rewound world.
//! let codec = HitReportCodec::default();
//! let mut w = BitWriter::new();
//! let reports = [HitReport { shot: 41, target: Some(7) }, HitReport { shot: 42, target: None }];
//! codec.write(&mut w, &reports).unwrap();
//! let bytes = w.into_bytes();
//!
//! for r in codec.read(&mut BitReader::new(&bytes)).unwrap() {
//!     tracker.report(&r);
//! }
//! assert_eq!(tracker.poll_event(), Some(HitEvent::Confirmed { shot: 41, target: 7 }));
//! assert!(matches!(tracker.poll_event(), Some(HitEvent::ShowMiss { shot: 42, .. })));
//! assert_eq!(tracker.stats().confirmed_pct(), 50.0);
//! ```

mod report;
mod tracker;

pub use report::{HitError, HitReport, HitReportCodec};
pub use tracker::{HitConfig, HitEvent, HitStats, HitTracker, MissReason};
