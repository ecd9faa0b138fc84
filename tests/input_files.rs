//! Input files that used to be mishandled and now run: absolute timestamps, a byte-order
//! mark.

mod common;

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
