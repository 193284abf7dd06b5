//! Every input message repeats the inputs the server has not acknowledged, so lost
//! packets cost nothing: under 25% loss the server still applies every input.

mod common;

use common::Harness;
use lagless_core::{ClientConfig, LeadPolicy, ServerConfig, SyncConfig, Tick};
use lagless_netem::profile;
use std::time::Duration;

/// A client that keeps 6 ticks of input buffered at the server: deep enough to ride
/// 25% loss or a short blackout without a late input.
fn buffered_client() -> ClientConfig {
    ClientConfig {
        sync: SyncConfig {
            lead: LeadPolicy::Fixed {
                buffer_ticks: 6.0,
                jitter_factor: 1.0,
            },
            ..SyncConfig::default()
        },
        ..ClientConfig::default()
    }
}

fn input_for(tick: Tick) -> u8 {
    // A varied but deterministic pattern, so a substituted input would show.
    ((tick.0 / 7) % 4) as u8
}

#[test]
fn lossy_link_loses_no_input() {
    for seed in [1u64, 2, 3] {
        let client = buffered_client();
        let mut h = Harness::new(
            ServerConfig::default(),
            client,
            profile("lossy").unwrap(),
            1,
            seed,
        );
        h.run_until(Duration::from_secs(20), &mut |_, t| input_for(t));
        let c = &h.clients[0];
        let lost = c.link.up.stats().lost_packets as f64 / c.link.up.stats().sent_packets as f64;
        assert!(
            lost > 0.2,
            "seed {seed}: the link really lost packets ({lost})"
        );
        let s = h.server.client_stats(1).unwrap();
        assert_eq!(s.ticks_starved, 0, "seed {seed}: {s:?}");
        assert_eq!(s.inputs_late, 0, "seed {seed}: {s:?}");
        // Exactly the inputs the client produced were applied, tick for tick.
        let applied = &h.applied[&1];
        assert!(applied.len() > 1000);
        for (&tick, &i) in applied {
            assert_eq!(i, input_for(tick), "seed {seed}: tick {tick}");
        }
        // Redundant copies were sent and recognised.
        assert!(s.inputs_redundant > 0);
        // The server tells the uplink's loss from the sequence numbers alone, as the link
        // saw it (within the few packets still in flight at the end).
        let up = c.link.up.stats();
        let valid = s.packets_received - s.packets_rejected;
        let told = s.packets_expected - valid;
        assert!(
            told.abs_diff(up.lost_packets) <= 8,
            "seed {seed}: server counts {told} lost, the link lost {}",
            up.lost_packets
        );
    }
}

#[test]
fn redundancy_is_capped_and_acks_shrink_messages() {
    let mut h = Harness::new(
        ServerConfig::default(),
        ClientConfig::default(),
        profile("lan").unwrap(),
        1,
        5,
    );
    h.run_until(Duration::from_secs(3), &mut |_, t| input_for(t));
    let st = h.clients[0].session.stats();
    // On a clean 1 ms link only a few unacknowledged inputs ride along per message.
    let per_msg = st.inputs_sent as f64 / st.packets_sent as f64;
    assert!(per_msg < 6.0, "{per_msg} inputs per message");

    // With the server silent (everything lost downstream), messages grow to the cap and stop.
    let mut h = Harness::new(
        ServerConfig::default(),
        ClientConfig::default(),
        profile("lan").unwrap(),
        1,
        5,
    );
    h.run_until(Duration::from_secs(2), &mut |_, t| input_for(t));
    let blackout = lagless_netem::LinkConfig {
        loss: lagless_netem::Loss::Uniform { rate: 1.0 },
        ..lagless_netem::LinkConfig::default()
    };
    h.clients[0].link.down = lagless_netem::Link::new(blackout, 1).unwrap();
    // Let the messages grow to the cap, then measure.
    h.run_until(Duration::from_secs(3), &mut |_, t| input_for(t));
    let before = h.clients[0].session.stats();
    h.run_until(Duration::from_secs(5), &mut |_, t| input_for(t));
    let after = h.clients[0].session.stats();
    let per_msg = (after.inputs_sent - before.inputs_sent) as f64
        / (after.packets_sent - before.packets_sent) as f64;
    let cap = ClientConfig::default().max_inputs_per_message as f64;
    assert!(per_msg == cap, "{per_msg} per message, cap {cap}");
}

#[test]
fn a_lost_burst_is_recovered() {
    // Every uplink packet is lost for 70 ms (4-5 input messages in a row). The next
    // message that gets through carries all their inputs, early enough to be applied.
    let client = buffered_client();
    let link = lagless_netem::LinkConfig {
        delay: Duration::from_millis(30),
        ..lagless_netem::LinkConfig::default()
    };
    let mut h = Harness::new(ServerConfig::default(), client, link.clone(), 1, 8);
    h.run_until(Duration::from_secs(2), &mut |_, t| input_for(t));
    let dead = lagless_netem::LinkConfig {
        loss: lagless_netem::Loss::Uniform { rate: 1.0 },
        ..link.clone()
    };
    let working = std::mem::replace(
        &mut h.clients[0].link.up,
        lagless_netem::Link::new(dead, 1).unwrap(),
    );
    h.run_until(Duration::from_millis(2070), &mut |_, t| input_for(t));
    let lost = h.clients[0].link.up.stats().lost_packets;
    assert!(lost >= 4, "{lost} packets lost in the burst");
    // Packets already in flight on the working link are delivered as it is swapped back.
    h.clients[0].link.up = working;
    h.run_until(Duration::from_secs(4), &mut |_, t| input_for(t));
    let s = h.server.client_stats(1).unwrap();
    assert_eq!(s.ticks_starved, 0, "{s:?}");
    for (&tick, &i) in &h.applied[&1] {
        assert_eq!(i, input_for(tick), "tick {tick}");
    }
}
