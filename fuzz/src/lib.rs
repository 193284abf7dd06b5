//! Fuzz targets for every lagless decoder of network bytes.
//!
//! Each target is a plain function of `&[u8]`, so it runs three ways:
//! * under libFuzzer (`cargo fuzz run <target>`, binaries in `fuzz_targets/`),
//! * in the stable smoke test (`tests/smoke.rs`), which feeds every target thousands of
//!   seeded random inputs and mutations of valid encodings ([`seeds`], [`mutate`]),
//! * from anywhere else that wants to replay a crash file.
//!
//! A target panics only when it finds a bug: a decoder panicking, or a decoded value
//! that does not survive re-encoding. Errors from malformed input are the expected
//! outcome and are ignored.

#![deny(missing_docs)]

mod deadreckoning;
pub mod mutate;
mod netcode;
pub mod seeds;
mod shooter;
mod targets;

pub use deadreckoning::dead_reckoning;
pub use netcode::{netcode_client, netcode_server, reliable_channel};
pub use shooter::{hit_reports, shooter_input, spawn_claims, view_claim};
pub use targets::{
    bit_reader, client_session, cube_snapshot, input_message, lab_control, replication_snapshot,
    server_session, session_control, snapshot_fragment, wire_reader,
};

/// A fuzz target: consumes arbitrary bytes, panics only on a bug.
pub type Target = fn(&[u8]);

/// Every target by name (the names of the binaries in `fuzz_targets/`).
pub const TARGETS: &[(&str, Target)] = &[
    ("wire_reader", wire_reader),
    ("bit_reader", bit_reader),
    ("input_message", input_message),
    ("snapshot_fragment", snapshot_fragment),
    ("cube_snapshot", cube_snapshot),
    ("replication_snapshot", replication_snapshot),
    ("client_session", client_session),
    ("server_session", server_session),
    ("netcode_server", netcode_server),
    ("netcode_client", netcode_client),
    ("reliable_channel", reliable_channel),
    ("lab_control", lab_control),
    ("session_control", session_control),
    ("dead_reckoning", dead_reckoning),
    ("view_claim", view_claim),
    ("hit_reports", hit_reports),
    ("spawn_claims", spawn_claims),
    ("shooter_input", shooter_input),
];
