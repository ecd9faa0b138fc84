//! `--endpoint-type responses` (OpenAI Responses API) and `messages` (Anthropic Messages
//! API) end to end: the real binary against the mock server, streamed and not; the exact
//! request bodies and headers against a server written here, with streams shaped as the
//! public API docs show them; and a stream cut before its closing event.

use crate::common;
use crate::common::Profile;

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::raw_server::{After, RawServer, sse_reply};
use common::{MockChild, read_jsonl, stderr_text};
use serde_json::{Value, json};

fn profile(dir: &Path, url: &str, endpoint: &str, extra: &[&str]) -> std::process::Output {
    Profile::new("mock-model")
        .args(&["--endpoint-type", endpoint])
        .url(url)
        .artifact_dir("run")
        .args(extra)
        .run_in(dir)
}

fn records(dir: &Path) -> Vec<Value> {
    read_jsonl(&dir.join("run/profile_export.jsonl"))
}

fn metric(r: &Value, tag: &str) -> Option<f64> {
    r["metrics"][tag]["value"].as_f64()
}

/// Four requests of 20 prompt tokens and 6 output tokens; the mock adds 3 template tokens
/// per message, so the server's prompt count (23) differs from the client's (20).
fn end_to_end(endpoint: &str, streaming: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "4", "--itl", "1", "--chat-template-tokens", "3"]);
    let mut extra = vec![
        "--isl",
        "20",
        "--osl",
        "6",
        "--request-count",
        "4",
        "--concurrency",
        "2",
        "--use-server-token-count",
    ];
    if streaming {
        extra.push("--streaming");
    }
    let out = profile(tmp.path(), &mock.url, endpoint, &extra);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("NVIDIA AIPerf | LLM Metrics"), "{stdout}");
    let recs = records(tmp.path());
    assert_eq!(recs.len(), 4);
    for r in &recs {
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(metric(r, "input_sequence_length"), Some(23.0), "{r}");
        assert_eq!(metric(r, "output_sequence_length"), Some(6.0), "{r}");
        assert_eq!(metric(r, "usage_prompt_tokens"), Some(23.0), "{r}");
        assert_eq!(metric(r, "usage_completion_tokens"), Some(6.0), "{r}");
        // Only the Responses API reports a total.
        let total = (endpoint == "responses").then_some(29.0);
        assert_eq!(metric(r, "usage_total_tokens"), total, "{r}");
        let ttft = metric(r, "time_to_first_token");
        if streaming {
            // The first delta comes after the mock's 4 ms TTFT, before the last token.
            let ttft = ttft.unwrap_or_else(|| panic!("no TTFT in {r}"));
            let latency = metric(r, "request_latency").unwrap();
            assert!(ttft >= 4.0 && ttft < latency, "{ttft} {latency}");
            assert!(metric(r, "inter_token_latency").is_some(), "{r}");
        } else {
            assert_eq!(ttft, None, "{r}");
        }
    }
}

#[test]
fn responses_streamed_against_the_mock() {
    end_to_end("responses", true);
}

#[test]
fn responses_whole_against_the_mock() {
    end_to_end("responses", false);
}

#[test]
fn messages_streamed_against_the_mock() {
    end_to_end("messages", true);
}

#[test]
fn messages_whole_against_the_mock() {
    end_to_end("messages", false);
}

/// A 1x1 PNG as a data URL.
fn png_data_url() -> String {
    let mut bytes = Vec::new();
    image::RgbImage::new(1, 1)
        .write_to(
            &mut std::io::Cursor::new(&mut bytes),
            image::ImageFormat::Png,
        )
        .unwrap();
    format!("data:image/png;base64,{}", STANDARD.encode(&bytes))
}

/// A conversation with a system turn and a user turn of text and two images (a data URL
/// and a remote URL) asking for 7 tokens, and a plain one-text conversation.
fn write_input(dir: &Path, data_url: &str) -> String {
    let lines = [
        json!({"session_id": "a", "turns": [
            {"role": "system", "text": "Be brief."},
            {"texts": ["Describe both."], "images": [data_url, "https://example.com/cat.png"],
             "output_length": 7}]}),
        json!({"session_id": "b", "turns": [{"text": "Hi"}]}),
    ];
    let path = dir.join("input.jsonl");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&path, text.join("\n") + "\n").unwrap();
    path.to_str().unwrap().to_string()
}

/// Runs both conversations against `server` and returns the bodies it got, in order.
fn golden_run(endpoint: &str, server: &RawServer) -> (Vec<(String, Value)>, Vec<Value>) {
    let tmp = tempfile::tempdir().unwrap();
    let input = write_input(tmp.path(), &png_data_url());
    let args = [
        "--streaming",
        "--api-key",
        "sk-test",
        "--input-file",
        &input,
        "--custom-dataset-type",
        "multi_turn",
        "--request-count",
        "2",
        "--extra-inputs",
        "temperature:0.5",
        "--use-server-token-count",
    ];
    let out = profile(tmp.path(), &server.url, endpoint, &args);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let mut bodies: Vec<(String, Value)> = server
        .requests()
        .into_iter()
        // Not the chat-template probe sent before a run with images.
        .filter(|r| r.header("x-request-id") != Some(aiperf::api::PROBE_REQUEST_ID))
        // Not the metrics scrapes.
        .filter(|r| r.head.starts_with("post "))
        .map(|r| {
            (
                r.head.clone(),
                serde_json::from_slice(&r.body).expect("a JSON body"),
            )
        })
        .collect();
    bodies.sort_by_key(|(_, b)| b.to_string().len());
    (bodies, records(tmp.path()))
}

/// A header of a lower-cased request head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then(|| v.trim())
    })
}

fn check_records(records: &[Value], isl: f64, osl: f64) {
    assert_eq!(records.len(), 2);
    for r in records {
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(metric(r, "input_sequence_length"), Some(isl), "{r}");
        assert_eq!(metric(r, "output_sequence_length"), Some(osl), "{r}");
        assert!(metric(r, "time_to_first_token").is_some(), "{r}");
    }
}

#[test]
fn responses_request_bodies_and_headers() {
    // A stream as the API reference shows it, usage in `response.completed`.
    let server = RawServer::start(|_| {
        let ev = |v: Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());
        let resp = json!({"id": "resp_1", "object": "response", "status": "in_progress"});
        let events = vec![
            ev(json!({"type": "response.created", "sequence_number": 0, "response": resp})),
            ev(
                json!({"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1",
                        "output_index": 0, "content_index": 0, "delta": "Hi"}),
            ),
            ev(
                json!({"type": "response.output_text.delta", "sequence_number": 2, "item_id": "msg_1",
                        "output_index": 0, "content_index": 0, "delta": " there"}),
            ),
            ev(
                json!({"type": "response.completed", "sequence_number": 3, "response": {
                "id": "resp_1", "object": "response", "status": "completed",
                "usage": {"input_tokens": 31, "output_tokens": 5, "total_tokens": 36,
                          "output_tokens_details": {"reasoning_tokens": 2}}}}),
            ),
        ];
        sse_reply("", &events, After::KeepOpen)
    });
    let (bodies, recs) = golden_run("responses", &server);
    let data_url = png_data_url();
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        bodies[0].1,
        json!({"input": [{"type": "message", "role": "user", "content": "Hi"}],
               "model": "mock-model", "stream": true, "temperature": 0.5})
    );
    assert_eq!(
        bodies[1].1,
        json!({"input": [{"type": "message", "role": "user", "content": [
                   {"type": "input_text", "text": "Describe both."},
                   {"type": "input_image", "image_url": data_url},
                   {"type": "input_image", "image_url": "https://example.com/cat.png"}]}],
               "instructions": "Be brief.", "max_output_tokens": 7,
               "model": "mock-model", "stream": true, "temperature": 0.5})
    );
    for (head, _) in &bodies {
        assert!(head.starts_with("post /v1/responses "), "{head}");
        assert_eq!(header(head, "authorization"), Some("bearer sk-test"));
        assert_eq!(header(head, "content-type"), Some("application/json"));
        assert_eq!(header(head, "x-api-key"), None);
    }
    check_records(&recs, 31.0, 5.0);
    for r in &recs {
        assert_eq!(metric(r, "usage_reasoning_tokens"), Some(2.0), "{r}");
    }
}

#[test]
fn messages_request_bodies_and_headers() {
    // A stream as the API reference shows it: input tokens at the start, output at the end.
    let server = RawServer::start(|_| {
        let ev = |v: Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());
        let events = vec![
            ev(
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "content": [], "model": "m", "stop_reason": null,
                "usage": {"input_tokens": 25, "output_tokens": 1}}}),
            ),
            ev(json!({"type": "content_block_start", "index": 0,
                      "content_block": {"type": "text", "text": ""}})),
            ev(json!({"type": "ping"})),
            ev(json!({"type": "content_block_delta", "index": 0,
                      "delta": {"type": "text_delta", "text": "Hello"}})),
            ev(json!({"type": "content_block_delta", "index": 0,
                      "delta": {"type": "text_delta", "text": "!"}})),
            ev(json!({"type": "content_block_stop", "index": 0})),
            ev(
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                      "stop_sequence": null}, "usage": {"output_tokens": 15}}),
            ),
            ev(json!({"type": "message_stop"})),
        ];
        sse_reply("", &events, After::KeepOpen)
    });
    let (bodies, recs) = golden_run("messages", &server);
    let data_url = png_data_url();
    let data = data_url.strip_prefix("data:image/png;base64,").unwrap();
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        bodies[0].1,
        json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1024,
               "model": "mock-model", "stream": true, "temperature": 0.5})
    );
    assert_eq!(
        bodies[1].1,
        json!({"messages": [{"role": "user", "content": [
                   {"type": "text", "text": "Describe both."},
                   {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                "data": data}},
                   {"type": "image", "source": {"type": "url",
                                                "url": "https://example.com/cat.png"}}]}],
               "system": "Be brief.", "max_tokens": 7,
               "model": "mock-model", "stream": true, "temperature": 0.5})
    );
    for (head, _) in &bodies {
        assert!(head.starts_with("post /v1/messages "), "{head}");
        assert_eq!(header(head, "x-api-key"), Some("sk-test"));
        assert_eq!(header(head, "anthropic-version"), Some("2023-06-01"));
        assert_eq!(header(head, "authorization"), None);
        assert_eq!(header(head, "content-type"), Some("application/json"));
    }
    check_records(&recs, 25.0, 15.0);
}

#[test]
fn a_stream_cut_before_its_closing_event_is_an_error_record() {
    for (endpoint, missing) in [
        ("responses", "response.completed"),
        ("messages", "message_stop"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mock = MockChild::spawn(&["--fast", "--truncate-rate", "100"]);
        let args = ["--streaming", "--request-count", "2", "--osl", "4"];
        let out = profile(tmp.path(), &mock.url, endpoint, &args);
        // Every request failed: the run says so in its exit code.
        assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
        let recs = records(tmp.path());
        assert_eq!(recs.len(), 2);
        for r in &recs {
            assert_eq!(r["error"]["type"], "IncompleteStreamError", "{r}");
            let message = r["error"]["message"].as_str().unwrap();
            assert!(message.contains(missing), "{message}");
        }
    }
}

#[test]
fn multi_turn_sends_the_history_back() {
    for endpoint in ["responses", "messages"] {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("served.jsonl");
        let mock = MockChild::spawn(&["--fast", "--record-requests", log.to_str().unwrap()]);
        let args = [
            "--streaming",
            "--conversation-num",
            "2",
            "--conversation-turn-mean",
            "2",
            "--isl",
            "10",
            "--osl",
            "3",
        ];
        let out = profile(tmp.path(), &mock.url, endpoint, &args);
        assert!(out.status.success(), "{}", stderr_text(&out));
        mock.terminate();
        let recs = records(tmp.path());
        assert_eq!(recs.len(), 4);
        assert!(recs.iter().all(|r| r["error"].is_null()));
        let mut roles: Vec<Value> = read_jsonl(&log)
            .into_iter()
            .map(|r| r["roles"].clone())
            .collect();
        roles.sort_by_key(|r| r.as_array().unwrap().len());
        assert_eq!(
            roles,
            [
                json!(["user"]),
                json!(["user"]),
                json!(["user", "assistant", "user"]),
                json!(["user", "assistant", "user"])
            ],
            "{endpoint}"
        );
    }
}

#[test]
fn what_an_api_cannot_carry_is_refused_before_sending() {
    let tmp = tempfile::tempdir().unwrap();
    // Nothing listens there: a refusal must come before any request.
    let url = "http://127.0.0.1:9";
    for (endpoint, args, words) in [
        (
            "messages",
            &["--audio-length-mean", "1"][..],
            "--audio-length-mean: audio needs --endpoint-type chat, responses or audio_transcription, not messages",
        ),
        (
            "responses",
            &["--video-width", "64", "--video-height", "64"][..],
            "video needs --endpoint-type chat, not responses",
        ),
        (
            "responses",
            &["--use-legacy-max-tokens"][..],
            "--use-legacy-max-tokens: --endpoint-type responses has its own output limit field",
        ),
        (
            "messages",
            &["--use-legacy-max-tokens"][..],
            "--use-legacy-max-tokens: --endpoint-type messages has its own output limit field",
        ),
    ] {
        let out = profile(tmp.path(), url, endpoint, args);
        let stderr = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{endpoint} {args:?}: {stderr}");
        assert!(stderr.contains(words), "{endpoint} {args:?}: {stderr}");
    }
}
