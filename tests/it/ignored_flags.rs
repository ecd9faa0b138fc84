//! Flags AIPerf accepts that have no effect in the combination given: the run goes on, and
//! one warning line says the flag is ignored and why.

use crate::common;

use common::{RecordingServer, run_aiperf_in};

/// Runs a short profile with `extra` and returns stderr (the run must succeed).
fn warnings_of(extra: &[&str], input: Option<&str>) -> String {
    let server = RecordingServer::start(true);
    let tmp = tempfile::tempdir().unwrap();
    let url = server.addr.to_string();
    let mut args = vec![
        "profile",
        "-m",
        "m",
        "--tokenizer",
        "builtin",
        "--url",
        &url,
        "--artifact-dir",
        "run",
    ];
    if let Some(content) = input {
        std::fs::write(tmp.path().join("in.jsonl"), content).unwrap();
        args.extend([
            "--input-file",
            "in.jsonl",
            "--custom-dataset-type",
            "single_turn",
        ]);
    } else {
        args.extend(["--request-count", "2", "--isl", "8"]);
    }
    args.extend_from_slice(extra);
    let out = run_aiperf_in(tmp.path(), &args);
    let stderr = common::stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    stderr
}

fn assert_warns_once(stderr: &str, flag: &str, why: &str) {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(flag))
        .collect();
    assert_eq!(lines.len(), 1, "{flag}: {stderr}");
    assert!(
        lines[0].contains("ignored") && lines[0].contains(why),
        "{}",
        lines[0]
    );
}

#[test]
fn ignored_flags_warn_once_and_the_run_goes_on() {
    let e = warnings_of(&["--wait-for-model-interval", "2"], None);
    assert_warns_once(&e, "--wait-for-model-interval", "--wait-for-model-timeout");
    let e = warnings_of(&["--isl-block-size", "64"], None);
    assert_warns_once(&e, "--isl-block-size", "mooncake_trace");
    let e = warnings_of(&["--conversation-turn-delay-mean", "100"], None);
    assert_warns_once(&e, "--conversation-turn-delay-", "one turn");

    let file = Some("{\"text\": \"hello\"}\n");
    let e = warnings_of(&["--isl", "100", "--osl", "5", "--osl-stddev", "1"], file);
    assert_warns_once(&e, "--isl ", "--input-file");
    assert_warns_once(&e, "--osl-stddev", "--input-file");
    let e = warnings_of(&["--num-dataset-entries", "5"], file);
    assert_warns_once(&e, "--num-dataset-entries", "--input-file");
}
