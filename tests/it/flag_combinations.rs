//! Flag combinations that run, as AIPerf runs them: one flag wins over another, or has no
//! effect; the run goes on and a warning says which and why.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::common;
use common::{MockChild, Profile, read_json};

/// `aiperf profile --model m` in `cwd` against the mock with the builtin tokenizer, into
/// `cwd/run`; exit 0 expected. Returns stderr and `profile_export_aiperf.json`.
fn run_ok(cwd: &Path, mock: &MockChild, args: &[&str]) -> (String, Value) {
    run_ok_from(Profile::new("m"), cwd, mock, args)
}

/// `run_ok` from `profile` (its model and first flags).
fn run_ok_from(profile: Profile, cwd: &Path, mock: &MockChild, args: &[&str]) -> (String, Value) {
    let out: Output = profile
        .url(&mock.url)
        .artifact_dir("run")
        .args(args)
        .run_in(cwd);
    let stderr = common::stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    (
        stderr,
        read_json(&cwd.join("run/profile_export_aiperf.json")),
    )
}

/// The warning lines of `stderr` that contain `text`.
fn warnings_with<'a>(stderr: &'a str, text: &str) -> Vec<&'a str> {
    stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(text))
        .collect()
}

#[test]
fn config_file_with_flags_it_also_sets_the_command_line_wins() {
    let mock = MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("bench.yaml"),
        "benchmark:\n  model: m\n  endpoint: {type: chat, streaming: true}\n  dataset:\n    prompts: {isl: {mean: 100, stddev: 5}, osl: 4}\n  phases: {type: concurrency, concurrency: 2, requests: 6}\n",
    )
    .unwrap();
    // A respelled value (`Chat`) before the overriding flags: all of them are still seen.
    let (stderr, json) = run_ok_from(
        Profile::without_model(),
        tmp.path(),
        &mock,
        &[
            "--config",
            "bench.yaml",
            "--endpoint-type",
            "Chat",
            "--isl",
            "30",
            "--request-count",
            "4",
        ],
    );
    let lines = warnings_with(&stderr, "--config bench.yaml: the command line overrides");
    assert_eq!(lines.len(), 1, "{stderr}");
    for setting in [
        "--endpoint-type=chat",
        "--synthetic-input-tokens-mean=100",
        "--request-count=6",
    ] {
        assert!(lines[0].contains(setting), "{}", lines[0]);
    }
    assert!(!lines[0].contains("stddev"), "{}", lines[0]);
    assert_eq!(json["request_count"]["avg"], 4.0, "{json}");
    // The typed mean over the file's stddev; the file's streaming stays.
    let config = &json["input_config"];
    assert_eq!(
        config["datasets"][0]["prompts"]["isl"],
        json!({"mean": 30.0, "stddev": 5.0})
    );
    assert_eq!(config["endpoint"]["streaming"], true);
}

#[test]
fn conversation_num_with_request_count_the_first_limit_reached_ends_profiling() {
    let mock = MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    // Single turn: 3 conversations are 3 requests, before the 5 asked for.
    let (stderr, json) = run_ok(
        tmp.path(),
        &mock,
        &["--conversation-num", "3", "--request-count", "5"],
    );
    assert_eq!(json["request_count"]["avg"], 3.0, "{json}");
    let lines = warnings_with(&stderr, "--request-count 5 is not reached");
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("--conversation-num 3 ends profiling first"));

    // Two turns each: 3 conversations are 6 requests; the count stops at 4.
    let (stderr, json) = run_ok(
        tmp.path(),
        &mock,
        &[
            "--conversation-num",
            "3",
            "--request-count",
            "4",
            "--conversation-turn-mean",
            "2",
            "--concurrency",
            "2",
        ],
    );
    assert_eq!(json["request_count"]["avg"], 4.0, "{json}");
    let lines = warnings_with(
        &stderr,
        "--request-count 4 ends profiling before --conversation-num 3 is reached",
    );
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("(3 conversations are 6 requests)"));
}

#[test]
fn seq_dist_with_isl_and_osl_the_distribution_gives_the_lengths() {
    let mock = MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    let (stderr, json) = run_ok(
        tmp.path(),
        &mock,
        &[
            "--seq-dist",
            "20,3:100",
            "--isl",
            "200",
            "--osl",
            "9",
            "--request-count",
            "4",
        ],
    );
    for flag in ["--isl", "--osl"] {
        let lines = warnings_with(&stderr, &format!("{flag} is ignored"));
        assert_eq!(lines.len(), 1, "{flag}: {stderr}");
        assert!(lines[0].contains("--seq-dist gives each request its input and output lengths"));
    }
    // Every request has the distribution's lengths: 20 tokens in, at most 3 out.
    for (metric, want) in [
        ("input_sequence_length", 20.0),
        ("output_sequence_length", 3.0),
    ] {
        assert_eq!(json[metric]["min"], want, "{metric}: {json}");
        assert_eq!(json[metric]["max"], want, "{metric}: {json}");
    }
}

#[test]
fn streaming_with_an_endpoint_type_that_answers_in_one_piece_is_turned_off() {
    let mock = MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    let (stderr, json) = run_ok(
        tmp.path(),
        &mock,
        &[
            "--endpoint-type",
            "nim_rankings",
            "--streaming",
            "--request-count",
            "3",
        ],
    );
    let lines = warnings_with(&stderr, "--streaming is ignored");
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("--endpoint-type nim_rankings answers in one piece"),
        "{}",
        lines[0]
    );
    assert_eq!(json["request_count"]["avg"], 3.0, "{json}");
    assert_eq!(json["input_config"]["endpoint"]["streaming"], false);
    // Unstreamed records: latency, no time to first token.
    let records = common::read_jsonl(&tmp.path().join("run/profile_export.jsonl"));
    assert_eq!(records.len(), 3);
    for r in &records {
        assert!(r["metrics"]["request_latency"].is_object(), "{r}");
        assert!(r["metrics"].get("time_to_first_token").is_none(), "{r}");
    }
}

#[test]
fn prefill_concurrency_without_concurrency_runs_at_concurrency_1() {
    let mock = MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    let (stderr, json) = run_ok(
        tmp.path(),
        &mock,
        &[
            "--streaming",
            "--prefill-concurrency",
            "1",
            "--request-count",
            "4",
        ],
    );
    let lines = warnings_with(&stderr, "--prefill-concurrency 1 changes nothing");
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("it equals the concurrency (1 without --concurrency)"),
        "{}",
        lines[0]
    );
    assert_eq!(json["request_count"]["avg"], 4.0, "{json}");
    let phase = &json["input_config"]["phases"][0];
    assert_eq!(phase["concurrency"], 1, "{phase}");
    assert_eq!(phase["prefill_concurrency"], 1, "{phase}");
    // One at a time: each request is sent after the previous one ended.
    let mut records = common::read_jsonl(&tmp.path().join("run/profile_export.jsonl"));
    let ns = |r: &Value, k: &str| r["metadata"][k].as_u64().unwrap();
    records.sort_by_key(|r| ns(r, "request_start_ns"));
    for pair in records.windows(2) {
        assert!(
            ns(&pair[1], "request_start_ns") >= ns(&pair[0], "request_end_ns"),
            "{pair:?}"
        );
    }
}

#[test]
fn model_selection_strategy_with_one_model_every_request_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    let served = tmp.path().join("served.jsonl");
    let mock = MockChild::spawn(&["--fast", "--record-requests", served.to_str().unwrap()]);
    let (stderr, json) = run_ok(
        tmp.path(),
        &mock,
        &[
            "--model-selection-strategy",
            "random",
            "--request-count",
            "4",
        ],
    );
    let lines = warnings_with(&stderr, "--model-selection-strategy random is ignored");
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("every request names the one given"));
    assert_eq!(json["request_count"]["avg"], 4.0, "{json}");
    mock.terminate();
    let models: Vec<Value> = common::read_served(&served)
        .iter()
        .map(|r| r["model"].clone())
        .collect();
    assert_eq!(models, vec![json!("m"); 4]);
}
