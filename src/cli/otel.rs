//! Flags of the live OpenTelemetry export (AIPerf's OTLP/HTTP metrics stream).

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub struct OtelArgs {
    /// OTLP/HTTP endpoint the run's live metrics are pushed to during the run (every 2 s,
    /// `AIPERF_OTEL_FLUSH_INTERVAL_SECONDS`) and once at the end: `host:port` or a URL;
    /// `/v1/metrics` is added when the path lacks it.
    #[arg(long = "otel-url", value_name = "URL", help_heading = "Output")]
    pub otel_url: Option<String>,

    /// What goes to --otel-url: `metrics` (per-request histograms named by the GenAI
    /// semantic conventions), `timing` (per-phase request counters), `default` (both) or
    /// `none`. Several may be given.
    #[arg(long = "stream", num_args = 1.., value_name = "DOMAIN", help_heading = "Output")]
    pub stream: Vec<String>,

    /// Resource attributes added to every metric sent to --otel-url, as `key=value` pairs
    /// (comma-separated or repeated).
    #[arg(
        long = "otel-resource-attributes",
        num_args = 1..,
        value_name = "KEY=VALUE",
        help_heading = "Output"
    )]
    pub otel_resource_attributes: Vec<String>,

    /// `gen_ai.provider.name` of the metrics sent to --otel-url (default: inferred from the
    /// --url host, e.g. `openai`, else `_OTHER`).
    #[arg(long = "gen-ai-provider", value_name = "NAME", help_heading = "Output")]
    pub gen_ai_provider: Option<String>,
}
