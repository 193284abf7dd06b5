//! A quick, stable-Rust fuzz pass over every target: seeded random inputs plus mutations
//! of valid encodings. No fuzzing engine, no nightly; a few seconds in CI.
//!
//! `LAGLESS_FUZZ_ITERS` (default 3000) sets inputs per target and `LAGLESS_FUZZ_SEED`
//! (default 1) the seed. A failing input is printed with its seed and saved under
//! `fuzz/artifacts/<target>/`, replayable with `cargo fuzz run <target> <file>` or by
//! calling the target on the file's bytes.

use lagless_fuzz::mutate::{Rng, mutate, random_bytes};
use lagless_fuzz::{TARGETS, Target, seeds};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn smoke(name: &str) {
    let target: Target = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .expect("known target");
    let iters = env_u64("LAGLESS_FUZZ_ITERS", 3000);
    let seed = env_u64("LAGLESS_FUZZ_SEED", 1);
    let valid = seeds::for_target(name);
    assert!(!valid.is_empty(), "{name} has seeds");
    let mut rng = Rng::new(
        seed ^ name
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31) ^ u64::from(b)),
    );
    let run = |i: u64, input: &[u8]| {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(input))) {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("artifacts")
                .join(name);
            let file = dir.join(format!("smoke-seed{seed}-iter{i}"));
            let saved = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, input));
            eprintln!(
                "{name}: panic on input {i} (LAGLESS_FUZZ_SEED={seed}), {} bytes, saved to {} ({saved:?}): {input:02x?}",
                input.len(),
                file.display()
            );
            resume_unwind(panic);
        }
    };
    for (i, v) in valid.iter().enumerate() {
        run(i as u64, v);
    }
    // Mutations of the previous interesting input chain a few steps deep.
    let mut current = valid[0].clone();
    for i in 0..iters {
        let input = match rng.below(8) {
            0 => {
                let max = if rng.below(4) == 0 { 2048 } else { 64 };
                let len = rng.below(max);
                random_bytes(&mut rng, len)
            }
            1 => {
                current = valid[rng.below(valid.len())].clone();
                let other = rng.below(valid.len());
                mutate(&mut rng, &current, &valid[other])
            }
            _ => {
                let other = &valid[rng.below(valid.len())];
                let m = mutate(&mut rng, &current, other);
                if rng.below(2) == 0 {
                    current = m.clone();
                }
                m
            }
        };
        run(i, &input);
    }
}

macro_rules! smoke_tests {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            smoke(stringify!($name));
        }
    )*};
}

smoke_tests!(
    wire_reader,
    bit_reader,
    input_message,
    snapshot_fragment,
    cube_snapshot,
    replication_snapshot,
    client_session,
    server_session,
    netcode_server,
    netcode_client,
    reliable_channel,
    lab_control,
    session_control,
    dead_reckoning,
    view_claim,
    hit_reports,
    spawn_claims,
    shooter_input,
);

#[test]
fn every_target_has_a_smoke_test() {
    assert_eq!(TARGETS.len(), 18);
}
