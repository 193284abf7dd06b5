//! Hit shapes and the ray (or segment) a shot is tested with.

use super::LagCompError;
use lagless_core::interpolation::Pose;

/// A shot's line: from `origin` along the unit `direction`, up to `max_distance`.
/// Built only by [`Ray::new`], which refuses NaN, infinite and zero vectors, so a
/// `Ray` is always valid. A 2D game puts it in the plane z = 0 ([`Ray::planar`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ray {
    origin: [f32; 3],
    direction: [f32; 3],
    max_distance: f32,
}

impl Ray {
    /// A ray from `origin` along `direction` (any non-zero length; normalised here),
    /// tested up to `max_distance` (the weapon's range: finite and positive). A segment
    /// from `a` to `b` is `Ray::new(a, b - a, |b - a|)`.
    pub fn new(
        origin: [f32; 3],
        direction: [f32; 3],
        max_distance: f32,
    ) -> Result<Ray, LagCompError> {
        let all = origin.iter().chain(&direction).chain([&max_distance]);
        if !all.into_iter().all(|v| v.is_finite()) {
            return Err(LagCompError::NonFiniteRay);
        }
        // Scaled by the largest component first, so huge vectors do not overflow.
        let largest = direction.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        if largest == 0.0 {
            return Err(LagCompError::ZeroDirection);
        }
        let scaled = direction.map(|v| v / largest);
        let len = dot3(scaled, scaled).sqrt();
        if max_distance <= 0.0 {
            return Err(LagCompError::BadDistance);
        }
        Ok(Ray {
            origin,
            direction: scaled.map(|v| v / len),
            max_distance,
        })
    }

    /// A ray in the plane z = 0.
    pub fn planar(
        origin: [f32; 2],
        direction: [f32; 2],
        max_distance: f32,
    ) -> Result<Ray, LagCompError> {
        Ray::new(
            [origin[0], origin[1], 0.0],
            [direction[0], direction[1], 0.0],
            max_distance,
        )
    }

    /// Where the ray starts.
    pub fn origin(&self) -> [f32; 3] {
        self.origin
    }

    /// The unit direction.
    pub fn direction(&self) -> [f32; 3] {
        self.direction
    }

    /// How far it is tested.
    pub fn max_distance(&self) -> f32 {
        self.max_distance
    }

    /// The point at `distance` along the ray.
    pub fn at(&self, distance: f32) -> [f32; 3] {
        [0, 1, 2].map(|i| self.origin[i] + self.direction[i] * distance)
    }

    /// The ray in the local frame of `pose` (origin relative to its position, rotated by
    /// the inverse of its rotation).
    fn local(&self, pose: &Pose) -> ([f32; 3], [f32; 3]) {
        let inv = conjugate(normalize(pose.rotation));
        let rel = [0, 1, 2].map(|i| self.origin[i] - pose.position[i]);
        (rotate(inv, rel), rotate(inv, self.direction))
    }
}

/// What a game's hitbox must answer: where a ray first enters it, placed at a pose.
/// [`Shape`] implements it with the usual primitives; a game with compound hitboxes
/// (head and body, say) implements it on its own type and uses
/// [`LagCompensator<ItsType>`](super::LagCompensator).
pub trait HitShape: Copy + std::fmt::Debug {
    /// The distance along `ray` at which it first meets the shape placed at `pose`
    /// (0 when the ray starts inside), or `None` when it misses within
    /// [`Ray::max_distance`].
    fn cast(&self, pose: &Pose, ray: &Ray) -> Option<f32>;

    /// Whether the dimensions are usable (finite, not negative). Shapes failing it are
    /// refused by [`LagCompensator::record`](super::LagCompensator::record).
    fn is_valid(&self) -> bool;
}

/// The built-in hit shapes, in the entity's local frame (its [`Pose`]). 2D shapes lie
/// in the plane z = 0 and turn with [`Pose::planar`]'s heading; they are prisms along
/// z, so a 2D ray (z = 0) is tested in the plane. Capsules lie along local y, as
/// rapier's `capsule_y`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// 2D disc.
    Circle {
        /// Radius.
        radius: f32,
    },
    /// 2D oriented box.
    Rect {
        /// Half the width (local x) and half the height (local y).
        half_extents: [f32; 2],
    },
    /// 2D capsule: a segment from (0, -half_height) to (0, half_height), thickened.
    Capsule2 {
        /// Half the length of the inner segment.
        half_height: f32,
        /// Radius.
        radius: f32,
    },
    /// 3D sphere.
    Sphere {
        /// Radius.
        radius: f32,
    },
    /// 3D oriented box.
    Cuboid {
        /// Half the extents along local x, y and z.
        half_extents: [f32; 3],
    },
    /// 3D capsule along local y.
    Capsule3 {
        /// Half the length of the inner segment.
        half_height: f32,
        /// Radius.
        radius: f32,
    },
}

impl HitShape for Shape {
    fn cast(&self, pose: &Pose, ray: &Ray) -> Option<f32> {
        let (o, d) = ray.local(pose);
        let max = ray.max_distance;
        let (o2, d2) = ([o[0], o[1]], [d[0], d[1]]);
        match *self {
            Shape::Circle { radius } => ball(&o2, &d2, radius, max),
            Shape::Rect { half_extents } => slab(&o2, &d2, &half_extents, max),
            Shape::Capsule2 {
                half_height: h,
                radius: r,
            } => [
                slab(&o2, &d2, &[r, h], max),
                ball(&[o2[0], o2[1] - h], &d2, r, max),
                ball(&[o2[0], o2[1] + h], &d2, r, max),
            ]
            .into_iter()
            .flatten()
            .reduce(f32::min),
            Shape::Sphere { radius } => ball(&o, &d, radius, max),
            Shape::Cuboid { half_extents } => slab(&o, &d, &half_extents, max),
            Shape::Capsule3 {
                half_height: h,
                radius: r,
            } => {
                // The side of the cylinder, where it lies between the caps; the caps'
                // spheres cover the rest (and the cylinder's flat ends lie inside them).
                let side = ball(&[o[0], o[2]], &[d[0], d[2]], r, max)
                    .filter(|t| (o[1] + d[1] * t).abs() <= h);
                [
                    side,
                    ball(&[o[0], o[1] - h, o[2]], &d, r, max),
                    ball(&[o[0], o[1] + h, o[2]], &d, r, max),
                ]
                .into_iter()
                .flatten()
                .reduce(f32::min)
            }
        }
    }

    fn is_valid(&self) -> bool {
        let ok = |v: f32| v.is_finite() && v >= 0.0;
        match *self {
            Shape::Circle { radius } | Shape::Sphere { radius } => ok(radius),
            Shape::Rect { half_extents } => half_extents.into_iter().all(ok),
            Shape::Cuboid { half_extents } => half_extents.into_iter().all(ok),
            Shape::Capsule2 {
                half_height,
                radius,
            }
            | Shape::Capsule3 {
                half_height,
                radius,
            } => ok(half_height) && ok(radius),
        }
    }
}

/// First entry of `o + t·d` (t in `[0, max]`) into the ball of radius `r` at the origin,
/// in any dimension; `d` need not be unit (a 3D ray projected on a plane).
fn ball<const N: usize>(o: &[f32; N], d: &[f32; N], r: f32, max: f32) -> Option<f32> {
    let a: f32 = (0..N).map(|i| d[i] * d[i]).sum();
    let b: f32 = (0..N).map(|i| o[i] * d[i]).sum();
    let c: f32 = (0..N).map(|i| o[i] * o[i]).sum::<f32>() - r * r;
    if c <= 0.0 {
        return Some(0.0);
    }
    if a <= f32::EPSILON * f32::EPSILON {
        return None;
    }
    let disc = b * b - a * c;
    if disc < 0.0 {
        return None;
    }
    let t = (-b - disc.sqrt()) / a;
    (t >= 0.0 && t <= max).then_some(t)
}

/// First entry of `o + t·d` (t in `[0, max]`) into the box `[-h, h]` (slab test).
fn slab<const N: usize>(o: &[f32; N], d: &[f32; N], h: &[f32; N], max: f32) -> Option<f32> {
    let (mut near, mut far) = (0.0f32, max);
    for i in 0..N {
        if d[i].abs() <= f32::EPSILON {
            if o[i].abs() > h[i] {
                return None;
            }
            continue;
        }
        let (t1, t2) = ((-h[i] - o[i]) / d[i], (h[i] - o[i]) / d[i]);
        near = near.max(t1.min(t2));
        far = far.min(t1.max(t2));
        if near > far {
            return None;
        }
    }
    Some(near)
}

fn dot3(a: [f32; 3], b: [f32; 3]) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn normalize(q: [f32; 4]) -> [f32; 4] {
    let n = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt();
    if n > 0.0 && n.is_finite() {
        q.map(|v| v / n)
    } else {
        [0.0, 0.0, 0.0, 1.0]
    }
}

fn conjugate(q: [f32; 4]) -> [f32; 4] {
    [-q[0], -q[1], -q[2], q[3]]
}

/// `v` rotated by the unit quaternion `q` (`[x, y, z, w]`).
fn rotate(q: [f32; 4], v: [f32; 3]) -> [f32; 3] {
    let u = [q[0], q[1], q[2]];
    let w = q[3];
    let uv = cross(u, v);
    let uuv = cross(u, uv);
    [0, 1, 2].map(|i| v[i] + 2.0 * (w * uv[i] + uuv[i]))
}

fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(x: f32, y: f32) -> Pose {
        Pose::planar([x, y], 0.0)
    }

    fn close(a: Option<f32>, b: f32) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-4)
    }

    #[test]
    fn circle_entry_and_miss() {
        let ray = Ray::planar([0.0, 0.0], [1.0, 0.0], 100.0).unwrap();
        let c = Shape::Circle { radius: 1.0 };
        assert!(close(c.cast(&at(10.0, 0.0), &ray), 9.0));
        assert!(close(
            c.cast(&at(10.0, 0.99), &ray),
            10.0 - (1.0f32 - 0.99 * 0.99).sqrt()
        ));
        assert_eq!(c.cast(&at(10.0, 1.01), &ray), None);
        assert_eq!(c.cast(&at(-10.0, 0.0), &ray), None, "behind");
        assert_eq!(c.cast(&at(102.0, 0.0), &ray), None, "beyond range");
        assert!(close(c.cast(&at(0.5, 0.0), &ray), 0.0), "inside");
    }

    #[test]
    fn rect_turns_with_the_heading() {
        let ray = Ray::planar([0.0, 0.0], [1.0, 0.0], 100.0).unwrap();
        let r = Shape::Rect {
            half_extents: [0.5, 3.0],
        };
        // Unturned: 1 wide along x, 6 tall; entered at x = 9.5.
        assert!(close(r.cast(&at(10.0, 2.5), &ray), 9.5));
        // Turned 90°: 6 wide along x, 1 tall; y = 2.5 misses, y = 0.4 enters at 7.
        let turned = |y| Pose::planar([10.0, y], std::f32::consts::FRAC_PI_2);
        assert_eq!(r.cast(&turned(2.5), &ray), None);
        assert!(close(r.cast(&turned(0.4), &ray), 7.0));
    }

    #[test]
    fn capsules_have_round_ends() {
        let c2 = Shape::Capsule2 {
            half_height: 1.0,
            radius: 0.5,
        };
        // Past the flat side's end the round cap is thinner.
        let along = |y| Ray::planar([0.0, y], [1.0, 0.0], 100.0).unwrap();
        assert!(close(c2.cast(&at(10.0, 0.0), &along(0.0)), 9.5));
        assert!(close(c2.cast(&at(10.0, 0.0), &along(1.3)), 10.0 - 0.4));
        assert_eq!(c2.cast(&at(10.0, 0.0), &along(1.6)), None);
        let c3 = Shape::Capsule3 {
            half_height: 1.0,
            radius: 0.5,
        };
        let p = Pose::new([10.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]);
        let ray = |y, z| Ray::new([0.0, y, z], [1.0, 0.0, 0.0], 100.0).unwrap();
        assert!(close(c3.cast(&p, &ray(0.9, 0.0)), 9.5));
        assert!(close(c3.cast(&p, &ray(1.3, 0.0)), 9.6));
        assert!(close(c3.cast(&p, &ray(0.0, 0.3)), 9.6));
        assert_eq!(c3.cast(&p, &ray(1.0, 0.6)), None);
        // From above, down the axis: the top cap at y = 1.5.
        let down = Ray::new([10.0, 5.0, 0.0], [0.0, -1.0, 0.0], 100.0).unwrap();
        assert!(close(c3.cast(&p, &down), 3.5));
    }

    #[test]
    fn sphere_and_cuboid() {
        let p = Pose::new([0.0, 0.0, 10.0], [0.0, 0.0, 0.0, 1.0]);
        let ray = Ray::new([0.0, 0.0, 0.0], [0.0, 0.0, 2.0], 50.0).unwrap();
        assert!(close(Shape::Sphere { radius: 2.0 }.cast(&p, &ray), 8.0));
        let b = Shape::Cuboid {
            half_extents: [1.0, 1.0, 3.0],
        };
        assert!(close(b.cast(&p, &ray), 7.0));
        // Turned 90° about x: z-extent becomes y-extent.
        let s = std::f32::consts::FRAC_1_SQRT_2;
        let turned = Pose::new([0.0, 0.0, 10.0], [s, 0.0, 0.0, s]);
        assert!(close(b.cast(&turned, &ray), 9.0));
    }

    #[test]
    fn bad_rays_are_refused() {
        assert_eq!(
            Ray::planar([f32::NAN, 0.0], [1.0, 0.0], 1.0),
            Err(LagCompError::NonFiniteRay)
        );
        assert_eq!(
            Ray::planar([0.0, 0.0], [f32::INFINITY, 0.0], 1.0),
            Err(LagCompError::NonFiniteRay)
        );
        assert_eq!(
            Ray::planar([0.0, 0.0], [0.0, 0.0], 1.0),
            Err(LagCompError::ZeroDirection)
        );
        let huge = Ray::planar([0.0, 0.0], [3e38, 3e38], 1.0).unwrap();
        assert!((huge.direction()[0] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(
            Ray::planar([0.0, 0.0], [1.0, 0.0], 0.0),
            Err(LagCompError::BadDistance)
        );
    }
}
