use lagless_wire::{Reader, WireError, Writer};
use std::fmt::Debug;

/// A game's per-tick player input (what the client samples and the server applies).
///
/// Inputs must be small, cheap to copy and comparable: equality drives delta compression
/// (runs of identical inputs are sent once) and `Default` is "no input pressed".
pub trait Input: Copy + Eq + Default + Debug + Send + 'static {
    /// Appends the input's wire form.
    fn encode(&self, w: &mut Writer);
    /// Reads an input; must reject values the game does not define (this is network input).
    fn decode(r: &mut Reader<'_>) -> Result<Self, WireError>;

    /// What the server applies, under [`crate::MissingInput::Guess`], for a tick whose
    /// input has not arrived, when `self` is the last input that did and this is the
    /// `missing`-th tick in a row without one (1 for the first). The client runs the same
    /// rule over its own inputs once the server says which ticks it guessed, so its
    /// reconciliation replays exactly what the server applied.
    ///
    /// The default repeats the input for [`GUESS_REPEAT_TICKS`] ticks (a held key is
    /// most likely still held), then lets go (`Default`): a player whose connection
    /// dropped stops rather than runs on. A game overrides it to decay what should not
    /// repeat at all, such as a one-tick trigger, or an analogue stick gradually.
    fn guess(&self, missing: u32) -> Self {
        if missing <= GUESS_REPEAT_TICKS {
            *self
        } else {
            Self::default()
        }
    }
}

/// How many missing ticks in a row [`Input::guess`]'s default repeats the last input
/// (about 125 ms at 64 Hz: a late input usually arrives within it).
pub const GUESS_REPEAT_TICKS: u32 = 8;

/// A one-byte input, handy for tests and toy games.
impl Input for u8 {
    fn encode(&self, w: &mut Writer) {
        w.write_u8(*self);
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        r.read_u8()
    }
}
