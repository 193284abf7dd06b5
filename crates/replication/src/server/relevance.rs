//! Relevance and focus: how much an entity matters to a client, 0 keeping it from the
//! client altogether.
//!
//! By default an entity matters by how near it is to the client's focus
//! ([`super::ReplicationServer::set_focus`]); a game can replace that with its own rule
//! ([`super::ReplicationServer::set_relevance`]).

use super::cells::{Area, Grid};
use super::store::{Live, Store};
use super::{ClientId, Pending, RelevanceFn, ReplicationConfig};

/// Which entities a client may see ([`super::ReplicationServer::set_visible`]): every
/// entity but the exceptions, or (hidden by default) none but them. An entity the client
/// may not see has relevance 0, whatever the relevance rule says: it is never sent, and
/// a client that shows it is sent its despawn.
#[derive(Default)]
pub(super) struct Visibility {
    hidden_by_default: bool,
    /// The entities that are the exception to the default.
    flipped: Pending,
}

impl Visibility {
    /// True if the client may see entity `id`.
    pub(super) fn visible(&self, id: u32) -> bool {
        self.hidden_by_default == self.flipped.contains(id)
    }

    /// Lets the client see entity `id` or not: true if that changed.
    pub(super) fn set(&mut self, id: u32, visible: bool) -> bool {
        if self.visible(id) == visible {
            return false;
        }
        if self.flipped.contains(id) {
            self.flipped.remove(id);
        } else {
            self.flipped.mark(id);
        }
        true
    }

    /// Makes every entity visible, or none, exceptions forgotten; `changed` is told
    /// every exception there was (whose visibility may change besides every other's).
    pub(super) fn set_default(&mut self, visible: bool, changed: &mut Vec<u32>) {
        self.hidden_by_default = !visible;
        self.flipped.drain_into(changed);
    }
}

/// With a game's relevance rule, every entity is looked at again this often (encodes):
/// its relevance may change while the entity does not.
const RESCAN_EVERY: u32 = 16;

/// One client's relevance rule, for one encode.
pub(super) struct Relevance<'a> {
    /// The game's rule, which replaces the default.
    game: Option<&'a RelevanceFn>,
    /// What the client may see at all (`None`: everything).
    visibility: Option<&'a Visibility>,
    /// With cells on, the grid and the client's interest: what lies outside is not seen.
    cells: Option<(&'a Grid, &'a Area)>,
    client: ClientId,
    focus: Option<[f32; 3]>,
    /// [`ReplicationConfig::relevance_distance`], kept off zero.
    distance: f32,
    /// [`ReplicationConfig::near_distance`].
    near: f32,
    /// [`ReplicationConfig::near_boost`], 1 unless a positive number.
    boost: f32,
}

impl<'a> Relevance<'a> {
    /// `client`'s relevance: `game`'s rule if any, else nearness to `focus`; 0 for what
    /// `visibility` hides.
    pub(super) fn new(
        game: Option<&'a RelevanceFn>,
        visibility: Option<&'a Visibility>,
        client: ClientId,
        focus: Option<[f32; 3]>,
        config: &ReplicationConfig,
    ) -> Self {
        let boost = if config.near_boost.is_finite() && config.near_boost > 0.0 {
            config.near_boost
        } else {
            1.0
        };
        Self {
            game,
            visibility,
            cells: None,
            client,
            focus,
            distance: config.relevance_distance.max(1e-3),
            near: config.near_distance,
            boost,
        }
    }

    /// The same, limited to the cells of the client's interest (`None`: cells off).
    pub(super) fn within(self, cells: Option<(&'a Grid, &'a Area)>) -> Self {
        Self { cells, ..self }
    }

    /// How much entity `id` matters to the client (0 or NaN: not at all; 0 for an entity
    /// it may not see, or outside its interest).
    pub(super) fn weight(&self, id: u32, e: &Live) -> f32 {
        if self.visibility.is_some_and(|v| !v.visible(id)) {
            return 0.0;
        }
        if self.cells.is_some_and(|(g, a)| !a.holds(g.slot(id))) {
            return 0.0;
        }
        match self.game {
            Some(f) => f(self.client, id, e.kind, &e.codes),
            None => self.nearness(e.position),
        }
    }

    /// The default relevance of something at `position`: nearness to the focus.
    pub(super) fn nearness(&self, position: Option<[f32; 3]>) -> f32 {
        match (self.focus, position) {
            (Some(f), Some(p)) => {
                let d2: f32 = (0..3).map(|i| (f[i] - p[i]).powi(2)).sum();
                let r = self.distance;
                let near = self.near;
                let boost = if d2 <= near * near { self.boost } else { 1.0 };
                boost / (1.0 + d2 / (r * r))
            }
            // Without a focus or a position, nearness cannot rank it: all alike.
            _ => 1.0,
        }
    }

    /// The live entities the client should show, ascending: the member list of a
    /// snapshot against nothing, so the client drops whatever else it holds.
    pub(super) fn members(&self, store: &Store) -> Vec<u32> {
        store
            .ids()
            .filter(|&id| store.get(id).is_some_and(|e| self.weight(id, e) > 0.0))
            .collect()
    }
}

/// With a game's relevance rule, every entity the client may see is to be looked at
/// again once every [`RESCAN_EVERY`] encodes (`countdown` counts them): true when that
/// is now. Only changed entities are looked at otherwise, and a game's relevance can
/// change without the entity changing.
pub(super) fn rescan_due(countdown: &mut u32) -> bool {
    *countdown = countdown.saturating_sub(1);
    if *countdown == 0 {
        *countdown = RESCAN_EVERY;
        return true;
    }
    false
}
