//! A loop that sleeps until [`Server::poll_timeout`], [`Client::poll_timeout`] or the
//! next packet, and does nothing in between, plays as well as one that polls: every tick
//! runs on time, snapshots flow, and a link that falls silent is reported interrupted
//! when the client said it would wake.
#![allow(clippy::unwrap_used)]

use lagless_netem::{Duplex, profile};
use lagless_replication::*;
use std::time::Duration;

const HZ: u32 = 30;

fn schema() -> Schema {
    Schema::new()
        .kind(Kind::new("dot").vec2("position", 100.0, 0.01))
        .build()
        .unwrap()
}

#[test]
fn a_loop_woken_only_by_poll_timeout_and_packets_keeps_time_and_sees_the_link_go_silent() {
    let config = NetConfig::new(HZ);
    let mut server = Server::<u8>::new(schema(), &config).unwrap();
    server.connect(1).unwrap();
    let dot = server.spawn(0, |w| w.vec2([0.0, 0.0])).unwrap();
    let mut client = Client::new(schema(), Spectator::default(), &config).unwrap();
    let mut link = Duplex::symmetric(profile("mobile").unwrap(), 3).unwrap();
    let play = Duration::from_secs(10);
    let mut now = Duration::ZERO;
    let (mut wakes, mut server_ticks, mut client_ticks) = (0u32, 0u32, 0u32);
    let mut last_heard = None;
    let mut interrupted_at = None;
    while now <= play + Duration::from_secs(2) {
        wakes += 1;
        while let Some(p) = link.up.poll(now) {
            let _ = server.receive(1, now, &p);
        }
        server.update(now);
        while server.next_tick().is_some() {
            server_ticks += 1;
            let x = server.current_tick().0 as f32 * 0.01;
            server.update_entity(dot, |w| w.vec2([x, 0.0])).unwrap();
            server.send_snapshots(now).unwrap();
        }
        while let Some((_, bytes)) = server.poll_transmit() {
            // After `play` the downlink goes silent: the server's packets are lost.
            if now < play {
                link.down.send(now, bytes);
            }
        }
        while let Some(p) = link.down.poll(now) {
            if client.receive(now, &p).is_ok() {
                last_heard = Some(now);
            }
        }
        client.update(now);
        while let Some(e) = client.poll_link_event() {
            if e.state == LinkState::Interrupted {
                interrupted_at.get_or_insert(now);
            }
        }
        while let Some(t) = client.next_tick() {
            client_ticks += 1;
            client.tick(t, 0);
        }
        while let Some(p) = client.poll_transmit(now) {
            link.up.send(now, p);
        }
        // Sleep until someone has work: nothing else wakes this loop.
        let next = [
            server.poll_timeout(),
            client.poll_timeout(),
            link.up.next_due(),
            link.down.next_due(),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap();
        assert!(next > now, "woken for nothing at {now:?}: {next:?}");
        now = next;
    }
    let seconds = now.as_secs_f64();
    // Every tick ran, on both ends, and the loop never spun.
    let expected = seconds * f64::from(HZ);
    assert!(
        (f64::from(server_ticks) - expected).abs() <= 2.0,
        "{server_ticks} server ticks in {seconds} s"
    );
    assert!(f64::from(client_ticks) > expected - 2.0 * f64::from(HZ));
    let packets = link.up.stats().delivered_packets + link.down.stats().delivered_packets;
    assert!(
        u64::from(wakes) <= 2 * (u64::from(server_ticks + client_ticks) + packets),
        "{wakes} wakes for {server_ticks}+{client_ticks} ticks and {packets} packets"
    );
    // Snapshots flowed while the link was up, and the dot came with them.
    let newest = client.replication().newest().unwrap();
    assert!(f64::from(newest.0) > (play.as_secs_f64() - 1.0) * f64::from(HZ));
    // The silence was reported when the client said it would look, not a tick later.
    let heard = last_heard.unwrap();
    let interrupted = interrupted_at.expect("the silent link was never reported");
    let after = ConnectionConfig::default().interrupted_after;
    assert_eq!(interrupted, heard + after, "heard last at {heard:?}");
}
