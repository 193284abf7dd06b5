//! The front door: what a game names to put its world on the network, in one import.
//!
//! `use lagless_replication::prelude::*;` brings the [`Server`] and [`Client`] a game runs,
//! the settings both ends share ([`NetConfig`]), the declaration of what is replicated
//! ([`Schema`], [`Kind`]), what a client predicts ([`PredictedWorld`] over [`Rollback`]) and
//! draws ([`Policy`], [`Render`], [`Pose`]), events and messages, errors and stats. The
//! layers underneath (the replication codec, budgets, views, sessions) stay public one
//! level down, in the crate root and in `lagless_core`.
//!
//! # The loop
//!
//! Both ends in one process, joined by two queues standing in for the network (over UDP,
//! `lagless_transport::{GameServer, GameClient}` host the same two): the server steps a
//! dot with its player's input and replicates it; the client predicts its own dot, so a
//! key moves it in the very next frame.
//!
//! ```
//! use lagless_replication::prelude::*;
//! use std::time::Duration;
//!
//! /// The game's rule, the same on both ends: input 1 moves the dot 5 cm east.
//! fn step(x: f32, input: u8) -> f32 {
//!     x + 0.05 * f32::from(input)
//! }
//!
//! /// What the client predicts: its own dot.
//! struct OwnDot(f32);
//! impl Rollback for OwnDot {
//!     type Input = u8;
//!     type Saved = f32;
//!     type Confirmed = ReplicationClient;
//!     fn advance(&mut self, _: Tick, input: u8) {
//!         self.0 = step(self.0, input);
//!     }
//!     fn save(&self) -> f32 {
//!         self.0
//!     }
//!     fn diverged(&self, saved: &f32, server: &ReplicationClient) -> bool {
//!         server.reader(1).is_some_and(|mut r| (r.vec2()[0] - saved).abs() > 0.01)
//!     }
//!     fn load(&mut self, server: &ReplicationClient, _: Option<&f32>) {
//!         self.0 = server.reader(1).map_or(self.0, |mut r| r.vec2()[0]);
//!     }
//! }
//! impl PredictedWorld for OwnDot {
//!     fn pose(&self, _: u32) -> Option<Pose> {
//!         Some(Pose::planar([self.0, 0.0], 0.0))
//!     }
//! }
//!
//! let schema = Schema::new().kind(Kind::new("dot").vec2("position", 100.0, 0.01)).build()?;
//! let config = NetConfig::new(30); // ticks per second, the same on both ends
//! let mut server = Server::<u8>::new(schema.clone(), &config)?;
//! server.connect(7)?; // the transport's client id
//! server.spawn_with_id(1, 0, |w| w.vec2([0.0, 0.0]))?; // entity 1 of kind 0
//! server.set_owned(7, &[1]);
//! let mut client = Client::new(schema, OwnDot(0.0), &config)?;
//! client.set_policy(1, Policy::Predicted);
//!
//! let (mut up, mut down) = (Vec::<Vec<u8>>::new(), Vec::<Vec<u8>>::new());
//! let mut x = 0.0; // the server's dot
//! let mut now = Duration::ZERO;
//! while now < Duration::from_secs(3) {
//!     // Server: packets in, ticks with every client's input, snapshots out.
//!     for bytes in up.drain(..) {
//!         server.receive(7, now, &bytes)?;
//!     }
//!     server.update(now);
//!     while let Some(tick) = server.next_tick() {
//!         for (_id, input) in tick.inputs {
//!             x = step(x, input.unwrap_or(0));
//!         }
//!         server.update_entity(1, |w| w.vec2([x, 0.0]))?;
//!         server.send_snapshots(now)?;
//!     }
//!     down.extend(std::iter::from_fn(|| server.poll_transmit()).map(|(_, bytes)| bytes));
//!
//!     // Client: packets in, ticks with the player's input, packets out, a frame drawn.
//!     for bytes in down.drain(..) {
//!         client.receive(now, &bytes)?;
//!     }
//!     client.update(now);
//!     while let Some(tick) = client.next_tick() {
//!         client.tick(tick, 1); // the key held down
//!     }
//!     up.extend(std::iter::from_fn(|| client.poll_transmit(now)));
//!     let _frame = client.render(now); // predicted, smoothed and interpolated poses
//!
//!     // A game sleeps until the next packet or poll_timeout; this one steps 10 ms.
//!     now += Duration::from_millis(10);
//! }
//! // The predicted dot runs ahead of the server's (the client leads it), never behind.
//! let shown = client.render(now).pose(1).unwrap().planar_position()[0];
//! assert!(x > 3.0 && shown >= x, "shown at {shown} m, the server's at {x} m");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use crate::{
    Client, ClientNetStats, EntityEvent, Kind, LinkEvent, LinkState, NetConfig, NetError, Policy,
    PredictedWorld, Render, ReplicationClient, Schema, SchemaError, Server, Spectator, StateWriter,
};
pub use lagless_core::interpolation::Pose;
pub use lagless_core::{ClientId, Delivery, Input, Rollback, Tick, TickInputs};
