//! HTTP client: kept-alive connections (one per in-flight stream, see `pool`), TLS with
//! rustls, and one request/response exchange turned into a `RequestRecord` with arrival
//! timestamps.

pub mod conn;
pub mod pool;
pub mod request_body;
pub mod sse;
pub mod timing;
mod video;

pub use video::VideoPolling;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    ACCEPT_ENCODING, CONNECTION, CONTENT_ENCODING, CONTENT_TYPE, HOST, HeaderMap, HeaderValue,
};
use http::{Request, Uri};
use http_body_util::BodyExt;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::sync::OwnedSemaphorePermit;
use tracing::warn;

use crate::clock::Clock;
use crate::endpoint::StreamLead;
use crate::endpoint::shape::ResponseShape;
use crate::record::{ErrorDetails, Phase, RequestInput, RequestRecord};
use conn::WatchedConnector;
use pool::{Conn, ConnectError, Pool, Target};
use request_body::{RequestBody, TakenAt};
use sse::SseFramer;

/// The cancel generation after `cancel_all`: every exchange, now or later, is cancelled.
const CANCEL_ALL: u64 = u64::MAX;

/// Status code AIPerf uses for requests the client cancelled.
pub const CANCELLED_CODE: u16 = 499;
/// Status code used for requests that ran past `--request-timeout-seconds`.
pub const TIMEOUT_CODE: u16 = 408;
/// Error type of a request whose connection could not be made (refused, no route, DNS).
pub const CONNECTION_ERROR: &str = "ConnectionError";
/// Default of `--max-response-bytes`.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// The request id's header; a name built from a `&str` on each request was an allocation.
const X_REQUEST_ID: http::HeaderName = http::HeaderName::from_static("x-request-id");

/// How requests use connections (`--connection-reuse-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConnectionReuse {
    /// One shared pool of kept-alive connections.
    #[default]
    Pooled,
    /// A new connection for every request.
    Never,
    /// One connection (and one server) per conversation: see `HttpClient::for_session`.
    StickySessions,
}

impl ConnectionReuse {
    /// AIPerf's spelling of the strategy.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionReuse::Pooled => "pooled",
            ConnectionReuse::Never => "never",
            ConnectionReuse::StickySessions => "sticky-user-sessions",
        }
    }
}

/// The servers requests go to, taken in turn, and how many each got.
struct Servers {
    targets: Vec<Target>,
    next: AtomicU64,
    sent: Vec<AtomicU64>,
}

impl Servers {
    fn new(uris: Vec<Uri>) -> Self {
        let sent = uris.iter().map(|_| AtomicU64::new(0)).collect();
        Servers {
            targets: uris.into_iter().map(Target::new).collect(),
            next: AtomicU64::new(0),
            sent,
        }
    }

    /// Round robin over the servers (`--url-strategy round_robin`).
    fn pick(&self) -> usize {
        (self.next.fetch_add(1, Ordering::Relaxed) % self.targets.len() as u64) as usize
    }
}

#[derive(Clone)]
pub struct HttpClient {
    /// The run's connections (a sticky session's own, in its client).
    pool: Arc<Pool>,
    /// Builds the private pool of a sticky session.
    connector: WatchedConnector,
    reuse: ConnectionReuse,
    servers: Arc<Servers>,
    /// A sticky session's server, fixed for all of its turns.
    pinned: Option<usize>,
    /// The header carrying each request's session id.
    session_header: http::HeaderName,
    /// Requests written again, on a new connection, because the server closed the
    /// kept-alive one they were first written to without taking them in (see `conn`).
    resent: Arc<AtomicU64>,
    uri: Uri,
    headers: HeaderMap,
    timeout: Duration,
    /// Bytes one response body may have (see `BodyError::TooLarge`).
    max_response_bytes: u64,
    /// The cancel generation: `cancel_in_flight` bumps it (ending the exchanges started
    /// before), `cancel_all` sets it to `CANCEL_ALL` for good. Every exchange watches it.
    cancel: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
    /// How response payloads are read (the endpoint type's shape).
    shape: Arc<ResponseShape>,
    /// Given each streamed event's new text and reasoning as it arrives (`aiperf chat`).
    live: Option<LiveText>,
    /// Keep on each record a reference to the body sent (`--export-level raw`,
    /// `--apply-chat-template`) and, with `keep_responses`, to the bytes received.
    keep_body: bool,
    keep_responses: bool,
    /// Video generation: each request is a job, polled to its end (see `video`).
    video: Option<VideoPolling>,
}

/// A callback given the text and reasoning each streamed event adds.
pub type LiveText = Arc<dyn Fn(&str, &str) + Send + Sync>;

impl HttpClient {
    /// A client of `uri` whose requests carry `headers` (the API's, auth included: see
    /// `endpoint::EndpointType::request_headers`; a later header of a name wins).
    pub fn new(
        uri: Uri,
        headers: &[(http::HeaderName, HeaderValue)],
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let mut http = HttpConnector::new_with_resolver(timing::StampedResolver::new());
        http.set_nodelay(true);
        http.enforce_http(false);
        http.set_keepalive(Some(Duration::from_secs(60)));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let connector = WatchedConnector(connector, None);
        let pool = Arc::new(Pool::new(connector.clone(), 1, usize::MAX));

        let given = headers;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        // Responses are not decoded: compression would only add client work to the timings.
        // A server that compresses anyway gets a clear error (see `run`).
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        for (name, value) in given {
            headers.insert(name.clone(), value.clone());
        }
        tracing::debug!(
            "HTTP client for {}: HTTP/1.1 keep-alive pool (idle connections kept 90 s), request timeout {:.1} s, headers: {}",
            uri,
            timeout.as_secs_f64(),
            headers
                .keys()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(HttpClient {
            pool,
            connector,
            reuse: ConnectionReuse::Pooled,
            servers: Arc::new(Servers::new(vec![uri.clone()])),
            pinned: None,
            session_header: http::HeaderName::from_static("x-correlation-id"),
            resent: Arc::default(),
            uri,
            headers,
            timeout,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            cancel: std::sync::Arc::new(tokio::sync::watch::channel(0).0),
            shape: Arc::default(),
            live: None,
            keep_body: false,
            keep_responses: false,
            video: None,
        })
    }

    /// Each request submits a video job and follows it as `polling` says.
    pub fn with_video_polling(mut self, polling: Option<VideoPolling>) -> Self {
        self.video = polling;
        self
    }

    /// Each record keeps its request body and, with `responses`, the response's bytes
    /// (`RequestRecord::raw`).
    pub fn with_raw_capture(mut self, body: bool, responses: bool) -> Self {
        self.keep_body = body || responses;
        self.keep_responses = responses;
        self
    }

    /// Hands each streamed event's new text and reasoning to `live` as it arrives.
    pub fn with_live_text(mut self, live: LiveText) -> Self {
        self.live = Some(live);
        self
    }

    /// Reads responses as `shape` says instead of as OpenAI chat or completions.
    pub fn with_response_shape(mut self, shape: ResponseShape) -> Self {
        self.shape = Arc::new(shape);
        self
    }

    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// Spreads requests over `uris` in turn (the first is `uri`), with `reuse` and the
    /// session id in the header `session_header`.
    pub fn with_servers(
        mut self,
        uris: Vec<Uri>,
        reuse: ConnectionReuse,
        session_header: http::HeaderName,
    ) -> Self {
        if let Some(first) = uris.first() {
            self.uri = first.clone();
            self.servers = Arc::new(Servers::new(uris));
        }
        let max_idle = match reuse {
            ConnectionReuse::Never => 0,
            _ => usize::MAX,
        };
        let servers = self.servers.targets.len();
        self.pool = Arc::new(Pool::new(self.connector.clone(), servers, max_idle));
        self.reuse = reuse;
        self.session_header = session_header;
        self
    }

    /// Requests sent to each server so far, in `--url` order.
    pub fn requests_per_server(&self) -> Vec<(Uri, u64)> {
        let s = &self.servers;
        s.targets
            .iter()
            .zip(&s.sent)
            .map(|(t, n)| (t.uri.clone(), n.load(Ordering::Relaxed)))
            .collect()
    }

    /// With sticky sessions, a client for one conversation: its own one-connection pool
    /// and one server, dropped (closing the connection) with the conversation. `None`
    /// otherwise: the shared client serves.
    pub fn for_session(&self) -> Option<HttpClient> {
        if self.reuse != ConnectionReuse::StickySessions {
            return None;
        }
        let one = Arc::new(tokio::sync::Semaphore::new(1));
        let connector = WatchedConnector(self.connector.0.clone(), Some(one));
        let servers = self.servers.targets.len();
        Some(HttpClient {
            pool: Arc::new(Pool::new(connector.clone(), servers, 1)),
            connector,
            pinned: Some(self.servers.pick()),
            ..self.clone()
        })
    }

    /// Ends a sticky session: connects still waiting for its connection fail at once.
    pub fn end_session(&self) {
        if let Some(one) = &self.connector.1 {
            one.close();
        }
    }

    /// The server of the next request: the session's, or the next in turn.
    fn pick_server(&self) -> usize {
        let i = self.pinned.unwrap_or_else(|| self.servers.pick());
        self.servers.sent[i].fetch_add(1, Ordering::Relaxed);
        i
    }

    /// Caps each response body at `bytes`: past it the request fails and the rest of the
    /// body is left unread, so one huge response cannot exhaust memory.
    pub fn with_max_response_bytes(mut self, bytes: u64) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// How many requests were written a second time, on a new connection, because the
    /// server had closed the kept-alive one they were first written to without taking them
    /// in (see `conn`).
    pub fn resent_requests(&self) -> u64 {
        self.resent.load(Ordering::Relaxed)
    }

    /// How many requests went to a new connection because the kept-alive one they were
    /// given was found closed before any byte was written.
    pub fn found_closed_connections(&self) -> u64 {
        self.pool.found_closed_count()
    }

    /// Ends every exchange in flight (and any started later) at once with a cancellation
    /// record (code 499). Tokens already received stay on the records.
    pub fn cancel_all(&self) {
        self.cancel.send_replace(CANCEL_ALL);
    }

    /// Ends the exchanges in flight now, like `cancel_all`; later ones run normally (the
    /// end of a phase's grace period).
    pub fn cancel_in_flight(&self) {
        self.cancel.send_if_modified(|g| {
            let bump = *g != CANCEL_ALL;
            if bump {
                *g += 1;
            }
            bump
        });
    }

    /// `GET uri` (or POST, empty) with the run's headers (so an API key is sent): the
    /// status and body, or why no response came. Used to wait for the server before the
    /// run and for the control requests around it. The connection is its own, closed after
    /// the answer.
    pub async fn probe(
        &self,
        method: http::Method,
        uri: Uri,
        timeout: Duration,
    ) -> Result<(u16, Bytes), String> {
        let target = Target::new(uri);
        let mut request = Request::builder()
            .method(method)
            .uri(target.origin.clone())
            .body(RequestBody::plain(Bytes::new()))
            .map_err(|e| e.to_string())?;
        for (k, v) in &self.headers {
            if k != CONTENT_TYPE {
                request.headers_mut().insert(k.clone(), v.clone());
            }
        }
        request.headers_mut().insert(HOST, target.host.clone());
        let exchange = async {
            let mut conn = self.pool.connect(0, target.uri.clone()).await?;
            let response = conn.sender.send_request(request).await?;
            let status = response.status().as_u16();
            let mut body = response.into_body();
            let body = collect_body(&mut body, self.max_response_bytes).await;
            Ok::<_, SendError>((status, body.unwrap_or_default()))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Err(_) => Err(format!("no answer within {:.1} s", timeout.as_secs_f64())),
            Ok(Err(e)) => Err(error_chain(&e)),
            Ok(Ok(answer)) => Ok(answer),
        }
    }

    /// The `/v1/models` URI of the server the run talks to (same scheme, host and any path
    /// prefix before `/v1/`).
    pub fn models_uri(&self) -> Uri {
        let path = self.uri.path();
        let prefix = path.find("/v1/").map_or("", |i| &path[..i]);
        let mut parts = self.uri.clone().into_parts();
        parts.path_and_query = format!("{prefix}/v1/models").parse().ok();
        Uri::from_parts(parts).unwrap_or_else(|_| self.uri.clone())
    }

    #[cfg(test)]
    /// True once `cancel_all` was called.
    pub fn is_cancelled(&self) -> bool {
        *self.cancel.borrow() == CANCEL_ALL
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
        self.exchange_gated(clock, phase, input, x_request_id, body, None)
            .await
    }

    /// `exchange` holding `until_first_token` (a prefill slot) until the first content
    /// token of the stream arrives; a request that ends before one releases it at its end.
    pub async fn exchange_gated(
        &self,
        clock: &Clock,
        phase: Phase,
        input: RequestInput,
        x_request_id: String,
        body: Bytes,
        mut until_first_token: Option<OwnedSemaphorePermit>,
    ) -> RequestRecord {
        let mut record = RequestRecord::new(phase, input, x_request_id);
        if self.keep_body {
            record.raw = Some(Box::new(crate::record::RawExchange {
                body: body.clone(),
                ..Default::default()
            }));
        }
        let taken = TakenAt::default();
        let mut cancel = self.cancel.subscribe();
        let generation = *cancel.borrow_and_update();
        record.start_perf_ns = clock.now_ns();
        // The timeout covers the whole exchange (connect, headers, body); when it fires or
        // the run cancels, the exchange future is dropped, which closes its connection and
        // frees the slot at once.
        let mut rest = None;
        let mut wire = Wire::default();
        let deadline = tokio::time::sleep(self.timeout);
        let stop = async {
            tokio::select! {
                biased;
                _ = deadline => false,
                _ = cancel.wait_for(|g| *g != generation || *g == CANCEL_ALL) => true,
            }
        };
        let outcome = {
            // Pinned where it is made (and dropped at the end of this block): the exchange
            // future is kilobytes, which `race` would otherwise move twice per request.
            let exchange = std::pin::pin!(self.run(
                clock,
                body,
                &taken,
                &mut record,
                &mut wire,
                &mut until_first_token,
            ));
            // As `tokio::time::timeout` with a cancel branch (the exchange first, then the
            // deadline, then the cancel), but the deadline and the cancel watch are polled
            // only when one of them woke the task, not on every frame of the stream.
            match race(exchange, stop).await {
                Ok(body) => {
                    rest = body;
                    Some(true)
                }
                Err(false) => Some(false),
                Err(true) => None,
            }
        };
        record.end_perf_ns = clock.now_ns();
        drop(until_first_token);
        record.sent_perf_ns = taken.get();
        // Read while the exchange still holds the connection: its stamps are this request's.
        if let Some(conn) = &wire.conn {
            // A whole (non-streamed) body mostly comes with its headers; the stream's first
            // frame is stamped as it arrives.
            let first_body = wire.first_body_ns.or(record.ack_perf_ns);
            record.http = Some(conn.stamps.timing(clock, record.start_perf_ns, first_body));
        }
        match outcome {
            Some(true) => {}
            Some(false) => {
                record.error = Some(ErrorDetails {
                    code: Some(TIMEOUT_CODE),
                    kind: "RequestTimeoutError".into(),
                    message: format!(
                        "Request timed out after {:.3} seconds",
                        self.timeout.as_secs_f64()
                    ),
                });
            }
            None => {
                record.was_cancelled = true;
                record.cancellation_perf_ns = Some(record.end_perf_ns);
                record.error = Some(ErrorDetails {
                    code: Some(CANCELLED_CODE),
                    kind: "RequestCancellationError".into(),
                    message: "Request was cancelled because the run was stopped".into(),
                });
            }
        }
        record.start_wall_ns = clock.wall_ns(record.start_perf_ns);
        record.end_wall_ns = clock.wall_ns(record.end_perf_ns);
        // The record is settled; reading the end of a finished stream only lets its
        // connection go back to the pool.
        if let Some(mut body) = rest {
            wire.ended = drain_to_end(&mut body).await;
        }
        if let Some(conn) = wire.conn.take().filter(|_| wire.ended && !wire.closes) {
            self.pool.give_back(conn);
        }
        record
    }

    /// The POST of `body`, with the run's headers and the record's ids; the body notes in
    /// `taken` when the connection takes it.
    fn request(
        &self,
        target: &Target,
        clock: &Clock,
        body: Bytes,
        taken: &TakenAt,
        record: &RequestRecord,
    ) -> Request<RequestBody> {
        let body = RequestBody::stamped(body, *clock, taken.clone());
        let mut request = Request::post(target.origin.clone())
            .body(body)
            .expect("a POST with a valid URI always builds");
        // Room for the three per-request headers up front: a clone of the shared map has no
        // spare room, and growing it took a third of this function's time.
        let headers = request.headers_mut();
        headers.reserve(self.headers.len() + 3);
        for (name, value) in &self.headers {
            headers.append(name, value.clone());
        }
        headers.insert(HOST, target.host.clone());
        if let Ok(v) = HeaderValue::from_str(&record.x_request_id) {
            headers.insert(X_REQUEST_ID, v);
        }
        if let Ok(v) = HeaderValue::from_str(&record.input.correlation_id) {
            headers.insert(self.session_header.clone(), v);
        }
        request
    }

    /// Sends the request, once more on a new connection if the kept-alive one it went to
    /// had been closed by the server without taking the request in (see `conn`). The
    /// record's times then start at the second send: the first attempt is not part of the
    /// request.
    /// The connection the response came on is left in `wire`.
    async fn send(
        &self,
        clock: &Clock,
        body: Bytes,
        taken: &TakenAt,
        record: &mut RequestRecord,
        wire: &mut Wire,
    ) -> Result<http::Response<hyper::body::Incoming>, SendError> {
        let server = self.pick_server();
        let target = &self.servers.targets[server];
        let first = self.request(target, clock, body.clone(), taken, record);
        let conn = wire.conn.insert(self.pool.take(server, target).await?);
        let e = match conn.sender.send_request(first).await {
            Err(e) => e,
            ok => return Ok(ok?),
        };
        let Some(closed) = conn::unsent(&e) else {
            return Err(e.into());
        };
        if !closed.written {
            // Found closed before writing: nothing went out.
            self.pool
                .found_closed(server, target, closed.after_response);
        } else {
            if closed.after_response {
                self.pool.closed_after_response(server, target);
            }
            if self.resent.fetch_add(1, Ordering::Relaxed) == 0 {
                warn!(
                    "A request went out on a kept-alive connection the server closed without taking it \
                     in ({}); such requests are sent again once on a new connection and counted",
                    error_chain(&SendError::Send(e))
                );
            }
        }
        taken.reset();
        record.start_perf_ns = clock.now_ns();
        let again = self.request(target, clock, body, taken, record);
        // The closed connection goes before the new one is made (a sticky session has room
        // for one).
        wire.conn = None;
        let conn = wire
            .conn
            .insert(self.pool.connect(server, target.uri.clone()).await?);
        Ok(conn.sender.send_request(again).await?)
    }

    /// Sends the request and reads the response into `record`. Returns the body of a stream
    /// that ended with `[DONE]`, for `drain_to_end`.
    async fn run(
        &self,
        clock: &Clock,
        body: Bytes,
        taken: &TakenAt,
        record: &mut RequestRecord,
        wire: &mut Wire,
        until_first_token: &mut Option<OwnedSemaphorePermit>,
    ) -> Option<hyper::body::Incoming> {
        if let Some(polling) = self.video {
            // Boxed: the job's future stays out of every other exchange's.
            Box::pin(self.run_video(polling, clock, body, taken, record, wire)).await;
            return None;
        }
        let response = match self.send(clock, body, taken, record, wire).await {
            Ok(r) => r,
            Err(e) => {
                record.error = Some(transport_error(&e));
                return None;
            }
        };
        record.ack_perf_ns = Some(clock.now_ns());
        let status = response.status();
        record.status = Some(status.as_u16());
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .map(|v| v.trim().to_ascii_lowercase())
        };
        // Media types are case-insensitive (`Text/Event-Stream; charset=UTF-8`).
        let content_type = header(CONTENT_TYPE);
        let is_sse = (content_type.as_deref())
            .is_some_and(|ct| ct.split(';').next().unwrap_or("").trim() == "text/event-stream");
        let encoding = header(CONTENT_ENCODING).filter(|e| !e.is_empty() && e != "identity");
        wire.closes = header(CONNECTION).is_some_and(|c| c.split(',').any(|t| t.trim() == "close"));
        let mut body = response.into_body();
        if let Some(encoding) = encoding
            && status.is_success()
        {
            record.error = Some(ErrorDetails {
                code: Some(status.as_u16()),
                kind: "UnsupportedEncodingError".into(),
                message: format!(
                    "The server sent a {encoding}-encoded response although the request asked \
                     for none (Accept-Encoding: identity); aiperf does not decode compressed responses"
                ),
            });
            return None;
        }

        if !status.is_success() {
            // A cut-short error body still tells the status.
            let bytes = collect_body(&mut body, self.max_response_bytes).await;
            wire.ended = bytes.is_ok();
            let bytes = bytes.unwrap_or_default();
            record.error = Some(http_error(status, &bytes));
            return None;
        }

        if is_sse {
            record.streamed = true;
            // One content event per token asked for, mostly, of a few bytes each: sized
            // once, not grown.
            let expected = record.input.requested_output_tokens.unwrap_or(0).min(256) as usize;
            record.responses.reserve(expected);
            record.output_text.reserve(expected * 4);
            let mut framer = SseFramer::new();
            let mut state = StreamState {
                shape: self.shape.clone(),
                ..StreamState::default()
            };
            let mut received = 0u64;
            loop {
                match body.frame().await {
                    Some(Ok(frame)) => {
                        let arrival = clock.now_ns();
                        wire.first_body_ns.get_or_insert(arrival);
                        if let Some(data) = frame.data_ref() {
                            if let Some(raw) = record.raw.as_mut().filter(|_| self.keep_responses) {
                                raw.frames.push((arrival, data.clone()));
                            }
                            received += data.len() as u64;
                            if received > self.max_response_bytes {
                                let e = BodyError::TooLarge(self.max_response_bytes);
                                record.error = Some(e.details());
                                return None;
                            }
                            let seen = (record.output_text.len(), record.reasoning_text.len());
                            framer.feed(data, arrival, |ev| state.on_event(ev, record));
                            if let Some(live) = &self.live {
                                let text = &record.output_text[seen.0..];
                                let reasoning = &record.reasoning_text[seen.1..];
                                if !text.is_empty() || !reasoning.is_empty() {
                                    live(text, reasoning);
                                }
                            }
                            if !record.responses.is_empty() {
                                // The first token is here: the prefill slot goes back.
                                until_first_token.take();
                            }
                        }
                        if state.done {
                            break;
                        }
                    }
                    Some(Err(e)) => {
                        // An event the error cut off is dropped, not parsed: half a `data:`
                        // line is the transport's failure, not the server's bad JSON.
                        if record.error.is_none() {
                            record.error = Some(stream_error(&e));
                        }
                        return None;
                    }
                    None => {
                        wire.ended = true;
                        break;
                    }
                }
            }
            let failed_before = record.error.is_some();
            let cut = framer.finish(|ev| state.on_event(ev, record));
            // The body ended inside its last line (a Content-Length shorter than the
            // stream, a proxy that cut it): that event is not the server's bad JSON.
            if cut
                && !failed_before
                && record
                    .error
                    .as_ref()
                    .is_some_and(|e| e.kind == "InvalidResponseError")
            {
                record.error = Some(ErrorDetails {
                    code: None,
                    kind: "IncompleteStreamError".into(),
                    message: "The stream ended inside an event (its last line has no end): \
                              the response was cut short"
                        .into(),
                });
            }
            if record.error.is_none() && !state.done && !self.shape.ends_at_close() {
                record.error = Some(ErrorDetails {
                    code: None,
                    kind: "IncompleteStreamError".into(),
                    message: format!(
                        "The stream ended without a {} event",
                        self.shape.stream_end()
                    ),
                });
            }
            if record.error.is_none() && record.responses.is_empty() {
                record.error = Some(no_content_error(state.unexpected.as_deref()));
            }
            if state.done {
                return Some(body);
            }
        } else {
            match collect_body(&mut body, self.max_response_bytes).await {
                Ok(bytes) => {
                    wire.ended = true;
                    let now = clock.now_ns();
                    if let Some(raw) = record.raw.as_mut().filter(|_| self.keep_responses) {
                        raw.bodies.push((now, bytes.clone(), content_type));
                    }
                    parse_whole_body(status.as_u16(), &bytes, now, record, &self.shape)
                }
                Err(e) => record.error = Some(e.details()),
            }
        }
        None
    }
}

mod race;
mod response;
use race::race;
use response::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::{self, MockServerArgs};
    use http::header::AUTHORIZATION;
    use std::sync::Arc;

    #[test]
    fn a_request_carries_the_given_headers_its_ids_and_the_target_host() {
        let uri: Uri = "http://127.0.0.1:9/v1/chat/completions".parse().unwrap();
        let given = [
            (AUTHORIZATION, HeaderValue::from_static("Bearer k1")),
            (HOST, HeaderValue::from_static("ignored.example")),
            (
                http::HeaderName::from_static("x-team"),
                HeaderValue::from_static("a"),
            ),
        ];
        let c = HttpClient::new(uri, &given, Duration::from_secs(1)).unwrap();
        let mut record = RequestRecord {
            streamed: true,
            ..RequestRecord::new(Phase::Profiling, RequestInput::default(), "r".into())
        };
        record.x_request_id = "req-1".into();
        record.input.correlation_id = "corr-1".into();
        let target = &c.servers.targets[0];
        let request = c.request(
            target,
            &Clock::new(),
            Bytes::from_static(b"{}"),
            &TakenAt::default(),
            &record,
        );
        let h = request.headers();
        // Every header of the shared map, then this request's; the target's host wins.
        for name in c.headers.keys().filter(|&n| n != HOST) {
            let sent: Vec<_> = h.get_all(name).iter().collect();
            let shared: Vec<_> = c.headers.get_all(name).iter().collect();
            assert_eq!(sent, shared, "{name}");
        }
        assert_eq!(h.get("x-team").unwrap(), "a");
        assert_eq!(h.get(AUTHORIZATION).unwrap(), "Bearer k1");
        assert_eq!(h.get_all(HOST).iter().count(), 1);
        assert_eq!(h.get(HOST).unwrap(), &target.host);
        assert_eq!(h.get("x-request-id").unwrap(), "req-1");
        assert_eq!(h.get(&c.session_header).unwrap(), "corr-1");
    }

    fn chat_body(stream: bool, tokens: u64) -> Bytes {
        Bytes::from(
            serde_json::json!({
                "model": "m",
                "messages": [{"role": "user", "content": "hello"}],
                "stream": stream,
                "stream_options": {"include_usage": true},
                "max_completion_tokens": tokens,
            })
            .to_string(),
        )
    }

    /// A client for the chat endpoint of the server at `base_url`.
    pub(super) fn chat_client(base_url: &str, timeout: Duration) -> HttpClient {
        let uri: Uri = format!("{base_url}/v1/chat/completions").parse().unwrap();
        HttpClient::new(uri, &[], timeout).unwrap()
    }

    /// One streamed chat request asking for `tokens` tokens.
    pub(super) async fn stream_once(client: &HttpClient, tokens: u64) -> RequestRecord {
        client
            .exchange(
                &Clock::new(),
                Phase::Profiling,
                RequestInput::default(),
                "x".into(),
                chat_body(true, tokens),
            )
            .await
    }

    async fn exchange_with(
        args: MockServerArgs,
        timeout: Duration,
        tokens: u64,
    ) -> (RequestRecord, HttpClient, mock::MockServer) {
        let server = mock::start(args).await.unwrap();
        let client = chat_client(&server.url(), timeout);
        let r = stream_once(&client, tokens).await;
        (r, client, server)
    }

    #[tokio::test]
    async fn reset_mid_stream_keeps_the_tokens_received() {
        let mut args = MockServerArgs::fast_defaults();
        args.fast = false;
        args.ttft = 1.0;
        args.itl = 1.0;
        args.faults.reset_rate = 100.0;
        let (r, _c, server) = exchange_with(args, Duration::from_secs(30), 10).await;
        let e = r.error.clone().expect("a reset is an error");
        assert_eq!((e.code, e.kind.as_str()), (None, "StreamError"), "{e:?}");
        // The fault strikes after half of the 10 tokens.
        assert_eq!(r.responses.len(), 5, "{:?}", r.responses);
        assert_eq!(r.status, Some(200));
        server.shutdown().await;
    }

    #[tokio::test]
    async fn timeout_covers_the_whole_stream_and_keeps_tokens() {
        let mut args = MockServerArgs::fast_defaults();
        args.fast = false;
        args.ttft = 1.0;
        args.itl = 1.0;
        args.faults.stall_rate = 100.0;
        args.faults.stall_ms = 10_000;
        let t0 = std::time::Instant::now();
        let (r, _c, server) = exchange_with(args, Duration::from_millis(500), 10).await;
        let elapsed = t0.elapsed();
        let e = r.error.clone().unwrap();
        assert_eq!(e.code, Some(TIMEOUT_CODE));
        assert_eq!(e.message, "Request timed out after 0.500 seconds");
        assert_eq!(r.responses.len(), 5);
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
        server.shutdown().await;
    }

    /// `n` streamed chat requests for `tokens` tokens each, one after another, on one client.
    async fn sequential_streams(base_url: &str, n: usize, tokens: u64) -> Vec<RequestRecord> {
        let uri: Uri = format!("{base_url}/v1/chat/completions").parse().unwrap();
        let client = HttpClient::new(uri, &[], Duration::from_secs(10)).unwrap();
        let clock = Clock::new();
        let mut records = Vec::with_capacity(n);
        for i in 0..n {
            let body = chat_body(true, tokens);
            let input = RequestInput::default();
            let r = client
                .exchange(&clock, Phase::Profiling, input, format!("r{i}"), body)
                .await;
            records.push(r);
        }
        records
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sent_stamp_lies_between_start_and_end() {
        let server = mock::start(MockServerArgs::fast_defaults()).await.unwrap();
        for r in sequential_streams(&server.url(), 10, 3).await {
            assert!(r.error.is_none(), "{:?}", r.error);
            let sent = r.sent_perf_ns.expect("the body was sent");
            assert!(r.start_perf_ns <= sent && sent <= r.end_perf_ns);
        }
        server.shutdown().await;
    }

    /// A server whose chunked stream ends a few ms after `[DONE]` (as under load, when the
    /// last chunk and the end of the encoding leave in separate writes). Returns its address
    /// and a count of the connections it accepted.
    async fn late_end_server() -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicU64>) {
        use std::sync::atomic::{AtomicU64, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                tcp.set_nodelay(true).unwrap();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut seen = Vec::new();
                    loop {
                        // One request: headers, then the Content-Length body.
                        let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
                            match tcp.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => seen.extend_from_slice(&buf[..n]),
                            }
                            continue;
                        };
                        let head = String::from_utf8_lossy(&seen[..end]).to_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse().unwrap());
                        while seen.len() < end + 4 + len {
                            match tcp.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => seen.extend_from_slice(&buf[..n]),
                            }
                        }
                        seen.drain(..end + 4 + len);
                        let chunk = |s: &str| format!("{:x}\r\n{s}\r\n", s.len());
                        let token = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{}{}",
                            chunk(token),
                            chunk("data: [DONE]\n\n")
                        );
                        if tcp.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(3)).await;
                        if tcp.write_all(b"0\r\n\r\n").await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_is_read_to_its_end_after_done_so_its_connection_is_reused() {
        let (addr, accepted) = late_end_server().await;
        for r in sequential_streams(&format!("http://{addr}"), 20, 1).await {
            assert!(r.error.is_none(), "{:?}", r.error);
            assert_eq!(r.responses.len(), 1);
        }
        // Dropping the body at [DONE] closes each connection: 20 of them. Read to its end,
        // a stream's connection is reused, but the next request can still race the pool's
        // return of it on a loaded machine, so a few more may open.
        let opened = accepted.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            opened <= 10,
            "{opened} connections for 20 sequential requests"
        );
    }

    /// A plain-socket server on its own thread (so it runs while the test blocks its
    /// runtime): answers each request with one streamed token, then sleeps `close_after`
    /// and closes the connection although it was kept alive. Counts requests and
    /// connections.
    fn closing_server(close_after: Duration) -> (String, Arc<(AtomicU64, AtomicU64)>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let counts = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let seen = counts.clone();
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                let mut tcp = tcp.unwrap();
                seen.1.fetch_add(1, Ordering::Relaxed);
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tcp.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if head.is_empty() {
                    continue;
                }
                // The body follows the headers at once; the reply does not depend on it.
                seen.0.fetch_add(1, Ordering::Relaxed);
                let token =
                    "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{token}\r\n0\r\n\r\n",
                    token.len()
                );
                tcp.write_all(reply.as_bytes()).unwrap();
                std::thread::sleep(close_after);
            }
        });
        (url, counts)
    }

    /// Serves one connection on its own thread: writes `pieces` (1 ms apart) after reading a
    /// request, then resets the connection.
    fn resetting_server(pieces: Vec<Vec<u8>>) -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut tcp, _) = listener.accept().unwrap();
            tcp.set_nodelay(true).unwrap();
            let mut buf = [0u8; 4096];
            let _ = tcp.read(&mut buf).unwrap();
            for p in pieces {
                tcp.write_all(&p).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
            socket2::SockRef::from(&tcp)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
        });
        url
    }

    #[tokio::test]
    async fn a_reset_mid_data_line_is_a_stream_error_and_keeps_the_tokens() {
        let chunk = |s: &str| format!("{:x}\r\n{s}\r\n", s.len()).into_bytes();
        let token =
            |t: &str| format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{t}\"}}}}]}}\n\n");
        let url = resetting_server(vec![
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n".to_vec(),
            chunk(&token("a")),
            chunk(&token("b")),
            // A chunk announced at 64 bytes, cut in the middle of its `data:` line.
            b"40\r\ndata: {\"choices\":[{\"delta\":{\"con".to_vec(),
        ]);
        let client = chat_client(&url, Duration::from_secs(10));
        let r = stream_once(&client, 3).await;
        let e = r.error.clone().expect("an error");
        assert_eq!((e.code, e.kind.as_str()), (None, "StreamError"), "{e:?}");
        assert!(!e.message.contains("JSON"), "{e:?}");
        assert_eq!(r.output_text, "ab");
        let (t0, t1) = (r.responses[0].perf_ns, r.responses[1].perf_ns);
        assert!(
            r.start_perf_ns < t0 && t0 < t1 && t1 <= r.end_perf_ns,
            "{r:?}"
        );
    }

    #[test]
    fn a_request_on_a_connection_the_server_closed_is_sent_again_once() {
        let (url, counts) = closing_server(Duration::from_millis(5));
        // One thread, blocked between the requests: the runtime cannot notice the close, so
        // the pool hands the closed connection to the second request.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let uri: Uri = format!("{url}/v1/chat/completions").parse().unwrap();
        let client = HttpClient::new(uri, &[], Duration::from_secs(10)).unwrap();
        let clock = Clock::new();
        let send = |id: &str| {
            rt.block_on(client.exchange(
                &clock,
                Phase::Profiling,
                RequestInput::default(),
                id.into(),
                chat_body(true, 1),
            ))
        };
        let first = send("a");
        assert!(first.error.is_none(), "{:?}", first.error);
        std::thread::sleep(Duration::from_millis(100));
        let before_second = clock.now_ns();
        let second = send("b");
        assert!(second.error.is_none(), "{:?}", second.error);
        assert_eq!(second.output_text, "hi");
        assert_eq!(
            client.resent_requests() + client.found_closed_connections(),
            1
        );
        // The server read each request once; the retry opened the second connection.
        assert_eq!(counts.0.load(Ordering::Relaxed), 2);
        assert_eq!(counts.1.load(Ordering::Relaxed), 2);
        // The record's times are those of the second send.
        let sent = second.sent_perf_ns.expect("sent");
        assert!(before_second <= second.start_perf_ns && second.start_perf_ns <= sent);
    }

    #[tokio::test]
    async fn cancelling_ends_exchanges_with_499() {
        let mut args = MockServerArgs::fast_defaults();
        args.fast = false;
        args.ttft = 1.0;
        args.itl = 100.0;
        let server = mock::start(args).await.unwrap();
        let uri: Uri = format!("{}/v1/chat/completions", server.url())
            .parse()
            .unwrap();
        let client = HttpClient::new(uri, &[], Duration::from_secs(60)).unwrap();
        let c2 = client.clone();
        let task = tokio::spawn(async move {
            c2.exchange(
                &Clock::new(),
                Phase::Profiling,
                RequestInput::default(),
                "x".into(),
                chat_body(true, 1000),
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(!client.is_cancelled());
        client.cancel_in_flight();
        let r = tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("cancel ends the exchange at once")
            .unwrap();
        let e = r.error.clone().unwrap();
        assert_eq!(
            (e.code, e.kind.as_str()),
            (Some(CANCELLED_CODE), "RequestCancellationError")
        );
        assert!(r.was_cancelled && r.cancellation_perf_ns.is_some());
        assert!(!r.responses.is_empty(), "tokens before the cancel are kept");

        // Only what was in flight: the next exchange runs to its end.
        assert!(!client.is_cancelled());
        let clock = Clock::new();
        let short = || {
            client.exchange(
                &clock,
                Phase::Profiling,
                RequestInput::default(),
                "y".into(),
                chat_body(true, 2),
            )
        };
        let r = short().await;
        assert!(r.error.is_none(), "{:?}", r.error);
        // After cancel_all, even a later exchange is cancelled.
        client.cancel_all();
        assert!(client.is_cancelled());
        let r = short().await;
        assert_eq!(r.error.unwrap().code, Some(CANCELLED_CODE));
        server.shutdown().await;
    }
}
