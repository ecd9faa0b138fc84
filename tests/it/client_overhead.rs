//! The "Client overhead" line counts the client only: with `--mock-server` the in-process
//! mock's threads are measured apart and reported on their own line.

use crate::common;

use common::{MockChild, read_json, run_profile, stderr_text};

/// Runs a vision profile (the README's first command, more requests) and returns the
/// `client_overhead` block of the JSON export and the log.
fn profile(target: &[&str]) -> (serde_json::Value, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let mut args = vec![
        "--model",
        "Qwen/Qwen2-VL-2B-Instruct",
        "--tokenizer",
        "builtin",
        "--endpoint-type",
        "chat",
        "--image-width-mean",
        "512",
        "--image-height-mean",
        "512",
        "--synthetic-input-tokens-mean",
        "100",
        "--output-tokens-mean",
        "50",
        "--streaming",
        "--request-count",
        "60",
        "--concurrency",
        "8",
        "--no-server-metrics",
        "--artifact-dir",
        dir,
    ];
    args.extend_from_slice(target);
    let out = run_profile(&args);
    let log = stderr_text(&out);
    assert!(out.status.success(), "{log}");
    let summary = read_json(&tmp.path().join("profile_export_aiperf.json"));
    (summary["client_overhead"].clone(), log)
}

#[test]
fn the_in_process_mock_is_not_counted_as_client_cpu() {
    let (o, log) = profile(&["--mock-server"]);
    let client = o["cpu_time_s"].as_f64().unwrap();
    let mock = &o["in_process_mock"];
    let mock_cpu = mock["cpu_time_s"].as_f64().unwrap();
    let process = mock["process_cpu_time_s"].as_f64().unwrap();
    // The two parts add up to the whole process.
    assert!((client + mock_cpu - process).abs() < 1e-6, "{o}");
    // The mock decodes every 512x512 image to charge its tokens and streams 50 tokens per
    // request: a real share of the process that the client line used to include.
    assert!(mock_cpu > 0.0, "{o}");
    assert!(
        client < process * 0.85,
        "client {client} s of {process} s: {o}"
    );
    let per_req = o["cpu_per_request_us"].as_f64().unwrap();
    assert!((per_req - client * 1e6 / 60.0).abs() < 0.01, "{o}");

    // The log keeps the client line's format and adds the mock's own.
    let client_line = log
        .lines()
        .find(|l| l.contains("Client overhead: "))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        client_line.contains(&format!(
            "Client overhead: {per_req:.0} us CPU per request; "
        )),
        "{client_line}"
    );
    assert!(client_line.contains("% of "), "{client_line}");
    let mock_line = log
        .lines()
        .find(|l| l.contains("In-process mock server: "))
        .unwrap_or_else(|| panic!("{log}"));
    let mock_per_req = mock["cpu_per_request_us"].as_f64().unwrap();
    assert!(
        mock_line.contains(&format!("{mock_per_req:.0} us CPU per request")),
        "{mock_line}"
    );
}

#[test]
fn a_separate_server_has_no_mock_share() {
    let mock = MockChild::spawn(&["--fast"]);
    let (o, log) = profile(&["--url", &mock.url]);
    assert!(o.get("in_process_mock").is_none(), "{o}");
    assert!(o["cpu_time_s"].as_f64().unwrap() > 0.0, "{o}");
    assert!(log.contains("Client overhead: "), "{log}");
    assert!(!log.contains("In-process mock server: "), "{log}");
}
