//! `--prefill-concurrency` and `--user-centric-rate`, against the mock server: its
//! `--record-requests` lines stamp when each request arrived and when its first and last
//! tokens left, which is what the gates are about.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::common;
use crate::common::Profile;

use common::{MockChild, read_served, stderr_text};

/// `aiperf profile -m m --tokenizer builtin --streaming` with small prompts, plus `extra`.
fn profile(dir: &Path, url: &str, extra: &[&str]) -> Output {
    Profile::new("m")
        .url(url)
        .args(&["--isl", "10", "--random-seed", "7"])
        .artifact_dir(dir)
        .args(extra)
        .run()
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
    let figures = (max_overlap(&prefill), max_overlap(&whole));
    eprintln!(
        "{extra:?}: at most {} waiting for a first token, {} in flight",
        figures.0, figures.1
    );
    figures
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
            "--prefill-concurrency (2) cannot be greater than the concurrency (1 without --concurrency)",
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

#[test]
fn user_centric_rate_keeps_the_rate_the_gaps_and_the_turn_order() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "20", "--itl", "5"]);
    let dir = tmp.path().join("run");
    // 4 users at 10 requests/s: each user's turns 0.4 s apart.
    let out = profile(
        &dir,
        &mock.url,
        &[
            "--streaming",
            "--osl",
            "5",
            "--user-centric-rate",
            "10",
            "--num-users",
            "4",
            "--conversation-turn-mean",
            "3",
            "--benchmark-duration",
            "4",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    mock.terminate();
    let records = common::read_jsonl(&dir.join("profile_export.jsonl"));
    let starts: Vec<(String, u64, u64)> = records
        .iter()
        .map(|r| {
            let m = &r["metadata"];
            let user = m["x_correlation_id"].as_str().unwrap().to_string();
            (user, ns(m, "turn_index"), ns(m, "request_start_ns"))
        })
        .collect();
    // About 40 requests in 4 s; the aggregate rate over the sends is close to 10/s.
    assert!(
        (34..=44).contains(&starts.len()),
        "{} requests",
        starts.len()
    );
    let first = starts.iter().map(|s| s.2).min().unwrap();
    let last = starts.iter().map(|s| s.2).max().unwrap();
    let rate = (starts.len() - 1) as f64 / ((last - first) as f64 / 1e9);
    assert!((8.5..=11.5).contains(&rate), "aggregate rate {rate:.2}/s");
    // Per user: turns in order 0, 1, 2, ... and at least 0.4 s apart (a little slack for
    // the timer).
    let mut users: std::collections::HashMap<&str, Vec<(u64, u64)>> = Default::default();
    for (user, turn, start) in &starts {
        users.entry(user).or_default().push((*start, *turn));
    }
    assert!(users.len() > 4, "no new user joined: {}", users.len());
    let mut min_gap = f64::MAX;
    for turns in users.values_mut() {
        turns.sort();
        for (k, (_, turn)) in turns.iter().enumerate() {
            assert_eq!(*turn, k as u64, "turn order {turns:?}");
        }
        for w in turns.windows(2) {
            min_gap = min_gap.min((w[1].0 - w[0].0) as f64 / 1e9);
        }
    }
    assert!(min_gap >= 0.395, "a user's turns came {min_gap:.3} s apart");
    eprintln!(
        "user-centric: {} requests, {rate:.2} req/s, {} users, smallest per-user gap {min_gap:.3} s",
        starts.len(),
        users.len()
    );
}

#[test]
fn user_centric_rate_refuses_what_aiperf_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let uc = ["--user-centric-rate", "2", "--num-users", "4"];
    let cases: [(Vec<&str>, &str); 5] = [
        (
            vec!["--user-centric-rate", "2"],
            "--user-centric-rate needs --num-users",
        ),
        (
            vec!["--num-users", "4"],
            "--num-users applies to --user-centric-rate only",
        ),
        (uc.to_vec(), "needs multi-turn conversations"),
        (
            [
                &uc[..],
                &["--conversation-turn-mean", "2", "--request-rate", "3"],
            ]
            .concat(),
            "cannot be used with --request-rate",
        ),
        (
            [
                &uc[..],
                &["--conversation-turn-mean", "2", "--request-count", "3"],
            ]
            .concat(),
            "--request-count (3) cannot be less than --num-users (4)",
        ),
    ];
    for (args, want) in cases {
        let out = profile(&dir, "http://127.0.0.1:9", &args);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_user_waits_for_its_reply_when_it_comes_after_the_gap() {
    let tmp = tempfile::tempdir().unwrap();
    // Replies take about 0.35 s; the users' gap is 0.2 s.
    let mock = MockChild::spawn(&["--ttft", "300", "--itl", "10"]);
    let dir = tmp.path().join("run");
    let out = profile(
        &dir,
        &mock.url,
        &[
            "--streaming",
            "--osl",
            "5",
            "--user-centric-rate",
            "10",
            "--num-users",
            "2",
            "--conversation-turn-mean",
            "3",
            "--request-count",
            "6",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    mock.terminate();
    let mut users: std::collections::HashMap<String, Vec<(u64, u64)>> = Default::default();
    for r in common::read_jsonl(&dir.join("profile_export.jsonl")) {
        let m = &r["metadata"];
        let user = m["x_correlation_id"].as_str().unwrap().to_string();
        let span = (ns(m, "request_start_ns"), ns(m, "request_end_ns"));
        users.entry(user).or_default().push(span);
    }
    assert_eq!(users.values().map(Vec::len).sum::<usize>(), 6);
    for turns in users.values_mut() {
        turns.sort();
        for w in turns.windows(2) {
            // Never before the reply, and at once after it (no wait for a later slot).
            assert!(
                w[1].0 >= w[0].1,
                "a turn was sent before its previous reply"
            );
            let after = (w[1].0 - w[0].1) as f64 / 1e9;
            assert!(after < 0.1, "the turn waited {after:.3} s after the reply");
        }
    }
}
