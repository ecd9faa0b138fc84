//! Bad input files stop before anything is sent: exit 2 and one error line naming the
//! file, the line, the value and what would be accepted.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_aiperf");

/// Runs `aiperf profile --input-file <dir>/in.jsonl` (holding `content`) against `url`.
fn profile_file(dir: &Path, url: &str, content: &[u8], kind: &str, extra: &[&str]) -> Output {
    let file = dir.join("in.jsonl");
    std::fs::write(&file, content).unwrap();
    Command::new(BIN)
        .args(["profile", "-m", "m", "--tokenizer", "builtin", "--url", url])
        .args(["--input-file", file.to_str().unwrap()])
        .args(["--custom-dataset-type", kind])
        .args(["--artifact-dir", dir.join("run").to_str().unwrap()])
        .args(extra)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap()
}

/// The one error line of a run that must be refused before any connection.
fn refused(content: &[u8], kind: &str, extra: &[&str]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = listener.local_addr().unwrap().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let out = profile_file(tmp.path(), &url, content, kind, extra);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        listener.accept().is_err(),
        "a connection was made: {stderr}"
    );
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    errors[0].to_string()
}

fn assert_refused(content: &[u8], kind: &str, extra: &[&str], wanted: &[&str]) {
    let line = refused(content, kind, extra);
    for w in wanted {
        assert!(line.contains(w), "{line:?} lacks {w:?}");
    }
}

#[test]
fn a_trace_prompt_too_long_to_build() {
    assert_refused(
        b"{\"input_length\": 10, \"output_length\": 2}\n{\"input_length\": 1e9, \"output_length\": 2}\n",
        "mooncake_trace",
        &[],
        &["in.jsonl:2", "input_length", "1000000000", "1 to 2000000 tokens"],
    );
}

#[test]
fn timestamps_that_cannot_be_milliseconds() {
    // Epoch microseconds: would wrap once converted to ns.
    assert_refused(
        b"{\"text\": \"a\", \"timestamp\": 1e15}\n",
        "single_turn",
        &[],
        &[
            "in.jsonl:1",
            "timestamp",
            "1000000000000000",
            "milliseconds",
            "/ 1000",
        ],
    );
    // Epoch nanoseconds, as an integer.
    assert_refused(
        b"{\"text\": \"a\", \"timestamp\": 1700000000000}\n{\"text\": \"b\", \"timestamp\": 1700000000000000000}\n",
        "single_turn",
        &[],
        &["in.jsonl:2", "timestamp", "1700000000000000000", "milliseconds"],
    );
    // Offsets from the start spanning 463 days: a units mistake, not a schedule.
    assert_refused(
        b"{\"input_length\": 5, \"timestamp\": 0}\n{\"input_length\": 5, \"timestamp\": 40000000000}\n",
        "mooncake_trace",
        &[],
        &["in.jsonl:2", "timestamp", "40000000000", "463 days", "at most 365 days"],
    );
    assert_refused(
        b"{\"session_id\": \"s\", \"turns\": [{\"text\": \"a\"}, {\"text\": \"b\", \"delay\": 1e12}]}\n",
        "multi_turn",
        &[],
        &["in.jsonl:1", "turns[1].delay", "1000000000000", "one year"],
    );
}

#[test]
fn synthetic_image_flags_with_an_input_file() {
    assert_refused(
        b"{\"text\": \"a\"}\n",
        "single_turn",
        &["--image-format", "jpeg"],
        &["--image-format", "--input-file"],
    );
}

#[test]
fn output_lengths_follow_the_osl_rule() {
    assert_refused(
        b"{\"text\": \"a\"}\n{\"text\": \"b\", \"output_length\": 0}\n",
        "single_turn",
        &[],
        &[
            "in.jsonl:2",
            "output_length",
            "0 is not allowed",
            "1 to 10000000 tokens",
        ],
    );
    // Beyond any context window: never sent as max_tokens.
    assert_refused(
        b"{\"text\": \"a\", \"output_length\": 1e12}\n",
        "single_turn",
        &[],
        &[
            "in.jsonl:1",
            "output_length",
            "1000000000000 is not allowed",
        ],
    );
}

#[test]
fn a_data_url_with_bad_base64_or_no_image() {
    assert_refused(
        b"{\"text\": \"a\", \"image\": \"data:image/png;base64,iVBOR%%%\"}\n",
        "single_turn",
        &[],
        &["in.jsonl:1", "field 'image'", "invalid base64"],
    );
    // Valid base64 of text, not an image.
    assert_refused(
        b"{\"text\": \"a\"}\n{\"text\": \"b\", \"images\": [\"data:image/png;base64,aGVsbG8gd29ybGQ=\"]}\n",
        "single_turn",
        &[],
        &["in.jsonl:2", "images[0]", "readable image"],
    );
}

#[test]
fn a_binary_file_is_refused_at_its_line() {
    assert_refused(
        b"{\"text\": \"a\"}\n{\"text\": \"\xff\xfe\"}\n",
        "single_turn",
        &[],
        &["in.jsonl:2", "not UTF-8", "JSONL"],
    );
}
