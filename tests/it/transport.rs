//! The client against small misbehaving servers (see `common::raw_server`): the real
//! `aiperf` binary runs, and its exit code, records and messages are checked against what
//! the server received.

use std::process::Output;

use serde_json::{Value, json};

use crate::common;

use common::raw_server::{
    After, LAST_CHUNK, RawServer, Reply, chunk, json_reply, sse_reply, token_event,
};
use common::{read_json, read_jsonl, run_profile};

struct Run {
    out: Output,
    records: Vec<Value>,
    /// The artifact directory (removed with the run).
    dir: std::path::PathBuf,
    _tmp: tempfile::TempDir,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    fn code(&self) -> Option<i32> {
        self.out.status.code()
    }

    fn failed(&self) -> Vec<&Value> {
        self.records
            .iter()
            .filter(|r| !r["error"].is_null())
            .collect()
    }

    /// The error of every failed record, as (type, message).
    fn errors(&self) -> Vec<(String, String)> {
        self.failed()
            .iter()
            .map(|r| {
                (
                    r["error"]["type"].as_str().unwrap().to_string(),
                    r["error"]["message"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }
}

/// `aiperf profile` against `url`: `count` chat requests, one at a time unless `extra` says.
fn profile(url: &str, count: usize, streaming: bool, extra: &[&str]) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let count = count.to_string();
    let mut args = vec![
        "--model",
        "m",
        "--tokenizer",
        "builtin",
        "--url",
        url,
        "--synthetic-input-tokens-mean",
        "20",
        "--output-tokens-mean",
        "3",
        "--request-count",
        &count,
        "--artifact-dir",
        dir.to_str().unwrap(),
        "--random-seed",
        "1",
    ];
    if streaming {
        args.push("--streaming");
    }
    if !extra.contains(&"--concurrency") {
        args.extend_from_slice(&["--concurrency", "1"]);
    }
    // Only the chat requests reach the server (no /metrics scrapes).
    args.push("--no-server-metrics");
    args.extend_from_slice(extra);
    let out = run_profile(&args);
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    Run {
        out,
        records,
        dir,
        _tmp: tmp,
    }
}

fn three_tokens() -> Vec<String> {
    let mut events: Vec<String> = ["a", "b", "c"].iter().map(|t| token_event(t)).collect();
    events.push("data: [DONE]\n\n".into());
    events
}

// ----- Connection reuse -----

/// Every request succeeded, and the server read each exactly once.
fn assert_all_sent_once(run: &Run, server: &RawServer, n: usize) {
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert_eq!(run.records.len(), n);
    assert!(run.failed().is_empty(), "{:?}", run.errors());
    assert_eq!(server.requests().len(), n, "requests the server read");
}

#[test]
fn a_run_holds_no_more_connections_than_requests_in_flight() {
    // Each reply in one write, the connection kept open: every connection can serve again.
    let server = RawServer::start(|_| {
        let reply = sse_reply("", &three_tokens(), After::KeepOpen);
        Reply::new(vec![reply.pieces.concat()], After::KeepOpen)
    });
    let n = 120;
    let run = profile(&server.url, n, true, &["--concurrency", "4"]);
    assert_all_sent_once(&run, &server, n);
    let connections = server.connections();
    assert!((1..=4).contains(&connections), "{connections} connections");
    // Each connection's first request says it was not reused; every other one says it was.
    let fresh = run
        .records
        .iter()
        .filter(|r| r["metrics"]["http_req_connection_reused"]["value"] == 0.0)
        .count();
    assert_eq!(fresh, connections);
}

#[test]
fn a_server_closing_after_each_stream_loses_no_request() {
    // Says keep-alive, then closes once the stream is out (as llama.cpp's server does).
    let server = RawServer::start(|_| {
        sse_reply("connection: keep-alive\r\n", &three_tokens(), After::Close)
    });
    let n = 40;
    let run = profile(&server.url, n, true, &[]);
    assert_all_sent_once(&run, &server, n);
    assert_eq!(server.connections(), n, "one connection per request");
}

#[test]
fn a_server_closing_between_requests_loses_no_request() {
    // Whole JSON replies without `Connection: close`, each connection closed after one.
    let body =
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a b c"}}]});
    let server = RawServer::start(move |_| json_reply("", &body, After::Close));
    let n = 40;
    let run = profile(&server.url, n, false, &["--concurrency", "2"]);
    assert_all_sent_once(&run, &server, n);
}

#[test]
fn a_request_the_server_took_in_is_not_sent_twice() {
    // Every second request is read and worked on for a while, then the connection is closed
    // without an answer: the server may have acted on it, so it fails instead of going out
    // again. (A close that follows the previous response within 50 ms belongs to that
    // response, so the server takes longer than that.)
    let count = std::sync::atomic::AtomicUsize::new(0);
    let server = RawServer::start(move |_| {
        if count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 2 == 1 {
            std::thread::sleep(std::time::Duration::from_millis(120));
            return Reply::new(Vec::new(), After::Close);
        }
        sse_reply("", &three_tokens(), After::KeepOpen)
    });
    let run = profile(&server.url, 6, true, &[]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert_eq!(server.requests().len(), 6);
    assert_eq!(run.records.len(), 6);
    let errors = run.errors();
    assert_eq!(errors.len(), 3, "{errors:?}");
    for (kind, message) in &errors {
        assert_eq!(kind, "ClientError");
        assert!(
            message.contains("connection closed before message completed"),
            "{message}"
        );
    }
    assert!(!run.stderr().contains("sent again"), "{}", run.stderr());
}

#[test]
fn a_request_reset_unread_after_a_long_idle_is_sent_again() {
    // Each reply keeps the connection open, then the server closes it 300 ms later with
    // what arrived meanwhile unread (a keep-alive timeout that crosses the next request):
    // the reset shows the request was never read, so it goes out again.
    let server = RawServer::start(|_| {
        sse_reply(
            "",
            &three_tokens(),
            After::CloseLater(std::time::Duration::from_millis(300)),
        )
    });
    let run = profile(
        &server.url,
        4,
        true,
        &["--request-rate", "5", "--request-rate-mode", "constant"],
    );
    assert_all_sent_once(&run, &server, 4);
    let json = read_json(&run.dir.join("profile_export_aiperf.json"));
    assert!(json["resent_requests"].as_u64().unwrap() >= 1, "{json}");
}

/// When a server closes a kept-alive connection, relative to the stream it just sent.
#[derive(Clone, Copy, Debug)]
enum CloseTiming {
    /// At once after the stream's last byte.
    AtOnce,
    /// 0-10 ms after the last byte: a request sent in that window crosses the close.
    Later,
    /// After the last event's chunk, before the chunked body's terminator.
    BeforeTerminator,
}

/// 1,000 streamed requests at concurrency 8 against a server that closes every connection
/// after one stream (`timing`), saying `Connection: close` or not. Half the closes are
/// plain (a request that crossed one is reset unread), half end the write side and drain
/// (as llama.cpp's server: the crossing request is read and dropped). None is lost, the
/// server reads each request exactly once, and what had to be sent again is counted.
fn closes_lose_nothing(timing: CloseTiming, says_close: bool) {
    let served = std::sync::atomic::AtomicU64::new(0);
    let header = if says_close {
        "connection: close\r\n"
    } else {
        "connection: keep-alive\r\n"
    };
    let server = RawServer::start(move |_| {
        let i = served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // 0-10 ms, spread over the requests.
        let wait = match timing {
            CloseTiming::Later => std::time::Duration::from_micros(i * 7_919 % 10_001),
            _ => std::time::Duration::ZERO,
        };
        let after = if i.is_multiple_of(2) {
            After::CloseLater(wait)
        } else {
            After::DrainLater(wait)
        };
        let mut reply = sse_reply(header, &three_tokens(), after);
        // The whole stream in one write: the close follows its last byte at once.
        reply.pieces = vec![reply.pieces.concat()];
        if let CloseTiming::BeforeTerminator = timing {
            let whole = &reply.pieces[0];
            reply.pieces[0] = whole[..whole.len() - LAST_CHUNK.len()].to_vec();
        }
        reply
    });
    let n = 1000;
    let run = profile(&server.url, n, true, &["--concurrency", "8"]);
    assert_all_sent_once(&run, &server, n);
    // Every request ended on a connection of its own; each one that first went out on a
    // connection the server was closing was counted, in the JSON and the console.
    assert_eq!(server.connections(), n);
    let json = read_json(&run.dir.join("profile_export_aiperf.json"));
    let resent = json["resent_requests"].as_u64().expect("resent_requests");
    let line = format!("{resent} requests were sent again");
    assert_eq!(run.stdout().contains(&line), resent > 0, "{}", run.stdout());
    let learned = run
        .stderr()
        .contains("from now on each request to it goes on a new connection");
    if says_close {
        // The client never reuses a connection the server said it would close.
        assert_eq!(resent, 0);
        assert!(!learned, "{}", run.stderr());
    } else if !matches!(timing, CloseTiming::BeforeTerminator) {
        // A stream that ends in full leaves its connection for the next request until the
        // client learns that this server closes them all: then it stops reusing them.
        assert!(learned, "{}", run.stderr());
        assert!(resent < 50, "{resent} resent");
    }
    eprintln!("{timing:?}, connection: close {says_close}: {resent} resent");
}

#[test]
fn a_server_closing_at_once_after_each_stream_loses_no_request() {
    closes_lose_nothing(CloseTiming::AtOnce, false);
    closes_lose_nothing(CloseTiming::AtOnce, true);
}

#[test]
fn a_server_closing_up_to_10_ms_after_each_stream_loses_no_request() {
    closes_lose_nothing(CloseTiming::Later, false);
    closes_lose_nothing(CloseTiming::Later, true);
}

#[test]
fn a_server_closing_before_the_chunked_terminator_loses_no_request() {
    closes_lose_nothing(CloseTiming::BeforeTerminator, false);
    closes_lose_nothing(CloseTiming::BeforeTerminator, true);
}

// ----- Streams cut short -----

#[test]
fn a_reset_mid_data_line_is_reported_as_the_transport_error() {
    let server = RawServer::start(|_| {
        let mut reply = sse_reply("", &three_tokens()[..2], After::Reset);
        // Instead of the last chunk: a chunk announced at 64 bytes, cut mid `data:` line.
        *reply.pieces.last_mut().unwrap() = b"40\r\ndata: {\"choices\":[{\"del".to_vec();
        reply
    });
    let run = profile(&server.url, 4, true, &[]);
    assert_eq!(run.code(), Some(1), "{}", run.stderr());
    assert_eq!(server.requests().len(), 4);
    let errors = run.errors();
    assert_eq!(errors.len(), 4, "{errors:?}");
    for (kind, message) in &errors {
        assert_eq!(kind, "StreamError");
        assert!(
            message.contains("error reading a body from connection"),
            "{message}"
        );
    }
}

// ----- Odd payloads and empty responses -----

#[test]
fn unexpected_json_shapes_keep_what_fits() {
    let server = RawServer::start(|_| {
        let events = vec![
            r#"data: {"choices":null}"#.to_string() + "\n\n",
            token_event("a"),
            r#"data: {"choices":[{"delta":{"content":5}}]}"#.to_string() + "\n\n",
            token_event("b"),
            r#"data: {"choices":[],"usage":{"prompt_tokens":"20","completion_tokens":"2","total_tokens":"22"}}"#.to_string()
                + "\n\n",
            "data: [DONE]\n\n".to_string(),
        ];
        sse_reply("", &events, After::KeepOpen)
    });
    let run = profile(&server.url, 3, true, &["--use-server-token-count"]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert!(run.failed().is_empty(), "{:?}", run.errors());
    for r in &run.records {
        // Two content events; the usage sent as strings was read.
        assert_eq!(r["metrics"]["output_sequence_length"]["value"], 2, "{r}");
        assert_eq!(r["metrics"]["input_sequence_length"]["value"], 20, "{r}");
    }
}

#[test]
fn a_stream_without_content_is_a_failed_request() {
    let cases: [(&str, Vec<String>, &str); 2] = [
        (
            "only [DONE]",
            vec![
                r#"data: {"choices":[{"delta":{"role":"assistant","content":""}}]}"#.to_string()
                    + "\n\n",
                "data: [DONE]\n\n".into(),
            ],
            "No responses with actual content were received from the server",
        ),
        (
            "content of the wrong type",
            vec![
                r#"data: {"choices":[{"delta":{"content":{"text":"a"}}}]}"#.to_string() + "\n\n",
                "data: [DONE]\n\n".into(),
            ],
            "a response of an unexpected shape was skipped: invalid type: map",
        ),
    ];
    for (case, events, message) in cases {
        let server = RawServer::start(move |_| sse_reply("", &events, After::KeepOpen));
        let run = profile(&server.url, 3, true, &[]);
        assert_eq!(run.code(), Some(1), "{case}: {}", run.stderr());
        assert_eq!(server.requests().len(), 3, "{case}");
        let errors = run.errors();
        assert_eq!(errors.len(), 3, "{case}: {errors:?}");
        for (kind, m) in &errors {
            assert_eq!(kind, "InvalidInferenceResultError", "{case}");
            assert!(m.contains(message), "{case}: {m}");
        }
    }
}

#[test]
fn a_whole_response_without_content_is_a_failed_request() {
    let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": ""}}],
                      "usage": {"prompt_tokens": 20, "completion_tokens": 0, "total_tokens": 20}});
    let server = RawServer::start(move |_| json_reply("", &body, After::KeepOpen));
    let run = profile(&server.url, 3, false, &[]);
    assert_eq!(run.code(), Some(1), "{}", run.stderr());
    let errors = run.errors();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors
            .iter()
            .all(|(k, _)| k == "InvalidInferenceResultError")
    );
}

// ----- What the specs allow -----

#[test]
fn cr_line_ends_mixed_case_content_type_and_spaced_done_are_understood() {
    let server = RawServer::start(|_| {
        let crlf = token_event(" one").replace('\n', "\r\n");
        let cr = token_event(" two").replace('\n', "\r");
        let events = vec![crlf, cr, "data: [DONE]  \r\r".to_string()];
        let mut reply = sse_reply("", &events, After::KeepOpen);
        reply.pieces[0] = String::from_utf8(reply.pieces[0].clone())
            .unwrap()
            .replace("text/event-stream", "Text/Event-Stream; charset=UTF-8")
            .into_bytes();
        reply
    });
    let run = profile(&server.url, 3, true, &[]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert!(run.failed().is_empty(), "{:?}", run.errors());
    for r in &run.records {
        assert_eq!(r["metrics"]["output_sequence_length"]["value"], 2, "{r}");
    }
}

#[test]
fn every_request_asks_for_no_compression_and_a_gzip_reply_is_a_clear_error() {
    let server = RawServer::start(|_| {
        // Whatever was asked: a (fake) gzip body.
        let body = b"\x1f\x8b\x08\x00\x00\x00\x00\x00";
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        Reply::new(vec![[head.as_bytes(), body].concat()], After::KeepOpen)
    });
    let run = profile(&server.url, 3, false, &[]);
    assert_eq!(run.code(), Some(1), "{}", run.stderr());
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests
            .iter()
            .all(|r| r.header("accept-encoding") == Some("identity")),
        "{requests:?}"
    );
    let errors = run.errors();
    assert_eq!(errors.len(), 3);
    for (kind, message) in &errors {
        assert_eq!(kind, "UnsupportedEncodingError");
        assert!(message.contains("gzip-encoded response"), "{message}");
    }
}

// ----- Caps -----

#[test]
fn a_response_past_max_response_bytes_fails_and_is_not_read_further() {
    // A streamed `data:` line of 100 KB that never ends, sent in 1 KB chunks.
    let streamed = RawServer::start(|_| {
        let mut reply = sse_reply("", &[token_event("a")], After::KeepOpen);
        reply.pieces.pop();
        reply
            .pieces
            .push(chunk(b"data: {\"choices\":[{\"delta\":{\"content\":\""));
        reply.pieces.extend((0..100).map(|_| chunk(&[b'x'; 1024])));
        reply.after = After::Close;
        reply
    });
    let body = json!({"choices": [{"message": {"content": "y".repeat(100 * 1024)}}]});
    let whole = RawServer::start(move |_| json_reply("", &body, After::KeepOpen));
    for (server, streaming) in [(&streamed, true), (&whole, false)] {
        let run = profile(
            &server.url,
            3,
            streaming,
            &["--max-response-bytes", "20000"],
        );
        assert_eq!(run.code(), Some(1), "{}", run.stderr());
        assert_eq!(server.requests().len(), 3);
        let errors = run.errors();
        assert_eq!(errors.len(), 3, "{errors:?}");
        for (kind, message) in &errors {
            assert_eq!(kind, "ResponseTooLargeError");
            assert!(
                message.contains("--max-response-bytes (20000 bytes)"),
                "{message}"
            );
        }
    }
    // Under the cap the same run succeeds.
    let ok = RawServer::start(|_| sse_reply("", &three_tokens(), After::KeepOpen));
    let run = profile(&ok.url, 3, true, &["--max-response-bytes", "20000"]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
}

#[test]
fn a_stream_cut_short_by_its_content_length_is_an_incomplete_stream() {
    // The server announces fewer bytes than its events take: the body ends in the middle of
    // the second event's JSON.
    let server = RawServer::start(|_| {
        let events: String = three_tokens().concat();
        let cut = token_event("a").len() + 20;
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {cut}\r\n\r\n"
        );
        Reply::new(
            vec![[head.as_bytes(), events.as_bytes()].concat()],
            After::Close,
        )
    });
    let run = profile(&server.url, 2, true, &[]);
    let errors = run.errors();
    assert_eq!(errors.len(), 2, "{}", run.stderr());
    for (kind, message) in &errors {
        assert_eq!(kind, "IncompleteStreamError", "{message}");
        assert!(message.contains("cut short"), "{message}");
    }
}
