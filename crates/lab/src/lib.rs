//! The lagless lab: runs a scene's server and clients in one process over the seeded
//! network emulator on a virtual clock, and reports how the game felt, under the metric
//! names `docs/metrics.md` defines.
//!
//! ```no_run
//! use lagless_lab::{RunConfig, run};
//! let config = RunConfig { profile: "wifi".into(), seconds: 5.0, ..RunConfig::default() };
//! let outcome = run(&config, &mut |_simulated_seconds| {}).unwrap();
//! println!("{}", outcome.report.to_table());
//! ```

#![deny(missing_docs)]

pub mod bench;
pub mod bench_playback;
pub mod bench_snapshot;
pub mod character_view;
pub mod config;
pub mod cpu;
pub mod input_buffer;
pub mod link_replay;
pub mod metrics;
pub mod net;
pub mod playback;
pub mod remote_view;
pub mod replication;
#[cfg(feature = "replicon")]
pub mod replicon_peer;
pub mod runner;
pub mod scene;
pub mod scenes;
pub mod sweep_input;
pub mod timeline;
pub mod view;

pub use config::{LinkChange, NetOverrides, RunConfig, ScriptChoice};
pub use metrics::{Metric, Report};
pub use runner::{RunError, RunOutcome, run};
