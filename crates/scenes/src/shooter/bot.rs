//! A scripted player that moves through the arena and shoots at what its own client
//! shows (the interpolated enemies, not the server's truth), so hit registration is
//! measured as a player experiences it.

use super::{Arena, PlayerId, PlayerState, RIFLE_RANGE, ShooterInput, Weapon};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// The bot: a waypoint wanderer that fires the rifle whenever an enemy it shows is in
/// sight and its rifle is ready, and the launcher now and then.
pub struct Bot {
    arena: Arc<Arena>,
    rng: ChaCha8Rng,
    tick_hz: u32,
    waypoint: Option<[f32; 2]>,
    waypoint_until: u64,
    shown: Vec<(PlayerId, [f32; 2])>,
    next_shot: u16,
    rifle_ready: u64,
    launcher_ready: u64,
    /// How far off the bot aims, m at the target, at most (a player's imprecision: some
    /// shots graze the hit circle's edge, where client and server are most likely to
    /// disagree).
    pub aim_error: f32,
}

impl Bot {
    /// A bot in `arena`, seeded with `seed`, at `tick_hz`.
    pub fn new(arena: Arc<Arena>, seed: u64, tick_hz: u32) -> Self {
        Self {
            arena,
            rng: ChaCha8Rng::seed_from_u64(seed),
            tick_hz: tick_hz.max(1),
            waypoint: None,
            waypoint_until: 0,
            shown: Vec::new(),
            next_shot: 0,
            rifle_ready: 0,
            launcher_ready: 0,
            aim_error: 0.35,
        }
    }

    /// What the client shows of the others now (id and position; `None` for one not
    /// shown).
    pub fn observe(&mut self, others: impl IntoIterator<Item = (PlayerId, Option<[f32; 2]>)>) {
        self.shown.clear();
        self.shown
            .extend(others.into_iter().filter_map(|(p, x)| Some((p, x?))));
    }

    /// The input for `tick`, from the own player as the client shows it.
    pub fn input(&mut self, tick: u64, own: Option<&PlayerState>) -> ShooterInput {
        let Some(own) = own.filter(|s| s.alive) else {
            self.waypoint = None;
            return ShooterInput::default().with_aim([1.0, 0.0]);
        };
        let me = own.position;
        let near = |w: &[f32; 2]| (w[0] - me[0]).hypot(w[1] - me[1]) < 1.0;
        if self.waypoint.is_none_or(|w| near(&w)) || tick >= self.waypoint_until {
            let h = self.arena.half_size() - 1.0;
            let w = loop {
                let w = [self.rng.random_range(-h..h), self.rng.random_range(-h..h)];
                if !self.arena.blocked(w) {
                    break w;
                }
            };
            self.waypoint = Some(w);
            self.waypoint_until = tick + 5 * u64::from(self.tick_hz);
        }
        let w = self.waypoint.unwrap_or(me);
        let mut input = ShooterInput::moving(w[0] - me[0], w[1] - me[1]);
        // Diagonal keys only when the waypoint is well off an axis, so it is reached.
        if (w[0] - me[0]).abs() < 0.3 {
            input.keys &= !0b0011;
        }
        if (w[1] - me[1]).abs() < 0.3 {
            input.keys &= !0b1100;
        }
        let target = self
            .shown
            .iter()
            .map(|&(_, p)| (p, (p[0] - me[0]).hypot(p[1] - me[1])))
            .filter(|&(p, d)| d < RIFLE_RANGE * 0.6 && self.arena.line_of_sight(me, p))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let Some((p, d)) = target else {
            let v = own.velocity;
            let aim = if v[0] != 0.0 || v[1] != 0.0 {
                v
            } else {
                [own.aim.cos(), own.aim.sin()]
            };
            return input.with_aim(aim);
        };
        let err = self.rng.random_range(-self.aim_error..self.aim_error);
        let to = [p[0] - me[0], p[1] - me[1]];
        // Off by `err` metres across the line of fire, at the target.
        let aim = [to[0] - to[1] / d * err, to[1] + to[0] / d * err];
        input = input.with_aim(aim);
        let hz = u64::from(self.tick_hz);
        if tick >= self.launcher_ready && d > 3.0 && self.rng.random::<f32>() < 0.05 {
            input.fire = 2;
            self.launcher_ready = tick + u64::from(Weapon::Launcher.interval_ticks(self.tick_hz));
            // The rifle waits a moment after a launch.
            self.rifle_ready = self.rifle_ready.max(tick + hz / 10);
        } else if tick >= self.rifle_ready {
            input.fire = 1;
            input.shot = self.next_shot;
            self.next_shot = self.next_shot.wrapping_add(1);
            self.rifle_ready = tick + u64::from(Weapon::Rifle.interval_ticks(self.tick_hz));
        }
        input
    }
}
