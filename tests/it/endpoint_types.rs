//! chat_embeddings, nim_embeddings, huggingface_generate, image_retrieval and solido_rag:
//! each request body checked byte for byte against the shape AIPerf sends (captured by a
//! small server written here, which also answers in the API's documented shape), and each
//! type run end to end against the mock (records, metrics, console title).

use crate::common;
use crate::common::Profile;

use std::path::Path;

use aiperf::api::Tokenizer;
use common::raw_server::{After, RawRequest, RawServer, json_reply, sse_reply};
use common::{MockChild, read_json, read_jsonl, stderr_text};
use serde_json::{Value, json};

/// A 1x1 PNG.
const PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn metric(r: &Value, tag: &str) -> Option<f64> {
    r["metrics"][tag]["value"].as_f64()
}

fn count(text: &str) -> f64 {
    Tokenizer::builtin().unwrap().count(text) as f64
}

fn profile(dir: &Path, args: &[&str]) -> std::process::Output {
    Profile::new("m")
        .artifact_dir("run")
        .args(&["--ui-type", "none"])
        .args(args)
        .run_in(dir)
}

fn records(run: &Path) -> Vec<Value> {
    let records = read_jsonl(&run.join("profile_export.jsonl"));
    for r in &records {
        assert!(r["error"].is_null(), "{r}");
    }
    records
}

/// A single_turn file of one line.
fn line_file(dir: &Path, line: Value) -> String {
    let path = dir.join("in.jsonl");
    std::fs::write(&path, line.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

/// One request of `args` (with a one-line input file) against a server sending `reply`:
/// the request it read and the run's one record.
fn one_request(
    line: Value,
    reply: impl Fn(&RawRequest) -> common::raw_server::Reply + Send + Sync + 'static,
    args: &[&str],
) -> (RawRequest, Value) {
    let tmp = tempfile::tempdir().unwrap();
    let file = line_file(tmp.path(), line);
    let server = RawServer::start(reply);
    let mut all = vec![
        "--url",
        server.url.as_str(),
        "--request-count",
        "1",
        "--input-file",
        &file,
        "--custom-dataset-type",
        "single_turn",
    ];
    all.extend_from_slice(args);
    let out = profile(tmp.path(), &all);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let mut records = records(&tmp.path().join("run"));
    let posts: Vec<RawRequest> = server
        .requests()
        .into_iter()
        .filter(|r| r.head.starts_with("post "))
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    (posts.into_iter().next().unwrap(), records.remove(0))
}

fn request_line(r: &RawRequest) -> &str {
    r.head.lines().next().unwrap()
}

fn body(r: &RawRequest) -> String {
    String::from_utf8(r.body.clone()).unwrap()
}

fn embeddings_answer(n: usize) -> Value {
    let data: Vec<Value> = (0..n)
        .map(|i| json!({"object": "embedding", "index": i, "embedding": [0.5, 0.25]}))
        .collect();
    json!({"object": "list", "data": data, "usage": {"prompt_tokens": 9, "total_tokens": 9}})
}

#[test]
fn chat_embeddings_body_is_the_chat_body_with_images() {
    let (r, rec) = one_request(
        json!({"text": "a photo", "image": PNG}),
        |_| json_reply("", &embeddings_answer(1), After::KeepOpen),
        &["--endpoint-type", "chat-embeddings"],
    );
    assert_eq!(request_line(&r), "post /v1/embeddings http/1.1");
    assert_eq!(
        body(&r),
        format!(
            r#"{{"messages":[{{"content":[{{"text":"a photo","type":"text"}},{{"image_url":{{"url":"{PNG}"}},"type":"image_url"}}],"role":"user"}}],"model":"m","stream":false}}"#
        )
    );
    assert_eq!(
        metric(&rec, "input_sequence_length"),
        Some(count("a photo"))
    );
    assert_eq!(metric(&rec, "output_sequence_length"), None);
}

#[test]
fn nim_embeddings_pairs_texts_with_images_or_sends_images_alone() {
    let answer = |_: &RawRequest| json_reply("", &embeddings_answer(2), After::KeepOpen);
    let (r, rec) = one_request(
        json!({"texts": ["cat", "dog"], "images": [PNG, PNG]}),
        answer,
        &["--endpoint-type", "nim_embeddings"],
    );
    assert_eq!(request_line(&r), "post /v1/embeddings http/1.1");
    assert_eq!(
        body(&r),
        format!(r#"{{"input":["cat <img src='{PNG}'/>","dog <img src='{PNG}'/>"],"model":"m"}}"#)
    );
    assert_eq!(metric(&rec, "usage_prompt_tokens"), Some(9.0));
    let (r, _) = one_request(
        json!({"image": PNG}),
        answer,
        &[
            "--endpoint-type",
            "nim-embeddings",
            "--extra-inputs",
            "input_type:passage",
        ],
    );
    assert_eq!(
        body(&r),
        format!(r#"{{"input":["<img src='{PNG}'/>"],"input_type":"passage","model":"m"}}"#)
    );
}

#[test]
fn huggingface_generate_sends_inputs_and_parameters_and_reads_generated_text() {
    let (r, rec) = one_request(
        json!({"texts": ["hello", "there"]}),
        |_| {
            json_reply(
                "",
                &json!({"generated_text": " one two three"}),
                After::KeepOpen,
            )
        },
        &[
            "--endpoint-type",
            "huggingface_generate",
            "--osl",
            "7",
            "--extra-inputs",
            "temperature:0.5",
        ],
    );
    assert_eq!(request_line(&r), "post /generate http/1.1");
    assert_eq!(
        body(&r),
        r#"{"inputs":"hello there","parameters":{"max_new_tokens":7,"temperature":0.5}}"#
    );
    assert_eq!(
        metric(&rec, "output_sequence_length"),
        Some(count(" one two three"))
    );
    assert_eq!(
        metric(&rec, "input_sequence_length"),
        Some(count("hello there"))
    );
}

#[test]
fn huggingface_generate_streams_token_events_from_generate_stream() {
    let event = |text: &str, last: bool| {
        let generated = if last { json!(" a b c") } else { Value::Null };
        format!(
            "data:{}\n\n",
            json!({"index": 1, "token": {"id": 5, "text": text, "logprob": -0.1, "special": false}, "generated_text": generated, "details": null})
        )
    };
    let events = vec![event(" a", false), event(" b", false), event(" c", true)];
    let (r, rec) = one_request(
        json!({"text": "hi"}),
        move |_| sse_reply("", &events, After::KeepOpen),
        &["--endpoint-type", "huggingface_generate", "--streaming"],
    );
    assert_eq!(request_line(&r), "post /generate_stream http/1.1");
    assert_eq!(body(&r), r#"{"inputs":"hi","parameters":{}}"#);
    // The final event's generated_text repeats the text and is not counted again.
    assert_eq!(
        metric(&rec, "output_sequence_length"),
        Some(count(" a b c"))
    );
    assert!(metric(&rec, "time_to_first_token").is_some());
}

#[test]
fn image_retrieval_sends_image_items_only() {
    let (r, rec) = one_request(
        json!({"images": [PNG, PNG]}),
        |_| {
            json_reply(
                "",
                &json!({"data": [{"index": 0}, {"index": 1}]}),
                After::KeepOpen,
            )
        },
        &["--endpoint-type", "image_retrieval"],
    );
    assert_eq!(request_line(&r), "post /v1/infer http/1.1");
    assert_eq!(
        body(&r),
        format!(
            r#"{{"input":[{{"type":"image_url","url":"{PNG}"}},{{"type":"image_url","url":"{PNG}"}}]}}"#
        )
    );
    assert_eq!(metric(&rec, "input_sequence_length"), None);
    assert_eq!(metric(&rec, "num_images"), Some(2.0));
}

#[test]
fn solido_rag_sends_query_filters_and_model_and_reads_content() {
    let (r, rec) = one_request(
        json!({"text": "What is SDE?"}),
        |_| {
            json_reply(
                "",
                &json!({"content": " SDE is a design tool", "sources": [{"title": "guide"}]}),
                After::KeepOpen,
            )
        },
        &["--endpoint-type", "solido_rag"],
    );
    assert_eq!(request_line(&r), "post /rag/api/prompt http/1.1");
    assert_eq!(
        body(&r),
        r#"{"filters":{"family":"Solido","tool":"SDE"},"inference_model":"m","query":["What is SDE?"]}"#
    );
    assert_eq!(
        metric(&rec, "output_sequence_length"),
        Some(count(" SDE is a design tool"))
    );
}

#[test]
fn solido_rag_streams_content_events() {
    let events: Vec<String> = [" one", " two", " three"]
        .iter()
        .map(|t| format!("data: {}\n\n", json!({"content": t})))
        .collect();
    let (_, rec) = one_request(
        json!({"text": "q"}),
        move |_| sse_reply("", &events, After::Close),
        &["--endpoint-type", "solido_rag", "--streaming"],
    );
    // The stream ends when the connection closes: no [DONE] is needed.
    assert_eq!(
        metric(&rec, "output_sequence_length"),
        Some(count(" one two three"))
    );
    assert!(metric(&rec, "inter_token_latency").is_some());
}

/// A run against the mock: the records, the summary and the console.
fn mock_run(args: &[&str]) -> (Vec<Value>, Value, String) {
    mock_run_with(&["--fast"], args)
}

fn mock_run_with(mock_args: &[&str], args: &[&str]) -> (Vec<Value>, Value, String) {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(mock_args);
    let mut all = vec!["--url", mock.url.as_str(), "--request-count", "3"];
    all.extend_from_slice(args);
    let out = profile(tmp.path(), &all);
    mock.terminate();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    (
        records(&run),
        summary,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn assert_no_output_tokens(records: &[Value], summary: &Value) {
    for r in records {
        for tag in [
            "output_sequence_length",
            "time_to_first_token",
            "inter_token_latency",
        ] {
            assert!(metric(r, tag).is_none(), "{tag} in {r}");
        }
    }
    for tag in [
        "output_token_throughput",
        "total_osl",
        "output_sequence_length",
    ] {
        assert!(summary.get(tag).is_none(), "{tag} in the summary");
    }
}

#[test]
fn embeddings_types_end_to_end() {
    let (records, summary, console) =
        mock_run(&["--endpoint-type", "nim_embeddings", "--isl", "24"]);
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(metric(r, "input_sequence_length"), Some(24.0));
        assert_eq!(metric(r, "usage_prompt_tokens"), Some(24.0));
    }
    assert_no_output_tokens(&records, &summary);
    assert!(
        console.contains("NVIDIA AIPerf | NIM Embeddings Metrics"),
        "{console}"
    );

    let (records, summary, console) = mock_run(&[
        "--endpoint-type",
        "chat_embeddings",
        "--isl",
        "20",
        "--image-width-mean",
        "64",
        "--image-height-mean",
        "64",
    ]);
    for r in &records {
        assert_eq!(metric(r, "input_sequence_length"), Some(20.0));
        // The mock counts the text and the image (Qwen2-VL: a 64x64 image is 2x2 tokens
        // plus 2 delimiters).
        assert_eq!(metric(r, "usage_prompt_tokens"), Some(26.0));
        assert_eq!(metric(r, "num_images"), Some(1.0));
    }
    assert_no_output_tokens(&records, &summary);
    assert!(
        console.contains("NVIDIA AIPerf | Embeddings Metrics"),
        "{console}"
    );
}

#[test]
fn huggingface_generate_end_to_end_streamed_and_whole() {
    for streaming in [true, false] {
        let mut args = vec![
            "--endpoint-type",
            "huggingface-generate",
            "--isl",
            "30",
            "--osl",
            "6",
        ];
        if streaming {
            args.push("--streaming");
        }
        let (records, _, console) = mock_run(&args);
        assert_eq!(records.len(), 3);
        for r in &records {
            assert_eq!(metric(r, "input_sequence_length"), Some(30.0));
            assert_eq!(metric(r, "output_sequence_length"), Some(6.0));
            assert_eq!(metric(r, "time_to_first_token").is_some(), streaming, "{r}");
        }
        assert!(console.contains("NVIDIA AIPerf | LLM Metrics"), "{console}");
    }
}

#[test]
fn image_retrieval_end_to_end() {
    let (records, summary, console) = mock_run(&[
        "--endpoint-type",
        "image_retrieval",
        "--image-width-mean",
        "32",
        "--image-height-mean",
        "32",
        "--image-batch-size",
        "2",
    ]);
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(metric(r, "num_images"), Some(2.0));
        assert_eq!(metric(r, "input_sequence_length"), None);
    }
    assert_no_output_tokens(&records, &summary);
    assert!(summary.get("input_sequence_length").is_none());
    assert!(
        console.contains("NVIDIA AIPerf | Image Retrieval Metrics"),
        "{console}"
    );
}

#[test]
fn solido_rag_end_to_end() {
    let (records, _, console) = mock_run(&["--endpoint-type", "solido_rag", "--isl", "16"]);
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(metric(r, "input_sequence_length"), Some(16.0));
        // Without an output limit the mock answers clamp(prompt tokens, 16, 256) tokens.
        assert_eq!(metric(r, "output_sequence_length"), Some(16.0));
        assert_eq!(metric(r, "time_to_first_token"), None);
    }
    assert!(
        console.contains("NVIDIA AIPerf | SOLIDO RAG Metrics"),
        "{console}"
    );
    // The mock streams when the body asks; its requests are recorded like chat's.
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("served.jsonl");
    let (records, _, _) = mock_run_with(
        &["--fast", "--record-requests", log.to_str().unwrap()],
        &[
            "--endpoint-type",
            "solido_rag",
            "--isl",
            "20",
            "--streaming",
            "--extra-inputs",
            "stream:true",
        ],
    );
    for r in &records {
        assert_eq!(metric(r, "output_sequence_length"), Some(20.0));
        assert!(metric(r, "time_to_first_token").is_some(), "{r}");
    }
    let served = common::read_served(&log);
    assert_eq!(served.len(), 3);
    for s in &served {
        assert_eq!(s["endpoint"], "solido_rag", "{s}");
        assert_eq!(s["stream"], true, "{s}");
        assert_eq!(s["prompt_tokens"], 20, "{s}");
        assert_eq!(s["output_tokens"], 20, "{s}");
    }
}

#[test]
fn what_the_types_cannot_send_is_refused() {
    for (args, needle) in [
        (
            &["--endpoint-type", "image_retrieval"][..],
            "--endpoint-type image_retrieval sends images: give --image-width-mean",
        ),
        (
            &["--endpoint-type", "nim_embeddings", "--osl", "5"][..],
            "--output-tokens-mean: --endpoint-type nim_embeddings has no output limit",
        ),
        (
            &[
                "--endpoint-type",
                "image-edit",
                "--image-width-mean",
                "8",
                "--image-height-mean",
                "8",
                "--extra-inputs",
                "mask:x",
            ][..],
            "--extra-inputs mask: image_edit fills the prompt, image, url and mask fields itself",
        ),
        (
            &["--endpoint-type", "video_generation", "--osl", "5"][..],
            "--output-tokens-mean: --endpoint-type video_generation has no output limit",
        ),
        (
            &[
                "--endpoint-type",
                "huggingface_generate",
                "--image-width-mean",
                "8",
                "--image-height-mean",
                "8",
            ][..],
            "images need --endpoint-type chat, responses, messages, chat_embeddings, nim_embeddings, image_edit or image_retrieval, not huggingface_generate",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut all = vec!["--url", "http://127.0.0.1:9"];
        all.extend_from_slice(args);
        let out = profile(tmp.path(), &all);
        let stderr = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: {needle:?} not in {stderr}"
        );
    }
}

#[test]
fn the_mocks_one_piece_routes_are_recorded_like_chat() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("served.jsonl");
    let (records, _, _) = mock_run_with(
        &["--fast", "--record-requests", log.to_str().unwrap()],
        &["--endpoint-type", "embeddings", "--isl", "12"],
    );
    let served = common::read_served(&log);
    assert_eq!(served.len(), 3);
    for (s, r) in served.iter().zip(&records) {
        assert_eq!(s["endpoint"], "embeddings", "{s}");
        assert_eq!(
            (s["status"].as_u64(), s["prompt_tokens"].as_u64()),
            (Some(200), Some(12)),
            "{s}"
        );
        assert_eq!(s["output_tokens"], 0, "{s}");
        assert_eq!(s["model"], "m", "{s}");
        assert!(s["x_request_id"].is_string(), "{s}");
        assert!(metric(r, "request_latency").is_some());
    }
    // A bad body is recorded with its status and reason.
    let log = tmp.path().join("rejected.jsonl");
    let mock = MockChild::spawn(&["--fast", "--record-requests", log.to_str().unwrap()]);
    let resp = common::post_json(mock.addr, "/v1/ranking", &json!({"query": 5}));
    assert_eq!(resp.status, 400);
    mock.terminate();
    let served = common::read_served(&log);
    assert_eq!(served.len(), 1);
    assert_eq!(
        (served[0]["endpoint"].as_str(), served[0]["status"].as_u64()),
        (Some("nim_rankings"), Some(400))
    );
    assert!(
        served[0]["error"].as_str().unwrap().contains("passages"),
        "{}",
        served[0]
    );
}

#[test]
fn image_edit_sends_a_multipart_form_with_the_image_file() {
    let (r, rec) = one_request(
        json!({"text": "make it blue", "image": PNG}),
        |_| {
            json_reply(
                "",
                &json!({"created": 1, "data": [{"b64_json": "iVBO"}]}),
                After::KeepOpen,
            )
        },
        &[
            "--endpoint-type",
            "image_edit",
            "--extra-inputs",
            "size:64x64",
        ],
    );
    assert_eq!(request_line(&r), "post /v1/images/edits http/1.1");
    let boundary = "aiperf-form-boundary-5f3a9c2e7b1d4086a4e2c9b7";
    assert_eq!(
        r.header("content-type"),
        Some(format!("multipart/form-data; boundary={boundary}").as_str())
    );
    use base64::Engine;
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG.split_once(',').unwrap().1)
        .unwrap();
    let field = |name: &str, value: &str| {
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
        )
        .into_bytes()
    };
    let expected = [
        field("prompt", "make it blue"),
        field("model", "m"),
        field("response_format", "b64_json"),
        field("n", "1"),
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"image.png\"\r\nContent-Type: image/png\r\n\r\n").into_bytes(),
        png,
        b"\r\n".to_vec(),
        field("size", "64x64"),
        format!("--{boundary}--\r\n").into_bytes(),
    ]
    .concat();
    assert_eq!(r.body, expected);
    assert_eq!(metric(&rec, "num_images"), Some(1.0));
    assert_eq!(
        metric(&rec, "input_sequence_length"),
        Some(count("make it blue"))
    );
}

#[test]
fn image_edit_end_to_end() {
    let (records, summary, console) = mock_run(&[
        "--endpoint-type",
        "image_edit",
        "--isl",
        "12",
        "--image-width-mean",
        "32",
        "--image-height-mean",
        "32",
        "--extra-inputs",
        "n:2",
    ]);
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(metric(r, "input_sequence_length"), Some(12.0));
        // Two images answered.
        assert_eq!(metric(r, "num_images"), Some(2.0));
    }
    assert_no_output_tokens(&records, &summary);
    assert!(
        console.contains("NVIDIA AIPerf | Image Edit Metrics"),
        "{console}"
    );
}

#[test]
fn a_tgi_stream_cut_before_its_final_token_is_incomplete() {
    let tmp = tempfile::tempdir().unwrap();
    let file = line_file(tmp.path(), json!({"text": "hi"}));
    let event = format!(
        "data:{}\n\n",
        json!({"index": 1, "token": {"id": 5, "text": " a", "logprob": 0.0, "special": false}, "generated_text": null, "details": null})
    );
    let server =
        RawServer::start(move |_| sse_reply("", std::slice::from_ref(&event), After::Close));
    let out = profile(
        tmp.path(),
        &[
            "--url",
            server.url.as_str(),
            "--request-count",
            "1",
            "--input-file",
            &file,
            "--custom-dataset-type",
            "single_turn",
            "--endpoint-type",
            "huggingface_generate",
            "--streaming",
        ],
    );
    // Its only request failed, which fails the run.
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let r = &read_jsonl(&tmp.path().join("run/profile_export.jsonl"))[0];
    assert_eq!(r["error"]["type"], "IncompleteStreamError", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("without a final token (generated_text) event"),
        "{r}"
    );
}
