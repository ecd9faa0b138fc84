//! End-to-end tests of `aiperf mock-server`, run as a child process and spoken to over raw
//! HTTP/1.1.

use crate::common;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use common::{MockChild, post_json, request};
use serde_json::{Value, json};

const CHAT: &str = "/v1/chat/completions";

fn png_data_url(w: u32, h: u32) -> String {
    let img = image::RgbImage::from_fn(w, h, |x, y| image::Rgb([x as u8, y as u8, 77]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    format!(
        "data:image/png;base64,{}",
        STANDARD.encode(out.into_inner())
    )
}

fn jpeg_data_url(w: u16, h: u16) -> String {
    let pixels: Vec<u8> = (0..w as usize * h as usize * 3)
        .map(|i| (i % 251) as u8)
        .collect();
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 75)
        .encode(&pixels, w, h, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    format!("data:image/jpeg;base64,{}", STANDARD.encode(out))
}

fn user_parts(parts: Value) -> Value {
    json!([{"role": "user", "content": parts}])
}

/// Parses every event but `[DONE]` (which must come last) as JSON.
fn stream_chunks(events: &[common::Event]) -> Vec<Value> {
    assert_eq!(events.last().map(|e| e.data.as_str()), Some("[DONE]"));
    events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect()
}

fn content_of(chunk: &Value) -> Option<&str> {
    chunk["choices"][0]["delta"]["content"].as_str()
}

#[test]
fn streamed_chat_has_role_tokens_finish_usage_and_done() {
    let mock = MockChild::spawn(&["--fast"]);
    let resp = post_json(
        mock.addr,
        CHAT,
        &json!({
            "model": "Qwen/Qwen2-VL-7B-Instruct",
            "messages": [{"role": "user", "content": "Say five words please"}],
            "max_completion_tokens": 5,
            "stream": true,
            "stream_options": {"include_usage": true},
        }),
    );
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    let chunks = stream_chunks(&resp.events());
    assert_eq!(chunks.len(), 1 + 5 + 1, "role + 5 tokens + usage");

    let id = chunks[0]["id"].as_str().unwrap();
    assert!(id.starts_with("chatcmpl-"), "{id}");
    for c in &chunks {
        assert_eq!(c["id"], id);
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], "Qwen/Qwen2-VL-7B-Instruct");
        assert!(c["created"].as_u64().unwrap() > 1_600_000_000);
    }
    assert_eq!(
        chunks[0]["choices"],
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""},
                "logprobs": null, "finish_reason": null}])
    );
    let text: String = chunks[1..6]
        .iter()
        .map(|c| content_of(c).unwrap())
        .collect();
    assert_eq!(text, " the of and to in");
    for c in &chunks[1..5] {
        assert_eq!(c["choices"][0]["finish_reason"], Value::Null);
        assert_eq!(c["choices"][0]["logprobs"], Value::Null);
    }
    assert_eq!(chunks[5]["choices"][0]["finish_reason"], "length");
    // "Say five words please" is 4 o200k tokens, plus the chat template's 8 for its message.
    assert_eq!(chunks[6]["choices"], json!([]));
    assert_eq!(
        chunks[6]["usage"],
        json!({"prompt_tokens": 4 + 8, "completion_tokens": 5, "total_tokens": 17})
    );
}

#[test]
fn usage_chunk_only_when_asked_for() {
    let mock = MockChild::spawn(&["--fast"]);
    for options in [json!(null), json!({}), json!({"include_usage": false})] {
        let mut body = json!({
            "model": "m", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 3, "stream": true,
        });
        if !options.is_null() {
            body["stream_options"] = options.clone();
        }
        let chunks = stream_chunks(&post_json(mock.addr, CHAT, &body).events());
        assert_eq!(chunks.len(), 4, "role + 3 tokens, no usage ({options})");
        assert!(chunks.iter().all(|c| c.get("usage").is_none()));
        assert_eq!(chunks[3]["choices"][0]["finish_reason"], "length");
    }
}

#[test]
fn non_streamed_chat_is_one_completion_with_usage() {
    let mock = MockChild::spawn(&["--fast", "--model", "served-name"]);
    let resp = post_json(
        mock.addr,
        CHAT,
        &json!({"messages": [{"role": "user", "content": "abcdefgh"}], "max_tokens": 4}),
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let v = resp.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(
        v["model"], "served-name",
        "no model in the request: the served name"
    );
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(
        v["choices"][0]["message"],
        json!({"role": "assistant", "content": " the of and to"})
    );
    assert_eq!(v["choices"][0]["index"], 0);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 1 + 8, "completion_tokens": 4, "total_tokens": 13})
    );
}

#[test]
fn output_length_follows_max_min_and_prompt() {
    let mock = MockChild::spawn(&["--fast"]);
    let completion = |extra: Value, prompt: &str| {
        let mut body = json!({"messages": [{"role": "user", "content": prompt}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let v = post_json(mock.addr, CHAT, &body).json();
        (
            v["usage"]["completion_tokens"].as_u64().unwrap(),
            v["choices"][0]["finish_reason"]
                .as_str()
                .unwrap()
                .to_owned(),
        )
    };
    let long_prompt = " the".repeat(100); // 100 text tokens
    assert_eq!(
        completion(json!({"max_tokens": 7}), "hi"),
        (7, "length".into())
    );
    assert_eq!(
        completion(json!({"max_tokens": 7, "max_completion_tokens": 12}), "hi"),
        (12, "length".into())
    );
    assert_eq!(
        completion(
            json!({"max_tokens": 9, "min_tokens": 9, "ignore_eos": true}),
            "hi"
        ),
        (9, "length".into())
    );
    // No maximum: clamp(prompt text tokens, 16, 256), at least min_tokens.
    assert_eq!(completion(json!({}), "hi"), (16, "stop".into()));
    assert_eq!(completion(json!({}), &long_prompt), (100, "stop".into()));
    assert_eq!(
        completion(json!({"min_tokens": 40}), "hi"),
        (40, "stop".into())
    );
    assert_eq!(
        completion(json!({}), &"y".repeat(4000)),
        (256, "stop".into())
    );

    let resp = post_json(
        mock.addr,
        CHAT,
        &json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "min_tokens": 4}),
    );
    assert_eq!(resp.status, 400);
}

#[test]
fn output_text_retokenizes_to_the_reported_count() {
    let mock = MockChild::spawn(&["--fast"]);
    let resp = post_json(
        mock.addr,
        CHAT,
        &json!({"messages": [{"role": "user", "content": "go"}], "max_tokens": 300,
                "stream": true, "stream_options": {"include_usage": true}}),
    );
    let chunks = stream_chunks(&resp.events());
    let text: String = chunks.iter().filter_map(content_of).collect();
    let bpe = tiktoken_rs::o200k_base().unwrap();
    assert_eq!(bpe.encode_ordinary(&text).len(), 300);
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 300);
    assert_eq!(
        chunks
            .iter()
            .filter(|c| content_of(c).is_some_and(|s| !s.is_empty()))
            .count(),
        300
    );
}

#[test]
fn image_tokens_follow_qwen2_vl_for_png_and_jpeg() {
    // No chat-template tokens: the prompt is text and images only.
    let mock = MockChild::spawn(&[
        "--fast",
        "--remote-image-tokens",
        "100",
        "--chat-template-tokens",
        "0",
    ]);
    let usage = |parts: Value, stream: bool| -> Value {
        let body = json!({
            "model": "vlm", "messages": user_parts(parts), "max_tokens": 2,
            "stream": stream, "stream_options": {"include_usage": true},
        });
        let resp = post_json(mock.addr, CHAT, &body);
        assert_eq!(resp.status, 200, "{}", resp.text());
        if stream {
            stream_chunks(&resp.events()).last().unwrap()["usage"].clone()
        } else {
            resp.json()["usage"].clone()
        }
    };
    // "Describe this image." is 4 o200k tokens.
    let text = json!({"type": "text", "text": "Describe this image."});
    let png = json!({"type": "image_url", "image_url": {"url": png_data_url(512, 512)}});
    let jpeg = json!({"type": "image_url", "image_url": {"url": jpeg_data_url(1000, 700)}});

    // 512x512 -> 18x18 tokens + 2 delimiters.
    assert_eq!(usage(json!([text, png]), true)["prompt_tokens"], 326 + 4);
    // 1000x700 -> 1008x700 -> 36x25 tokens + 2.
    assert_eq!(usage(json!([text, jpeg]), false)["prompt_tokens"], 902 + 4);
    // Both, plus an http URL that is not fetched and counts --remote-image-tokens.
    let remote = json!({"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}});
    let u = usage(json!([png, text, jpeg, remote]), true);
    assert_eq!(u["prompt_tokens"], 326 + 902 + 100 + 4);
    assert_eq!(u["total_tokens"], 326 + 902 + 100 + 4 + 2);
}

#[test]
fn completions_endpoint_streams_and_answers_whole() {
    let mock = MockChild::spawn(&["--fast"]);
    let resp = post_json(
        mock.addr,
        "/v1/completions",
        &json!({"model": "m", "prompt": "abcdefgh", "max_tokens": 3, "stream": true,
                "stream_options": {"include_usage": true}}),
    );
    assert_eq!(resp.status, 200);
    let chunks = stream_chunks(&resp.events());
    assert_eq!(chunks.len(), 3 + 1, "3 tokens (no role chunk) + usage");
    for c in &chunks {
        assert_eq!(c["object"], "text_completion");
        assert!(c["id"].as_str().unwrap().starts_with("cmpl-"));
    }
    let text: String = chunks[..3]
        .iter()
        .map(|c| c["choices"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, " the of and");
    assert_eq!(chunks[2]["choices"][0]["finish_reason"], "length");
    assert_eq!(chunks[3]["usage"]["prompt_tokens"], 1);

    let v = post_json(
        mock.addr,
        "/v1/completions",
        &json!({"model": "m", "prompt": ["abcd", "abcd"], "max_tokens": 2}),
    )
    .json();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["text"], " the of");
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4})
    );
}

fn assert_vllm_error(resp: &common::HttpResponse, status: u16, kind: &str) -> String {
    assert_eq!(resp.status, status, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let v = resp.json();
    let err = &v["error"];
    assert_eq!(err["type"], kind);
    assert_eq!(err["code"], status);
    assert_eq!(err["param"], Value::Null);
    err["message"].as_str().unwrap().to_owned()
}

#[test]
fn malformed_requests_get_vllm_error_bodies() {
    let mock = MockChild::spawn(&["--fast"]);
    let bad = |body: &[u8]| request(mock.addr, "POST", CHAT, &[], body);

    let msg = assert_vllm_error(&bad(b"{not json"), 400, "BadRequestError");
    assert!(msg.contains("JSON"), "{msg}");
    assert_vllm_error(&bad(b""), 400, "BadRequestError");
    let msg = assert_vllm_error(&bad(br#"{"model":"m"}"#), 400, "BadRequestError");
    assert!(msg.contains("messages"), "{msg}");
    assert_vllm_error(&bad(br#"{"messages":"nope"}"#), 400, "BadRequestError");

    let image = |url: &str| json!({"messages": user_parts(json!([{"type": "image_url", "image_url": {"url": url}}]))});
    let msg = assert_vllm_error(
        &post_json(
            mock.addr,
            CHAT,
            &image("data:image/png;base64,%%%notbase64"),
        ),
        400,
        "BadRequestError",
    );
    assert!(msg.contains("base64"), "{msg}");
    let gif = format!(
        "data:image/gif;base64,{}",
        STANDARD.encode(b"GIF89a\x01\x00\x01\x00")
    );
    let msg = assert_vllm_error(
        &post_json(mock.addr, CHAT, &image(&gif)),
        400,
        "BadRequestError",
    );
    assert!(msg.contains("PNG"), "{msg}");
    assert_vllm_error(
        &post_json(mock.addr, "/v1/completions", &json!({"model": "m"})),
        400,
        "BadRequestError",
    );
    assert_vllm_error(
        &post_json(
            mock.addr,
            CHAT,
            &json!({"messages": [{"role":"user","content":"x"}], "max_tokens": 0}),
        ),
        400,
        "BadRequestError",
    );

    let msg = assert_vllm_error(
        &request(mock.addr, "GET", "/v2/unknown", &[], b""),
        404,
        "NotFoundError",
    );
    assert_eq!(msg, "Not Found");
    assert_vllm_error(
        &request(mock.addr, "GET", CHAT, &[], b""),
        405,
        "MethodNotAllowedError",
    );

    // Still serving after all that.
    let ok = post_json(
        mock.addr,
        CHAT,
        &json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
    );
    assert_eq!(ok.status, 200);
}

#[test]
fn health_and_models() {
    let mock = MockChild::spawn(&["--fast", "--model", "my-vlm"]);
    let health = request(mock.addr, "GET", "/health", &[], b"");
    assert_eq!(health.status, 200);
    let models = request(mock.addr, "GET", "/v1/models", &[], b"");
    assert_eq!(models.status, 200);
    let v = models.json();
    assert_eq!(v["object"], "list");
    let m = &v["data"][0];
    assert_eq!(m["id"], "my-vlm");
    assert_eq!(m["object"], "model");
    assert_eq!(m["owned_by"], "aiperf");
    assert!(m["created"].as_u64().unwrap() > 1_600_000_000);
}

#[test]
fn latency_follows_ttft_and_itl() {
    let mock = MockChild::spawn(&["--ttft", "50", "--itl", "10"]);
    let body = json!({"messages": [{"role": "user", "content": "time me"}], "max_tokens": 20,
                      "stream": true, "stream_options": {"include_usage": true}});
    let resp = post_json(mock.addr, CHAT, &body);
    let events = resp.events();
    let chunks = stream_chunks(&events);
    assert_eq!(chunks.len(), 22);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    // events[0] is the role chunk; tokens are events[1..=20].
    let first = ms(events[1].at - resp.sent_at);
    let last = ms(events[20].at - resp.sent_at);
    assert!(
        (48.0..150.0).contains(&first),
        "first token after {first:.1} ms"
    );
    // Token 19 is due at 50 + 19 * 10 = 240 ms.
    assert!(
        (238.0..1000.0).contains(&last),
        "last token after {last:.1} ms"
    );
    // Tokens never run ahead of their absolute deadline.
    for (i, e) in events[1..=20].iter().enumerate() {
        let t = ms(e.at - resp.sent_at);
        assert!(t >= 48.0 + 10.0 * i as f64, "token {i} after {t:.1} ms");
    }
    // The role chunk is not held back by the TTFT.
    assert!(events[0].at <= events[1].at);

    // Not streamed: the whole answer at ttft + (n - 1) * itl.
    let body = json!({"messages": [{"role": "user", "content": "time me"}], "max_tokens": 11});
    let resp = post_json(mock.addr, CHAT, &body);
    assert_eq!(resp.status, 200);
    let total = ms(resp.body_done_at - resp.sent_at);
    assert!(
        (148.0..800.0).contains(&total),
        "whole answer after {total:.1} ms"
    );
}

#[test]
fn record_requests_file_holds_server_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("requests.jsonl");
    let mock = MockChild::spawn(&[
        "--ttft",
        "30",
        "--itl",
        "5",
        "--record-requests",
        path.to_str().unwrap(),
    ]);
    let text = json!({"type": "text", "text": "Describe this image."});
    let png = json!({"type": "image_url", "image_url": {"url": png_data_url(512, 512)}});
    let streamed = json!({"model": "vlm", "messages": user_parts(json!([text, png])),
                          "max_tokens": 10, "stream": true});
    let resp = request(
        mock.addr,
        "POST",
        CHAT,
        &[("X-Request-ID", "req-stream")],
        streamed.to_string().as_bytes(),
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("x-request-id"), Some("req-stream"));
    let whole = json!({"messages": [{"role": "user", "content": "abcdefgh"}], "max_tokens": 3});
    let resp = request(
        mock.addr,
        "POST",
        CHAT,
        &[("X-Request-ID", "req-whole")],
        whole.to_string().as_bytes(),
    );
    assert_eq!(resp.status, 200);
    let resp = request(
        mock.addr,
        "POST",
        CHAT,
        &[("X-Request-ID", "req-bad")],
        b"{",
    );
    assert_eq!(resp.status, 400);
    assert!(mock.terminate().success());

    let lines: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    let by_id = |id: &str| lines.iter().find(|l| l["x_request_id"] == id).unwrap();
    let ns = |v: &Value| v.as_u64().unwrap();

    let s = by_id("req-stream");
    assert_eq!(s["status"], 200);
    assert_eq!(s["stream"], true);
    assert_eq!(s["model"], "vlm");
    assert_eq!(s["endpoint"], "chat");
    assert_eq!(s["text_tokens"], 4);
    assert_eq!(s["image_tokens"], 326);
    assert_eq!(s["template_tokens"], 8);
    assert_eq!(s["prompt_tokens"], 4 + 326 + 8);
    assert_eq!(s["num_images"], 1);
    assert_eq!(s["image_sizes"], json!([[512, 512]]));
    assert_eq!(s["output_tokens"], 10);
    assert_eq!(s["completed"], true);
    let (received, first, last) = (
        ns(&s["received_ns"]),
        ns(&s["first_token_ns"]),
        ns(&s["last_token_ns"]),
    );
    assert!(received > 1_600_000_000_000_000_000);
    assert!(received < first && first < last);
    // Stamps are taken from the same monotonic clock as the schedule, so they are never
    // earlier than the deadlines: first at 30 ms, last at 30 + 9 * 5 = 75 ms.
    let first_ms = (first - received) as f64 / 1e6;
    let last_ms = (last - received) as f64 / 1e6;
    assert!(
        (30.0..500.0).contains(&first_ms),
        "first token at {first_ms:.3} ms"
    );
    assert!(
        (75.0..800.0).contains(&last_ms),
        "last token at {last_ms:.3} ms"
    );

    let w = by_id("req-whole");
    assert_eq!(w["stream"], false);
    assert_eq!(w["prompt_tokens"], 1 + 8);
    assert_eq!(w["output_tokens"], 3);
    assert_eq!(w["num_images"], 0);
    assert_eq!(w["first_token_ns"], w["last_token_ns"]);
    let whole_ms = (ns(&w["last_token_ns"]) - ns(&w["received_ns"])) as f64 / 1e6;
    assert!(
        (40.0..800.0).contains(&whole_ms),
        "whole after {whole_ms:.3} ms"
    );
    assert!(ns(&w["received_ns"]) > last, "requests were sequential");

    let b = by_id("req-bad");
    assert_eq!(b["status"], 400);
    assert_eq!(b["first_token_ns"], Value::Null);
    assert_eq!(b["model"], Value::Null);
    assert!(b["error"].as_str().unwrap().contains("JSON"));
}

#[test]
fn many_concurrent_streams_all_complete() {
    let mock = MockChild::spawn(&["--ttft", "20", "--itl", "2"]);
    let addr = mock.addr;
    let handles: Vec<_> = (0..32)
        .map(|i| {
            std::thread::spawn(move || {
                let body = json!({"messages": [{"role": "user", "content": "hi"}],
                                  "max_tokens": 10 + i, "stream": true,
                                  "stream_options": {"include_usage": true}});
                let chunks = stream_chunks(&post_json(addr, CHAT, &body).events());
                chunks.last().unwrap()["usage"]["completion_tokens"]
                    .as_u64()
                    .unwrap()
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), 10 + i as u64);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_server_shuts_down_and_flushes_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rec.jsonl");
    let mut args = aiperf::api::MockServerArgs::fast_defaults();
    args.record_requests = Some(path.clone());
    let server = aiperf::api::start_mock_server(args).await.unwrap();
    let addr = server.addr();
    assert_eq!(server.url(), format!("http://127.0.0.1:{}", addr.port()));
    assert_ne!(addr.port(), 0);
    let statuses = tokio::task::spawn_blocking(move || {
        (0..5)
            .map(|_| {
                post_json(
                    addr,
                    CHAT,
                    &json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                            "stream": true}),
                )
                .status
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    assert_eq!(statuses, vec![200; 5]);
    server.shutdown().await;
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 5);
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still accepting after shutdown"
    );
}
