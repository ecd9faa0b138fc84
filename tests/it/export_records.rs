//! Per-request records and the export flags, against the mock server: the JSONL record
//! layout (checked against a fixture of AIPerf's documented keys), `--export-level`,
//! `--profile-export-prefix`, `--export-outputs-json`, the HTTP timing metrics with
//! `--export-http-trace` and `--show-trace-timing`, and `.aiperf_results_ready.json`.

use crate::common;
use crate::common::Profile;

use std::path::Path;
use std::process::Output;

use common::{MockChild, read_json, read_jsonl, stderr_text};
use serde_json::Value;

/// Runs a short streamed profile against `mock` in `cwd`, artifacts in `cwd/run`.
fn profile(cwd: &Path, mock: &MockChild, extra: &[&str]) -> Output {
    Profile::new("m")
        .url(&mock.url)
        .args(&[
            "--streaming",
            "--isl",
            "20",
            "--osl",
            "8",
            "--request-count",
            "12",
        ])
        .args(&["--concurrency", "2", "--random-seed", "7"])
        .artifact_dir("run")
        .args(extra)
        .run_in(cwd)
}

fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status,
        stderr_text(out)
    );
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Where `"key":` first appears in a raw line (parsed objects lose the key order).
fn position(line: &str, key: &str) -> usize {
    line.find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

/// The line's keys match the fixture: the same top-level keys, AIPerf's metadata keys in
/// AIPerf's order with only known additions between them, the listed metrics present.
fn check_layout(line: &str, expected: &Value, extensions: &[String]) {
    let record: Value = serde_json::from_str(line).unwrap();
    let mut top = keys(&record);
    top.sort_by_key(|k| position(line, k));
    assert_eq!(top, strings(&expected["top"]), "{line}");
    let mut aiperf: Vec<String> = keys(&record["metadata"])
        .into_iter()
        .filter(|k| !extensions.contains(k))
        .collect();
    aiperf.sort_by_key(|k| position(line, k));
    assert_eq!(aiperf, strings(&expected["metadata"]), "{line}");
    for m in strings(&expected["metrics"]) {
        assert!(record["metrics"].get(&m).is_some(), "no {m} in {line}");
    }
    if let Some(error) = expected.get("error") {
        let mut found = keys(&record["error"]);
        let from = position(line, "error");
        found.sort_by_key(|k| from + position(&line[from..], k));
        assert_eq!(found, strings(error), "{line}");
    }
}

#[test]
fn record_lines_have_aiperfs_keys_for_successes_and_errors() {
    let fixture = read_json(Path::new("tests/fixtures/jsonl_record_keys.json"));
    let extensions = strings(&fixture["extensions"]);
    let mock = MockChild::spawn(&["--ttft", "5", "--itl", "1", "--error-rate", "40"]);
    let tmp = tempfile::tempdir().unwrap();
    let out = profile(tmp.path(), &mock, &[]);
    succeeded(&out);
    let path = tmp.path().join("run/profile_export.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let (mut errors, mut successes) = (0, 0);
    for line in text.lines() {
        if line.contains("\"error\":") {
            errors += 1;
            check_layout(line, &fixture["error"], &extensions);
        } else {
            successes += 1;
            check_layout(line, &fixture["success"], &extensions);
        }
    }
    assert!(errors > 0 && successes > 0, "seed 7 gives both");
    let records = read_jsonl(&path);
    assert_eq!(records.len(), 12);
    for r in records.iter().filter(|r| r.get("error").is_some()) {
        assert_eq!(r["error"]["code"], 500, "{r}");
    }
    for r in &records {
        let md = &r["metadata"];
        let issued = md["credit_issued_ns"].as_u64().unwrap();
        let start = md["request_start_ns"].as_u64().unwrap();
        assert!(issued <= start, "{md}");
        // No warmup: profiling is the run's first phase.
        assert_eq!(md["phase_index"], 0);
        assert_eq!(md["profiling_index"], 0);
        assert_eq!(md["phase_name"], "profiling");
        assert_eq!(md["phase_kind"], "profiling");
        assert_eq!(md["agent_depth"], 0);
        assert_eq!(md["root_correlation_id"], md["x_correlation_id"]);
        // Absent rather than null.
        assert!(md.get("cancellation_time_ns").is_none(), "{md}");
        assert!(!r.to_string().contains("null"), "{r}");
    }
    let ready = std::fs::read_to_string(tmp.path().join("run/.aiperf_results_ready.json")).unwrap();
    assert_eq!(
        ready,
        r#"{"ready":true,"was_cancelled":false,"partial":false}"#
    );
}

/// An artifact that cannot be written does not keep the others from being written: the
/// ready marker says the results are partial and names what failed, and the run exits 1.
#[test]
fn an_exporter_that_fails_leaves_the_others_and_a_partial_marker() {
    let mock = MockChild::spawn(&["--ttft", "2", "--itl", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    // A directory where inputs.json goes: its write (a rename) fails.
    std::fs::create_dir_all(tmp.path().join("run/inputs.json/taken")).unwrap();
    let out = profile(tmp.path(), &mock, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write inputs.json"), "{stderr}");
    let run = tmp.path().join("run");
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    assert_eq!(summary["request_count"]["avg"], 12.0);
    assert!(run.join("profile_export_aiperf.csv").is_file());
    let ready = read_json(&run.join(".aiperf_results_ready.json"));
    assert_eq!(ready["partial"], true, "{ready}");
    assert_eq!(
        ready["failed_exporters"],
        serde_json::json!(["inputs.json"])
    );
}

#[test]
fn a_warmup_phase_shifts_the_profiling_phase_index() {
    let mock = MockChild::spawn(&["--ttft", "2", "--itl", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    succeeded(&profile(
        tmp.path(),
        &mock,
        &["--warmup-request-count", "3"],
    ));
    let records = read_jsonl(&tmp.path().join("run/profile_export.jsonl"));
    let warmup: Vec<&Value> = records
        .iter()
        .filter(|r| r["metadata"]["benchmark_phase"] == "warmup")
        .collect();
    assert_eq!(warmup.len(), 3);
    assert_eq!(records.len(), 15);
    for r in &records {
        let md = &r["metadata"];
        if md["benchmark_phase"] == "warmup" {
            assert_eq!(md["phase_index"], 0);
            assert!(md.get("profiling_index").is_none(), "{md}");
            assert_eq!(md["phase_kind"], "warmup");
        } else {
            assert_eq!(md["phase_index"], 1);
            assert_eq!(md["profiling_index"], 0);
        }
    }
}

#[test]
fn export_level_summary_writes_no_records_file() {
    let mock = MockChild::spawn(&["--ttft", "2", "--itl", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    succeeded(&profile(tmp.path(), &mock, &["--export-level", "summary"]));
    let run = tmp.path().join("run");
    assert!(!run.join("profile_export.jsonl").exists());
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    assert_eq!(summary["request_count"]["avg"], 12.0);
    assert!(run.join("profile_export_aiperf.csv").is_file());
    assert!(run.join(".aiperf_results_ready.json").is_file());

    // The alias and the default level.
    succeeded(&profile(
        tmp.path(),
        &mock,
        &["--profile-export-level", "records"],
    ));
    assert_eq!(read_jsonl(&run.join("profile_export.jsonl")).len(), 12);
}

#[test]
fn a_prefix_renames_every_export_and_outputs_json_holds_the_texts() {
    let mock = MockChild::spawn(&["--ttft", "2", "--itl", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let out = profile(
        tmp.path(),
        &mock,
        &[
            "--profile-export-file",
            "/somewhere/else/bench1.json",
            "--export-outputs-json",
        ],
    );
    succeeded(&out);
    let run = tmp.path().join("run");
    for f in [
        "bench1.json",
        "bench1.csv",
        "bench1.jsonl",
        "bench1_console.txt",
    ] {
        assert!(run.join(f).is_file(), "missing {f}");
    }
    for f in [
        "profile_export_aiperf.json",
        "profile_export_aiperf.csv",
        "profile_export.jsonl",
        "profile_export_console.txt",
    ] {
        assert!(!run.join(f).exists(), "{f} should be renamed");
    }
    assert!(!Path::new("/somewhere").exists());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("bench1.json"), "{stdout}");
    let records = read_jsonl(&run.join("bench1.jsonl"));
    assert_eq!(records.len(), 12);

    let outputs = read_json(&run.join("outputs.json"));
    assert_eq!(outputs["schema_version"], "1.1");
    assert_eq!(outputs["warmup"], serde_json::json!([]));
    let data = outputs["data"].as_array().unwrap();
    assert_eq!(data.len(), 12);
    let sessions: Vec<u64> = data
        .iter()
        .map(|d| d["session_num"].as_u64().unwrap())
        .collect();
    assert!(sessions.windows(2).all(|w| w[0] <= w[1]), "{sessions:?}");
    for d in data {
        let id = d["x_request_id"].as_str().unwrap();
        let record = records
            .iter()
            .find(|r| r["metadata"]["x_request_id"] == id)
            .expect("the same request in the JSONL");
        assert_eq!(
            d["request_start_ns"],
            record["metadata"]["request_start_ns"]
        );
        // The mock streams one word per token: eight tokens, eight words.
        let text = d["response_text"].as_str().unwrap();
        assert_eq!(text.split_whitespace().count(), 8, "{text:?}");
        assert_eq!(d["metrics"]["output_sequence_length"], 8.0);
        assert!(d["metrics"]["request_latency"].as_f64().unwrap() > 0.0);
        assert_eq!(d["benchmark_phase"], "profiling");
    }
}

#[test]
fn http_timing_metrics_are_recorded_traced_and_shown() {
    let mock = MockChild::spawn(&["--ttft", "30", "--itl", "2"]);
    let tmp = tempfile::tempdir().unwrap();
    let out = profile(
        tmp.path(),
        &mock,
        &["--export-http-trace", "--show-trace-timing"],
    );
    succeeded(&out);
    let run = tmp.path().join("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("NVIDIA AIPerf | HTTP Trace Timing"),
        "{stdout}"
    );
    assert!(stdout.contains("HTTP Waiting (TTFB) (ms)"), "{stdout}");
    let console = std::fs::read_to_string(run.join("profile_export_console.txt")).unwrap();
    assert!(console.contains("HTTP Trace Timing"));

    let records = read_jsonl(&run.join("profile_export.jsonl"));
    assert_eq!(records.len(), 12);
    let value = |r: &Value, tag: &str| r["metrics"][tag]["value"].as_f64().unwrap();
    let mut fresh = 0;
    for r in &records {
        // The mock sends its first (role-only) chunk at once and the first token 30 ms
        // later: the first body byte comes before the first token, the body after it.
        let waiting = value(r, "http_req_waiting");
        let ttft = value(r, "time_to_first_token");
        assert!(waiting <= ttft, "{waiting} > TTFT {ttft}");
        let after_send = waiting + value(r, "http_req_receiving");
        assert!(after_send >= 29.0, "{after_send} ms: {r}");
        let phases: f64 = [
            "http_req_blocked",
            "http_req_dns_lookup",
            "http_req_connecting",
            "http_req_sending",
            "http_req_waiting",
            "http_req_receiving",
        ]
        .iter()
        .map(|t| value(r, t))
        .sum();
        assert!((phases - value(r, "http_req_total")).abs() < 1e-6, "{r}");
        assert!(value(r, "http_req_duration") <= value(r, "request_latency") + 5.0);
        // Sizes in KB of 1024 bytes, chunks a count (AIPerf's units).
        assert!(value(r, "http_req_data_sent") > 0.1, "{r}");
        assert!(value(r, "http_req_data_received") > 0.1, "{r}");
        assert_eq!(r["metrics"]["http_req_data_sent"]["unit"], "KB");
        assert_eq!(r["metrics"]["http_req_chunks_received"]["unit"], "count");

        let t = &r["trace_data"];
        assert_eq!(t["trace_type"], "hyper");
        assert_eq!(t["response_status_code"], 200);
        let at = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("no {k}: {t}"));
        let start = r["metadata"]["request_start_ns"].as_u64().unwrap();
        assert!(start <= at("request_send_start_ns"));
        assert!(at("request_send_start_ns") <= at("request_send_end_ns"));
        assert!(at("request_send_end_ns") <= at("response_headers_received_ns"));
        assert!(at("response_receive_start_ns") <= at("response_receive_end_ns"));
        assert_eq!(
            at("request_bytes_total") as f64 / 1024.0,
            value(r, "http_req_data_sent")
        );
        if value(r, "http_req_connection_reused") == 0.0 {
            fresh += 1;
            assert!(at("tcp_connect_start_ns") <= at("tcp_connect_end_ns"));
            assert!(at("tcp_connect_end_ns") <= at("request_send_start_ns"));
        } else {
            assert!(t.get("tcp_connect_start_ns").is_none(), "{t}");
            assert_eq!(value(r, "http_req_connecting"), 0.0);
        }
    }
    // Two connections for two requests in flight, kept alive for the others. hyper's pool
    // may race a new connection against the return of one just used when the machine is
    // busy, so one or two more are allowed; the reuse average must match whatever happened.
    assert!((2..=4).contains(&fresh), "{fresh} connections made");

    let summary = read_json(&run.join("profile_export_aiperf.json"));
    assert_eq!(summary["http_req_waiting"]["count"], 12);
    assert!(summary["http_req_duration"]["p50"].as_f64().unwrap() >= 29.0);
    let reused = summary["http_req_connection_reused"]["avg"]
        .as_f64()
        .unwrap();
    assert!(
        (reused - (12 - fresh) as f64 / 12.0).abs() < 1e-9,
        "{reused}"
    );
    let csv = std::fs::read_to_string(run.join("profile_export_aiperf.csv")).unwrap();
    for label in [
        "HTTP Waiting (TTFB) (ms)",
        "HTTP Duration (excl. conn) (ms)",
        "HTTP Data Received (KB)",
        "HTTP Chunks Received",
    ] {
        assert!(csv.contains(&format!("\r\n{label},")), "{label}: {csv}");
    }
    assert_eq!(summary["http_req_data_received"]["unit"], "KB");
    assert_eq!(summary["http_req_chunks_received"]["unit"], "count");
}

#[test]
fn without_the_trace_flags_the_metrics_stay_but_no_trace_block_or_table() {
    let mock = MockChild::spawn(&["--ttft", "2", "--itl", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let out = profile(tmp.path(), &mock, &[]);
    succeeded(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("HTTP Trace Timing"), "{stdout}");
    let records = read_jsonl(&tmp.path().join("run/profile_export.jsonl"));
    for r in &records {
        assert!(r.get("trace_data").is_none(), "{r}");
        assert!(r["metrics"]["http_req_duration"]["value"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn bad_export_flag_combinations_are_refused_with_the_flag_named() {
    let mock = MockChild::spawn(&[]);
    let tmp = tempfile::tempdir().unwrap();
    for (extra, flag) in [
        (
            &["--export-level", "summary", "--export-http-trace"][..],
            "--export-http-trace",
        ),
        (
            &[
                "--profile-export-prefix",
                "outputs.json",
                "--export-outputs-json",
            ][..],
            "--profile-export-prefix outputs",
        ),
        (
            &["--profile-export-prefix", "_console.txt"][..],
            "--profile-export-prefix",
        ),
    ] {
        let out = profile(tmp.path(), &mock, extra);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{extra:?}: {}",
            stderr_text(&out)
        );
        let err = stderr_text(&out);
        assert!(err.contains(flag), "{extra:?}: {err}");
        assert!(!tmp.path().join("run").exists(), "nothing is written");
    }
}
