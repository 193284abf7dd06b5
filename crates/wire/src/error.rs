use thiserror::Error;

/// Why a piece of network input could not be decoded.
///
/// Decoders return this instead of panicking; callers count and drop the packet.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The input ended before the value being read was complete.
    #[error("truncated input: needed {needed} more bytes, {remaining} left")]
    UnexpectedEnd {
        /// Bytes the read required.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A varint ran past the width of its target type.
    #[error("varint does not fit in {bits} bits")]
    VarintOverflow {
        /// Width of the integer being decoded.
        bits: u32,
    },
    /// A length or count is larger than the decoder accepts.
    #[error("{what} is {len}, more than the maximum of {max}")]
    TooLarge {
        /// What was being decoded.
        what: &'static str,
        /// The length found in the input.
        len: usize,
        /// The largest length accepted.
        max: usize,
    },
    /// A value is outside the set of valid values (an unknown message kind, a NaN, ...).
    #[error("invalid {what}")]
    Invalid {
        /// What was being decoded.
        what: &'static str,
    },
    /// The input had bytes left over after a complete message.
    #[error("{0} unexpected trailing bytes")]
    TrailingBytes(usize),
}
