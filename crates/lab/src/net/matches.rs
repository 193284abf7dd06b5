//! One match of `lagless serve`: a scene and its snapshot sender beside the game's
//! `Server` the host keeps, its players, and its tick, which runs on a thread of its own
//! when the process hosts several matches.

use crate::config::RunConfig;
use crate::replication::SnapshotSender;
use crate::runner::{TickCost, fed, server_step};
use crate::scene::{LabScene, PlayerId};
use lagless_core::{ClientId, TickInputs};
use lagless_replication::Server;
use lagless_replication::deadreckoning::CharacterState;
use std::collections::BTreeMap;
use std::time::Duration;

/// A connected client.
pub(crate) struct Conn {
    /// The player it drives in its match.
    pub(crate) player: PlayerId,
    /// When it connected.
    pub(crate) since: Duration,
}

/// One match: what the host does not keep of it.
pub(crate) struct Match<S: LabScene> {
    pub(crate) scene: S,
    pub(crate) sender: SnapshotSender<S>,
    /// By client id (the id in the token, which the game's `Server` uses too).
    pub(crate) conns: BTreeMap<ClientId, Conn>,
    /// Scratch for the characters' states.
    pub(crate) characters: Vec<(u32, CharacterState)>,
    /// Ticks it ran since it started.
    pub(crate) ticks: u64,
}

/// What one match's tick produced, for the figures and the probe.
pub(crate) struct Ticked {
    pub(crate) cost: TickCost,
    /// Per client, whether its input was there (`fed`), for the probe.
    pub(crate) fed: Vec<Option<bool>>,
    pub(crate) tick: lagless_core::Tick,
}

impl<S: LabScene> Match<S> {
    /// A fresh match of the scene `config` describes, and the game's server for it.
    pub(crate) fn new(config: &RunConfig) -> Result<(Self, Server<S::Input>), crate::RunError> {
        let (scene, setup) = S::build(config)?;
        let (sender, server) = SnapshotSender::<S>::new(setup, config)?;
        let m = Self {
            scene,
            sender,
            conns: BTreeMap::new(),
            characters: Vec::new(),
            ticks: 0,
        };
        Ok((m, server))
    }

    /// The lowest player number free in this match: players are numbered from 1 within
    /// their match, whatever netcode.io slot their client holds.
    pub(crate) fn free_player(&self) -> PlayerId {
        let mut taken: Vec<PlayerId> = self.conns.values().map(|c| c.player).collect();
        taken.sort_unstable();
        let mut p = 1;
        for t in taken {
            if t == p {
                p += 1;
            }
        }
        p
    }

    /// One tick of the match, as the runner does it.
    pub(crate) fn tick(
        &mut self,
        server: &mut Server<S::Input>,
        step: TickInputs<S::Input>,
        now: Duration,
    ) -> Ticked {
        let client_players: Vec<(ClientId, PlayerId)> =
            self.conns.iter().map(|(&id, c)| (id, c.player)).collect();
        let (cost, sent) = server_step(
            &mut self.scene,
            server,
            &mut self.sender,
            (&client_players, &step, now),
            &mut self.characters,
        );
        if let Err(e) = sent {
            tracing::warn!("snapshot not sent: {e}");
        }
        self.scene.observe();
        self.ticks += 1;
        Ticked {
            cost,
            fed: fed(server, &step),
            tick: step.tick,
        }
    }
}

/// A match with its server and the tick it is due.
pub(crate) type Due<'a, S> = (
    &'a mut Match<S>,
    &'a mut Server<<S as LabScene>::Input>,
    TickInputs<<S as LabScene>::Input>,
);

/// Runs every due tick of `work` (a match, its server and its step), each match on a
/// thread of its own when there are several (they share nothing), and returns what each
/// produced, in order.
pub(crate) fn tick_all<S: LabScene>(work: Vec<Due<'_, S>>, now: Duration) -> Vec<Ticked> {
    if work.len() <= 1 {
        return work
            .into_iter()
            .map(|(m, server, step)| m.tick(server, step, now))
            .collect();
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = work
            .into_iter()
            .map(|(m, server, step)| scope.spawn(move || m.tick(server, step, now)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}
