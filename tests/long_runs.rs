//! Runs that go on for long, or meet large things, stay bounded: memory measured as the
//! growth between two lengths of the same run (the kernel's peak RSS of the `aiperf`
//! process), and the run ending on time. Scrape intervals are shortened (10 ms) so that a few
//! seconds stand for minutes of a real run.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

mod common;

use common::raw_server::{After, RawRequest, RawServer, Reply, sse_reply, token_event};
use common::{read_json, run_profile_measured};

const MB: f64 = 1024.0 * 1024.0;

/// One test at a time: each measures a process's peak memory and wall time, which the
/// others' processes on two cores would disturb.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// A chat server whose streams take ~40 ms (few requests, so the run's own records hardly
/// grow), and whose `/metrics` is `exposition(n)` at its n-th scrape.
fn server(exposition: impl Fn(u64) -> String + Send + Sync + 'static) -> RawServer {
    let scrapes = AtomicU64::new(0);
    RawServer::start(move |r: &RawRequest| {
        if r.head.starts_with("get /metrics") {
            let text = exposition(scrapes.fetch_add(1, Ordering::Relaxed));
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\n\r\n",
                text.len()
            );
            return Reply::new(
                vec![[head.as_bytes(), text.as_bytes()].concat()],
                After::KeepOpen,
            );
        }
        let events: Vec<String> = ["a", "b", "c"].iter().map(|t| token_event(t)).collect();
        let mut reply = sse_reply(
            "",
            &[events, vec!["data: [DONE]\n\n".into()]].concat(),
            After::KeepOpen,
        );
        reply.gap = Duration::from_millis(10);
        reply
    })
}

struct Run {
    summary: Value,
    server_metrics: Value,
    peak_rss: f64,
    wall: Duration,
}

/// `seconds` of load at concurrency 1 against `url`, scraping its `/metrics` every 10 ms.
fn run_for(url: &str, seconds: u64, dir: &std::path::Path) -> Run {
    let duration = seconds.to_string();
    let args = [
        "--model",
        "m",
        "--tokenizer",
        "builtin",
        "--url",
        url,
        "--streaming",
        "--synthetic-input-tokens-mean",
        "10",
        "--output-tokens-mean",
        "3",
        "--benchmark-duration",
        &duration,
        "--benchmark-grace-period",
        "0",
        "--concurrency",
        "1",
        "--server-metrics-formats",
        "json,csv,jsonl",
        "--artifact-dir",
        dir.to_str().unwrap(),
        "--ui",
        "none",
    ];
    let fast = [("AIPERF_SERVER_METRICS_COLLECTION_INTERVAL", "0.01")];
    let (out, rss, wall) = run_profile_measured(&args, &fast);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    Run {
        summary: read_json(&dir.join("profile_export_aiperf.json")),
        server_metrics: read_json(&dir.join("server_metrics_export.json")),
        peak_rss: rss as f64,
        wall,
    }
}

/// The same server scraped for 2 s and for 8 s: the longer run holds at most `limit_mb` more,
/// however many more scrapes it took; both end on time.
fn scraping_does_not_grow(
    exposition: impl Fn(u64) -> String + Send + Sync + 'static,
    limit_mb: f64,
) -> (Run, Run) {
    let _alone = alone();
    let server = server(exposition);
    let tmp = tempfile::tempdir().unwrap();
    // Each length twice, the lower peak kept: the end of a run (its exports) moves the peak
    // by a few MB from one run to the next on a busy machine.
    let lower = |secs: u64, name: &str| {
        let a = run_for(&server.url, secs, &tmp.path().join(format!("{name}1")));
        let b = run_for(&server.url, secs, &tmp.path().join(format!("{name}2")));
        if a.peak_rss <= b.peak_rss { a } else { b }
    };
    let short = lower(2, "short");
    let long = lower(8, "long");
    let scrapes = |r: &Run| {
        r.server_metrics["summary"]["endpoint_info"]
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap()["total_fetches"]
            .as_u64()
            .unwrap()
    };
    let (a, b) = (scrapes(&short), scrapes(&long));
    // Four times the length, at least twice the scrapes (each run also scrapes before its
    // start and after its end; a loaded machine slows both): scraping kept up in both.
    assert!(
        b >= 2 * a,
        "the long run took {b} scrapes, the short one {a}"
    );
    let growth = (long.peak_rss - short.peak_rss) / MB;
    eprintln!(
        "peak RSS {:.1} MB after {a} scrapes, {:.1} MB after {b}: {growth:+.1} MB",
        short.peak_rss / MB,
        long.peak_rss / MB
    );
    assert!(
        growth <= limit_mb,
        "{growth:.1} MB more for {} more scrapes",
        b - a
    );
    for (r, secs) in [(&short, 2.0), (&long, 8.0)] {
        // Start-up and the end of the run (files, report) take well under a second here;
        // scraping must not make the run late.
        let late = r.wall.as_secs_f64() - secs;
        assert!(
            late < 3.0,
            "a {secs} s run took {:.1} s",
            r.wall.as_secs_f64()
        );
    }
    (short, long)
}

/// A vLLM-shaped exposition of `engines` engines: 8 histograms of 18 buckets and 6 gauges
/// each (about 166 series per engine), every value changing at every scrape.
fn vllm(engines: u64, n: u64) -> String {
    let mut t = String::new();
    for h in 0..8 {
        let name = format!("vllm:histogram_{h}_seconds");
        let _ = writeln!(t, "# HELP {name} A histogram.\n# TYPE {name} histogram");
        for e in 0..engines {
            let l = format!("engine=\"{e}\",model_name=\"m\"");
            for b in 0..17u64 {
                let _ = writeln!(
                    t,
                    "{name}_bucket{{{l},le=\"{}\"}} {}",
                    0.001 * (1u64 << b) as f64,
                    n * (b + 1)
                );
            }
            let _ = writeln!(
                t,
                "{name}_bucket{{{l},le=\"+Inf\"}} {}\n{name}_sum{{{l}}} {}\n{name}_count{{{l}}} {}",
                n * 20,
                n as f64 * 0.37,
                n * 20
            );
        }
    }
    for g in 0..6 {
        let name = format!("vllm:gauge_{g}");
        let _ = writeln!(t, "# HELP {name} A gauge.\n# TYPE {name} gauge");
        for e in 0..engines {
            let _ = writeln!(
                t,
                "{name}{{engine=\"{e}\",model_name=\"m\"}} {}",
                (n * 7 + e) as f64 / 3.0
            );
        }
    }
    t
}

/// `count` gauges of one family, one label set each (one per adapter); at each scrape one
/// in a hundred changes.
fn adapters(count: u64, n: u64) -> String {
    let mut t = String::from(
        "# HELP adapter_requests Requests per adapter.\n# TYPE adapter_requests gauge\n",
    );
    for i in 0..count {
        let changes = (i + n).is_multiple_of(100);
        let _ = writeln!(
            t,
            "adapter_requests{{adapter=\"lora-{i:05}\"}} {}",
            i % 7 + if changes { n } else { 0 }
        );
    }
    t
}

#[test]
fn scraping_a_thousand_vllm_series_does_not_grow_with_the_run() {
    // 6 engines: 996 Prometheus series.
    let (_, long) = scraping_does_not_grow(|n| vllm(6, n), 5.0);
    // The summaries are still whole: every histogram of every engine, its count the rise
    // over the profiling window.
    let m = &long.server_metrics["metrics"]["vllm:histogram_3_seconds"];
    assert_eq!(m["series"].as_array().unwrap().len(), 6);
    assert!(m["series"][0]["stats"]["count"].as_f64().unwrap() > 0.0);
    assert!(long.summary["request_count"]["avg"].as_f64().unwrap() > 10.0);
}

#[test]
fn scraping_five_thousand_gauges_does_not_grow_and_the_run_ends_on_time() {
    let (_, long) = scraping_does_not_grow(|n| adapters(5_000, n), 5.0);
    let series = long.server_metrics["metrics"]["adapter_requests"]["series"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(series, 5_000);
}

#[test]
fn ten_thousand_series_are_read_in_time_and_all_summarised() {
    let _alone = alone();
    let server = server(|n| adapters(10_000, n));
    let tmp = tempfile::tempdir().unwrap();
    let run = run_for(&server.url, 3, tmp.path());
    let summary = &run.server_metrics["metrics"]["adapter_requests"];
    assert_eq!(summary["series"].as_array().unwrap().len(), 10_000);
    let fetches = run.server_metrics["summary"]["endpoint_info"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()["total_fetches"]
        .as_u64()
        .unwrap();
    // Scraped again and again: 20-30 times on a quiet machine, fewer when it is loaded
    // (a parse of this size took 1.7 s before it was indexed: 2 scrapes).
    assert!(fetches >= 8, "{fetches} scrapes in 3 s");
    assert!(run.wall.as_secs_f64() < 6.0, "{:?}", run.wall);
}

/// A server whose stream is one SSE event of `bytes` bytes of content (one long "word", a
/// server repeating a character), sent in 64 KB chunks, then `[DONE]`.
fn one_big_event(bytes: usize) -> RawServer {
    RawServer::start(move |_| {
        let event = token_event(&"x".repeat(bytes));
        let mut pieces = vec![
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                .to_vec(),
        ];
        pieces.extend(
            event
                .as_bytes()
                .chunks(64 * 1024)
                .map(common::raw_server::chunk),
        );
        pieces.push(common::raw_server::chunk(b"data: [DONE]\n\n"));
        pieces.push(common::raw_server::LAST_CHUNK.to_vec());
        Reply::new(pieces, After::KeepOpen)
    })
}

fn one_request_peak(url: &str, dir: &std::path::Path) -> f64 {
    let args = [
        "--model",
        "m",
        "--tokenizer",
        "builtin",
        "--url",
        url,
        "--streaming",
        "--request-count",
        "1",
        "--no-server-metrics",
        "--artifact-dir",
        dir.to_str().unwrap(),
        "--ui",
        "none",
    ];
    let (rss, summary) = peak_and_summary(&args, dir);
    assert_eq!(summary["request_count"]["avg"], 1.0, "{summary}");
    rss
}

/// `aiperf profile <args>` that must succeed: its peak RSS and the summary it wrote in `dir`.
fn peak_and_summary(args: &[&str], dir: &std::path::Path) -> (f64, serde_json::Value) {
    let (out, rss, _) = run_profile_measured(args, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        rss as f64,
        read_json(&dir.join("profile_export_aiperf.json")),
    )
}

#[test]
fn one_large_event_costs_a_small_multiple_of_its_size() {
    let _alone = alone();
    let tmp = tempfile::tempdir().unwrap();
    let size = 16 << 20;
    let small = one_request_peak(&one_big_event(100).url, &tmp.path().join("small"));
    let big = one_request_peak(&one_big_event(size).url, &tmp.path().join("big"));
    let multiple = (big - small) / size as f64;
    eprintln!(
        "peak RSS {:.1} MB for a 100-byte event, {:.1} MB for a 16 MB one: {multiple:.1}x the event",
        small / MB,
        big / MB
    );
    // The event's bytes, its text in the record and the read buffer: a few times its size,
    // not the ~40 times that merging it as one token piece once took.
    assert!(multiple < 4.0, "{multiple:.1}x");
}

/// Peak RSS of `count` text requests at concurrency 512 against `url` (a zero-latency mock).
fn requests_peak(url: &str, count: u64, dir: &std::path::Path) -> f64 {
    let count = count.to_string();
    let args = [
        "--model",
        "m",
        "--tokenizer",
        "builtin",
        "--url",
        url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--synthetic-input-tokens-mean",
        "10",
        "--output-tokens-mean",
        "16",
        "--extra-inputs",
        "ignore_eos:true",
        "--concurrency",
        "512",
        "--request-count",
        &count,
        "--no-server-metrics",
        "--artifact-dir",
        dir.to_str().unwrap(),
        "--ui",
        "none",
    ];
    let (rss, summary) = peak_and_summary(&args, dir);
    assert_eq!(
        summary["request_count"]["avg"],
        count.parse::<f64>().unwrap()
    );
    rss
}

#[test]
fn many_more_requests_hold_little_more_memory() {
    let _alone = alone();
    let mock = common::MockChild::spawn(&["--fast", "--workers", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    // Both past the lengths where the end of the run's buffers (curves held, sorts'
    // runs, the report's series) reach their caps: from there only what each request
    // leaves behind adds up.
    let (few, many) = (50_000, 150_000);
    let short = requests_peak(&mock.url, few, &tmp.path().join("short"));
    let long = requests_peak(&mock.url, many, &tmp.path().join("long"));
    let per_request = (long - short) / (many - few) as f64;
    eprintln!(
        "peak RSS {:.1} MB for {few} requests, {:.1} MB for {many}: {per_request:+.0} bytes per request",
        short / MB,
        long / MB
    );
    // Each request's values go to temporary files as the run goes, and a few bytes each
    // stay. Holding them took ~700 bytes a request; the bound leaves room for the
    // allocator's noise (a few MB from one run to the next).
    assert!(per_request < 200.0, "{per_request:.0} bytes per request");
}
