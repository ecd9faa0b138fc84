//! Metrics: per-request values (AIPerf's record metrics), run-level aggregates and the
//! statistics over them.
//!
//! The [`Collector`] receives finished records off the hot path, tokenizes their output,
//! writes one JSONL line per record, and keeps only the numbers the statistics need.

pub mod catalog;
mod chat_isl;
mod collector;
pub(crate) mod column;
pub mod confidence;
mod goodput;
pub mod gpu_telemetry;
mod http_trace;
pub mod live;
pub mod record_metrics;
pub mod server_metrics;
pub mod server_series;
mod server_units;
mod slices;
mod summary;
mod sweep_line;
pub(crate) mod template_overhead;

pub use catalog::{ConsoleGroup, MetricId};
pub use chat_isl::ChatIsl;
#[cfg(test)]
pub use collector::ErrorCount;
pub use collector::{
    Collector, MetricResult, MetricValue, MetricsSummary, RecordFacts, RecordSink, RecordTap,
    TimeSlice,
};
pub use goodput::{GoodputSlo, parse_goodput};
pub use record_metrics::{RecordMetrics, RecordOptions};
pub use sweep_line::{OrderedSpans, Span, SpanOrder, WeightedStats, metrics as sweep_line_metrics};
pub use template_overhead::{EntryRequest, TemplateOverhead};

/// How the collector computes metrics for a run.
#[derive(Debug, Clone, Default)]
pub struct CollectorOptions {
    /// The run streamed responses (TTFT, ITL and the other streaming metrics).
    pub streaming: bool,
    /// ISL/OSL from the server's `usage` instead of the client tokenizer.
    pub use_server_token_count: bool,
    /// Goodput objectives; empty = no goodput.
    pub goodput: Vec<GoodputSlo>,
    /// Chat-template tokens to take out of Image Token Count.
    pub template_overhead: TemplateOverhead,
    /// `--slice-duration` in ns: also summarize each window of this length.
    pub slice_duration_ns: Option<u64>,
    /// The endpoint produces no tokens (embeddings, rankings): no output-token metrics.
    pub no_output_tokens: bool,
    /// The requests carry no text to count (audio transcription): no input lengths.
    pub no_input_tokens: bool,
    /// `--apply-chat-template`: count each chat request's ISL through the template.
    pub chat_isl: Option<ChatIsl>,
}
