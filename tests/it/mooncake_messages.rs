//! `mooncake_trace` rows with their own `messages`: what arrives at the server (the mock's
//! `--record-requests` roles), what `inputs.json` holds, and file:line errors.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::{read_json, run_aiperf_in as aiperf, stderr_text as stderr};
use serde_json::{Value, json};

/// Runs the trace at a recording mock; returns the run and the recorded requests.
fn replay(dir: &Path, trace: &str, requests: &str) -> (Output, Vec<Value>) {
    std::fs::write(dir.join("trace.jsonl"), trace).unwrap();
    let rec = dir.join("server.jsonl");
    let mock = common::MockChild::spawn(&["--fast", "--record-requests", rec.to_str().unwrap()]);
    let url = format!("localhost:{}", mock.addr.port());
    let out = aiperf(
        dir,
        &[
            "profile",
            "--model",
            "m",
            "--url",
            &url,
            "--input-file",
            "trace.jsonl",
            "--custom-dataset-type",
            "mooncake_trace",
            "--tokenizer",
            "builtin",
            "--artifact-dir",
            "run",
            "--request-count",
            requests,
        ],
    );
    mock.terminate();
    (out, common::read_served(&rec))
}

fn roles(records: &[Value]) -> Vec<Value> {
    let mut roles: Vec<Value> = records.iter().map(|r| r["roles"].clone()).collect();
    roles.sort_by_key(|r| r.as_array().map_or(0, Vec::len));
    roles
}

#[test]
fn history_rows_arrive_with_exactly_their_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = concat!(
        r#"{"session_id": "s", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}], "output_length": 3}"#,
        "\n",
        r#"{"session_id": "s", "message_mode": "history", "messages": [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"}, {"role": "user", "content": [{"type": "text", "text": "How are you?"}]}], "output_length": 3, "tools": [{"type": "function", "function": {"name": "f"}}]}"#,
        "\n",
    );
    let (out, records) = replay(tmp.path(), trace, "2");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("unknown field"), "{}", stderr(&out));
    assert_eq!(records.len(), 2, "{records:?}");
    // Verbatim: no reply of the first turn is carried into the second.
    assert_eq!(
        roles(&records),
        [
            json!(["system", "user"]),
            json!(["user", "assistant", "user"])
        ]
    );
    let inputs = read_json(&tmp.path().join("run/inputs.json"));
    let second = &inputs["data"][0]["payloads"][1];
    assert_eq!(second["messages"][1]["content"], "Hi!");
    assert_eq!(second["tools"][0]["function"]["name"], "f");
    assert_eq!(second["max_completion_tokens"], 3);
    assert_eq!(second["model"], "m");
}

#[test]
fn delta_rows_carry_the_replies_received() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = concat!(
        r#"{"session_id": "d", "message_mode": "delta", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}], "output_length": 4, "tools": [{"type": "function", "function": {"name": "g"}}]}"#,
        "\n",
        r#"{"session_id": "d", "message_mode": "delta", "messages": [{"role": "user", "content": "And then?"}], "output_length": 4}"#,
        "\n",
        r#"{"session_id": "d", "message_mode": "delta", "messages": [{"role": "user", "content": "Why?"}], "output_length": 4}"#,
        "\n",
    );
    let (out, records) = replay(tmp.path(), trace, "3");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        roles(&records),
        [
            json!(["system", "user"]),
            json!(["system", "user", "assistant", "user"]),
            json!(["system", "user", "assistant", "user", "assistant", "user"]),
        ]
    );
    // Each later request counts the replies it carries: its prompt grows by more than its
    // own new message.
    let mut text: Vec<u64> = records
        .iter()
        .map(|r| r["text_tokens"].as_u64().unwrap())
        .collect();
    text.sort();
    assert!(text[1] >= text[0] + 4 && text[2] >= text[1] + 4, "{text:?}");
    // Later delta rows inherit the tools declared first.
    let inputs = read_json(&tmp.path().join("run/inputs.json"));
    assert_eq!(
        inputs["data"][0]["payloads"][2]["tools"][0]["function"]["name"],
        "g"
    );
}

#[test]
fn payload_rows_arrive_as_written_and_count_their_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let payload = json!({
        "model": "other-model",
        "messages": [{"role": "user", "content": "Tell me about rivers."}],
        "stream": true,
        "max_tokens": 5,
        "temperature": 0.25,
        "custom": {"nested": [1, 2.5, "x"]}
    });
    let trace = format!(
        "{}\n{}\n{}\n",
        json!({"session_id": "p", "payload": payload}),
        json!({"session_id": "t", "text_input": "Tell me about rivers.", "output_length": 2}),
        json!({"session_id": "m", "messages": [{"role": "user", "content": "Tell me about rivers."}], "output_length": 2}),
    );
    let (out, records) = replay(tmp.path(), &trace, "3");
    assert!(out.status.success(), "{}", stderr(&out));
    // The payload's own model, stream and token limit, not the flags' (model m, no
    // streaming, no limit).
    let sent = records
        .iter()
        .find(|r| r["model"] == "other-model")
        .expect("the payload row was sent");
    assert_eq!(sent["stream"], true, "{sent}");
    assert_eq!(sent["output_tokens"], 5, "{sent}");
    assert_eq!(sent["roles"], json!(["user"]));
    assert_eq!(
        records.iter().filter(|r| r["model"] == "m").count(),
        2,
        "{records:?}"
    );
    let inputs = read_json(&tmp.path().join("run/inputs.json"));
    let bodies: Vec<&Value> = inputs["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["payloads"][0])
        .collect();
    assert!(bodies.contains(&&payload), "{inputs}");
    // All three send the same text, so all three count the same input length.
    let isl: Vec<u64> = common::read_jsonl(&tmp.path().join("run/profile_export.jsonl"))
        .iter()
        .map(|r| {
            r["metrics"]["input_sequence_length"]["value"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(isl.len(), 3, "{isl:?}");
    assert!(isl[0] > 1 && isl.iter().all(|&n| n == isl[0]), "{isl:?}");
}

#[test]
fn malformed_messages_are_refused_with_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (r#"{"messages": [5]}"#, "trace.jsonl:2: field 'messages[0]'"),
        (r#"{"messages": []}"#, "trace.jsonl:2: field 'messages'"),
        (
            r#"{"messages": [{"role": "user", "content": "x"}], "input_length": 5}"#,
            "trace.jsonl:2: field 'input_length'",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "x"}], "message_mode": "replay"}"#,
            "trace.jsonl:2: field 'message_mode'",
        ),
        (
            r#"{"input_length": 5, "tools": []}"#,
            "trace.jsonl:2: field 'tools'",
        ),
        (
            r#"{"session_id": "a", "message_mode": "delta", "messages": [{"role": "user", "content": "x"}]}"#,
            "trace.jsonl:2: field 'message_mode': this is a messages row (message_mode delta) but line 1",
        ),
        (
            r#"{"session_id": "a", "payload": {"messages": []}}"#,
            "trace.jsonl:2: field 'session_id': this is a payload row but line 1",
        ),
        (r#"{"payload": [1]}"#, "trace.jsonl:2: field 'payload'"),
        (
            r#"{"payload": {"model": "m"}, "messages": [{"role": "user"}]}"#,
            "trace.jsonl:2: field 'messages': does not go with payload",
        ),
    ];
    for (line, want) in cases {
        let trace = format!(
            "{}\n{line}\n",
            r#"{"session_id": "a", "messages": [{"role": "user", "content": "ok"}]}"#
        );
        std::fs::write(tmp.path().join("trace.jsonl"), trace).unwrap();
        let out = aiperf(
            tmp.path(),
            &[
                "profile",
                "--model",
                "m",
                "--url",
                "localhost:9",
                "--input-file",
                "trace.jsonl",
                "--custom-dataset-type",
                "mooncake_trace",
                "--tokenizer",
                "builtin",
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{line}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{line}: {}", stderr(&out));
    }
}
