//! How the golden tests of `scrape_golden_tests` run a recorded scrape sequence through the
//! collectors, the summaries and the exports, as a run does: each scrape handed to the
//! endpoint's sinks as it arrives, the phase windows declared around them.

use std::sync::Arc;

use serde_json::Value;

use super::scrape_golden_tests::Recorded;
use crate::clock::Clock;
use crate::metrics::MetricsSummary;
use crate::metrics::gpu_telemetry::GpuCollector;
use crate::metrics::server_metrics::{self, Window};
use crate::metrics::server_series::{Phase, replay};
use crate::scrape::{EndpointLog, Family, ScrapeEvent, ScrapeSink, parse};

pub(crate) struct Exports {
    pub json: String,
    pub csv: String,
    pub jsonl: String,
    pub console: String,
}

/// The scrapes as the scraper hands them on: parsed, each compared with the one before.
fn events(scrapes: &[Recorded]) -> Vec<ScrapeEvent> {
    let mut previous: Option<Arc<Vec<Family>>> = None;
    scrapes
        .iter()
        .map(|r| {
            let families = Arc::new(parse::parse(&r.text));
            let changed = previous.as_ref() != Some(&families);
            previous = Some(families.clone());
            ScrapeEvent {
                sent_ns: r.sent_ns,
                first_byte_ns: r.first_byte_ns,
                done_ns: r.done_ns,
                families,
                changed,
            }
        })
        .collect()
}

fn log(url: &str, scrapes: &[Recorded]) -> EndpointLog {
    EndpointLog {
        url: url.to_string(),
        scrapes: scrapes.len() as u64,
        failures: 1,
        first_error: Some("HTTP 503".into()),
    }
}

pub(crate) fn server_exports(
    seq: &[(String, Vec<Recorded>)],
    warmup: Option<Window>,
    profiling: Window,
    clock: Clock,
    input_config: Value,
    client: &MetricsSummary,
) -> Exports {
    let dir = tempfile::tempdir().unwrap();
    let mut windows = vec![(Phase::Profiling, profiling)];
    windows.extend(warmup.map(|w| (Phase::Warmup, w)));
    let mut series = Vec::new();
    let mut spools = Vec::new();
    for (i, (url, scrapes)) in seq.iter().enumerate() {
        let events = events(scrapes);
        series.push((replay(url, &events, &windows), log(url, scrapes)));
        let path = dir.path().join(format!(".spool{i}"));
        let mut spool = super::ServerMetricsSpool::new(url, path, clock);
        for e in &events {
            spool.scraped(e);
        }
        spools.extend(spool.close().unwrap());
    }
    let endpoints: Vec<_> = series.iter().map(|(s, _)| s).collect();
    let (profiling_summary, _) = server_metrics::summarise(&endpoints, Phase::Profiling);
    let warmup_summary = warmup.map(|_| server_metrics::summarise(&endpoints, Phase::Warmup).0);
    let configured: Vec<String> = seq.iter().map(|(u, _)| u.clone()).collect();
    let run = super::ServerMetricsRun {
        benchmark_id: "golden",
        clock,
        configured: &configured,
        endpoints: series.iter().map(|(s, l)| (l, &s.times)).collect(),
        jsonl: spools,
        profiling_window: profiling,
        warmup_window: warmup,
        profiling: &profiling_summary,
        warmup: warmup_summary.as_deref(),
        input_config,
    };
    let formats = super::ServerMetricsFormats {
        json: true,
        csv: true,
        jsonl: true,
    };
    super::server_metrics::write_server_metrics(dir.path(), "sm", formats, &run).unwrap();
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
    let dir = tempfile::tempdir().unwrap();
    let mut collected = Vec::new();
    let mut spools = Vec::new();
    for (i, (url, scrapes)) in seq.iter().enumerate() {
        let mut collector = GpuCollector::new(url);
        let mut spool = super::GpuJsonlSpool::new(url, dir.path().join(format!(".g{i}")), clock);
        for e in events(scrapes) {
            collector.scraped(&e);
            spool.scraped(&e);
        }
        spools.extend(spool.close().unwrap());
        collected.push((collector, log(url, scrapes)));
    }
    let pairs: Vec<_> = collected.iter().map(|(c, l)| (c, l)).collect();
    let t = crate::metrics::gpu_telemetry::summarize(&pairs, |_| false, window_ns, clock);
    let path = dir.path().join("gpu.jsonl");
    super::gpu_telemetry::write_jsonl(&path, &spools).unwrap();
    let data = super::gpu_telemetry::telemetry_data(&t);
    Exports {
        json: serde_json::to_string_pretty(&data).unwrap(),
        csv: super::gpu_telemetry::render_csv(&t),
        jsonl: std::fs::read_to_string(&path).unwrap(),
        console: super::gpu_telemetry::render_console(&t, Some(12345.0), 120),
    }
}
