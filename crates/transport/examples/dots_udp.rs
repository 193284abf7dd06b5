//! lagless-replication's `dots` game over real UDP on loopback: a server and two clients
//! in one loop, each predicting its own dot. `cargo run -p lagless-transport --example dots_udp`
use lagless_replication::*;
use lagless_transport::{GameClient, GameServer, PROTOCOL_ID, ServerSettings, keys};
use lagless_transport::{SessionEvent, SessionStats};
use std::{collections::BTreeMap, collections::BTreeSet, time::Duration};

const HZ: u32 = 30;

/// The game's rule, the same on both ends. The input is a bit set: right, left, up, down.
fn step(p: [f32; 2], input: u8) -> [f32; 2] {
    let on = |bit: u8| f32::from(u8::from(input & bit != 0));
    let v = 4.0 / HZ as f32; // 4 m/s
    [p[0] + (on(1) - on(2)) * v, p[1] + (on(4) - on(8)) * v]
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
        let p = server.reader(self.0).map_or(*saved, |mut r| r.vec2());
        (p[0] - saved[0]).hypot(p[1] - saved[1]) > 0.02
    }
    fn load(&mut self, server: &ReplicationClient, _: Option<&[f32; 2]>) {
        self.1 = server.reader(self.0).map_or(self.1, |mut r| r.vec2());
    }
}

impl PredictedWorld for OwnDot {
    fn pose(&self, _: u32) -> Option<Pose> {
        Some(Pose::planar(self.1, 0.0))
    }
}

/// What the run saw.
#[derive(Debug, Default)]
pub struct Summary {
    /// (client, dot) for every spawn a client saw.
    pub spawned: BTreeSet<(u32, u32)>,
    /// Where each client showed its own dot at the end, after standing still.
    pub shown: BTreeMap<u32, [f32; 2]>,
    /// Where the server had each dot at the end.
    pub dots: BTreeMap<u32, [f32; 2]>,
    /// The server's counters.
    pub stats: SessionStats,
}

/// Plays `seconds` (circling, then still for the last 1.5 s), then runs until both left.
pub fn run(seconds: f64) -> Result<Summary, Box<dyn std::error::Error>> {
    let dot = Kind::new("dot").vec2("position", 100.0, 0.01);
    let schema = Schema::new().kind(dot).build()?;
    let (config, key) = (NetConfig::new(HZ), keys::generate_private_key()?);
    let server = Server::<u8>::new(schema.clone(), &config)?;
    let settings = ServerSettings::new(PROTOCOL_ID, key, 2);
    let mut host = GameServer::bind(([127, 0, 0, 1], 0).into(), settings, server)?;
    let (mut clients, addr) = (Vec::new(), host.local_addr()?);
    for id in [1u32, 2] {
        let token = keys::issue_token(&key, PROTOCOL_ID, id.into(), vec![addr], 30, 5)?.write()?;
        let mut client = Client::new(schema.clone(), OwnDot(id, [0.0; 2]), &config)?;
        client.set_policy(id, Policy::Predicted);
        clients.push((id, GameClient::connect(&token, client, &config)?));
    }
    let (mut summary, end) = (Summary::default(), Duration::from_secs_f64(seconds));
    while host.stats().disconnects < 2 && host.now() < end + Duration::from_secs(2) {
        host.update();
        while let Some(event) = host.poll_event() {
            let server = host.server_mut();
            match event {
                SessionEvent::Connected { client, .. } => {
                    server.spawn_with_id(client as u32, 0, |w| w.vec2([0.0; 2]))?;
                    server.set_owned(client, &[client as u32]);
                }
                SessionEvent::Disconnected { client, .. } => server.despawn(client as u32)?,
                // No resume grace is set here: a timed-out client leaves at once.
                SessionEvent::Second(_)
                | SessionEvent::Away { .. }
                | SessionEvent::Resumed { .. } => {}
            }
        }
        let now = host.now();
        while let Some(t) = host.server_mut().next_tick() {
            for (id, input) in t.inputs {
                let p = summary.dots.entry(id as u32).or_default();
                *p = step(*p, input.unwrap_or(0));
                host.server_mut().update_entity(id as u32, |w| w.vec2(*p))?;
            }
            host.server_mut().send_snapshots(now)?;
        }
        host.transmit();
        let moving = u8::from(now + Duration::from_millis(1500) < end);
        for (id, client) in clients.iter_mut().filter(|(_, c)| c.error().is_none()) {
            if now >= end {
                let shown = client.render().pose(*id).map(|p| p.planar_position());
                summary.shown.extend(shown.map(|p| (*id, p)));
                client.disconnect();
                continue;
            }
            client.step(|t| moving * [1, 4, 2, 8][(t.0 / HZ + *id) as usize % 4])?;
            let events = std::iter::from_fn(|| client.client_mut().poll_event());
            let spawned = events.filter(|e| matches!(e, EntityEvent::Spawned { .. }));
            summary.spawned.extend(spawned.map(|e| (*id, e.id())));
        }
        // The clients tick at the server's rate; a few ms is soon enough for them.
        host.wait_until(host.next_deadline().min(now + Duration::from_millis(5)));
    }
    summary.stats = host.stats();
    host.shutdown();
    Ok(summary)
}

fn main() {
    println!("{:#?}", run(5.0).expect("the game runs"));
}
