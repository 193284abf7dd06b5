//! Runs `examples/dots.rs` (the high-level API as a newcomer uses it), so it cannot rot,
//! and checks what it shows against the server's truth.

#[path = "../examples/dots.rs"]
#[allow(dead_code)]
mod dots;

/// Over `mobile`, each client shows the other dot close to where the server had it at
/// the shown tick, and its own dot ends where the server's is once both stand still.
#[test]
fn the_dots_example_predicts_its_own_dot_and_interpolates_the_other() {
    let summaries = dots::run("mobile", 0, 12).expect("the example runs");
    assert_eq!(summaries.len(), 2);
    for s in summaries {
        // Showing the newest state instead would be off by the delay times the speed
        // (100 ms at 4 m/s: 40 cm) all the time; bursts of loss make it extrapolate.
        assert!(s.other_error_cm[0] < 2.0, "{s:?}");
        assert!(s.other_error_cm[1] < 80.0, "{s:?}");
        assert!(s.own_error_cm < 1.0, "{s:?}");
        assert_eq!(s.stale_views, 0, "{s:?}");
    }
}

/// On every profile and several seeds, for a minute: after every snapshot a client
/// decodes, its own dot is the server's at that snapshot's tick (it goes again until
/// acknowledged, and two dots fit any budget), so a lost snapshot never leaves what it
/// reconciles against stale; the other dot is stale only after a loss, until the
/// acknowledgements show it and it goes again (a few snapshots in a thousand); and each
/// client's own dot ends within 2 cm of the server's after both stood still for 2 s
/// (the bug this guards against: docs/snapshots.md, "A change is sent once").
#[test]
fn every_snapshot_leaves_each_client_the_servers_dots_on_every_profile() {
    for &profile in lagless_netem::PROFILE_NAMES {
        for seed in 1..=3 {
            for s in dots::run(profile, seed, 60).expect("the example runs") {
                assert_eq!(s.stale_views, 0, "{profile} seed {seed}: {s:?}");
                assert!(s.stale_other <= 40, "{profile} seed {seed}: {s:?}");
                assert!(s.own_error_cm <= 2.0, "{profile} seed {seed}: {s:?}");
            }
        }
    }
}
