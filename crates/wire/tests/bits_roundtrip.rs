//! Property tests for the bit streams and their variable-length integers.

use lagless_wire::{BitReader, BitWriter, WireError, var_i32_bits, var_u32_bits};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// One write (and the matching read).
#[derive(Debug, Clone)]
enum Op {
    Bits(u32, u32),
    Bits64(u64, u32),
    Bool(bool),
    VarU(u32),
    VarI(i32),
    Align,
    Bytes(Vec<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u32..=32, any::<u32>())
            .prop_map(|(w, v)| Op::Bits(if w == 32 { v } else { v & ((1 << w) - 1) }, w)),
        (0u32..=64, any::<u64>())
            .prop_map(|(w, v)| Op::Bits64(if w == 64 { v } else { v & ((1 << w) - 1) }, w)),
        any::<bool>().prop_map(Op::Bool),
        prop_oneof![0u32..30, any::<u32>()].prop_map(Op::VarU),
        prop_oneof![-20i32..20, any::<i32>()].prop_map(Op::VarI),
        Just(Op::Align),
        proptest::collection::vec(any::<u8>(), 0..6).prop_map(Op::Bytes),
    ]
}

fn write_all(ops: &[Op]) -> BitWriter {
    let mut w = BitWriter::new();
    for op in ops {
        match op {
            Op::Bits(v, n) => w.write_bits(*v, *n),
            Op::Bits64(v, n) => w.write_bits_u64(*v, *n),
            Op::Bool(b) => w.write_bool(*b),
            Op::VarU(v) => w.write_var_u32(*v),
            Op::VarI(v) => w.write_var_i32(*v),
            Op::Align => w.align(),
            Op::Bytes(b) => w.write_bytes_aligned(b),
        }
    }
    w
}

/// Reads back what `ops` wrote, returning the same ops with the values read.
fn read_all(ops: &[Op], r: &mut BitReader<'_>) -> Result<Vec<Op>, WireError> {
    ops.iter()
        .map(|op| {
            Ok(match op {
                Op::Bits(_, n) => Op::Bits(r.read_bits(*n)?, *n),
                Op::Bits64(_, n) => Op::Bits64(r.read_bits_u64(*n)?, *n),
                Op::Bool(_) => Op::Bool(r.read_bool()?),
                Op::VarU(_) => Op::VarU(r.read_var_u32()?),
                Op::VarI(_) => Op::VarI(r.read_var_i32()?),
                Op::Align => {
                    r.align()?;
                    Op::Align
                }
                Op::Bytes(b) => Op::Bytes(r.read_bytes_aligned(b.len())?.to_vec()),
            })
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        // Failing cases are saved beside this file (tests/ has no lib.rs to find).
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn round_trip_and_byte_identity(ops in proptest::collection::vec(op(), 0..40)) {
        let w = write_all(&ops);
        let bit_len = w.bit_len();
        let bytes = w.into_bytes();
        prop_assert_eq!(bytes.len(), bit_len.div_ceil(8));
        let mut r = BitReader::new(&bytes);
        let got = read_all(&ops, &mut r)?;
        prop_assert_eq!(r.bit_position(), bit_len);
        r.finish()?;
        prop_assert_eq!(format!("{got:?}"), format!("{ops:?}"));
        // encode -> decode -> encode gives identical bytes
        prop_assert_eq!(write_all(&got).into_bytes(), bytes);
    }

    /// Appending a writer gives the bits its writes would have given in place.
    #[test]
    fn append_is_writing_in_place(a in proptest::collection::vec(op(), 0..20), b in proptest::collection::vec(op(), 0..20)) {
        let b: Vec<Op> = b.into_iter().filter(|o| !matches!(o, Op::Align | Op::Bytes(_))).collect();
        let mut joined = write_all(&a);
        joined.append(&write_all(&b));
        let whole = write_all(&[a, b].concat());
        prop_assert_eq!(joined.bit_len(), whole.bit_len());
        prop_assert_eq!(joined.into_bytes(), whole.into_bytes());
    }

    #[test]
    fn var_sizes_match_the_cost_functions(u: u32, i: i32) {
        let mut w = BitWriter::new();
        w.write_var_u32(u);
        prop_assert_eq!(w.bit_len(), var_u32_bits(u) as usize);
        let mut w = BitWriter::new();
        w.write_var_i32(i);
        prop_assert_eq!(w.bit_len(), var_i32_bits(i) as usize);
    }

    /// Any accepted stream of var ints re-encodes to the same bytes: there is one
    /// encoding per value.
    #[test]
    fn accepted_var_streams_are_canonical(bytes in proptest::collection::vec(any::<u8>(), 0..24), signed: bool) {
        let mut r = BitReader::new(&bytes);
        let mut w = BitWriter::new();
        while r.remaining_bits() >= 8 {
            if signed {
                match r.read_var_i32() { Ok(v) => w.write_var_i32(v), Err(_) => return Ok(()) }
            } else {
                match r.read_var_u32() { Ok(v) => w.write_var_u32(v), Err(_) => return Ok(()) }
            }
        }
        if r.finish().is_ok() {
            prop_assert_eq!(w.into_bytes(), bytes);
        }
    }

    /// Arbitrary bytes and an arbitrary sequence of reads: errors, never panics.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..32), reads in proptest::collection::vec(op(), 0..24)) {
        let mut r = BitReader::new(&bytes);
        for op in &reads {
            let _ = read_all(std::slice::from_ref(op), &mut r);
        }
        let _ = r.finish();
        prop_assert!(r.remaining_bits() <= bytes.len() * 8);
    }
}
