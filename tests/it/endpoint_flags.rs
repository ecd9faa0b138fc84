//! AIPerf's endpoint and tokenizer flags that change what goes on the wire or how it is
//! counted: `--uuid-and-strip`, `--apply-chat-template`, `--export-level raw`, and the
//! video generation endpoint with `--download-video-content`. Each runs the real binary
//! against the mock and checks what the mock received and what the exports say.

use std::path::PathBuf;

use serde_json::Value;

use crate::common::{self, MockChild, read_json, read_jsonl, read_served, run_aiperf_in};

/// One profile run against a fresh mock that records what it served.
struct Run {
    out: std::process::Output,
    served: Vec<Value>,
    dir: tempfile::TempDir,
}

impl Run {
    /// Writes `files` into a temporary directory, starts the mock with `mock_args`, and runs
    /// `aiperf profile -m m --url MOCK --tokenizer builtin --artifact-dir run <args>` there.
    fn start(files: &[(&str, &str)], mock_args: &[&str], args: &[&str]) -> Run {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let rec = dir.path().join("server.jsonl");
        // Timed mock runs give their own delays (--ttft); the others answer at once.
        let mut mock_all = vec!["--record-requests", rec.to_str().unwrap()];
        if !mock_args.contains(&"--ttft") {
            mock_all.push("--fast");
        }
        mock_all.extend_from_slice(mock_args);
        let mock = MockChild::spawn(&mock_all);
        let mut all = vec!["profile", "-m", "m", "--url", &mock.url];
        if !args.contains(&"--tokenizer") {
            all.extend(["--tokenizer", "builtin"]);
        }
        all.extend(["--artifact-dir", "run"]);
        all.extend_from_slice(args);
        let out = run_aiperf_in(dir.path(), &all);
        mock.terminate();
        let mut served = read_served(&rec);
        served.sort_by_key(|r| r["received_ns"].as_u64());
        Run { out, served, dir }
    }

    fn ok(self) -> Run {
        assert!(
            self.out.status.success(),
            "{}",
            common::stderr_text(&self.out)
        );
        self
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join("run").join(name)
    }

    /// The per-request records, in send order.
    fn records(&self) -> Vec<Value> {
        let mut r = read_jsonl(&self.path("profile_export.jsonl"));
        r.sort_by_key(|r| r["metadata"]["request_start_ns"].as_u64());
        r
    }
}

/// A 1x1 PNG as a data URL.
const PIXEL: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mP8/x8AAusB9WlLaY4AAAAASUVORK5CYII=";

/// Two rows of one session sending the same image id, then a row of another session.
fn uuid_rows() -> String {
    format!(
        "{{\"session_id\": \"s1\", \"text\": \"first\", \"images\": [\"{PIXEL}\"], \"image_uuids\": [\"img-a\"]}}\n\
         {{\"session_id\": \"s1\", \"text\": \"second\", \"images\": [\"{PIXEL}\"], \"image_uuids\": [\"img-a\"]}}\n\
         {{\"session_id\": \"s2\", \"text\": \"third\", \"images\": [\"{PIXEL}\"], \"image_uuids\": [\"img-a\"]}}\n"
    )
}

/// The image parts of the last message of each request inputs.json holds, in dataset order:
/// (url, uuid).
fn last_image_parts(run: &Run) -> Vec<(String, String)> {
    let inputs = read_json(&run.path("inputs.json"));
    let mut out = Vec::new();
    for entry in inputs["data"].as_array().unwrap() {
        for payload in entry["payloads"].as_array().unwrap() {
            let messages = payload["messages"].as_array().unwrap();
            let last = messages.last().unwrap();
            for part in last["content"].as_array().unwrap() {
                if part["type"] == "image_url" {
                    out.push((
                        part["image_url"]["url"].as_str().unwrap().to_string(),
                        part["uuid"].as_str().unwrap().to_string(),
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn uuid_and_strip_sends_a_repeated_image_of_a_session_as_its_id_only() {
    let rows = uuid_rows();
    let files = [("in.jsonl", rows.as_str())];
    let args = ["--input-file", "in.jsonl", "--request-count", "3"];

    // Without the flag every image goes with its data (and its id).
    let plain = Run::start(&files, &[], &args).ok();
    let sizes: Vec<Value> = plain
        .served
        .iter()
        .map(|s| s["image_sizes"].as_array().unwrap().last().unwrap().clone())
        .collect();
    assert_eq!(sizes, vec![serde_json::json!([1, 1]); 3]);
    for (url, uuid) in last_image_parts(&plain) {
        assert_eq!((url.as_str(), uuid.as_str()), (PIXEL, "img-a"));
    }

    let mut with = args.to_vec();
    with.push("--uuid-and-strip");
    let stripped = Run::start(&files, &[], &with).ok();
    // The second row of session s1 repeats img-a: it goes with an empty url and its id; the
    // other session sends its own copy with the data.
    let parts = last_image_parts(&stripped);
    assert_eq!(
        parts,
        vec![
            (PIXEL.to_string(), "img-a".to_string()),
            (String::new(), "img-a".to_string()),
            (PIXEL.to_string(), "img-a".to_string()),
        ]
    );
    assert_eq!(stripped.served.len(), 3);
    let mut sizes: Vec<Value> = stripped
        .served
        .iter()
        .map(|s| s["image_sizes"].as_array().unwrap().last().unwrap().clone())
        .collect();
    sizes.sort_by_key(|v| v[0].as_u64());
    // The mock read no image data from the stripped part (a cache reference: 0x0).
    assert_eq!(
        sizes,
        vec![
            serde_json::json!([0, 0]),
            serde_json::json!([1, 1]),
            serde_json::json!([1, 1])
        ]
    );
    for r in stripped.records() {
        assert!(r.get("error").is_none_or(Value::is_null), "{r}");
    }
}

#[test]
fn uuid_and_strip_is_refused_where_it_has_nothing_to_strip() {
    let dir = tempfile::tempdir().unwrap();
    let rows = uuid_rows();
    std::fs::write(dir.path().join("in.jsonl"), &rows).unwrap();
    let mt = format!(
        "{{\"session_id\": \"c\", \"turns\": [{{\"text\": \"a\", \"images\": [\"{PIXEL}\"], \"image_uuids\": [\"x\"]}}]}}\n"
    );
    std::fs::write(dir.path().join("mt.jsonl"), mt).unwrap();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--endpoint-type", "completions", "--input-file", "in.jsonl"],
            "--uuid-and-strip needs --endpoint-type chat",
        ),
        (
            &[
                "--input-file",
                "mt.jsonl",
                "--custom-dataset-type",
                "multi_turn",
            ],
            "--uuid-and-strip is not supported with --custom-dataset-type multi_turn",
        ),
        (&[], "synthetic data has none to strip"),
    ];
    for (args, want) in cases {
        let mut all = vec![
            "profile",
            "-m",
            "m",
            "--tokenizer",
            "builtin",
            "--uuid-and-strip",
        ];
        all.extend_from_slice(args);
        let out = run_aiperf_in(dir.path(), &all);
        let err = common::stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn image_ids_without_images_are_sent_as_cache_references() {
    let rows = "{\"text\": \"again\", \"image_uuids\": [\"img-a\", \"img-b\"]}\n";
    let run = Run::start(
        &[("in.jsonl", rows)],
        &[],
        &["--input-file", "in.jsonl", "--request-count", "1"],
    )
    .ok();
    assert_eq!(
        last_image_parts(&run),
        vec![
            (String::new(), "img-a".to_string()),
            (String::new(), "img-b".to_string())
        ]
    );
    assert_eq!(
        run.served[0]["image_sizes"],
        serde_json::json!([[0, 0], [0, 0]])
    );
}

// ----- --export-level raw -----

/// The raw file's lines by x_request_id.
fn raw_lines(run: &Run, name: &str) -> Vec<Value> {
    let mut lines = read_jsonl(&run.path(name));
    lines.sort_by_key(|l| l["start_perf_ns"].as_u64());
    lines
}

#[test]
fn export_level_raw_writes_each_request_as_sent_and_its_stream_as_received() {
    let run = Run::start(
        &[],
        &[],
        &[
            "--streaming",
            "--request-count",
            "3",
            "--isl",
            "20",
            "--osl",
            "5",
            "--api-key",
            "sk-secret",
            "-H",
            "X-Team:blue",
            "--export-level",
            "raw",
        ],
    )
    .ok();
    // The records are written too.
    let records = run.records();
    assert_eq!(records.len(), 3);
    let raw = raw_lines(&run, "profile_export_raw.jsonl");
    assert_eq!(raw.len(), 3);
    let inputs = read_json(&run.path("inputs.json"));
    let payloads: Vec<&Value> = inputs["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["payloads"][0])
        .collect();
    let text = std::fs::read_to_string(run.path("profile_export_raw.jsonl")).unwrap();
    assert!(!text.contains("sk-secret"), "the key is redacted");
    for line in &raw {
        let md = &line["metadata"];
        let record = records
            .iter()
            .find(|r| r["metadata"]["x_request_id"] == md["x_request_id"])
            .expect("a record of the same request");
        assert_eq!(md, &record["metadata"]);
        // The body as sent: one of the dataset's payloads, as inputs.json has it.
        assert!(payloads.contains(&&line["payload"]), "{}", line["payload"]);
        assert_eq!(line["payload"]["stream"], true);
        let h = &line["request_headers"];
        assert_eq!(h["authorization"], "<redacted>");
        assert_eq!(h["x-team"], "blue");
        assert_eq!(h["content-type"], "application/json");
        assert_eq!(h["X-Request-ID"], md["x_request_id"]);
        assert_eq!(h["x-correlation-id"], md["x_correlation_id"]);
        assert_eq!(line["status"], 200);
        assert!(line.get("error").is_none());
        // Every SSE message in order, stamped on the run's clock after the start, ending
        // with [DONE]; their deltas hold the output's tokens.
        let responses = line["responses"].as_array().unwrap();
        let start = line["start_perf_ns"].as_u64().unwrap();
        let mut last = start;
        let mut content = 0;
        for r in responses {
            let t = r["perf_ns"].as_u64().unwrap();
            assert!(t >= last, "{responses:?}");
            last = t;
            let packets = r["packets"].as_array().unwrap();
            let data = packets.last().unwrap();
            assert_eq!(data["name"], "data");
            let value = data["value"].as_str().unwrap();
            if value == "[DONE]" {
                continue;
            }
            let chunk: Value = serde_json::from_str(value).unwrap();
            if chunk["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|c| !c.is_empty())
            {
                content += 1;
            }
        }
        assert_eq!(
            responses.last().unwrap()["packets"][0]["value"],
            "[DONE]",
            "{responses:?}"
        );
        // The mock streams one token per chunk: as many content chunks as output tokens.
        assert_eq!(
            content as f64,
            record["metrics"]["output_sequence_length"]["value"]
                .as_f64()
                .unwrap()
        );
    }
}

#[test]
fn export_level_raw_keeps_a_whole_response_and_follows_the_prefix() {
    let run = Run::start(
        &[],
        &[],
        &[
            "--request-count",
            "2",
            "--isl",
            "20",
            "--osl",
            "3",
            "--export-level",
            "raw",
            "--profile-export-prefix",
            "run1",
        ],
    )
    .ok();
    assert!(!run.path("profile_export_raw.jsonl").exists());
    let raw = raw_lines(&run, "run1_raw.jsonl");
    assert_eq!(raw.len(), 2);
    for line in &raw {
        let responses = line["responses"].as_array().unwrap();
        assert_eq!(responses.len(), 1, "{responses:?}");
        assert_eq!(responses[0]["content_type"], "application/json");
        let body: Value = serde_json::from_str(responses[0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(body["object"], "chat.completion");
        assert!(responses[0]["perf_ns"].as_u64() >= line["start_perf_ns"].as_u64());
        assert_eq!(line["payload"]["stream"], false);
    }
}

#[test]
fn export_level_raw_shows_a_multipart_body_as_its_fields() {
    let run = Run::start(
        &[],
        &["--chat-template-tokens", "0"],
        &[
            "--endpoint-type",
            "audio_transcription",
            "--audio-length-mean",
            "1",
            "--audio-sample-rates",
            "16",
            "--extra-inputs",
            "language:en",
            "--request-count",
            "2",
            "--export-level",
            "raw",
        ],
    )
    .ok();
    let raw = raw_lines(&run, "profile_export_raw.jsonl");
    assert_eq!(raw.len(), 2);
    for line in &raw {
        let p = &line["payload"];
        assert_eq!(p["model"], "m", "{p}");
        assert_eq!(p["language"], "en", "{p}");
        assert_eq!(p["file"]["content_type"], "audio/wav", "{p}");
        assert!(p["file"]["base64"].as_str().unwrap().len() > 1000, "{p}");
        assert!(
            line["request_headers"]["content-type"]
                .as_str()
                .unwrap()
                .starts_with("multipart/form-data; boundary=")
        );
        let text = line["responses"][0]["text"].as_str().unwrap();
        assert!(serde_json::from_str::<Value>(text).unwrap()["text"].is_string());
    }
}

#[test]
fn export_level_raw_names_each_request_s_cache_bust_marker() {
    let run = Run::start(
        &[],
        &[],
        &[
            "--request-count",
            "3",
            "--isl",
            "30",
            "--osl",
            "2",
            "--cache-bust",
            "first-turn-prefix",
            "--export-level",
            "raw",
        ],
    )
    .ok();
    let raw = raw_lines(&run, "profile_export_raw.jsonl");
    assert_eq!(raw.len(), 3);
    for line in &raw {
        assert_eq!(line["cache_bust_target"], "first_turn_prefix");
        let marker = line["cache_bust_marker"].as_str().unwrap();
        assert!(
            marker.starts_with("[rid:") && marker.ends_with("]\n\n") && marker.len() == 20,
            "{marker:?}"
        );
        // The marker the body carries, at the start of the first user turn.
        let content = line["payload"]["messages"][0]["content"].as_str().unwrap();
        assert!(content.starts_with(marker), "{content:?}");
    }
}

// ----- --apply-chat-template -----

/// A ChatML template without a default system message: a message is wrapped in
/// `<|im_start|>ROLE\n ... <|im_end|>\n`, the assistant prompt is `<|im_start|>assistant\n`.
const CHATML: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// The GPT-2 fixture tokenizer with the ChatML markers as special tokens, and `CHATML` in
/// its tokenizer_config.json.
fn chatml_tokenizer(dir: &std::path::Path) -> tokenizers::Tokenizer {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/gpt2/tokenizer.json"
    );
    let mut t = tokenizers::Tokenizer::from_file(fixture).unwrap();
    t.add_special_tokens([
        tokenizers::AddedToken::from("<|im_start|>", true),
        tokenizers::AddedToken::from("<|im_end|>", true),
    ])
    .unwrap();
    t.save(dir.join("tokenizer.json"), false).unwrap();
    let config = serde_json::json!({"chat_template": CHATML});
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
    t
}

#[test]
fn apply_chat_template_counts_the_template_and_keeps_the_isl_asked_for() {
    let tok_dir = tempfile::tempdir().unwrap();
    let tok = chatml_tokenizer(tok_dir.path());
    let count = |s: &str| tok.encode(s, false).unwrap().len();
    // A user message's wrap: <|im_start|> user \n ... <|im_end|> \n = 5; an assistant's:
    // <|im_start|> ass istant \n ... <|im_end|> \n = 6; the assistant prompt 4.
    assert_eq!(count("<|im_start|>user\n<|im_end|>\n"), 5);
    assert_eq!(count("<|im_start|>assistant\n<|im_end|>\n"), 6);
    assert_eq!(count("<|im_start|>assistant\n"), 4);
    // Measured as AIPerf does: wrap (5 + 6 + 5 + 4 - (5 + 4)) / 2 = 5.5, per request
    // 5 + 4 - 5.5 = 3.5; rounded half to even: 6 and 4, so a synthetic first turn is cut
    // by 10 tokens, and its templated ISL is 100 - 10 + 5 + 4 = 99.
    let dir = tok_dir.path().to_str().unwrap();
    let common_args = [
        "--tokenizer",
        dir,
        "--request-count",
        "3",
        "--isl",
        "100",
        "--osl",
        "3",
        "--random-seed",
        "5",
    ];
    let plain = Run::start(&[], &[], &common_args).ok();
    for r in plain.records() {
        assert_eq!(r["metrics"]["input_sequence_length"]["value"], 100, "{r}");
    }
    let mut args = common_args.to_vec();
    args.push("--apply-chat-template");
    let run = Run::start(&[], &[], &args).ok();
    let err = common::stderr_text(&run.out);
    assert!(
        err.contains("adds 4 tokens per request and 6 per message"),
        "{err}"
    );
    for r in run.records() {
        assert_eq!(r["metrics"]["input_sequence_length"]["value"], 99, "{r}");
    }
    // The prompts went out 10 tokens shorter.
    let inputs = read_json(&run.path("inputs.json"));
    for e in inputs["data"].as_array().unwrap() {
        let content = e["payloads"][0]["messages"][0]["content"].as_str().unwrap();
        assert_eq!(count(content), 90, "{content}");
    }
}

#[test]
fn apply_chat_template_counts_each_later_turn_with_its_history() {
    let tok_dir = tempfile::tempdir().unwrap();
    let tok = chatml_tokenizer(tok_dir.path());
    let count = |s: &str| tok.encode(s, false).unwrap().len() as u64;
    let file = "{\"session_id\": \"c\", \"turns\": [{\"text\": \"Hello there\"}, {\"text\": \"And now?\"}]}\n";
    let run = Run::start(
        &[("mt.jsonl", file)],
        &[],
        &[
            "--tokenizer",
            tok_dir.path().to_str().unwrap(),
            "--input-file",
            "mt.jsonl",
            "--custom-dataset-type",
            "multi_turn",
            "--request-count",
            "2",
            "--osl",
            "2",
            "--export-outputs-json",
            "--apply-chat-template",
        ],
    )
    .ok();
    let records = run.records();
    assert_eq!(records.len(), 2);
    let outputs = read_json(&run.path("outputs.json"));
    let reply = outputs["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["turn_index"] == 0)
        .unwrap()["response_text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!reply.is_empty());
    // Turn 0: user wrap 5 + text + prompt 4. Turn 1: both user messages, the reply as an
    // assistant message (wrap 6), and the prompt.
    let isl = |r: &Value| {
        r["metrics"]["input_sequence_length"]["value"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(isl(&records[0]), 5 + count("Hello there") + 4);
    assert_eq!(
        isl(&records[1]),
        5 + count("Hello there") + 6 + count(&reply) + 5 + count("And now?") + 4
    );
}

#[test]
fn apply_chat_template_is_refused_without_a_template_or_chat_messages() {
    let cases: [(&[&str], &str); 2] = [
        (
            &["--tokenizer", "builtin"],
            "--apply-chat-template: the tokenizer 'builtin",
        ),
        (
            &["--tokenizer", "builtin", "--endpoint-type", "completions"],
            "--endpoint-type completions sends none",
        ),
    ];
    let mock = MockChild::spawn(&["--fast"]);
    for (args, want) in cases {
        let mut all = vec![
            "-m",
            "m",
            "--url",
            &mock.url,
            "--request-count",
            "1",
            "--apply-chat-template",
        ];
        all.extend_from_slice(args);
        let out = common::run_profile(&all);
        let err = common::stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

// ----- video_generation and --download-video-content -----

/// The mock's records of one route.
fn served_at<'a>(run: &'a Run, endpoint: &str) -> Vec<&'a Value> {
    run.served
        .iter()
        .filter(|s| s["endpoint"] == endpoint)
        .collect()
}

/// A video run against a mock whose jobs take 300 ms.
fn video_run(extra: &[&str]) -> Run {
    let mut args = vec![
        "--endpoint-type",
        "video_generation",
        "--request-count",
        "2",
        "--isl",
        "8",
        "--extra-inputs",
        "size:640x360",
        "--extra-inputs",
        "seconds:2",
        "--export-level",
        "raw",
    ];
    args.extend_from_slice(extra);
    Run::start(&[], &["--ttft", "300", "--itl", "0"], &args).ok()
}

#[test]
fn video_generation_submits_a_job_and_polls_it_to_completion() {
    let run = video_run(&[]);
    // Each request: one submit, polls every 0.1 s until the job completes, no download.
    let submits = served_at(&run, "video_generation");
    assert_eq!(submits.len(), 2);
    let polls = served_at(&run, "video_status");
    assert!(polls.len() >= 4, "{polls:?}");
    assert!(served_at(&run, "video_content").is_empty());
    for s in &submits {
        let id = &s["x_request_id"];
        let mine = polls.iter().filter(|p| &p["x_request_id"] == id).count();
        assert!((2..=10).contains(&mine), "{mine} polls of {id}");
    }
    let records = run.records();
    assert_eq!(records.len(), 2);
    let raw = raw_lines(&run, "profile_export_raw.jsonl");
    for r in &records {
        assert!(r.get("error").is_none_or(Value::is_null), "{r}");
        let m = &r["metrics"];
        // The job's own time as the mock reports it, and its memory.
        assert_eq!(m["video_inference_time"]["value"], 300.0, "{m}");
        assert_eq!(m["video_inference_time"]["unit"], "ms");
        assert_eq!(m["video_peak_memory"]["value"], 2048.5);
        assert_eq!(m["video_peak_memory"]["unit"], "MB");
        let latency = m["request_latency"]["value"].as_f64().unwrap();
        assert!((300.0..3000.0).contains(&latency), "{latency}");
        assert!(m.get("output_sequence_length").is_none(), "{m}");
        // The raw line: the form as sent, the submit answer and every poll; the latency
        // ends at the poll that found the job completed.
        let line = raw
            .iter()
            .find(|l| l["metadata"]["x_request_id"] == r["metadata"]["x_request_id"])
            .unwrap();
        let p = &line["payload"];
        assert_eq!(
            (
                p["model"].as_str(),
                p["size"].as_str(),
                p["seconds"].as_str()
            ),
            (Some("m"), Some("640x360"), Some("2"))
        );
        assert!(p["prompt"].as_str().is_some_and(|t| !t.is_empty()));
        let bodies = line["responses"].as_array().unwrap();
        let status = |b: &Value| {
            serde_json::from_str::<Value>(b["text"].as_str().unwrap()).unwrap()["status"].clone()
        };
        assert_eq!(status(&bodies[0]), "queued");
        assert_eq!(status(bodies.last().unwrap()), "completed");
        assert!(
            bodies[1..bodies.len() - 1]
                .iter()
                .all(|b| status(b) == "in_progress")
        );
        let start = line["start_perf_ns"].as_u64().unwrap();
        let done = bodies.last().unwrap()["perf_ns"].as_u64().unwrap();
        assert!(
            (latency * 1e6 - (done - start) as f64).abs() < 2.0,
            "{latency} ms"
        );
    }
    let summary = read_json(&run.path("profile_export_aiperf.json"));
    assert_eq!(summary["video_inference_time"]["avg"], 300.0, "{summary}");
}

#[test]
fn download_video_content_fetches_each_video_and_the_latency_includes_it() {
    // As vLLM's docs write it: the form is what video generation sends anyway.
    let run = video_run(&[
        "--download-video-content",
        "--request-content-type",
        "multipart/form-data",
    ]);
    let downloads = served_at(&run, "video_content");
    assert_eq!(downloads.len(), 2);
    let records = run.records();
    let raw = raw_lines(&run, "profile_export_raw.jsonl");
    for r in &records {
        assert!(r.get("error").is_none_or(Value::is_null), "{r}");
        assert!(
            downloads
                .iter()
                .any(|d| d["x_request_id"] == r["metadata"]["x_request_id"])
        );
        let line = raw
            .iter()
            .find(|l| l["metadata"]["x_request_id"] == r["metadata"]["x_request_id"])
            .unwrap();
        // The video is not in the raw responses; the latency goes past the last poll.
        let bodies = line["responses"].as_array().unwrap();
        let start = line["start_perf_ns"].as_u64().unwrap();
        let done = bodies.last().unwrap()["perf_ns"].as_u64().unwrap();
        let latency = r["metrics"]["request_latency"]["value"].as_f64().unwrap();
        assert!(latency * 1e6 > (done - start) as f64, "{latency} ms");
    }
}

#[test]
fn a_failed_video_job_is_a_failed_request() {
    let rows = "{\"text\": \"please fail-video now\"}\n";
    let run = Run::start(
        &[("in.jsonl", rows)],
        &["--ttft", "100", "--itl", "0"],
        &[
            "--endpoint-type",
            "video_generation",
            "--input-file",
            "in.jsonl",
            "--request-count",
            "1",
        ],
    );
    let records = run.records();
    assert_eq!(records.len(), 1);
    let e = &records[0]["error"];
    assert_eq!(e["type"], "VideoGenerationError", "{e}");
    assert_eq!(e["code"], 500);
    assert_eq!(
        e["message"],
        "Video generation failed: the prompt asked the mock to fail"
    );
}

#[test]
fn download_video_content_is_refused_without_video_generation() {
    let out = common::run_profile(&[
        "-m",
        "m",
        "--tokenizer",
        "builtin",
        "--download-video-content",
    ]);
    let err = common::stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "--download-video-content downloads the videos of --endpoint-type video_generation"
        ),
        "{err}"
    );
}

#[test]
fn video_generation_refuses_a_json_content_type() {
    let out = common::run_profile(&[
        "-m",
        "m",
        "--tokenizer",
        "builtin",
        "--endpoint-type",
        "video_generation",
        "--request-content-type",
        "application/json",
    ]);
    let err = common::stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("its requests are multipart/form-data; application/json is not supported"),
        "{err}"
    );
}
