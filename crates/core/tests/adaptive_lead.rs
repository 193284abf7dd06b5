#![allow(clippy::unwrap_used)]
//! The adaptive lead (the default): the least lead that keeps the server's starvation at
//! its target, on links that stay, change, and go out; deterministic (seeded emulator).

mod common;

use common::Harness;
use lagless_core::{ClientConfig, LeadPolicy, ServerConfig};
use lagless_netem::{Direction, Outage, OutageMode, profile};
use std::time::Duration;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Starved and fed ticks of client 1 so far.
fn counts(h: &Harness) -> (u64, u64) {
    let s = h.server.client_stats(1).unwrap();
    (s.ticks_starved, s.ticks_with_input)
}

/// Starvation (fraction) between two `counts`.
fn starved(before: (u64, u64), after: (u64, u64)) -> f64 {
    let starved = (after.0 - before.0) as f64;
    starved / (starved + (after.1 - before.1) as f64)
}

/// The client's lead beyond RTT/2, in ticks (from whole ticks: within one of the truth).
fn lead_beyond_half_rtt(h: &Harness) -> f64 {
    let c = &h.clients[0].session;
    let lead = f64::from(c.current_tick().0) - f64::from(h.server.current_tick().0);
    lead - c.rtt().smoothed().unwrap().as_secs_f64() / 2.0 * 64.0
}

fn client(lead: LeadPolicy) -> ClientConfig {
    let mut c = ClientConfig::default();
    c.sync.lead = lead;
    c
}

#[test]
fn the_default_is_the_felt_lead() {
    assert_eq!(ClientConfig::default().sync.lead, LeadPolicy::FELT);
}

#[test]
fn on_lan_it_leads_by_at_most_a_tick_beyond_half_the_rtt() {
    let mut h = Harness::new(
        ServerConfig::default(),
        ClientConfig::default(),
        profile("lan").unwrap(),
        1,
        3,
    );
    h.run_until(secs(5.0), &mut |_, _| 1);
    let before = counts(&h);
    let mut leads = Vec::new();
    for k in 1..=100 {
        h.run_until(secs(5.0 + 0.1 * f64::from(k)), &mut |_, _| 1);
        leads.push(lead_beyond_half_rtt(&h));
    }
    let mean = leads.iter().sum::<f64>() / leads.len() as f64;
    assert!(mean <= 1.0, "lead beyond RTT/2: {mean} ticks");
    assert_eq!(starved(before, counts(&h)), 0.0);
}

/// Starvation on `mobile` over 60 s after a 30 s warm-up (the window takes a while to see
/// the link's bad spells), and the mean lead beyond RTT/2.
fn mobile(lead: LeadPolicy) -> (f64, f64) {
    let mut h = Harness::new(
        ServerConfig::default(),
        client(lead),
        profile("mobile").unwrap(),
        1,
        5,
    );
    h.run_until(secs(30.0), &mut |_, _| 1);
    let before = counts(&h);
    let mut lead_sum = 0.0;
    for k in 1..=600 {
        h.run_until(secs(30.0 + 0.1 * f64::from(k)), &mut |_, _| 1);
        lead_sum += lead_beyond_half_rtt(&h);
    }
    (starved(before, counts(&h)), lead_sum / 600.0)
}

#[test]
fn on_mobile_starvation_falls_to_the_target() {
    let (adaptive, lead) = mobile(LeadPolicy::ADAPTIVE);
    // The old default: two ticks of buffer and one deviation on the RTT.
    let (old, old_lead) = mobile(LeadPolicy::Fixed {
        buffer_ticks: 2.0,
        jitter_factor: 1.0,
    });
    assert!(
        adaptive <= 0.0075,
        "adaptive starves {:.2}% (lead {lead:.1})",
        adaptive * 100.0
    );
    assert!(
        old > 4.0 * adaptive,
        "{old} (lead {old_lead:.1}) vs {adaptive}"
    );
}

/// Broadband with an outage from 10 s to 15 s in `direction`; returns the starvation from
/// 16 s to 30 s, the lead change across the outage (at 9 s and 16 s), the clock jumps
/// from 9 s on, and the client.
fn outage(direction: Direction, mode: OutageMode) -> (f64, f64, u64, Harness) {
    let mut h = Harness::new(
        ServerConfig::default(),
        ClientConfig::default(),
        profile("broadband").unwrap(),
        1,
        9,
    );
    h.clients[0].link.add_outage(
        Outage {
            start: secs(10.0),
            duration: secs(5.0),
            mode,
        },
        direction,
    );
    h.run_until(secs(9.0), &mut |_, _| 1);
    let lead_before = lead_beyond_half_rtt(&h);
    let jumps_before = h.clients[0].session.stats().clock_jumps;
    // Back in step within a second of the link's return.
    h.run_until(secs(16.0), &mut |_, _| 1);
    let lead_after = lead_beyond_half_rtt(&h);
    let before = counts(&h);
    h.run_until(secs(30.0), &mut |_, _| 1);
    let jumps = h.clients[0].session.stats().clock_jumps - jumps_before;
    (
        starved(before, counts(&h)),
        lead_after - lead_before,
        jumps,
        h,
    )
}

#[test]
fn after_an_outage_in_either_direction_it_is_back_in_step_within_a_second() {
    for direction in [Direction::Down, Direction::Up, Direction::Both] {
        for mode in [OutageMode::Hold, OutageMode::Drop] {
            let (starved, lead_change, jumps, h) = outage(direction, mode);
            let c = &h.clients[0].session;
            let what = format!("{direction:?} {mode:?}: {:?}", c.stats());
            assert!(starved <= 0.01, "{what}: starved {starved}");
            assert!(lead_change.abs() <= 2.0, "{what}: lead moved {lead_change}");
            // (Jumps while the window was young, at the start, are not the outage's.)
            assert_eq!(jumps, 0, "{what}");
            let rtt = c.rtt().smoothed().unwrap();
            assert!(rtt < Duration::from_millis(60), "{what}: RTT {rtt:?}");
        }
    }
}

#[test]
fn a_link_that_worsens_and_recovers_is_followed() {
    // broadband, mobile from 40 s, broadband again from 80 s (the lab's changing-link
    // target, shortened): starvation stays near the target in each phase after the
    // change settles, and the lead comes back down on the better link.
    let mut h = Harness::new(
        ServerConfig::default(),
        ClientConfig::default(),
        profile("broadband").unwrap(),
        1,
        13,
    );
    h.run_until(secs(40.0), &mut |_, _| 1);
    let broadband_lead = lead_beyond_half_rtt(&h);
    let mobile = profile("mobile").unwrap();
    h.clients[0]
        .link
        .reconfigure(mobile.clone(), mobile)
        .unwrap();
    h.run_until(secs(50.0), &mut |_, _| 1);
    let before = counts(&h);
    h.run_until(secs(80.0), &mut |_, _| 1);
    let on_mobile = starved(before, counts(&h));
    let mobile_lead = lead_beyond_half_rtt(&h);
    let broadband = profile("broadband").unwrap();
    h.clients[0]
        .link
        .reconfigure(broadband.clone(), broadband)
        .unwrap();
    h.run_until(secs(90.0), &mut |_, _| 1);
    let before = counts(&h);
    h.run_until(secs(120.0), &mut |_, _| 1);
    let back = starved(before, counts(&h));
    let back_lead = lead_beyond_half_rtt(&h);
    assert!(on_mobile <= 0.01, "mobile phase starved {on_mobile}");
    assert!(back <= 0.01, "broadband again starved {back}");
    assert!(
        mobile_lead > broadband_lead + 3.0 && back_lead < broadband_lead + 2.0,
        "leads {broadband_lead} -> {mobile_lead} -> {back_lead}"
    );
}

/// How far (ticks) the client's clock is from where its policy asks it to be.
fn tracking(h: &Harness) -> f64 {
    let c = &h.clients[0].session;
    let server = c.server_position(h.now).unwrap();
    c.position() - server - c.target_lead_ticks()
}

/// Runs to `from + 1.5 s` after a change of link at `from`, and returns the worst
/// tracking error and the ticks starved over the last half second of it: back in step,
/// and the server fed, within a second of the change.
fn after_a_change(h: &mut Harness, from: f64) -> (f64, u64) {
    h.run_until(secs(from + 1.0), &mut |_, _| 1);
    let before = counts(h);
    let mut worst: f64 = 0.0;
    for k in 1..=50 {
        h.run_until(secs(from + 1.0 + 0.01 * f64::from(k)), &mut |_, _| 1);
        worst = worst.max(tracking(h).abs());
    }
    (worst, counts(h).0 - before.0)
}

#[test]
fn a_slower_link_is_caught_up_with_within_a_second() {
    // broadband, then mobile from 40 s: 80 ms more each way, 30 ms of jitter, 5% loss in
    // bursts. The inputs in flight starve the server, and its reports take the new round
    // trip to come back, but from a second after the change the clock is in step with
    // the lead the new link needs, and starves the server about as rarely as a window
    // that young can promise (its largest need stands for a tail it has not seen yet).
    // Why needs in a fixed frame and fast-forwarding make that second: docs/lead.md.
    let (mut starved, mut ticks) = (0, 0);
    for seed in 1..=20 {
        let mut h = Harness::new(
            ServerConfig::default(),
            ClientConfig::default(),
            profile("broadband").unwrap(),
            1,
            seed,
        );
        h.run_until(secs(40.0), &mut |_, _| 1);
        let lead_before = h.clients[0].session.target_lead_ticks();
        let mobile = profile("mobile").unwrap();
        h.clients[0]
            .link
            .reconfigure(mobile.clone(), mobile)
            .unwrap();
        let (worst, late) = after_a_change(&mut h, 40.0);
        let lead = h.clients[0].session.target_lead_ticks();
        assert!(
            lead > lead_before + 8.0,
            "seed {seed}: lead {lead_before} -> {lead}"
        );
        assert!(worst <= 1.0, "seed {seed}: {worst} ticks off its target");
        starved += late;
        ticks += 32;
    }
    assert!(
        starved * 100 <= 2 * ticks,
        "{starved} of {ticks} ticks starved from 1 s to 1.5 s after the change"
    );
}

/// A client that is slow to start (loading a level after connecting) gets everything the
/// server sent meanwhile in one burst: those packets must not pin its clock behind.
#[test]
fn a_burst_of_packets_queued_before_the_client_started_does_not_stick_its_clock() {
    let run = |queued: bool| {
        let mut h = Harness::new(
            ServerConfig::default(),
            ClientConfig::default(),
            profile("broadband").unwrap(),
            1,
            5,
        );
        if queued {
            h.clients[0].link.add_outage(
                Outage {
                    start: Duration::ZERO,
                    duration: secs(1.5),
                    mode: OutageMode::Hold,
                },
                Direction::Down,
            );
        }
        h.run_until(secs(4.0), &mut |_, _| 1);
        let before = counts(&h);
        h.run_until(secs(20.0), &mut |_, _| 1);
        (starved(before, counts(&h)), lead_beyond_half_rtt(&h), h)
    };
    let (_, clean_lead, _) = run(false);
    let (starved, lead, h) = run(true);
    let c = &h.clients[0].session;
    let what = format!("{:?}", c.stats());
    assert!(starved <= 0.01, "{what}: starved {starved}");
    assert!(
        (lead - clean_lead).abs() <= 2.0,
        "{what}: lead {lead} vs {clean_lead} without the burst"
    );
    let rtt = c.rtt().smoothed().unwrap();
    assert!(rtt < Duration::from_millis(60), "{what}: RTT {rtt:?}");
}

#[test]
fn an_uplink_outage_with_a_downlink_loss_in_it_does_not_raise_the_lead() {
    // Early (before the lead can tell outliers) and late; each with server packets lost
    // while the uplink is out, which once hid the outage and put the lead a second up.
    for start in [0.5, 10.0] {
        let mut h = Harness::new(
            ServerConfig::default(),
            ClientConfig::default(),
            profile("broadband").unwrap(),
            1,
            9,
        );
        let link = &mut h.clients[0].link;
        let out = |start: f64, duration: f64, mode| Outage {
            start: secs(start),
            duration: secs(duration),
            mode,
        };
        link.add_outage(out(start, 1.0, OutageMode::Hold), Direction::Up);
        link.add_outage(out(start + 0.4, 0.05, OutageMode::Drop), Direction::Down);
        h.run_until(secs(start + 3.0), &mut |_, _| 1);
        let c = &h.clients[0].session;
        let what = format!("outage at {start} s: {:?}", c.stats());
        assert_eq!(c.stats().uplink_outages, 1, "{what}");
        let lead = lead_beyond_half_rtt(&h);
        assert!(lead <= 6.0, "{what}: lead {lead} ticks beyond RTT/2");
    }
}
