//! `--cache-bust` end to end: the real binary against a small server in the test that keeps
//! every request body. Each marker is checked at its exact place, its digest against SHA-256
//! of `"<benchmark_id>:<recycle_pass>:<trajectory_index>:<conversation id>"` computed here,
//! and input lengths exactly against the builtin tokenizer.

use crate::common;

use std::collections::HashMap;

use aiperf::api::Tokenizer;
use common::raw_server::{After, RawServer, json_reply};
use common::{read_json, read_jsonl, run_aiperf_in, stderr_text};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn count(s: &str) -> u64 {
    Tokenizer::builtin().unwrap().count(s) as u64
}

/// A whole reply of the endpoint type the request's path names.
fn reply_for(head: &str) -> Value {
    let usage = json!({"input_tokens": 1, "output_tokens": 1});
    if head.contains("/v1/responses") {
        json!({"output": [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}], "usage": usage})
    } else if head.contains("/v1/messages") {
        json!({"type": "message", "content": [{"type": "text", "text": "ok"}], "usage": usage})
    } else {
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    }
}

/// What a run sent and wrote.
struct Run {
    /// Every request body, in the order the server read them (warmup first).
    bodies: Vec<Value>,
    /// Each request's X-Request-ID, in the same order.
    ids: Vec<String>,
    /// The profiling records, by request id.
    records: HashMap<String, Value>,
    benchmark_id: String,
    /// `profile_export_aiperf.json`.
    summary: Value,
}

impl Run {
    fn record(&self, i: usize) -> &Value {
        &self.records[&self.ids[i]]
    }

    fn conversation_id(&self, i: usize) -> String {
        self.record(i)["metadata"]["conversation_id"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

/// One run, one request at a time (so the server reads them in send order), synthetic
/// prompts used in dataset order.
fn profile(extra: &[&str]) -> Run {
    let server = RawServer::start(|r| json_reply("", &reply_for(&r.head), After::KeepOpen));
    let tmp = tempfile::tempdir().unwrap();
    let mut args = vec![
        "profile",
        "--model",
        "m",
        "--tokenizer",
        "builtin",
        "--url",
        &server.url,
        "--artifact-dir",
        "run",
        "--random-seed",
        "7",
        "--concurrency",
        "1",
        "--osl",
        "4",
    ];
    args.extend_from_slice(extra);
    let out = run_aiperf_in(tmp.path(), &args);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let dir = tmp.path().join("run");
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    let probe = aiperf::api::PROBE_REQUEST_ID;
    let requests: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.header("x-request-id") != Some(probe) && !r.body.is_empty())
        .collect();
    let records = read_jsonl(&dir.join("profile_export.jsonl"))
        .into_iter()
        .map(|r| {
            assert!(r["error"].is_null(), "{r}");
            (
                r["metadata"]["x_request_id"].as_str().unwrap().to_string(),
                r,
            )
        })
        .collect();
    Run {
        bodies: requests
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect(),
        ids: requests
            .iter()
            .map(|r| r.header("x-request-id").unwrap().to_string())
            .collect(),
        records,
        benchmark_id: summary["benchmark_id"].as_str().unwrap().to_string(),
        summary,
    }
}

fn hex12(benchmark_id: &str, pass: u64, trajectory: u64, trace: &str) -> String {
    let digest = Sha256::digest(format!("{benchmark_id}:{pass}:{trajectory}:{trace}"));
    digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..12]
        .to_string()
}

/// AIPerf's estimate of a marker's tokens: the rounded mean over eight digests.
fn mean_cost(prefix: bool) -> u64 {
    let total: u64 = (0..8u64)
        .map(|i| {
            let hex = hex12("estimator", i, i, &format!("estimator-{i}"));
            count(&marker(&hex, prefix))
        })
        .sum();
    (total as f64 / 8.0).round() as u64
}

fn marker(hex: &str, prefix: bool) -> String {
    if prefix {
        format!("[rid:{hex}]\n\n")
    } else {
        format!("\n\n[rid:{hex}]")
    }
}

/// A message's text: a plain string, or its first text part.
fn text(content: &Value) -> &str {
    match content {
        Value::String(s) => s,
        Value::Array(parts) => parts[0]["text"].as_str().unwrap(),
        other => panic!("no text in {other}"),
    }
}

fn isl(r: &Value) -> u64 {
    r["metrics"]["input_sequence_length"]["value"]
        .as_u64()
        .unwrap()
}

/// Warmup takes conversations 0 and 1, then profiling goes on from 2 and wraps around
/// twice: each conversation's first profiling use shares its warmup marker, later uses
/// (recycle passes 1, 2) get new ones.
#[test]
fn first_turn_prefix_marks_each_conversation_and_pass_and_keeps_the_isl() {
    let run = profile(&[
        "--isl",
        "64",
        "--num-dataset-entries",
        "3",
        "--warmup-request-count",
        "2",
        "--request-count",
        "7",
        "--cache-bust",
        "first_turn_prefix",
    ]);
    assert_eq!(run.bodies.len(), 9);
    assert_eq!(
        run.summary["input_config"]["datasets"][0]["prompts"]["cache_bust"],
        json!({"target": "first_turn_prefix"})
    );
    // Send i uses conversation i % 3; the profiling sends (2..9) have records.
    let conv_id = |entry: usize| run.conversation_id((2..9).find(|i| i % 3 == entry).unwrap());
    let passes = [0, 0, 0, 0, 0, 1, 1, 1, 2];
    let cost = mean_cost(true);
    let mut seen = Vec::new();
    for (i, body) in run.bodies.iter().enumerate() {
        let entry = i % 3;
        let hex = hex12(&run.benchmark_id, passes[i], entry as u64, &conv_id(entry));
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1, "{body}");
        let content = text(&messages[0]["content"]);
        let prompt = content
            .strip_prefix(&marker(&hex, true))
            .unwrap_or_else(|| panic!("send {i}: no [rid:{hex}] marker first in {content:?}"));
        // The prompt gave up the marker's mean cost: the ISL on the wire stays 64 when
        // this digest costs the mean, and is off by exactly the difference otherwise.
        assert_eq!(count(prompt), 64 - cost, "send {i}");
        let wire = count(content);
        assert_eq!(wire, 64 - cost + count(&marker(&hex, true)), "send {i}");
        if i >= 2 {
            assert_eq!(
                isl(run.record(i)),
                wire,
                "send {i}: the ISL counts the marker"
            );
        }
        seen.push(hex);
    }
    // Warmup and the first profiling use of conversations 0 and 1 share their markers.
    assert_eq!(seen[0], seen[3]);
    assert_eq!(seen[1], seen[4]);
    // Otherwise every (conversation, pass) has its own.
    let distinct: std::collections::HashSet<_> = seen[2..].iter().collect();
    assert_eq!(distinct.len(), 7, "{seen:?}");
}

#[test]
fn system_targets_mark_the_system_message_or_fall_back_to_the_first_turn() {
    // A shared system prompt gives up the marker's cost; the user prompt keeps its ISL.
    let run = profile(&[
        "--isl",
        "32",
        "--shared-system-prompt-length",
        "40",
        "--num-dataset-entries",
        "2",
        "--request-count",
        "2",
        "--cache-bust",
        "system-suffix",
    ]);
    let cost = mean_cost(false);
    for (i, body) in run.bodies.iter().enumerate() {
        let hex = hex12(&run.benchmark_id, 0, i as u64, &run.conversation_id(i));
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "system");
        let system = text(&messages[0]["content"]);
        let shared = system
            .strip_suffix(&marker(&hex, false))
            .unwrap_or_else(|| panic!("no marker at the end of {system:?}"));
        assert_eq!(count(shared), 40 - cost);
        let user = text(&messages[1]["content"]);
        assert!(!user.contains("[rid:"), "{user:?}");
        assert_eq!(count(user), 32);
        assert_eq!(isl(run.record(i)), count(&format!("{system} {user}")));
    }

    // No system message: system-prefix goes first in the first user turn.
    let run = profile(&[
        "--isl",
        "32",
        "--num-dataset-entries",
        "2",
        "--request-count",
        "2",
        "--cache-bust",
        "system-prefix",
    ]);
    for (i, body) in run.bodies.iter().enumerate() {
        let hex = hex12(&run.benchmark_id, 0, i as u64, &run.conversation_id(i));
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1);
        let user = text(&messages[0]["content"]);
        assert!(user.starts_with(&marker(&hex, true)), "{user:?}");
    }
}

const SYSTEM: &str = "You are terse.";

#[test]
fn responses_mark_instructions_and_the_first_input() {
    let run = profile(&[
        "--endpoint-type",
        "responses",
        "--system-prompt",
        SYSTEM,
        "--isl",
        "20",
        "--num-dataset-entries",
        "2",
        "--request-count",
        "2",
        "--cache-bust",
        "system-prefix",
    ]);
    for (i, body) in run.bodies.iter().enumerate() {
        let hex = hex12(&run.benchmark_id, 0, i as u64, &run.conversation_id(i));
        // A verbatim system prompt has no length to keep: the marker adds to it.
        assert_eq!(body["instructions"], format!("[rid:{hex}]\n\n{SYSTEM}"));
        let user = text(&body["input"][0]["content"]);
        assert_eq!(count(user), 20);
    }

    let run = profile(&[
        "--endpoint-type",
        "responses",
        "--isl",
        "20",
        "--num-dataset-entries",
        "2",
        "--request-count",
        "2",
        "--cache-bust",
        "first-turn-suffix",
    ]);
    for (i, body) in run.bodies.iter().enumerate() {
        let hex = hex12(&run.benchmark_id, 0, i as u64, &run.conversation_id(i));
        assert!(body.get("instructions").is_none());
        let user = text(&body["input"][0]["content"]);
        assert!(user.ends_with(&marker(&hex, false)), "{user:?}");
        assert_eq!(isl(run.record(i)), count(user));
    }
}

#[test]
fn messages_mark_the_top_level_system_and_the_first_user_message() {
    let run = profile(&[
        "--endpoint-type",
        "messages",
        "--system-prompt",
        SYSTEM,
        "--isl",
        "20",
        "--num-dataset-entries",
        "2",
        "--request-count",
        "2",
        "--cache-bust",
        "system-suffix",
    ]);
    for (i, body) in run.bodies.iter().enumerate() {
        let hex = hex12(&run.benchmark_id, 0, i as u64, &run.conversation_id(i));
        assert_eq!(body["system"], format!("{SYSTEM}\n\n[rid:{hex}]"));
        assert!(!text(&body["messages"][0]["content"]).contains("[rid:"));
    }

    let run = profile(&[
        "--endpoint-type",
        "messages",
        "--isl",
        "20",
        "--num-dataset-entries",
        "2",
        "--request-count",
        "2",
        "--cache-bust",
        "first-turn-prefix",
    ]);
    for (i, body) in run.bodies.iter().enumerate() {
        let hex = hex12(&run.benchmark_id, 0, i as u64, &run.conversation_id(i));
        let user = text(&body["messages"][0]["content"]);
        assert!(user.starts_with(&marker(&hex, true)), "{user:?}");
        assert_eq!(isl(run.record(i)), count(user));
    }
}

/// Later turns send the first turn again in their history, with the same marker, and count
/// it in their ISL.
#[test]
fn later_turns_carry_the_conversations_marker() {
    let run = profile(&[
        "--isl",
        "16",
        "--num-dataset-entries",
        "2",
        "--conversation-turn-mean",
        "2",
        "--conversation-num",
        "2",
        "--cache-bust",
        "first-turn-suffix",
    ]);
    assert_eq!(run.bodies.len(), 4);
    for conv in 0..2 {
        let (first, second) = (&run.bodies[2 * conv], &run.bodies[2 * conv + 1]);
        let hex = hex12(
            &run.benchmark_id,
            0,
            conv as u64,
            &run.conversation_id(2 * conv),
        );
        let opening = text(&first["messages"][0]["content"]);
        assert!(opening.ends_with(&marker(&hex, false)), "{opening:?}");
        let history = second["messages"].as_array().unwrap();
        assert_eq!(text(&history[0]["content"]), opening);
        assert_eq!(history[1]["content"], "ok");
        let now = text(&history[2]["content"]);
        assert!(!now.contains("[rid:"));
        assert_eq!(
            isl(run.record(2 * conv + 1)),
            count(&format!("{opening} ok {now}"))
        );
    }
}

#[test]
fn warmup_isolation_marks_warmup_requests_only() {
    let run = profile(&[
        "--isl",
        "24",
        "--num-dataset-entries",
        "2",
        "--warmup-request-count",
        "2",
        "--request-count",
        "2",
        "--cache-bust",
        "warmup-isolation-first-turn",
    ]);
    assert_eq!(run.bodies.len(), 4);
    for (i, body) in run.bodies.iter().enumerate() {
        let user = text(&body["messages"][0]["content"]);
        if i < 2 {
            let prompt = user
                .strip_prefix("[warmup]\n\n")
                .unwrap_or_else(|| panic!("warmup send {i}: {user:?}"));
            // The same prompt as the profiling use of that conversation, unmarked.
            assert_eq!(prompt, text(&run.bodies[i + 2]["messages"][0]["content"]));
        } else {
            assert!(!body.to_string().contains("[warmup]"), "{body}");
            // Profiling bodies are those of a run without the flag: the ISL as set.
            assert_eq!(count(user), 24);
            assert_eq!(isl(run.record(i)), 24);
        }
    }

    let run = profile(&[
        "--system-prompt",
        SYSTEM,
        "--isl",
        "24",
        "--num-dataset-entries",
        "1",
        "--warmup-request-count",
        "1",
        "--request-count",
        "1",
        "--cache-bust",
        "warmup-isolation-system",
    ]);
    let system = |i: usize| run.bodies[i]["messages"][0]["content"].clone();
    assert_eq!(system(0), format!("[warmup]\n\n{SYSTEM}"));
    assert_eq!(system(1), SYSTEM);
}

#[test]
fn cache_bust_is_refused_where_it_cannot_apply() {
    let refused = |extra: &[&str], want: &str| {
        let mut args = vec![
            "profile",
            "--model",
            "m",
            "--url",
            "http://127.0.0.1:9",
            "--tokenizer",
            "builtin",
        ];
        args.extend_from_slice(extra);
        let tmp = tempfile::tempdir().unwrap();
        let out = run_aiperf_in(tmp.path(), &args);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--cache-bust"), "{err}");
        assert!(err.contains(want), "{err}");
    };
    refused(
        &[
            "--endpoint-type",
            "completions",
            "--cache-bust",
            "system-prefix",
        ],
        "chat, responses or messages",
    );
    refused(
        &[
            "--endpoint-type",
            "embeddings",
            "--cache-bust",
            "first_turn_suffix",
        ],
        "embeddings",
    );
    refused(
        &["--cache-bust", "warmup-isolation-system"],
        "--shared-system-prompt-length",
    );
    refused(&["--cache-bust", "system-middle"], "system-prefix");
}

/// Input-file prompts are marked as written (no length to keep: the marker adds to them);
/// rows sent as their own messages have no place this build can mark, and are refused.
#[test]
fn input_file_prompts_are_marked_and_own_messages_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("in.jsonl");
    let texts = ["Hello there", "General Kenobi"];
    let lines: Vec<String> = texts
        .iter()
        .map(|t| json!({"text": t}).to_string())
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let path = file.to_str().unwrap();
    let run = profile(&[
        "--input-file",
        path,
        "--custom-dataset-type",
        "single_turn",
        "--request-count",
        "2",
        "--cache-bust",
        "system-suffix",
    ]);
    assert_eq!(run.bodies.len(), 2);
    for (i, body) in run.bodies.iter().enumerate() {
        let user = text(&body["messages"][0]["content"]);
        let entry = texts.iter().position(|t| user.starts_with(t)).unwrap();
        let hex = hex12(&run.benchmark_id, 0, entry as u64, &run.conversation_id(i));
        assert_eq!(user, format!("{}\n\n[rid:{hex}]", texts[entry]));
        assert_eq!(isl(run.record(i)), count(user));
    }

    let trace = tmp.path().join("trace.jsonl");
    let row = json!({"timestamp": 0, "messages": [{"role": "user", "content": "Hi"}], "output_length": 2});
    std::fs::write(&trace, format!("{row}\n")).unwrap();
    let out = run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "--model",
            "m",
            "--url",
            "http://127.0.0.1:9",
            "--tokenizer",
            "builtin",
            "--input-file",
            trace.to_str().unwrap(),
            "--custom-dataset-type",
            "mooncake_trace",
            "--cache-bust",
            "first-turn-prefix",
        ],
    );
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--cache-bust: conversation 1 is sent as the input file's own messages"),
        "{err}"
    );
}
