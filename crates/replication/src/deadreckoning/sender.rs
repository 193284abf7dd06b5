//! The sending side: when a character's motion is worth a message.

use super::{DrMessage, Motion};
use lagless_core::Tick;
use std::f32::consts::{PI, TAU};
use std::time::Duration;

/// A character's true motion, as the game's simulation has it this tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CharacterState {
    /// Position in metres.
    pub position: [f32; 3],
    /// Yaw in radians: the direction of motion while moving (heading 0 is +Z, π/2 is
    /// +X), the facing while idle.
    pub heading: f32,
    /// Metres per second along the heading.
    pub speed: f32,
    /// How old this state already is when the sender has it: zero for a character the
    /// sender simulates (the default), the owner's one-way lag for one relayed from its
    /// owner (the character-sync article's topology). It travels in the message.
    pub source_lag: Duration,
}

impl CharacterState {
    /// A state the sender simulates itself (no source lag).
    pub fn new(position: [f32; 3], heading: f32, speed: f32) -> Self {
        Self {
            position,
            heading,
            speed,
            source_lag: Duration::ZERO,
        }
    }

    fn is_finite(&self) -> bool {
        self.position.iter().all(|v| v.is_finite())
            && self.heading.is_finite()
            && self.speed.is_finite()
    }
}

/// When a sender sends.
///
/// Defaults: a 2 s sync clock while moving (the character-sync article's figure) and
/// while idle, heading changes beyond 2° and speed changes beyond 0.25 m/s are
/// momentum changes, at most one such change every 250 ms (a spinning camera costs 4
/// messages a second, not 60), below 0.05 m/s a character is idle, and each momentum
/// change is resent once 250 ms later.
///
/// The resend is ours, not the article's: its messages ride an unreliable channel, and
/// a lost turn or stop is otherwise wrong until the next sync, up to 2 s. On a lossy
/// link it cuts the error's tail to about a third for half as many messages again
/// (docs/dead-reckoning.md has the figures).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SenderConfig {
    /// Time between messages during steady motion; also the interval each moving message
    /// states, so receivers arrive at the predicted point as the next one is due.
    pub sync_interval: Duration,
    /// Time between the short messages of an idle character. They cost little and
    /// repair a lost stop message.
    pub idle_interval: Duration,
    /// Shortest time between two heading or speed changes sent (the rate limit). Start
    /// and stop are never held back: they are the changes a viewer notices most, and
    /// they alternate, so they cannot flood on their own faster than the game moves.
    pub min_change_interval: Duration,
    /// A heading change beyond this many radians is a momentum change.
    pub heading_threshold: f32,
    /// A speed change beyond this many metres per second is a momentum change.
    pub speed_threshold: f32,
    /// Below this speed (m/s) a character is idle.
    pub idle_speed: f32,
    /// Send the state once more this long after a momentum change, so one lost change
    /// costs this long instead of a whole sync interval (`None`: never, as the article).
    pub resend_after: Option<Duration>,
}

impl Default for SenderConfig {
    fn default() -> Self {
        Self {
            sync_interval: Duration::from_secs(2),
            idle_interval: Duration::from_secs(2),
            min_change_interval: Duration::from_millis(250),
            heading_threshold: 2f32.to_radians(),
            speed_threshold: 0.25,
            idle_speed: 0.05,
            resend_after: Some(Duration::from_millis(250)),
        }
    }
}

/// Why a message became due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Trigger {
    /// The character's first state.
    First,
    /// It started moving.
    Start,
    /// It stopped.
    Stop,
    /// Its heading changed beyond the threshold.
    Turn,
    /// Its speed changed beyond the threshold.
    Speed,
    /// The sync clock ran out during steady motion or idling.
    Sync,
    /// The resend after a momentum change.
    Resend,
}

impl Trigger {
    /// Whether this is a momentum change (start, stop, turn, speed change).
    pub fn is_momentum_change(self) -> bool {
        matches!(
            self,
            Trigger::Start | Trigger::Stop | Trigger::Turn | Trigger::Speed
        )
    }
}

#[derive(Debug, Clone, Copy)]
struct Sent {
    at: Duration,
    heading: f32,
    speed: f32,
    moving: bool,
}

/// One character's sender: fed its true state every tick, it says when a message is
/// due and builds it.
#[derive(Debug, Clone)]
pub struct DrSender {
    id: u32,
    config: SenderConfig,
    current: Option<(Tick, CharacterState)>,
    sent: Option<Sent>,
    last_change: Option<Duration>,
    resend_at: Option<Duration>,
    seq: u64,
}

/// `a - b` wrapped into `(-π, π]`.
pub(crate) fn angle_diff(a: f32, b: f32) -> f32 {
    let d = (a - b).rem_euclid(TAU);
    if d > PI { d - TAU } else { d }
}

impl DrSender {
    /// A sender for character `id`.
    pub fn new(id: u32, config: SenderConfig) -> Self {
        Self {
            id,
            config,
            current: None,
            sent: None,
            last_change: None,
            resend_at: None,
            seq: 0,
        }
    }

    /// The character's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The settings.
    pub fn config(&self) -> &SenderConfig {
        &self.config
    }

    /// Messages that became due so far (a receiver-side view of "something changed").
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The state of tick `tick` at `now`; returns why a message is due now, if one is.
    /// A state with NaN or infinite values is ignored (the previous one stays).
    pub fn update(&mut self, now: Duration, tick: Tick, state: CharacterState) -> Option<Trigger> {
        if !state.is_finite() {
            return None;
        }
        self.current = Some((tick, state));
        let c = &self.config;
        let moving = state.speed > c.idle_speed;
        let trigger = match self.sent {
            None => Some(Trigger::First),
            Some(sent) if moving != sent.moving => Some(if moving {
                Trigger::Start
            } else {
                Trigger::Stop
            }),
            Some(sent) => {
                let change = if !moving {
                    None
                } else if angle_diff(state.heading, sent.heading).abs() > c.heading_threshold {
                    Some(Trigger::Turn)
                } else if (state.speed - sent.speed).abs() > c.speed_threshold {
                    Some(Trigger::Speed)
                } else {
                    None
                };
                // A change held back by the rate limit goes out once the limit has
                // passed, if the character has not come back meanwhile.
                let allowed = self
                    .last_change
                    .is_none_or(|t| now.saturating_sub(t) >= c.min_change_interval);
                let clock = if moving {
                    c.sync_interval
                } else {
                    c.idle_interval
                };
                if change.is_some() && allowed {
                    change
                } else if now.saturating_sub(sent.at) >= clock {
                    Some(Trigger::Sync)
                } else if self.resend_at.is_some_and(|t| now >= t) {
                    Some(Trigger::Resend)
                } else {
                    None
                }
            }
        };
        if let Some(trigger) = trigger {
            self.sent = Some(Sent {
                at: now,
                heading: state.heading,
                speed: state.speed,
                moving,
            });
            self.seq += 1;
            if trigger.is_momentum_change() {
                self.last_change = Some(now);
                self.resend_at = c.resend_after.map(|d| now + d);
            } else if trigger == Trigger::Resend {
                self.resend_at = None;
            }
        }
        trigger
    }

    /// The newest state as a message (`None` before the first update). Built from the
    /// newest state, not the one that triggered, so a message sent a few ticks after it
    /// became due is no older than it must be.
    pub fn message(&self) -> Option<DrMessage> {
        let (tick, s) = self.current?;
        let motion = if s.speed > self.config.idle_speed {
            Motion::Moving {
                speed: s.speed,
                interval: self.config.sync_interval,
                lag: s.source_lag,
            }
        } else {
            Motion::Idle
        };
        Some(DrMessage {
            id: self.id,
            tick,
            position: s.position,
            heading: s.heading,
            motion,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 64 Hz: tick times are exact in binary, so rate limits fall on whole ticks.
    const HZ: u32 = 64;

    fn at(tick: u32) -> Duration {
        Duration::from_secs_f64(f64::from(tick) / f64::from(HZ))
    }

    /// Runs `state(tick)` for `ticks` ticks and returns the triggers with their ticks.
    fn run(
        config: SenderConfig,
        ticks: u32,
        state: impl Fn(u32) -> CharacterState,
    ) -> Vec<(u32, Trigger)> {
        let mut s = DrSender::new(1, config);
        (0..ticks)
            .filter_map(|t| s.update(at(t), Tick(t), state(t)).map(|tr| (t, tr)))
            .collect()
    }

    #[test]
    fn steady_motion_sends_only_on_the_sync_clock() {
        let config = SenderConfig::default();
        let sent = run(config, 10 * HZ, |t| {
            CharacterState::new([t as f32 * 0.05, 0.0, 0.0], 1.0, 3.0)
        });
        assert_eq!(sent[0], (0, Trigger::First));
        assert!(sent[1..].iter().all(|(_, tr)| *tr == Trigger::Sync));
        // 10 s at a 2 s clock: the first message and four syncs (the fifth is at 10 s).
        assert_eq!(sent.len(), 5, "{sent:?}");
    }

    /// The article's sender, without the resend.
    fn article() -> SenderConfig {
        SenderConfig {
            resend_after: None,
            ..SenderConfig::default()
        }
    }

    #[test]
    fn a_turn_sends_exactly_one_message_at_once() {
        let config = article();
        let turn_at = 30;
        let sent = run(config, HZ, |t| {
            let heading = if t < turn_at { 0.0 } else { 1.0 };
            CharacterState::new([0.0; 3], heading, 3.0)
        });
        assert_eq!(sent, vec![(0, Trigger::First), (turn_at, Trigger::Turn)]);
    }

    #[test]
    fn start_stop_and_speed_changes_are_momentum_changes() {
        let config = article();
        let sent = run(config, 100, |t| {
            let speed = match t {
                0..20 => 0.0,
                20..50 => 2.0,
                50..80 => 5.0,
                _ => 0.0,
            };
            CharacterState::new([0.0; 3], 0.5, speed)
        });
        let triggers: Vec<Trigger> = sent.iter().map(|(_, tr)| *tr).collect();
        assert_eq!(
            triggers,
            vec![
                Trigger::First,
                Trigger::Start,
                Trigger::Speed,
                Trigger::Stop
            ]
        );
        assert_eq!(sent[1].0, 20);
        assert_eq!(sent[3].0, 80);
    }

    #[test]
    fn a_camera_spin_is_rate_limited() {
        let config = SenderConfig::default();
        let secs = 10;
        // The heading turns 6° every tick, as a spinning camera would have it.
        let sent = run(config, secs * HZ, |t| {
            CharacterState::new([0.0; 3], t as f32 * 0.1, 3.0)
        });
        let turns: Vec<u32> = sent
            .iter()
            .filter(|(_, tr)| *tr == Trigger::Turn)
            .map(|(t, _)| *t)
            .collect();
        let limit = config.min_change_interval.as_secs_f64();
        let most = (f64::from(secs) / limit).ceil() as usize;
        assert!(turns.len() <= most, "{} turns, limit {most}", turns.len());
        // Rate-limited, not silenced: the spin keeps being reported at the limit.
        assert!(
            turns.len() + 1 >= most,
            "{} turns, limit {most}",
            turns.len()
        );
        for w in turns.windows(2) {
            assert!(at(w[1]) - at(w[0]) >= config.min_change_interval);
        }
    }

    #[test]
    fn the_resend_follows_a_change_once() {
        let config = SenderConfig {
            resend_after: Some(Duration::from_millis(200)),
            ..article()
        };
        let sent = run(config, HZ, |t| {
            CharacterState::new([0.0; 3], if t < 16 { 0.0 } else { 1.0 }, 3.0)
        });
        let resends: Vec<u32> = sent
            .iter()
            .filter(|(_, tr)| *tr == Trigger::Resend)
            .map(|(t, _)| *t)
            .collect();
        // 0.25 s + 0.2 s = 28.8 ticks: the first tick at or after it.
        assert_eq!(resends, vec![29]);
    }

    #[test]
    fn idle_messages_carry_no_motion_and_nan_states_are_ignored() {
        let mut s = DrSender::new(4, SenderConfig::default());
        assert_eq!(
            s.update(at(0), Tick(0), CharacterState::new([1.0; 3], 0.0, 0.0)),
            Some(Trigger::First)
        );
        assert_eq!(s.message().map(|m| m.motion), Some(Motion::Idle));
        let nan = CharacterState::new([f32::NAN; 3], 0.0, 3.0);
        assert_eq!(s.update(at(1), Tick(1), nan), None);
        assert_eq!(s.message().map(|m| m.position), Some([1.0; 3]));
    }
}
