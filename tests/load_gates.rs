//! `--prefill-concurrency` and `--user-centric-rate`, against the mock server: its
//! `--record-requests` lines stamp when each request arrived and when its first and last
//! tokens left, which is what the gates are about.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

mod common;

use common::{MockChild, read_served, run_profile, stderr_text};

/// `aiperf profile -m m --tokenizer builtin --streaming` with small prompts, plus `extra`.
fn profile(dir: &Path, url: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "-m",
        "m",
        "-u",
        url,
        "--tokenizer",
        "builtin",
        "--isl",
        "10",
        "--random-seed",
        "7",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run_profile(&args)
}

fn ns(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// Most intervals [start, end) open at once.
fn max_overlap(intervals: &[(u64, u64)]) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for &(s, e) in intervals {
        edges.push((s, 1));
        edges.push((e, -1));
    }
    // At equal times an end comes before a start: the intervals are half-open.
    edges.sort();
    let (mut open, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        open += d;
        most = most.max(open);
    }
    most as usize
}

/// Runs 16 requests at --concurrency 8 against a mock with a long time to first token,
/// with `extra`; returns the most requests the mock had waiting for their first token and
/// the most it had in flight.
fn prefill_and_in_flight(extra: &[&str]) -> (usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("served.jsonl");
    let mock = MockChild::spawn(&[
        "--ttft",
        "150",
        "--itl",
        "10",
        "--record-requests",
        log.to_str().unwrap(),
    ]);
    let mut args = vec![
        "--streaming",
        "--osl",
        "30",
        "--request-count",
        "16",
        "--concurrency",
        "8",
    ];
    args.extend_from_slice(extra);
    let out = profile(&tmp.path().join("run"), &mock.url, &args);
    assert!(out.status.success(), "{}", stderr_text(&out));
    mock.terminate();
    let served = read_served(&log);
    assert_eq!(served.len(), 16);
    let prefill: Vec<_> = served
        .iter()
        .map(|r| (ns(r, "received_ns"), ns(r, "first_token_ns")))
        .collect();
    let whole: Vec<_> = served
        .iter()
        .map(|r| (ns(r, "received_ns"), ns(r, "last_token_ns")))
        .collect();
    (max_overlap(&prefill), max_overlap(&whole))
}

#[test]
fn prefill_concurrency_caps_requests_waiting_for_their_first_token() {
    let (prefill, in_flight) = prefill_and_in_flight(&["--prefill-concurrency", "2"]);
    assert!(
        prefill <= 2,
        "{prefill} requests waited for a first token at once"
    );
    assert!(
        in_flight > 2,
        "only {in_flight} requests were in flight at once"
    );
    // Without the gate the same run has more than 2 waiting: the check above can fail.
    let (ungated, _) = prefill_and_in_flight(&[]);
    assert!(ungated > 2, "{ungated}");
}

#[test]
fn prefill_concurrency_refuses_what_it_cannot_do() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let cases: [(&[&str], &str); 4] = [
        (
            &["--concurrency", "4", "--prefill-concurrency", "2"],
            "--prefill-concurrency needs --streaming",
        ),
        (
            &[
                "--streaming",
                "--concurrency",
                "4",
                "--prefill-concurrency",
                "5",
            ],
            "--prefill-concurrency (5) cannot be greater than --concurrency (4)",
        ),
        (
            &["--streaming", "--prefill-concurrency", "2"],
            "add --concurrency N",
        ),
        (
            &[
                "--streaming",
                "--concurrency",
                "4",
                "--warmup-request-count",
                "2",
                "--warmup-concurrency",
                "1",
                "--warmup-prefill-concurrency",
                "2",
            ],
            "--warmup-prefill-concurrency (2) cannot be greater than --warmup-concurrency",
        ),
    ];
    for (args, want) in cases {
        let out = profile(&dir, "http://127.0.0.1:9", args);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
