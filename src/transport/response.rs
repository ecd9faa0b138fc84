//! Reading a response: a whole body or a stream's events into the record, and every
//! way one fails as the record's error.

use super::*;

/// Why a body was not read to its end.
#[derive(Debug, thiserror::Error)]
pub(super) enum BodyError {
    #[error(transparent)]
    Transport(#[from] hyper::Error),
    #[error("The response passed --max-response-bytes ({0} bytes); the rest was not read")]
    TooLarge(u64),
}

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub(super) enum SendError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("client error (SendRequest)")]
    Send(#[from] hyper::Error),
}

impl BodyError {
    pub(super) fn details(&self) -> ErrorDetails {
        match self {
            BodyError::Transport(e) => stream_error(e),
            BodyError::TooLarge(_) => ErrorDetails {
                code: None,
                kind: "ResponseTooLargeError".into(),
                message: self.to_string(),
            },
        }
    }
}

/// What an exchange learns about its connection for the HTTP timing.
#[derive(Default)]
pub(super) struct Wire {
    /// The connection the request went out on.
    pub(super) conn: Option<Conn>,
    /// The response was read to its end: the connection may serve another request.
    pub(super) ended: bool,
    /// The response said `Connection: close`: the connection serves no other request.
    pub(super) closes: bool,
    /// When the first frame of a streamed body arrived.
    pub(super) first_body_ns: Option<u64>,
}

/// A whole (non-streamed) 2xx body: its content, usage, or the error it carries.
pub(super) fn parse_whole_body(
    status: u16,
    bytes: &[u8],
    arrival: u64,
    record: &mut RequestRecord,
    shape: &ResponseShape,
) {
    record.last_event_perf_ns = Some(arrival);
    match shape.parse(None, bytes) {
        Ok(mut ev) => {
            if let Some(err) = ev.error.take() {
                record.error = Some(ErrorDetails {
                    code: Some(status),
                    kind: "ResponseError".into(),
                    message: err,
                });
            }
            if let Some(usage) = ev.usage.as_deref() {
                record.usage = Some(*usage);
            }
            if ev.has_content() {
                record.push_response(
                    arrival,
                    ev.text.as_deref().unwrap_or_default(),
                    ev.reasoning.as_deref().unwrap_or_default(),
                    ev.images as u32,
                );
            } else if record.error.is_none() {
                record.error = Some(no_content_error(ev.unexpected.as_deref()));
            }
        }
        Err(e) => {
            record.error = Some(ErrorDetails {
                code: Some(status),
                kind: "InvalidResponseError".into(),
                message: format!("Response body is not valid JSON: {e}"),
            });
        }
    }
}

/// A 2xx response without any text or reasoning: a failed request, as in AIPerf (same
/// type and words), saying which payloads were skipped for their shape, if any.
pub(super) fn no_content_error(unexpected: Option<&str>) -> ErrorDetails {
    let mut message = "No responses with actual content were received from the server \
                       (only usage/metadata, null/empty data, or [DONE] markers)"
        .to_string();
    if let Some(why) = unexpected {
        message.push_str(&format!(
            "; a response of an unexpected shape was skipped: {why}"
        ));
    }
    ErrorDetails {
        code: None,
        kind: "InvalidInferenceResultError".into(),
        message,
    }
}

/// Per-stream parsing state.
#[derive(Default)]
pub(super) struct StreamState {
    pub(super) done: bool,
    /// Why the first event of an unexpected shape was (partly) skipped.
    pub(super) unexpected: Option<String>,
    pub(super) shape: Arc<ResponseShape>,
    /// What the stream's chunks repeat, scanned once.
    pub(super) lead: StreamLead,
}

impl StreamState {
    pub(super) fn on_event(&mut self, ev: sse::SseEvent<'_>, record: &mut RequestRecord) {
        if self.done {
            return;
        }
        record.last_event_perf_ns = Some(ev.arrival_ns);
        if ev.data.trim_ascii() == b"[DONE]" {
            self.done = true;
            return;
        }
        // Chat's error events are read as they come; the other APIs' carry JSON.
        if ev.event == Some("error") && self.shape.closing_event().is_none() {
            record.error.get_or_insert_with(|| ErrorDetails {
                code: None,
                kind: "StreamError".into(),
                message: String::from_utf8_lossy(ev.data).into_owned(),
            });
            return;
        }
        match self
            .shape
            .parse_in_stream(ev.event, ev.data, &mut self.lead)
        {
            Ok(mut parsed) => {
                self.done = parsed.end;
                if self.unexpected.is_none() {
                    self.unexpected = parsed.unexpected.take();
                }
                if let Some(msg) = parsed.error.clone() {
                    record.error.get_or_insert_with(|| ErrorDetails {
                        code: None,
                        kind: "StreamError".into(),
                        message: msg,
                    });
                }
                if let Some(&usage) = parsed.usage.as_deref() {
                    record.usage = Some(self.shape.merge_usage(record.usage, usage));
                }
                if parsed.has_content() {
                    record.push_response(
                        ev.arrival_ns,
                        parsed.text.as_deref().unwrap_or_default(),
                        parsed.reasoning.as_deref().unwrap_or_default(),
                        parsed.images as u32,
                    );
                }
            }
            Err(e) => {
                record.error.get_or_insert_with(|| ErrorDetails {
                    code: None,
                    kind: "InvalidResponseError".into(),
                    message: format!("Stream event is not valid JSON: {e}"),
                });
            }
        }
    }
}

/// How long to wait after `[DONE]` for the end of the body.
pub(super) const DRAIN_LIMIT: Duration = Duration::from_millis(10);

/// Reads what is left of a body after `[DONE]`, normally just the end of the chunked
/// encoding. A body dropped before its end closes its connection, so the next request would
/// have to open one (racing the pool, as much as tens of ms at high concurrency). A server
/// that keeps the stream open after `[DONE]` is left after `DRAIN_LIMIT`.
/// True when the body ended.
pub(super) async fn drain_to_end(body: &mut hyper::body::Incoming) -> bool {
    use futures_util::FutureExt as _;
    // Mostly the end came in the same read as `[DONE]`: take what is ready without a timer.
    loop {
        match body.frame().now_or_never() {
            Some(Some(Ok(_))) => {}
            Some(end) => return end.is_none(),
            None => break,
        }
    }
    let rest = async {
        loop {
            match body.frame().await {
                Some(Ok(_)) => {}
                end => return end.is_none(),
            }
        }
    };
    tokio::time::timeout(DRAIN_LIMIT, rest).await == Ok(true)
}

/// The whole body, or what cut it short (e.g. the connection closed mid-body, or the body
/// passed `limit` bytes: it stops being read there).
pub(super) async fn collect_body(
    body: &mut hyper::body::Incoming,
    limit: u64,
) -> Result<Bytes, BodyError> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Some(d) = frame?.data_ref() {
            if (out.len() + d.len()) as u64 > limit {
                return Err(BodyError::TooLarge(limit));
            }
            out.extend_from_slice(d);
        }
    }
    Ok(Bytes::from(out))
}

/// A non-2xx response: the server's error message when it sent the OpenAI error shape.
pub(super) fn http_error(status: http::StatusCode, body: &[u8]) -> ErrorDetails {
    let message = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            let e = v.get("error")?;
            e.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
                .or_else(|| e.as_str().map(str::to_string))
        })
        .or_else(|| {
            serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("detail").map(|d| d.to_string()))
        })
        .unwrap_or_else(|| {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if text.is_empty() {
                status
                    .canonical_reason()
                    .unwrap_or("HTTP error")
                    .to_string()
            } else {
                text.chars().take(500).collect()
            }
        });
    ErrorDetails {
        code: Some(status.as_u16()),
        kind: status
            .canonical_reason()
            .unwrap_or("HTTP Error")
            .to_string(),
        message,
    }
}

pub(super) fn transport_error(e: &SendError) -> ErrorDetails {
    let kind = match e {
        SendError::Connect(_) => CONNECTION_ERROR,
        SendError::Send(_) => "ClientError",
    };
    ErrorDetails {
        code: None,
        kind: kind.into(),
        message: error_chain(e),
    }
}

pub(super) fn stream_error(e: &hyper::Error) -> ErrorDetails {
    ErrorDetails {
        code: None,
        kind: "StreamError".into(),
        message: error_chain(e),
    }
}

/// "outer: inner: root" so the useful cause (e.g. "Connection refused") is not hidden.
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_msg = s.to_string();
        if !msg.contains(&s_msg) {
            msg.push_str(": ");
            msg.push_str(&s_msg);
        }
        source = s.source();
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn empty_record() -> RequestRecord {
        RequestRecord {
            streamed: true,
            ..RequestRecord::new(Phase::Profiling, RequestInput::default(), "r".into())
        }
    }

    /// Runs bytes, cut into the given frames, through the streamed-response path.
    fn parse_stream(frames: &[&[u8]]) -> (RequestRecord, bool) {
        let mut record = empty_record();
        let mut framer = SseFramer::new();
        let mut state = StreamState::default();
        for (i, f) in frames.iter().enumerate() {
            framer.feed(f, i as u64, |ev| state.on_event(ev, &mut record));
        }
        framer.finish(|ev| state.on_event(ev, &mut record));
        (record, state.done)
    }

    #[test]
    fn malformed_chunk_is_an_error_but_later_tokens_are_kept() {
        let (r, done) = parse_stream(&[
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
            b"data: {\"id\":\"broken\",\n\n",
            b"data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\ndata: [DONE]\n\n",
        ]);
        assert!(done);
        assert_eq!(r.output_text, "ab");
        let e = r.error.unwrap();
        assert_eq!((e.code, e.kind.as_str()), (None, "InvalidResponseError"));
        assert!(
            e.message.starts_with("Stream event is not valid JSON"),
            "{e:?}"
        );
    }

    #[test]
    fn error_event_is_recorded_with_its_message() {
        let (r, _) = parse_stream(&[
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
            b"event: error\ndata: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\n",
        ]);
        assert_eq!(r.output_text, "a");
        let e = r.error.unwrap();
        assert_eq!(e.kind, "StreamError");
        assert!(e.message.contains("boom"), "{e:?}");
    }

    #[test]
    fn whole_body_errors() {
        let mut r = empty_record();
        parse_whole_body(200, b"{\"choices\": [", 5, &mut r, &ResponseShape::OpenAi);
        assert_eq!(r.error.as_ref().unwrap().kind, "InvalidResponseError");
        let mut r = empty_record();
        parse_whole_body(
            200,
            br#"{"error":{"message":"nope"}}"#,
            5,
            &mut r,
            &ResponseShape::OpenAi,
        );
        let e = r.error.unwrap();
        assert_eq!(
            (e.code, e.kind.as_str(), e.message.as_str()),
            (Some(200), "ResponseError", "nope")
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Arbitrary bytes cut at arbitrary points never panic the stream path, and the cut
        /// points do not change what is parsed.
        #[test]
        fn arbitrary_stream_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..2048),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut frames: Vec<&[u8]> = Vec::new();
            let mut last = 0;
            for p in points {
                frames.push(&bytes[last..p]);
                last = p;
            }
            frames.push(&bytes[last..]);
            let (split, done_split) = parse_stream(&frames);
            let (whole, done_whole) = parse_stream(&[&bytes]);
            prop_assert_eq!(done_split, done_whole);
            prop_assert_eq!(split.output_text, whole.output_text);
            prop_assert_eq!(split.error, whole.error);
        }

        /// SSE-shaped lines with JSON-ish payloads reach the JSON parser more often.
        #[test]
        fn sse_shaped_garbage_never_panics(
            lines in proptest::collection::vec(
                ("(data|event|id|retry|:|dat)", "[ -~]{0,40}", prop_oneof!["\n", "\r\n", "\n\n", ""]),
                0..40,
            ),
        ) {
            let text: String = lines.iter().map(|(f, v, e)| format!("{f}:{v}{e}")).collect();
            let (r, _) = parse_stream(&[text.as_bytes()]);
            prop_assert!(r.responses.iter().all(|c| c.text_len > 0 || c.reasoning_len > 0));
        }

        /// Arbitrary non-streamed bodies never panic; garbage is an error, not content.
        #[test]
        fn arbitrary_whole_bodies_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
            let mut r = empty_record();
            parse_whole_body(200, &bytes, 1, &mut r, &ResponseShape::OpenAi);
            if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
                prop_assert!(r.error.is_some());
            }
        }

        /// JSON values of any shape never panic the response parser.
        #[test]
        fn arbitrary_json_never_panics(v in arb_json()) {
            let bytes = serde_json::to_vec(&v).unwrap();
            let mut r = empty_record();
            parse_whole_body(200, &bytes, 1, &mut r, &ResponseShape::OpenAi);
            let line = [b"data: ".as_slice(), &bytes, b"\n\n"].concat();
            let _ = parse_stream(&[&line]);
        }
    }

    fn arb_json() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-z ]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            let keys = prop_oneof![
                Just("choices".to_string()),
                Just("delta".to_string()),
                Just("message".to_string()),
                Just("content".to_string()),
                Just("text".to_string()),
                Just("usage".to_string()),
                Just("error".to_string()),
                Just("prompt_tokens".to_string()),
                "[a-z]{1,4}",
            ];
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(keys, inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
