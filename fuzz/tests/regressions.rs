//! Inputs that once found a bug, replayed through their target on every test run.
//!
//! Each file in `tests/regressions/` is named `<target>-<what>.bin` after the target it
//! crashed (or hung, or ran out of memory); the part before the first `-` picks the
//! target from [`lagless_fuzz::TARGETS`]. Add a file here whenever a fuzzer finds one.

use lagless_fuzz::TARGETS;
use std::path::Path;

#[test]
fn every_saved_regression_input_runs_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/regressions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/regressions exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no regression inputs in {}",
        dir.display()
    );
    for file in files {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .expect("UTF-8 file name");
        let target_name = name.split('-').next().unwrap_or_default();
        let target = TARGETS
            .iter()
            .find(|(n, _)| *n == target_name)
            .map(|(_, t)| *t)
            .unwrap_or_else(|| panic!("{name}: no target called {target_name:?}"));
        let data = std::fs::read(&file).expect("readable file");
        target(&data);
    }
}

/// The first one: a first server packet stamped near `u32::MAX` ran the client's clock to
/// `Tick(u32::MAX)`, where `poll_transmit`'s loop over ticks never ended.
#[test]
fn a_tick_near_the_end_of_the_range_neither_hangs_nor_runs_the_clock_there() {
    let data = include_bytes!("regressions/client_session-oom.bin");
    lagless_fuzz::client_session(data);
}
