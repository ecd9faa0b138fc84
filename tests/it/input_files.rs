//! Input files that used to be mishandled and now run: absolute timestamps, a byte-order
//! mark.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, RecordingServer};

/// Runs `aiperf profile` on `content` as the input file; fails the test if it takes more
/// than 60 s (a schedule that waits for decades would otherwise hang it). Returns stderr.
fn run_file(content: &[u8], kind: &str, extra: &[&str]) -> (String, RecordingServer) {
    let server = RecordingServer::start(true);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("in.jsonl");
    std::fs::write(&file, content).unwrap();
    let mut child = Command::new(BIN)
        .args(["profile", "-m", "m", "--tokenizer", "builtin"])
        .args(["--url", &server.addr.to_string()])
        .args([
            "--input-file",
            file.to_str().unwrap(),
            "--custom-dataset-type",
            kind,
        ])
        .args(["--artifact-dir", tmp.path().join("run").to_str().unwrap()])
        // Only the file's requests reach the server (no /metrics scrapes).
        .arg("--no-server-metrics")
        .args(extra)
        .env("HF_HUB_OFFLINE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("aiperf did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    (stderr, server)
}

#[test]
fn absolute_epoch_timestamps_are_replayed_from_the_first_one() {
    let (stderr, server) = run_file(
        b"{\"text\": \"a\", \"timestamp\": 1700000000000}\n{\"text\": \"b\", \"timestamp\": 1700000000050}\n",
        "single_turn",
        &[],
    );
    assert!(stderr.contains("absolute (epoch ms)"), "{stderr}");
    assert_eq!(server.heads().len(), 2);
}

#[test]
fn a_byte_order_mark_is_skipped() {
    let (_, server) = run_file(
        b"\xEF\xBB\xBF{\"text\": \"a\", \"timestamp\": 0}\n{\"text\": \"b\", \"timestamp\": 10}\n",
        "single_turn",
        &[],
    );
    assert_eq!(server.heads().len(), 2);
}

#[test]
fn server_token_counts_fall_back_to_the_tokenizer_with_one_warning() {
    let server = RecordingServer::start(false);
    let tmp = tempfile::tempdir().unwrap();
    let out = common::run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "-m",
            "m",
            "--tokenizer",
            "builtin",
            "--url",
            &server.addr.to_string(),
            "--request-count",
            "3",
            "--isl",
            "8",
            "--artifact-dir",
            "run",
            "--use-server-token-count",
        ],
    );
    let stderr = common::stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let warnings = stderr
        .lines()
        .filter(|l| l.contains("no usage token counts"))
        .count();
    assert_eq!(warnings, 1, "{stderr}");
    let json = common::read_json(&tmp.path().join("run/profile_export_aiperf.json"));
    // "one two three" is 3 tokens with the builtin tokenizer.
    assert_eq!(json["output_sequence_length"]["avg"], 3.0, "{json}");
    assert!(json["output_token_throughput"]["avg"].as_f64().unwrap() > 0.0);
}

#[test]
fn verbose_shows_debug_lines() {
    let server = RecordingServer::start(true);
    let tmp = tempfile::tempdir().unwrap();
    let out = common::run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "-m",
            "m",
            "--tokenizer",
            "builtin",
            "--url",
            &server.addr.to_string(),
            "--request-count",
            "2",
            "--isl",
            "8",
            "--artifact-dir",
            "run",
            "-v",
            "--ui",
            "none",
            "--api-key",
            "sk-hidden",
        ],
    );
    let stderr = common::stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for wanted in [
        "Resolved configuration",
        "HTTP client for",
        "Profiling phase: 2 sent",
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("DEBUG") && l.contains(wanted)),
            "{wanted}: {stderr}"
        );
    }
    assert!(!stderr.contains("sk-hidden"), "{stderr}");
}

/// `aiperf profile` with `--input-file PATH` (and `--custom-dataset-type kind`) against a
/// recording server, by a shell so that `PATH` may be a process substitution; its exit code,
/// stderr and wall time, the server, and the `inputs.json` it wrote.
fn run_path(path: &str, kind: &str) -> (Option<i32>, String, Duration, RecordingServer, String) {
    let server = RecordingServer::start(true);
    let tmp = tempfile::tempdir().unwrap();
    let command = format!(
        "exec {BIN} profile -m m --tokenizer builtin --url {} --input-file {path} \
         --custom-dataset-type {kind} --request-count 5 --artifact-dir {} --no-server-metrics \
         --ui none",
        server.addr,
        tmp.path().join("run").display()
    );
    let started = Instant::now();
    let out = Command::new("bash")
        .args(["-c", &command])
        .env("HF_HUB_OFFLINE", "1")
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let inputs = std::fs::read_to_string(tmp.path().join("run/inputs.json")).unwrap_or_default();
    (out.status.code(), stderr, started.elapsed(), server, inputs)
}

#[test]
fn endless_devices_are_refused_at_once() {
    for (device, kind) in [
        ("/dev/zero", "single_turn"),
        ("/dev/urandom", "single_turn"),
        ("/dev/zero", "raw_payload"),
        ("/dev/zero", "mooncake_trace"),
    ] {
        let (code, stderr, took, server, _) = run_path(device, kind);
        assert_eq!(code, Some(2), "{device} ({kind}): {stderr}");
        assert!(
            stderr.contains(&format!("{device}:1: byte ")) && stderr.contains("is not UTF-8 text"),
            "{device} ({kind}): {stderr}"
        );
        assert!(took < Duration::from_secs(5), "{device} took {took:?}");
        assert!(server.heads().is_empty());
    }
}

#[test]
fn a_piped_input_file_is_read_once_and_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("in.jsonl");
    let lines: Vec<String> = (0..5)
        .map(|i| format!("{{\"text\": \"line number {i}\"}}"))
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    // Through a pipe, as `<(zcat trace.jsonl.gz)` gives it.
    let (code, stderr, _, server, inputs) =
        run_path(&format!("<(cat {})", file.display()), "single_turn");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(server.heads().len(), 5, "{stderr}");
    // Every line was sent: none was taken by an earlier reading of the pipe.
    for i in 0..5 {
        assert!(
            inputs.contains(&format!("line number {i}")),
            "{i}: {inputs}"
        );
    }
}
