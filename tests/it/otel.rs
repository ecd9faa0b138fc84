//! `--otel-url`: the live metrics reach a real OTLP/HTTP receiver, decoded there with the
//! official protobuf definitions (tests/otlp_receiver.py, PyPI `opentelemetry-proto`), and
//! agree with the run's own summary.
//!
//! The receiver needs a Python with `opentelemetry-proto`: `AIPERF_OTEL_PYTHON`, else the
//! venv .ci/run keeps under `$AIPERF_CI_CACHE` (or ~/.cache/aiperf-ci)/otel-proto-1.45.2. Without
//! one the tests say so and pass, unless `AIPERF_REQUIRE_OTEL=1` (CI).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

use crate::common::{self, BIN, MockChild};

fn python() -> Option<PathBuf> {
    let cached = || {
        let cache = std::env::var_os("AIPERF_CI_CACHE")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("aiperf-ci"))
            })
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/aiperf-ci"))
            })?;
        Some(cache.join("otel-proto-1.45.2/bin/python"))
    };
    let python = std::env::var_os("AIPERF_OTEL_PYTHON")
        .map(PathBuf::from)
        .or_else(cached)
        .filter(|p| p.is_file());
    if python.is_none() {
        assert!(
            std::env::var("AIPERF_REQUIRE_OTEL").as_deref() != Ok("1"),
            "AIPERF_REQUIRE_OTEL=1 but no Python with opentelemetry-proto (see .ci/run)"
        );
        eprintln!("skipped: no Python with opentelemetry-proto (.ci/run makes its venv)");
    }
    python
}

/// The receiver, killed when dropped; each request it decoded is a line of `out`.
struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
}

impl Receiver {
    fn start(python: &Path, dir: &Path) -> Receiver {
        let out = dir.join("otlp.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp_receiver.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(&out)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the OTLP receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("receiver said {line:?}"));
        Receiver { child, port, out }
    }

    /// Every export received, in order.
    fn exports(&self) -> Vec<Value> {
        common::read_jsonl(&self.out)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("profile")
        .args([
            "--model",
            "m",
            "--tokenizer",
            "builtin",
            "--artifact-dir",
            "run",
        ])
        .args(args)
        .current_dir(dir)
        .env("HF_HUB_OFFLINE", "1")
        .env("AIPERF_OTEL_FLUSH_INTERVAL_SECONDS", "0.2")
        .output()
        .expect("run aiperf")
}

/// The metrics of one export, by name.
fn metrics(export: &Value) -> Vec<&Value> {
    export["resources"][0]["scopes"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .collect()
}

fn metric<'a>(export: &'a Value, name: &str) -> Option<&'a Value> {
    metrics(export).into_iter().find(|m| m["name"] == name)
}

/// Count and sum over a histogram's series.
fn totals(h: &Value) -> (u64, f64) {
    let points = h["points"].as_array().unwrap();
    for p in points {
        let buckets: u64 = p["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap())
            .sum();
        assert_eq!(
            buckets,
            p["count"].as_u64().unwrap(),
            "buckets add up to the count: {p}"
        );
        assert_eq!(
            p["buckets"].as_array().unwrap().len(),
            p["bounds"].as_array().unwrap().len() + 1
        );
    }
    (
        points.iter().map(|p| p["count"].as_u64().unwrap()).sum(),
        points.iter().map(|p| p["sum"].as_f64().unwrap()).sum(),
    )
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-12)
}

#[test]
fn live_metrics_reach_the_collector_named_as_aiperf_sends_them() {
    let Some(python) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(&python, tmp.path());
    let mock = MockChild::spawn(&["--ttft", "20", "--itl", "2"]);
    let url = format!("127.0.0.1:{}", receiver.port);
    let out = run(
        tmp.path(),
        &[
            "--url",
            &mock.url,
            "--streaming",
            "--request-count",
            "60",
            "--concurrency",
            "4",
            "--osl",
            "20",
            "--isl",
            "16",
            "--otel-url",
            &url,
            "--otel-resource-attributes",
            "team=perf,deployment.environment=ci",
            "--gen-ai-provider",
            "vllm",
        ],
    );
    let stderr = common::stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("dashboard"),
        "the live board is not a dashboard: {stderr}"
    );
    let summary = common::read_json(&tmp.path().join("run/profile_export_aiperf.json"));
    let requests = summary["request_count"]["avg"].as_f64().unwrap() as u64;
    assert_eq!(requests, 60);

    let exports = receiver.exports();
    assert!(
        exports.len() >= 2,
        "pushed during the run and at the end: {}",
        exports.len()
    );
    for e in &exports {
        assert_eq!(e["path"], "/v1/metrics");
        assert_eq!(e["content_type"], "application/x-protobuf");
    }
    let last = exports.last().unwrap();
    let resource = &last["resources"][0]["attributes"];
    assert_eq!(resource["service.name"], "aiperf");
    assert_eq!(resource["team"], "perf");
    assert_eq!(resource["deployment.environment"], "ci");
    assert_eq!(resource["aiperf.model.name"], "m");
    assert_eq!(resource["aiperf.endpoint.type"], "chat");
    assert!(!resource["aiperf.benchmark.id"].as_str().unwrap().is_empty());
    assert_eq!(last["resources"][0]["scopes"][0]["name"], "aiperf.records");

    // The GenAI spec histograms: one observation per request, in seconds, cumulative.
    let avg_ms = |tag: &str| summary[tag]["avg"].as_f64().unwrap();
    for (name, tag) in [
        ("gen_ai.client.operation.duration", "request_latency"),
        (
            "gen_ai.client.operation.time_to_first_chunk",
            "time_to_first_token",
        ),
        (
            "gen_ai.client.operation.time_per_output_chunk",
            "inter_token_latency",
        ),
    ] {
        let h = metric(last, name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(
            (h["kind"].as_str(), h["unit"].as_str()),
            (Some("histogram"), Some("s"))
        );
        assert_eq!(h["temporality"], 2, "cumulative");
        let (count, sum) = totals(h);
        assert_eq!(count, requests, "{name}");
        let mean_ms = sum / count as f64 * 1e3;
        assert!(
            close(mean_ms, avg_ms(tag), 1e-6),
            "{name}: {mean_ms} ms vs {tag} {}",
            avg_ms(tag)
        );
        let attrs = &h["points"][0]["attrs"];
        assert_eq!(attrs["gen_ai.provider.name"], "vllm");
        assert_eq!(attrs["gen_ai.operation.name"], "chat");
        assert_eq!(attrs["gen_ai.request.model"], "m");
        assert_eq!(attrs["aiperf.benchmark_phase"], "profiling");
        assert_eq!(attrs["aiperf.has_error"], false);
    }
    let ttft = metric(last, "gen_ai.client.operation.time_to_first_chunk").unwrap();
    assert!(
        ttft["points"][0]["min"].as_f64().unwrap() >= 0.019,
        "the mock's 20 ms TTFT"
    );
    let tokens = metric(last, "gen_ai.client.token.usage").unwrap();
    assert_eq!(tokens["unit"], "{token}");
    assert_eq!(tokens["points"][0]["attrs"]["gen_ai.token.type"], "output");
    let (count, sum) = totals(tokens);
    assert_eq!(count, requests);
    let osl = summary["output_sequence_length"]["avg"].as_f64().unwrap();
    assert!(close(sum / count as f64, osl, 1e-9), "{sum} tokens");
    // AIPerf's other record metrics, under their own tags and base units.
    let isl = metric(last, "aiperf.input_sequence_length").expect("aiperf.input_sequence_length");
    assert_eq!(totals(isl).0, requests);
    assert_eq!(
        metric(last, "aiperf.time_to_second_token").unwrap()["unit"],
        "ns"
    );

    // The timing stream: per-phase counters.
    let completed = metric(last, "aiperf.timing.requests.completed").expect("timing counters");
    assert_eq!(
        (completed["kind"].as_str(), completed["monotonic"].as_bool()),
        (Some("sum"), Some(true))
    );
    let profiling = completed["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["attrs"]["aiperf.benchmark_phase"] == "profiling")
        .unwrap();
    assert_eq!(profiling["value"].as_u64(), Some(requests));
    assert!(
        metric(last, "aiperf.timing.requests.errors").is_none(),
        "no error, no series"
    );
    let elapsed = metric(last, "aiperf.timing.phase.elapsed_sec").unwrap();
    assert!(elapsed["points"][0]["value"].as_f64().unwrap() > 0.0);
    // An earlier push saw the run under way.
    let first = &exports[0];
    let early = metric(first, "aiperf.timing.requests.completed")
        .map_or(0, |m| m["points"][0]["value"].as_u64().unwrap_or(0));
    assert!(early < requests, "the first push came before the end");
}

#[test]
fn stream_selects_what_is_sent() {
    let Some(python) = python() else { return };
    let mock = MockChild::spawn(&["--fast"]);
    for (stream, histograms, timing) in [("metrics", true, false), ("timing", false, true)] {
        let tmp = tempfile::tempdir().unwrap();
        let receiver = Receiver::start(&python, tmp.path());
        let url = format!("http://127.0.0.1:{}/", receiver.port);
        let out = run(
            tmp.path(),
            &[
                "--url",
                &mock.url,
                "--request-count",
                "10",
                "--otel-url",
                &url,
                "--stream",
                stream,
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", common::stderr_text(&out));
        let exports = receiver.exports();
        let last = exports.last().expect("an export");
        let names: Vec<&str> = metrics(last)
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names.contains(&"gen_ai.client.operation.duration"),
            histograms,
            "{stream}: {names:?}"
        );
        assert_eq!(
            names.contains(&"aiperf.timing.requests.completed"),
            timing,
            "{stream}: {names:?}"
        );
    }
}

#[test]
fn an_unreachable_collector_is_one_warning_and_the_run_goes_on() {
    let mock = MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    // A port nothing listens on: bound, then freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("127.0.0.1:{port}");
    let out = run(
        tmp.path(),
        &[
            "--url",
            &mock.url,
            "--request-count",
            "20",
            "--otel-url",
            &url,
        ],
    );
    let stderr = common::stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let warned = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("OpenTelemetry export to"))
        .count();
    assert_eq!(warned, 1, "{stderr}");
    let summary = common::read_json(&tmp.path().join("run/profile_export_aiperf.json"));
    assert_eq!(summary["request_count"]["avg"], 20.0);
}

#[test]
fn otel_flags_without_the_url_or_with_bad_values_are_refused() {
    for (args, says) in [
        (&["--stream", "metrics"][..], "--stream requires --otel-url"),
        (
            &["--gen-ai-provider", "x"][..],
            "--gen-ai-provider requires --otel-url",
        ),
        (
            &["--otel-url", "grpc://c:4317"][..],
            "OTLP/gRPC is not supported",
        ),
        (
            &["--otel-url", "c:4318", "--stream", "spans"][..],
            "Invalid --stream value",
        ),
        (
            &[
                "--otel-url",
                "c:4318",
                "--otel-resource-attributes",
                "novalue",
            ][..],
            "expected key=value",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let out = run(tmp.path(), &[&["--url", "127.0.0.1:1"][..], args].concat());
        let stderr = common::stderr_text(&out);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
