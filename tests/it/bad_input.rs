//! Bad command lines stop before anything is sent: exit 2 and one error line naming the flag,
//! the value and what would be accepted.

use std::net::TcpListener;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_aiperf");

/// Runs `aiperf profile` against a listening socket that must never see a connection.
fn rejected(extra: &[&str]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = listener.local_addr().unwrap().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut cmd = Command::new(BIN);
    cmd.args(["profile", "-m", "org/model"]);
    if !extra.contains(&"--tokenizer") {
        cmd.args(["--tokenizer", "builtin"]);
    }
    if !extra.contains(&"--url") {
        cmd.args(["--url", &url]);
    }
    let out = cmd
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .args(extra)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
    assert!(
        listener.accept().is_err(),
        "{extra:?}: a connection was made"
    );
    assert!(!dir.join("profile_export.jsonl").exists(), "{extra:?}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{extra:?}: {stderr}");
    errors[0].to_string()
}

fn assert_names(extra: &[&str], wanted: &[&str]) {
    let line = rejected(extra);
    for w in wanted {
        assert!(line.contains(w), "{extra:?}: {line:?} lacks {w:?}");
    }
}

#[test]
fn negative_counts_name_the_flag() {
    assert_names(&["--concurrency", "-4"], &["--concurrency", "-4", ">= 0"]);
    assert_names(&["--request-count=-1"], &["--request-count", "-1", ">= 0"]);
    assert_names(&["--isl", "-3"], &["--isl", "-3", ">= 0"]);
}

#[test]
fn zero_counts_and_durations() {
    assert_names(
        &["--concurrency", "0"],
        &["--concurrency", "0", "1 or more"],
    );
    assert_names(
        &["--request-count", "0"],
        &["--request-count", "0", "1 or more"],
    );
    assert_names(
        &["--request-timeout-seconds", "0"],
        &["--request-timeout-seconds", "0", "> 0"],
    );
    assert_names(
        &["--wait-for-model-interval", "0"],
        &["--wait-for-model-interval", "0", "> 0"],
    );
}

#[test]
fn stddev_without_mean() {
    assert_names(
        &["--output-tokens-stddev", "5"],
        &["--output-tokens-stddev", "--output-tokens-mean"],
    );
    assert_names(
        &["--image-width-stddev", "10"],
        &["--image-width-stddev 10", "--image-width-mean"],
    );
}

#[test]
fn image_settings_while_images_are_off() {
    assert_names(
        &["--image-batch-size", "2"],
        &["--image-batch-size 2", "--image-width-mean", "> 0"],
    );
    assert_names(
        &["--image-width-mean", "512"],
        &["--image-width-mean 512", "--image-height-mean 0"],
    );
}

#[test]
fn unreadable_tokenizer_path() {
    assert_names(
        &["--tokenizer", "/nonexistent/dir/tokenizer.json"],
        &[
            "--tokenizer",
            "/nonexistent/dir/tokenizer.json",
            "no such file",
        ],
    );
}

#[test]
fn extra_inputs_that_are_not_key_value_or_json() {
    assert_names(
        &["--extra-inputs", "ignore_eos"],
        &["--extra-inputs", "'ignore_eos'", "key:value"],
    );
    assert_names(
        &["--extra-inputs", "{\"a\": "],
        &["--extra-inputs", "JSON object"],
    );
}

#[test]
fn malformed_goodput() {
    assert_names(
        &["--goodput", "request_latency"],
        &["--goodput", "request_latency", "METRIC:VALUE"],
    );
    assert_names(
        &["--goodput", "no_such_metric:5"],
        &["--goodput", "no_such_metric", "known metrics"],
    );
}

#[test]
fn failure_flags_out_of_range() {
    assert_names(
        &["--failed-request-threshold", "1.5"],
        &["--failed-request-threshold", "1.5", "from 0 to 1"],
    );
    assert_names(
        &["--wait-for-model-timeout=-2"],
        &["--wait-for-model-timeout", "-2", ">= 0"],
    );
}

#[test]
fn bad_urls_and_enums() {
    assert_names(&["--url", "ftp://host"], &["--url", "ftp", "http://"]);
    assert_names(
        &["--endpoint-type", "rankings"],
        &["rankings", "--endpoint-type"],
    );
}

#[test]
fn mock_server_rejects_bad_fault_rates() {
    for (args, wanted) in [
        (vec!["--error-rate", "150"], "--error-rate: 150"),
        (
            vec!["--reset-rate", "60", "--stall-rate", "50"],
            "must be <= 100",
        ),
        (vec!["--workers", "0"], "--workers: give 1 or more"),
    ] {
        let out = Command::new(BIN)
            .args(["mock-server", "--port", "0"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(wanted), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "it must not start listening");
    }
}

#[test]
fn durations_too_large_to_represent() {
    let huge = "1e20";
    let shown = "100000000000000000000";
    let cases: &[(&[&str], &str)] = &[
        (
            &["--request-timeout-seconds", huge],
            "--request-timeout-seconds",
        ),
        (&["--benchmark-duration", huge], "--benchmark-duration"),
        (
            &[
                "--benchmark-duration",
                "5",
                "--benchmark-grace-period",
                huge,
            ],
            "--benchmark-grace-period",
        ),
        (
            &["--interrupt-grace-period", huge],
            "--interrupt-grace-period",
        ),
        (&["--warmup-duration", huge], "--warmup-duration"),
        (
            &["--warmup-duration", "1", "--warmup-grace-period", huge],
            "--warmup-grace-period",
        ),
        (
            &["--wait-for-model-timeout", huge],
            "--wait-for-model-timeout",
        ),
        (
            &[
                "--wait-for-model-timeout",
                "1",
                "--wait-for-model-interval",
                huge,
            ],
            "--wait-for-model-interval",
        ),
        (
            &[
                "--request-cancellation-rate",
                "10",
                "--request-cancellation-delay",
                huge,
            ],
            "--request-cancellation-delay",
        ),
    ];
    for (args, flag) in cases {
        assert_names(args, &[flag, shown, "at most 31536000 (one year)"]);
    }
    // Think times are in milliseconds.
    assert_names(
        &[
            "--conversation-turn-mean",
            "2",
            "--conversation-turn-delay-mean",
            huge,
        ],
        &[
            "--conversation-turn-delay-mean",
            shown,
            "milliseconds",
            "at most 31536000000",
        ],
    );
    assert_names(
        &[
            "--conversation-turn-mean",
            "2",
            "--conversation-turn-delay-mean",
            "5",
            "--conversation-turn-delay-stddev",
            huge,
        ],
        &[
            "--conversation-turn-delay-stddev",
            shown,
            "at most 31536000000",
        ],
    );
    assert_names(
        &[
            "--conversation-turn-mean",
            "2",
            "--conversation-turn-delay-mean",
            "5",
            "--conversation-turn-delay-ratio",
            huge,
        ],
        &["--conversation-turn-delay-ratio", shown, "at most 1000"],
    );
}

#[test]
fn sizes_too_large_to_allocate() {
    assert_names(
        &[
            "--image-width-mean",
            "100000",
            "--image-height-mean",
            "100000",
        ],
        &["--image-width-mean", "100000", "from 0 to 16384"],
    );
    assert_names(
        &[
            "--image-width-mean",
            "10000",
            "--image-height-mean",
            "10000",
        ],
        &[
            "--image-width-mean 10000 x --image-height-mean 10000",
            "100000000 pixels",
            "at most 67108864",
        ],
    );
    // Float notation reaches the range check instead of clap's "invalid digit".
    assert_names(
        &["--request-count", "1e12"],
        &[
            "--request-count",
            "1000000000000",
            "at most 10000000",
            "--benchmark-duration",
        ],
    );
    assert_names(
        &["--isl", "1e12"],
        &["--isl", "1000000000000", "at most 2000000"],
    );
    assert_names(
        &["--concurrency", "1e9"],
        &["--concurrency", "1000000000", "at most 100000"],
    );
    assert_names(
        &["--request-count", "1.5"],
        &["--request-count", "1.5", "whole number"],
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_synthetic_dataset_larger_than_memory_is_refused_before_building() {
    // 100 entries x 50 images of 8000 x 8000 noise: terabytes.
    assert_names(
        &[
            "--image-width-mean",
            "8000",
            "--image-height-mean",
            "8000",
            "--image-batch-size",
            "50",
            "--num-dataset-entries",
            "100",
            "--request-count",
            "100",
        ],
        &[
            "--image-batch-size 50",
            "--num-dataset-entries 100",
            "would take about",
            "memory available",
        ],
    );
}

#[test]
fn invalid_ports_are_refused_not_replaced_by_80() {
    assert_names(
        &["--url", "127.0.0.1:99999"],
        &["--url", "'99999'", "127.0.0.1:99999", "from 1 to 65535"],
    );
    assert_names(
        &["--url", "host:abc"],
        &["--url", "'abc'", "from 1 to 65535"],
    );
    assert_names(
        &["--url", "http://host:8000/#frag"],
        &["--url", "fragment", "drop it"],
    );
}

#[test]
fn flags_that_would_be_ignored_are_refused() {
    assert_names(
        &["--fixed-schedule-start-offset", "5"],
        &[
            "--fixed-schedule-start-offset",
            "fixed schedule",
            "--fixed-schedule",
        ],
    );
    assert_names(
        &["--fixed-schedule-auto-offset"],
        &["--fixed-schedule-auto-offset", "--fixed-schedule"],
    );
    // A typed default counts as given.
    assert_names(
        &["--benchmark-grace-period", "30"],
        &["--benchmark-grace-period 30", "--benchmark-duration"],
    );
    assert_names(
        &["--warmup-request-count", "2", "--warmup-grace-period", "5"],
        &["--warmup-grace-period 5", "--warmup-duration"],
    );
    assert_names(
        &["--request-cancellation-delay", "2"],
        &[
            "--request-cancellation-delay 2",
            "--request-cancellation-rate",
        ],
    );
    assert_names(
        &["--image-format", "jpeg"],
        &["--image-format", "images are off", "--image-width-mean"],
    );
    assert_names(
        &["--image-source", "assets"],
        &["--image-source", "images are off"],
    );
}

#[test]
fn absurd_output_lengths_and_rates_are_refused() {
    // Sent as max_tokens, 1e12 would only make the server fail every request.
    assert_names(
        &["--osl", "1e12"],
        &["--osl", "1000000000000", "at most 10000000"],
    );
    // One request, then a wait of 31 years for the next: refused with the length.
    assert_names(
        &["--request-rate", "1e-9", "--request-count", "2"],
        &[
            "--request-rate 1e-9",
            "2 requests take about 32 years",
            "more than one year",
        ],
    );
    // A duration bounds the run, whatever the rate.
    let out = Command::new(BIN)
        .args([
            "profile",
            "-m",
            "m",
            "--tokenizer",
            "builtin",
            "--mock-server",
        ])
        .args(["--request-rate", "1e-9", "--benchmark-duration", "0.3"])
        .args(["--benchmark-grace-period", "5", "--isl", "8"])
        .arg("--artifact-dir")
        .arg(tempfile::tempdir().unwrap().path().join("run"))
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_api_key_with_a_line_break_is_bad_input() {
    for key in ["sk-abc\n", "sk-abc\r\n", "sk-\rabc"] {
        let line = rejected(&["--api-key", key]);
        assert!(line.contains("--api-key"), "{line}");
        assert!(line.contains("line break"), "{line}");
        assert!(!line.contains("sk-"), "the key is never echoed: {line}");
    }
}

/// AIPerf's process plumbing (`proxy`, `service`, `plugins`) has no counterpart in this
/// one-process build: one line saying so, exit 2, whatever follows.
#[test]
fn aiperfs_process_subcommands_say_this_build_has_none() {
    for sub in ["proxy", "service", "plugins"] {
        let out = Command::new(BIN)
            .args([sub, "--some-flag", "x"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sub}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{sub}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: `aiperf {sub}` ")) && stderr.contains("has none"),
            "{sub}: {stderr}"
        );
    }
}
