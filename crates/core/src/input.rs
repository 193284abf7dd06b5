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
}

/// A one-byte input, handy for tests and toy games.
impl Input for u8 {
    fn encode(&self, w: &mut Writer) {
        w.write_u8(*self);
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        r.read_u8()
    }
}
