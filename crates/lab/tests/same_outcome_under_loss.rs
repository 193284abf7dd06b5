//! Given the same inputs, the server reaches the same world under `lossy` (25% loss each
//! way) as under `lan`: redundant inputs recover every lost packet, and the client's lead
//! keeps every input ahead of the tick that needs it.
#![allow(clippy::unwrap_used)]

use lagless_core::LeadPolicy;
use lagless_lab::scene::RawEntity;
use lagless_lab::{RunConfig, RunOutcome, ScriptChoice, run};
use lagless_scenes::cubes::BodyState;
use lagless_scenes::cubes::replicate::player_entity;
use lagless_scenes::cubes::script::{InputScript, PatternScript};
use lagless_scenes::cubes::{CubeInput, CubeSceneConfig};
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

fn bits(e: &RawEntity) -> Vec<u32> {
    let flags = e.flags.iter().map(|&b| u32::from(b));
    e.floats.iter().map(|f| f.to_bits()).chain(flags).collect()
}

/// Player `p`'s final state on the server (its floats start with its position).
fn player(o: &RunOutcome, p: u32) -> &RawEntity {
    let cubes = CubeSceneConfig::default().grid.pow(2) as usize;
    let id = player_entity(cubes, p);
    o.server_state.iter().find(|e| Some(e.id) == id).unwrap()
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
    for p in [1, 2] {
        let at = &player(&lan, p).floats;
        let from_origin = at[..3].iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!(from_origin > 1.0, "player {p} moved");
    }
    assert_eq!(lan.server_state.len(), lossy.server_state.len());
    for (a, b) in lan.server_state.iter().zip(&lossy.server_state) {
        assert_eq!(a.id, b.id);
        assert_eq!(bits(a), bits(b), "entity {}: {a:?} vs {b:?}", a.id);
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
    assert_ne!(bits(player(&lan, 1)), bits(player(&starved, 1)));
}
