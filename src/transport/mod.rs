//! HTTP client: pooled keep-alive connections (one per in-flight stream), TLS with rustls,
//! and one request/response exchange turned into a `RequestRecord` with arrival timestamps.

pub mod sse;

use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use http::{Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::clock::Clock;
use crate::endpoint::parse_event;
use crate::record::{ContentResponse, ErrorDetails, Phase, RequestInput, RequestRecord};
use sse::SseFramer;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// Status code AIPerf uses for requests the client cancelled.
pub const CANCELLED_CODE: u16 = 499;
/// Status code used for requests that ran past `--request-timeout-seconds`.
pub const TIMEOUT_CODE: u16 = 408;

#[derive(Clone)]
pub struct HttpClient {
    client: Client<Connector, Full<Bytes>>,
    uri: Uri,
    headers: HeaderMap,
    timeout: Duration,
}

impl HttpClient {
    pub fn new(
        uri: Uri,
        api_key: Option<&str>,
        extra_headers: &[(http::HeaderName, HeaderValue)],
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        http.set_keepalive(Some(Duration::from_secs(60)));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(usize::MAX)
            .pool_idle_timeout(Duration::from_secs(90))
            .retry_canceled_requests(false)
            .build(connector);

        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(key) = api_key {
            let mut v = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                anyhow::anyhow!("--api-key contains characters not allowed in a header")
            })?;
            v.set_sensitive(true);
            headers.insert(AUTHORIZATION, v);
        }
        for (name, value) in extra_headers {
            headers.insert(name.clone(), value.clone());
        }
        Ok(HttpClient {
            client,
            uri,
            headers,
            timeout,
        })
    }

    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// Sends one prepared body and records what happened. Never fails: every problem
    /// becomes an error on the record.
    pub async fn exchange(
        &self,
        clock: &Clock,
        phase: Phase,
        input: RequestInput,
        x_request_id: String,
        body: Bytes,
    ) -> RequestRecord {
        let mut record = RequestRecord {
            phase,
            input,
            x_request_id,
            start_perf_ns: 0,
            ack_perf_ns: None,
            end_perf_ns: 0,
            start_wall_ns: 0,
            end_wall_ns: 0,
            status: None,
            streamed: false,
            responses: Vec::new(),
            last_event_perf_ns: None,
            usage: None,
            error: None,
            was_cancelled: false,
            cancellation_perf_ns: None,
        };
        let mut request = Request::post(self.uri.clone())
            .body(Full::new(body))
            .expect("a POST with a valid URI always builds");
        *request.headers_mut() = self.headers.clone();
        if let Ok(v) = HeaderValue::from_str(&record.x_request_id) {
            request.headers_mut().insert("x-request-id", v);
        }
        if let Ok(v) = HeaderValue::from_str(&record.input.conversation_id) {
            request.headers_mut().insert("x-correlation-id", v);
        }

        record.start_perf_ns = clock.now_ns();
        let outcome =
            tokio::time::timeout(self.timeout, self.run(clock, request, &mut record)).await;
        record.end_perf_ns = clock.now_ns();
        if outcome.is_err() {
            record.error = Some(ErrorDetails {
                code: Some(TIMEOUT_CODE),
                kind: "RequestTimeoutError".into(),
                message: format!(
                    "Request timed out after {:.3} seconds",
                    self.timeout.as_secs_f64()
                ),
            });
        }
        record.start_wall_ns = clock.wall_ns(record.start_perf_ns);
        record.end_wall_ns = clock.wall_ns(record.end_perf_ns);
        record
    }

    async fn run(&self, clock: &Clock, request: Request<Full<Bytes>>, record: &mut RequestRecord) {
        let response = match self.client.request(request).await {
            Ok(r) => r,
            Err(e) => {
                record.error = Some(transport_error(&e));
                return;
            }
        };
        record.ack_perf_ns = Some(clock.now_ns());
        let status = response.status();
        record.status = Some(status.as_u16());
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        let mut body = response.into_body();

        if !status.is_success() {
            let bytes = collect_body(&mut body).await;
            record.error = Some(http_error(status, &bytes));
            return;
        }

        if is_sse {
            record.streamed = true;
            let mut framer = SseFramer::new();
            let mut state = StreamState::default();
            loop {
                match body.frame().await {
                    Some(Ok(frame)) => {
                        let arrival = clock.now_ns();
                        if let Some(data) = frame.data_ref() {
                            framer.feed(data, arrival, |ev| state.on_event(ev, record));
                        }
                        if state.done {
                            break;
                        }
                    }
                    Some(Err(e)) => {
                        framer.finish(|ev| state.on_event(ev, record));
                        if record.error.is_none() {
                            record.error = Some(stream_error(&e));
                        }
                        return;
                    }
                    None => break,
                }
            }
            framer.finish(|ev| state.on_event(ev, record));
            if record.error.is_none() && !state.done {
                record.error = Some(ErrorDetails {
                    code: None,
                    kind: "IncompleteStreamError".into(),
                    message: "The stream ended without a [DONE] event".into(),
                });
            }
        } else {
            let bytes = collect_body(&mut body).await;
            let arrival = clock.now_ns();
            record.last_event_perf_ns = Some(arrival);
            match parse_event(&bytes) {
                Ok(ev) => {
                    if let Some(err) = ev.error {
                        record.error = Some(ErrorDetails {
                            code: Some(status.as_u16()),
                            kind: "ResponseError".into(),
                            message: err,
                        });
                    }
                    if ev.usage.is_some() {
                        record.usage = ev.usage;
                    }
                    if ev.text.is_some() || ev.reasoning.is_some() {
                        record.responses.push(ContentResponse {
                            perf_ns: arrival,
                            text: ev.text.map(|t| t.into_owned()).unwrap_or_default(),
                            reasoning: ev.reasoning.map(|t| t.into_owned()).unwrap_or_default(),
                        });
                    }
                }
                Err(e) => {
                    record.error = Some(ErrorDetails {
                        code: Some(status.as_u16()),
                        kind: "InvalidResponseError".into(),
                        message: format!("Response body is not valid JSON: {e}"),
                    });
                }
            }
        }
    }
}

/// Per-stream parsing state.
#[derive(Default)]
struct StreamState {
    done: bool,
}

impl StreamState {
    fn on_event(&mut self, ev: sse::SseEvent<'_>, record: &mut RequestRecord) {
        if self.done {
            return;
        }
        record.last_event_perf_ns = Some(ev.arrival_ns);
        if ev.data == b"[DONE]" {
            self.done = true;
            return;
        }
        if ev.event == Some("error") {
            record.error.get_or_insert_with(|| ErrorDetails {
                code: None,
                kind: "StreamError".into(),
                message: String::from_utf8_lossy(ev.data).into_owned(),
            });
            return;
        }
        match parse_event(ev.data) {
            Ok(parsed) => {
                if let Some(msg) = parsed.error.clone() {
                    record.error.get_or_insert_with(|| ErrorDetails {
                        code: None,
                        kind: "StreamError".into(),
                        message: msg,
                    });
                }
                if parsed.usage.is_some() {
                    // The last usage object of the stream wins.
                    record.usage = parsed.usage;
                }
                if parsed.has_content() {
                    record.responses.push(ContentResponse {
                        perf_ns: ev.arrival_ns,
                        text: parsed.text.map(|t| t.into_owned()).unwrap_or_default(),
                        reasoning: parsed.reasoning.map(|t| t.into_owned()).unwrap_or_default(),
                    });
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

async fn collect_body(body: &mut hyper::body::Incoming) -> Bytes {
    let mut out = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(d) = frame.data_ref() {
            out.extend_from_slice(d);
        }
    }
    Bytes::from(out)
}

/// A non-2xx response: the server's error message when it sent the OpenAI error shape.
fn http_error(status: http::StatusCode, body: &[u8]) -> ErrorDetails {
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

fn transport_error(e: &hyper_util::client::legacy::Error) -> ErrorDetails {
    let kind = if e.is_connect() {
        "ConnectionError"
    } else {
        "ClientError"
    };
    ErrorDetails {
        code: None,
        kind: kind.into(),
        message: error_chain(e),
    }
}

fn stream_error(e: &hyper::Error) -> ErrorDetails {
    ErrorDetails {
        code: None,
        kind: "StreamError".into(),
        message: error_chain(e),
    }
}

/// "outer: inner: root" so the useful cause (e.g. "Connection refused") is not hidden.
fn error_chain(e: &dyn std::error::Error) -> String {
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
