//! A toy game driven over the network emulator on a virtual clock.
//!
//! The game: each client's player has an integer position; input `n` adds `n`. The
//! snapshot payload is the positions, padded to `payload_bytes` so tests can force
//! fragmentation.
#![allow(dead_code, clippy::unwrap_used)]

use lagless_core::{ClientConfig, ClientId, ClientSession, ServerConfig, ServerSession, Tick};
use lagless_netem::{Duplex, LinkConfig, derive_seed};
use std::collections::BTreeMap;
use std::time::Duration;

pub struct Client {
    pub id: ClientId,
    pub session: ClientSession<u8>,
    pub link: Duplex,
    pub shown: Option<(Tick, i64)>,
    pub snapshot_ticks: Vec<Tick>,
    pub errors: u64,
}

pub struct Harness {
    pub server: ServerSession<u8>,
    pub clients: Vec<Client>,
    pub positions: BTreeMap<ClientId, i64>,
    /// Inputs the server applied, per client, by tick.
    pub applied: BTreeMap<ClientId, BTreeMap<Tick, u8>>,
    /// Ticks simulated with the client's own input (not a guess), per client.
    pub fed: BTreeMap<ClientId, Vec<Tick>>,
    /// Inputs handed over late, per client: (the tick simulated then, the input's tick,
    /// the input).
    pub late: BTreeMap<ClientId, Vec<(Tick, Tick, u8)>>,
    pub now: Duration,
    pub payload_bytes: usize,
    pub server_errors: u64,
}

impl Harness {
    pub fn new(
        server: ServerConfig,
        client: ClientConfig,
        link: LinkConfig,
        clients: u64,
        seed: u64,
    ) -> Self {
        let mut s = ServerSession::new(server);
        let mut cs = Vec::new();
        let mut positions = BTreeMap::new();
        for id in 1..=clients {
            s.add_client(id).unwrap();
            positions.insert(id, 0);
            cs.push(Client {
                id,
                session: ClientSession::new(client.clone()),
                link: Duplex::symmetric(link.clone(), derive_seed(seed, id)).unwrap(),
                shown: None,
                snapshot_ticks: Vec::new(),
                errors: 0,
            });
        }
        Self {
            server: s,
            clients: cs,
            positions,
            applied: BTreeMap::new(),
            fed: BTreeMap::new(),
            late: BTreeMap::new(),
            now: Duration::ZERO,
            payload_bytes: 16,
            server_errors: 0,
        }
    }

    /// Runs until `until`, with `input(client, tick)` choosing each client's input.
    pub fn run_until(&mut self, until: Duration, input: &mut dyn FnMut(ClientId, Tick) -> u8) {
        let step = Duration::from_micros(500);
        while self.now < until {
            let now = self.now;
            for c in &mut self.clients {
                while let Some(p) = c.link.up.poll(now) {
                    if self.server.handle_packet(c.id, now, &p).is_err() {
                        self.server_errors += 1;
                    }
                }
            }
            self.server.update(now);
            while let Some(step) = self.server.next_tick() {
                for &(id, tick, input) in &step.late {
                    self.late
                        .entry(id)
                        .or_default()
                        .push((step.tick, tick, input));
                }
                for (id, i) in &step.inputs {
                    if step.is_fed(*id) {
                        self.fed.entry(*id).or_default().push(step.tick);
                    }
                    if let Some(i) = i {
                        *self.positions.get_mut(id).unwrap() += i64::from(*i);
                        self.applied.entry(*id).or_default().insert(step.tick, *i);
                    }
                }
                if self.server.snapshot_due() {
                    let mut payload = Vec::new();
                    for p in self.positions.values() {
                        payload.extend_from_slice(&p.to_le_bytes());
                    }
                    payload.resize(self.payload_bytes.max(payload.len()), 0xAB);
                    for c in &self.clients {
                        self.server.send_snapshot(c.id, now, &payload).unwrap();
                    }
                }
            }
            while let Some((id, bytes)) = self.server.poll_transmit() {
                self.clients[(id - 1) as usize].link.down.send(now, bytes);
            }
            for c in &mut self.clients {
                while let Some(p) = c.link.down.poll(now) {
                    if c.session.handle_packet(now, &p).is_err() {
                        c.errors += 1;
                    }
                }
                while let Some(s) = c.session.poll_snapshot() {
                    let k = (c.id - 1) as usize * 8;
                    let v = i64::from_le_bytes(s.payload[k..k + 8].try_into().unwrap());
                    c.snapshot_ticks.push(s.tick);
                    c.shown = Some((s.tick, v));
                }
                c.session.update(now);
                while let Some(t) = c.session.next_tick() {
                    c.session.set_input(t, input(c.id, t));
                }
                while let Some(p) = c.session.poll_transmit(now) {
                    c.link.up.send(now, p);
                }
            }
            self.now += step;
        }
    }
}
