//! AIPerf's mapping of its request metrics onto the OpenTelemetry GenAI semantic
//! conventions: names, units, bucket boundaries and attributes, as AIPerf 0.13 sends them.

use crate::metrics::MetricId;
use crate::record::ErrorDetails;

/// `gen_ai.client.operation.duration` (the spec's boundaries, seconds).
const DURATION_BUCKETS: &[f64] = &[
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/// Time to first chunk and time per output chunk (seconds).
const CHUNK_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.14, 0.16, 0.18, 0.2, 0.25, 0.3, 0.35,
    0.4, 0.45, 0.5, 0.75, 1.0, 2.0, 5.0,
];
const TOKEN_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0,
];
/// The OpenTelemetry SDK's default boundaries, which AIPerf's other `aiperf.*` histograms get.
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.0, 5.0, 10.0, 25.0, 50.0, 75.0, 100.0, 250.0, 500.0, 750.0, 1000.0, 2500.0, 5000.0, 7500.0,
    10000.0,
];

/// A request metric with a GenAI spec name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    pub name: &'static str,
    pub unit: &'static str,
    pub buckets: &'static [f64],
    /// Base-unit value times this is the spec-unit value (ns to s).
    pub factor: f64,
    /// `gen_ai.token.type` for token usage; duration metrics get `error.type` instead.
    pub token_type: Option<&'static str>,
}

/// The spec metric `id` is sent as, or `None` for AIPerf's own `aiperf.<tag>`.
pub fn spec(id: MetricId) -> Option<Spec> {
    let duration = |name, buckets| Spec {
        name,
        unit: "s",
        buckets,
        factor: 1e-9,
        token_type: None,
    };
    match id {
        MetricId::RequestLatency => Some(duration(
            "gen_ai.client.operation.duration",
            DURATION_BUCKETS,
        )),
        MetricId::TimeToFirstToken => Some(duration(
            "gen_ai.client.operation.time_to_first_chunk",
            CHUNK_BUCKETS,
        )),
        MetricId::InterTokenLatency => Some(duration(
            "gen_ai.client.operation.time_per_output_chunk",
            CHUNK_BUCKETS,
        )),
        MetricId::OutputTokenCount => Some(Spec {
            name: "gen_ai.client.token.usage",
            unit: "{token}",
            buckets: TOKEN_BUCKETS,
            factor: 1.0,
            token_type: Some("output"),
        }),
        _ => None,
    }
}

/// The unit of a catalogue metric's base-unit values (what AIPerf's registry says: `ns`
/// for times shown in ms).
pub fn base_unit(id: MetricId) -> String {
    let def = id.def();
    match def.unit.strip_prefix("ms") {
        Some(rest) if def.scale == 1e6 => format!("ns{rest}"),
        _ => def.unit.to_string(),
    }
}

/// `gen_ai.operation.name` of an endpoint type (AIPerf: `chat` for the others).
pub fn operation_name(endpoint_type: &str) -> &'static str {
    match endpoint_type {
        "completions" => "text_completion",
        "embeddings" => "embeddings",
        _ => "chat",
    }
}

/// `gen_ai.provider.name`: `--gen-ai-provider`, else from a known API host, else `_OTHER`.
pub fn provider_name(explicit: Option<&str>, urls: &[String]) -> String {
    if let Some(p) = explicit.filter(|p| !p.is_empty()) {
        return p.to_string();
    }
    let ends = |host: &str, suffix: &str| host == suffix || host.ends_with(&format!(".{suffix}"));
    for url in urls {
        let Some(host) = url
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| u.host().map(str::to_ascii_lowercase))
        else {
            continue;
        };
        let provider = match host.as_str() {
            "api.openai.com" => "openai",
            "api.anthropic.com" => "anthropic",
            "api.deepseek.com" => "deepseek",
            "api.mistral.ai" => "mistral_ai",
            "api.cohere.ai" | "api.cohere.com" => "cohere",
            "api.x.ai" => "x_ai",
            "api.groq.com" => "groq",
            "api.perplexity.ai" => "perplexity",
            "generativelanguage.googleapis.com" => "gcp.gemini",
            h if h.ends_with("-aiplatform.googleapis.com") => "gcp.vertex_ai",
            h if h.starts_with("bedrock-runtime.") && h.ends_with(".amazonaws.com") => {
                "aws.bedrock"
            }
            h if h.ends_with(".openai.azure.com") => "azure.ai.openai",
            h if h.ends_with(".services.ai.azure.com") => "azure.ai.inference",
            h if ends(h, "ibm.com") => "ibm.watsonx.ai",
            _ => continue,
        };
        return provider.to_string();
    }
    "_OTHER".to_string()
}

/// `error.type` of a failed request, as AIPerf classifies it.
pub fn error_type(e: &ErrorDetails) -> &'static str {
    match e.code {
        Some(500..=599) => return "http_5xx",
        Some(400..=499) => return "http_4xx",
        _ => {}
    }
    let kind = e.kind.to_ascii_lowercase();
    let message = e.message.to_ascii_lowercase();
    if kind.contains("timeout") {
        "timeout"
    } else if kind.contains("cancel") {
        "cancelled"
    } else if message.contains("json") && (message.contains("parse") || message.contains("decode"))
    {
        "parse_error"
    } else {
        "_OTHER"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_come_from_the_flag_or_the_host() {
        let urls = |u: &str| vec![u.to_string()];
        assert_eq!(
            provider_name(Some("vllm"), &urls("https://api.openai.com")),
            "vllm"
        );
        assert_eq!(
            provider_name(None, &urls("https://api.openai.com/v1")),
            "openai"
        );
        assert_eq!(
            provider_name(None, &urls("https://x.openai.azure.com")),
            "azure.ai.openai"
        );
        assert_eq!(
            provider_name(None, &urls("http://127.0.0.1:8000")),
            "_OTHER"
        );
    }

    #[test]
    fn errors_are_classified() {
        let e = |code, kind: &str, message: &str| ErrorDetails {
            code,
            kind: kind.into(),
            message: message.into(),
        };
        assert_eq!(error_type(&e(Some(503), "x", "")), "http_5xx");
        assert_eq!(error_type(&e(Some(429), "x", "")), "http_4xx");
        assert_eq!(error_type(&e(None, "RequestTimeoutError", "")), "timeout");
        assert_eq!(
            error_type(&e(None, "RequestCancellationError", "")),
            "cancelled"
        );
        assert_eq!(
            error_type(&e(None, "InvalidResponseError", "cannot parse JSON")),
            "parse_error"
        );
        assert_eq!(error_type(&e(None, "StreamError", "reset")), "_OTHER");
    }

    #[test]
    fn times_are_sent_in_ns_or_seconds() {
        assert_eq!(base_unit(MetricId::RequestLatency), "ns");
        let ttft = spec(MetricId::TimeToFirstToken).unwrap();
        assert_eq!((ttft.unit, ttft.factor), ("s", 1e-9));
        assert!(spec(MetricId::InputSequenceLength).is_none());
    }
}
