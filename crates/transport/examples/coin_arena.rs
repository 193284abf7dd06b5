//! A coin arena over real UDP on loopback: three players run for a coin; whoever reaches it
//! scores (sent to everyone as a reliable message) and the coin comes back elsewhere under
//! the same id, a new generation. Players chat both ways. Each client predicts its own dot.
//! `cargo run -p lagless-transport --example coin_arena`
use lagless_replication::prelude::*;
use lagless_transport::SessionEvent;
use lagless_transport::{GameClient, GameServer, PROTOCOL_ID, ServerSettings, keys};
use std::time::Duration;

const HZ: u32 = 30;
const COIN: u32 = 100;

/// The rule of motion, the same on both ends. Input bits: right, left, up, down; 5 m/s.
fn step(p: [f32; 2], input: u8) -> [f32; 2] {
    let on = |bit: u8| f32::from(u8::from(input & bit != 0));
    let v = 5.0 / HZ as f32;
    [p[0] + (on(1) - on(2)) * v, p[1] + (on(4) - on(8)) * v]
}

/// Where the coin of generation `g` lies (a fixed walk around the arena).
fn coin_spot(g: u32) -> [f32; 2] {
    let a = g as f32 * 2.4;
    [6.0 * a.cos(), 6.0 * a.sin()]
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

/// Steers toward the coin as this client last heard of it.
fn chase(client: &Client<OwnDot>) -> u8 {
    let me = client.world().1;
    let Some(coin) = client.replication().reader(COIN).map(|mut r| r.vec2()) else {
        return 0;
    };
    let axis = |d: f32, plus: u8, minus: u8| match d {
        d if d > 0.1 => plus,
        d if d < -0.1 => minus,
        _ => 0,
    };
    axis(coin[0] - me[0], 1, 2) | axis(coin[1] - me[1], 4, 8)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dot = Kind::new("dot").vec2("position", 100.0, 0.01);
    let coin = Kind::new("coin").vec2("position", 100.0, 0.01);
    let schema = Schema::new().kind(dot).kind(coin).build()?;
    let (config, key) = (NetConfig::new(HZ), keys::generate_private_key()?);
    let mut server = Server::<u8>::new(schema.clone(), &config)?;
    server.spawn_with_id(COIN, 1, |w| w.vec2(coin_spot(1)))?;
    let settings = ServerSettings::new(PROTOCOL_ID, key, 3);
    let mut host = GameServer::bind(([127, 0, 0, 1], 0).into(), settings, server)?;
    let (addr, mut clients) = (host.local_addr()?, Vec::new());
    for id in 1..=3u32 {
        // Timeouts: the token lives 30 s, a silent connection ends after 5 s.
        let token = keys::issue_token(&key, PROTOCOL_ID, id.into(), vec![addr], 30, 5)?;
        let mut client = Client::new(schema.clone(), OwnDot(id, [0.0; 2]), &config)?;
        client.set_policy(id, Policy::Predicted);
        clients.push((id, GameClient::connect(&token.write()?, client, &config)?));
    }
    let (mut dots, mut scores, mut generation) = ([[0.0f32; 2]; 4], [0u32; 4], 1);
    let end = Duration::from_secs(12);
    while host.now() < end {
        host.update();
        while let Some(event) = host.poll_event() {
            if let SessionEvent::Connected { client, .. } = event {
                let server = host.server_mut();
                server.spawn_with_id(client as u32, 0, |w| w.vec2([0.0; 2]))?;
                server.set_owned(client, &[client as u32]);
            }
        }
        let now = host.now();
        let server = host.server_mut();
        // Chat: whatever a player says goes to everyone, with who said it.
        while let Some((from, _, text)) = server.poll_message() {
            for to in server.session().clients().collect::<Vec<_>>() {
                let line = format!("{from}: {}", String::from_utf8_lossy(&text));
                server.send_message(to, Delivery::Reliable, line.as_bytes())?;
            }
        }
        while let Some(t) = server.next_tick() {
            for (id, input) in t.inputs {
                let p = &mut dots[id as usize];
                *p = step(*p, input.unwrap_or(0));
                server.update_entity(id as u32, |w| w.vec2(*p))?;
                let c = coin_spot(generation);
                if (p[0] - c[0]).hypot(p[1] - c[1]) < 0.5 {
                    // Picked up: the coin comes back elsewhere under the same id.
                    scores[id as usize] += 1;
                    generation += 1;
                    server.despawn(COIN)?;
                    server.spawn_with_id(COIN, 1, |w| w.vec2(coin_spot(generation)))?;
                    let score = [id as u8, scores[id as usize] as u8];
                    for to in server.session().clients().collect::<Vec<_>>() {
                        server.send_message(to, Delivery::Reliable, &score)?;
                    }
                }
            }
            server.send_snapshots(now)?;
        }
        host.transmit();
        for (id, client) in clients.iter_mut().filter(|(_, c)| c.error().is_none()) {
            let input = chase(client.client());
            client.step(|_| input)?;
            if now.as_millis() / 3000 != (now.as_millis() + 5) / 3000 {
                client
                    .client_mut()
                    .send_message(Delivery::Reliable, b"gg")?;
            }
            while let Some((_, bytes)) = client.client_mut().poll_message() {
                match bytes[..] {
                    [player, score] => println!("client {id}: player {player} has {score}"),
                    _ => println!("client {id} reads \"{}\"", String::from_utf8_lossy(&bytes)),
                }
            }
        }
        host.wait_until(host.next_deadline().min(now + Duration::from_millis(5)));
    }
    for (_, client) in &mut clients {
        client.disconnect();
    }
    println!("final scores {:?}, coins {}", &scores[1..], generation - 1);
    host.shutdown();
    Ok(())
}
