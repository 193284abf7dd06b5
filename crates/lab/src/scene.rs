//! The one interface between the lab's runner and a scene: a game plugs into `lagless run`
//! by implementing [`LabScene`] (in `scenes/`, one file per scene) and adding one line to
//! [`crate::scenes::SCENES`]; the runner, the metrics and the CLI stay as they are.
//!
//! The runner does the netcode around it exactly as a game would (sessions, replication,
//! prediction, smoothing, interpolation), and measures. The scene says what its world is,
//! how it is declared for replication, what a client predicts, what a scripted player
//! does, and where each entity truly is (for the error metrics).

use crate::config::RunConfig;
use crate::metrics::Report;
use crate::runner::RunError;
use lagless_core::interpolation::Pose;
use lagless_core::{Input, Rollback, Tick};
use lagless_replication::deadreckoning::{CharacterState, DrConfig};
use lagless_replication::{ReplicationClient, ReplicationError, ReplicationServer, Schema};
use std::collections::BTreeMap;

/// What the server measured of one client's latency, before a tick: nothing here comes
/// from what the client says ([`LabScene::server_latency`]); the game's server gives it
/// ([`lagless_replication::Server::latency`]).
pub type ServerLatency = lagless_replication::Latency;

pub use lagless_scenes::PlayerId;

/// One entity's full-precision state, as a library without quantization (lightyear on
/// bevy_replicon) would serialize it: floats, and flags sent as bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct RawEntity {
    /// Its entity id.
    pub id: u32,
    /// Its float components.
    pub floats: Vec<f32>,
    /// Its boolean components.
    pub flags: Vec<bool>,
}

/// One frame a client rendered, for a scene's own client-side metrics
/// ([`LabScene::report_frames`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedFrame {
    /// The own player as rendered (predicted and smoothed, or the newest server state).
    pub own: Pose,
    /// Every other entity as rendered, in [`LabScene::shown`]'s order: interpolated, or
    /// taken from the predicted world where the scene predicts it
    /// ([`LabScene::render_predicted`]). NaN positions where nothing was shown yet.
    pub others: Vec<Pose>,
}

/// What one client rendered over a run, frame by frame.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RenderedFrames {
    /// The player the client drives.
    pub player: PlayerId,
    /// Frames by the state tick each stands for (the frame after client tick `t` stands
    /// for state `t + 1`, as `render.*` counts them).
    pub frames: BTreeMap<u32, RenderedFrame>,
}

/// A scripted player: the input for a tick from what the client sees of its own player.
pub trait Script<S: LabScene>: Send {
    /// The input for `tick`; `seen` is the own player as the client shows it (predicted,
    /// or the newest server state), `None` before anything arrived.
    fn input(&mut self, tick: u64, seen: Option<&S::Seen>) -> S::Input;
    /// Before [`Script::input`] for a tick: what the client shows interpolated now
    /// ([`LabScene::shown`]'s order for `own`) and the fractional server tick it
    /// shows, so a script can act on what *its* client sees (aim at the others where
    /// they are drawn). The default ignores it.
    fn view(&mut self, _own: PlayerId, _render_tick: f64, _shown: &[Pose]) {}
}

/// The keys `lagless view`'s page holds down, for [`LabScene::input_from_keys`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keys {
    /// W: forward (toward -Z, up on the page).
    pub forward: bool,
    /// S: back (toward +Z).
    pub back: bool,
    /// A: left (toward -X).
    pub left: bool,
    /// D: right (toward +X).
    pub right: bool,
    /// Space: jump, or the scene's action.
    pub jump: bool,
}

/// A scene the lab can run. See the module docs.
/// Every part is `Send`: `run --transport udp` runs the server and each client on
/// threads of their own.
pub trait LabScene: Sized + Send + 'static {
    /// A player's input.
    type Input: Input;
    /// What a client knows of the server's world at one tick, decoded: what its
    /// prediction compares and loads, and what it interpolates.
    type Known: Send;
    /// The client's predicted world (its own player and what it interacts with).
    type World: Rollback<Input = Self::Input, Confirmed = Self::Known, Saved: Send> + Send;
    /// What both ends know of the scene before it starts (its layout, its grid), built
    /// by the server and handed to each client.
    type Setup: Clone + Send;
    /// What a script sees of its own player.
    type Seen: Send;

    /// Builds the server's world (without players) for `config`.
    fn build(config: &RunConfig) -> Result<(Self, Self::Setup), RunError>;
    /// What a client builds of the scene before it starts, for `config` (the same as
    /// [`LabScene::build`]'s, which the default builds the whole world for; a scene whose
    /// world is costly to build gives it more cheaply).
    fn client_setup(config: &RunConfig) -> Result<Self::Setup, RunError> {
        Self::build(config).map(|(_, setup)| setup)
    }
    /// Adds player `player` to the server's world.
    fn add_player(&mut self, player: PlayerId);
    /// Takes player `player` out of the server's world (a client left). The default
    /// leaves it where it is, without input.
    fn remove_player(&mut self, _player: PlayerId) {}
    /// One simulation step with each player's input.
    fn step(&mut self, inputs: &[(PlayerId, Self::Input)]);
    /// [`LabScene::step`] from state `tick` (the tick the inputs are for), for a scene
    /// whose inputs refer to ticks (a claimed view for lag compensation). The default
    /// ignores the tick.
    fn step_at(&mut self, _tick: Tick, inputs: &[(PlayerId, Self::Input)]) {
        self.step(inputs);
    }
    /// Before the next step, the inputs that arrived after their tick was simulated
    /// without them (`(player, the input's tick, input)`,
    /// [`lagless_core::TickInputs::late`]), for what the scene must not lose (a shot).
    /// The default drops them: the server's guess for those ticks stands.
    fn late_inputs(&mut self, _late: &[(PlayerId, Tick, Self::Input)]) {}
    /// The replication declaration (the same on both ends).
    fn schema(setup: &Self::Setup) -> Schema;
    /// Writes the world's state into the replication layer (spawn, update, despawn).
    fn capture(&self, server: &mut ReplicationServer) -> Result<(), ReplicationError>;
    /// The entity id of `player`.
    fn player_entity(setup: &Self::Setup, player: PlayerId) -> Option<u32>;
    /// Where `player` is on the server.
    fn player_position(&self, player: PlayerId) -> Option<[f32; 3]>;
    /// Where every entity that is not a player is on the server, in a fixed order: the
    /// order [`LabScene::shown`] lists them in after the other players.
    fn others(&self, out: &mut Vec<[f32; 3]>);
    /// Every entity's full-precision state (the peer's stream, and the final state
    /// reproducibility tests compare bit for bit).
    fn raw(&self, out: &mut Vec<RawEntity>);
    /// The uncompressed baseline nobody sends, counted beside the real stream
    /// (`snapshot.plain_kbps`): every body in full floats, and an essential part (the
    /// players alone) a sender would add when the whole needs more than one packet.
    /// `None` (the default) if the scene has no such encoding.
    fn plain(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        None
    }
    /// What a client holding `client` knows at `tick` (entities the budget held back
    /// carried forward by their velocity, as far as the scene trusts that).
    fn known(setup: &Self::Setup, client: &ReplicationClient, tick: Tick) -> Self::Known;
    /// False for a state that carries only the players (an essential part).
    fn is_whole(known: &Self::Known) -> bool;
    /// What a client shows interpolated: each of players `1..=players` but `own`, in
    /// order, then the other entities in [`LabScene::others`]' order. An entity `known`
    /// lacks (not received yet) is there with a NaN position, so the list stays aligned
    /// with the server's.
    fn shown(
        setup: &Self::Setup,
        known: &Self::Known,
        own: PlayerId,
        players: PlayerId,
    ) -> Vec<Pose>;
    /// [`LabScene::shown`]'s list from what the public client rendered (`frame`: the
    /// interpolated entities): by default each entity of [`LabScene::shown_ids`] where
    /// the frame has it (NaN where it has not); a scene that hides some entities (a dead
    /// player) says so here.
    fn shown_in(
        setup: &Self::Setup,
        frame: &lagless_replication::Frame,
        own: PlayerId,
        players: PlayerId,
    ) -> Vec<Pose> {
        let missing = Pose::new([f32::NAN; 3], [0.0, 0.0, 0.0, 1.0]);
        Self::shown_ids(setup, own, players)
            .into_iter()
            .map(|id| frame.pose(id).unwrap_or(missing))
            .collect()
    }
    /// The entity id of each entry of [`LabScene::shown`]'s list for `own` among
    /// `players` (`u32::MAX` for an entry with no entity).
    fn shown_ids(setup: &Self::Setup, own: PlayerId, players: PlayerId) -> Vec<u32>;
    /// Entities of [`LabScene::shown`]'s list a client of `config` renders from its
    /// predicted world ([`LabScene::render_predicted`]): the public client predicts and
    /// smooths them. The default: none.
    fn predicted_ids(
        _setup: &Self::Setup,
        _config: &RunConfig,
        _own: PlayerId,
        _players: PlayerId,
    ) -> Vec<u32> {
        Vec::new()
    }
    /// `player` as `known` has it.
    fn seen_in(known: &Self::Known, player: PlayerId) -> Option<Self::Seen>;
    /// Where a seen player is.
    fn seen_pose(seen: &Self::Seen) -> Pose;
    /// A client's predicted world for `player`. `naive` asks for the full-world baseline
    /// the lab times rollbacks against (`None`: the scene has none).
    fn world(
        setup: &Self::Setup,
        player: PlayerId,
        config: &RunConfig,
        naive: bool,
    ) -> Option<Self::World>;
    /// The own player in the predicted world.
    fn predicted(world: &Self::World) -> Option<Self::Seen>;
    /// Entities the predicted world simulates besides the player
    /// (`prediction.predicted_cubes_mean` for the cubes).
    fn predicted_entities(world: &Self::World) -> usize;
    /// The scripted player `config.script` names, seeded with `seed`.
    fn script(
        config: &RunConfig,
        setup: &Self::Setup,
        seed: u64,
    ) -> Result<Box<dyn Script<Self>>, RunError>;
    /// True when `input` asks the player to move (for `render.input_to_motion_ticks`).
    fn moves(input: &Self::Input) -> bool;
    /// Called after every server step, to follow what the scene reports at the end.
    fn observe(&mut self) {}
    /// Before every server step, what the server measured of `player`'s latency (lag
    /// compensation trusts a view as old as this). The default ignores it.
    fn server_latency(&mut self, _player: PlayerId, _latency: ServerLatency) {}
    /// Before the client predicts `tick`, what it shows interpolated at that moment
    /// ([`LabScene::shown`]'s order), so a predicted world can collide with the
    /// interpolated entities where they are shown. The default ignores it.
    fn show(_world: &mut Self::World, _tick: Tick, _shown: &[Pose]) {}
    /// Replaces, in `shown` ([`LabScene::shown`]'s order for `own` among `players`), the
    /// entities the client renders from its predicted world rather than interpolated
    /// (a predicted ball, predicted remote players). The runner smooths each such
    /// entity's corrections as it does the own player's. The default predicts none.
    fn render_predicted(
        _world: &Self::World,
        _own: PlayerId,
        _players: PlayerId,
        _shown: &mut [Pose],
    ) {
    }
    /// Completes a client's input for `tick` from its predicted world before it is sent
    /// and predicted: `render_tick` is the fractional server tick the client shows
    /// (`None` before it shows anything). A shooter puts its claimed view and the ids of
    /// what the input spawns there. The default leaves the input as the script made it.
    fn complete_input(
        _world: &mut Self::World,
        _tick: Tick,
        _render_tick: Option<f64>,
        _input: &mut Self::Input,
    ) {
    }
    /// Whether the server sends each client events in front of every snapshot (hit
    /// reports): [`LabScene::events_down`] on the server,
    /// [`LabScene::events_received`] on the client. Off by default.
    const EVENTS_DOWN: bool = false;
    /// With [`LabScene::EVENTS_DOWN`]: the bytes for `player` to ride in front of the
    /// snapshot being sent now (length-prefixed by the runner).
    fn events_down(&self, _player: PlayerId) -> Vec<u8> {
        Vec::new()
    }
    /// With [`LabScene::EVENTS_DOWN`]: a client took in the events of a snapshot (in
    /// arrival order, repeats possible); `rtt` is its round-trip estimate.
    fn events_received(_world: &mut Self::World, _bytes: &[u8], _rtt: Option<std::time::Duration>) {
    }
    /// Whether the runner keeps every client's rendered frames for
    /// [`LabScene::report_frames`] (one pose per entity per frame: off for large scenes).
    const RECORDS_FRAMES: bool = false;
    /// The scene's own client-side metrics from what each client rendered (with
    /// [`LabScene::RECORDS_FRAMES`]), against what the scene followed on the server
    /// ([`LabScene::observe`]).
    fn report_frames(&self, _clients: &[&RenderedFrames], _r: &mut Report) {}
    /// The scene's own metrics from each client's predicted world at the end of a run
    /// (counters it kept while predicting). The default reports nothing.
    fn report_worlds(_worlds: &[&Self::World], _r: &mut Report) {}
    /// The scene's own metrics, at the end of a run.
    fn report(&self, _r: &mut Report) {}
    /// Metrics that join the server's view with each client's predicted world (why
    /// the server rejected what a client showed). The default reports nothing.
    fn report_joint(&self, _worlds: &[&Self::World], _r: &mut Report) {}

    /// Walking characters (dead reckoning): each one's entity id and true motion after the
    /// step, in a fixed order, every tick. The runner records them as the truth of the
    /// `deadreckoning.*` metrics and, when [`LabScene::dead_reckoning`] says so, feeds
    /// them to a `DrServer` whose messages ride in front of each snapshot. The default:
    /// no characters.
    fn characters(&self, _out: &mut Vec<(u32, CharacterState)>) {}
    /// How characters reach clients: `Some` sends them by dead reckoning with these
    /// settings (their entities are spawned in snapshots, which lets the client's
    /// `DrReceiver` accept them, but not updated there), `None` (the default) leaves them
    /// in the snapshots, shown through the interpolation buffer.
    fn dead_reckoning(_setup: &Self::Setup) -> Option<DrConfig> {
        None
    }
    /// When characters travel in snapshots: the index in [`LabScene::shown`]'s list of
    /// the first character for a run of `players` players (the others follow in
    /// [`LabScene::characters`]' order), so the runner measures them as shown.
    fn character_slot(_setup: &Self::Setup, _players: PlayerId) -> Option<usize> {
        None
    }

    /// The scene's static obstacles as `lagless view` draws them from above: each a box's
    /// centre and half extents on the ground plane ([`LabScene::GROUND_AXES`]). The
    /// default draws none.
    fn obstacles(&self, _out: &mut Vec<([f32; 2], [f32; 2])>) {}

    /// The axes of the ground plane, as `lagless view` draws the scene from above: x and z
    /// (y up) by default, `[0, 1]` for a 2D scene.
    const GROUND_AXES: [usize; 2] = [0, 2];

    /// The input a person holding `keys` gives (`lagless view`'s keyboard); `None` (the
    /// default) when the scene cannot be driven by hand, so the script keeps driving.
    fn input_from_keys(_keys: Keys) -> Option<Self::Input> {
        None
    }
    /// Where the entities the predicted world simulates besides the player are (the
    /// predicted set `lagless view` highlights). The default lists none.
    fn predicted_positions(_world: &Self::World, _out: &mut Vec<[f32; 3]>) {}
}
