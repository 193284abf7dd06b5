//! Spatial cells: interest management on a uniform grid, so that a client's work per
//! tick follows the cells near it rather than the world.
//!
//! With cells on ([`super::ReplicationServer::set_cells`]), every entity whose kind has a
//! position field lives in the cell its position falls in (cubes of
//! [`CellConfig::size`], found again whenever its codes change); an entity without a
//! position is in every client's interest. Each client has an interest, a set of cells
//! ([`Interest`]: by default those within [`CellConfig::radius`] of its focus). An entity
//! in a cell outside a client's interest is treated as one the client may not see: it
//! is never sent, it is despawned on the client when it leaves the interest, and sent
//! afresh with its whole state when it comes back.
//!
//! What makes it cheap: a change of an entity marks it only for the clients whose
//! interest holds its cell (before or after the change), so a client never looks at what
//! changes far from it; a client whose interest moves looks at the entities of the cells
//! that entered or left it, and no others.

use super::{ClientId, ClientState, Pending, ReplicationServer};
use std::collections::{BTreeSet, HashMap};

/// A cell of the grid: the position's components divided by [`CellConfig::size`],
/// rounded down. A 2D game's third component stays 0.
pub type Cell = [i32; 3];

/// The grid's settings ([`super::ReplicationServer::set_cells`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellConfig {
    /// A cell's edge, in the position field's units: positive and finite.
    pub size: f32,
    /// The default interest: the cells within this distance of a client's focus
    /// ([`Interest::Around`]), in the position field's units.
    pub radius: f32,
}

impl CellConfig {
    /// The cell `position` falls in; `None` for a non-finite position (the entity is
    /// then in every client's interest).
    pub fn cell_of(&self, position: [f32; 3]) -> Option<Cell> {
        let mut cell = [0i32; 3];
        for (c, p) in cell.iter_mut().zip(position) {
            let v = (p / self.size).floor();
            if !v.is_finite() {
                return None;
            }
            // Far beyond any world: clamped, so the cast is exact.
            *c = v.clamp(-1e9, 1e9) as i32;
        }
        Some(cell)
    }

    /// True if these settings can place anything: a positive, finite size.
    pub(super) fn valid(&self) -> bool {
        self.size.is_finite() && self.size > 0.0
    }
}

/// What a client is interested in while cells are on
/// ([`super::ReplicationServer::set_interest`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Interest {
    /// The cells the square (cube in 3D) of half-side `radius` around the client's focus
    /// ([`super::ReplicationServer::set_focus`]) touches, following the focus. Without a
    /// focus, no cell: only entities without a position.
    Around(f32),
    /// These cells, whatever the focus (a room, a spectator's chosen area).
    Cells(Vec<Cell>),
    /// Every cell: the client sees what it would with cells off.
    Everything,
}

/// A client's interest worked out: the cells it holds now.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) enum Area {
    /// Every cell (cells off, or [`Interest::Everything`]).
    #[default]
    Everything,
    /// The cells from `min` to `max`, both included, on every axis.
    Box { min: Cell, max: Cell },
    /// These cells, ascending (possibly none).
    Set(Vec<Cell>),
}

impl Area {
    /// `interest` for a client focused on `focus`, under `config`.
    pub(super) fn of(interest: &Interest, focus: Option<[f32; 3]>, config: &CellConfig) -> Self {
        match interest {
            Interest::Everything => Area::Everything,
            Interest::Cells(cells) => {
                let mut cells = cells.clone();
                cells.sort_unstable();
                cells.dedup();
                Area::Set(cells)
            }
            Interest::Around(radius) => {
                let r = if radius.is_nan() {
                    0.0
                } else {
                    radius.max(0.0)
                };
                let Some(f) = focus else {
                    return Area::Set(Vec::new());
                };
                let corner = |sign: f32| config.cell_of([0, 1, 2].map(|k| f[k] + sign * r));
                match (corner(-1.0), corner(1.0)) {
                    (Some(min), Some(max)) => Area::Box { min, max },
                    // An infinite radius (or a focus at infinity): everything.
                    _ if r.is_infinite() => Area::Everything,
                    _ => Area::Set(Vec::new()),
                }
            }
        }
    }

    /// True if `slot` is in this area: a placed entity whose cell it holds, or one
    /// without a position (in every area).
    pub(super) fn holds(&self, slot: Slot) -> bool {
        match slot {
            Slot::Gone => false,
            Slot::Nowhere => true,
            Slot::In(cell) => self.holds_cell(cell),
        }
    }

    fn holds_cell(&self, cell: Cell) -> bool {
        match self {
            Area::Everything => true,
            Area::Box { min, max } => (0..3).all(|k| min[k] <= cell[k] && cell[k] <= max[k]),
            Area::Set(cells) => cells.binary_search(&cell).is_ok(),
        }
    }

    /// Cells in the area, if few enough to list (at most `limit`).
    fn cells(&self, limit: usize) -> Option<Vec<Cell>> {
        match self {
            Area::Everything => None,
            Area::Set(cells) => (cells.len() <= limit).then(|| cells.clone()),
            Area::Box { min, max } => {
                let n: f64 = (0..3).map(|k| f64::from(max[k] - min[k]) + 1.0).product();
                if n > limit as f64 {
                    return None;
                }
                let mut out = Vec::with_capacity(n as usize);
                for x in min[0]..=max[0] {
                    for y in min[1]..=max[1] {
                        for z in min[2]..=max[2] {
                            out.push([x, y, z]);
                        }
                    }
                }
                Some(out)
            }
        }
    }
}

/// Where an entity is on the grid.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) enum Slot {
    /// Not live.
    #[default]
    Gone,
    /// Live without a position (or a non-finite one): in every interest.
    Nowhere,
    /// Live in this cell.
    In(Cell),
}

/// The grid: which cell each entity is in, and which entities each cell holds.
#[derive(Debug)]
pub(super) struct Grid {
    pub(super) config: CellConfig,
    /// Per id, where it is.
    slots: Vec<Slot>,
    /// Per occupied cell, its entities (in no order).
    members: HashMap<Cell, Vec<u32>>,
    /// Live entities without a cell.
    nowhere: BTreeSet<u32>,
}

impl Grid {
    /// An empty grid.
    pub(super) fn new(config: CellConfig) -> Self {
        Self {
            config,
            slots: Vec::new(),
            members: HashMap::new(),
            nowhere: BTreeSet::new(),
        }
    }

    /// Where entity `id` is.
    pub(super) fn slot(&self, id: u32) -> Slot {
        self.slots.get(id as usize).copied().unwrap_or_default()
    }

    /// Puts entity `id` at `position` (`None` for none; `live` false: despawned), and
    /// returns where it was.
    pub(super) fn place(&mut self, id: u32, live: bool, position: Option<[f32; 3]>) -> Slot {
        let new = match (live, position.and_then(|p| self.config.cell_of(p))) {
            (false, _) => Slot::Gone,
            (true, Some(cell)) => Slot::In(cell),
            (true, None) => Slot::Nowhere,
        };
        let i = id as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, Slot::Gone);
        }
        let old = std::mem::replace(&mut self.slots[i], new);
        if old == new {
            return old;
        }
        match old {
            Slot::In(cell) => {
                if let Some(ids) = self.members.get_mut(&cell) {
                    if let Some(k) = ids.iter().position(|&e| e == id) {
                        ids.swap_remove(k);
                    }
                    if ids.is_empty() {
                        self.members.remove(&cell);
                    }
                }
            }
            Slot::Nowhere => {
                self.nowhere.remove(&id);
            }
            Slot::Gone => {}
        }
        match new {
            Slot::In(cell) => self.members.entry(cell).or_default().push(id),
            Slot::Nowhere => {
                self.nowhere.insert(id);
            }
            Slot::Gone => {}
        }
        old
    }

    /// Marks in `pending` every entity of a cell that one of `old` and `new` holds and
    /// the other does not: what a client whose interest moved from `old` to `new` may
    /// have to be sent or told to despawn.
    pub(super) fn mark_moved(&self, old: &Area, new: &Area, pending: &mut Pending) {
        if old == new {
            return;
        }
        let limit = self.members.len();
        if let (Some(a), Some(b)) = (old.cells(limit), new.cells(limit)) {
            if a.len() + b.len() <= limit {
                for cell in a.iter().chain(&b) {
                    if old.holds_cell(*cell) != new.holds_cell(*cell) {
                        self.mark_cell(cell, pending);
                    }
                }
                return;
            }
        }
        for (cell, ids) in &self.members {
            if old.holds_cell(*cell) != new.holds_cell(*cell) {
                ids.iter().for_each(|&id| pending.mark(id));
            }
        }
    }

    /// Marks in `pending` every live entity `area` holds.
    pub(super) fn mark_area(&self, area: &Area, pending: &mut Pending) {
        self.nowhere.iter().for_each(|&id| pending.mark(id));
        match area.cells(self.members.len()) {
            Some(cells) => cells.iter().for_each(|c| self.mark_cell(c, pending)),
            None => {
                for (cell, ids) in &self.members {
                    if area.holds_cell(*cell) {
                        ids.iter().for_each(|&id| pending.mark(id));
                    }
                }
            }
        }
    }

    fn mark_cell(&self, cell: &Cell, pending: &mut Pending) {
        if let Some(ids) = self.members.get(cell) {
            ids.iter().for_each(|&id| pending.mark(id));
        }
    }
}

/// Client `c`'s area on `grid`: its interest (the default, [`Interest::Around`] the
/// grid's radius, if it set none) around its focus.
pub(super) fn area_of(grid: &Grid, c: &ClientState) -> Area {
    let default = Interest::Around(grid.config.radius);
    Area::of(
        c.interest.as_ref().unwrap_or(&default),
        c.focus,
        &grid.config,
    )
}

/// Works client `c`'s area out again (its focus or interest changed), marking the
/// entities of the cells that entered or left it.
pub(super) fn follow(grid: &Grid, c: &mut ClientState) {
    let area = area_of(grid, c);
    if area != c.area {
        grid.mark_moved(&c.area, &area, &mut c.pending);
        c.area = area;
    }
}

impl ReplicationServer {
    /// Turns spatial cells on (`Some`) or off (`None`, the default: every entity is in
    /// every client's interest, as before cells existed). With cells on, each entity
    /// whose kind has a position field is placed on a uniform grid of
    /// [`CellConfig::size`] by its position, and each client sees only the entities of
    /// the cells its interest holds ([`Self::set_interest`]; by default those within
    /// [`CellConfig::radius`] of its focus, [`Self::set_focus`]) and the entities without
    /// a position. An entity outside a client's interest is treated as one it may not
    /// see ([`Self::set_visible`]): never sent, despawned on the client when it leaves the
    /// interest, sent afresh with its whole state when it comes back. Its changes are not
    /// even looked at for that client, so a client's encode costs what lies near it.
    ///
    /// A size that is not positive and finite turns cells off. Changing the settings
    /// looks at every entity again for every client once.
    pub fn set_cells(&mut self, cells: Option<CellConfig>) {
        let cells = cells.filter(CellConfig::valid);
        if self.grid.as_ref().map(|g| g.config) == cells {
            return;
        }
        self.grid = cells.map(|config| {
            let mut grid = Grid::new(config);
            for id in self.store.ids() {
                grid.place(id, true, self.store.get(id).and_then(|e| e.position));
            }
            grid
        });
        for c in self.clients.values_mut() {
            c.area = self
                .grid
                .as_ref()
                .map_or(Area::Everything, |g| area_of(g, c));
            self.store.ids().for_each(|id| c.pending.mark(id));
        }
    }

    /// The cell settings, if cells are on ([`Self::set_cells`]).
    pub fn cells(&self) -> Option<CellConfig> {
        self.grid.as_ref().map(|g| g.config)
    }

    /// Sets what `client` is interested in while cells are on (`None`: the default,
    /// [`Interest::Around`] the grid's radius). The entities of cells that leave its
    /// interest are despawned on it, those of cells that enter are sent with their whole
    /// state. Kept while cells are off, for when they are on. Nothing happens for an
    /// unknown client.
    pub fn set_interest(&mut self, client: ClientId, interest: Option<Interest>) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.interest = interest;
            if let Some(grid) = &self.grid {
                follow(grid, c);
            }
        }
    }

    /// True if entity `id` is in `client`'s interest: cells are off, it has no cell (no
    /// position), or its interest holds its cell. False for an unknown client or an
    /// entity not live. Says nothing about [`Self::set_visible`].
    pub fn in_interest(&self, client: ClientId, id: u32) -> bool {
        let Some(c) = self.clients.get(&client) else {
            return false;
        };
        match &self.grid {
            Some(grid) => c.area.holds(grid.slot(id)),
            None => self.store.get(id).is_some(),
        }
    }

    /// The cell `position` falls in with the current settings (`None` with cells off, or
    /// for a non-finite position): for a game that names cells ([`Interest::Cells`]).
    pub fn cell_of(&self, position: [f32; 3]) -> Option<Cell> {
        self.grid.as_ref()?.config.cell_of(position)
    }
}
