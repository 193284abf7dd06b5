//! Runs `examples/dots.rs` (the high-level API as a newcomer uses it), so it cannot rot.

#[path = "../examples/dots.rs"]
#[allow(dead_code)]
mod dots;

/// Over `mobile`, each client shows the other dot close to where the server had it at
/// the shown tick, and its own dot ends where the server's is once both stand still.
#[test]
fn the_dots_example_predicts_its_own_dot_and_interpolates_the_other() {
    let summaries = dots::run(12).expect("the example runs");
    assert_eq!(summaries.len(), 2);
    for s in summaries {
        // Showing the newest state instead would be off by the delay times the speed
        // (100 ms at 4 m/s: 40 cm) all the time; bursts of loss make it extrapolate.
        assert!(s.other_error_cm[0] < 2.0, "{s:?}");
        assert!(s.other_error_cm[1] < 80.0, "{s:?}");
        assert!(s.own_error_cm < 1.0, "{s:?}");
    }
}
