//! The client under server faults, a dead server, and interruption: the real `aiperf`
//! binary profiles the real mock server (child processes), and the artifacts are checked.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use aiperf::api::{Fault, FaultRates};
use serde_json::Value;

use crate::common;

use common::{BIN, MockChild, read_json, run_profile as profile};

fn base_args<'a>(url: &'a str, dir: &'a str, count: &'a str) -> Vec<&'a str> {
    vec![
        "--model",
        "mock-model",
        "--tokenizer",
        "builtin",
        "--streaming",
        "--synthetic-input-tokens-mean",
        "20",
        "--output-tokens-mean",
        "10",
        "--url",
        url,
        "--request-count",
        count,
        "--artifact-dir",
        dir,
        "--random-seed",
        "1",
    ]
}

/// Every line must be a whole JSON object (no torn lines).
fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "torn last line");
    common::read_jsonl(path)
}

struct Run {
    out: Output,
    summary: Value,
    records: Vec<Value>,
}

impl Run {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    fn code(&self) -> Option<i32> {
        self.out.status.code()
    }

    /// (code, type, message, count) rows of `error_summary`.
    fn error_rows(&self) -> Vec<(Value, String, String, u64)> {
        self.summary["error_summary"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let d = &r["error_details"];
                (
                    d["code"].clone(),
                    d["type"].as_str().unwrap().to_string(),
                    d["message"].as_str().unwrap().to_string(),
                    r["count"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    fn successes(&self) -> u64 {
        self.summary["request_count"]["avg"].as_f64().unwrap_or(0.0) as u64
    }

    fn errors(&self) -> u64 {
        self.error_rows().iter().map(|r| r.3).sum()
    }

    /// Records, successes and error rows all add up to `sent`.
    fn assert_adds_up(&self, sent: usize) {
        assert_eq!(self.records.len(), sent, "{}", self.stderr());
        assert_eq!(self.successes() + self.errors(), sent as u64);
        let failed_lines = self
            .records
            .iter()
            .filter(|r| !r["error"].is_null())
            .count();
        assert_eq!(failed_lines as u64, self.errors());
    }
}

fn run_against(mock_args: &[&str], extra: &[&str], count: &str) -> Run {
    let mock = MockChild::spawn(mock_args);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut args = base_args(&mock.url, dir.to_str().unwrap(), count);
    if !extra.contains(&"--concurrency") {
        args.extend_from_slice(&["--concurrency", "4"]);
    }
    args.extend_from_slice(extra);
    let out = profile(&args);
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    Run {
        out,
        summary,
        records,
    }
}

/// Runs 12 requests with one fault at 100% and checks the single error row.
fn all_fail_with(mock_args: &[&str], extra: &[&str], check: impl Fn(&Value, &str, &str)) {
    let mut args = vec!["--ttft", "1", "--itl", "1"];
    args.extend_from_slice(mock_args);
    let run = run_against(&args, extra, "12");
    assert_eq!(run.code(), Some(1), "{}", run.stderr());
    assert!(
        run.stderr().contains("every request failed"),
        "{}",
        run.stderr()
    );
    run.assert_adds_up(12);
    let rows = run.error_rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (code, kind, message, count) = &rows[0];
    assert_eq!(*count, 12);
    check(code, kind, message);
    // Each kind of failure is logged once, not once per request.
    assert_eq!(run.stderr().matches("A request failed").count(), 1);
}

#[test]
fn error_rate_gives_500_rows() {
    all_fail_with(&["--error-rate", "100"], &[], |code, kind, msg| {
        assert_eq!(code, 500);
        assert_eq!(kind, "Internal Server Error");
        assert_eq!(msg, "mock server: injected internal server error");
    });
}

#[test]
fn rate_limit_rate_gives_429_rows() {
    all_fail_with(&["--rate-limit-rate", "100"], &[], |code, kind, msg| {
        assert_eq!(code, 429);
        assert_eq!(kind, "Too Many Requests");
        assert_eq!(msg, "mock server: injected rate limit");
    });
}

#[test]
fn reset_rate_gives_stream_errors() {
    all_fail_with(&["--reset-rate", "100"], &[], |code, kind, msg| {
        assert!(code.is_null());
        assert_eq!(kind, "StreamError");
        assert!(
            msg.contains("error reading a body from connection"),
            "{msg}"
        );
    });
}

#[test]
fn truncate_rate_gives_incomplete_streams() {
    all_fail_with(&["--truncate-rate", "100"], &[], |code, kind, msg| {
        assert!(code.is_null());
        assert_eq!(kind, "IncompleteStreamError");
        assert_eq!(msg, "The stream ended without a [DONE] event");
    });
}

#[test]
fn malformed_rate_gives_invalid_response_rows() {
    all_fail_with(&["--malformed-rate", "100"], &[], |code, kind, msg| {
        assert!(code.is_null());
        assert_eq!(kind, "InvalidResponseError");
        assert!(msg.starts_with("Stream event is not valid JSON"), "{msg}");
    });
}

#[test]
fn error_event_rate_gives_stream_error_rows() {
    all_fail_with(&["--error-event-rate", "100"], &[], |code, kind, msg| {
        assert!(code.is_null());
        assert_eq!(kind, "StreamError");
        assert!(msg.contains("mock server: injected error event"), "{msg}");
    });
}

#[test]
fn stall_past_the_timeout_gives_408_and_a_summary() {
    let t0 = Instant::now();
    all_fail_with(
        &["--stall-rate", "100", "--stall-ms", "20000"],
        &["--request-timeout-seconds", "0.3"],
        |code, kind, msg| {
            assert_eq!(code, 408);
            assert_eq!(kind, "RequestTimeoutError");
            assert_eq!(msg, "Request timed out after 0.300 seconds");
        },
    );
    // 12 requests, 4 at a time, each freed at its 0.3 s timeout: ~1 s, not 20 s per stall.
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
}

#[test]
fn a_short_stall_only_slows_the_request() {
    let run = run_against(
        &[
            "--ttft",
            "1",
            "--itl",
            "1",
            "--stall-rate",
            "100",
            "--stall-ms",
            "200",
        ],
        &[],
        "4",
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    run.assert_adds_up(4);
    assert_eq!(run.errors(), 0);
    let latency = run.summary["request_latency"]["min"].as_f64().unwrap();
    assert!(latency >= 200.0, "{latency} ms");
}

#[test]
fn mixed_faults_match_the_seeded_plan() {
    let seed = 5;
    let rates = FaultRates {
        error: 20.0,
        reset: 10.0,
        malformed: 10.0,
        ..FaultRates::default()
    };
    let count = 50;
    let expect = |f: Fault| {
        (0..count)
            .filter(|&n| rates.decide(seed, n) == Some(f))
            .count() as u64
    };
    let run = run_against(
        &[
            "--ttft",
            "1",
            "--itl",
            "1",
            "--random-seed",
            "5",
            "--error-rate",
            "20",
            "--reset-rate",
            "10",
            "--malformed-rate",
            "10",
        ],
        &[],
        "50",
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    run.assert_adds_up(50);
    let row = |kind: &str| {
        run.error_rows()
            .iter()
            .filter(|r| r.1 == kind)
            .map(|r| r.3)
            .sum::<u64>()
    };
    assert_eq!(row("Internal Server Error"), expect(Fault::ServerError));
    assert_eq!(row("StreamError"), expect(Fault::Reset));
    assert_eq!(row("InvalidResponseError"), expect(Fault::Malformed));
    let failed = expect(Fault::ServerError) + expect(Fault::Reset) + expect(Fault::Malformed);
    assert!(failed > 0 && failed < 50, "{failed}");
    assert_eq!(run.successes(), 50 - failed);
    // A run that partly failed still exits 0, but says so.
    let note = format!("{failed} of 50 requests failed");
    assert!(run.stderr().contains(&note), "{}", run.stderr());
}

#[test]
fn failed_request_threshold_stops_early_with_exit_1() {
    let run = run_against(
        &[
            "--ttft",
            "1",
            "--itl",
            "1",
            "--error-rate",
            "60",
            "--random-seed",
            "2",
        ],
        &["--failed-request-threshold", "0.2", "--concurrency", "2"],
        "400",
    );
    assert_eq!(run.code(), Some(1), "{}", run.stderr());
    assert!(
        run.stderr().contains("--failed-request-threshold"),
        "{}",
        run.stderr()
    );
    let sent = run.records.len();
    assert!((10..400).contains(&sent), "{sent}");
    run.assert_adds_up(sent);
    assert_eq!(run.summary["was_cancelled"], true);
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_dead_server_is_reported_once_and_the_run_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let url = format!("127.0.0.1:{}", free_port());
    let out = profile(&base_args(&url, dir.to_str().unwrap(), "100000"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("Cannot connect to the server").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("Connection refused"), "{stderr}");
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert!(
        records.len() < 100_000 && records.len() >= 10,
        "{}",
        records.len()
    );
    let rows = summary["error_summary"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["error_details"]["type"], "ConnectionError");
    assert_eq!(rows[0]["count"].as_u64().unwrap() as usize, records.len());
}

#[test]
fn wait_for_model_polls_until_the_server_is_up() {
    let port = free_port();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let url = format!("127.0.0.1:{port}");
    let mut args = base_args(&url, dir.to_str().unwrap(), "8");
    args.extend_from_slice(&[
        "--wait-for-model-timeout",
        "60",
        "--wait-for-model-interval",
        "0.2",
    ]);
    let child = Command::new(BIN)
        .arg("profile")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let _mock = MockChild::spawn_on(port, &["--fast"]);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("Server ready after"), "{stderr}");
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert_eq!(records.len(), 8);
    assert!(records.iter().all(|r| r["error"].is_null()));
}

#[test]
fn wait_for_model_gives_up_with_exit_1_and_sends_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let url = format!("127.0.0.1:{}", free_port());
    let mut args = base_args(&url, dir.to_str().unwrap(), "8");
    args.extend_from_slice(&[
        "--wait-for-model-timeout",
        "1",
        "--wait-for-model-interval",
        "0.2",
    ]);
    let out = profile(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("error: --wait-for-model-timeout 1: "),
        "{last}"
    );
    assert!(
        last.contains("not ready") && last.contains("nothing was sent"),
        "{last}"
    );
    assert!(!dir.join("profile_export_aiperf.json").exists());
}

#[test]
fn a_server_killed_mid_run_stops_the_run_with_exit_1() {
    // Each request takes ~0.4 s; the run would go on for 8 s.
    let mock = MockChild::spawn(&["--ttft", "5", "--itl", "40"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut args = base_args(&mock.url, dir.to_str().unwrap(), "100000");
    args.extend_from_slice(&["--benchmark-duration", "8", "--concurrency", "2"]);
    let child = Command::new(BIN)
        .arg("profile")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (run, lines) = follow_stderr(child);
    wait_for_line(&lines, "Profiling:");
    std::thread::sleep(Duration::from_millis(1000));
    let killed = Instant::now();
    drop(mock); // SIGKILL
    let status = run.wait();
    let text = lines.text();
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains("stopped answering: it refused"),
        "a clear log line: {text}"
    );
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains("server stopped answering"),
        "{text}"
    );
    // Stopped at the refusals, not at the end of the 8 s.
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "{:?}",
        killed.elapsed()
    );
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(summary["was_cancelled"], true);
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    let ok = records.iter().filter(|r| r["error"].is_null()).count();
    let refused = records
        .iter()
        .filter(|r| r["error"]["type"] == "ConnectionError")
        .count();
    assert!(ok > 0, "some finished before the kill");
    // max(concurrency, 10) refusals in a row stop it; more arrive while the collector
    // catches up (refusals take microseconds), but not the ~100,000 of 7 s.
    assert!((10..500).contains(&refused), "{refused} refused");
    let errors: u64 = summary["error_summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert_eq!(errors as usize + ok, records.len());
}

/// Captured stderr lines of a running child, read on a thread.
#[derive(Clone, Default)]
struct Lines(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Lines {
    fn text(&self) -> String {
        self.0.lock().unwrap().join("\n")
    }
}

struct Running {
    child: Child,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn wait(mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                if let Some(r) = self.reader.take() {
                    let _ = r.join();
                }
                return st;
            }
            assert!(Instant::now() < deadline, "aiperf did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn follow_stderr(mut child: Child) -> (Running, Lines) {
    let lines = Lines::default();
    let sink = lines.clone();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.0.lock().unwrap().push(line);
        }
    });
    (
        Running {
            child,
            reader: Some(reader),
        },
        lines,
    )
}

fn wait_for_line(lines: &Lines, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !lines.text().contains(needle) {
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in\n{}",
            lines.text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigint(pid: &str) {
    let st = Command::new("kill").args(["-INT", pid]).status().unwrap();
    assert!(st.success());
}

fn start_profile(url: &str, dir: &Path, count: &str, extra: &[&str]) -> (Running, Lines) {
    let mut args = base_args(url, dir.to_str().unwrap(), count);
    if !extra.contains(&"--concurrency") {
        args.extend_from_slice(&["--concurrency", "2"]);
    }
    args.extend_from_slice(extra);
    let child = Command::new(BIN)
        .arg("profile")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    follow_stderr(child)
}

#[test]
fn sigint_once_lets_in_flight_finish_and_writes_a_partial_export() {
    // Each request takes ~0.5 s (10 tokens, 50 ms apart).
    let mock = MockChild::spawn(&["--ttft", "5", "--itl", "50"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let (run, lines) = start_profile(&mock.url, &dir, "1000", &[]);
    wait_for_line(&lines, "Profiling:");
    std::thread::sleep(Duration::from_millis(1200));
    let t0 = Instant::now();
    sigint(&run.pid());
    let status = run.wait();
    assert_eq!(status.code(), Some(130), "{}", lines.text());
    // In-flight requests finish on their own (well inside the 30 s grace period).
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    let text = lines.text();
    assert!(text.contains("Results will be partial"), "{text}");
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(summary["was_cancelled"], true);
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert!(
        records.len() >= 2 && records.len() < 1000,
        "{}",
        records.len()
    );
    // Finished within the grace period: no request was cut off.
    assert!(records.iter().all(|r| r["error"].is_null()), "{text}");
    assert_eq!(
        summary["request_count"]["avg"].as_f64().unwrap() as usize,
        records.len()
    );
}

#[test]
fn sigint_past_the_grace_period_cancels_in_flight_as_499() {
    // Each request would take ~20 s.
    let mock = MockChild::spawn(&["--ttft", "5", "--itl", "2000"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let (run, lines) = start_profile(&mock.url, &dir, "100", &["--interrupt-grace-period", "0.3"]);
    wait_for_line(&lines, "Profiling:");
    std::thread::sleep(Duration::from_millis(800));
    let t0 = Instant::now();
    sigint(&run.pid());
    let status = run.wait();
    assert_eq!(status.code(), Some(130), "{}", lines.text());
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(summary["was_cancelled"], true);
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert_eq!(records.len(), 2, "the two in flight");
    for r in &records {
        assert_eq!(r["error"]["code"], 499);
        assert_eq!(r["error"]["type"], "RequestCancellationError");
        assert_eq!(r["metadata"]["was_cancelled"], true);
    }
    let rows = summary["error_summary"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["count"], 2);
}

/// The run's JSONL lines and the requests the mock received must match one for one.
fn assert_one_line_per_request(records: &[Value], served: &[Value]) {
    assert_eq!(records.len(), served.len(), "lines vs requests received");
    let mut ids: Vec<&Value> = records
        .iter()
        .map(|r| &r["metadata"]["x_request_id"])
        .collect();
    let mut got: Vec<&Value> = served.iter().map(|r| &r["x_request_id"]).collect();
    ids.sort_by_key(|v| v.to_string());
    got.sort_by_key(|v| v.to_string());
    assert_eq!(ids, got);
}

#[test]
fn sigint_twice_cancels_in_flight_and_writes_every_line_and_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let served_file = tmp.path().join("served.jsonl");
    // Each request waits 2 s for its first token.
    let mock = MockChild::spawn(&[
        "--ttft",
        "2000",
        "--itl",
        "1",
        "--record-requests",
        served_file.to_str().unwrap(),
    ]);
    let dir = tmp.path().join("run");
    // A long grace period: only the second Ctrl-C can end this quickly.
    let (run, lines) = start_profile(
        &mock.url,
        &dir,
        "100000",
        &["--interrupt-grace-period", "600", "--concurrency", "4"],
    );
    wait_for_line(&lines, "Profiling:");
    std::thread::sleep(Duration::from_millis(3000));
    sigint(&run.pid());
    wait_for_line(&lines, "Press Ctrl-C again");
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    sigint(&run.pid());
    let status = run.wait();
    let elapsed = t0.elapsed();
    assert_eq!(status.code(), Some(130), "{}", lines.text());
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert!(
        lines.text().contains("Interrupted twice"),
        "{}",
        lines.text()
    );
    mock.terminate();
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert_one_line_per_request(&records, &common::read_served(&served_file));
    let cancelled: Vec<&Value> = records
        .iter()
        .filter(|r| r["metadata"]["was_cancelled"] == true)
        .collect();
    assert!(!cancelled.is_empty(), "the requests in flight");
    assert!(cancelled.iter().all(|r| r["error"]["code"] == 499));
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(summary["was_cancelled"], true);
    assert!(dir.join("profile_export_aiperf.csv").exists());
    assert!(dir.join("profile_export_console.txt").exists());
}

#[test]
fn sigterm_is_a_first_ctrl_c_and_exits_143() {
    let tmp = tempfile::tempdir().unwrap();
    let served_file = tmp.path().join("served.jsonl");
    // Each request takes ~0.5 s (10 tokens, 50 ms apart).
    let mock = MockChild::spawn(&[
        "--ttft",
        "5",
        "--itl",
        "50",
        "--record-requests",
        served_file.to_str().unwrap(),
    ]);
    let dir = tmp.path().join("run");
    let (run, lines) = start_profile(&mock.url, &dir, "1000", &[]);
    wait_for_line(&lines, "Profiling:");
    std::thread::sleep(Duration::from_millis(1500));
    let t0 = Instant::now();
    let st = Command::new("kill")
        .args(["-TERM", &run.pid()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = run.wait();
    let text = lines.text();
    assert_eq!(status.code(), Some(143), "{text}");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert!(text.contains("Terminated (SIGTERM)"), "{text}");
    mock.terminate();
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert!(
        records.len() >= 2 && records.len() < 1000,
        "{}",
        records.len()
    );
    // The requests in flight finished within the grace period.
    assert!(records.iter().all(|r| r["error"].is_null()), "{text}");
    assert_one_line_per_request(&records, &common::read_served(&served_file));
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(summary["was_cancelled"], true);
    assert!(dir.join("profile_export_aiperf.csv").exists());
}

#[test]
fn a_full_disk_stops_the_run_with_whole_lines_and_the_console_table() {
    let mock = MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut args = base_args(&mock.url, dir.to_str().unwrap(), "100000");
    args.extend_from_slice(&["--concurrency", "4"]);
    // Files may grow to 1 MB (ulimit counts 512-byte blocks); past it a write fails with
    // EFBIG (SIGXFSZ ignored), as on a full disk.
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "trap '' XFSZ; ulimit -f 2048; exec '{BIN}' profile {}",
        quoted.join(" ")
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot write profile_export.jsonl"),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .last()
            .unwrap()
            .contains("could not be written"),
        "{stderr}"
    );
    assert!(
        stdout.contains("LLM Metrics"),
        "the console table: {stdout}"
    );
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert!(!records.is_empty());
    // Stopped soon after the limit, far short of the count.
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    let counted = summary["request_count"]["avg"].as_f64().unwrap() as usize;
    assert!(counted >= records.len() && counted < 5000, "{counted}");
    assert_eq!(summary["was_cancelled"], true);
}

#[test]
fn the_grace_period_bounds_the_exit_when_the_collector_lags() {
    use common::raw_server::{After, RawServer, sse_reply, token_event};
    // 10 events of 1 MB of text per request: tokenizing them is far slower than receiving.
    let text = "hello ".repeat((1 << 20) / 6);
    let mut events: Vec<String> = (0..10).map(|_| token_event(&text)).collect();
    events.push("data: [DONE]\n\n".to_string());
    let server = RawServer::start(move |_| sse_reply("", &events, After::KeepOpen));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let (run, lines) = start_profile(
        &server.url,
        &dir,
        "100000",
        // Only the chat requests reach the server (no /metrics probe).
        &[
            "--interrupt-grace-period",
            "1",
            "--concurrency",
            "4",
            "--no-server-metrics",
        ],
    );
    wait_for_line(&lines, "Profiling:");
    std::thread::sleep(Duration::from_millis(5000));
    let t0 = Instant::now();
    sigint(&run.pid());
    let status = run.wait();
    let elapsed = t0.elapsed();
    assert_eq!(status.code(), Some(130), "{}", lines.text());
    assert!(
        elapsed < Duration::from_secs(11),
        "{elapsed:?}\n{}",
        lines.text()
    );
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert_eq!(records.len(), server.requests().len());
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(summary["was_cancelled"], true);
}

#[test]
fn secrets_never_reach_exports_logs_or_the_console() {
    let mock = MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut args = base_args(&mock.url, dir.to_str().unwrap(), "4");
    args.extend_from_slice(&[
        "--api-key",
        "sk-KEYSECRET",
        "-H",
        "Authorization: Bearer HEADERSECRET",
        "--header=X-Api-Key:XKEYSECRET",
    ]);
    let out = profile(&args);
    assert_eq!(out.status.code(), Some(0));
    let mut texts = vec![
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ];
    let mut dirs = vec![dir.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                texts.push(String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned());
            }
        }
    }
    assert!(texts.len() >= 6, "stdout, stderr and the artifact files");
    for t in &texts {
        assert!(!t.contains("SECRET"), "secret leaked into:\n{t}");
    }
    assert!(texts[0].contains("--api-key '***'"), "{}", texts[0]);
}

#[test]
fn non_streamed_responses_under_faults() {
    let cases = [
        (
            "--reset-rate",
            "StreamError",
            "error reading a body from connection",
        ),
        (
            "--truncate-rate",
            "InvalidResponseError",
            "Response body is not valid JSON",
        ),
        (
            "--error-event-rate",
            "ResponseError",
            "mock server: injected error event",
        ),
    ];
    for (flag, kind, message) in cases {
        let mock = MockChild::spawn(&["--ttft", "1", "--itl", "1", flag, "100"]);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let args: Vec<&str> = base_args(&mock.url, dir.to_str().unwrap(), "6")
            .into_iter()
            .filter(|a| *a != "--streaming")
            .collect();
        let out = profile(&args);
        assert_eq!(out.status.code(), Some(1), "{flag}");
        let summary = read_json(&dir.join("profile_export_aiperf.json"));
        let rows = summary["error_summary"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{flag}: {rows:?}");
        assert_eq!(rows[0]["count"], 6, "{flag}");
        assert_eq!(rows[0]["error_details"]["type"], kind, "{flag}");
        let msg = rows[0]["error_details"]["message"].as_str().unwrap();
        assert!(msg.contains(message), "{flag}: {msg}");
        assert_eq!(read_jsonl(&dir.join("profile_export.jsonl")).len(), 6);
    }
}

#[test]
fn the_console_summary_says_how_many_requests_failed() {
    let run = run_against(
        &["--fast", "--error-rate", "35", "--random-seed", "3"],
        &[],
        "20",
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    run.assert_adds_up(20);
    let failed = run.errors();
    assert!(failed > 0 && failed < 20, "{failed}");
    let line = format!("{failed} of 20 requests failed");
    let stdout = String::from_utf8_lossy(&run.out.stdout);
    assert!(stdout.contains(&line), "{stdout}");
    assert!(stdout.contains("--failed-request-threshold"), "{stdout}");
}
