//! AIPerf command lines run unchanged: value spellings, verbosity and log level, the
//! service-mesh flags accepted without effect, --wait-for-model-mode, and a typical AIPerf
//! command line against the mock server.

use crate::common;

use std::process::Command;

use aiperf::api::{
    ArrivalMode, Cli, Command as Sub, CustomDatasetType, EndpointType,
    ImageFormatArg as ImageFormat, ImageSampling, LogLevel, ProfileArgs, WaitForModelMode,
};
use common::{MockChild, run_aiperf_in, stderr_text};

fn parse(extra: &[&str]) -> ProfileArgs {
    let mut argv = vec!["aiperf", "profile", "-m", "m"];
    argv.extend_from_slice(extra);
    match Cli::parse_with_sources(argv) {
        Ok(Cli {
            command: Sub::Profile(a),
        }) => *a,
        Ok(_) => unreachable!(),
        Err(e) => panic!("{extra:?}: {e}"),
    }
}

#[test]
fn enum_values_take_any_case_and_either_separator() {
    assert_eq!(
        parse(&["--endpoint-type", "CHAT"]).endpoint_type,
        EndpointType::Chat
    );
    assert_eq!(
        parse(&["--endpoint-type=Completions"]).endpoint_type,
        EndpointType::Completions
    );
    assert_eq!(
        parse(&["--image-format", "PNG"]).image_format,
        ImageFormat::Png
    );
    assert_eq!(
        parse(&["--image-format", "Jpeg"]).image_format,
        ImageFormat::Jpeg
    );
    for (value, want) in [
        ("SINGLE_TURN", CustomDatasetType::SingleTurn),
        ("single-turn", CustomDatasetType::SingleTurn),
        ("multi-turn", CustomDatasetType::MultiTurn),
        ("mooncake-trace", CustomDatasetType::MooncakeTrace),
        ("random-pool", CustomDatasetType::RandomPool),
        ("Random_Pool", CustomDatasetType::RandomPool),
    ] {
        assert_eq!(
            parse(&["--custom-dataset-type", value]).custom_dataset_type,
            Some(want),
            "{value}"
        );
    }
    for (value, want) in [
        ("shuffle_cycle", ImageSampling::ShuffleCycle),
        ("SEQUENTIAL_CYCLE", ImageSampling::SequentialCycle),
        (
            "random-with-replacement",
            ImageSampling::RandomWithReplacement,
        ),
    ] {
        assert_eq!(
            parse(&["--image-source-sampling", value]).image_source_sampling,
            want,
            "{value}"
        );
    }
    for (value, want) in [
        ("concurrency_burst", ArrivalMode::ConcurrencyBurst),
        ("concurrency-burst", ArrivalMode::ConcurrencyBurst),
        ("CONSTANT", ArrivalMode::Constant),
    ] {
        assert_eq!(
            parse(&["--request-rate-mode", value]).request_rate_mode,
            want
        );
        assert_eq!(parse(&["--arrival-pattern", value]).request_rate_mode, want);
    }
    assert_eq!(
        parse(&["--warmup-arrival-pattern", "Gamma"]).warmup_arrival_pattern,
        Some(ArrivalMode::Gamma)
    );
    assert_eq!(
        parse(&["--ui", "NONE"]).ui_type,
        Some(aiperf::api::UiType::None)
    );
    for (value, want) in [
        ("TRACE", LogLevel::Trace),
        ("debug", LogLevel::Debug),
        ("Warning", LogLevel::Warning),
        ("CRITICAL", LogLevel::Critical),
        ("notice", LogLevel::Notice),
        ("SUCCESS", LogLevel::Success),
    ] {
        assert_eq!(parse(&["--log-level", value]).logging.log_level, want);
    }
    assert_eq!(
        parse(&["--wait-for-model-mode", "BOTH"]).wait_for_model_mode,
        WaitForModelMode::Both
    );
}

#[test]
fn a_value_that_matches_nothing_is_refused_with_the_list() {
    let err = Cli::parse_with_sources(["aiperf", "profile", "-m", "m", "--image-format", "gif"])
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("'gif'") && text.contains("png, jpeg, random"),
        "{text}"
    );
    assert_eq!(err.exit_code(), 2);
}

#[test]
fn aiperf_defaults_for_the_new_flags() {
    let a = parse(&[]);
    assert_eq!(a.logging.log_level, LogLevel::Info);
    assert!(!a.verbose && !a.logging.extra_verbose);
    assert_eq!(a.wait_for_model_mode, WaitForModelMode::Inference);
    assert!(!a.tokenizer_trust_remote_code);
    assert!(!a.collectors.no_gpu_telemetry && !a.collectors.no_server_metrics);
    let a = parse(&["-vv", "--tokenizer-trust-remote-code"]);
    assert!(a.logging.extra_verbose && a.tokenizer_trust_remote_code);
    assert!(parse(&["--extra-verbose"]).logging.extra_verbose);
    assert!(parse(&["-v"]).verbose && parse(&["--verbose"]).verbose);
    let a = parse(&["--max-workers", "8", "--record-processors", "2"]);
    assert_eq!(a.service.workers_max, Some(8));
    assert_eq!(a.service.record_processor_service_count, Some(2));
}

/// `aiperf profile <args>` in a fresh directory, against `mock`; exit code and stderr.
fn run_against(mock: &MockChild, args: &[&str]) -> (Option<i32>, String, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let mut all = vec!["profile", "-u", mock.url.as_str()];
    all.extend_from_slice(args);
    let out = run_aiperf_in(tmp.path(), &all);
    (out.status.code(), stderr_text(&out), tmp)
}

const SMALL: [&str; 10] = [
    "-m",
    "mock-model",
    "--tokenizer",
    "builtin",
    "--request-count",
    "3",
    "--isl",
    "8",
    "--osl",
    "4",
];

#[test]
fn concurrency_burst_is_closed_loop_and_refused_with_a_rate() {
    let mock = MockChild::spawn(&["--fast"]);
    let mut args = SMALL.to_vec();
    args.extend([
        "--request-rate-mode",
        "concurrency_burst",
        "--concurrency",
        "2",
    ]);
    let (code, stderr, tmp) = run_against(&mock, &args);
    assert_eq!(code, Some(0), "{stderr}");
    let json = common::read_json(
        &tmp.path()
            .join("artifacts/mock-model-chat-concurrency2/profile_export_aiperf.json"),
    );
    assert_eq!(json["request_count"]["avg"], 3.0, "{json}");

    args.extend(["--request-rate", "5"]);
    let (code, stderr, _) = run_against(&mock, &args);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--request-rate-mode concurrency_burst is closed-loop --concurrency"),
        "{stderr}"
    );
}

#[test]
fn log_level_and_verbosity_choose_the_detail() {
    let mock = MockChild::spawn(&["--fast"]);
    let lines = |extra: &[&str]| {
        let mut args = SMALL.to_vec();
        args.extend_from_slice(extra);
        let (code, stderr, _) = run_against(&mock, &args);
        assert_eq!(code, Some(0), "{stderr}");
        let count = |level: &str| stderr.lines().filter(|l| l.contains(level)).count();
        let traced = stderr
            .lines()
            .filter(|l| l.contains("TRACE") && l.contains("(profiling): HTTP 200"))
            .count();
        (count("INFO"), count("DEBUG"), traced)
    };
    let (info, debug, traced) = lines(&[]);
    assert!(info > 0 && debug == 0 && traced == 0);
    let (info, debug, traced) = lines(&["--log-level", "WARNING"]);
    assert!(info == 0 && debug == 0 && traced == 0);
    let (info, debug, traced) = lines(&["-v"]);
    assert!(info > 0 && debug > 0 && traced == 0);
    // -vv and --log-level trace: one trace line per request.
    assert_eq!(lines(&["-vv"]).2, 3);
    assert_eq!(lines(&["--log-level", "trace"]).2, 3);
    assert_eq!(lines(&["--extra-verbose"]).2, 3);
}

#[test]
fn service_flags_are_accepted_and_named_once_each() {
    let mock = MockChild::spawn(&["--fast"]);
    let mut args = SMALL.to_vec();
    args.extend([
        "--zmq-host",
        "10.1.2.3",
        "--zmq-ipc-path",
        "/tmp/zmq",
        "--zmq-dual-bind",
        "--workers-max",
        "16",
        "--record-processor-service-count",
        "4",
        "--api-port",
        "9090",
        "--api-host",
        "0.0.0.0",
        "--stats-interval",
        "5",
        "--tokenizer-trust-remote-code",
        "--no-gpu-telemetry",
        "--no-server-metrics",
    ]);
    let (code, stderr, _) = run_against(&mock, &args);
    assert_eq!(code, Some(0), "{stderr}");
    for flag in [
        "--zmq-host",
        "--zmq-ipc-path",
        "--zmq-dual-bind",
        "--record-processor-service-count",
        "--api-port",
        "--api-host",
        "--stats-interval",
    ] {
        let named = stderr
            .lines()
            .filter(|l| l.contains("INFO") && l.contains(&format!("Ignoring {flag}:")))
            .count();
        assert_eq!(named, 1, "{flag}: {stderr}");
    }
    let flag = "--tokenizer-trust-remote-code: no Python code is run";
    assert_eq!(stderr.matches(flag).count(), 1, "{flag}: {stderr}");
    // `--workers-max` sets the sender threads: no line says it is ignored.
    assert!(!stderr.contains("Ignoring --workers-max"), "{stderr}");
    assert!(
        stderr.contains("Requests go out from 16 sender threads"),
        "{stderr}"
    );
    // The collector switches have an effect now: no line about them.
    assert!(!stderr.contains("--no-gpu-telemetry"), "{stderr}");
    assert!(!stderr.contains("--no-server-metrics"), "{stderr}");
}

#[test]
fn wait_for_model_mode_models_needs_the_model_listed() {
    let mock = MockChild::spawn(&["--fast", "--model", "served-model"]);
    let wait = [
        "--wait-for-model-timeout",
        "1",
        "--wait-for-model-interval",
        "0.2",
        "--wait-for-model-mode",
    ];
    let with = |mode: &str, model: &str| {
        let mut args = SMALL.to_vec();
        args[1] = model;
        args.extend(wait);
        args.push(mode);
        run_against(&mock, &args)
    };
    let (code, stderr, _) = with("models", "served-model");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("list the model at /v1/models"), "{stderr}");
    let (code, stderr, _) = with("models", "other-model");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("does not list other-model (it lists: served-model)"),
        "{stderr}"
    );
    let (code, stderr, _) = with("both", "other-model");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("does not list other-model"), "{stderr}");
    // The mock answers any model name, so a one-token request alone is enough.
    let (code, stderr, _) = with("inference", "other-model");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("answer a one-token request"), "{stderr}");
}

#[test]
fn wait_for_model_mode_inference_needs_a_successful_request() {
    let mock = MockChild::spawn(&["--fast", "--error-rate", "100"]);
    let mut args = SMALL.to_vec();
    args.extend([
        "--wait-for-model-timeout",
        "1",
        "--wait-for-model-interval",
        "0.2",
    ]);
    // Default mode: inference. The listing is fine but every request fails.
    let (code, stderr, _) = run_against(&mock, &args);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("a one-token request failed: 500"),
        "{stderr}"
    );
    args.extend(["--wait-for-model-mode", "models"]);
    let (_, stderr, _) = run_against(&mock, &args);
    assert!(stderr.contains("Server ready after"), "{stderr}");
}

#[test]
fn tokenizer_revision_picks_the_cached_snapshot() {
    let home = tempfile::tempdir().unwrap();
    let repo = home.path().join("hub/models--acme--tok");
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::create_dir_all(repo.join("snapshots/c0ffee")).unwrap();
    std::fs::write(repo.join("refs/v2"), "c0ffee").unwrap();
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/gpt2/tokenizer.json"
        ),
        repo.join("snapshots/c0ffee/tokenizer.json"),
    )
    .unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    let run = |revision: &str| {
        let tmp = tempfile::tempdir().unwrap();
        let out = Command::new(common::BIN)
            .args(["profile", "-u", &mock.url, "-m", "mock-model"])
            .args(["--tokenizer", "acme/tok", "--tokenizer-revision", revision])
            .args(["--request-count", "2", "--isl", "8", "--osl", "4"])
            .current_dir(tmp.path())
            .env("HF_HOME", home.path())
            .env("HF_HUB_OFFLINE", "1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
        stderr_text(&out)
    };
    let stderr = run("v2");
    assert!(!stderr.contains("builtin"), "{stderr}");
    let stderr = run("main");
    assert!(
        stderr.contains("not in the local cache") && stderr.contains("builtin"),
        "{stderr}"
    );
}

/// A typical AIPerf VLM command line, unchanged (only the URL points at the mock).
/// `--export-level records` is left out: this build does not take it yet.
#[test]
fn a_typical_aiperf_command_line_runs_unchanged() {
    let server_log = tempfile::NamedTempFile::new().unwrap();
    let mock = MockChild::spawn(&[
        "--fast",
        "--record-requests",
        server_log.path().to_str().unwrap(),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let out = run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "-m",
            "Qwen/Qwen2-VL-2B-Instruct",
            "--endpoint-type",
            "chat",
            "--streaming",
            "-u",
            &mock.url,
            "--image-width-mean",
            "512",
            "--image-height-mean",
            "512",
            "--synthetic-input-tokens-mean",
            "100",
            "--output-tokens-mean",
            "100",
            "--concurrency",
            "4",
            "--request-count",
            "20",
            "--no-gpu-telemetry",
            "--no-server-metrics",
            "-vv",
            "--export-level",
            "records",
        ],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let dir = tmp
        .path()
        .join("artifacts/Qwen_Qwen2-VL-2B-Instruct-chat-concurrency4");
    let json = common::read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(json["request_count"]["avg"], 20.0, "{json}");
    assert_eq!(
        common::read_jsonl(&dir.join("profile_export.jsonl")).len(),
        20
    );
    let served = common::read_served(server_log.path());
    assert_eq!(served.len(), 20);
    // -vv: one trace line per request.
    let traced = stderr
        .lines()
        .filter(|l| l.contains("TRACE") && l.contains("(profiling): HTTP 200"))
        .count();
    assert_eq!(traced, 20, "{stderr}");
}

/// The README's first command (the main job), word for word, in a fresh directory.
#[test]
fn the_readme_quick_start_runs_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "--model",
            "Qwen/Qwen2-VL-2B-Instruct",
            "--endpoint-type",
            "chat",
            "--image-width-mean",
            "512",
            "--image-height-mean",
            "512",
            "--synthetic-input-tokens-mean",
            "100",
            "--output-tokens-mean",
            "100",
            "--streaming",
            "--request-count",
            "20",
            "--concurrency",
            "4",
            "--mock-server",
        ],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("NVIDIA AIPerf | LLM Metrics"), "{stdout}");
    let dir = tmp
        .path()
        .join("artifacts/Qwen_Qwen2-VL-2B-Instruct-chat-concurrency4");
    let json = common::read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(json["request_count"]["avg"], 20.0, "{json}");
    assert_eq!(json["image_token_count"]["avg"], 326.0, "{json}");
    assert!(dir.join(".aiperf_results_ready.json").is_file());
}

#[test]
fn a_config_file_sets_flags_and_the_command_line_wins() {
    let mock = MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    let config = format!(
        "schemaVersion: \"2.0\"\nbenchmark:\n  model: mock-model\n  endpoint: {{url: \"{}\", type: CHAT, streaming: true}}\n  dataset:\n    type: synthetic\n    prompts: {{isl: 8, osl: 4}}\n  phases: {{type: concurrency, concurrency: 2, requests: 6}}\n  artifacts: {{dir: from-file}}\n",
        mock.url
    );
    std::fs::write(tmp.path().join("bench.yaml"), config).unwrap();
    let out = run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "--config",
            "bench.yaml",
            "--tokenizer",
            "builtin",
            "--request-count",
            "4",
        ],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json = common::read_json(&tmp.path().join("from-file/profile_export_aiperf.json"));
    // requests: 6 in the file, 4 on the command line.
    assert_eq!(json["request_count"]["avg"], 4.0, "{json}");
    let jsonl = common::read_jsonl(&tmp.path().join("from-file/profile_export.jsonl"));
    assert_eq!(jsonl.len(), 4);
    // streaming: true in the file gives time to first token.
    assert!(
        json["time_to_first_token"]["avg"].as_f64().is_some(),
        "{json}"
    );

    std::fs::write(
        tmp.path().join("bad.yaml"),
        "benchmark:\n  model: m\n  endpoint: {url: x, stream: true}\n",
    )
    .unwrap();
    let out = run_aiperf_in(tmp.path(), &["profile", "-f", "bad.yaml"]);
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--config bad.yaml: benchmark.endpoint.stream: unknown or unsupported key"),
        "{stderr}"
    );
}
