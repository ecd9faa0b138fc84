//! Live views of a run for other programs, fed by the snapshots of `metrics::live` (and the
//! OpenTelemetry histograms by the collector's per-record tap).

pub mod otel;
pub mod prometheus;
