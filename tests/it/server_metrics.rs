//! Server metrics end to end: `aiperf profile` scraping the mock's `/metrics` (counters equal
//! to the run's own token counts), servers without `/metrics` or with one that hangs, and
//! `--no-server-metrics`.

use crate::common;
use crate::common::Profile;

use std::path::Path;
use std::time::{Duration, Instant};

use common::raw_server::{After, RawRequest, RawServer, Reply, sse_reply, token_event};
use common::{read_json, read_jsonl, stderr_text};
use serde_json::Value;

fn profile_in(dir: &Path, args: &[&str]) -> std::process::Output {
    Profile::new("org/model")
        .artifact_dir("out")
        .args(&["--streaming"])
        .args(args)
        .run_in(dir)
}

/// The series' stats of `name` (one series expected).
fn stats<'a>(doc: &'a Value, section: &str, name: &str) -> &'a Value {
    let series = doc[section][name]["series"]
        .as_array()
        .unwrap_or_else(|| panic!("{name} missing in {section}"));
    assert_eq!(series.len(), 1, "{name}: {series:?}");
    &series[0]["stats"]
}

/// Sum of a per-record metric over one phase's records.
fn phase_sum(records: &[Value], phase: &str, metric: &str) -> f64 {
    records
        .iter()
        .filter(|r| r["metadata"]["benchmark_phase"] == phase)
        .map(|r| r["metrics"][metric]["value"].as_f64().unwrap())
        .sum()
}

#[test]
fn mock_metrics_match_the_runs_own_token_counts_and_the_fidelity_line_is_printed() {
    let tmp = tempfile::tempdir().unwrap();
    let out = profile_in(
        tmp.path(),
        &[
            "--mock-server",
            "--request-count",
            "12",
            "--concurrency",
            "3",
            "--warmup-request-count",
            "4",
            "--isl",
            "40",
            "--osl",
            "12",
            "--image-width-mean",
            "64",
            "--image-height-mean",
            "64",
            "--profile-export-prefix",
            "run1",
        ],
    );
    let stderr = stderr_text(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let dir = tmp.path().join("out");
    assert!(dir.join("run1_server_metrics.csv").exists());
    assert!(!dir.join("run1_server_metrics.jsonl").exists());
    let doc = read_json(&dir.join("run1_server_metrics.json"));
    let records = read_jsonl(&dir.join("run1.jsonl"));
    assert_eq!(doc["schema_version"], "1.1");
    let url = doc["summary"]["endpoints_configured"][0].as_str().unwrap();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/metrics"),
        "{url}"
    );
    assert_eq!(doc["summary"]["endpoints_successful"][0], url);

    // Counters over the profiling window equal what the client was charged, exactly;
    // the warmup's own window likewise.
    for (section, phase, n) in [
        ("metrics", "profiling", 12.0),
        ("warmup_metrics", "warmup", 4.0),
    ] {
        let prompt = phase_sum(&records, phase, "usage_prompt_tokens");
        let completion = phase_sum(&records, phase, "usage_completion_tokens");
        assert!(prompt > 0.0);
        assert_eq!(
            stats(&doc, section, "vllm:prompt_tokens")["total"].as_f64(),
            Some(prompt),
            "{section}"
        );
        assert_eq!(
            stats(&doc, section, "vllm:generation_tokens")["total"].as_f64(),
            Some(completion),
            "{section}"
        );
        for h in [
            "vllm:time_to_first_token_seconds",
            "vllm:e2e_request_latency_seconds",
        ] {
            // A count is a whole number, as AIPerf writes it.
            assert_eq!(
                stats(&doc, section, h)["count"].as_u64(),
                Some(n as u64),
                "{section} {h}"
            );
        }
    }
    // 64x64 images cost Qwen2-VL's 4 tokens each... at least some image tokens were counted.
    assert!(
        stats(&doc, "metrics", "vllm:mm_image_tokens")["total"]
            .as_f64()
            .unwrap()
            > 0.0
    );

    // The server stamps its TTFT before the client can see the token.
    let summary = read_json(&dir.join("run1.json"));
    let client_ttft_ms = summary["time_to_first_token"]["avg"].as_f64().unwrap();
    let ttft = stats(&doc, "metrics", "vllm:time_to_first_token_seconds");
    let server_ttft_ms = ttft["sum"].as_f64().unwrap() / ttft["count"].as_f64().unwrap() * 1e3;
    assert!(
        server_ttft_ms <= client_ttft_ms,
        "server {server_ttft_ms} client {client_ttft_ms}"
    );
    assert!(
        stdout.contains("NVIDIA AIPerf | Server Metrics"),
        "{stdout}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("TTFT client vs server"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("12 requests"), "{line}");
    // The server's p50/p99 are estimated from its buckets: numbers, never NaN.
    assert!(line.contains("p50~") && !line.contains("NaN"), "{line}");
    assert!(
        stdout.contains("Request latency client vs server"),
        "{stdout}"
    );

    // AIPerf's names and units: counters without `_total` (as Prometheus' parser names
    // the family), request gauges in `requests`, histogram buckets beside the stats with
    // every estimate from p1 to p99.
    let metrics = doc["metrics"].as_object().unwrap();
    assert!(
        !metrics.keys().any(|k| k.ends_with("_total")),
        "{metrics:?}"
    );
    assert_eq!(
        doc["metrics"]["vllm:num_requests_running"]["unit"],
        "requests"
    );
    assert_eq!(doc["metrics"]["vllm:request_success"]["unit"], "requests");
    assert_eq!(doc["metrics"]["vllm:kv_cache_usage_perc"]["unit"], "ratio");
    let series = &doc["metrics"]["vllm:time_to_first_token_seconds"]["series"][0];
    let buckets = series["buckets"].as_object().unwrap();
    assert_eq!(buckets["+Inf"].as_u64(), Some(12));
    assert!(series["stats"].get("buckets").is_none());
    for p in ["p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"] {
        assert!(
            series["stats"][format!("{p}_estimate")].is_f64(),
            "{p}: {series}"
        );
    }

    let csv = std::fs::read_to_string(dir.join("run1_server_metrics.csv")).unwrap();
    assert!(
        csv.starts_with(
            "# AIPerf Server Metrics Export (CSV)\n# aiperf_version: 0.13.0\n# schema_version: 1.0\n# benchmark_id: "
        ),
        "{csv}"
    );
    assert!(csv.contains("\nEndpoint,Type,Metric,Unit,avg,min,max,std,p1,"));
    assert!(csv.contains("\nEndpoint,Type,Metric,Unit,total,rate,"));
    assert!(csv.contains(",model_name,Description,buckets\n"), "{csv}");
    // Figures to 4 decimals, counts whole.
    let prompt_row = csv
        .lines()
        .find(|l| l.contains(",counter,vllm:prompt_tokens,tokens,"))
        .unwrap_or_else(|| panic!("{csv}"));
    let total = prompt_row.split(',').nth(4).unwrap();
    assert!(total.ends_with(".0000"), "{prompt_row}");
    let ttft_row = csv
        .lines()
        .find(|l| l.contains(",histogram,vllm:time_to_first_token_seconds,"))
        .unwrap();
    assert_eq!(ttft_row.split(',').nth(4), Some("12"), "{ttft_row}");
    assert!(ttft_row.ends_with("+Inf=12"), "{ttft_row}");
}

#[test]
fn jsonl_has_one_line_per_changed_scrape_on_the_wall_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let out = profile_in(
        tmp.path(),
        &[
            "--mock-server",
            "--request-count",
            "4",
            "--server-metrics-formats",
            "jsonl",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let dir = tmp.path().join("out");
    assert!(!dir.join("server_metrics_export.json").exists());
    let lines = read_jsonl(&dir.join("server_metrics_export.jsonl"));
    assert!(lines.len() >= 2, "{lines:?}");
    let first = lines[0]["timestamp_ns"].as_u64().unwrap();
    assert!(first > 1_600_000_000_000_000_000, "{first}");
    for w in lines.windows(2) {
        assert_ne!(w[0]["metrics"], w[1]["metrics"], "duplicate scrape written");
    }
    assert!(lines[0]["metrics"]["vllm:num_requests_running"].is_array());
}

/// A chat server whose `/metrics` answers with `metrics` (or a chat stream otherwise).
fn chat_server(metrics: impl Fn() -> Reply + Send + Sync + 'static) -> RawServer {
    RawServer::start(move |r: &RawRequest| {
        if r.head.starts_with("get /metrics") {
            return metrics();
        }
        let mut events: Vec<String> = ["a", "b"].iter().map(|t| token_event(t)).collect();
        events.push("data: [DONE]\n\n".into());
        sse_reply("", &events, After::KeepOpen)
    })
}

fn metrics_gets(server: &RawServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.head.starts_with("get /metrics"))
        .count()
}

#[test]
fn a_server_without_metrics_gives_one_info_line_and_no_file() {
    let server = chat_server(|| {
        Reply::new(
            vec![b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_vec()],
            After::KeepOpen,
        )
    });
    let tmp = tempfile::tempdir().unwrap();
    let out = profile_in(tmp.path(), &["--url", &server.url, "--request-count", "4"]);
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("metrics")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("INFO")
            && lines[0].contains(&format!(
                "Server metrics not available at {}/metrics: HTTP 404",
                server.url
            )),
        "{}",
        lines[0]
    );
    assert!(!tmp.path().join("out/server_metrics_export.json").exists());
    assert!(!tmp.path().join("out/server_metrics_export.csv").exists());
    assert_eq!(metrics_gets(&server), 1, "probed once, then left alone");
}

#[test]
fn a_metrics_endpoint_that_hangs_delays_the_run_by_the_scrape_timeout_at_most() {
    let server = chat_server(|| {
        std::thread::sleep(Duration::from_secs(120));
        Reply::new(Vec::new(), After::Close)
    });
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = profile_in(tmp.path(), &["--url", &server.url, "--request-count", "4"]);
    let took = started.elapsed();
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("Server metrics not available at")
            && stderr.contains("no answer within 5.0 s"),
        "{stderr}"
    );
    // 5 s of probe timeout plus a short run, with room for a loaded machine.
    assert!(took < Duration::from_secs(25), "{took:?}");
    assert!(took >= Duration::from_secs(5), "{took:?}");
}

#[test]
fn no_server_metrics_sends_no_scrape_and_writes_nothing() {
    let server = chat_server(|| panic!("/metrics must not be asked for"));
    let tmp = tempfile::tempdir().unwrap();
    let out = profile_in(
        tmp.path(),
        &[
            "--url",
            &server.url,
            "--request-count",
            "3",
            "--no-server-metrics",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(metrics_gets(&server), 0);
    assert!(server.requests().len() >= 3);
    assert!(!tmp.path().join("out/server_metrics_export.json").exists());
}

#[test]
fn contradicting_or_unsupported_flags_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            vec!["--no-server-metrics", "--server-metrics", "h:9"],
            "--no-server-metrics and --server-metrics",
        ),
        (vec!["--server-metrics-formats", "parquet"], "Parquet"),
    ] {
        let out = profile_in(tmp.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr_text(&out).contains(says), "{}", stderr_text(&out));
    }
}

#[test]
fn a_metrics_endpoint_that_hangs_mid_run_holds_up_the_end_by_one_timeout_at_most() {
    let asked = std::sync::atomic::AtomicUsize::new(0);
    let server = chat_server(move || {
        if asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 1 {
            std::thread::sleep(Duration::from_secs(120));
        }
        let body = "# TYPE up gauge\nup 1\n";
        Reply::new(
            vec![
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
                .into_bytes(),
            ],
            After::KeepOpen,
        )
    });
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = profile_in(tmp.path(), &["--url", &server.url, "--request-count", "4"]);
    let took = started.elapsed();
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("no answer within 5.0 s"), "{stderr}");
    // One timeout at the profiling boundary and one at the end, plus a short run.
    assert!(took < Duration::from_secs(30), "{took:?}");
    // The scrape before the hang is in the files.
    let doc = read_json(&tmp.path().join("out/server_metrics_export.json"));
    assert!(doc["metrics"]["up"].is_object(), "{doc}");
}

/// A `/metrics` reply with `text`.
fn exposition(text: String) -> Reply {
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
        text.len()
    );
    Reply::new(
        vec![[head.as_bytes(), text.as_bytes()].concat()],
        After::KeepOpen,
    )
}

/// A chat server whose `/metrics` is `text(n)` at its n-th scrape; a run of `seconds` against
/// it, scraping every 20 ms. Its exit code, stdout, stderr and the server-metrics JSON.
fn scraped_run(
    text: impl Fn(u64) -> String + Send + Sync + 'static,
    seconds: &str,
) -> (Option<i32>, String, String, Value) {
    let n = std::sync::atomic::AtomicU64::new(0);
    let server =
        chat_server(move || exposition(text(n.fetch_add(1, std::sync::atomic::Ordering::Relaxed))));
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(common::BIN)
        .args([
            "profile",
            "-m",
            "m",
            "--tokenizer",
            "builtin",
            "--streaming",
        ])
        .args(["--url", &server.url, "--concurrency", "2"])
        .args([
            "--benchmark-duration",
            seconds,
            "--benchmark-grace-period",
            "0",
        ])
        .args(["--artifact-dir", tmp.path().join("out").to_str().unwrap()])
        .env("HF_HUB_OFFLINE", "1")
        .env("AIPERF_SERVER_METRICS_COLLECTION_INTERVAL", "0.02")
        .output()
        .unwrap();
    let doc = read_json(&tmp.path().join("out/server_metrics_export.json"));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr_text(&out),
        doc,
    )
}

#[test]
fn counters_that_restart_are_counted_on_with_one_warning() {
    // Scrape 25 comes from a restarted server: every counter starts again from zero. Each
    // scrape adds 10 tokens and 2 requests of exactly 20 ms.
    let (code, stdout, stderr, doc) = scraped_run(
        |n| {
            let k = if n < 25 { n } else { n - 25 };
            format!(
                "# TYPE tokens_served counter\ntokens_served {}\n\
                 # TYPE vllm:time_to_first_token_seconds histogram\n\
                 vllm:time_to_first_token_seconds_bucket{{le=\"0.05\"}} {c}\n\
                 vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {c}\n\
                 vllm:time_to_first_token_seconds_sum {}\nvllm:time_to_first_token_seconds_count {c}\n",
                10 * k,
                0.02 * (2 * k) as f64,
                c = 2 * k
            )
        },
        "2",
    );
    assert_eq!(code, Some(0), "{stderr}");
    let t = stats(&doc, "metrics", "tokens_served");
    assert!(t["total"].as_f64().unwrap() > 240.0, "{t}");
    assert!(t["rate"].as_f64().unwrap() > 0.0, "{t}");
    let ttft = stats(&doc, "metrics", "vllm:time_to_first_token_seconds");
    assert!(
        (ttft["avg"].as_f64().unwrap() - 0.02).abs() < 1e-9,
        "{ttft}"
    );
    // The client-vs-server line: the server's mean of exactly 20 ms.
    assert!(stdout.contains("server avg 20.00"), "{stdout}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("went down")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("tokens_served"), "{}", warnings[0]);
}

#[test]
fn histograms_that_contradict_themselves_and_nan_values_are_left_out() {
    let (code, stdout, stderr, doc) = scraped_run(
        |n| {
            format!(
                "# TYPE vllm:e2e_request_latency_seconds histogram\n\
                 vllm:e2e_request_latency_seconds_bucket{{le=\"0.1\"}} {}\n\
                 vllm:e2e_request_latency_seconds_bucket{{le=\"1\"}} {}\n\
                 vllm:e2e_request_latency_seconds_bucket{{le=\"+Inf\"}} {}\n\
                 vllm:e2e_request_latency_seconds_sum {}\nvllm:e2e_request_latency_seconds_count {}\n\
                 # TYPE vllm:time_to_first_token_seconds histogram\n\
                 vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {n}\n\
                 vllm:time_to_first_token_seconds_sum NaN\nvllm:time_to_first_token_seconds_count {n}\n\
                 # TYPE g gauge\ng {}\n",
                3 * n,
                2 * n,
                3 * n,
                0.5 * n as f64,
                3 * n,
                if n % 2 == 0 {
                    "NaN".to_string()
                } else {
                    n.to_string()
                }
            )
        },
        "1",
    );
    assert_eq!(code, Some(0), "{stderr}");
    // Buckets that go down (0.1 holds more than 1) and a NaN sum: refused, with one warning.
    for name in [
        "vllm:e2e_request_latency_seconds",
        "vllm:time_to_first_token_seconds",
    ] {
        assert!(doc["metrics"].get(name).is_none(), "{name}: {doc}");
    }
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("contradict"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    // The gauge's NaN samples are skipped: its figures are numbers.
    let g = stats(&doc, "metrics", "g");
    assert!(g["avg"].as_f64().unwrap().is_finite(), "{g}");
    assert!(!stdout.contains("NaN"), "{stdout}");
}
