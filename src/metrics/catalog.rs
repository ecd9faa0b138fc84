//! The metric catalogue: AIPerf's tags, headers, units, display order and flags.
//!
//! Values are kept in base units (ns, tokens, counts); `scale` converts them to the display
//! unit (`display = base / scale`).

/// How a metric is computed (decides which statistics it carries in the exports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// One value (or a list) per request: full distribution statistics.
    Record,
    /// A counter over the run: a single value.
    Aggregate,
    /// A formula over other results: a single value.
    Derived,
    /// A time-weighted distribution of a step function over the run (AIPerf's sweep-line
    /// metrics): avg, min, max, p50, p90, p95, p99 and std, no count or sum.
    TimeWeighted,
}

/// Which console table shows the metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleGroup {
    /// "NVIDIA AIPerf | LLM Metrics".
    Default,
    /// "NVIDIA AIPerf | LLM Metrics: Usage".
    Usage,
    /// "NVIDIA AIPerf | LLM Metrics: Effective".
    Effective,
    /// "NVIDIA AIPerf | LLM Metrics: Active".
    Active,
    /// Exported to files only.
    Hidden,
}

#[derive(Debug)]
pub struct MetricDef {
    pub id: MetricId,
    pub tag: &'static str,
    pub header: &'static str,
    /// Display unit as AIPerf writes it ("ms", "tokens", "requests/sec", ...).
    pub unit: &'static str,
    /// Base units per display unit (1e6 for ns shown as ms).
    pub scale: f64,
    pub kind: MetricKind,
    /// Console row order (AIPerf's `display_order`).
    pub display_order: u32,
    pub console: ConsoleGroup,
    pub larger_is_better: bool,
    pub streaming_only: bool,
    /// Computed from failed requests only.
    pub error_only: bool,
    /// Whole numbers (token and image counts): written as integers in the JSONL.
    pub integer: bool,
}

/// Every metric this tool produces. The discriminant indexes [`CATALOG`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum MetricId {
    TimeToFirstToken,
    TimeToSecondToken,
    RequestLatency,
    InterTokenLatency,
    InterChunkLatency,
    OutputTokenThroughputPerUser,
    OutputTokenCount,
    ReasoningTokenCount,
    OutputSequenceLength,
    InputSequenceLength,
    ImageTokenCount,
    NumImages,
    ImageThroughput,
    ImageLatency,
    UsagePromptTokens,
    UsageCompletionTokens,
    UsageReasoningTokens,
    UsageTotalTokens,
    ErrorIsl,
    // Run level.
    OutputTokenThroughput,
    RequestThroughput,
    Goodput,
    RequestCount,
    ErrorRequestCount,
    GoodRequestCount,
    BenchmarkDuration,
    TotalOsl,
    TotalIsl,
    TotalOutputTokens,
    TotalReasoningTokens,
    TotalErrorIsl,
    TotalNumImages,
    // AIPerf 0.13 summary metrics measured by one process (kept together for easy merges).
    TimeToFirstOutputToken,
    DecodeDuration,
    PrefillThroughputPerUser,
    E2eOutputTokenThroughput,
    OslMismatchDiffPct,
    UsagePromptTokensDiffPct,
    UsageCompletionTokensDiffPct,
    UsageReasoningTokensDiffPct,
    CreditToStartLatency,
    EffectiveLatency,
    CompletedRequestCount,
    RequestErrorRate,
    OslMismatchCount,
    UsageDiscrepancyCount,
    InputTokenThroughput,
    TotalTokenThroughput,
    TotalUsagePromptTokens,
    TotalUsageCompletionTokens,
    TotalUsageTotalTokens,
    GoodRequestFraction,
    EffectiveConcurrency,
    EffectiveDecodeConcurrency,
    EffectivePrefillConcurrency,
    EffectiveDecodeThroughput,
    EffectivePrefillThroughput,
    EffectiveTotalThroughput,
    EffectiveDecodeThroughputPerUser,
    EffectivePrefillThroughputPerUser,
    TokensInFlight,
    ActiveDecodeThroughput,
    ActivePrefillThroughput,
    ActiveTotalThroughput,
    ActiveDecodeThroughputPerUser,
    ActivePrefillThroughputPerUser,
    // HTTP timing per request (k6 names); see `http_trace`.
    HttpReqBlocked,
    HttpReqDnsLookup,
    HttpReqConnecting,
    HttpReqSending,
    HttpReqWaiting,
    HttpReqReceiving,
    HttpReqDuration,
    HttpReqConnectionOverhead,
    HttpReqTotal,
    HttpReqDataSent,
    HttpReqDataReceived,
    HttpReqChunksSent,
    HttpReqChunksReceived,
    HttpReqConnectionReused,
    // Audio input (AIPerf's audio metrics).
    AudioDuration,
    Rtfx,
    // Video generation (SGLang's job fields).
    VideoInferenceTime,
    VideoPeakMemory,
    // Network-latency calibration: made at the end from the latencies above, never per
    // record (see `network_adjusted_source`).
    NetworkAdjustedTimeToFirstToken,
    NetworkAdjustedTimeToFirstOutputToken,
    NetworkAdjustedRequestLatency,
    NetworkRtt,
}

const NS_PER_MS: f64 = 1e6;
const NS_PER_S: f64 = 1e9;
/// Order value for metrics that never appear on the console.
const NO_ORDER: u32 = u32::MAX;

const fn def(
    id: MetricId,
    tag: &'static str,
    header: &'static str,
    unit: &'static str,
) -> MetricDef {
    MetricDef {
        id,
        tag,
        header,
        unit,
        scale: 1.0,
        kind: MetricKind::Record,
        display_order: NO_ORDER,
        console: ConsoleGroup::Hidden,
        larger_is_better: false,
        streaming_only: false,
        error_only: false,
        integer: false,
    }
}

const fn shown(mut d: MetricDef, order: u32) -> MetricDef {
    d.display_order = order;
    d.console = ConsoleGroup::Default;
    d
}

const fn usage(mut d: MetricDef, order: u32) -> MetricDef {
    d.display_order = order;
    d.console = ConsoleGroup::Usage;
    d.integer = true;
    d.larger_is_better = true;
    d
}

const fn ms(mut d: MetricDef) -> MetricDef {
    d.scale = NS_PER_MS;
    d
}

const fn kilobytes(mut d: MetricDef) -> MetricDef {
    d.scale = 1024.0;
    d
}

const fn streaming(mut d: MetricDef) -> MetricDef {
    d.streaming_only = true;
    d
}

const fn larger(mut d: MetricDef) -> MetricDef {
    d.larger_is_better = true;
    d
}

const fn tokens(mut d: MetricDef) -> MetricDef {
    d.integer = true;
    d.larger_is_better = true;
    d
}

/// A whole-number count that is neither better larger nor smaller (bytes, chunks).
const fn whole(mut d: MetricDef) -> MetricDef {
    d.integer = true;
    d
}

const fn kind(mut d: MetricDef, kind: MetricKind) -> MetricDef {
    d.kind = kind;
    d
}

const fn errors(mut d: MetricDef) -> MetricDef {
    d.error_only = true;
    d
}

const fn group(mut d: MetricDef, console: ConsoleGroup, order: u32) -> MetricDef {
    d.display_order = order;
    d.console = console;
    d
}

/// A sweep-line metric, shown in the Effective or Active table.
const fn sweep(
    id: MetricId,
    tag: &'static str,
    header: &'static str,
    unit: &'static str,
    console: ConsoleGroup,
    order: u32,
) -> MetricDef {
    group(
        kind(def(id, tag, header, unit), TimeWeighted),
        console,
        order,
    )
}

use MetricId as M;
use MetricKind::{Aggregate, Derived, TimeWeighted};

/// Indexed by `MetricId as usize`; the order is also the order of a record's JSONL metrics.
pub static CATALOG: [MetricDef; 88] = [
    shown(
        streaming(ms(def(
            M::TimeToFirstToken,
            "time_to_first_token",
            "Time to First Token",
            "ms",
        ))),
        100,
    ),
    shown(
        streaming(ms(def(
            M::TimeToSecondToken,
            "time_to_second_token",
            "Time to Second Token",
            "ms",
        ))),
        200,
    ),
    shown(
        ms(def(
            M::RequestLatency,
            "request_latency",
            "Request Latency",
            "ms",
        )),
        300,
    ),
    shown(
        streaming(ms(def(
            M::InterTokenLatency,
            "inter_token_latency",
            "Inter Token Latency",
            "ms",
        ))),
        400,
    ),
    streaming(ms(def(
        M::InterChunkLatency,
        "inter_chunk_latency",
        "Inter Chunk Latency",
        "ms",
    ))),
    shown(
        streaming(larger(def(
            M::OutputTokenThroughputPerUser,
            "output_token_throughput_per_user",
            "Output Token Throughput Per User",
            "tokens/sec/user",
        ))),
        500,
    ),
    tokens(def(
        M::OutputTokenCount,
        "output_token_count",
        "Output Token Count",
        "tokens",
    )),
    tokens(def(
        M::ReasoningTokenCount,
        "reasoning_token_count",
        "Reasoning Token Count",
        "tokens",
    )),
    shown(
        tokens(def(
            M::OutputSequenceLength,
            "output_sequence_length",
            "Output Sequence Length",
            "tokens",
        )),
        600,
    ),
    shown(
        tokens(def(
            M::InputSequenceLength,
            "input_sequence_length",
            "Input Sequence Length",
            "tokens",
        )),
        700,
    ),
    // Not in AIPerf: server prompt tokens minus client text tokens and the chat template's
    // tokens, i.e. what the images cost.
    shown(
        tokens(def(
            M::ImageTokenCount,
            "image_token_count",
            "Image Token Count",
            "tokens",
        )),
        750,
    ),
    tokens(def(
        M::NumImages,
        "num_images",
        "Number of Images",
        "images",
    )),
    shown(
        larger(def(
            M::ImageThroughput,
            "image_throughput",
            "Image Throughput",
            "images/sec",
        )),
        860,
    ),
    shown(
        ms(def(
            M::ImageLatency,
            "image_latency",
            "Image Latency",
            "ms/image",
        )),
        861,
    ),
    usage(
        def(
            M::UsagePromptTokens,
            "usage_prompt_tokens",
            "Usage Prompt Tokens",
            "tokens",
        ),
        1000,
    ),
    usage(
        def(
            M::UsageCompletionTokens,
            "usage_completion_tokens",
            "Usage Completion Tokens",
            "tokens",
        ),
        1100,
    ),
    usage(
        def(
            M::UsageReasoningTokens,
            "usage_reasoning_tokens",
            "Usage Reasoning Tokens",
            "tokens",
        ),
        1110,
    ),
    usage(
        def(
            M::UsageTotalTokens,
            "usage_total_tokens",
            "Usage Total Tokens",
            "tokens",
        ),
        1200,
    ),
    errors(tokens(def(
        M::ErrorIsl,
        "error_isl",
        "Error Input Sequence Length",
        "tokens",
    ))),
    shown(
        kind(
            larger(def(
                M::OutputTokenThroughput,
                "output_token_throughput",
                "Output Token Throughput",
                "tokens/sec",
            )),
            Derived,
        ),
        800,
    ),
    shown(
        kind(
            larger(def(
                M::RequestThroughput,
                "request_throughput",
                "Request Throughput",
                "requests/sec",
            )),
            Derived,
        ),
        900,
    ),
    shown(
        kind(
            larger(def(M::Goodput, "goodput", "Goodput", "requests/sec")),
            Derived,
        ),
        1000,
    ),
    shown(
        kind(
            larger(def(
                M::RequestCount,
                "request_count",
                "Request Count",
                "requests",
            )),
            Aggregate,
        ),
        1100,
    ),
    errors(kind(
        def(
            M::ErrorRequestCount,
            "error_request_count",
            "Error Request Count",
            "requests",
        ),
        Aggregate,
    )),
    kind(
        whole(larger(def(
            M::GoodRequestCount,
            "good_request_count",
            "Good Request Count",
            "requests",
        ))),
        Aggregate,
    ),
    {
        let mut d = kind(
            def(
                M::BenchmarkDuration,
                "benchmark_duration",
                "Benchmark Duration",
                "sec",
            ),
            Derived,
        );
        d.scale = NS_PER_S;
        d
    },
    kind(
        tokens(def(
            M::TotalOsl,
            "total_osl",
            "Total Output Sequence Length",
            "tokens",
        )),
        Derived,
    ),
    kind(
        tokens(def(
            M::TotalIsl,
            "total_isl",
            "Total Input Sequence Length",
            "tokens",
        )),
        Derived,
    ),
    kind(
        tokens(def(
            M::TotalOutputTokens,
            "total_output_tokens",
            "Total Output Tokens",
            "tokens",
        )),
        Derived,
    ),
    kind(
        tokens(def(
            M::TotalReasoningTokens,
            "total_reasoning_tokens",
            "Total Reasoning Tokens",
            "tokens",
        )),
        Derived,
    ),
    errors(kind(
        tokens(def(
            M::TotalErrorIsl,
            "total_error_isl",
            "Total Error Input Sequence Length",
            "tokens",
        )),
        Derived,
    )),
    kind(
        tokens(def(
            M::TotalNumImages,
            "total_num_images",
            "Total Number of Images",
            "images",
        )),
        Derived,
    ),
    // AIPerf 0.13 summary metrics measured by one process.
    group(
        streaming(ms(def(
            M::TimeToFirstOutputToken,
            "time_to_first_output_token",
            "Time to First Output Token",
            "ms",
        ))),
        ConsoleGroup::Default,
        210,
    ),
    group(
        streaming(ms(def(
            M::DecodeDuration,
            "decode_duration",
            "Decode Duration",
            "ms",
        ))),
        ConsoleGroup::Default,
        350,
    ),
    streaming(larger(def(
        M::PrefillThroughputPerUser,
        "prefill_throughput_per_user",
        "Prefill Throughput Per User",
        "tokens/sec/user",
    ))),
    group(
        larger(def(
            M::E2eOutputTokenThroughput,
            "e2e_output_token_throughput",
            "E2E Output Token Throughput",
            "tokens/sec/user",
        )),
        ConsoleGroup::Default,
        510,
    ),
    def(
        M::OslMismatchDiffPct,
        "osl_mismatch_diff_pct",
        "OSL Mismatch Diff %",
        "%",
    ),
    def(
        M::UsagePromptTokensDiffPct,
        "usage_prompt_tokens_diff_pct",
        "Usage Prompt Diff %",
        "%",
    ),
    def(
        M::UsageCompletionTokensDiffPct,
        "usage_completion_tokens_diff_pct",
        "Usage Completion Diff %",
        "%",
    ),
    def(
        M::UsageReasoningTokensDiffPct,
        "usage_reasoning_tokens_diff_pct",
        "Usage Reasoning Diff %",
        "%",
    ),
    ms(def(
        M::CreditToStartLatency,
        "credit_to_start_latency",
        "Credit-to-Start Latency",
        "ms",
    )),
    // From the moment the load generator released the request (its credit) to the last
    // response: the latency a user waiting on the schedule sees.
    group(
        ms(def(
            M::EffectiveLatency,
            "effective_latency",
            "Effective Latency (CO-aware)",
            "ms",
        )),
        ConsoleGroup::Effective,
        100,
    ),
    group(
        kind(
            def(
                M::CompletedRequestCount,
                "completed_request_count",
                "Completed Requests (Success + Error)",
                "requests",
            ),
            Derived,
        ),
        ConsoleGroup::Default,
        1075,
    ),
    group(
        kind(
            def(
                M::RequestErrorRate,
                "request_error_rate",
                "Request Error Rate",
                "%",
            ),
            Derived,
        ),
        ConsoleGroup::Default,
        1080,
    ),
    kind(
        def(
            M::OslMismatchCount,
            "osl_mismatch_count",
            "OSL Mismatch Count",
            "requests",
        ),
        Aggregate,
    ),
    kind(
        def(
            M::UsageDiscrepancyCount,
            "usage_discrepancy_count",
            "Usage Discrepancy Count",
            "requests",
        ),
        Aggregate,
    ),
    // On the console after the output token throughput, as AIPerf 0.13 shows it.
    shown(
        kind(
            larger(def(
                M::InputTokenThroughput,
                "input_token_throughput",
                "Input Token Throughput",
                "tokens/sec",
            )),
            Derived,
        ),
        805,
    ),
    kind(
        larger(def(
            M::TotalTokenThroughput,
            "total_token_throughput",
            "Total Token Throughput",
            "tokens/sec",
        )),
        Derived,
    ),
    kind(
        usage(
            def(
                M::TotalUsagePromptTokens,
                "total_usage_prompt_tokens",
                "Total Usage Prompt Tokens",
                "tokens",
            ),
            1300,
        ),
        Derived,
    ),
    kind(
        usage(
            def(
                M::TotalUsageCompletionTokens,
                "total_usage_completion_tokens",
                "Total Usage Completion Tokens",
                "tokens",
            ),
            1310,
        ),
        Derived,
    ),
    kind(
        usage(
            def(
                M::TotalUsageTotalTokens,
                "total_usage_total_tokens",
                "Total Usage Total Tokens",
                "tokens",
            ),
            1320,
        ),
        Derived,
    ),
    kind(
        larger(def(
            M::GoodRequestFraction,
            "good_request_fraction",
            "GoodRequestFraction",
            "ratio",
        )),
        Derived,
    ),
    sweep(
        M::EffectiveConcurrency,
        "effective_concurrency",
        "Effective Concurrency",
        "requests",
        ConsoleGroup::Effective,
        1,
    ),
    sweep(
        M::EffectiveDecodeConcurrency,
        "effective_decode_concurrency",
        "Effective Decode Concurrency",
        "requests",
        ConsoleGroup::Effective,
        2,
    ),
    sweep(
        M::EffectivePrefillConcurrency,
        "effective_prefill_concurrency",
        "Effective Prefill Concurrency",
        "requests",
        ConsoleGroup::Effective,
        3,
    ),
    sweep(
        M::EffectiveDecodeThroughput,
        "effective_decode_throughput",
        "Effective Decode Throughput",
        "tokens/sec",
        ConsoleGroup::Effective,
        4,
    ),
    sweep(
        M::EffectivePrefillThroughput,
        "effective_prefill_throughput",
        "Effective Prefill Throughput",
        "tokens/sec",
        ConsoleGroup::Effective,
        5,
    ),
    sweep(
        M::EffectiveTotalThroughput,
        "effective_total_throughput",
        "Effective Total Throughput",
        "tokens/sec",
        ConsoleGroup::Effective,
        6,
    ),
    sweep(
        M::EffectiveDecodeThroughputPerUser,
        "effective_decode_throughput_per_user",
        "Effective Decode Throughput Per User",
        "tokens/sec/user",
        ConsoleGroup::Effective,
        7,
    ),
    sweep(
        M::EffectivePrefillThroughputPerUser,
        "effective_prefill_throughput_per_user",
        "Effective Prefill Throughput Per User",
        "tokens/sec/user",
        ConsoleGroup::Effective,
        8,
    ),
    sweep(
        M::TokensInFlight,
        "tokens_in_flight",
        "Tokens In Flight",
        "tokens",
        ConsoleGroup::Effective,
        9,
    ),
    sweep(
        M::ActiveDecodeThroughput,
        "active_decode_throughput",
        "Active Decode Throughput",
        "tokens/sec",
        ConsoleGroup::Active,
        1,
    ),
    sweep(
        M::ActivePrefillThroughput,
        "active_prefill_throughput",
        "Active Prefill Throughput",
        "tokens/sec",
        ConsoleGroup::Active,
        2,
    ),
    sweep(
        M::ActiveTotalThroughput,
        "active_total_throughput",
        "Active Total Throughput",
        "tokens/sec",
        ConsoleGroup::Active,
        3,
    ),
    sweep(
        M::ActiveDecodeThroughputPerUser,
        "active_decode_throughput_per_user",
        "Active Decode Throughput Per User",
        "tokens/sec/user",
        ConsoleGroup::Active,
        4,
    ),
    sweep(
        M::ActivePrefillThroughputPerUser,
        "active_prefill_throughput_per_user",
        "Active Prefill Throughput Per User",
        "tokens/sec/user",
        ConsoleGroup::Active,
        5,
    ),
    // HTTP timing per request, in AIPerf's k6-style names: per-record values and summary
    // statistics, shown on the console only with --show-trace-timing.
    ms(def(
        M::HttpReqBlocked,
        "http_req_blocked",
        "HTTP Blocked",
        "ms",
    )),
    ms(def(
        M::HttpReqDnsLookup,
        "http_req_dns_lookup",
        "HTTP DNS Lookup",
        "ms",
    )),
    ms(def(
        M::HttpReqConnecting,
        "http_req_connecting",
        "HTTP Connecting",
        "ms",
    )),
    ms(def(
        M::HttpReqSending,
        "http_req_sending",
        "HTTP Sending",
        "ms",
    )),
    ms(def(
        M::HttpReqWaiting,
        "http_req_waiting",
        "HTTP Waiting (TTFB)",
        "ms",
    )),
    ms(def(
        M::HttpReqReceiving,
        "http_req_receiving",
        "HTTP Receiving",
        "ms",
    )),
    ms(def(
        M::HttpReqDuration,
        "http_req_duration",
        "HTTP Duration (excl. conn)",
        "ms",
    )),
    ms(def(
        M::HttpReqConnectionOverhead,
        "http_req_connection_overhead",
        "HTTP Connection Overhead",
        "ms",
    )),
    ms(def(
        M::HttpReqTotal,
        "http_req_total",
        "HTTP Total Time",
        "ms",
    )),
    // Sizes in KB of 1024 bytes, as AIPerf writes them.
    kilobytes(def(
        M::HttpReqDataSent,
        "http_req_data_sent",
        "HTTP Data Sent",
        "KB",
    )),
    kilobytes(def(
        M::HttpReqDataReceived,
        "http_req_data_received",
        "HTTP Data Received",
        "KB",
    )),
    whole(def(
        M::HttpReqChunksSent,
        "http_req_chunks_sent",
        "HTTP Chunks Sent",
        "count",
    )),
    whole(def(
        M::HttpReqChunksReceived,
        "http_req_chunks_received",
        "HTTP Chunks Received",
        "count",
    )),
    def(
        M::HttpReqConnectionReused,
        "http_req_connection_reused",
        "HTTP Connection Reused",
        "ratio",
    ),
    // In the exports only, as in AIPerf: RTFx is the headline.
    def(M::AudioDuration, "audio_duration", "Audio Duration", "sec"),
    shown(
        larger(def(
            M::Rtfx,
            "rtfx",
            "Inverse Real-Time Factor (RTFx)",
            "ratio",
        )),
        850,
    ),
    // The server's own generation time and peak GPU memory of a video job.
    shown(
        ms(def(
            M::VideoInferenceTime,
            "video_inference_time",
            "Video Inference Time",
            "ms",
        )),
        310,
    ),
    shown(
        def(
            M::VideoPeakMemory,
            "video_peak_memory",
            "Video Peak Memory",
            "MB",
        ),
        311,
    ),
    shown(
        streaming(ms(def(
            M::NetworkAdjustedTimeToFirstToken,
            "network_adjusted_time_to_first_token",
            "Network-Adjusted Time to First Token",
            "ms",
        ))),
        101,
    ),
    shown(
        streaming(ms(def(
            M::NetworkAdjustedTimeToFirstOutputToken,
            "network_adjusted_time_to_first_output_token",
            "Network-Adjusted Time to First Output Token",
            "ms",
        ))),
        211,
    ),
    shown(
        ms(def(
            M::NetworkAdjustedRequestLatency,
            "network_adjusted_request_latency",
            "Network-Adjusted Request Latency",
            "ms",
        )),
        301,
    ),
    // One value, the mean round trip subtracted, with AIPerf's full statistics of it.
    shown(
        ms(def(M::NetworkRtt, "network_rtt", "Network RTT", "ms")),
        305,
    ),
];

impl MetricId {
    pub fn def(self) -> &'static MetricDef {
        &CATALOG[self as usize]
    }

    /// The latency a `network_adjusted_*` metric is made from.
    pub fn network_adjusted_source(self) -> Option<MetricId> {
        NETWORK_ADJUSTED
            .iter()
            .find(|(adjusted, _)| *adjusted == self)
            .map(|(_, source)| *source)
    }

    /// The `network_adjusted_*` metric made from this latency.
    pub fn network_adjusted(self) -> Option<MetricId> {
        NETWORK_ADJUSTED
            .iter()
            .find(|(_, source)| *source == self)
            .map(|(adjusted, _)| *adjusted)
    }
}

/// Each `network_adjusted_*` metric and the latency it is made from: only the latencies
/// that start at the send carry the round trip (the gaps between tokens do not).
const NETWORK_ADJUSTED: [(MetricId, MetricId); 3] = [
    (M::NetworkAdjustedTimeToFirstToken, M::TimeToFirstToken),
    (
        M::NetworkAdjustedTimeToFirstOutputToken,
        M::TimeToFirstOutputToken,
    ),
    (M::NetworkAdjustedRequestLatency, M::RequestLatency),
];

/// Looks a metric up by its AIPerf tag.
pub fn by_tag(tag: &str) -> Option<&'static MetricDef> {
    CATALOG.iter().find(|d| d.tag == tag)
}

/// Number of metrics in the catalogue.
pub const METRIC_COUNT: usize = CATALOG.len();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_is_indexed_by_id() {
        for (i, d) in CATALOG.iter().enumerate() {
            assert_eq!(d.id as usize, i, "{} is out of place", d.tag);
        }
    }

    #[test]
    fn tags_are_unique_and_found() {
        for d in CATALOG.iter() {
            assert!(std::ptr::eq(by_tag(d.tag).unwrap(), d));
        }
        assert!(by_tag("no_such_metric").is_none());
    }

    #[test]
    fn display_units_match_aiperf() {
        assert_eq!(MetricId::RequestLatency.def().unit, "ms");
        assert_eq!(MetricId::RequestLatency.def().scale, 1e6);
        assert_eq!(MetricId::BenchmarkDuration.def().unit, "sec");
        assert_eq!(MetricId::BenchmarkDuration.def().scale, 1e9);
        assert_eq!(MetricId::ImageLatency.def().unit, "ms/image");
        assert!(
            MetricId::OutputTokenThroughputPerUser
                .def()
                .larger_is_better
        );
        assert!(!MetricId::InterTokenLatency.def().larger_is_better);
    }
}
