//! Same seed, same run: every figure except wall-clock timings is identical. Another seed
//! gives another run.
#![allow(clippy::unwrap_used)]

use lagless_lab::{Metric, RunConfig, run};

fn comparable(out: &lagless_lab::RunOutcome) -> Vec<(String, Metric)> {
    out.report
        .entries()
        .iter()
        // Wall-clock timings (CPU per tick or per reconcile, their ratios) vary run to run.
        .filter(|(n, _)| {
            !n.contains("_ms_")
                && !n.contains("_us_")
                && !n.contains("ratio")
                && !n.starts_with("lab.")
        })
        .cloned()
        .collect()
}

#[test]
fn same_seed_same_figures() {
    let config = RunConfig {
        profile: "wifi".into(),
        seconds: 5.0,
        clients: 2,
        seed: 99,
        ..RunConfig::default()
    };
    let a = run(&config, &mut |_| {}).unwrap();
    let b = run(&config, &mut |_| {}).unwrap();
    assert_eq!(comparable(&a), comparable(&b));
    assert_eq!(a.server_state, b.server_state);
    // The run over time (`--plot`) is the same too, and spans the run.
    assert_eq!(a.timeline, b.timeline);
    let t = &a.timeline;
    for series in [
        &t.render_error_cm,
        &t.interpolation_delay_ms,
        &t.input_delay_ms,
        &t.down_kbps,
    ] {
        let last = series.last().map_or(0.0, |p| p.0);
        assert!(last > 4.0 && last <= 5.5, "{series:?}");
        assert!(series.windows(2).all(|w| w[0].0 <= w[1].0));
    }
    let other = run(
        &RunConfig {
            seed: 100,
            ..config
        },
        &mut |_| {},
    )
    .unwrap();
    assert_ne!(comparable(&a), comparable(&other));
}
