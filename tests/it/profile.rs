//! End-to-end: the real `aiperf` binary profiles the real mock server (a child process), and
//! the artifacts are read back and checked.

use crate::common;

use std::path::PathBuf;

use common::{
    MockChild, read_json, read_jsonl, read_served, run_profile as profile, stderr_text as stderr_of,
};

use serde_json::Value;

fn vision_args<'a>(url: &'a str, dir: &'a str) -> Vec<&'a str> {
    vec![
        "--model",
        "Qwen/Qwen2-VL-2B-Instruct",
        "--endpoint-type",
        "chat",
        "--image-width-mean",
        "512",
        "--image-height-mean",
        "512",
        "--synthetic-input-tokens-mean",
        "100",
        "--output-tokens-mean",
        "100",
        "--streaming",
        "--url",
        url,
        "--request-count",
        "20",
        "--concurrency",
        "4",
        "--tokenizer",
        "builtin",
        "--artifact-dir",
        dir,
    ]
}

#[test]
fn vision_profile_against_the_mock_matches_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let record_file = tmp.path().join("server.jsonl");
    let mock = MockChild::spawn(&[
        "--ttft",
        "20",
        "--itl",
        "5",
        "--record-requests",
        record_file.to_str().unwrap(),
    ]);
    let dir = tmp.path().join("run");
    let out = profile(&vision_args(&mock.url, dir.to_str().unwrap()));
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status,
        stderr_of(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("NVIDIA AIPerf | LLM Metrics"), "{stdout}");
    assert!(stdout.contains("JSON Export:"), "{stdout}");

    for f in [
        "profile_export_aiperf.json",
        "profile_export_aiperf.csv",
        "profile_export.jsonl",
        "inputs.json",
        "profile_export_console.txt",
        "logs/aiperf.log",
    ] {
        assert!(dir.join(f).is_file(), "missing {f}");
    }

    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(
        summary["request_count"]["avg"].as_f64(),
        Some(20.0),
        "{summary:#}"
    );
    let osl = &summary["output_sequence_length"];
    assert_eq!(osl["min"].as_f64(), Some(100.0));
    assert_eq!(osl["max"].as_f64(), Some(100.0));
    let isl = &summary["input_sequence_length"];
    assert_eq!(isl["min"].as_f64(), Some(100.0));
    assert_eq!(isl["max"].as_f64(), Some(100.0));

    // Timing: generous bounds for a loaded 2-core machine running a debug build; the tight
    // figures are measured by the benches in release.
    let ttft_p50 = summary["time_to_first_token"]["p50"].as_f64().unwrap();
    assert!((19.9..40.0).contains(&ttft_p50), "TTFT p50 {ttft_p50} ms");
    let itl_avg = summary["inter_token_latency"]["avg"].as_f64().unwrap();
    assert!((4.9..5.6).contains(&itl_avg), "ITL avg {itl_avg} ms");
    assert_eq!(summary["time_to_first_token"]["unit"], "ms");

    // Image tokens: what the client derived equals what the server charged.
    let server: Vec<Value> = read_served(&record_file);
    assert_eq!(server.len(), 20);
    for s in &server {
        assert_eq!(s["image_tokens"].as_u64(), Some(326), "{s}");
    }
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert_eq!(records.len(), 20);
    for r in &records {
        assert!(r["error"].is_null(), "{r}");
        let m = &r["metrics"];
        assert_eq!(
            m["output_sequence_length"]["value"].as_f64(),
            Some(100.0),
            "{r}"
        );
        assert_eq!(m["image_token_count"]["value"].as_f64(), Some(326.0), "{r}");
        let id = r["metadata"]["x_request_id"].as_str().unwrap();
        let s = server
            .iter()
            .find(|s| s["x_request_id"] == id)
            .unwrap_or_else(|| panic!("server saw no request {id}"));
        // Client TTFT can never be shorter than what the server spent before its first token.
        let client_ttft_ms = m["time_to_first_token"]["value"].as_f64().unwrap();
        let server_ttft_ms = (s["first_token_ns"].as_u64().unwrap()
            - s["received_ns"].as_u64().unwrap()) as f64
            / 1e6;
        assert!(
            client_ttft_ms >= server_ttft_ms,
            "{client_ttft_ms} < {server_ttft_ms}"
        );
        // The body left after the request started and before its first byte came back (one
        // clock, exact), and no later than the server read it. That last comparison crosses
        // processes and the client stamps after its write returns, so a loaded machine may run
        // the server's read first: it allows 10 ms.
        let start = r["metadata"]["request_start_ns"].as_u64().unwrap();
        let sent = r["metadata"]["request_sent_ns"]
            .as_u64()
            .expect("sent stamp");
        let ack = r["metadata"]["request_ack_ns"].as_u64().unwrap();
        let received = s["received_ns"].as_u64().unwrap();
        assert!(start <= sent && sent <= ack, "{r}");
        assert!(
            sent <= received + 10_000_000,
            "{r}\nserver received {received}"
        );
    }

    // inputs.json holds the exact bodies: text then one 512x512 JPEG, streaming with usage.
    let inputs = read_json(&dir.join("inputs.json"));
    let data = inputs["data"].as_array().unwrap();
    assert!(!data.is_empty());
    let body = &data[0]["payloads"][0];
    assert_eq!(body["model"], "Qwen/Qwen2-VL-2B-Instruct");
    assert_eq!(body["max_completion_tokens"], 100);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    let parts = body["messages"][0]["content"].as_array().unwrap();
    assert_eq!(parts[0]["type"], "text");
    assert_eq!(parts[1]["type"], "image_url");
    // JPEG by default, as AIPerf sends: 512x512 noise at quality 75 is about 0.55 M base64
    // characters (a PNG would be about 1.05 M).
    let url = parts[1]["image_url"]["url"].as_str().unwrap();
    assert!(url.starts_with("data:image/jpeg;base64,"), "{}", &url[..40]);
    assert!((450_000..650_000).contains(&url.len()), "{}", url.len());

    let csv = std::fs::read_to_string(dir.join("profile_export_aiperf.csv")).unwrap();
    assert!(
        csv.starts_with("Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std"),
        "{csv}"
    );
}

#[test]
fn same_seed_gives_identical_inputs() {
    let mock = MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    for run in ["a", "b", "c"] {
        let dir = tmp.path().join(run);
        let seed = if run == "c" { "8" } else { "7" };
        let mut args = vision_args(&mock.url, dir.to_str().unwrap());
        args.extend(["--random-seed", seed, "--image-format", "random"]);
        let out = profile(&args);
        assert!(out.status.success(), "{}", stderr_of(&out));
        inputs.push(std::fs::read(dir.join("inputs.json")).unwrap());
    }
    assert!(inputs[0] == inputs[1], "same seed, different inputs.json");
    assert!(inputs[0] != inputs[2], "different seeds, same inputs.json");
}

#[test]
fn a_server_that_rejects_everything_still_gets_a_summary() {
    let mock = MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().join("run");
    let out = profile(&[
        "-m",
        "m",
        "--url",
        &mock.url,
        "--endpoint",
        "/v1/nope",
        "--request-count",
        "6",
        "--concurrency",
        "2",
        "--isl",
        "20",
        "--tokenizer",
        "builtin",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    let errors = summary["error_summary"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{summary:#}");
    assert_eq!(errors[0]["count"], 6);
    assert_eq!(errors[0]["error_details"]["code"], 404);
    assert_eq!(summary["error_request_count"]["avg"].as_f64(), Some(6.0));
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert_eq!(records.len(), 6);
    assert!(records.iter().all(|r| r["error"]["code"] == 404));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Error Summary"), "{stdout}");
}

#[test]
fn bad_flags_stop_before_anything_is_sent() {
    let cases: &[(&[&str], &str)] = &[
        (&["-m", "m", "--concurrency", "0"], "--concurrency"),
        (
            &["-m", "m", "--output-tokens-stddev", "4"],
            "--output-tokens-stddev",
        ),
        (&["-m", "m", "--extra-inputs", "oops"], "--extra-inputs"),
        (&["-m", "m", "--url", "ftp://x"], "--url"),
        (
            &["-m", "m", "--tokenizer", "/no/such/tokenizer.json"],
            "--tokenizer",
        ),
    ];
    for (args, flag) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let mut all: Vec<&str> = args.to_vec();
        all.extend([
            "--url",
            "127.0.0.1:9",
            "--artifact-dir",
            dir.to_str().unwrap(),
        ]);
        // --url given twice takes the last; the ftp case checks its own value first.
        if flag == &"--url" {
            all.truncate(args.len());
            all.extend(["--artifact-dir", dir.to_str().unwrap()]);
        }
        let out = profile(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
        let err = stderr_of(&out);
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(
            !dir.join("profile_export.jsonl").exists(),
            "{args:?} sent requests"
        );
    }
}

#[test]
fn unknown_flags_are_rejected() {
    let out = profile(&["-m", "m", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("--no-such-flag"));
}
