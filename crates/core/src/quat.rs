//! Unit quaternions `[x, y, z, w]` as plain arrays: what [`Pose`](crate::interpolation::Pose)
//! blends and the error smoother turns, kept apart so neither reaches into the other.

/// No rotation.
pub(crate) const IDENTITY: [f32; 4] = [0.0, 0.0, 0.0, 1.0];

fn dot4(a: [f32; 4], b: [f32; 4]) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
}

/// Unit quaternion; garbage (zero length, NaN) becomes the identity rather than spreading.
pub(crate) fn normalize(q: [f32; 4]) -> [f32; 4] {
    let n = dot4(q, q).sqrt();
    if n > 1e-12 && n.is_finite() {
        [q[0] / n, q[1] / n, q[2] / n, q[3] / n]
    } else {
        IDENTITY
    }
}

/// Hamilton product `a * b` (apply `b`, then `a`).
pub(crate) fn mul(a: [f32; 4], b: [f32; 4]) -> [f32; 4] {
    let [ax, ay, az, aw] = a;
    let [bx, by, bz, bw] = b;
    [
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ]
}

/// Spherical interpolation along the shorter arc, normalised.
pub(crate) fn slerp(a: [f32; 4], b: [f32; 4], t: f32) -> [f32; 4] {
    let a = normalize(a);
    let mut b = normalize(b);
    let mut d = dot4(a, b);
    // q and -q are the same rotation: take the nearer one.
    if d < 0.0 {
        b = [-b[0], -b[1], -b[2], -b[3]];
        d = -d;
    }
    let (wa, wb) = if d > 0.9995 {
        // Nearly parallel: sin(theta) ~ 0, a normalised lerp is exact enough.
        (1.0 - t, t)
    } else {
        let theta = d.min(1.0).acos();
        let s = theta.sin();
        (((1.0 - t) * theta).sin() / s, (t * theta).sin() / s)
    };
    normalize([
        wa * a[0] + wb * b[0],
        wa * a[1] + wb * b[1],
        wa * a[2] + wb * b[2],
        wa * a[3] + wb * b[3],
    ])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn yaw(angle: f32) -> [f32; 4] {
        [0.0, (angle / 2.0).sin(), 0.0, (angle / 2.0).cos()]
    }

    pub(crate) fn close4(a: [f32; 4], b: [f32; 4]) -> bool {
        // Same rotation up to sign.
        dot4(a, b).abs() > 1.0 - 1e-5
    }

    #[test]
    fn slerp_endpoints_midpoint_and_shortest_path() {
        let (a, b) = (yaw(0.0), yaw(1.0));
        assert!(close4(slerp(a, b, 0.0), a));
        assert!(close4(slerp(a, b, 1.0), b));
        assert!(close4(slerp(a, b, 0.5), yaw(0.5)));
        // From +170 to -170 degrees goes through 180, not through 0.
        let (p, q) = (yaw(170f32.to_radians()), yaw(-170f32.to_radians()));
        assert!(close4(slerp(p, q, 0.5), yaw(180f32.to_radians())));
        // The same holds when one end is given with the opposite sign.
        let neg = [-q[0], -q[1], -q[2], -q[3]];
        assert!(close4(slerp(p, neg, 0.5), yaw(180f32.to_radians())));
        let m = slerp(a, b, 0.3);
        assert!((dot4(m, m) - 1.0).abs() < 1e-5, "normalised");
    }

    #[test]
    fn degenerate_quaternions_do_not_poison() {
        assert_eq!(normalize([0.0; 4]), IDENTITY);
        assert_eq!(normalize([f32::NAN; 4]), IDENTITY);
        let q = slerp([f32::NAN; 4], yaw(1.0), 0.5);
        assert!(q.iter().all(|x| x.is_finite()));
    }
}
