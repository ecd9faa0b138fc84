//! Synthetic multi-turn conversations and the warmup's own settings, end to end: the real
//! `aiperf` binary against the real mock server, which records what it received.
//! Tolerances hold on a loaded 2-core machine in a debug build.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{MockChild, read_json, read_jsonl, run_aiperf_in, stderr_text};
use serde_json::Value;

/// Runs `profile` (builtin tokenizer, small prompts, 3 output tokens) at `url` with
/// artifacts in `cwd/run`; returns the per-record JSONL and the JSON summary.
fn profile(cwd: &Path, url: &str, extra: &[&str]) -> (Vec<Value>, Value) {
    let mut args = vec![
        "profile",
        "--model",
        "mock-model",
        "--tokenizer",
        "builtin",
        "--streaming",
        "--url",
        url,
        "--isl",
        "20",
        "--osl",
        "3",
        "--random-seed",
        "3",
        "--artifact-dir",
        "run",
    ];
    args.extend_from_slice(extra);
    let out = run_aiperf_in(cwd, &args);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = cwd.join("run");
    (
        read_jsonl(&run.join("profile_export.jsonl")),
        read_json(&run.join("profile_export_aiperf.json")),
    )
}

fn md<'a>(r: &'a Value, key: &str) -> &'a Value {
    &r["metadata"][key]
}

/// Records of one phase grouped by conversation id, each group in turn order.
fn by_conversation<'a>(records: &'a [Value], phase: &str) -> BTreeMap<String, Vec<&'a Value>> {
    let mut groups: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for r in records.iter().filter(|r| md(r, "benchmark_phase") == phase) {
        let id = md(r, "conversation_id").as_str().unwrap().to_string();
        groups.entry(id).or_default().push(r);
    }
    for turns in groups.values_mut() {
        turns.sort_by_key(|r| md(r, "turn_index").as_u64());
    }
    groups
}

fn turn_indexes(turns: &[&Value]) -> Vec<u64> {
    turns
        .iter()
        .map(|r| md(r, "turn_index").as_u64().unwrap())
        .collect()
}

#[test]
fn every_turn_is_sent_with_its_history_after_the_think_time() {
    let tmp = tempfile::tempdir().unwrap();
    let server_log = tmp.path().join("server.jsonl");
    let mock = MockChild::spawn(&["--fast", "--record-requests", server_log.to_str().unwrap()]);
    let (records, summary) = profile(
        tmp.path(),
        &mock.url,
        &[
            "--conversation-num",
            "4",
            "--conversation-turn-mean",
            "3",
            "--conversation-turn-delay-mean",
            "160",
            "--conversation-turn-delay-ratio",
            "0.5",
            "--concurrency",
            "2",
            "--image-width-mean",
            "32",
            "--image-height-mean",
            "32",
        ],
    );
    mock.terminate();
    let server: BTreeMap<String, Value> = read_jsonl(&server_log)
        .into_iter()
        .map(|r| (r["x_request_id"].as_str().unwrap().to_string(), r))
        .collect();

    // inputs.json lists each turn's own body (no history), as AIPerf does.
    let inputs = read_json(&tmp.path().join("run/inputs.json"));
    let sessions = inputs["data"].as_array().unwrap();
    assert_eq!(sessions.len(), 4);
    for s in sessions {
        let payloads = s["payloads"].as_array().unwrap();
        assert_eq!(payloads.len(), 3);
        for p in payloads {
            assert_eq!(p["messages"].as_array().unwrap().len(), 1, "{p}");
        }
    }
    assert_eq!(records.len(), 12);
    assert_eq!(summary["request_count"]["avg"], 12.0);
    let conversations = by_conversation(&records, "profiling");
    assert_eq!(conversations.len(), 4);
    for turns in conversations.values() {
        assert_eq!(turn_indexes(turns), vec![0, 1, 2]);
        let isl: Vec<u64> = turns
            .iter()
            .map(|r| {
                r["metrics"]["input_sequence_length"]["value"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(isl[0], 20);
        // Each turn repeats the history: earlier prompts and replies, then its own prompt.
        assert!(
            isl[1] >= 20 + 3 + 20 && isl[2] >= isl[1] + 3 + 20,
            "{isl:?}"
        );
        for (k, r) in turns.iter().enumerate() {
            let seen = &server[md(r, "x_request_id").as_str().unwrap()];
            // The server got every earlier turn's image again, and its own.
            assert_eq!(seen["num_images"], k as u64 + 1, "turn {k}");
        }
        for pair in turns.windows(2) {
            // 160 ms x 0.5 of think time from the previous reply to the next send.
            let reply_end = md(pair[0], "request_end_ns").as_u64().unwrap();
            let next_start = md(pair[1], "request_start_ns").as_u64().unwrap();
            let gap_ms = (next_start - reply_end) as f64 / 1e6;
            assert!((79.0..250.0).contains(&gap_ms), "think time {gap_ms} ms");
            let scheduled = md(pair[1], "scheduled_ns").as_u64().unwrap();
            assert!(next_start >= scheduled, "sent before its time");
        }
    }
}

#[test]
fn warmup_sessions_finish_whole_conversations_before_profiling() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    let (records, summary) = profile(
        tmp.path(),
        &mock.url,
        &[
            "--num-conversations",
            "6",
            "--session-turns-mean",
            "3",
            "--session-turns-stddev",
            "1.5",
            "--num-warmup-sessions",
            "2",
            "--concurrency",
            "3",
        ],
    );
    let warmup = by_conversation(&records, "warmup");
    let profiling = by_conversation(&records, "profiling");
    assert_eq!(warmup.len(), 2);
    assert_eq!(profiling.len(), 6);
    let mut lengths = std::collections::BTreeSet::new();
    for turns in warmup.values().chain(profiling.values()) {
        // Whole conversations: turns 0..n with none missing.
        let n = turns.len() as u64;
        assert_eq!(turn_indexes(turns), (0..n).collect::<Vec<_>>());
        lengths.insert(n);
    }
    assert!(lengths.len() > 1, "turn counts vary: {lengths:?}");
    let profiled: usize = profiling.values().map(Vec::len).sum();
    assert_eq!(summary["request_count"]["avg"], profiled as f64);
    // Warmup ends before profiling starts.
    let last_warm = records
        .iter()
        .filter(|r| md(r, "benchmark_phase") == "warmup")
        .map(|r| md(r, "request_end_ns").as_u64().unwrap())
        .max()
        .unwrap();
    let first_profiled = records
        .iter()
        .filter(|r| md(r, "benchmark_phase") == "profiling")
        .map(|r| md(r, "request_start_ns").as_u64().unwrap())
        .min()
        .unwrap();
    assert!(first_profiled >= last_warm);
}

#[test]
fn the_warmup_takes_its_own_rate_and_grace_period() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    // Closed-loop profiling after a constant 50 req/s warmup.
    let (records, _) = profile(
        tmp.path(),
        &mock.url,
        &[
            "--warmup-request-count",
            "6",
            "--warmup-request-rate",
            "50",
            "--warmup-arrival-pattern",
            "constant",
            "--request-count",
            "4",
        ],
    );
    let phase = |p: &str| -> Vec<&Value> {
        records
            .iter()
            .filter(|r| md(r, "benchmark_phase") == p)
            .collect()
    };
    let mut scheduled: Vec<u64> = phase("warmup")
        .iter()
        .map(|r| {
            md(r, "scheduled_ns")
                .as_u64()
                .expect("warmup sends are scheduled")
        })
        .collect();
    scheduled.sort();
    assert_eq!(scheduled.len(), 6);
    for gap in scheduled.windows(2).map(|w| w[1] - w[0]) {
        assert!((19_900_000..20_100_000).contains(&gap), "gap {gap} ns");
    }
    let profiled = phase("profiling");
    assert_eq!(profiled.len(), 4);
    assert!(profiled.iter().all(|r| md(r, "scheduled_ns").is_null()));

    // A timed warmup against a slow server: what is still in flight 0.2 s after its end
    // is cancelled, instead of holding up profiling for seconds.
    let slow = MockChild::spawn(&["--ttft", "3000"]);
    let tmp = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let (records, _) = profile(
        tmp.path(),
        &slow.url,
        &[
            "--warmup-duration",
            "0.3",
            "--warmup-grace-period",
            "0.2",
            "--concurrency",
            "2",
            "--request-count",
            "2",
        ],
    );
    let warm: Vec<&Value> = records
        .iter()
        .filter(|r| md(r, "benchmark_phase") == "warmup")
        .collect();
    assert_eq!(warm.len(), 2);
    for r in &warm {
        assert_eq!(r["error"]["code"], 499, "{r}");
        assert_eq!(md(r, "was_cancelled"), true);
    }
    // Warmup cut at ~0.5 s, then two 3 s requests in parallel.
    let took = started.elapsed().as_secs_f64();
    assert!(took < 6.0, "{took} s");
}

#[test]
fn each_session_has_its_own_correlation_id_when_conversations_are_replayed() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    let (records, _) = profile(
        tmp.path(),
        &mock.url,
        &[
            "--conversation-num",
            "4",
            "--conversation-turn-mean",
            "2",
            "--num-dataset-entries",
            "2",
            "--concurrency",
            "2",
        ],
    );
    assert_eq!(records.len(), 8);
    let distinct = |key: &str| -> std::collections::BTreeSet<String> {
        records
            .iter()
            .map(|r| md(r, key).as_str().unwrap().to_string())
            .collect()
    };
    // Two dataset conversations, each replayed by two sessions.
    assert_eq!(distinct("conversation_id").len(), 2);
    assert_eq!(distinct("x_correlation_id").len(), 4);
    // Both turns of a session carry the session's id.
    let mut by_session: BTreeMap<u64, std::collections::BTreeSet<String>> = BTreeMap::new();
    for r in &records {
        let session = md(r, "session_num").as_u64().unwrap();
        let id = md(r, "x_correlation_id").as_str().unwrap().to_string();
        by_session.entry(session).or_default().insert(id);
    }
    assert_eq!(by_session.len(), 4);
    assert!(by_session.values().all(|ids| ids.len() == 1));
}
