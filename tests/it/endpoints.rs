//! The non-chat endpoint types: each run end to end against the mock (record counts, the
//! type's metrics and console title), and each request body checked byte for byte against
//! the API's documented shape, captured by a small server written here.

use crate::common;
use crate::common::Profile;

use std::path::Path;

use common::raw_server::{After, RawRequest, RawServer, Reply};
use common::{MockChild, read_json, read_jsonl, run_aiperf_in, stderr_text};
use serde_json::Value;

fn metric(r: &Value, tag: &str) -> Option<f64> {
    r["metrics"][tag]["value"].as_f64()
}

/// The run's records, each checked to have no error.
fn records(run: &Path) -> Vec<Value> {
    let records = read_jsonl(&run.join("profile_export.jsonl"));
    for r in &records {
        assert!(r["error"].is_null(), "{r}");
    }
    records
}

fn profile(dir: &Path, args: &[&str]) -> std::process::Output {
    Profile::without_model()
        .artifact_dir("run")
        .args(&["--ui-type", "none"])
        .args(args)
        .run_in(dir)
}

/// Output-token metrics must be absent (not zero) for endpoints that produce no tokens.
const TOKEN_METRICS: &[&str] = &[
    "time_to_first_token",
    "inter_token_latency",
    "output_sequence_length",
    "output_token_count",
    "output_token_throughput_per_user",
];

fn assert_no_token_metrics(run: &Path, records: &[Value]) {
    for r in records {
        for tag in TOKEN_METRICS {
            assert!(metric(r, tag).is_none(), "{tag} in {r}");
        }
    }
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    for tag in [
        "output_token_throughput",
        "total_output_tokens",
        "total_osl",
        "total_token_throughput",
        "output_sequence_length",
        "effective_prefill_throughput",
        "active_prefill_throughput",
    ] {
        assert!(summary.get(tag).is_none(), "{tag} in the summary");
    }
    assert!(summary.get("request_latency").is_some());
    assert!(summary.get("request_throughput").is_some());
}

fn stdout_text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn embeddings_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    let out = profile(
        tmp.path(),
        &[
            "--model",
            "emb",
            "--url",
            &mock.url,
            "--endpoint-type",
            "embeddings",
            "--isl",
            "24",
            "--request-count",
            "4",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");
    let records = records(&run);
    assert_eq!(records.len(), 4);
    for r in &records {
        assert_eq!(metric(r, "input_sequence_length"), Some(24.0));
        // The mock counts the input with the same tokenizer.
        assert_eq!(metric(r, "usage_prompt_tokens"), Some(24.0));
        assert!(metric(r, "request_latency").unwrap() > 0.0);
    }
    assert_no_token_metrics(&run, &records);
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    assert_eq!(summary["request_count"]["avg"], 4.0);
    assert_eq!(summary["total_isl"]["avg"], 96.0);
    let console = stdout_text(&out);
    assert!(
        console.contains("NVIDIA AIPerf | Embeddings Metrics"),
        "{console}"
    );
    assert!(!console.contains("LLM Metrics"), "{console}");
}

fn rankings_run(kind: &str, title: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    let out = profile(
        tmp.path(),
        &[
            "--model",
            "rr",
            "--url",
            &mock.url,
            "--endpoint-type",
            kind,
            "--rankings-passages-mean",
            "3",
            "--rankings-passages-prompt-token-mean",
            "10",
            "--rankings-query-prompt-token-mean",
            "5",
            "--request-count",
            "3",
        ],
    );
    assert!(out.status.success(), "{kind}: {}", stderr_text(&out));
    let run = tmp.path().join("run");
    let records = records(&run);
    assert_eq!(records.len(), 3, "{kind}");
    for r in &records {
        // The query and three passages.
        assert_eq!(metric(r, "input_sequence_length"), Some(5.0 + 3.0 * 10.0));
    }
    assert_no_token_metrics(&run, &records);
    let console = stdout_text(&out);
    assert!(
        console.contains(&format!("NVIDIA AIPerf | {title}\n")),
        "{kind}: {console}"
    );
}

/// Without the --rankings-* flags a request carries what AIPerf 0.13 sends: a 32-token
/// query and 10 passages of 128 tokens.
#[test]
fn rankings_defaults_are_aiperfs_dataset_defaults() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    let out = profile(
        tmp.path(),
        &[
            "--model",
            "rr",
            "--url",
            &mock.url,
            "--endpoint-type",
            "nim_rankings",
            "--request-count",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");
    for r in &records(&run) {
        assert_eq!(
            metric(r, "input_sequence_length"),
            Some(32.0 + 10.0 * 128.0)
        );
    }
}

#[test]
fn nim_rankings_end_to_end() {
    rankings_run("nim_rankings", "Rankings Metrics");
}

#[test]
fn cohere_rankings_end_to_end() {
    rankings_run("cohere-rankings", "Ranking Metrics");
}

#[test]
fn hf_tei_rankings_end_to_end() {
    rankings_run("hf_tei_rankings", "Ranking Metrics");
}

#[test]
fn template_end_to_end_reads_the_response_field() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    std::fs::write(
        tmp.path().join("chat.jinja"),
        r#"{"messages": [{"role": {{ role|tojson }}, "content": {{ text|tojson }}}], "model": {{ model|tojson }}, "max_tokens": {{ max_tokens }}}"#,
    )
    .unwrap();
    let url = format!("{}/v1/chat/completions", mock.url);
    let out = profile(
        tmp.path(),
        &[
            "--model",
            "m",
            "--url",
            &url,
            "--endpoint-type",
            "template",
            "--extra-inputs",
            "payload_template:chat.jinja",
            "--extra-inputs",
            "response_field:choices[0].message.content",
            "--isl",
            "12",
            "--osl",
            "7",
            "--request-count",
            "3",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");
    let records = records(&run);
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(metric(r, "input_sequence_length"), Some(12.0));
        // The mock's words are one token each: the answer found at the field has 7.
        assert_eq!(metric(r, "output_sequence_length"), Some(7.0));
    }
    assert!(stdout_text(&out).contains("NVIDIA AIPerf | LLM Metrics"));
}

#[test]
fn template_nv_embedqa_against_the_mock() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    let url = format!("{}/v1/embeddings", mock.url);
    let out = profile(
        tmp.path(),
        &[
            "--model",
            "m",
            "--url",
            &url,
            "--endpoint-type",
            "template",
            "--extra-inputs",
            "payload_template:nv-embedqa",
            "--request-count",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    // The vectors are detected in the answer: the requests count as answered.
    assert_eq!(records(&tmp.path().join("run")).len(), 2);
}

/// Writes a mooncake_trace file of chat payloads; returns its path.
fn payload_file(dir: &Path, n: usize) -> String {
    let lines: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"payload": {{"model": "m", "messages": [{{"role": "user", "content": "hello number {i}"}}], "max_tokens": 4}}}}"#
            )
        })
        .collect();
    let path = dir.join("payloads.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn raw_end_to_end_sends_payloads_to_the_url_as_given() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    let file = payload_file(tmp.path(), 3);
    let url = format!("{}/v1/chat/completions", mock.url);
    let out = profile(
        tmp.path(),
        &[
            "--model",
            "m",
            "--url",
            &url,
            "--endpoint-type",
            "raw",
            "--input-file",
            &file,
            "--custom-dataset-type",
            "mooncake_trace",
            "--request-count",
            "3",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let records = records(&tmp.path().join("run"));
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(metric(r, "output_sequence_length"), Some(4.0));
    }
}

// ----- Request bodies, byte for byte -----

fn reply(body: &str) -> Reply {
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    Reply::new(
        vec![[head.as_bytes(), body.as_bytes()].concat()],
        After::KeepOpen,
    )
}

/// Runs one request of `args` against a server answering `answer`; returns what it read.
fn one_request(dir: &Path, path: &str, answer: &'static str, args: &[&str]) -> RawRequest {
    let server = RawServer::start(move |_| reply(answer));
    let url = format!("{}{path}", server.url);
    let mut all = vec!["--url", url.as_str(), "--request-count", "1"];
    all.extend_from_slice(args);
    let out = profile(dir, &all);
    assert!(out.status.success(), "{}", stderr_text(&out));
    records(&dir.join("run"));
    let requests = posts(&server);
    assert_eq!(requests.len(), 1, "{requests:?}");
    requests.into_iter().next().unwrap()
}

/// The requests sent, without the server-metrics scrapes (`GET .../metrics`).
fn posts(server: &RawServer) -> Vec<RawRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.head.starts_with("post "))
        .collect()
}

fn request_line(r: &RawRequest) -> &str {
    r.head.lines().next().unwrap()
}

/// A single_turn file whose one line has these texts.
fn texts_file(dir: &Path, texts: &[&str]) -> String {
    let path = dir.join("texts.jsonl");
    std::fs::write(&path, serde_json::json!({ "texts": texts }).to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn embeddings_body() {
    let tmp = tempfile::tempdir().unwrap();
    let file = texts_file(tmp.path(), &["hello world", "second \"text\""]);
    let r = one_request(
        tmp.path(),
        "",
        r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]},{"object":"embedding","index":1,"embedding":[0.25]}],"usage":{"prompt_tokens":6,"total_tokens":6}}"#,
        &[
            "--model",
            "text-embedding-3-small",
            "--endpoint-type",
            "embeddings",
            "--input-file",
            &file,
            "--custom-dataset-type",
            "single_turn",
            "--extra-inputs",
            "encoding_format:float",
        ],
    );
    assert_eq!(request_line(&r), "post /v1/embeddings http/1.1");
    assert_eq!(
        String::from_utf8(r.body).unwrap(),
        r#"{"encoding_format":"float","input":["hello world","second \"text\""],"model":"text-embedding-3-small"}"#
    );
}

fn rankings_body(kind: &str, path: &str, answer: &'static str, expected: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let file = texts_file(tmp.path(), &["what is x", "x is a letter", "y is too"]);
    let r = one_request(
        tmp.path(),
        "",
        answer,
        &[
            "--model",
            "rerank-model",
            "--endpoint-type",
            kind,
            "--input-file",
            &file,
            "--custom-dataset-type",
            "single_turn",
        ],
    );
    assert_eq!(request_line(&r), format!("post {path} http/1.1"));
    assert_eq!(String::from_utf8(r.body).unwrap(), expected, "{kind}");
}

#[test]
fn nim_rankings_body() {
    rankings_body(
        "nim_rankings",
        "/v1/ranking",
        r#"{"rankings":[{"index":0,"logit":1.5},{"index":1,"logit":-2.0}]}"#,
        r#"{"model":"rerank-model","passages":[{"text":"x is a letter"},{"text":"y is too"}],"query":{"text":"what is x"}}"#,
    );
}

#[test]
fn cohere_rankings_body() {
    rankings_body(
        "cohere_rankings",
        "/v2/rerank",
        r#"{"id":"a","results":[{"index":0,"relevance_score":0.9},{"index":1,"relevance_score":0.1}]}"#,
        r#"{"documents":["x is a letter","y is too"],"model":"rerank-model","query":"what is x"}"#,
    );
}

#[test]
fn hf_tei_rankings_body() {
    rankings_body(
        "hf_tei_rankings",
        "/rerank",
        r#"[{"index":0,"score":0.9},{"index":1,"score":0.1}]"#,
        r#"{"query":"what is x","texts":["x is a letter","y is too"]}"#,
    );
}

#[test]
fn template_body() {
    let tmp = tempfile::tempdir().unwrap();
    let file = texts_file(tmp.path(), &["a \"quoted\" passage", "b"]);
    let r = one_request(
        tmp.path(),
        "/v1/embed?api-version=2",
        r#"{"embeddings":[[0.1],[0.2]]}"#,
        &[
            "--model",
            "nv-embedqa-e5-v5",
            "--endpoint-type",
            "template",
            "--extra-inputs",
            "payload_template:nv-embedqa",
            "--extra-inputs",
            "response_field:embeddings",
            "--extra-inputs",
            "input_type:query",
            "--input-file",
            &file,
            "--custom-dataset-type",
            "single_turn",
        ],
    );
    // Nothing is appended to the URL; the template keys stay out of the body.
    assert_eq!(request_line(&r), "post /v1/embed?api-version=2 http/1.1");
    assert_eq!(
        String::from_utf8(r.body).unwrap(),
        r#"{"input_type":"query","text":["a \"quoted\" passage","b"]}"#
    );
}

#[test]
fn raw_body_is_the_payload_and_plain_text_answers_count() {
    let tmp = tempfile::tempdir().unwrap();
    let file = payload_file(tmp.path(), 1);
    let server = RawServer::start(|_| {
        let body = "just some words";
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        Reply::new(
            vec![[head.as_bytes(), body.as_bytes()].concat()],
            After::KeepOpen,
        )
    });
    let url = format!("{}/generate", server.url);
    let out = profile(
        tmp.path(),
        &[
            "--model",
            "m",
            "--url",
            &url,
            "--endpoint-type",
            "raw",
            "--input-file",
            &file,
            "--custom-dataset-type",
            "mooncake_trace",
            "--request-count",
            "1",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let records = records(&tmp.path().join("run"));
    assert_eq!(records.len(), 1);
    // "just some words": three tokens of the builtin tokenizer.
    assert_eq!(metric(&records[0], "output_sequence_length"), Some(3.0));
    let r = &posts(&server)[0];
    assert_eq!(request_line(r), "post /generate http/1.1");
    assert_eq!(
        String::from_utf8(r.body.clone()).unwrap(),
        r#"{"max_tokens":4,"messages":[{"content":"hello number 0","role":"user"}],"model":"m"}"#
    );
}

#[test]
fn bad_combinations_exit_2_saying_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--rankings-passages-mean", "2"],
            "--rankings-passages-mean: synthetic passages are for --endpoint-type nim_rankings",
        ),
        (
            &["--endpoint-type", "template"],
            "--endpoint-type template needs a template",
        ),
        (
            &[
                "--endpoint-type",
                "template",
                "--extra-inputs",
                "payload_template:{% if %}",
            ],
            "--extra-inputs payload_template: the template does not compile",
        ),
        (
            &["--extra-inputs", "response_field:a.b"],
            "--extra-inputs response_field: only --endpoint-type template or raw",
        ),
        (
            &[
                "--endpoint-type",
                "raw",
                "--extra-inputs",
                "response_field:a[x]",
            ],
            "is not a field path",
        ),
        (
            &["--endpoint-type", "raw"],
            "--endpoint-type raw sends each input line's \"payload\" as the whole body: give an --input-file with --custom-dataset-type raw_payload",
        ),
        (
            &[
                "--endpoint-type",
                "nim_rankings",
                "--rankings-passages-stddev",
                "-1",
            ],
            "--rankings-passages-stddev: -1 is not allowed",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec![
            "--model",
            "m",
            "--url",
            "http://127.0.0.1:9",
            "--request-count",
            "1",
        ];
        all.extend_from_slice(args);
        let out = profile(tmp.path(), &all);
        let stderr = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn image_generation_end_to_end_counts_the_images() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    let out = profile(
        tmp.path(),
        &[
            "--model",
            "flux",
            "--url",
            &mock.url,
            "--endpoint-type",
            "image_generation",
            "--extra-inputs",
            "n:2",
            "--isl",
            "16",
            "--request-count",
            "3",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");
    let records = records(&run);
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(metric(r, "input_sequence_length"), Some(16.0));
        assert_eq!(metric(r, "num_images"), Some(2.0));
        let latency_ms = metric(r, "request_latency").unwrap();
        let throughput = metric(r, "image_throughput").unwrap();
        assert!((throughput - 2.0 / (latency_ms / 1e3)).abs() <= 1e-6 * throughput);
        let per_image = metric(r, "image_latency").unwrap();
        assert!((per_image - latency_ms / 2.0).abs() <= 1e-6 * per_image);
        assert!(metric(r, "image_token_count").is_none());
    }
    assert_no_token_metrics(&run, &records);
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    assert_eq!(summary["total_num_images"]["avg"], 6.0);
    assert!(stdout_text(&out).contains("NVIDIA AIPerf | Image Generation Metrics"));
}

#[test]
fn image_generation_body() {
    let tmp = tempfile::tempdir().unwrap();
    let file = texts_file(tmp.path(), &["a red apple on a table"]);
    let r = one_request(
        tmp.path(),
        "",
        r#"{"created":1,"data":[{"b64_json":"iVBORw0KGgo="}]}"#,
        &[
            "--model",
            "gpt-image-1",
            "--endpoint-type",
            "image_generation",
            "--extra-inputs",
            "size:1024x1024",
            "--input-file",
            &file,
            "--custom-dataset-type",
            "single_turn",
        ],
    );
    assert_eq!(request_line(&r), "post /v1/images/generations http/1.1");
    assert_eq!(
        String::from_utf8(r.body).unwrap(),
        r#"{"model":"gpt-image-1","n":1,"prompt":"a red apple on a table","response_format":"b64_json","size":"1024x1024"}"#
    );
}

#[test]
fn prompt_batch_size_puts_several_inputs_in_one_embeddings_request() {
    let tmp = tempfile::tempdir().unwrap();
    let server = RawServer::start(|_| {
        reply(r#"{"data":[{"embedding":[1]},{"embedding":[2]},{"embedding":[3]}]}"#)
    });
    let out = profile(
        tmp.path(),
        &[
            "--model",
            "emb",
            "--url",
            &server.url,
            "--endpoint-type",
            "embeddings",
            "-b",
            "3",
            "--isl",
            "8",
            "--num-dataset-entries",
            "2",
            "--request-count",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let records = records(&tmp.path().join("run"));
    let tok = aiperf::api::Tokenizer::builtin().unwrap();
    let sent = posts(&server);
    assert_eq!(sent.len(), 2);
    let mut expected_isl = Vec::new();
    for r in &sent {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        let inputs = body["input"].as_array().unwrap();
        assert_eq!(inputs.len(), 3, "{body}");
        for t in inputs {
            assert_eq!(tok.count(t.as_str().unwrap()), 8);
        }
        // The input length counts the batch's texts joined by single spaces.
        let joined: Vec<&str> = inputs.iter().map(|t| t.as_str().unwrap()).collect();
        expected_isl.push(tok.count(&joined.join(" ")) as f64);
    }
    let mut isl: Vec<f64> = records
        .iter()
        .map(|r| metric(r, "input_sequence_length").unwrap())
        .collect();
    isl.sort_by(f64::total_cmp);
    expected_isl.sort_by(f64::total_cmp);
    assert_eq!(isl, expected_isl);
    // Two requests, six different prompts.
    let b0: Value = serde_json::from_slice(&sent[0].body).unwrap();
    let b1: Value = serde_json::from_slice(&sent[1].body).unwrap();
    assert_ne!(b0["input"], b1["input"]);
    let refused = profile(
        tmp.path(),
        &[
            "--model",
            "m",
            "--url",
            &server.url,
            "--prompt-batch-size",
            "2",
            "--endpoint-type",
            "nim_rankings",
        ],
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr_text(&refused).contains(
        "--prompt-batch-size 2: --endpoint-type nim_rankings takes a query and passages"
    ));
}

#[test]
fn merged_embeddings_shards_have_no_token_metrics_either() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    for i in ["0", "1"] {
        let dir = format!("shard-{i}");
        let out = run_aiperf_in(
            tmp.path(),
            &[
                "profile",
                "--model",
                "emb",
                "--tokenizer",
                "builtin",
                "--url",
                &mock.url,
                "--endpoint-type",
                "embeddings",
                "--isl",
                "10",
                "--request-count",
                "6",
                "--random-seed",
                "3",
                "--concurrency",
                "2",
                "--shard-index",
                i,
                "--shard-count",
                "2",
                "--artifact-dir",
                &dir,
            ],
        );
        assert!(out.status.success(), "shard {i}: {}", stderr_text(&out));
    }
    let out = run_aiperf_in(tmp.path(), &["merge", ".", "--output", "merged"]);
    assert!(out.status.success(), "merge: {}", stderr_text(&out));
    let merged = tmp.path().join("merged");
    let summary = read_json(&merged.join("profile_export_aiperf.json"));
    assert_eq!(summary["request_count"]["avg"], 6.0);
    assert_eq!(summary["total_isl"]["avg"], 60.0);
    assert!(summary.get("total_token_throughput").is_none(), "{summary}");
    assert!(summary.get("output_token_throughput").is_none());
}

#[test]
fn raw_payload_files_are_replayed_line_by_line() {
    let tmp = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"model":"a","prompt":"one two","max_tokens":2}"#,
        r#"{"model":"b","messages":[{"role":"user","content":"three"}],"stream":false}"#,
    ];
    let file = tmp.path().join("bodies.jsonl");
    std::fs::write(&file, format!("{}\n\n{}\n", lines[0], lines[1])).unwrap();
    let server = RawServer::start(|_| reply(r#"{"choices":[{"text":"ok"}]}"#));
    let url = format!("{}/any/path", server.url);
    let out = profile(
        tmp.path(),
        &[
            "--model",
            "m",
            "--url",
            &url,
            "--endpoint-type",
            "raw",
            "--input-file",
            file.to_str().unwrap(),
            "--custom-dataset-type",
            "raw_payload",
            "--request-count",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let records = records(&tmp.path().join("run"));
    let isl: Vec<f64> = records
        .iter()
        .map(|r| metric(r, "input_sequence_length").unwrap())
        .collect();
    assert_eq!(isl, [2.0, 1.0]);
    let sent: Vec<Value> = posts(&server)
        .into_iter()
        .map(|r| {
            assert_eq!(request_line(&r), "post /any/path http/1.1");
            serde_json::from_slice(&r.body).unwrap()
        })
        .collect();
    // The same JSON objects (serialized again: keys in sorted order).
    let written: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(sent, written);
    std::fs::write(&file, "[1, 2]\n").unwrap();
    let bad = profile(
        tmp.path(),
        &[
            "--model",
            "m",
            "--url",
            &url,
            "--endpoint-type",
            "raw",
            "--input-file",
            file.to_str().unwrap(),
            "--custom-dataset-type",
            "raw_payload",
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr_text(&bad).contains("bodies.jsonl:1: a raw_payload line is a whole request body")
    );
}
