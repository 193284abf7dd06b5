//! How a shown character moves between messages: a closed form in time, so what is
//! shown depends on `now` only, not on how often the game asks.

use super::sender::angle_diff;
use std::time::Duration;

/// How the shown character is steered onto a new message's motion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Steering {
    /// The character-sync article's: from wherever it is shown, walk in a straight line
    /// at the speed that reaches the predicted point exactly when the steering time
    /// ends; then keep going along the message's motion.
    #[default]
    Arrive,
    /// Projective velocity blending (Curtiss Murphy, "Believable Dead Reckoning for
    /// Networked Games", Game Engine Gems 2): blend the shown velocity into the
    /// message's over the steering time, project both the shown position along the
    /// blended velocity and the message's along its own, and blend between the two
    /// projections. No corner where the message arrives, and it ends on the message's
    /// line.
    Pvb,
}

fn add(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn scale(a: [f32; 3], k: f32) -> [f32; 3] {
    [a[0] * k, a[1] * k, a[2] * k]
}

/// One message's plan for the shown character, from its arrival on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Plan {
    pub mode: Steering,
    /// When the message arrived.
    pub t0: Duration,
    /// Shown position, velocity and heading when it arrived.
    pub start: [f32; 3],
    pub start_velocity: [f32; 3],
    pub start_heading: f32,
    /// The message's motion carried to `t0`: where the character is believed to be
    /// then, and its velocity.
    pub known: [f32; 3],
    pub velocity: [f32; 3],
    pub heading: f32,
    /// Steering time, seconds (> 0).
    pub steer: f32,
    /// The message's interval, seconds (> 0): the predicted point is where its motion
    /// is then.
    pub interval: f32,
    /// Seconds after `t0` beyond which the character stops (no message for too long).
    pub coast: f32,
    /// Radians per second the shown heading turns at most.
    pub turn_rate: f32,
}

impl Plan {
    /// A plan that shows the message's motion from the start (the first message).
    pub fn settled(&self) -> Self {
        Self {
            start: self.known,
            start_velocity: self.velocity,
            start_heading: self.heading,
            ..*self
        }
    }

    /// The predicted point: where the message's motion is when its interval ends
    /// (`position + direction × speed × (lag + interval)`). Both modes are on the
    /// message's line by then, so the shown character passes through it.
    pub fn predicted_point(&self) -> [f32; 3] {
        add(self.known, scale(self.velocity, self.interval))
    }

    /// Where [`Steering::Arrive`] arrives when the steering time ends.
    fn steer_target(&self) -> [f32; 3] {
        add(self.known, scale(self.velocity, self.steer))
    }

    fn tau(&self, now: Duration) -> f32 {
        now.saturating_sub(self.t0).as_secs_f32().min(self.coast)
    }

    /// Shown position at `now`.
    pub fn position(&self, now: Duration) -> [f32; 3] {
        let tau = self.tau(now);
        let t = self.steer;
        if tau >= t {
            return add(self.known, scale(self.velocity, tau));
        }
        match self.mode {
            Steering::Arrive => {
                let target = self.steer_target();
                add(self.start, scale(sub(target, self.start), tau / t))
            }
            Steering::Pvb => {
                let blend = tau / t;
                // Murphy: V_b = V_0 + (V_k - V_0) t̂; P_t = P_0 + V_b τ; P'_t = P_k + V_k τ;
                // Q = P_t + (P'_t - P_t) t̂ (no acceleration: messages carry none).
                let vb = add(
                    self.start_velocity,
                    scale(sub(self.velocity, self.start_velocity), blend),
                );
                let pt = add(self.start, scale(vb, tau));
                let pk = add(self.known, scale(self.velocity, tau));
                add(pt, scale(sub(pk, pt), blend))
            }
        }
    }

    /// Shown velocity at `now` (the derivative of [`Plan::position`]).
    pub fn velocity(&self, now: Duration) -> [f32; 3] {
        let since = now.saturating_sub(self.t0).as_secs_f32();
        if since >= self.coast {
            return [0.0; 3];
        }
        let tau = since;
        let t = self.steer;
        if tau >= t {
            return self.velocity;
        }
        match self.mode {
            Steering::Arrive => scale(sub(self.steer_target(), self.start), 1.0 / t),
            Steering::Pvb => {
                let blend = tau / t;
                let dv = sub(self.velocity, self.start_velocity);
                let vb = add(self.start_velocity, scale(dv, blend));
                let pt = add(self.start, scale(vb, tau));
                let pk = add(self.known, scale(self.velocity, tau));
                // d/dτ of P_t = P_0 + V_0 τ + (V_k - V_0) τ² / T.
                let dpt = add(self.start_velocity, scale(dv, 2.0 * blend));
                add(
                    add(scale(dpt, 1.0 - blend), scale(self.velocity, blend)),
                    scale(sub(pk, pt), 1.0 / t),
                )
            }
        }
    }

    /// Shown heading at `now`: turning from the one shown at arrival to the message's,
    /// the short way, at the turn rate.
    pub fn heading(&self, now: Duration) -> f32 {
        let tau = now.saturating_sub(self.t0).as_secs_f32();
        let delta = angle_diff(self.heading, self.start_heading);
        let step = (self.turn_rate * tau).min(delta.abs());
        self.start_heading + step.copysign(delta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(mode: Steering) -> Plan {
        Plan {
            mode,
            t0: Duration::from_secs(10),
            start: [0.0, 0.0, 0.0],
            start_velocity: [0.0, 0.0, 3.0],
            start_heading: 0.0,
            known: [1.0, 0.0, 0.5],
            velocity: [3.0, 0.0, 0.0],
            heading: std::f32::consts::FRAC_PI_2,
            steer: 2.0,
            interval: 2.0,
            coast: 5.0,
            turn_rate: 1.0,
        }
    }

    fn close(a: [f32; 3], b: [f32; 3]) -> bool {
        a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4)
    }

    #[test]
    fn both_modes_start_where_shown_and_end_on_the_predicted_point() {
        for mode in [Steering::Arrive, Steering::Pvb] {
            let p = plan(mode);
            let end = p.t0 + Duration::from_secs(2);
            assert!(close(p.position(p.t0), p.start), "{mode:?}");
            assert!(close(p.position(end), p.predicted_point()), "{mode:?}");
            // Then along the message's motion, until the coast ends.
            let later = p.position(p.t0 + Duration::from_secs(3));
            assert!(
                close(later, add(p.predicted_point(), p.velocity)),
                "{mode:?}"
            );
            let stopped = p.position(p.t0 + Duration::from_secs(60));
            assert!(close(stopped, p.position(p.t0 + Duration::from_secs(5))));
        }
    }

    #[test]
    fn pvb_keeps_the_shown_velocity_at_arrival_and_arrive_does_not() {
        let pvb = plan(Steering::Pvb);
        let v = pvb.velocity(pvb.t0);
        // At t̂ = 0 the derivative is V_0 plus the gap between the projections over T.
        let gap = scale(sub(pvb.known, pvb.start), 1.0 / pvb.steer);
        assert!(close(v, add(pvb.start_velocity, gap)));
        let arrive = plan(Steering::Arrive);
        let va = arrive.velocity(arrive.t0);
        assert!(close(va, [3.5, 0.0, 0.25]));
    }

    #[test]
    fn velocity_is_the_derivative_of_position() {
        for mode in [Steering::Arrive, Steering::Pvb] {
            let p = plan(mode);
            for ms in [100u64, 700, 1500, 2500] {
                let t = p.t0 + Duration::from_millis(ms);
                let h = Duration::from_millis(1);
                let d = scale(sub(p.position(t + h), p.position(t - h)), 500.0);
                let v = p.velocity(t);
                assert!(
                    d.iter().zip(v).all(|(a, b)| (a - b).abs() < 2e-2),
                    "{mode:?} at {ms} ms: {d:?} vs {v:?}"
                );
            }
        }
    }

    #[test]
    fn heading_turns_the_short_way_at_the_turn_rate() {
        let mut p = plan(Steering::Arrive);
        p.start_heading = 3.0;
        p.heading = -3.0; // 0.28 rad away through π
        let h = p.heading(p.t0 + Duration::from_millis(100));
        assert!((h - 3.1).abs() < 1e-4, "{h}");
        let h = p.heading(p.t0 + Duration::from_secs(1));
        assert!((angle_diff(h, -3.0)).abs() < 1e-4, "{h}");
    }
}
