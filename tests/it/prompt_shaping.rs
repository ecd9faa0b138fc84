//! Prompt shaping end to end: the real binary against the mock server. What was sent is
//! read back from `inputs.json` and the mock's `--record-requests` lines, and every token
//! count is checked exactly against the builtin tokenizer: the client's input sequence
//! length counts all text a request carries (joined by single spaces), the mock counts
//! each message's text.

use crate::common;
use crate::common::Profile;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use aiperf::api::Tokenizer;
use common::{MockChild, post_json, read_json, read_jsonl, stderr_text};
use serde_json::{Value, json};

fn tok() -> Tokenizer {
    Tokenizer::builtin().unwrap()
}

fn count(s: &str) -> u64 {
    tok().count(s) as u64
}

/// A fast mock without chat-template tokens, recording every request to `log`.
fn mock(log: &Path, extra: &[&str]) -> MockChild {
    let mut args = vec![
        "--fast",
        "--chat-template-tokens",
        "0",
        "--record-requests",
        log.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    MockChild::spawn(&args)
}

fn profile(dir: &Path, url: &str, extra: &[&str]) -> std::process::Output {
    Profile::new("m")
        .url(url)
        .artifact_dir("run")
        .args(&["--random-seed", "7"])
        .args(extra)
        .run_in(dir)
}

/// A run that must succeed: its records, each session's payloads (one per turn, without
/// the history) and the mock's lines.
struct Run {
    records: Vec<Value>,
    payloads: BTreeMap<String, Vec<Value>>,
    served: BTreeMap<String, Value>,
    /// The mock's lines in the order it finished them.
    served_order: Vec<Value>,
}

fn run(extra: &[&str], mock_extra: &[&str]) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("served.jsonl");
    let server = mock(&log, mock_extra);
    let out = profile(tmp.path(), &server.url, extra);
    server.terminate();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let dir = tmp.path().join("run");
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    for r in &records {
        assert!(r["error"].is_null(), "{r}");
    }
    let payloads = read_json(&dir.join("inputs.json"))["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["session_id"].as_str().unwrap().to_string(),
                s["payloads"].as_array().unwrap().clone(),
            )
        })
        .collect();
    let served_order = common::read_served(&log);
    let served = served_order
        .iter()
        .map(|r| (r["x_request_id"].as_str().unwrap().to_string(), r.clone()))
        .collect();
    Run {
        records,
        payloads,
        served,
        served_order,
    }
}

impl Run {
    /// The record's turn as `inputs.json` lists it.
    fn payload_of(&self, r: &Value) -> &Value {
        let turn = r["metadata"]["turn_index"].as_u64().unwrap() as usize;
        &self.payloads[r["metadata"]["conversation_id"].as_str().unwrap()][turn]
    }

    fn served_of(&self, r: &Value) -> &Value {
        &self.served[r["metadata"]["x_request_id"].as_str().unwrap()]
    }
}

fn isl(r: &Value) -> u64 {
    r["metrics"]["input_sequence_length"]["value"]
        .as_u64()
        .unwrap_or_else(|| panic!("no ISL in {r}"))
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

fn roles(served: &Value) -> Vec<&str> {
    served["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect()
}

const SYSTEM: &str = "You are a terse assistant.\nAnswer in one line.";

#[test]
fn system_prompt_is_the_leading_system_message_and_counts_in_the_isl() {
    let run = run(
        &[
            "--system-prompt",
            SYSTEM,
            "--isl",
            "30",
            "--num-dataset-entries",
            "3",
            "--request-count",
            "3",
        ],
        &[],
    );
    assert_eq!(run.records.len(), 3);
    for r in &run.records {
        let messages = run.payload_of(r)["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[0], json!({"role": "system", "content": SYSTEM}));
        assert_eq!(messages[1]["role"], "user");
        let user = text(&messages[1]["content"]);
        // --isl sizes the user text only; the ISL counts both.
        assert_eq!(count(user), 30);
        assert_eq!(isl(r), count(&format!("{SYSTEM} {user}")));
        let served = run.served_of(r);
        assert_eq!(roles(served), ["system", "user"]);
        assert_eq!(served["text_tokens"], count(SYSTEM) + 30);
    }
}

#[test]
fn system_prompt_file_goes_first_in_a_completions_prompt() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("system.txt");
    std::fs::write(&file, SYSTEM).unwrap();
    let run = run(
        &[
            "--endpoint-type",
            "completions",
            "--system-prompt-file",
            file.to_str().unwrap(),
            "--isl",
            "25",
            "--request-count",
            "2",
        ],
        &[],
    );
    assert_eq!(run.records.len(), 2);
    for r in &run.records {
        let prompt = text(&run.payload_of(r)["prompt"]);
        let user = prompt
            .strip_prefix(&format!("{SYSTEM} "))
            .unwrap_or_else(|| panic!("system text first: {prompt:?}"));
        assert_eq!(count(user), 25);
        assert_eq!(isl(r), count(prompt));
        assert_eq!(run.served_of(r)["text_tokens"], count(prompt));
    }
}

#[test]
fn later_turns_count_the_system_prompt_with_the_history() {
    let run = run(
        &[
            "--system-prompt",
            SYSTEM,
            "--isl",
            "20",
            "--osl",
            "4",
            "--conversation-num",
            "2",
            "--conversation-turn-mean",
            "2",
            "--num-dataset-entries",
            "2",
        ],
        &[],
    );
    assert_eq!(run.records.len(), 4);
    let reply: String = (0..4).map(aiperf::api::mock_word).collect();
    let mut by_conv: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for r in &run.records {
        by_conv
            .entry(r["metadata"]["conversation_id"].as_str().unwrap())
            .or_default()
            .push(r);
    }
    for turns in by_conv.values() {
        let first = run.served_of(turns[0]);
        let second = run.served_of(turns[1]);
        assert_eq!(roles(first), ["system", "user"]);
        assert_eq!(roles(second), ["system", "user", "assistant", "user"]);
        // Each user text has 20 tokens: the mock's text count tells the two turns apart.
        assert_eq!(first["text_tokens"], count(SYSTEM) + 20);
        assert_eq!(
            second["text_tokens"],
            count(SYSTEM) + 20 + count(&reply) + 20
        );
        let user0 = text(&run.payload_of(turns[0])["messages"][1]["content"]);
        let later = run.payload_of(turns[1])["messages"].as_array().unwrap();
        assert_eq!(later[0]["content"], SYSTEM);
        let user1 = text(&later[1]["content"]);
        assert_eq!(isl(turns[0]), count(&format!("{SYSTEM} {user0}")));
        // The second turn's ISL covers the system prompt, the first exchange and its text.
        assert_eq!(
            isl(turns[1]),
            count(&format!("{SYSTEM} {user0} {reply} {user1}"))
        );
    }
}

#[test]
fn shared_system_prompt_is_one_synthetic_text_of_n_tokens_for_all() {
    let run = run(
        &[
            "--shared-system-prompt-length",
            "40",
            "--isl",
            "20",
            "--num-dataset-entries",
            "4",
            "--request-count",
            "4",
        ],
        &[],
    );
    assert_eq!(run.records.len(), 4);
    let mut systems = HashSet::new();
    let mut users = HashSet::new();
    for r in &run.records {
        let messages = run.payload_of(r)["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "system");
        let system = text(&messages[0]["content"]);
        let user = text(&messages[1]["content"]);
        assert_eq!(count(system), 40);
        assert_eq!(count(user), 20);
        assert_eq!(isl(r), count(&format!("{system} {user}")));
        assert_eq!(run.served_of(r)["text_tokens"], 60);
        systems.insert(system.to_string());
        users.insert(user.to_string());
    }
    assert_eq!(systems.len(), 1, "one shared system prompt");
    assert_eq!(users.len(), 4);
}

#[test]
fn user_context_is_a_user_message_per_conversation_before_the_prompt() {
    let run = run(
        &[
            "--user-context-prompt-length",
            "25",
            "--isl",
            "15",
            "--num-dataset-entries",
            "3",
            "--request-count",
            "3",
        ],
        &[],
    );
    assert_eq!(run.records.len(), 3);
    let mut contexts = HashSet::new();
    for r in &run.records {
        let messages = run.payload_of(r)["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[0]["role"], "user");
        assert_eq!(messages[1]["role"], "user");
        let context = text(&messages[0]["content"]);
        let user = text(&messages[1]["content"]);
        assert_eq!(count(context), 25);
        assert_eq!(count(user), 15);
        assert_eq!(isl(r), count(&format!("{context} {user}")));
        let served = run.served_of(r);
        assert_eq!(roles(served), ["user", "user"]);
        assert_eq!(served["text_tokens"], 40);
        contexts.insert(context.to_string());
    }
    assert_eq!(contexts.len(), 3, "one context per conversation");
}

/// Leading tokens two id sequences share.
fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[test]
fn prefix_pool_prompts_share_prefixes_and_the_mock_reports_cached_tokens() {
    let run = run(
        &[
            "--prompt-prefix-pool-size",
            "2",
            "--prompt-prefix-length",
            "64",
            "--isl",
            "20",
            "--num-dataset-entries",
            "8",
            "--request-count",
            "8",
            "--concurrency",
            "1",
        ],
        &["--prefix-cache-blocks", "1000"],
    );
    assert_eq!(run.records.len(), 8);
    let t = tok();
    let mut prefixes = HashSet::new();
    for r in &run.records {
        let user = text(&run.payload_of(r)["messages"][0]["content"]);
        // Prefix + ISL tokens, exactly.
        assert_eq!(t.count(user), 84, "{user:?}");
        assert_eq!(isl(r), 84);
        assert_eq!(run.served_of(r)["text_tokens"], 84);
        prefixes.insert(t.encode(user)[..60].to_vec());
    }
    assert!(prefixes.len() <= 2, "two prefixes in the pool");
    // One request at a time: the mock saw them in this order, and each one's cached tokens
    // are the whole 16-token blocks it shares with an earlier prompt.
    let ids: Vec<Vec<u32>> = run
        .served_order
        .iter()
        .map(|s| {
            let r = run
                .records
                .iter()
                .find(|r| r["metadata"]["x_request_id"] == s["x_request_id"])
                .unwrap();
            t.encode(text(&run.payload_of(r)["messages"][0]["content"]))
        })
        .collect();
    let mut reused = 0;
    for (i, s) in run.served_order.iter().enumerate() {
        let shared = (0..i)
            .map(|j| common_prefix(&ids[i], &ids[j]))
            .max()
            .unwrap_or(0);
        let expected = (shared / 16 * 16) as u64;
        assert_eq!(s["cached_tokens"], expected, "request {i}");
        if expected >= 48 {
            reused += 1;
        }
    }
    // Eight prompts from two prefixes: at least six start with one already seen.
    assert!(reused >= 6, "{reused}");
}

#[test]
fn mock_prefix_cache_is_off_by_default_and_counts_whole_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = mock(&tmp.path().join("a.jsonl"), &[]);
    let cached = mock(&tmp.path().join("b.jsonl"), &["--prefix-cache-blocks", "4"]);
    let words: Vec<String> = (0..80).map(|i| format!(" w{i}")).collect();
    let long = words.concat();
    let t = tok();
    let n = t.count(&long);
    assert!(n >= 64, "{n}");
    let body = |content: &str| json!({"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": content}]});
    let usage = |server: &MockChild, content: &str| {
        post_json(server.addr, "/v1/chat/completions", &body(content)).json()["usage"].clone()
    };
    let first = usage(&plain, &long);
    assert!(first.get("prompt_tokens_details").is_none(), "{first}");
    assert!(usage(&plain, &long).get("prompt_tokens_details").is_none());

    assert_eq!(
        usage(&cached, &long)["prompt_tokens_details"]["cached_tokens"],
        0
    );
    // Four blocks fit: the same prompt again finds its first four blocks.
    assert_eq!(
        usage(&cached, &long)["prompt_tokens_details"]["cached_tokens"],
        64
    );
    // A completions prompt shares the cache.
    let completion = post_json(
        cached.addr,
        "/v1/completions",
        &json!({"model": "m", "max_tokens": 2, "prompt": long}),
    )
    .json();
    assert_eq!(
        completion["usage"]["prompt_tokens_details"]["cached_tokens"],
        64
    );
    // Another long prompt takes the four blocks.
    let other: String = (0..80).map(|i| format!(" v{i}")).collect();
    assert_eq!(
        usage(&cached, &other)["prompt_tokens_details"]["cached_tokens"],
        0
    );
    assert_eq!(
        usage(&cached, &long)["prompt_tokens_details"]["cached_tokens"],
        0
    );
    plain.terminate();
    cached.terminate();
}

#[test]
fn seq_dist_draws_an_isl_osl_pair_per_request() {
    let run = run(
        &[
            "--seq-dist",
            "20,5:50;60,9:50",
            "--num-dataset-entries",
            "30",
            "--request-count",
            "30",
        ],
        &[],
    );
    assert_eq!(run.records.len(), 30);
    let mut seen = HashSet::new();
    for r in &run.records {
        let body = run.payload_of(r);
        let user = text(&body["messages"][0]["content"]);
        let pair = (count(user), body["max_completion_tokens"].as_u64().unwrap());
        assert!(pair == (20, 5) || pair == (60, 9), "{pair:?}");
        assert_eq!(isl(r), pair.0);
        assert_eq!(r["metrics"]["output_sequence_length"]["value"], pair.1);
        seen.insert(pair);
    }
    assert_eq!(seen.len(), 2, "both pairs drawn");
}

#[test]
fn prompt_batches_are_text_parts_in_chat_and_a_prompt_list_in_completions() {
    let chat = run(&["-b", "3", "--isl", "12", "--request-count", "2"], &[]);
    assert_eq!(chat.records.len(), 2);
    for r in &chat.records {
        let parts = chat.payload_of(r)["messages"][0]["content"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(parts.len(), 3, "{parts:?}");
        let texts: Vec<&str> = parts
            .iter()
            .map(|p| {
                assert_eq!(p["type"], "text");
                text(&p["text"])
            })
            .collect();
        assert!(texts.iter().all(|t| count(t) == 12), "{texts:?}");
        assert_eq!(texts.iter().collect::<HashSet<_>>().len(), 3);
        assert_eq!(isl(r), count(&texts.join(" ")));
        assert_eq!(chat.served_of(r)["text_tokens"], 36);
    }
    let completions = run(
        &[
            "--endpoint-type",
            "completions",
            "--batch-size-text",
            "2",
            "--isl",
            "10",
            "--request-count",
            "2",
        ],
        &[],
    );
    for r in &completions.records {
        let prompts: Vec<&str> = completions.payload_of(r)["prompt"]
            .as_array()
            .unwrap()
            .iter()
            .map(text)
            .collect();
        assert_eq!(prompts.len(), 2);
        assert!(prompts.iter().all(|t| count(t) == 10), "{prompts:?}");
        assert_eq!(isl(r), count(&prompts.join(" ")));
        assert_eq!(completions.served_of(r)["text_tokens"], 20);
    }
}

#[test]
fn random_range_ratio_draws_uniform_lengths_around_isl_and_osl() {
    let run = run(
        &[
            "--isl",
            "20",
            "--osl",
            "10",
            "--random-range-ratio",
            "0.5",
            "--prompt-corpus",
            "sonnet",
            "--num-dataset-entries",
            "40",
            "--request-count",
            "40",
        ],
        &[],
    );
    assert_eq!(run.records.len(), 40);
    let (mut isls, mut osls) = (HashSet::new(), HashSet::new());
    for r in &run.records {
        let body = run.payload_of(r);
        let n = count(text(&body["messages"][0]["content"]));
        let max = body["max_completion_tokens"].as_u64().unwrap();
        // [floor(20 x 0.5), ceil(20 x 1.5)] and [floor(10 x 0.5), ceil(10 x 1.5)].
        assert!((10..=30).contains(&n), "{n}");
        assert!((5..=15).contains(&max), "{max}");
        assert_eq!(isl(r), n);
        assert_eq!(r["metrics"]["output_sequence_length"]["value"], max);
        isls.insert(n);
        osls.insert(max);
    }
    assert!(isls.len() >= 8 && osls.len() >= 5, "{isls:?} {osls:?}");
}

/// Runs a profile that must be refused before sending: exit 2 and a message containing
/// every `needle`.
fn refused(args: &[&str], needles: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let out = profile(tmp.path(), "http://127.0.0.1:9", args);
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{args:?}: {needle:?} not in {stderr}"
        );
    }
}

#[test]
fn contradicting_or_incomplete_prompt_flags_are_refused() {
    refused(
        &["--system-prompt", "a", "--system-prompt-file", "f.txt"],
        &["--system-prompt and --system-prompt-file cannot be used together"],
    );
    refused(
        &[
            "--system-prompt",
            "a",
            "--shared-system-prompt-length",
            "10",
        ],
        &["--system-prompt and --shared-system-prompt-length cannot be used together"],
    );
    refused(
        &[
            "--system-prompt",
            "a",
            "--prompt-prefix-pool-size",
            "2",
            "--prompt-prefix-length",
            "8",
        ],
        &["--system-prompt and --prompt-prefix-pool-size/--prompt-prefix-length"],
    );
    refused(
        &[
            "--shared-system-prompt-length",
            "10",
            "--num-prefix-prompts",
            "2",
            "--prefix-prompt-length",
            "8",
        ],
        &["--shared-system-prompt-length and --prompt-prefix-pool-size"],
    );
    refused(
        &["--user-context-prompt-length", "10"],
        &["--user-context-prompt-length requires --num-dataset-entries"],
    );
    refused(
        &["--prompt-prefix-length", "8"],
        &["--prompt-prefix-length 8 needs --prompt-prefix-pool-size"],
    );
    refused(
        &["--prompt-prefix-pool-size", "3"],
        &["--prompt-prefix-pool-size 3 needs --prompt-prefix-length"],
    );
    refused(
        &["--shared-system-prompt-length", "0"],
        &["--shared-system-prompt-length: 0 is not allowed"],
    );
    refused(
        &["--seq-dist", "20,5:50;60,9:40"],
        &["--seq-dist '20,5:50;60,9:40': the probabilities add up to 90, not 100"],
    );
    refused(
        &["--prompt-batch-size", "0"],
        &["--prompt-batch-size: 0 is not allowed"],
    );
    refused(
        &["--isl", "20", "--osl", "5", "--random-range-ratio", "1"],
        &["--random-range-ratio: 1 is not allowed"],
    );
    refused(
        &["--isl", "20", "--random-range-ratio", "0.5"],
        &["--random-range-ratio needs --osl"],
    );
    refused(
        &[
            "--isl",
            "20",
            "--osl",
            "5",
            "--random-range-ratio",
            "0.5",
            "--isl-stddev",
            "3",
        ],
        &["--random-range-ratio cannot be used with --isl-stddev"],
    );
    refused(
        &["--cache-bust", "warmup-isolation-system"],
        &["--cache-bust warmup-isolation-system needs a system message"],
    );
    refused(
        &["--system-prompt", ""],
        &["--system-prompt: the text is empty"],
    );
    refused(
        &["--system-prompt-file", "/nonexistent/system.txt"],
        &["--system-prompt-file: cannot read '/nonexistent/system.txt'"],
    );
    refused(
        &[
            "--endpoint-type",
            "audio_transcription",
            "--audio-length-mean",
            "1",
            "--system-prompt",
            "a",
        ],
        &["--system-prompt: a transcription request has no prompt text"],
    );
}

#[test]
fn bad_system_prompt_files_and_input_file_combinations_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let latin1 = tmp.path().join("latin1.txt");
    std::fs::write(&latin1, b"caf\xe9").unwrap();
    let empty = tmp.path().join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    let input = tmp.path().join("in.jsonl");
    std::fs::write(&input, "{\"text\": \"hi\"}\n").unwrap();
    refused(
        &["--system-prompt-file", latin1.to_str().unwrap()],
        &["is not UTF-8 text (invalid byte at offset 3)"],
    );
    refused(
        &["--system-prompt-file", empty.to_str().unwrap()],
        &["is empty; write the system prompt into it"],
    );
    refused(
        &[
            "--input-file",
            input.to_str().unwrap(),
            "--prompt-prefix-pool-size",
            "2",
            "--prompt-prefix-length",
            "8",
        ],
        &["shape synthetic prompts and cannot be used with --input-file"],
    );
    refused(
        &[
            "--input-file",
            input.to_str().unwrap(),
            "--custom-dataset-type",
            "mooncake_trace",
            "--system-prompt",
            "a",
        ],
        &["cannot be used with --custom-dataset-type mooncake_trace"],
    );
}

#[test]
fn system_prompt_goes_before_an_input_files_own_system_text() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("chat.jsonl");
    std::fs::write(
        &file,
        r#"{"session_id": "s1", "turns": [{"role": "system", "text": "Be brief."}, {"text": "Hello there", "output_length": 2}]}
"#,
    )
    .unwrap();
    let run = run(
        &[
            "--input-file",
            file.to_str().unwrap(),
            "--custom-dataset-type",
            "multi_turn",
            "--system-prompt",
            SYSTEM,
            "--request-count",
            "1",
        ],
        &[],
    );
    let r = &run.records[0];
    let system = format!("{SYSTEM}\n\nBe brief.");
    let messages = run.payload_of(r)["messages"].as_array().unwrap();
    assert_eq!(messages[0], json!({"role": "system", "content": system}));
    assert_eq!(isl(r), count(&format!("{system} Hello there")));
    assert_eq!(
        run.served_of(r)["text_tokens"],
        count(&system) + count("Hello there")
    );
}
