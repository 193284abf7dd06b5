#![allow(clippy::unwrap_used)]
//! A starved tick is not a lost tick: the server applies a guess from the client's last
//! input, tells the client which ticks it starved, and the client's input history then
//! holds exactly what the server applied, so a replay through those ticks matches it.

mod common;

use common::Harness;
use lagless_core::{
    ClientConfig, GUESS_REPEAT_TICKS, LeadPolicy, MissingInput, ServerConfig, SyncConfig, Tick,
};
use lagless_netem::profile;
use std::time::Duration;

/// Runs of a held input, changing every 7 ticks: most guesses are right, some are not.
fn input_for(tick: Tick) -> u8 {
    1 + ((tick.0 / 7) % 3) as u8
}

/// A client with a one-tick input buffer on a jittery, lossy link: it starves the server
/// often.
fn starving(missing_input: MissingInput, seed: u64) -> Harness {
    starving_with(
        ServerConfig {
            missing_input,
            ..ServerConfig::default()
        },
        seed,
    )
}

fn starving_with(server: ServerConfig, seed: u64) -> Harness {
    let client = ClientConfig {
        sync: SyncConfig {
            lead: LeadPolicy::fixed(1.0),
            ..SyncConfig::default()
        },
        ..ClientConfig::default()
    };
    let mut h = Harness::new(server, client, profile("mobile").unwrap(), 1, seed);
    h.run_until(Duration::from_secs(20), &mut |_, t| input_for(t));
    h
}

#[test]
fn the_client_replays_what_the_server_guessed() {
    for seed in [1u64, 2, 3] {
        let h = starving(MissingInput::Guess, seed);
        let server = h.server.client_stats(1).unwrap();
        let client = h.clients[0].session.stats();
        assert!(server.ticks_starved > 50, "seed {seed}: {server:?}");
        // Every starved tick was reported, each once (the last few may be in flight).
        assert!(
            client.ticks_starved <= server.ticks_starved
                && client.ticks_starved + 40 >= server.ticks_starved,
            "seed {seed}: client {} server {}",
            client.ticks_starved,
            server.ticks_starved
        );
        // Some guesses were wrong (the input changed in a starved run), some right.
        assert!(client.guesses_wrong > 0, "seed {seed}: {client:?}");
        assert!(
            client.guesses_wrong < client.ticks_starved,
            "seed {seed}: {client:?}"
        );
        // Wherever the client still holds its input, it is what the server applied.
        let session = &h.clients[0].session;
        let mut checked = 0;
        for (&tick, &applied) in &h.applied[&1] {
            if tick.0 + 40 > h.server.current_tick().0 {
                continue; // not reported yet
            }
            if let Some(held) = session.input(tick) {
                assert_eq!(held, applied, "seed {seed}: tick {tick}");
                checked += 1;
            }
        }
        assert!(checked > 100, "seed {seed}: {checked}");
        // The wrong ones are told by tick.
        let end = h.server.current_tick();
        assert!(session.guesses_wrong_between(Tick(0), end) > 0);
        assert_eq!(session.guesses_wrong_between(end, end), 0);
    }
}

#[test]
fn a_held_player_is_replayed_as_held() {
    let h = starving(MissingInput::Hold, 1);
    let session = &h.clients[0].session;
    let client = session.stats();
    assert!(client.ticks_starved > 50, "{client:?}");
    // Every input is non-zero, so every starved tick was "wrong": nothing was applied.
    assert_eq!(client.guesses_wrong, client.ticks_starved);
    let applied = &h.applied[&1];
    let last = h.server.current_tick().0 - 40;
    let mut held = 0;
    for t in last.saturating_sub(512)..last {
        let tick = Tick(t);
        match (applied.get(&tick), session.input(tick)) {
            (Some(a), Some(i)) => assert_eq!(*a, i, "tick {tick}"),
            (None, Some(i)) => {
                assert_eq!(i, 0, "tick {tick}: the server applied nothing");
                held += 1;
            }
            _ => {}
        }
    }
    assert!(held > 0);
}

#[test]
fn the_default_guess_repeats_then_lets_go() {
    use lagless_core::Input;
    assert_eq!(7u8.guess(1), 7);
    assert_eq!(7u8.guess(GUESS_REPEAT_TICKS), 7);
    assert_eq!(7u8.guess(GUESS_REPEAT_TICKS + 1), 0);
    assert_eq!(ServerConfig::default().missing_input, MissingInput::Guess);
}

#[test]
fn a_late_input_is_handed_to_the_game_once_within_the_bound() {
    let max = ServerConfig::default().max_late_ticks;
    for seed in [1u64, 2, 3] {
        let h = starving(MissingInput::Guess, seed);
        let stats = h.server.client_stats(1).unwrap();
        let late = &h.late[&1];
        let fed = &h.fed[&1];
        assert!(late.len() > 20, "seed {seed}: {}", late.len());
        assert_eq!(late.len() as u64, stats.inputs_handed_late);
        assert!(stats.inputs_late >= stats.inputs_handed_late);
        let mut seen = std::collections::BTreeSet::new();
        for &(at, tick, input) in late {
            // The client's own input, for a tick that ran without it, handed with the
            // next tick simulated, within the bound, and once.
            assert_eq!(input, input_for(tick), "seed {seed}: tick {tick}");
            assert!(
                fed.binary_search(&tick).is_err(),
                "seed {seed}: {tick} was fed"
            );
            assert!(
                tick < at && at.0 - tick.0 <= max,
                "seed {seed}: {tick} at {at}"
            );
            assert!(seen.insert(tick), "seed {seed}: {tick} handed twice");
        }
    }
}

#[test]
fn late_inputs_can_be_turned_off() {
    let h = starving_with(
        ServerConfig {
            max_late_ticks: 0,
            ..ServerConfig::default()
        },
        1,
    );
    let stats = h.server.client_stats(1).unwrap();
    assert!(stats.inputs_late > 20, "{stats:?}");
    assert_eq!(stats.inputs_handed_late, 0);
    assert!(h.late.get(&1).is_none_or(Vec::is_empty));
}
