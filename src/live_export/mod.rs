//! Live views of a run for other programs, fed by the snapshots of `metrics::live`.

pub mod prometheus;
