//! Given the same inputs, the server reaches the same world under `lossy` (25% loss each
//! way) as under `lan`: redundant inputs recover every lost packet, and the client's lead
//! keeps every input ahead of the tick that needs it.
#![allow(clippy::unwrap_used)]

use lagless_core::LeadPolicy;
use lagless_lab::{RunConfig, ScriptChoice, run};
use lagless_scenes::cubes::BodyState;
use lagless_scenes::cubes::CubeInput;
use lagless_scenes::cubes::script::{InputScript, PatternScript};
use std::sync::Arc;

/// Idle for 2 s (both clients are synced by then), a seeded pattern for 8 s, then idle:
/// inputs are pinned to absolute ticks, so both runs feed the server the same inputs.
struct Pinned(PatternScript);

impl InputScript for Pinned {
    fn input(&mut self, tick: u64, _observed: Option<&BodyState>) -> CubeInput {
        if (128..128 + 512).contains(&tick) {
            self.0.input(tick, None)
        } else {
            CubeInput::NONE
        }
    }
}

fn config(profile: &str) -> RunConfig {
    let mut c = RunConfig {
        profile: profile.into(),
        seconds: 12.0,
        seed: 42,
        clients: 2,
        script: ScriptChoice::Custom(Arc::new(|_| Box::new(Pinned(PatternScript::new(7))))),
        ..RunConfig::default()
    };
    // 25% loss each way needs a deeper input buffer for every input to beat its tick.
    c.client.sync.lead = LeadPolicy::Fixed {
        buffer_ticks: 6.0,
        jitter_factor: 1.0,
    };
    c
}

fn bits(s: &BodyState) -> Vec<u32> {
    [
        s.position.to_array(),
        s.linvel.to_array(),
        s.angvel.to_array(),
    ]
    .concat()
    .into_iter()
    .chain(s.rotation.to_array())
    .map(f32::to_bits)
    .collect()
}

#[test]
fn lan_and_lossy_end_in_the_same_world() {
    let lan = run(&config("lan"), &mut |_| {}).unwrap();
    let lossy = run(&config("lossy"), &mut |_| {}).unwrap();
    assert_eq!(lan.final_tick, lossy.final_tick);

    // The lossy link really lost a quarter of the packets...
    let loss = lossy.report.get_f64("net.loss_pct").unwrap();
    assert!((20.0..30.0).contains(&loss), "loss {loss}%");
    // ...yet the server applied every input on time.
    for (id, s) in &lossy.server_stats {
        assert_eq!(s.ticks_starved, 0, "client {id}: {s:?}");
    }
    // The players moved, and pushed cubes, identically: bit for bit.
    assert_eq!(lan.server_players.len(), 2);
    for ((a_id, a), (b_id, b)) in lan.server_players.iter().zip(&lossy.server_players) {
        assert_eq!(a_id, b_id);
        assert!(a.position.length() > 1.0, "player {a_id} moved");
        assert_eq!(bits(a), bits(b), "player {a_id}: {a:?} vs {b:?}");
    }
    for (i, (a, b)) in lan.server_cubes.iter().zip(&lossy.server_cubes).enumerate() {
        assert_eq!(bits(a), bits(b), "cube {i}");
    }
}

#[test]
fn a_starved_server_diverges() {
    // The same comparison fails when inputs are lost for good: with no input buffer at all,
    // lossy starves the server and the world ends up elsewhere. (Guards against the test
    // above passing vacuously.)
    let lan = run(&config("lan"), &mut |_| {}).unwrap();
    let mut c = config("lossy");
    c.client.sync.lead = LeadPolicy::Fixed {
        buffer_ticks: 0.0,
        jitter_factor: 0.0,
    };
    let starved = run(&c, &mut |_| {}).unwrap();
    let total: u64 = starved
        .server_stats
        .iter()
        .map(|(_, s)| s.ticks_starved)
        .sum();
    assert!(total > 0);
    assert_ne!(
        bits(&lan.server_players[0].1),
        bits(&starved.server_players[0].1)
    );
}
