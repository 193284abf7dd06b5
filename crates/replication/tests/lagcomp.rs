//! Lag compensation: shots tested where the shooter saw its target.

use lagless_replication::lagcomp::*;
use lagless_replication::{Pose, Tick};

const TARGET: u32 = 2;
const SHOOTER: u32 = 1;
const BODY: Shape = Shape::Circle { radius: 0.3 };

/// A target running along +y at 6 m/s across x = 10, at y = 0 at tick 50; the shooter
/// stands at the origin. Recorded for ticks 0..=now at 30 ticks/s.
fn world(now: u32) -> LagCompensator {
    let mut lc = LagCompensator::new(LagCompConfig::default());
    for t in 0..=now {
        let y = 0.2 * (t as f32 - 50.0);
        lc.record(Tick(t), TARGET, Pose::planar([10.0, y], 0.0), BODY)
            .expect("valid");
        lc.record(Tick(t), SHOOTER, Pose::planar([0.0, 0.0], 0.0), BODY)
            .expect("valid");
    }
    lc
}

/// A shot from the shooter at the point `aim`, claiming the view `view`.
fn shot_at(aim: [f32; 2], view: f64) -> Shot {
    Shot {
        claimed_view: view,
        origin: [0.0, 0.0, 0.0],
        direction: [aim[0], aim[1], 0.0],
        max_distance: 100.0,
        shooter: Some(SHOOTER),
    }
}

#[test]
fn a_shot_at_where_the_target_was_shown_100_ms_ago_hits_only_with_compensation() {
    // The server is at tick 53; the client showed the world 100 ms (3 ticks) back,
    // between snapshots: at tick 49.6, where the target was at y = -0.08.
    let now = Tick(53);
    let mut lc = world(now.0);
    let view = 49.6;
    let shown = lc.pose_at(TARGET, view).unwrap().0.planar_position();
    assert!((shown[1] + 0.08).abs() < 1e-5);
    // The claim travels in the input of tick 53 as a ViewClaim (1/32 tick steps).
    let claim = ViewClaim::new(now, view);
    let compensated = lc
        .rewind_query(now, &shot_at(shown, claim.view(now)))
        .unwrap();
    let hit = compensated.hit.expect("hit where it was shown");
    assert_eq!(hit.entity, TARGET);
    assert!((hit.distance - 9.7).abs() < 0.01);
    assert!(!compensated.rewind.clamped());
    assert!((compensated.rewind.rewind_ms - 113.3).abs() < 1.1);
    // Without compensation (the present: the target is 0.68 m further on), a miss.
    let present = lc.rewind_query(now, &shot_at(shown, 53.0)).unwrap();
    assert_eq!(present.hit, None);
}

#[test]
fn a_claim_1000_ms_old_is_clamped_to_the_windows_edge_and_counted() {
    // At tick 80 a lying client claims tick 50 (1000 ms back), when the target crossed
    // its line of fire at y = 0. The window is 250 ms: 7.5 ticks.
    let now = Tick(80);
    let mut lc = world(now.0);
    let claim = ViewClaim::new(now, 50.0);
    let r = lc
        .rewind_query(now, &shot_at([1.0, 0.0], claim.view(now)))
        .unwrap();
    assert_eq!(r.rewind.clamp, Clamp::Old);
    assert_eq!(r.rewind.used_view, 72.5);
    assert!((r.rewind.rewind_ms - 250.0).abs() < 1e-9);
    assert_eq!(r.hit, None, "at 72.5 the target was 4.5 m up");
    // The same claim made honestly, inside the window, would have hit.
    let mut honest = world(55);
    let r = honest
        .rewind_query(Tick(55), &shot_at([1.0, 0.0], 50.0))
        .unwrap();
    assert_eq!(r.hit.map(|h| h.entity), Some(TARGET));
    let s = lc.stats();
    assert_eq!((s.rewinds, s.clamped_old, s.clamped()), (1, 1, 1));
    assert!(s.rewind_ms_max <= 250.0);
}

#[test]
fn a_target_that_left_the_line_within_the_history_is_not_hit() {
    // The target crossed y = 0 at tick 50; at 55 the client claims 53.5 (within the
    // window), when the target was 0.7 m past the line: nothing there.
    let now = Tick(55);
    let mut lc = world(now.0);
    let r = lc.rewind_query(now, &shot_at([1.0, 0.0], 53.5)).unwrap();
    assert!(!r.rewind.clamped());
    assert_eq!(r.hit, None);
    // The history still holds tick 50, where it was on the line.
    let on_line = lc.pose_at(TARGET, 50.0).unwrap().0;
    assert_eq!(on_line.planar_position(), [10.0, 0.0]);
}

#[test]
fn a_claim_in_the_future_is_the_present() {
    let now = Tick(50);
    let mut lc = world(now.0);
    let r = lc.rewind_query(now, &shot_at([1.0, 0.0], 60.0)).unwrap();
    assert_eq!((r.rewind.clamp, r.rewind.used_view), (Clamp::Future, 50.0));
    assert_eq!(r.hit.map(|h| h.entity), Some(TARGET));
    assert_eq!(lc.stats().clamped_future, 1);
}

#[test]
fn absurd_aims_are_refused_and_counted() {
    let now = Tick(50);
    let mut lc = world(now.0);
    let bad = [
        (shot_at([f32::NAN, 0.0], 49.0), LagCompError::NonFiniteRay),
        (
            shot_at([f32::INFINITY, 1.0], 49.0),
            LagCompError::NonFiniteRay,
        ),
        (shot_at([0.0, 0.0], 49.0), LagCompError::ZeroDirection),
        (shot_at([1.0, 0.0], f64::NAN), LagCompError::NonFiniteView),
        (
            shot_at([1.0, 0.0], f64::NEG_INFINITY),
            LagCompError::NonFiniteView,
        ),
        (
            Shot {
                origin: [0.0, f32::NAN, 0.0],
                ..shot_at([1.0, 0.0], 49.0)
            },
            LagCompError::NonFiniteRay,
        ),
        (
            Shot {
                max_distance: -1.0,
                ..shot_at([1.0, 0.0], 49.0)
            },
            LagCompError::BadDistance,
        ),
    ];
    for (shot, error) in bad {
        assert_eq!(lc.rewind_query(now, &shot), Err(error));
    }
    assert_eq!(lc.stats().refused, 7);
    assert_eq!(lc.stats().rewinds, 0);
}

#[test]
fn the_shooter_in_the_line_of_fire_is_not_its_own_target() {
    let now = Tick(50);
    let mut lc = world(now.0);
    // The shooter stands at the origin, inside its own body.
    let r = lc.rewind_query(now, &shot_at([1.0, 0.0], 50.0)).unwrap();
    assert_eq!(r.hit.map(|h| h.entity), Some(TARGET));
    let anyone = Shot {
        shooter: None,
        ..shot_at([1.0, 0.0], 50.0)
    };
    let r = lc.rewind_query(now, &anyone).unwrap();
    assert_eq!(r.hit.map(|h| (h.entity, h.distance)), Some((SHOOTER, 0.0)));
}
