//! Flag combinations that run, as AIPerf runs them: one flag wins over another, or has no
//! effect; the run goes on and a warning says which and why.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::common;
use common::{MockChild, Profile, read_json};

/// `aiperf profile` in `cwd` against the mock with the builtin tokenizer, into `cwd/run`;
/// exit 0 expected. Returns stderr and `profile_export_aiperf.json`.
fn run_ok(cwd: &Path, mock: &MockChild, args: &[&str]) -> (String, Value) {
    let out: Output = Profile::without_model()
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
    let (stderr, json) = run_ok(
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
