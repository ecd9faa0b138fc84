//! What the integration tests and benches reach beyond the binary. Every other module is
//! private to the crate, so the compiler reports what nothing uses.

pub use crate::cli::{
    ArrivalMode, Cli, Command, CustomDatasetType, EndpointType, ImageFormat as ImageFormatArg,
    ImageSampling, LogLevel, ProfileArgs, UiType, WaitForModelMode,
};
pub use crate::dataset::image::{ImageEncoding, encode_rgb, noise_rgb};
pub use crate::dataset::{
    BuildError, ImageFormat, InputOptions, SyntheticOptions, build_synthetic,
};
pub use crate::mock::fault::{Fault, FaultRates};
pub use crate::mock::image::qwen2_vl_image_tokens;
pub use crate::mock::request::{ChatCosts, ChatRequest, FinishReason, chat_prompt_stats};
pub use crate::mock::response::{Api, ChunkWriter, ResponseHeader, UsageCounts};
pub use crate::mock::words::word as mock_word;
pub use crate::mock::{
    DEFAULT_CHAT_TEMPLATE_TOKENS, MockServerArgs, run as run_mock_server,
    start as start_mock_server,
};
pub use crate::scrape::parse::parse as parse_exposition;
pub use crate::timer::sleep_until;
pub use crate::tokenizer::bpe::O200K_PATTERN;
pub use crate::tokenizer::{Tokenizer, builtin_bpe};

// The per-record line and what it is made of, for the `jsonl_format` bench.
pub use crate::clock::Clock;
pub use crate::export::jsonl::{RECORD_PROCESSOR_ID, WORKER_ID, format_record_line};
pub use crate::metrics::{MetricId, RecordMetrics, RecordOptions};
pub use crate::profile::{PROBE_REQUEST_ID, RecordPath};
pub use crate::record::{
    ErrorDetails, HttpTiming, Phase, RequestInput, RequestRecord, SendTiming, Usage,
};

// Statistics and files across repeated runs and sweeps (the run driver and its tests).
pub use crate::export::aggregate::{
    ConfidenceAggregate, MetricSummary, NO_METRICS, RunMetrics, RunOutcome, SweepAggregate,
    SweepCell, VariationMeta, best_configurations_console, confidence_console, read_record_values,
    read_run_metrics, sweep_table, write_confidence_aggregate, write_sweep_aggregate,
};
pub use crate::export::{AGGREGATE_CSV_FILE, AGGREGATE_JSON_FILE, SWEEP_CSV_FILE, SWEEP_JSON_FILE};
pub use crate::metrics::confidence::{
    ConvergenceMode, MIN_RUNS, RunLevelStats, STAT_KEYS, distributions_match, has_converged,
    ks_2samp, t_critical,
};

// The end-of-run sweep-line metrics and what they read, for the `sweep_line` bench.
pub use crate::metrics::column::encode as encode_column_value;
pub use crate::metrics::{OrderedSpans, Span, SpanOrder, WeightedStats, sweep_line_metrics};
