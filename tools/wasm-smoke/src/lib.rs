//! The dots example (`crates/replication/examples/dots.rs`: a server and two predicting
//! clients over the emulated `mobile` link, on a virtual clock) as a wasm32 module with no
//! imports, run under node by `tools/wasm-check.sh`: it proves the sans-IO crates run on
//! wasm32-unknown-unknown (no clock, no threads, no OS randomness there), not only compile.
//!
//! The module exports [`lagless_wasm_smoke_run`] and [`lagless_wasm_smoke_figure`]; the
//! checks are the ones `crates/replication/tests/dots.rs` makes natively.

use std::sync::Mutex;

#[path = "../../../crates/replication/examples/dots.rs"]
#[allow(dead_code)] // its `main` is for `cargo run --example dots`
mod dots;

/// The last run's figures, read one at a time by [`lagless_wasm_smoke_figure`]: a wasm
/// export can only return numbers, and this keeps the module free of imports and glue.
static FIGURES: Mutex<Vec<f64>> = Mutex::new(Vec::new());

/// Figures per client that [`lagless_wasm_smoke_figure`] gives, in this order: rollbacks,
/// the other dot's error p50 and p99 (cm), the own dot's error at the end (cm), stale views.
pub const FIGURES_PER_CLIENT: u32 = 5;

/// Plays the dots game for `seconds` of virtual time over `mobile` with `seed` and returns
/// how many checks failed (0: all passed); `u32::MAX` if the run itself failed. The checks,
/// for each client: no stale view, the other dot shown within 2 cm (median) and 80 cm (p99)
/// of the server's, its own dot within 1 cm of the server's at the end.
#[allow(unsafe_code)] // `no_mangle` keeps the export's name for the JavaScript that calls it
#[unsafe(no_mangle)]
pub extern "C" fn lagless_wasm_smoke_run(seconds: u32, seed: u32) -> u32 {
    let Ok(summaries) = dots::run("mobile", u64::from(seed), u64::from(seconds)) else {
        return u32::MAX;
    };
    let mut figures = FIGURES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    figures.clear();
    let mut failed = 0;
    for s in &summaries {
        figures.extend([
            s.rollbacks as f64,
            f64::from(s.other_error_cm[0]),
            f64::from(s.other_error_cm[1]),
            f64::from(s.own_error_cm),
            s.stale_views as f64,
        ]);
        // Each a comparison that is false for NaN, so a NaN fails its check.
        let passed = [
            s.stale_views == 0,
            s.other_error_cm[0] < 2.0,
            s.other_error_cm[1] < 80.0,
            s.own_error_cm < 1.0,
        ];
        failed += passed.iter().map(|&ok| u32::from(!ok)).sum::<u32>();
    }
    if summaries.len() != 2 {
        failed += 1;
    }
    failed
}

/// Figure `i` of the last [`lagless_wasm_smoke_run`] (client `i / FIGURES_PER_CLIENT`, in
/// the order [`FIGURES_PER_CLIENT`] lists), NaN past the end.
#[allow(unsafe_code)] // `no_mangle` keeps the export's name for the JavaScript that calls it
#[unsafe(no_mangle)]
pub extern "C" fn lagless_wasm_smoke_figure(i: u32) -> f64 {
    let figures = FIGURES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    figures.get(i as usize).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same exports pass natively, so a failure under node is the wasm build's.
    #[test]
    fn the_smoke_run_passes_natively() {
        assert_eq!(lagless_wasm_smoke_run(6, 0), 0);
        assert!(lagless_wasm_smoke_figure(2 * FIGURES_PER_CLIENT - 1).is_finite());
        assert!(lagless_wasm_smoke_figure(2 * FIGURES_PER_CLIENT).is_nan());
    }
}
