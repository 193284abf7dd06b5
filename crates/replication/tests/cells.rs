//! Spatial cells (`set_cells`, `set_interest`): an entity outside a client's interest is
//! never decoded by it, leaving the interest despawns it on the client and coming back
//! sends it whole, over a lossy link; a far entity's changes cost the client no visit;
//! and cells that cover the whole world give the bytes of cells off.
#![allow(clippy::unwrap_used)]

mod common;

use lagless_netem::{Duplex, profile};
use lagless_replication::*;
use std::time::Duration;

const HZ: u32 = 64;

fn schema() -> Schema {
    Schema::new()
        .kind(
            Kind::new("dot")
                .vec2("position", 200.0, 0.01)
                .int("value", 0, 1_000_000),
        )
        .build()
        .unwrap()
}

/// 4 m cells; a client sees what lies within 6 m of its focus (cells from -8 to 8 m).
const CELLS: CellConfig = CellConfig {
    size: 4.0,
    radius: 6.0,
};

/// Entity 15 stays 60 m away from client 1 throughout.
const FAR: u32 = 15;
/// Entity 7 leaves client 1's interest at [`OUT`] and comes back at [`BACK`].
const ROAMER: u32 = 7;
const OUT: Duration = Duration::from_secs(2);
const BACK: Duration = Duration::from_secs(5);
/// The entities stop changing here, so the end state can be compared.
const STILL: Duration = Duration::from_secs(7);
const END: Duration = Duration::from_secs(9);

/// Where entity `e` is at `now` on tick `t`.
fn place(e: u32, now: Duration, t: u32) -> [f32; 2] {
    let wobble = (t % 100) as f32 * 0.01;
    match e {
        FAR => [60.0, wobble],
        ROAMER if now >= OUT && now < BACK => [40.0, wobble],
        _ => [e as f32 * 0.3, wobble],
    }
}

/// What client 1 saw of the roamer and the far entity over the run.
#[derive(Default)]
struct Seen {
    far_ever: bool,
    roamer_despawned: bool,
    roamer_respawned: bool,
    /// Steps of the stretch out of interest (well after [`OUT`]) where client 1 held it.
    roamer_held_while_out: u32,
}

/// One step of the server at `now`: inputs in, ticks stepped (entities moved until
/// [`STILL`]), packets out onto the links.
fn step_server(
    server: &mut Server<u8>,
    clients: &mut [(Client<Spectator<u8>>, Duplex)],
    now: Duration,
) {
    for (k, (_, link)) in clients.iter_mut().enumerate() {
        while let Some(p) = link.up.poll(now) {
            let _ = server.receive(k as ClientId + 1, now, &p);
        }
    }
    server.update(now);
    while server.next_tick().is_some() {
        let t = server.current_tick().0;
        if now < STILL {
            for e in 0..20u32 {
                server
                    .update_entity(e, |w| {
                        w.vec2(place(e, now, t));
                        w.int(1000 + e as i32 + t as i32);
                    })
                    .unwrap();
            }
        }
        server.send_snapshots(now).unwrap();
    }
    while let Some((to, p)) = server.poll_transmit() {
        clients[to as usize - 1].1.down.send(now, p);
    }
}

#[test]
fn leaving_the_interest_despawns_and_coming_back_sends_the_whole_entity() {
    let config = NetConfig::new(HZ);
    let mut server = Server::<u8>::new(schema(), &config).unwrap();
    server.set_cells(Some(CELLS));
    for e in 0..20u32 {
        server
            .spawn_with_id(e, 0, |w| {
                w.vec2(place(e, Duration::ZERO, 0));
                w.int(1000 + e as i32);
            })
            .unwrap();
    }
    let mut clients: Vec<(Client<Spectator<u8>>, Duplex)> = (1..=2)
        .map(|id| {
            server.connect(id).unwrap();
            let c = Client::new(schema(), Spectator::default(), &config).unwrap();
            (c, Duplex::symmetric(profile("lossy").unwrap(), id).unwrap())
        })
        .collect();
    // Client 1 stands at the origin; client 2 sees every cell.
    server.set_focus(1, Some([0.0; 3]));
    server.set_interest(2, Some(Interest::Everything));
    assert!(!server.in_interest(1, FAR) && server.in_interest(2, FAR));
    let mut seen = Seen::default();
    let mut now = Duration::ZERO;
    while now < END {
        step_server(&mut server, &mut clients, now);
        for (k, (client, link)) in clients.iter_mut().enumerate() {
            common::step_spectator(client, link, now);
            let out = now >= OUT && now < BACK;
            while let Some(event) = client.poll_event() {
                match event {
                    EntityEvent::Spawned { id, .. } if id == FAR && k == 0 => seen.far_ever = true,
                    EntityEvent::Despawned { id, .. } if id == ROAMER && k == 0 && out => {
                        seen.roamer_despawned = true
                    }
                    EntityEvent::Spawned { id, .. } if id == ROAMER && k == 0 && now >= BACK => {
                        seen.roamer_respawned = true
                    }
                    _ => {}
                }
            }
            if k == 0 {
                seen.far_ever |= client.replication().get(FAR).is_some();
                let settled = OUT + Duration::from_millis(1500);
                if now >= settled && out && client.replication().get(ROAMER).is_some() {
                    seen.roamer_held_while_out += 1;
                }
            }
        }
        now += Duration::from_millis(5);
    }
    let one = clients[0].0.replication();
    let two = clients[1].0.replication();
    assert!(!seen.far_ever, "client 1 decoded the far entity");
    assert!(seen.roamer_despawned, "no despawn when the roamer left");
    assert_eq!(seen.roamer_held_while_out, 0);
    assert!(seen.roamer_respawned, "no spawn when the roamer came back");
    // Back in the interest, every near entity (the roamer too) holds the server's
    // state on client 1; client 2 holds every entity.
    for e in 0..20u32 {
        let (_, codes) = server.replication().codes(e).unwrap();
        if e != FAR {
            assert_eq!(
                &one.get(e).unwrap().codes[..],
                codes,
                "entity {e}, client 1"
            );
        }
        assert_eq!(
            &two.get(e).unwrap().codes[..],
            codes,
            "entity {e}, client 2"
        );
    }
    assert!(clients[0].1.down.stats().lost_packets > 10);
}

/// A server with 10 entities near the origin and 200 around (80, 0), every one changing
/// every tick, and two clients: 1 at the origin, 2 at (80, 0). Returns each client's
/// entities visited per snapshot over the last 64 ticks, each acknowledging every
/// snapshot at once.
fn visits(cells: Option<CellConfig>) -> [f64; 2] {
    let mut server = ReplicationServer::new(schema(), ReplicationConfig::default());
    server.set_cells(cells);
    let at = |e: u32, t: u32| {
        let wobble = (t % 50) as f32 * 0.02;
        if e < 10 {
            [e as f32 * 0.5, wobble]
        } else {
            [80.0 + (e % 20) as f32 * 0.2, (e / 20) as f32 * 0.2 + wobble]
        }
    };
    for e in 0..210u32 {
        server
            .spawn_with_id(e, 0, |w| {
                w.vec2(at(e, 0));
                w.int(0);
            })
            .unwrap();
    }
    for (c, focus) in [(1, [0.0, 0.0, 0.0]), (2, [80.0, 0.0, 0.0])] {
        server.add_client(c);
        server.set_focus(c, Some(focus));
    }
    let mut before = [0u64; 2];
    for t in 1..=128u32 {
        for e in 0..210u32 {
            server
                .update(e, |w| {
                    w.vec2(at(e, t));
                    w.int(t as i32);
                })
                .unwrap();
        }
        let now = Duration::from_millis(u64::from(t) * 1000 / 64);
        for c in [1, 2] {
            server.encode(c, Tick(t), now).unwrap();
            server.acknowledge(c, Tick(t), now);
        }
        if t == 64 {
            before = [1, 2].map(|c| server.client_stats(c).unwrap().visited);
        }
    }
    let after = [1, 2].map(|c| server.client_stats(c).unwrap().visited);
    [0, 1].map(|k| (after[k] - before[k]) as f64 / 64.0)
}

#[test]
fn far_changes_cost_a_client_nothing() {
    let [near, far] = visits(Some(CELLS));
    // Client 1 looks at its 10 neighbours alone, client 2 at its 200.
    assert!(near <= 10.0, "client 1 visited {near} a snapshot");
    assert!((200.0..=210.0).contains(&far), "client 2 visited {far}");
    // With cells off, both look at every changed entity.
    let [near_off, far_off] = visits(None);
    assert!(
        near_off >= 210.0 && far_off >= 210.0,
        "{near_off} {far_off}"
    );
}

#[test]
fn named_cells_and_the_default_interest() {
    let mut server = ReplicationServer::new(schema(), ReplicationConfig::default());
    server.set_cells(Some(CELLS));
    for e in 0..4u32 {
        // One entity in each of four cells 20 m apart.
        server
            .spawn_with_id(e, 0, |w| {
                w.vec2([e as f32 * 20.0, 1.0]);
                w.int(0);
            })
            .unwrap();
    }
    server.add_client(1);
    let mut client = ReplicationClient::new(schema(), ClientConfig::default());
    let mut tick = 0;
    let mut held = |server: &mut ReplicationServer| {
        tick += 1;
        let now = Duration::from_millis(tick * 20);
        let snap = server.encode(1, Tick(tick as u32), now).unwrap();
        client.receive(Tick(tick as u32), &snap.bytes).unwrap();
        server.acknowledge(1, Tick(tick as u32), now);
        client.entities().map(|(id, _)| id).collect::<Vec<_>>()
    };
    // No focus: no cell.
    assert_eq!(held(&mut server), Vec::<u32>::new());
    server.set_focus(1, Some([41.0, 0.0, 0.0]));
    assert_eq!(held(&mut server), vec![2]);
    let cells = [[20.0, 1.0, 0.0], [60.0, 1.0, 0.0]].map(|p| server.cell_of(p).unwrap());
    server.set_interest(1, Some(Interest::Cells(cells.to_vec())));
    assert_eq!(held(&mut server), vec![1, 3]);
    server.set_interest(1, Some(Interest::Everything));
    assert_eq!(held(&mut server), vec![0, 1, 2, 3]);
    // Back to the default, around the focus; then cells off: everything.
    server.set_interest(1, None);
    assert_eq!(held(&mut server), vec![2]);
    server.set_cells(None);
    assert_eq!(held(&mut server), vec![0, 1, 2, 3]);
    assert!(server.cell_of([0.0; 3]).is_none() && server.in_interest(1, 0));
}

/// A busy world (spawns, despawns, moving entities, four clients moving, acknowledgements
/// lost now and then, the default budget) on `threads` threads, `setup` applied once the
/// clients are added: every client's snapshot bytes, tick by tick.
fn busy_world(setup: impl Fn(&mut ReplicationServer), threads: usize) -> Vec<Vec<u8>> {
    let config = ReplicationConfig {
        threads,
        ..ReplicationConfig::default()
    };
    let mut server = ReplicationServer::new(schema(), config);
    let clients: Vec<ClientId> = (1..=4).collect();
    for &c in &clients {
        server.add_client(c);
    }
    setup(&mut server);
    let at = |e: u32, t: u32| {
        let phase = e as f32 * 0.7 + t as f32 * 0.02;
        let r = 5.0 + (e % 7) as f32 * 4.0;
        [r * phase.cos(), r * phase.sin()]
    };
    let mut out = Vec::new();
    for t in 1..=300u32 {
        for e in 0..120u32 {
            let live = server.codes(e).is_some();
            // Entities come and go: each is away for 20 ticks of every 97.
            let away = (t + e * 13) % 97 < 20;
            match (live, away) {
                (true, true) => server.despawn(e).unwrap(),
                (false, false) => server
                    .spawn_with_id(e, 0, |w| {
                        w.vec2(at(e, t));
                        w.int(0);
                    })
                    .unwrap(),
                (true, false) if (t + e) % 3 != 0 => {
                    server
                        .update(e, |w| {
                            w.vec2(at(e, t));
                            w.int(t as i32);
                        })
                        .unwrap();
                }
                _ => {}
            }
        }
        let now = Duration::from_millis(u64::from(t) * 1000 / 64);
        for &c in &clients {
            let a = at(c as u32 * 31, t);
            server.set_focus(c, Some([a[0], a[1], 0.0]));
            let age = 2 + (t + c as u32) % 4;
            if t > age && (t * c as u32) % 11 != 0 {
                server.acknowledge(c, Tick(t - age), now);
            }
        }
        for s in server.encode_many(&clients, Tick(t), now) {
            out.push(s.unwrap().bytes);
        }
    }
    out
}

#[test]
fn cells_covering_the_world_give_the_bytes_of_cells_off() {
    let off = busy_world(|_| {}, 1);
    let whole = |s: &mut ReplicationServer| {
        s.set_cells(Some(CellConfig {
            size: 5.0,
            radius: 1000.0,
        }))
    };
    assert!(off == busy_world(whole, 1), "a radius covering the world");
    assert!(off == busy_world(whole, 2), "the same on two threads");
    let everything = |s: &mut ReplicationServer| {
        s.set_cells(Some(CELLS));
        for c in 1..=4 {
            s.set_interest(c, Some(Interest::Everything));
        }
    };
    assert!(off == busy_world(everything, 2), "Interest::Everything");
    // A 6 m interest in a world 60 m across does leave things out.
    let near = busy_world(|s| s.set_cells(Some(CELLS)), 1);
    let bytes = |v: &[Vec<u8>]| v.iter().map(Vec::len).sum::<usize>();
    assert!(
        bytes(&near) * 2 < bytes(&off),
        "{} {}",
        bytes(&near),
        bytes(&off)
    );
}

/// A runner (with a declared velocity) going back and forth at 8 m/s across client 1's
/// interest, and a jumper teleporting every half second between a place out of the
/// interest and one in it, as a respawned player does.
fn crossing_schema() -> Schema {
    Schema::new()
        .kind(
            Kind::new("runner")
                .vec2("position", 200.0, 0.01)
                .vec2("velocity", 50.0, 0.01)
                .velocity_of("position"),
        )
        .build()
        .unwrap()
}

const RUNNER: u32 = 1;
const JUMPER: u32 = 2;

/// Entity `e`'s position and velocity on tick `t`.
fn crossing(e: u32, t: u32) -> ([f32; 2], [f32; 2]) {
    let secs = t as f32 / HZ as f32;
    if e == RUNNER {
        // A triangle wave between -14 and 14 m: straight through the interest (-8..8 m
        // with these cells), turning outside it.
        let period = 28.0 / 8.0 * 2.0;
        let phase = secs % period;
        if phase < period / 2.0 {
            ([-14.0 + 8.0 * phase, 1.0], [8.0, 0.0])
        } else {
            ([14.0 - 8.0 * (phase - period / 2.0), 1.0], [-8.0, 0.0])
        }
    } else if (t / (HZ / 2)) % 2 == 0 {
        ([40.0, 3.0], [0.0; 2])
    } else {
        ([2.0, 3.0], [0.0; 2])
    }
}

#[test]
fn an_entity_entering_or_leaving_the_interest_is_shown_where_it_was_at_the_render_tick() {
    let config = NetConfig::new(HZ);
    let mut server = Server::<u8>::new(crossing_schema(), &config).unwrap();
    server.set_cells(Some(CELLS));
    for e in [RUNNER, JUMPER] {
        let (p, v) = crossing(e, 0);
        server
            .spawn_with_id(e, 0, |w| {
                w.vec2(p);
                w.vec2(v);
            })
            .unwrap();
    }
    server.connect(1).unwrap();
    server.set_focus(1, Some([0.0; 3]));
    let mut client = Client::new(crossing_schema(), Spectator::<u8>::default(), &config).unwrap();
    let mut link = Duplex::symmetric(profile("lan").unwrap(), 1).unwrap();
    // The server's truth, tick by tick: where each entity was and whether it was in
    // client 1's interest.
    let mut truth: Vec<[([f32; 2], bool); 2]> = Vec::new();
    let (mut worst, mut shown, mut entered) = ([0.0f32; 2], [0u32; 2], 0u32);
    let mut was_shown = false;
    let mut now = Duration::ZERO;
    while now < Duration::from_secs(10) {
        while let Some(p) = link.up.poll(now) {
            let _ = server.receive(1, now, &p);
        }
        server.update(now);
        while server.next_tick().is_some() {
            let t = server.current_tick().0;
            for e in [RUNNER, JUMPER] {
                let (p, v) = crossing(e, t);
                server
                    .update_entity(e, |w| {
                        w.vec2(p);
                        w.vec2(v);
                    })
                    .unwrap();
            }
            truth.resize(t as usize + 1, [([f32::NAN; 2], false); 2]);
            truth[t as usize] =
                [RUNNER, JUMPER].map(|e| (crossing(e, t).0, server.in_interest(1, e)));
            server.send_snapshots(now).unwrap();
        }
        while let Some((_, p)) = server.poll_transmit() {
            link.down.send(now, p);
        }
        common::step_spectator(&mut client, &mut link, now);
        let render = client.render(now);
        if let (Some(r), Some(kind)) = (render.render_tick, render.kind) {
            if matches!(
                kind,
                lagless_core::interpolation::SampleKind::Interpolated { .. }
            ) {
                let (t0, f) = (r.floor() as usize, (r - r.floor()) as f32);
                for (k, e) in [RUNNER, JUMPER].into_iter().enumerate() {
                    let Some(pose) = render.frame.pose(e) else {
                        if e == JUMPER {
                            was_shown = false;
                        }
                        continue;
                    };
                    let (Some(a), Some(b)) = (truth.get(t0), truth.get(t0 + 1)) else {
                        continue;
                    };
                    // The runner moves in straight lines between ticks; the jumper holds
                    // still between its jumps, so a jump happens at a tick, not across one.
                    let at = match e {
                        RUNNER => [0, 1].map(|i| a[k].0[i] + (b[k].0[i] - a[k].0[i]) * f),
                        _ => a[k].0,
                    };
                    let error = ((pose.position[0] - at[0]).powi(2)
                        + (pose.position[1] - at[1]).powi(2))
                    .sqrt();
                    worst[k] = worst[k].max(error);
                    shown[k] += 1;
                    if e == JUMPER && !was_shown {
                        entered += 1;
                        was_shown = true;
                    }
                }
            }
        }
        now += Duration::from_millis(4);
    }
    // Shown only where it was: quantization (1 cm) and the Hermite curve's rounding.
    assert!(worst[0] < 0.03, "the runner was shown {} m off", worst[0]);
    assert!(worst[1] < 0.03, "the jumper was shown {} m off", worst[1]);
    // And shown: the runner about 4 s of the 10 in the interest, the jumper half the
    // time, entering 10 times.
    assert!(shown[0] > 500 && shown[1] > 500, "{shown:?}");
    assert!(entered >= 9, "the jumper entered {entered} times");
}
