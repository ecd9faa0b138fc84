//! The unit of a server metric, inferred as AIPerf 0.13 infers it (the same strings in the
//! same order of precedence): a 0-1 or 0-100 scale stated in the help text, then a unit
//! stated there ("(in MiB)", "in seconds", "(tokens/s)"), then the name's suffix, then
//! `num_requests_` anywhere in the name. Names are the exported ones (a counter without
//! `_total`).

use std::sync::LazyLock;

use fancy_regex::Regex;

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid pattern")
}

/// "(0-1)", "0.0-1.0", "range 0 to 1", "1 means 100 percent".
static RATIO_SCALE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\(0(?:\.0)?\s*(?:[-–—]+|to)\s*1(?:\.0)?\)|\b0(?:\.0)?\s*(?:[-–—]+|to)\s*1(?:\.0)?\b|\brange\s+0(?:\.0)?\s*(?:[-–—]+|to)\s*1(?:\.0)?\b|(?:\b|\()1(?:\.0)?\s*(?:means|is|equals?|==?)\s*100\s*(?:%|percent)",
    )
});

/// "(0-100)", "range 0-100", "0-100%".
static PERCENT_SCALE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\(0(?:\.0)?\s*(?:[-–—]+|to)\s*100(?:\.0)?\)|\brange\s+0\s*(?:[-–—]+|to)\s*100\b|\b0\s*(?:[-–—]+|to)\s*100\s*%",
    )
});

/// "(in MiB)": the tag is matched exactly (mJ is not MJ).
static IN_TAG: LazyLock<Regex> = LazyLock::new(|| regex(r"\(in\s+([^\s)]+)\)"));

const TAGS: [(&str, &str); 30] = [
    ("MiB", "megabytes"),
    ("GiB", "gigabytes"),
    ("KiB", "kilobytes"),
    ("B", "bytes"),
    ("MB", "megabytes"),
    ("GB", "gigabytes"),
    ("KB", "kilobytes"),
    ("TB", "terabytes"),
    ("C", "celsius"),
    ("°C", "celsius"),
    ("F", "fahrenheit"),
    ("°F", "fahrenheit"),
    ("K", "kelvin"),
    ("Hz", "hertz"),
    ("MHz", "megahertz"),
    ("GHz", "gigahertz"),
    ("W", "watt"),
    ("mW", "milliwatt"),
    ("J", "joule"),
    ("mJ", "millijoule"),
    ("MJ", "megajoule"),
    ("s", "seconds"),
    ("sec", "seconds"),
    ("ms", "milliseconds"),
    ("ns", "nanoseconds"),
    ("us", "microseconds"),
    ("µs", "microseconds"),
    ("GB/s", "gb/s"),
    ("MB/s", "mb/s"),
    ("%", "percent"),
];

/// Phrases of the help text, tried in order.
static PHRASES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (r"(?:\bin\s+|\()seconds?(?:\b|\))", "seconds"),
        (
            r"(?:\bin\s+|\()(?:milliseconds?|ms)(?:\b|\))",
            "milliseconds",
        ),
        (r"(?:\bin\s+|\()(?:nanoseconds?|ns)(?:\b|\))", "nanoseconds"),
        (r"(?:\bin\s+|\()bytes?(?:\b|\))", "bytes"),
        (r"(?:\bin\s+|\()GB/s(?:\b|\))", "gb/s"),
        (r"(?:\bin\s+|\()MB/s(?:\b|\))", "mb/s"),
        (
            r"(?:\bin\s+|\()tokens?/s(?:ec(?:ond)?)?(?:\b|\))",
            "tokens/s",
        ),
        (
            r"(?:\bin\s+|\()requests?/s(?:ec(?:ond)?)?(?:\b|\))",
            "requests/s",
        ),
        (r"\bin\s+tokens?\b", "tokens"),
    ]
    .into_iter()
    .map(|(p, unit)| (regex(&format!("(?i){p}")), unit))
    .collect()
});

/// Name suffixes, longest first when matched.
const SUFFIXES: [(&str, &str); 35] = [
    ("_seconds", "seconds"),
    ("_seconds_total", "seconds"),
    ("_milliseconds", "milliseconds"),
    ("_ms", "milliseconds"),
    ("_ms_total", "milliseconds"),
    ("_nanoseconds", "nanoseconds"),
    ("_ns", "nanoseconds"),
    ("_ns_total", "nanoseconds"),
    ("_bytes", "bytes"),
    ("_kilobytes", "kilobytes"),
    ("_megabytes", "megabytes"),
    ("_gigabytes", "gigabytes"),
    ("_bytes_total", "bytes"),
    ("_total", "count"),
    ("_count", "count"),
    ("_tokens", "tokens"),
    ("_tokens_total", "tokens"),
    ("_requests", "requests"),
    ("_requests_total", "requests"),
    ("request_success", "requests"),
    ("_errors", "errors"),
    ("_errors_total", "errors"),
    ("_error_count", "errors"),
    ("_error_count_total", "errors"),
    ("_reqs", "requests"),
    ("_blocks", "blocks"),
    ("_blocks_total", "blocks"),
    ("_block_count", "blocks"),
    ("_gb_s", "gb/s"),
    ("_ratio", "ratio"),
    ("_percent", "percent"),
    ("_perc", "percent"),
    ("_celsius", "celsius"),
    ("_joules", "joule"),
    ("_watts", "watt"),
];

fn found(re: &Regex, text: &str) -> bool {
    re.is_match(text).unwrap_or(false)
}

/// The unit of the metric `name` with help text `help`, if one can be told.
pub fn unit_of(name: &str, help: &str) -> Option<&'static str> {
    if found(&RATIO_SCALE, help) {
        return Some("ratio");
    }
    if found(&PERCENT_SCALE, help) {
        return Some("percent");
    }
    if let Ok(Some(c)) = IN_TAG.captures(help) {
        let tag = c.get(1).map_or("", |m| m.as_str());
        if let Some((_, unit)) = TAGS.iter().find(|(t, _)| *t == tag) {
            return Some(unit);
        }
    }
    if let Some((_, unit)) = PHRASES.iter().find(|(re, _)| found(re, help)) {
        return Some(unit);
    }
    let lower = name.to_ascii_lowercase();
    SUFFIXES
        .iter()
        .filter(|(s, _)| lower.ends_with(s))
        .max_by_key(|(s, _)| s.len())
        .map(|(_, unit)| *unit)
        .or_else(|| lower.contains("num_requests_").then_some("requests"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_of_vllm_llama_cpp_and_dcgm_metrics() {
        let cases = [
            (
                "vllm:generation_tokens",
                "Number of generation tokens processed.",
                Some("tokens"),
            ),
            (
                "vllm:request_success",
                "Count of successfully processed requests.",
                Some("requests"),
            ),
            (
                "vllm:num_requests_running",
                "Number of requests in model execution batches.",
                Some("requests"),
            ),
            (
                "vllm:kv_cache_usage_perc",
                "KV-cache usage. 1 means 100 percent usage.",
                Some("ratio"),
            ),
            (
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
                Some("seconds"),
            ),
            (
                "vllm:num_preemptions",
                "Cumulative number of preemption from the engine.",
                None,
            ),
            (
                "llamacpp:prompt_tokens_seconds",
                "Average prompt throughput in tokens/s.",
                Some("tokens/s"),
            ),
            (
                "llamacpp:prompt_seconds",
                "Prompt process time",
                Some("seconds"),
            ),
            (
                "llamacpp:kv_cache_usage_ratio",
                "KV-cache usage. 1 = 100% usage",
                Some("ratio"),
            ),
            (
                "llamacpp:requests_processing",
                "Number of requests processing.",
                None,
            ),
            (
                "DCGM_FI_DEV_FB_USED",
                "Framebuffer memory used (in MiB).",
                Some("megabytes"),
            ),
            (
                "DCGM_FI_DEV_POWER_USAGE",
                "Power draw (in W).",
                Some("watt"),
            ),
            (
                "DCGM_FI_DEV_GPU_UTIL",
                "GPU utilization (in %).",
                Some("percent"),
            ),
            ("x_error_count_total", "", Some("errors")),
            ("cache_hit_percent", "Hit rate (0.0-1.0)", Some("ratio")),
            (
                "latency",
                "Request latency in milliseconds",
                Some("milliseconds"),
            ),
        ];
        for (name, help, want) in cases {
            assert_eq!(unit_of(name, help), want, "{name}: {help}");
        }
    }
}
