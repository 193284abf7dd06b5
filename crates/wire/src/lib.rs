//! Wire format for lagless: the bytes that cross the network.
//!
//! Everything here decodes untrusted input, so every read is bounds-checked and
//! returns a [`WireError`] instead of panicking.
//!
//! * [`Writer`] / [`Reader`]: little-endian fixed-width numbers, LEB128 varints,
//!   length-prefixed byte strings with an explicit maximum.
//! * [`Seq16`]: 16-bit sequence numbers that compare correctly across wrap-around,
//!   and [`Seq16::expand`] to recover a full 32-bit counter from its low 16 bits.
//!
//! ```
//! use lagless_wire::{Reader, Writer, Seq16};
//!
//! let mut w = Writer::new();
//! w.write_u8(7);
//! w.write_varint_u32(300);
//! w.write_u16(Seq16(65535).0);
//! let bytes = w.into_bytes();
//!
//! let mut r = Reader::new(&bytes);
//! assert_eq!(r.read_u8().unwrap(), 7);
//! assert_eq!(r.read_varint_u32().unwrap(), 300);
//! let seq = Seq16(r.read_u16().unwrap());
//! assert!(Seq16(0).is_newer_than(seq)); // 0 follows 65535
//! r.finish().unwrap();
//! ```

#![deny(missing_docs)]

mod error;
mod reader;
mod seq;
mod writer;

pub use error::WireError;
pub use reader::Reader;
pub use seq::Seq16;
pub use writer::Writer;
