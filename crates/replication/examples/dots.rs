//! A toy 2D game on lagless: a server and two clients over the emulated `mobile` network.
//! Each client predicts its own dot and interpolates the other's.
//! `cargo run --release -p lagless-replication --example dots`
use lagless_netem::{Duplex, profile};
use lagless_replication::*;
use std::time::Duration;

const HZ: u32 = 30;

fn schema() -> Schema {
    let dot = Kind::new("dot").vec2("position", 100.0, 0.01);
    Schema::new().kind(dot).build().expect("a valid schema")
}

/// The game's rule, the same on both ends. The input is a bit set: right, left, up, down.
fn step(p: [f32; 2], input: u8) -> [f32; 2] {
    let on = |bit: u8| f32::from(u8::from(input & bit != 0));
    let v = 4.0 / HZ as f32; // 4 m/s
    [p[0] + (on(1) - on(2)) * v, p[1] + (on(4) - on(8)) * v]
}

fn dist(a: [f32; 2], b: [f32; 2]) -> f32 {
    (a[0] - b[0]).hypot(a[1] - b[1])
}

/// What a client predicts: its own dot (entity id, position).
struct OwnDot(u32, [f32; 2]);

impl Rollback for OwnDot {
    type Input = u8;
    type Saved = [f32; 2];
    type Confirmed = ReplicationClient;
    fn advance(&mut self, _: Tick, input: u8) {
        self.1 = step(self.1, input);
    }
    fn save(&self) -> [f32; 2] {
        self.1
    }
    fn diverged(&self, saved: &[f32; 2], server: &ReplicationClient) -> bool {
        let p = server.reader(self.0).map(|mut r| r.vec2());
        p.is_some_and(|p| dist(p, *saved) > 0.02)
    }
    fn load(&mut self, server: &ReplicationClient, _: Option<&[f32; 2]>) {
        if let Some(mut r) = server.reader(self.0) {
            self.1 = r.vec2();
        }
    }
}

impl PredictedWorld for OwnDot {
    fn pose(&self, _: u32) -> Option<Pose> {
        Some(Pose::planar(self.1, 0.0))
    }
}

/// What one client saw: rollbacks; the other dot's distance (cm, median and p99) from the
/// server's at the shown tick; the own dot's from the server's at the end, both idle;
/// snapshots after which the own dot, or the other, as the client held it was not the
/// server's at that tick (the own dot goes in every snapshot until acknowledged; the
/// other once, and again only when the snapshot that carried it was lost).
#[derive(Debug)]
#[allow(dead_code)] // read through Debug
pub(crate) struct Summary {
    pub(crate) rollbacks: u64,
    pub(crate) other_error_cm: [f32; 2],
    pub(crate) own_error_cm: f32,
    pub(crate) stale_views: u64,
    pub(crate) stale_other: u64,
}

/// Plays `seconds` on `network` (a profile) and summarises each client.
pub(crate) fn run(
    network: &str,
    seed: u64,
    seconds: u64,
) -> Result<Vec<Summary>, Box<dyn std::error::Error>> {
    let config = NetConfig::new(HZ);
    let mut server = Server::<u8>::new(schema(), &config)?;
    let mut dots = [[0.0f32; 2]; 2];
    let mut truth = std::collections::BTreeMap::new();
    let mut clients = Vec::new();
    for k in 0..2u32 {
        let id = u64::from(k) + 1;
        server.connect(id)?;
        server.spawn_with_id(k, 0, |w| w.vec2([0.0; 2]))?;
        server.set_owned(id, &[k]);
        let mut client = Client::new(schema(), OwnDot(k, [0.0; 2]), &config)?;
        client.set_policy(k, Policy::Predicted);
        let link = Duplex::symmetric(
            profile(network).ok_or("no profile")?,
            seed * 2 + u64::from(k),
        )?;
        clients.push((client, link, Vec::new(), [0, 0]));
    }
    let (mut now, end) = (Duration::ZERO, Duration::from_secs(seconds));
    while now <= end {
        for (k, (_, link, ..)) in clients.iter_mut().enumerate() {
            while let Some(p) = link.up.poll(now) {
                let _ = server.receive(k as u64 + 1, now, &p); // errors are counted
            }
        }
        server.update(now);
        while let Some(t) = server.next_tick() {
            for (id, input) in t.inputs {
                let k = id as usize - 1;
                dots[k] = step(dots[k], input.unwrap_or(0));
                server.update_entity(k as u32, |w| w.vec2(dots[k]))?;
            }
            truth.insert(server.current_tick().0, dots);
            server.send_snapshots(now)?;
        }
        while let Some((id, bytes)) = server.poll_transmit() {
            clients[id as usize - 1].1.down.send(now, bytes);
        }
        for (k, (client, link, errors, stale)) in clients.iter_mut().enumerate() {
            while let Some(p) = link.down.poll(now) {
                let newest = client.replication().newest();
                let _ = client.receive(now, &p);
                // After each snapshot, both dots as the server had them at its tick.
                let r = client.replication();
                if let Some(t) = r.newest().filter(|t| Some(*t) != newest) {
                    let held = |id| r.reader(id).map(|mut r| r.vec2());
                    for (n, id) in [k, 1 - k].into_iter().enumerate() {
                        let p = held(id as u32);
                        stale[n] += u64::from(p.is_none_or(|p| dist(p, truth[&t.0][id]) > 0.01));
                    }
                }
            }
            client.update(now);
            while let Some(t) = client.next_tick() {
                // Circle for most of the run, then stand still.
                let phase = (t.0 / HZ) as usize + k;
                let moving = now + Duration::from_secs(2) < end;
                client.tick(t, if moving { [1, 4, 2, 8][phase % 4] } else { 0 });
            }
            while let Some(p) = client.poll_transmit(now) {
                link.up.send(now, p);
            }
            // The other dot as shown, against the server's at the shown (fractional) tick.
            let (render, other) = (client.render(now), 1 - k);
            let at = |t: f64| truth.get(&(t as u32)).map(|d: &[[f32; 2]; 2]| d[other]);
            let real = render
                .render_tick
                .and_then(|t| Some((at(t)?, at(t + 1.0)?, t.fract())));
            if let (Some(shown), Some((a, b, f))) = (render.pose(other as u32), real) {
                let (p, f) = (shown.planar_position(), f as f32);
                let e = [0, 1].map(|i| p[i] - a[i] - (b[i] - a[i]) * f);
                errors.push(dist(e, [0.0; 2]) * 100.0);
            }
        }
        now += Duration::from_millis(5);
    }
    let mut summaries = Vec::new();
    for (k, (mut client, _, mut errors, stale_views)) in clients.into_iter().enumerate() {
        errors.sort_by(f32::total_cmp);
        let q = |p: usize| errors[(errors.len() - 1) * p / 100];
        let own = client.render(now).pose(k as u32);
        summaries.push(Summary {
            rollbacks: client.prediction_stats().rollbacks,
            other_error_cm: [q(50), q(99)],
            own_error_cm: own.map_or(f32::NAN, |p| dist(p.planar_position(), dots[k]) * 100.0),
            stale_views: stale_views[0],
            stale_other: stale_views[1],
        });
    }
    Ok(summaries)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for (k, summary) in run("mobile", 0, 20)?.iter().enumerate() {
        println!("client {}: {summary:?}", k + 1);
    }
    Ok(())
}
