//! The server's word on each shot, and its encoding.

use lagless_wire::{BitReader, BitWriter, WireError};
use thiserror::Error;

/// The outcome of one of a client's shots, as the server's rewound test found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HitReport {
    /// The client's shot number (from its shot input; wraps at 2^16).
    pub shot: u16,
    /// The entity hit, or `None` for a miss.
    pub target: Option<u32>,
}

/// Why a batch of hit reports was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HitError {
    /// Malformed bytes.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// More reports than [`HitReportCodec::max_batch`].
    #[error("too many reports in one batch")]
    TooMany,
    /// A target id above [`HitReportCodec::max_id`].
    #[error("target {0} is not a server id")]
    IdOutOfRange(u32),
}

/// Encoding of a batch of [`HitReport`]s, bit-packed: a count, then per report the
/// 16-bit shot number, a hit bit and, for a hit, the target's id as a variable-length
/// number (a miss is 17 bits, a hit on an id below 2^14 about 4 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HitReportCodec {
    /// The largest server id (the replication layer's
    /// [`Limits::max_id`](crate::Limits)); a larger target is refused.
    pub max_id: u32,
    /// Most reports in one batch (default 64).
    pub max_batch: usize,
}

impl Default for HitReportCodec {
    fn default() -> Self {
        Self {
            max_id: crate::Limits::default().max_id,
            max_batch: 64,
        }
    }
}

impl HitReportCodec {
    /// Writes `reports`; refused when there are too many or a target is out of range.
    pub fn write(&self, w: &mut BitWriter, reports: &[HitReport]) -> Result<(), HitError> {
        if reports.len() > self.max_batch {
            return Err(HitError::TooMany);
        }
        if let Some(t) = reports
            .iter()
            .filter_map(|r| r.target)
            .find(|&t| t > self.max_id)
        {
            return Err(HitError::IdOutOfRange(t));
        }
        w.write_var_u32(reports.len() as u32);
        for r in reports {
            w.write_bits(u32::from(r.shot), 16);
            w.write_bool(r.target.is_some());
            if let Some(t) = r.target {
                w.write_var_u32(t);
            }
        }
        Ok(())
    }

    /// Reads a batch; every malformed or out-of-range field is a typed error.
    pub fn read(&self, r: &mut BitReader<'_>) -> Result<Vec<HitReport>, HitError> {
        let count = r.read_var_u32()? as usize;
        if count > self.max_batch {
            return Err(HitError::TooMany);
        }
        let mut reports = Vec::with_capacity(count);
        for _ in 0..count {
            let shot = r.read_bits(16)? as u16;
            let target = if r.read_bool()? {
                let t = r.read_var_u32()?;
                if t > self.max_id {
                    return Err(HitError::IdOutOfRange(t));
                }
                Some(t)
            } else {
                None
            };
            reports.push(HitReport { shot, target });
        }
        Ok(reports)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn out_of_range_targets_are_refused() {
        let codec = HitReportCodec::default();
        let bad = [HitReport {
            shot: 1,
            target: Some(1 << 20),
        }];
        let mut w = BitWriter::new();
        assert_eq!(
            codec.write(&mut w, &bad),
            Err(HitError::IdOutOfRange(1 << 20))
        );
        let mut w = BitWriter::new();
        w.write_var_u32(1);
        w.write_bits(1, 16);
        w.write_bool(true);
        w.write_var_u32(1 << 20);
        let bytes = w.into_bytes();
        assert_eq!(
            codec.read(&mut BitReader::new(&bytes)),
            Err(HitError::IdOutOfRange(1 << 20))
        );
        let mut w = BitWriter::new();
        w.write_var_u32(65);
        let bytes = w.into_bytes();
        assert_eq!(
            codec.read(&mut BitReader::new(&bytes)),
            Err(HitError::TooMany)
        );
    }

    proptest! {
        #[test]
        fn round_trips(
            items in proptest::collection::vec((any::<u16>(), proptest::option::of(0u32..(1 << 20))), 0..64),
        ) {
            let codec = HitReportCodec::default();
            let reports: Vec<_> = items
                .into_iter()
                .map(|(shot, target)| HitReport { shot, target })
                .collect();
            let mut w = BitWriter::new();
            codec.write(&mut w, &reports).unwrap();
            let bytes = w.into_bytes();
            let mut r = BitReader::new(&bytes);
            prop_assert_eq!(codec.read(&mut r), Ok(reports));
        }

        #[test]
        fn decoding_never_panics(bytes: Vec<u8>) {
            let _ = HitReportCodec::default().read(&mut BitReader::new(&bytes));
        }
    }
}
