//! The state of the link to the server as a game shows it: live, interrupted (nothing
//! heard for a while: "connection interrupted"), or recovering (heard again, not yet
//! showing fresh play). Overwatch shows such an icon and stops predicting when
//! unacknowledged inputs pile up; [`ConnectionConfig::prediction_horizon`] is that choice here.

use lagless_core::Tick;
use std::collections::VecDeque;
use std::time::Duration;

/// How the link to the server is doing ([`Client::link_state`](super::Client::link_state)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinkState {
    /// Packets arrive and the snapshots shown are fresh.
    #[default]
    Live,
    /// Nothing valid has come from the server for [`ConnectionConfig::interrupted_after`]: a
    /// game shows "connection interrupted". Past
    /// [`ConnectionConfig::prediction_horizon`] the player's own inputs stop moving it.
    Interrupted,
    /// Packets arrive again, but no snapshot sent after the link came back has been
    /// applied yet (what the link held during the outage is draining).
    Recovering,
}

/// A change of [`LinkState`] ([`Client::poll_link_event`](super::Client::poll_link_event)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkEvent {
    /// The state entered.
    pub state: LinkState,
    /// When it was entered (the game's time).
    pub at: Duration,
    /// When the last packet before the interruption arrived: for
    /// [`LinkState::Interrupted`] and what follows it, the silence began then.
    pub silent_since: Option<Duration>,
}

/// Link-state settings ([`NetConfig::link`](super::NetConfig::link)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionConfig {
    /// No valid packet from the server for this long is an interruption. Default
    /// [`DEFAULT_INTERRUPTED_AFTER`].
    pub interrupted_after: Duration,
    /// How long into an interruption the player's own inputs still move the predicted
    /// world and go to the server; past it the client predicts and sends the input's
    /// `Default` (no keys) until the link is heard again. `None` predicts on blind.
    ///
    /// Why: the client cannot tell whether the server hears it. If both directions are
    /// out, the server applies no input (its guess lets go after a few ticks) while a
    /// client predicting on walks the player away, to be pulled back metres when the
    /// link returns. With the horizon both ends agree whichever direction failed, at the
    /// cost of a player who stands still while only the downlink is out. Default
    /// [`DEFAULT_PREDICTION_HORIZON`] (`docs/lab.md` has the measurements).
    pub prediction_horizon: Option<Duration>,
}

/// Default [`ConnectionConfig::interrupted_after`]: on the `mobile` profile (bursty 5% loss) the
/// longest silence between two server packets in a minute is well under it, and a hole
/// this long is what the interpolation buffer and the budget also treat as an outage.
pub const DEFAULT_INTERRUPTED_AFTER: Duration = Duration::from_millis(500);

/// Default [`ConnectionConfig::prediction_horizon`].
pub const DEFAULT_PREDICTION_HORIZON: Duration = Duration::from_millis(250);

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            interrupted_after: DEFAULT_INTERRUPTED_AFTER,
            prediction_horizon: Some(DEFAULT_PREDICTION_HORIZON),
        }
    }
}

/// Link counters ([`ClientNetStats::link`](super::ClientNetStats::link)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Interruptions begun.
    pub interruptions: u64,
    /// Time spent interrupted, from the last packet before each interruption to the
    /// first after it (an interruption still going counts up to the newest update).
    pub interrupted: Duration,
    /// Ticks whose input was replaced by the default past the prediction horizon.
    pub inputs_withheld: u64,
}

/// Events kept until polled.
const MAX_LINK_EVENTS: usize = 64;

/// The client's watch over the link.
#[derive(Debug, Clone, Default)]
pub(crate) struct LinkWatch {
    config: ConnectionConfig,
    state: LinkState,
    /// The newest valid packet's time.
    last_heard: Option<Duration>,
    /// The silence's start, while interrupted or recovering.
    silent_since: Option<Duration>,
    /// While recovering: the first snapshot tick sent after the link came back (the
    /// server's estimated tick then), `None` when the clock is not known.
    fresh_from: Option<f64>,
    /// Interrupted time of the interruptions that ended.
    closed: Duration,
    now: Duration,
    events: VecDeque<LinkEvent>,
    stats: ConnectionStats,
}

impl LinkWatch {
    pub(crate) fn new(config: ConnectionConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    pub(crate) fn state(&self) -> LinkState {
        self.state
    }

    pub(crate) fn stats(&self) -> ConnectionStats {
        let open = match (self.state, self.silent_since) {
            (LinkState::Interrupted, Some(since)) => self.now.saturating_sub(since),
            _ => Duration::ZERO,
        };
        ConnectionStats {
            interrupted: self.closed + open,
            ..self.stats
        }
    }

    pub(crate) fn poll_event(&mut self) -> Option<LinkEvent> {
        self.events.pop_front()
    }

    fn enter(&mut self, state: LinkState, at: Duration) {
        self.state = state;
        if self.events.len() >= MAX_LINK_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(LinkEvent {
            state,
            at,
            silent_since: self.silent_since,
        });
    }

    /// Time has passed to `now`: a long enough silence is an interruption.
    pub(crate) fn update(&mut self, now: Duration) {
        self.now = self.now.max(now);
        let Some(last) = self.last_heard else {
            return;
        };
        if self.state != LinkState::Interrupted
            && self.now.saturating_sub(last) >= self.config.interrupted_after
        {
            self.stats.interruptions += 1;
            self.silent_since = Some(last);
            self.enter(LinkState::Interrupted, self.now);
        }
    }

    /// When the silence becomes an interruption, if nothing arrives before (`None` when
    /// interrupted already or nothing was ever heard).
    pub(crate) fn deadline(&self) -> Option<Duration> {
        let last = self.last_heard?;
        (self.state != LinkState::Interrupted).then(|| last + self.config.interrupted_after)
    }

    /// A valid packet arrived at `now`; `server_position` is the client's estimate of the
    /// server's tick then.
    pub(crate) fn heard(&mut self, now: Duration, server_position: Option<f64>) {
        self.update(now);
        self.last_heard = Some(self.last_heard.map_or(now, |l| l.max(now)));
        if self.state == LinkState::Interrupted {
            if let Some(since) = self.silent_since {
                self.closed += now.saturating_sub(since);
            }
            self.fresh_from = server_position;
            self.enter(LinkState::Recovering, now);
        }
    }

    /// The snapshot of `tick` was applied: one sent after the link came back ends the
    /// recovery.
    pub(crate) fn applied(&mut self, tick: Tick) {
        if self.state == LinkState::Recovering
            && self
                .fresh_from
                .is_none_or(|f| f64::from(tick.0) >= f.floor())
        {
            self.silent_since = None;
            self.fresh_from = None;
            self.enter(LinkState::Live, self.now);
        }
    }

    /// True when the player's input should be withheld now: interrupted for longer than
    /// the prediction horizon.
    pub(crate) fn withhold_input(&mut self) -> bool {
        let withhold = self.state == LinkState::Interrupted
            && self.config.prediction_horizon.is_some_and(|h| {
                self.silent_since
                    .is_some_and(|since| self.now.saturating_sub(since) >= h)
            });
        self.stats.inputs_withheld += u64::from(withhold);
        withhold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn silence_interrupts_a_fresh_snapshot_makes_it_live_again() {
        let mut w = LinkWatch::new(ConnectionConfig::default());
        // Nothing heard yet: never interrupted (still connecting).
        w.update(ms(5000));
        assert_eq!(w.state(), LinkState::Live);
        for t in (5000..6000).step_by(16) {
            w.heard(ms(t), Some(t as f64 / 16.0));
            w.applied(Tick((t / 16) as u32 - 5));
        }
        w.update(ms(6300));
        assert_eq!(w.state(), LinkState::Live);
        assert!(!w.withhold_input());
        w.update(ms(6500));
        assert_eq!(w.state(), LinkState::Interrupted);
        assert!(w.withhold_input(), "past the 250 ms horizon");
        // Back at 8 s: the held snapshots drain first.
        w.heard(ms(8000), Some(500.0));
        assert_eq!(w.state(), LinkState::Recovering);
        w.applied(Tick(380));
        assert_eq!(w.state(), LinkState::Recovering);
        assert!(!w.withhold_input());
        w.applied(Tick(500));
        assert_eq!(w.state(), LinkState::Live);
        let states: Vec<_> = std::iter::from_fn(|| w.poll_event())
            .map(|e| (e.state, e.at))
            .collect();
        assert_eq!(
            states,
            [
                (LinkState::Interrupted, ms(6500)),
                (LinkState::Recovering, ms(8000)),
                (LinkState::Live, ms(8000))
            ]
        );
        let s = w.stats();
        assert_eq!(s.interruptions, 1);
        // From the last packet (5992 ms) to the first after.
        assert_eq!(s.interrupted, ms(8000 - 5992));
    }

    #[test]
    fn no_horizon_predicts_on() {
        let mut w = LinkWatch::new(ConnectionConfig {
            prediction_horizon: None,
            ..ConnectionConfig::default()
        });
        w.heard(ms(0), None);
        w.update(ms(3000));
        assert_eq!(w.state(), LinkState::Interrupted);
        assert!(!w.withhold_input());
        // No clock known: the first applied snapshot after the return is fresh.
        w.heard(ms(3100), None);
        w.applied(Tick(1));
        assert_eq!(w.state(), LinkState::Live);
    }
}
