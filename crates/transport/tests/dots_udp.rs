//! Runs `examples/dots_udp.rs` (the dots game over real UDP on loopback), so the example
//! cannot rot and the session is exercised end to end on a real clock.

#[path = "../examples/dots_udp.rs"]
#[allow(dead_code)]
mod dots_udp;

#[test]
fn two_clients_see_each_other_predict_their_own_dot_and_leave() {
    let s = dots_udp::run(3.5).expect("the example runs");
    println!("{s:#?}");
    assert_eq!(s.stats.connects, 2, "both clients connected");
    assert_eq!(s.stats.disconnects, 2, "the server saw both leave");
    assert_eq!(s.stats.clients, 0);
    for (own, other) in [(1, 2), (2, 1)] {
        assert!(
            s.spawned.contains(&(own, other)),
            "client {own} saw dot {other} spawn"
        );
        // Two seconds of circling at 4 m/s took the dot well away from the origin, so
        // the comparison below is not of two dots that never moved.
        let (shown, real) = (s.shown[&own], s.dots[&own]);
        assert!(real[0].hypot(real[1]) > 1.0, "dot {own} moved: {real:?}");
        let cm = (shown[0] - real[0]).hypot(shown[1] - real[1]) * 100.0;
        assert!(
            cm < 2.0,
            "client {own} shows its dot {cm} cm from the server's"
        );
    }
}
