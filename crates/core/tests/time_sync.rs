//! The client clock runs ahead of the server by about RTT/2 plus the input buffer, with
//! the RTT measured from the traffic, so inputs arrive before the server needs them.

mod common;

use common::Harness;
use lagless_core::{ClientConfig, LeadPolicy, ServerConfig};
use lagless_netem::{LinkConfig, profile};
use std::time::Duration;

fn lead_ticks(h: &Harness) -> f64 {
    let c = &h.clients[0].session;
    let server = h.server.current_tick().0 as f64;
    c.current_tick().0 as f64 - server
}

/// The fixed two-tick buffer (the default before the adaptive policy).
fn fixed_client() -> ClientConfig {
    let mut c = ClientConfig::default();
    c.sync.lead = LeadPolicy::Fixed {
        buffer_ticks: 2.0,
        jitter_factor: 1.0,
    };
    c
}

#[test]
fn client_runs_ahead_by_half_rtt_plus_buffer_on_a_fixed_delay() {
    for delay_ms in [1u64, 50, 100, 250] {
        let link = LinkConfig {
            delay: Duration::from_millis(delay_ms),
            ..LinkConfig::default()
        };
        let mut h = Harness::new(ServerConfig::default(), fixed_client(), link, 1, 7);
        h.run_until(Duration::from_secs(5), &mut |_, _| 1);
        let c = &h.clients[0].session;
        assert!(c.is_synced());
        let rtt = c.rtt().smoothed().unwrap().as_secs_f64() * 1000.0;
        // RTT is measured, not configured: 2 x delay, plus at most a tick of server hold
        // quantisation (the echo leaves with the next snapshot).
        assert!(
            (rtt - 2.0 * delay_ms as f64).abs() < 2.0,
            "delay {delay_ms}: rtt {rtt}"
        );
        let expected = delay_ms as f64 / 1000.0 * 64.0 + 2.0;
        let lead = lead_ticks(&h);
        assert!(
            (lead - expected).abs() <= 1.5,
            "delay {delay_ms}: lead {lead}, expected {expected}"
        );
        let s = h.server.client_stats(1).unwrap();
        assert_eq!(s.ticks_starved, 0, "delay {delay_ms}: {s:?}");
        assert_eq!(s.inputs_late, 0);
        // Inputs reach the server about `buffer_ticks` (2) before it needs them.
        let slack = c.input_slack().unwrap();
        assert!(
            (1.5..=2.5).contains(&slack),
            "delay {delay_ms}: slack {slack}"
        );
    }
}

#[test]
fn lead_tracks_a_changed_route() {
    // 40 ms, then 120 ms after a route change: the client must drift further ahead
    // smoothly (bounded dilation) or jump, never run backwards. (With the fixed buffer;
    // the adaptive lead's changes of link are in `adaptive_lead.rs`.)
    let mut h = Harness::new(
        ServerConfig::default(),
        fixed_client(),
        LinkConfig {
            delay: Duration::from_millis(40),
            ..LinkConfig::default()
        },
        1,
        3,
    );
    h.run_until(Duration::from_secs(4), &mut |_, _| 1);
    let before = lead_ticks(&h);
    let c = &mut h.clients[0];
    let slow = LinkConfig {
        delay: Duration::from_millis(120),
        ..LinkConfig::default()
    };
    c.link = lagless_netem::Duplex::symmetric(slow, 9).unwrap();
    h.run_until(Duration::from_secs(14), &mut |_, _| 1);
    let after = lead_ticks(&h);
    let expected_gain = 0.080 * 64.0;
    assert!(
        (after - before - expected_gain).abs() < 1.5,
        "lead {before} -> {after}, expected +{expected_gain}"
    );
}

#[test]
fn jitter_margin_keeps_inputs_on_time_under_broadband() {
    let mut h = Harness::new(
        ServerConfig::default(),
        ClientConfig::default(),
        profile("broadband").unwrap(),
        2,
        11,
    );
    h.run_until(Duration::from_secs(20), &mut |_, _| 1);
    for id in [1, 2] {
        let s = h.server.client_stats(id).unwrap();
        let starved = s.ticks_starved as f64 / (s.ticks_starved + s.ticks_with_input) as f64;
        assert!(starved < 0.01, "client {id}: {s:?}");
    }
}
