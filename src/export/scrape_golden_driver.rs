//! How the golden tests of `scrape_golden_tests` run a recorded scrape sequence through the
//! summaries and the exports.

use std::sync::Arc;

use serde_json::Value;

use super::scrape_golden_tests::Recorded;
use crate::clock::Clock;
use crate::metrics::MetricsSummary;
use crate::metrics::server_metrics::{self, Window};
use crate::scrape::{EndpointLog, Scrape, parse};

pub(crate) struct Exports {
    pub json: String,
    pub csv: String,
    pub jsonl: String,
    pub console: String,
}

fn logs(seq: &[(String, Vec<Recorded>)]) -> Vec<EndpointLog> {
    seq.iter()
        .map(|(url, scrapes)| EndpointLog {
            url: url.clone(),
            scrapes: scrapes
                .iter()
                .map(|r| Scrape {
                    sent_ns: r.sent_ns,
                    first_byte_ns: r.first_byte_ns,
                    done_ns: r.done_ns,
                    families: Arc::new(parse::parse(&r.text)),
                })
                .collect(),
            failures: 1,
            first_error: Some("HTTP 503".into()),
        })
        .collect()
}

pub(crate) fn server_exports(
    seq: &[(String, Vec<Recorded>)],
    warmup: Option<Window>,
    profiling: Window,
    clock: Clock,
    input_config: Value,
    client: &MetricsSummary,
) -> Exports {
    let logs = logs(seq);
    let profiling_summary = server_metrics::summarise(&logs, profiling);
    let warmup_summary = warmup.map(|w| server_metrics::summarise(&logs, w));
    let configured: Vec<String> = seq.iter().map(|(u, _)| u.clone()).collect();
    let run = super::ServerMetricsRun {
        benchmark_id: "golden",
        clock,
        configured: &configured,
        logs: &logs,
        profiling_window: profiling,
        warmup_window: warmup,
        profiling: &profiling_summary,
        warmup: warmup_summary.as_deref(),
        input_config,
    };
    let dir = tempfile::tempdir().unwrap();
    let formats = super::ServerMetricsFormats {
        json: true,
        csv: true,
        jsonl: true,
    };
    super::write_server_metrics(dir.path(), "sm", formats, &run).unwrap();
    let read = |ext: &str| std::fs::read_to_string(dir.path().join(format!("sm.{ext}"))).unwrap();
    Exports {
        json: read("json"),
        csv: read("csv"),
        jsonl: read("jsonl"),
        console: super::render_server_metrics(&profiling_summary, client, 120),
    }
}

pub(crate) fn gpu_exports(
    seq: &[(String, Vec<Recorded>)],
    window_ns: (u64, u64),
    clock: Clock,
) -> Exports {
    let logs = logs(seq);
    let t = crate::metrics::gpu_telemetry::summarize(&logs, |_| false, window_ns, clock);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpu.jsonl");
    super::gpu_telemetry::write_jsonl(&path, &t).unwrap();
    let data = super::gpu_telemetry::telemetry_data(&t);
    Exports {
        json: serde_json::to_string_pretty(&data).unwrap(),
        csv: super::gpu_telemetry::render_csv(&t),
        jsonl: std::fs::read_to_string(&path).unwrap(),
        console: super::gpu_telemetry::render_console(&t, Some(12345.0), 120),
    }
}
