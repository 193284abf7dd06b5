//! Wire format for lagless: the bytes that cross the network.
//!
//! Everything here decodes untrusted input, so every read is bounds-checked and
//! returns a [`WireError`] instead of panicking.
//!
//! * [`Writer`] / [`Reader`]: little-endian fixed-width numbers, LEB128 varints,
//!   length-prefixed byte strings with an explicit maximum.
//! * [`Seq16`]: 16-bit sequence numbers that compare correctly across wrap-around,
//!   and [`Seq16::expand`] to recover a full 32-bit counter from its low 16 bits.
//! * [`BitWriter`] / [`BitReader`]: bit-packed streams (LSB-first, zero padding checked),
//!   with variable-length small integers ([`BitWriter::write_var_u32`],
//!   [`BitWriter::write_var_i32`]) for counts and deltas.
//! * Quantization with exact round trips: [`BoundedFloat`] (a float in a range at a
//!   resolution), [`QuantizedVec3`] (positions, bounded velocities), [`QuatCodec`]
//!   (smallest-three quaternions), and [`quantize_f32`] / [`snap_f32`] for unbounded
//!   values. What a receiver decodes is bit-for-bit the sender's `snap`, so a server can
//!   snap its own state and simulate on exactly what clients see.
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
//!
//! A position to 1/512 m in a 512 m cube (57 bits) and a rotation (32 bits) in 12 bytes:
//!
//! ```
//! use lagless_wire::{BitReader, BitWriter, QuantizedVec3, QuatCodec};
//!
//! const POSITION: QuantizedVec3 = QuantizedVec3::uniform(-256.0, 256.0, 1.0 / 512.0);
//! const ROTATION: QuatCodec = QuatCodec::new(10);
//!
//! let position = [12.3456, 0.5, -99.0];
//! let rotation = [0.0, 0.38268343, 0.0, 0.9238795]; // 45 degrees about Y, as (x, y, z, w)
//!
//! let mut w = BitWriter::new();
//! w.write_bool(true); // e.g. "awake"
//! POSITION.write(&mut w, position);
//! ROTATION.write(&mut w, rotation);
//! w.write_var_u32(2); // small counts cost a few bits
//! assert_eq!(w.bit_len(), 1 + 57 + 32 + 3);
//! let bytes = w.into_bytes();
//! assert_eq!(bytes.len(), 12);
//!
//! let mut r = BitReader::new(&bytes);
//! assert!(r.read_bool().unwrap());
//! let p = POSITION.read(&mut r).unwrap();
//! let q = ROTATION.read(&mut r).unwrap();
//! assert_eq!(r.read_var_u32().unwrap(), 2);
//! r.finish().unwrap(); // only zero padding may remain
//!
//! // The receiver holds exactly what the sender gets by snapping its own state.
//! assert_eq!(p, POSITION.snap(position));
//! assert_eq!(q, ROTATION.quantize_quat(rotation));
//! assert!((p[0] - position[0]).abs() <= 1.0 / 1024.0);
//! ```

#![deny(missing_docs)]

mod bits;
mod crc;
mod error;
mod quant;
mod quat;
mod reader;
mod seq;
mod varbits;
mod writer;

pub use bits::{BitReader, BitWriter, bits_needed};
pub use crc::crc32;
pub use error::WireError;
pub use quant::{BoundedFloat, QuantizedVec3, dequantize_f32, quantize_f32, snap_f32};
pub use quat::QuatCodec;
pub use reader::Reader;
pub use seq::{Seq16, SeqSpan};
pub use varbits::{unzigzag, var_i32_bits, var_u32_bits, zigzag};
pub use writer::Writer;
