//! Both ends of a game in one process: a [`Server`], its [`Client`]s and an emulated link
//! to each ([`lagless_netem::Duplex`]), on a virtual clock. For tests of a game's netcode
//! (a lost input is recovered, a misprediction converges, messages arrive once), for
//! examples, and for measuring a game over a bad link without sockets.
//!
//! The harness runs the same loop a game runs ([`Server`]'s and [`Client`]'s docs), one
//! step at a time: the uplink's packets into the server, the server's ticks (the game's
//! rules, [`Play::server_tick`]) and snapshots, the downlinks' packets into each client,
//! each client's ticks with the game's input ([`Play::input`]) and its packets out, then
//! whatever the game does each frame ([`Play::frame`]: render, read events).
//!
//! ```
//! use lagless_netem::{Duplex, profile};
//! use lagless_replication::harness::{Harness, Play};
//! use lagless_replication::*;
//! use std::time::Duration;
//!
//! let schema = Schema::new().kind(Kind::new("dot").vec2("position", 100.0, 0.01)).build()?;
//! let config = NetConfig::new(30);
//! let mut server = Server::<u8>::new(schema.clone(), &config)?;
//! let dot = server.spawn(0, |w| w.vec2([0.0, 0.0]))?;
//! let mut game = Harness::new(server);
//! let link = Duplex::symmetric(profile("mobile").expect("a known profile"), 1)?;
//! game.connect(1, Client::new(schema, Spectator::default(), &config)?, link)?;
//!
//! /// The dot walks east, one centimetre a tick.
//! struct Walk(u32);
//! impl Play<Spectator<u8>> for Walk {
//!     fn server_tick(&mut self, server: &mut Server<u8>, _: TickInputs<u8>) {
//!         let x = server.current_tick().0 as f32 * 0.01;
//!         let _ = server.update_entity(self.0, |w| w.vec2([x, 0.0]));
//!     }
//! }
//! game.drive(Duration::from_secs(3), &mut Walk(dot));
//! // The client holds the dot as a recent snapshot had it.
//! let mut held = game.peers[0].client.replication().reader(dot).unwrap();
//! assert!(held.vec2()[0] > 0.5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::{Client, NetError, PredictedWorld, Server};
use lagless_core::{ClientId, Tick, TickInputs};
use lagless_netem::Duplex;
use std::time::Duration;

/// Most errors kept per end (the count goes on).
const KEPT_ERRORS: usize = 256;

/// What the game does in a [`Harness`]: its rules on the server, its players' input and
/// each frame on a client. Every method has a default that does nothing (input:
/// `Default`).
pub trait Play<W: PredictedWorld> {
    /// The server's tick with every client's input: step the world and write the
    /// entities' state. The harness sends snapshots after it.
    fn server_tick(&mut self, server: &mut Server<W::Input>, tick: TickInputs<W::Input>) {
        let _ = (server, tick);
    }

    /// Client `id`'s input for `tick` (before the client predicts with it).
    fn input(&mut self, id: ClientId, tick: Tick, client: &mut Client<W>) -> W::Input {
        let _ = (id, tick, client);
        W::Input::default()
    }

    /// Once per step on each client, after its ticks: render, read events and messages.
    fn frame(&mut self, peer: &mut Peer<W>, now: Duration) {
        let _ = (peer, now);
    }
}

/// Plays nothing: the server's world stays as it is and every input is `Default`.
impl<W: PredictedWorld> Play<W> for () {}

/// A client in a [`Harness`], with its link and what it refused.
pub struct Peer<W: PredictedWorld> {
    /// The id the server knows it by.
    pub id: ClientId,
    /// The client.
    pub client: Client<W>,
    /// Its link: `up` to the server, `down` from it.
    pub link: Duplex,
    /// Packets the client refused, with why (the first few hundred).
    pub errors: Vec<NetError>,
    /// How many it refused.
    pub refused: u64,
}

/// A server, its clients and their links on one virtual clock.
pub struct Harness<W: PredictedWorld> {
    /// The server.
    pub server: Server<W::Input>,
    /// The clients, in the order connected.
    pub peers: Vec<Peer<W>>,
    /// Packets the server refused, with the client they came from and why (the first few
    /// hundred).
    pub server_errors: Vec<(ClientId, NetError)>,
    /// How many the server refused.
    pub server_refused: u64,
    now: Duration,
    step: Duration,
}

impl<W: PredictedWorld> Harness<W> {
    /// A harness around `server`, at time zero, stepping 5 ms at a time.
    pub fn new(server: Server<W::Input>) -> Self {
        Self {
            server,
            peers: Vec::new(),
            server_errors: Vec::new(),
            server_refused: 0,
            now: Duration::ZERO,
            step: Duration::from_millis(5),
        }
    }

    /// Steps `step` at a time instead (a game's frame; at least a microsecond).
    pub fn with_step(mut self, step: Duration) -> Self {
        self.step = step.max(Duration::from_micros(1));
        self
    }

    /// The virtual time now.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Connects `client` to the server as `id`, over `link`.
    pub fn connect(
        &mut self,
        id: ClientId,
        client: Client<W>,
        link: Duplex,
    ) -> Result<&mut Peer<W>, NetError> {
        self.server.connect(id)?;
        self.peers.push(Peer {
            id,
            client,
            link,
            errors: Vec::new(),
            refused: 0,
        });
        Ok(self.peers.last_mut().expect("just pushed"))
    }

    /// The client connected as `id`.
    pub fn peer(&mut self, id: ClientId) -> Option<&mut Peer<W>> {
        self.peers.iter_mut().find(|p| p.id == id)
    }

    /// Plays `play` until the clock reaches `until` (one step at least).
    pub fn drive(&mut self, until: Duration, play: &mut impl Play<W>) {
        loop {
            self.step_once(play);
            if self.now >= until {
                break;
            }
        }
    }

    /// One step: both ends take in what arrived, run what is due and send; then the
    /// clock moves on.
    fn step_once(&mut self, play: &mut impl Play<W>) {
        let now = self.now;
        for peer in &mut self.peers {
            while let Some(p) = peer.link.up.poll(now) {
                if let Err(e) = self.server.receive(peer.id, now, &p) {
                    self.server_refused += 1;
                    if self.server_errors.len() < KEPT_ERRORS {
                        self.server_errors.push((peer.id, e));
                    }
                }
            }
        }
        self.server.update(now);
        while let Some(tick) = self.server.next_tick() {
            play.server_tick(&mut self.server, tick);
            // A snapshot the session refuses is the game's error to see in the stats.
            let _ = self.server.send_snapshots(now);
        }
        while let Some((id, bytes)) = self.server.poll_transmit() {
            if let Some(peer) = self.peers.iter_mut().find(|p| p.id == id) {
                peer.link.down.send(now, bytes);
            }
        }
        for peer in &mut self.peers {
            while let Some(p) = peer.link.down.poll(now) {
                if let Err(e) = peer.client.receive(now, &p) {
                    peer.refused += 1;
                    if peer.errors.len() < KEPT_ERRORS {
                        peer.errors.push(e);
                    }
                }
            }
            peer.client.update(now);
            while let Some(tick) = peer.client.next_tick() {
                let input = play.input(peer.id, tick, &mut peer.client);
                peer.client.tick(tick, input);
            }
            while let Some(p) = peer.client.poll_transmit(now) {
                peer.link.up.send(now, p);
            }
            play.frame(peer, now);
        }
        self.now += self.step;
    }
}
