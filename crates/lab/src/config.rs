//! What a lab run is: scene, network, duration, seed, clients, and the knobs under test.

use lagless_core::interpolation::DelayPolicy;
use lagless_core::{ClientConfig, LeadPolicy, PredictionConfig, ServerConfig, SmoothingConfig};
use lagless_netem::{Bandwidth, ConfigError, GilbertElliott, Jitter, LinkConfig, Loss, Trace};
use lagless_scenes::cubes::predict::PredictConfig;
use lagless_scenes::cubes::script::InputScript;
use std::sync::Arc;
use std::time::Duration;

/// Builds the input script for one client from that client's seed.
pub type ScriptFactory = Arc<dyn Fn(u64) -> Box<dyn InputScript + Send> + Send + Sync>;

/// Which input driver the simulated players use.
#[derive(Clone)]
pub enum ScriptChoice {
    /// A script from `lagless_scenes::cubes::script::SCRIPT_NAMES` ("roam", "pattern").
    Named(String),
    /// A custom script (tests use this to pin inputs to absolute ticks).
    Custom(ScriptFactory),
}

impl std::fmt::Debug for ScriptChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptChoice::Named(n) => write!(f, "Named({n:?})"),
            ScriptChoice::Custom(_) => write!(f, "Custom(..)"),
        }
    }
}

/// Overrides applied on top of a named network profile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetOverrides {
    /// One-way base delay.
    pub delay_ms: Option<f64>,
    /// Jitter: standard deviation for normal jitter, half-range for uniform jitter.
    pub jitter_ms: Option<f64>,
    /// Mean loss in percent; bursty profiles keep their mean burst length.
    pub loss_pct: Option<f64>,
    /// Duplication probability in percent.
    pub duplicate_pct: Option<f64>,
    /// Reordering probability in percent.
    pub reorder_pct: Option<f64>,
    /// Bandwidth cap in kbit/s.
    pub bandwidth_kbps: Option<u32>,
    /// Queue size in bytes for the bandwidth cap (default 64 KiB).
    pub queue_bytes: Option<usize>,
    /// A Mahimahi delivery trace, applied to the server -> client direction.
    pub trace: Option<Trace>,
    /// A Mahimahi delivery trace for the client -> server direction.
    pub trace_up: Option<Trace>,
    /// Queue limit, in packets, while waiting for trace opportunities.
    pub trace_queue_packets: Option<usize>,
}

impl NetOverrides {
    /// Applies the overrides to `base`, returning (up, down) link configs.
    pub fn apply(&self, base: &LinkConfig) -> (LinkConfig, LinkConfig) {
        let mut c = base.clone();
        if let Some(ms) = self.delay_ms {
            c.delay = millis(ms);
        }
        if let Some(ms) = self.jitter_ms {
            c.jitter = match c.jitter {
                Jitter::Uniform { .. } => Jitter::Uniform { max: millis(ms) },
                _ if ms <= 0.0 => Jitter::None,
                _ => Jitter::Normal {
                    std_dev: millis(ms),
                },
            };
        }
        if let Some(pct) = self.loss_pct {
            let rate = (pct / 100.0).clamp(0.0, 1.0);
            c.loss = match c.loss {
                _ if rate == 0.0 => Loss::None,
                Loss::GilbertElliott(ge) => {
                    Loss::GilbertElliott(GilbertElliott::with_mean_loss(rate, ge.mean_bad_run()))
                }
                _ => Loss::Uniform { rate },
            };
        }
        if let Some(p) = self.duplicate_pct {
            c.duplicate_rate = p / 100.0;
        }
        if let Some(p) = self.reorder_pct {
            c.reorder_rate = p / 100.0;
        }
        if let Some(kbps) = self.bandwidth_kbps {
            c.bandwidth = Some(Bandwidth {
                kbps,
                queue_bytes: self.queue_bytes.unwrap_or(64 * 1024),
            });
        }
        if let Some(n) = self.trace_queue_packets {
            c.trace_queue_packets = n;
        }
        let mut up = c.clone();
        if let Some(t) = &self.trace_up {
            up.trace = Some(t.clone());
        }
        let mut down = c;
        if let Some(t) = &self.trace {
            down.trace = Some(t.clone());
        }
        (up, down)
    }
}

fn millis(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

/// A change of network conditions part-way through a run or replay: from [`at`](Self::at)
/// on, both directions of every connection behave as a named profile, as when a phone
/// walks out of Wi-Fi range onto a cell network. What is already in flight is delivered as
/// it was scheduled (see [`lagless_netem::Link::reconfigure`]).
///
/// Overrides on the command line (`--loss-pct`, `--trace`, ...) shape the starting link
/// only; a change brings its profile as named, with the overrides it names itself
/// (`120:snapshot-demo,loss-pct=0`).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkChange {
    /// Simulated time from which the new conditions hold.
    pub at: Duration,
    /// The profile's name, with the overrides the change names (`snapshot-demo,loss-pct=0`),
    /// for reports.
    pub profile: String,
    /// The profile's link, overrides applied.
    pub link: LinkConfig,
    /// The directions that change (`@up` or `@down` after the spec; both unless named).
    pub direction: lagless_netem::Direction,
}

/// The network profile called `name`, or an error listing the known ones.
pub fn named_profile(name: &str) -> Result<LinkConfig, String> {
    lagless_netem::profile(name).ok_or_else(|| {
        format!(
            "unknown network profile {name:?} (known: {})",
            lagless_netem::PROFILE_NAMES.join(", ")
        )
    })
}

impl LinkChange {
    /// The change to profile `name` at `at`, or an error naming the known profiles.
    pub fn new(at: Duration, name: &str) -> Result<Self, String> {
        Ok(Self {
            at,
            profile: name.to_string(),
            link: named_profile(name)?,
            direction: lagless_netem::Direction::Both,
        })
    }

    /// Applies the change to a connection: its directions take the new link, the other
    /// keeps its own.
    pub fn apply_to(&self, duplex: &mut lagless_netem::Duplex) -> Result<(), ConfigError> {
        let up = if self.direction.up() {
            self.link.clone()
        } else {
            duplex.up.config().clone()
        };
        let down = if self.direction.down() {
            self.link.clone()
        } else {
            duplex.down.config().clone()
        };
        duplex.reconfigure(up, down)
    }

    /// Parses `SECONDS:PROFILE[,KEY=VALUE...][@up|@down]`, as the command line spells it
    /// (`60:mobile`, or `120:snapshot-demo,loss-pct=0` for the same link without its
    /// losses). The keys are the network options' names without their dashes:
    /// `delay-ms`, `jitter-ms`, `loss-pct`, `dup-pct`, `reorder-pct` and `bandwidth-kbps`
    /// (a link carrying at most that, with the default queue), applied to the
    /// profile as on the command line (see [`NetOverrides::apply`]).
    pub fn parse(text: &str) -> Result<Self, String> {
        let (body, direction) = match text.trim().rsplit_once('@') {
            Some((body, "up")) => (body, lagless_netem::Direction::Up),
            Some((body, "down")) => (body, lagless_netem::Direction::Down),
            Some((body, "both")) => (body, lagless_netem::Direction::Both),
            Some(_) => {
                return Err(format!(
                    "link change {text:?}: the direction after @ is up, down or both"
                ));
            }
            None => (text.trim(), lagless_netem::Direction::Both),
        };
        let mut change = Self::parse_both(text, body)?;
        change.direction = direction;
        if direction != lagless_netem::Direction::Both {
            change.profile = format!(
                "{}@{}",
                change.profile,
                if direction.up() { "up" } else { "down" }
            );
        }
        Ok(change)
    }

    /// [`LinkChange::parse`] of `body` (the text without its direction).
    fn parse_both(text: &str, body: &str) -> Result<Self, String> {
        let (at, spec) = body.trim().split_once(':').ok_or_else(|| {
            format!("link change {text:?}: expected SECONDS:PROFILE[,KEY=VALUE...]")
        })?;
        let secs: f64 = at
            .trim()
            .parse()
            .map_err(|_| format!("link change {text:?}: {at:?} is not a number of seconds"))?;
        if !(secs.is_finite() && secs > 0.0 && secs <= 1e6) {
            return Err(format!(
                "link change {text:?}: the time must be positive and at most 1e6 s"
            ));
        }
        let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
        let (name, settings) = parts.split_first().unwrap_or((&"", &[]));
        let mut overrides = NetOverrides::default();
        for part in settings {
            let (key, value) = part.split_once('=').ok_or_else(|| {
                format!("link change {text:?}: expected KEY=VALUE after the profile, got {part:?}")
            })?;
            let number: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    format!(
                        "link change {text:?}: {key} wants a number of at least 0, got {value:?}"
                    )
                })?;
            if key.trim() == "bandwidth-kbps" {
                // A thin stretch: the link carries at most this, queueing the rest.
                overrides.bandwidth_kbps = Some(number.clamp(1.0, 1e7) as u32);
                continue;
            }
            let slot = match key.trim() {
                "delay-ms" => &mut overrides.delay_ms,
                "jitter-ms" => &mut overrides.jitter_ms,
                "loss-pct" => &mut overrides.loss_pct,
                "dup-pct" => &mut overrides.duplicate_pct,
                "reorder-pct" => &mut overrides.reorder_pct,
                other => {
                    return Err(format!(
                        "link change {text:?}: unknown setting {other:?} (known: delay-ms, \
                         jitter-ms, loss-pct, dup-pct, reorder-pct, bandwidth-kbps)"
                    ));
                }
            };
            *slot = Some(number);
        }
        let mut change = Self::new(Duration::from_secs_f64(secs), name)
            .map_err(|e| format!("link change {text:?}: {e}"))?;
        if overrides != NetOverrides::default() {
            change.link = overrides.apply(&change.link).0;
            change.profile = parts.join(",");
        }
        change
            .link
            .validate()
            .map_err(|e| format!("link change {text:?}: {e}"))?;
        Ok(change)
    }
}

/// Checks that `changes` come in strictly increasing time order and before the end of a
/// run of `seconds`, so every phase they delimit has some length.
pub fn check_link_changes(changes: &[LinkChange], seconds: f64) -> Result<(), String> {
    let mut previous = Duration::ZERO;
    for change in changes {
        if change.at <= previous {
            return Err(format!(
                "link changes must come in increasing time order after 0 s (got {} s after {} s)",
                change.at.as_secs_f64(),
                previous.as_secs_f64()
            ));
        }
        if change.at.as_secs_f64() >= seconds {
            return Err(format!(
                "link change at {} s is not before the end ({seconds} s)",
                change.at.as_secs_f64()
            ));
        }
        change.link.validate().map_err(|e| e.to_string())?;
        previous = change.at;
    }
    Ok(())
}

/// How the walker scene's scripted characters reach clients (`--walker-sync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalkerSync {
    /// Dead reckoning: messages on momentum changes and a sync clock, shown where they
    /// are now (`lagless_replication::deadreckoning`).
    #[default]
    DeadReckoning,
    /// Ordinary snapshots, shown through the interpolation buffer: the comparison.
    Interpolation,
}

/// The walker scene's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WalkerSettings {
    /// Scripted walkers (`--walkers`, default 200).
    pub count: u32,
    /// How they reach clients.
    pub sync: WalkerSync,
    /// How dead-reckoned characters are steered onto each message (`--steering`).
    pub steering: lagless_replication::deadreckoning::Steering,
    /// [`Steering::Arrive`](lagless_replication::deadreckoning::Steering::Arrive)'s
    /// steering time for moving messages (`--steer-ms`); `None`: each message's own sync
    /// interval, as the character-sync article steers.
    pub steer_time: Option<Duration>,
    /// The most of each client's budget the dead-reckoning messages may take
    /// (`--dr-budget-share`; `lagless_replication::deadreckoning::DrConfig::budget_share`);
    /// `None`: sent beside the budget, uncounted.
    pub budget_share: Option<f32>,
}

impl Default for WalkerSettings {
    fn default() -> Self {
        Self {
            count: 200,
            sync: WalkerSync::DeadReckoning,
            steering: lagless_replication::deadreckoning::Steering::Arrive,
            steer_time: None,
            budget_share: lagless_replication::DrConfig::default().budget_share,
        }
    }
}

/// The shooter scene's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShooterSettings {
    /// Test rifle shots in the world the shooter saw (`--no-lag-compensation` turns it
    /// off: shots are tested in the server's present, the baseline).
    pub lag_compensation: bool,
    /// Client 1 claims a view this much older than it shows (`--lie-rewind-ms`; the
    /// faked-ping attack). Zero: honest.
    pub lie_rewind: Duration,
    /// The trusted window of lag compensation (250 ms, Overwatch's cap).
    pub window: Duration,
    /// Measure the window from the latency the server measured for the shooter
    /// (`--lagcomp-window relative`, the default) rather than from its present
    /// (`absolute`).
    pub relative_window: bool,
    /// The arena is this many standard arenas on a side (`--arena-tiles`).
    pub arena_tiles: u32,
}

impl Default for ShooterSettings {
    fn default() -> Self {
        Self {
            lag_compensation: true,
            lie_rewind: Duration::ZERO,
            window: Duration::from_millis(250),
            relative_window: true,
            arena_tiles: 1,
        }
    }
}

/// Everything that defines one lab run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Scene name (`crate::scenes::SCENES`).
    pub scene: String,
    /// Cube scene: cubes per side of its grid (30: 900 cubes; smaller for quick runs).
    pub grid: u32,
    /// Network profile name (see `lagless_netem::PROFILE_NAMES`).
    pub profile: String,
    /// Overrides on top of the profile.
    pub net: NetOverrides,
    /// Changes of network conditions during the run, in time order.
    pub link_changes: Vec<LinkChange>,
    /// Outages of every client's link, per direction.
    pub outages: Vec<crate::input_buffer::OutageSpec>,
    /// Simulated seconds.
    pub seconds: f64,
    /// Master seed: network fates and scripts derive from it.
    pub seed: u64,
    /// Number of clients (each drives one player).
    pub clients: u32,
    /// Input driver.
    pub script: ScriptChoice,
    /// Snapshot rate in Hz (at most the tick rate).
    pub snapshot_hz: u32,
    /// Most snapshot payload per client, kbit/s, adapting below it to the link
    /// (`lagless_replication::BudgetConfig`); 0: no budget.
    pub budget_kbps: f64,
    /// Distance at which an entity's priority for a client halves, m
    /// (`lagless_replication::ReplicationConfig::relevance_distance`).
    pub relevance_m: f32,
    /// How many times faster entities near the client's player gain priority
    /// (`lagless_replication::ReplicationConfig::near_boost`).
    pub near_boost: f32,
    /// Threads the server encodes the clients' snapshots on
    /// (`lagless_replication::ReplicationConfig::threads`; the same bytes whatever the
    /// count). With more than one, the server's CPU figures count every thread.
    pub threads: usize,
    /// The walker scene's settings (`--walkers`, `--walker-sync`, `--steering`).
    pub walkers: WalkerSettings,
    /// The shooter scene's settings (`--no-lag-compensation`, `--lie-rewind-ms`).
    pub shooter: ShooterSettings,
    /// Server settings (tick rate is taken from here).
    pub server: ServerConfig,
    /// Client settings.
    pub client: ClientConfig,
    /// Virtual clock resolution.
    pub clock_step: Duration,
    /// Client-side prediction of the own player (off: show the newest server state).
    pub prediction: bool,
    /// What the client predicts, and its tolerances.
    pub predict: PredictConfig,
    /// Prediction history and replay limits.
    pub prediction_limits: PredictionConfig,
    /// Correction smoothing (a zero half-life turns it off).
    pub smoothing: SmoothingConfig,
    /// When the client calls the link interrupted, and how far it predicts into it.
    pub link: lagless_replication::ConnectionConfig,
    /// Every Nth rollback, also time a naive full-world restore and replay of the same
    /// depth on a shadow world (0: never). The ratio to it is reported.
    pub naive_sample: u32,
    /// Spatial cells on the server: each client is sent only what lies in the cells
    /// near its player (`--cells-m`, `--interest-m`); `None`: everything.
    pub cells: Option<lagless_replication::CellConfig>,
    /// Delay policy of the buffer that shows the other players (with more than one
    /// client).
    pub interpolation: DelayPolicy,
    /// Settings of the buffers that show the other players and of their shadows (stretch,
    /// overdue moment, history).
    pub playback: crate::playback::PlaybackSettings,
    /// Policies replayed by value-less shadow buffers on the same arrivals and frames as
    /// the real one, for a like-for-like comparison (see `lagless_lab::playback`). The
    /// default holds the classic three-interval buffer, reported as
    /// `interpolation.fixed3.*`.
    pub interpolation_shadows: Vec<DelayPolicy>,
    /// Scene rocket: how a client shows the ball and the other cars (predicted or
    /// interpolated), and its prediction tolerances.
    pub rocket: lagless_scenes::rocket::predict::PredictPolicy,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            scene: "cubes".into(),
            grid: lagless_scenes::cubes::CubeSceneConfig::default().grid,
            profile: "mobile".into(),
            net: NetOverrides::default(),
            link_changes: Vec::new(),
            outages: Vec::new(),
            seconds: 30.0,
            seed: 1,
            clients: 1,
            script: ScriptChoice::Named("roam".into()),
            snapshot_hz: 64,
            budget_kbps: lagless_replication::BudgetConfig::default().max_kbps,
            relevance_m: lagless_replication::ReplicationConfig::default().relevance_distance,
            near_boost: lagless_replication::ReplicationConfig::default().near_boost,
            threads: lagless_replication::available_threads(),
            walkers: WalkerSettings::default(),
            shooter: ShooterSettings::default(),
            server: ServerConfig::default(),
            client: ClientConfig::default(),
            clock_step: Duration::from_micros(500),
            prediction: true,
            predict: PredictConfig::default(),
            prediction_limits: PredictionConfig::default(),
            smoothing: SmoothingConfig::default(),
            link: lagless_replication::ConnectionConfig::default(),
            naive_sample: 8,
            cells: None,
            interpolation: DelayPolicy::adaptive(),
            playback: crate::playback::PlaybackSettings::default(),
            interpolation_shadows: vec![DelayPolicy::CLASSIC],
            rocket: lagless_scenes::rocket::predict::PredictPolicy::default(),
        }
    }
}

/// Spatial cells of `size_m` (`None`: no cells) with an interest of `interest_m` around
/// each player (`--cells-m`, `--interest-m`).
pub fn cells(
    size_m: Option<f32>,
    interest_m: f32,
) -> Result<Option<lagless_replication::CellConfig>, String> {
    match size_m {
        Some(size) if size.is_finite() && size > 0.0 && interest_m.is_finite() => {
            Ok(Some(lagless_replication::CellConfig {
                size,
                radius: interest_m.max(0.0),
            }))
        }
        Some(_) => Err("--cells-m must be positive, --interest-m finite".into()),
        None => Ok(None),
    }
}

/// The shooter's underrun target ([`RunConfig::for_scene`]).
const SHOOTER_UNDERRUN: f32 = 0.0275;

/// The most starvation the shooter's felt lead may choose ([`RunConfig::for_scene`]):
/// twice the core's 10%, since a late shot still fires there (`TickInputs::late`) and
/// a late tick's cost is then its movement's guess alone, which the felt lead measures.
/// On `mobile` (seeds 1-10, docs/shooter.md) it cut `input.delay_ms_mean` from 187.7 to
/// 182.4 on average (seed 3: 220.7 to 183.2).
const SHOOTER_MAX_STARVED: f64 = 0.2;

impl RunConfig {
    /// The defaults for scene `scene`: the shooter runs at the Pixonic shooter article's
    /// 30 ticks/s with snapshots every tick and 32 ticks of prediction history; the
    /// other scenes at 64. What `lagless run` and `lagless view` start from.
    ///
    /// The shooter shows the others as a shooter should, for the least delay at the
    /// article's underrun rate: an adaptive delay for 2.75% underruns over 2048
    /// arrivals (68 s), stretching playback to half speed over an overdue snapshot. On
    /// a bursty link no delay that changes only slowly beats a well-chosen constant
    /// one, and the article's fixed three intervals is one; stretching is what beats
    /// it (`docs/shooter.md`: 69-76 ms at 2.0-2.5% underruns against 79 ms at
    /// 2.7-2.9% on `mobile`, and a view judged 31-45 ms younger).
    pub fn for_scene(scene: &str) -> Self {
        let mut config = Self {
            scene: scene.to_owned(),
            ..Self::default()
        };
        if scene == "shooter" {
            config.set_tick_hz(30);
            config.snapshot_hz = 30;
            config.prediction_limits.history_ticks = 32;
            config.interpolation = DelayPolicy::adaptive_with_target(SHOOTER_UNDERRUN);
            config.playback.max_stretch = 0.5;
            config.playback.history = 2048;
            config.client.sync.lead = LeadPolicy::Felt {
                min_starvation: 0.001,
                max_starvation: SHOOTER_MAX_STARVED,
            };
        }
        config
    }

    /// Sets the simulation rate on both ends.
    pub fn set_tick_hz(&mut self, hz: u32) {
        self.server.tick_hz = hz;
        self.client.tick_hz = hz;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shooter_defaults_to_its_articles_rates() {
        let c = RunConfig::for_scene("shooter");
        assert_eq!(
            (c.server.tick_hz, c.client.tick_hz, c.snapshot_hz),
            (30, 30, 30)
        );
        assert_eq!(c.prediction_limits.history_ticks, 32);
        // It shows the others stretching over overdue snapshots (docs/shooter.md); the
        // other scenes keep the core's playback.
        assert_eq!(
            (c.interpolation, c.playback.max_stretch, c.playback.history),
            (DelayPolicy::adaptive_with_target(0.0275), 0.5, 2048)
        );
        // Its felt lead may choose up to 20% starvation: a late shot still fires.
        assert_eq!(
            c.client.sync.lead,
            LeadPolicy::Felt {
                min_starvation: 0.001,
                max_starvation: 0.2
            }
        );
        assert_eq!(
            RunConfig::for_scene("cubes").client.sync.lead,
            LeadPolicy::FELT
        );
        let c = RunConfig::for_scene("cubes");
        assert_eq!((c.server.tick_hz, c.snapshot_hz), (64, 64));
        assert_eq!(c.interpolation, DelayPolicy::adaptive());
        assert_eq!(c.playback.max_stretch, 0.0);
    }

    #[test]
    fn link_changes_parse_as_seconds_and_profile() {
        let change = LinkChange::parse(" 90.5:mobile").expect("valid");
        assert_eq!(change.at, Duration::from_millis(90_500));
        assert_eq!(change.profile, "mobile");
        assert_eq!(Some(change.link), lagless_netem::profile("mobile"));
        for bad in [
            "mobile", "60", "x:mobile", "60:nope", "0:lan", "-5:lan", "inf:lan",
        ] {
            assert!(LinkChange::parse(bad).is_err(), "{bad}");
        }
        let unknown = LinkChange::parse("60:nope").unwrap_err();
        assert!(
            unknown.contains("broadband"),
            "names the known ones: {unknown}"
        );
    }

    #[test]
    fn link_changes_may_override_their_profile() {
        let calm = LinkChange::parse("120:snapshot-demo, loss-pct=0,jitter-ms=10").unwrap();
        assert_eq!(calm.profile, "snapshot-demo,loss-pct=0,jitter-ms=10");
        let demo = lagless_netem::profile("snapshot-demo").unwrap();
        assert_eq!(calm.link.loss, lagless_netem::Loss::None);
        assert_eq!(
            calm.link.jitter,
            lagless_netem::Jitter::Uniform {
                max: Duration::from_millis(10)
            }
        );
        assert_eq!(calm.link.delay, demo.delay);
        // The same as the options on the command line.
        let overrides = NetOverrides {
            delay_ms: Some(80.0),
            loss_pct: Some(2.0),
            ..NetOverrides::default()
        };
        let slower = LinkChange::parse("60:wifi,delay-ms=80,loss-pct=2").unwrap();
        assert_eq!(
            slower.link,
            overrides.apply(&lagless_netem::profile("wifi").unwrap()).0
        );
        // No override: the profile as named.
        assert_eq!(LinkChange::parse("60:wifi").unwrap().profile, "wifi");
        for bad in [
            "60:wifi,loss",
            "60:wifi,loss-pct=x",
            "60:wifi,loss-pct=-1",
            "60:wifi,loss-pct=inf",
            "60:wifi,speed=3",
            "60:wifi,dup-pct=150",
            "60:nope,loss-pct=1",
        ] {
            let err = LinkChange::parse(bad).unwrap_err();
            assert!(err.contains(bad), "{bad}: {err}");
        }
    }

    #[test]
    fn link_changes_may_name_a_direction() {
        let down = LinkChange::parse("30:mobile,loss-pct=0@down").expect("valid");
        assert_eq!(down.direction, lagless_netem::Direction::Down);
        assert_eq!(down.profile, "mobile,loss-pct=0@down");
        assert_eq!(down.link.loss, Loss::None);
        let lan = lagless_netem::profile("lan").expect("known");
        let mut duplex = lagless_netem::Duplex::symmetric(lan.clone(), 1).expect("valid");
        down.apply_to(&mut duplex).expect("valid");
        assert_eq!(duplex.up.config(), &lan);
        assert_eq!(duplex.down.config(), &down.link);
        assert!(LinkChange::parse("30:mobile@sideways").is_err());
        assert_eq!(
            LinkChange::parse("30:mobile").expect("valid").direction,
            lagless_netem::Direction::Both
        );
    }

    #[test]
    fn link_changes_must_be_ordered_and_inside_the_run() {
        let at = |s: &str| LinkChange::parse(s).expect("valid");
        assert_eq!(check_link_changes(&[], 10.0), Ok(()));
        assert_eq!(
            check_link_changes(&[at("2:wifi"), at("5:lan")], 10.0),
            Ok(())
        );
        assert!(check_link_changes(&[at("5:wifi"), at("2:lan")], 10.0).is_err());
        assert!(check_link_changes(&[at("5:wifi"), at("5:lan")], 10.0).is_err());
        assert!(check_link_changes(&[at("10:wifi")], 10.0).is_err());
    }
}
