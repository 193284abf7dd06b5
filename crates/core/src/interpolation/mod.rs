//! Snapshot interpolation (placeholder; being written).
