//! `--reset-kv-cache` and `--server-profiler` against the mock server, which serves vLLM's
//! control endpoints: the reset empties its prefix cache before anything is sent, the
//! profiler start and stop bracket the profiling phase exactly, and a path the server does
//! not serve ends the run with the answer it gave.

use std::path::Path;

use serde_json::Value;

use crate::common;

use common::{MockChild, Profile, read_jsonl, read_served, stderr_text};

/// A small streamed run with one request in flight, so the server sees its requests in
/// send order; the same seed gives the same prompts every time.
fn run(cwd: &Path, mock: &MockChild, dir: &str, extra: &[&str]) -> std::process::Output {
    Profile::new("mock-model")
        .url(&mock.url)
        .args(&[
            "--streaming",
            "--isl",
            "64",
            "--osl",
            "2",
            "--request-count",
            "4",
            "--concurrency",
            "1",
            "--random-seed",
            "3",
        ])
        .artifact_dir(dir)
        .args(extra)
        .run_in(cwd)
}

/// A mock recording what it serves (with `extra` flags), in a temporary directory.
fn recording_mock(extra: &[&str]) -> (tempfile::TempDir, std::path::PathBuf, MockChild) {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("served.jsonl");
    let mut args = vec!["--fast", "--record-requests", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mock = MockChild::spawn(&args);
    (tmp, log, mock)
}

/// What the mock served, after its writer caught up with the run that just ended.
fn served(log: &Path) -> Vec<Value> {
    std::thread::sleep(std::time::Duration::from_millis(300));
    read_served(log)
}

/// The requests the mock served from line `from` on.
fn served_since(log: &Path, from: usize) -> Vec<Value> {
    served(log).into_iter().skip(from).collect()
}

fn cached(lines: &[Value]) -> u64 {
    lines
        .iter()
        .filter(|l| l["endpoint"] == "chat")
        .map(|l| l["cached_tokens"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_kv_cache_reset_empties_the_servers_cache_before_the_run() {
    let (tmp, log, mock) = recording_mock(&["--prefix-cache-blocks", "4096"]);
    // The first run fills the cache; the same prompts again hit it.
    for dir in ["fill", "again"] {
        let out = run(tmp.path(), &mock, dir, &[]);
        assert!(out.status.success(), "{}", stderr_text(&out));
    }
    let before = served(&log).len();
    let hits = cached(&served_since(&log, before - 4));
    assert!(hits >= 4 * 48, "the repeated prompts hit the cache: {hits}");
    // With the reset the same prompts find it empty.
    let out = run(tmp.path(), &mock, "reset", &["--reset-kv-cache"]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let lines = served_since(&log, before);
    assert_eq!(lines[0]["endpoint"], "reset_prefix_cache", "{lines:?}");
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["endpoint"] == "reset_prefix_cache")
            .count(),
        1
    );
    assert_eq!(cached(&lines), 0, "{lines:?}");
    let summary = common::read_json(&tmp.path().join("reset/profile_export_aiperf.json"));
    assert_eq!(
        summary["input_config"]["endpoint"]["reset_kv_cache"],
        serde_json::json!({})
    );
}

#[test]
fn the_profiler_brackets_the_profiling_phase_only() {
    let (tmp, log, mock) = recording_mock(&[]);
    let out = run(
        tmp.path(),
        &mock,
        "prof",
        &["--server-profiler", "--warmup-request-count", "2"],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let records = read_jsonl(&tmp.path().join("prof/profile_export.jsonl"));
    let phase_of = |id: &Value| {
        records
            .iter()
            .find(|r| &r["metadata"]["x_request_id"] == id)
            .map(|r| {
                r["metadata"]["benchmark_phase"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
    };
    let lines = served(&log);
    let at = |name: &str| {
        let hits: Vec<&Value> = lines.iter().filter(|l| l["endpoint"] == name).collect();
        assert_eq!(hits.len(), 1, "{name}: {lines:?}");
        hits[0]["received_ns"].as_u64().unwrap()
    };
    let (start, stop) = (at("start_profile"), at("stop_profile"));
    let mut seen = (0, 0);
    for l in lines.iter().filter(|l| l["endpoint"] == "chat") {
        let received = l["received_ns"].as_u64().unwrap();
        match phase_of(&l["x_request_id"]).as_deref() {
            Some("warmup") => {
                seen.0 += 1;
                assert!(received < start, "a warmup request inside the profile: {l}");
            }
            Some("profiling") => {
                seen.1 += 1;
                assert!(received > start, "{l}");
                assert!(l["last_token_ns"].as_u64().unwrap() < stop, "{l}");
            }
            // The chat-template probe, before everything.
            _ => assert!(received < start, "{l}"),
        }
    }
    assert_eq!(seen, (2, 4));
}

#[test]
fn a_control_path_the_server_does_not_serve_ends_the_run() {
    let (tmp, log, mock) = recording_mock(&[]);
    let out = run(
        tmp.path(),
        &mock,
        "bad",
        &["--reset-kv-cache-path", "/flush"],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--reset-kv-cache: POST ") && stderr.contains("/flush answered HTTP 404"),
        "{stderr}"
    );
    // Nothing was sent (the mock records its 404s, none of them chat requests).
    assert!(served(&log).iter().all(|l| l["endpoint"] != "chat"));

    let out = run(
        tmp.path(),
        &mock,
        "bad2",
        &["--server-profiler-start-path", "/profile/begin"],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--server-profiler: POST "), "{stderr}");
    // The path must be one from the server's origin.
    let out = run(
        tmp.path(),
        &mock,
        "bad3",
        &["--reset-kv-cache-path", "flush"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
    // --transport takes http, the one transport.
    let out = run(tmp.path(), &mock, "t", &["--transport", "http"]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let out = run(tmp.path(), &mock, "t2", &["--transport", "grpc"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A busy server (503) is asked again after 1 s and 2 s; the reset carries the run's API
/// key, and only then does the run send.
#[test]
fn a_busy_server_is_asked_to_reset_again() {
    use common::raw_server::{After, RawServer, Reply};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let resets = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = resets.clone();
    let server = RawServer::start(move |r| {
        let status = if r.head.starts_with("post /reset_prefix_cache") {
            match seen.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => "503 Service Unavailable",
                _ => "200 OK",
            }
        } else {
            "500 Internal Server Error"
        };
        let head = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
        Reply::new(vec![head.into_bytes()], After::KeepOpen)
    });
    let tmp = tempfile::tempdir().unwrap();
    let out = Profile::new("m")
        .url(&server.url)
        .args(&[
            "--request-count",
            "1",
            "--reset-kv-cache",
            "--api-key",
            "sk-1",
        ])
        .artifact_dir("busy")
        .run_in(tmp.path());
    let stderr = stderr_text(&out);
    assert_eq!(resets.load(Ordering::SeqCst), 3, "{stderr}");
    assert_eq!(
        stderr.matches("answered HTTP 503; trying again").count(),
        2,
        "{stderr}"
    );
    let heads: Vec<String> = server.requests().iter().map(|r| r.head.clone()).collect();
    // The three tries come first, with the key; the run's requests after them.
    for h in &heads[..3] {
        assert!(h.starts_with("post /reset_prefix_cache "), "{heads:?}");
        assert!(h.contains("authorization: bearer sk-1"), "{h}");
    }
    assert!(
        heads[3..].iter().any(|h| h.starts_with("post /v1/chat")),
        "{heads:?}"
    );
}
