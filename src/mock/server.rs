//! Routing and request handling on axum.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use bytes::Bytes;

use super::admission::{Admission, SlotBody};
use super::body::{Jitter, Schedule, ScheduledBody};
use super::fault::{Fault, FaultRates, FaultyBody};
use super::metrics::{MockMetrics, Served};
use super::rankings::RerankApi;
use super::recorder::{self, Recorder, RequestTrace};
use super::request::{
    ChatCosts, ChatRequest, CompletionRequest, GenerationParams, OutputPlan, PromptStats,
    chat_prompt_stats, completion_prompt_stats,
};
use super::response::{self, Api, ChunkWriter, ResponseHeader, UsageCounts};
use super::{MockServer, MockServerArgs};
use crate::clock::Clock;
use crate::hash::splitmix64;

use super::prefix_cache::{self, PrefixCache};

/// Everything handlers share, fixed at start.
struct Shared {
    ttft: Duration,
    itl: Duration,
    /// Nanoseconds of TTFT per prompt token (`--ttft-per-prompt-token`).
    ttft_per_prompt_token_ns: f64,
    /// Nanoseconds of ITL per other request being served (`--itl-per-running`).
    itl_per_running_ns: f64,
    ttft_jitter: Option<Jitter>,
    itl_jitter: Option<Jitter>,
    seed: u64,
    model: String,
    chat_costs: ChatCosts,
    max_model_len: u64,
    /// Share of `max_tokens` after which the model "emits" its EOS (`--eos-ratio`).
    eos_ratio: f64,
    clock: Clock,
    started_unix: u64,
    requests: AtomicU64,
    recorder: Option<Recorder>,
    faults: FaultRates,
    stall: Duration,
    /// `--max-concurrency` queue, and the running/waiting counts a metrics page would show.
    admission: Admission,
    /// What `GET /metrics` shows.
    metrics: Arc<MockMetrics>,
    /// `--prefix-cache-blocks`: cached prompt blocks, reported in `usage`.
    prefix_cache: Option<PrefixCache>,
    /// Video generation jobs (`/v1/videos`).
    videos: super::video_generation::VideoJobs,
}

pub(super) async fn start(args: MockServerArgs) -> anyhow::Result<MockServer> {
    let (ttft, itl) = args.delays()?;
    let (ttft_per_prompt_token_ns, itl_per_running_ns) = args.load_costs()?;
    let faults = args.fault_rates()?;
    let clock = Clock::new();
    let (recorder, recorder_handle) = match &args.record_requests {
        Some(path) => {
            let (r, h) = recorder::spawn(path, clock)
                .with_context(|| format!("creating --record-requests file {}", path.display()))?;
            (Some(r), Some(h))
        }
        None => (None, None),
    };
    let shared = Arc::new(Shared {
        ttft,
        itl,
        ttft_per_prompt_token_ns,
        itl_per_running_ns,
        ttft_jitter: if args.fast {
            None
        } else {
            Jitter::new(args.ttft_jitter_cv)
        },
        itl_jitter: if args.fast {
            None
        } else {
            Jitter::new(args.itl_jitter_cv)
        },
        seed: args.random_seed,
        model: args.model.clone(),
        chat_costs: ChatCosts {
            remote_image_tokens: args.remote_image_tokens,
            template_tokens_per_message: args.chat_template_tokens,
        },
        max_model_len: args.max_model_len,
        eos_ratio: args.eos_ratio,
        started_unix: clock.wall_ns(0) / 1_000_000_000,
        clock,
        requests: AtomicU64::new(0),
        recorder,
        faults,
        stall: Duration::from_millis(args.faults.stall_ms),
        admission: Admission::new(args.max_concurrency),
        metrics: Arc::new(MockMetrics::new(&args.model, args.max_concurrency)),
        prefix_cache: args
            .prefix_cache_blocks
            .map(|n| PrefixCache::new(usize::try_from(n).unwrap_or(usize::MAX))),
        videos: Default::default(),
    });

    let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
        .await
        .with_context(|| format!("binding {}:{}", args.host, args.port))?;
    let addr: SocketAddr = listener.local_addr()?;
    // Token chunks are small writes that must leave at once.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let load = shared.admission.gauges().clone();
    let app = router(shared);
    let task = tokio::spawn(async move {
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = stop_rx.await;
        });
        if let Err(e) = serve.await {
            tracing::error!("mock server stopped: {e}");
        }
    });
    Ok(MockServer {
        addr,
        stop: stop_tx,
        task,
        recorder: recorder_handle,
        load,
    })
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/audio/transcriptions", post(audio_transcriptions))
        .route("/v1/responses", post(responses))
        .route("/v1/messages", post(messages))
        // Non-chat endpoint types.
        .route("/v1/embeddings", post(embeddings))
        .route(
            "/v1/ranking",
            post(|s: State<Arc<Shared>>, r: Request| rerank(s, r, RerankApi::Nim)),
        )
        .route(
            "/v2/rerank",
            post(|s: State<Arc<Shared>>, r: Request| rerank(s, r, RerankApi::Cohere)),
        )
        .route(
            "/rerank",
            post(|s: State<Arc<Shared>>, r: Request| rerank(s, r, RerankApi::Tei)),
        )
        .route("/v1/images/generations", post(images))
        .route(
            "/generate",
            post(|s: State<Arc<Shared>>, r: Request| handle(s.0, r, Api::Generate)),
        )
        .route(
            "/generate_stream",
            post(|s: State<Arc<Shared>>, r: Request| handle(s.0, r, Api::GenerateStream)),
        )
        .route(
            "/rag/api/prompt",
            post(|s: State<Arc<Shared>>, r: Request| handle(s.0, r, Api::Solido)),
        )
        .route("/v1/infer", post(infer))
        .route("/v1/images/edits", post(image_edits))
        .route("/v1/videos", post(video_submit))
        .route("/v1/videos/{id}", get(video_status))
        .route("/v1/videos/{id}/content", get(video_content))
        .route(
            "/reset_prefix_cache",
            post(|s: State<Arc<Shared>>| control(s, "reset_prefix_cache")),
        )
        .route(
            "/start_profile",
            post(|s: State<Arc<Shared>>| control(s, "start_profile")),
        )
        .route(
            "/stop_profile",
            post(|s: State<Arc<Shared>>| control(s, "stop_profile")),
        )
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(shared)
}

async fn chat_completions(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    handle(shared, req, Api::Chat).await
}

async fn completions(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    handle(shared, req, Api::Completions).await
}

async fn responses(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    handle(shared, req, Api::Responses).await
}

async fn messages(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    handle(shared, req, Api::Messages).await
}

/// `/v1/audio/transcriptions`: answers after the first-token delay plus one inter-token
/// delay per further transcript token (see `audio`). Not queued or faulted; recorded with
/// `--record-requests` (audio tokens as the prompt, transcript tokens as the output).
async fn audio_transcriptions(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let parsed = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => super::audio::transcription(&content_type, &bytes),
        Err(e) => Err(format!("reading the request body failed: {e}")),
    };
    let received = Instant::now();
    let seen = request_ids(&parts);
    let t = match parsed {
        Ok(t) => t,
        Err(message) => {
            if let Some(r) = &shared.recorder {
                let mut trace = one_piece_trace("audio_transcription", 400, received, seen, None);
                trace.error = Some(message.clone());
                r.record(Box::new(trace));
            }
            return error_response(StatusCode::BAD_REQUEST, "BadRequestError", &message);
        }
    };
    let n = shared.requests.fetch_add(1, Ordering::Relaxed);
    let wait = shared.ttft + shared.itl * (t.output_tokens.saturating_sub(1) as u32);
    crate::timer::sleep_until(received + wait).await;
    let body = serde_json::json!({
        "text": super::words::text(t.output_tokens),
        "usage": {
            "prompt_tokens": t.prompt_tokens,
            "completion_tokens": t.output_tokens,
            "total_tokens": t.prompt_tokens + t.output_tokens,
            "seconds": t.seconds,
        },
        "model": t.model.unwrap_or_else(|| shared.model.clone()),
        "id": format!("trsc-{n}"),
    });
    if let Some(r) = &shared.recorder {
        let mut trace = one_piece_trace("audio_transcription", 200, received, seen, Some(&body));
        trace.output_tokens = t.output_tokens;
        r.record(Box::new(trace));
    }
    json_response(StatusCode::OK, Bytes::from(body.to_string()))
}

async fn embeddings(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    one_piece(shared, req, |body, model| {
        super::embeddings::answer(body, model)
    })
    .await
}

async fn images(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    one_piece(shared, req, |body, model| {
        super::image_generation::answer(body, model)
    })
    .await
}

async fn image_edits(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    one_piece(shared, req, move |body, _| {
        super::image_generation::edit_answer(&content_type, body)
    })
    .await
}

/// `POST /v1/videos`: starts a job (see `video_generation`).
async fn video_submit(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let answer = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => {
            let now = shared.clock.wall_ns(shared.clock.now_ns()) / 1_000_000_000;
            shared
                .videos
                .submit(&content_type, &bytes, &shared.model, now)
        }
        Err(e) => super::video_generation::Answer::Json(
            400,
            serde_json::json!({"error": {"message": format!("reading the request body failed: {e}")}}),
        ),
    };
    shared.requests.fetch_add(1, Ordering::Relaxed);
    video_answer(&shared, "video_generation", &parts, answer)
}

/// How long each video job takes.
fn video_duration(shared: &Shared) -> Duration {
    shared.ttft + shared.itl * 10
}

/// `GET /v1/videos/{id}`: the job's status.
async fn video_status(
    State(shared): State<Arc<Shared>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    req: Request,
) -> Response {
    let answer = shared.videos.status(&id, video_duration(&shared));
    let (parts, _) = req.into_parts();
    video_answer(&shared, "video_status", &parts, answer)
}

/// `GET /v1/videos/{id}/content`: a completed job's video.
async fn video_content(
    State(shared): State<Arc<Shared>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    req: Request,
) -> Response {
    let answer = shared.videos.content(&id, video_duration(&shared));
    let (parts, _) = req.into_parts();
    video_answer(&shared, "video_content", &parts, answer)
}

/// A video route's answer, recorded with `--record-requests` (its status; the job's model).
fn video_answer(
    shared: &Shared,
    endpoint: &'static str,
    parts: &axum::http::request::Parts,
    answer: super::video_generation::Answer,
) -> Response {
    let seen = request_ids(parts);
    let received = Instant::now();
    let (status, response) = match answer {
        super::video_generation::Answer::Json(status, v) => {
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            let resp = json_response(code, Bytes::from(v.to_string()));
            if let Some(r) = &shared.recorder {
                let mut trace = one_piece_trace(endpoint, status, received, seen, Some(&v));
                trace.error = v["error"]["message"].as_str().map(str::to_string);
                r.record(Box::new(trace));
            }
            return resp;
        }
        super::video_generation::Answer::Video(bytes) => {
            let mut resp = Response::new(Body::from(bytes));
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("video/mp4"));
            (200, resp)
        }
    };
    if let Some(r) = &shared.recorder {
        r.record(Box::new(one_piece_trace(
            endpoint, status, received, seen, None,
        )));
    }
    response
}

async fn infer(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    one_piece(shared, req, |body, _| super::retrieval::answer(body)).await
}

async fn rerank(State(shared): State<Arc<Shared>>, req: Request, api: RerankApi) -> Response {
    one_piece(shared, req, |body, model| {
        super::rankings::answer(api, body, model)
    })
    .await
}

/// A non-chat route (embeddings, reranking, image generation, retrieval): answers in one
/// piece after the first-token delay plus one inter-token delay per input or passage. Not
/// queued or faulted; recorded with `--record-requests` (the answer's `usage.prompt_tokens`
/// as its text tokens, no output tokens), rejections included.
async fn one_piece(
    shared: Arc<Shared>,
    req: Request,
    answer: impl FnOnce(&[u8], &str) -> Result<(serde_json::Value, u64), String>,
) -> Response {
    let (parts, body) = req.into_parts();
    let seen = request_ids(&parts);
    let endpoint = route_name(parts.uri.path());
    let parsed = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => answer(&bytes, &shared.model),
        Err(e) => Err(format!("reading the request body failed: {e}")),
    };
    let received = Instant::now();
    let (body, items) = match parsed {
        Ok(a) => a,
        Err(message) => {
            if let Some(r) = &shared.recorder {
                let mut trace = one_piece_trace(endpoint, 400, received, seen, None);
                trace.error = Some(message.clone());
                r.record(Box::new(trace));
            }
            return error_response(StatusCode::BAD_REQUEST, "BadRequestError", &message);
        }
    };
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let wait = shared.ttft + shared.itl * (items as u32);
    crate::timer::sleep_until(received + wait).await;
    if let Some(r) = &shared.recorder {
        r.record(Box::new(one_piece_trace(
            endpoint,
            200,
            received,
            seen,
            Some(&body),
        )));
    }
    json_response(StatusCode::OK, Bytes::from(body.to_string()))
}

/// The `endpoint` name a one-piece route's requests are recorded under.
fn route_name(path: &str) -> &'static str {
    match path {
        "/v1/embeddings" => "embeddings",
        "/v1/ranking" => "nim_rankings",
        "/v2/rerank" => "cohere_rankings",
        "/rerank" => "hf_tei_rankings",
        "/v1/images/generations" => "image_generation",
        "/v1/infer" => "image_retrieval",
        "/v1/images/edits" => "image_edit",
        _ => "other",
    }
}

fn one_piece_trace(
    endpoint: &'static str,
    status: u16,
    received: Instant,
    (x_request_id, peer_port): (Option<String>, Option<u16>),
    answer: Option<&serde_json::Value>,
) -> RequestTrace {
    let field = |k: &str| answer.and_then(|a| a.get(k));
    RequestTrace {
        endpoint,
        status,
        stream: false,
        model: field("model")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string(),
        x_request_id,
        peer_port,
        received,
        admitted: answer.map(|_| received),
        first_token: None,
        last_token: answer.map(|_| Instant::now()),
        text_tokens: field("usage")
            .and_then(|u| u.get("prompt_tokens"))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0),
        image_tokens: 0,
        template_tokens: 0,
        image_sizes: Vec::new(),
        roles: Vec::new(),
        output_tokens: 0,
        completed: true,
        error: None,
        cached_tokens: None,
    }
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let text = shared.metrics.render(shared.admission.gauges());
    let mut resp = Response::new(Body::from(text));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

/// vLLM's control endpoints: the prefix-cache reset empties the `--prefix-cache-blocks`
/// cache; the profiler start and stop only answer (the mock has no profiler). Each is a
/// line of `--record-requests`.
async fn control(State(shared): State<Arc<Shared>>, endpoint: &'static str) -> StatusCode {
    let received = Instant::now();
    if endpoint == "reset_prefix_cache"
        && let Some(cache) = &shared.prefix_cache
    {
        cache.clear();
    }
    if let Some(r) = &shared.recorder {
        r.record(Box::new(one_piece_trace(
            endpoint,
            200,
            received,
            (None, None),
            None,
        )));
    }
    StatusCode::OK
}

async fn health() -> StatusCode {
    StatusCode::OK
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    let body = serde_json::json!({
        "object": "list",
        "data": [{
            "id": shared.model,
            "object": "model",
            "created": shared.started_unix,
            "owned_by": "aiperf",
            "root": shared.model,
            "max_model_len": shared.max_model_len,
        }],
    });
    json_response(StatusCode::OK, Bytes::from(body.to_string()))
}

async fn not_found() -> Response {
    error_response(StatusCode::NOT_FOUND, "NotFoundError", "Not Found")
}

async fn method_not_allowed() -> Response {
    error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowedError",
        "Method Not Allowed",
    )
}

/// What an accepted request asks for.
struct Accepted {
    model: String,
    prompt: PromptStats,
    output: OutputPlan,
    stream: bool,
    include_usage: bool,
    /// Leading prompt tokens found in the prefix cache, when it is on.
    cached_tokens: Option<u64>,
}

/// The request's `X-Request-ID` and the client's port, for `--record-requests`.
fn request_ids(parts: &axum::http::request::Parts) -> (Option<String>, Option<u16>) {
    let x_request_id = parts
        .headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let peer_port = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0.port());
    (x_request_id, peer_port)
}

async fn handle(shared: Arc<Shared>, req: Request, api: Api) -> Response {
    let (parts, body) = req.into_parts();
    let (x_request_id, peer_port) = request_ids(&parts);
    let bytes = axum::body::to_bytes(body, usize::MAX).await;
    // The latency schedule starts once the whole request is in.
    let received = Instant::now();
    let parsed = match &bytes {
        Ok(bytes) => match api {
            Api::Chat => parse_chat(bytes, &shared),
            Api::Completions => parse_completion(bytes, &shared),
            Api::Responses => super::responses::parse_request(bytes, shared.chat_costs)
                .and_then(|(model, p, g)| accept(model.as_deref(), p, &g, &shared)),
            Api::Messages => super::messages::parse_request(bytes, shared.chat_costs)
                .and_then(|(model, p, g)| accept(model.as_deref(), p, &g, &shared)),
            Api::Generate | Api::GenerateStream => {
                super::tgi::parse_request(bytes, api == Api::GenerateStream)
                    .and_then(|(model, p, g)| accept(model.as_deref(), p, &g, &shared))
            }
            Api::Solido => super::solido::parse_request(bytes)
                .and_then(|(model, p, g)| accept(model.as_deref(), p, &g, &shared)),
        },
        Err(e) => Err(format!("reading the request body failed: {e}")),
    };
    let accepted = match parsed {
        Ok(a) => a,
        Err(message) => {
            let seen = (x_request_id, peer_port);
            record_rejection(&shared, api, received, seen, 400, &message);
            return error_response(StatusCode::BAD_REQUEST, "BadRequestError", &message);
        }
    };

    let n = shared.requests.fetch_add(1, Ordering::Relaxed);
    let fault = shared.faults.decide(shared.seed, n);
    let refusal = match fault {
        Some(Fault::ServerError) => Some((
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "mock server: injected internal server error",
        )),
        Some(Fault::RateLimit) => Some((
            StatusCode::TOO_MANY_REQUESTS,
            "RateLimitError",
            "mock server: injected rate limit",
        )),
        _ => None,
    };
    if let Some((status, kind, message)) = refusal {
        record_rejection(
            &shared,
            api,
            received,
            (x_request_id, peer_port),
            status.as_u16(),
            message,
        );
        return error_response(status, kind, message);
    }
    let created = shared.clock.wall_ns(shared.clock.ns_of(received)) / 1_000_000_000;
    let header = ResponseHeader {
        api,
        id: response_id(api, shared.seed, n),
        created,
        model: accepted.model,
    };
    let usage = UsageCounts {
        prompt_tokens: accepted.prompt.prompt_tokens(),
        completion_tokens: accepted.output.tokens,
        cached_tokens: accepted.cached_tokens,
    };
    let mut queued = QueuedTrace(shared.recorder.as_ref().map(|r| {
        let trace = RequestTrace {
            endpoint: api.as_str(),
            status: 200,
            stream: accepted.stream,
            model: header.model.clone(),
            x_request_id: x_request_id.clone(),
            peer_port,
            received,
            admitted: None,
            first_token: None,
            last_token: None,
            text_tokens: accepted.prompt.text_tokens,
            image_tokens: accepted.prompt.image_tokens,
            template_tokens: accepted.prompt.template_tokens,
            image_sizes: accepted.prompt.image_sizes.clone(),
            roles: accepted.prompt.roles.clone(),
            output_tokens: 0,
            completed: false,
            error: None,
            cached_tokens: accepted.cached_tokens,
        };
        (Box::new(trace), r.clone())
    }));

    // Wait for a serving slot. If the client leaves meanwhile, hyper drops this future: the
    // wait ends without taking a slot and the queued trace is recorded as abandoned.
    let slot = shared.admission.admit().await;
    let admitted = Instant::now();
    let mut trace = queued.0.take();
    if let Some((t, _)) = &mut trace {
        t.admitted = Some(admitted);
    }
    // The load knobs: prefill grows with the prompt, decoding with the requests served.
    let others = shared.admission.gauges().running().saturating_sub(1);
    let ttft = shared.ttft
        + Duration::from_nanos(
            (shared.ttft_per_prompt_token_ns * usage.prompt_tokens as f64) as u64,
        );
    let itl = shared.itl + Duration::from_nanos((shared.itl_per_running_ns * others as f64) as u64);
    let schedule = Schedule::new(
        admitted,
        ttft,
        itl,
        shared.ttft_jitter,
        shared.itl_jitter,
        shared.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    let tokens = accepted.output.tokens;
    // Streamed faults strike once half the tokens (after the role chunk) have gone out.
    let strike = match api {
        Api::Completions | Api::Generate | Api::GenerateStream | Api::Solido => tokens / 2,
        // The role chunk or the opening events come first.
        _ => 1 + tokens / 2,
    };
    let served = Served {
        received,
        prompt_tokens: usage.prompt_tokens,
        image_tokens: accepted.prompt.image_tokens,
        completion_tokens: usage.completion_tokens,
        first_token_seen: false,
    };
    let (body, content_type) = if accepted.stream {
        let finish = accepted.output.finish_reason;
        let (writer, tail) = match api {
            // These APIs always report usage.
            Api::Responses => (
                super::responses::writer(&header),
                super::responses::tail(&header, tokens, usage),
            ),
            Api::Messages => (
                super::messages::writer(&header, usage),
                super::messages::tail(usage, finish),
            ),
            // TGI's last token event ends its stream.
            Api::Generate | Api::GenerateStream => {
                (super::tgi::writer(tokens, finish), Bytes::new())
            }
            Api::Solido => (
                super::solido::writer(),
                Bytes::from_static(super::response::DONE_EVENT),
            ),
            Api::Chat | Api::Completions => {
                let writer = ChunkWriter::new(&header, finish);
                let tail = writer.tail(accepted.include_usage.then_some(usage));
                (writer, tail)
            }
        };
        let body = ScheduledBody::stream(writer, tokens, tail, schedule, trace);
        (body, "text/event-stream; charset=utf-8")
    } else {
        let full = response::full_body(&header, tokens, accepted.output.finish_reason, usage);
        (
            ScheduledBody::whole(full, tokens, schedule, trace),
            "application/json",
        )
    };
    let body = body.with_metrics(shared.metrics.clone(), served);
    let body = match fault {
        Some(f) => Body::new(SlotBody::new(
            FaultyBody::new(
                body,
                f,
                accepted.stream,
                if accepted.stream { strike } else { 0 },
                shared.stall,
            ),
            slot,
        )),
        None => Body::new(SlotBody::new(body, slot)),
    };
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(id) = x_request_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        resp.headers_mut().insert("x-request-id", id);
    }
    resp
}

/// A request's trace while it waits for a slot: recorded (never admitted, not completed) if
/// the wait is dropped because the client left.
struct QueuedTrace(Option<(Box<RequestTrace>, Recorder)>);

impl Drop for QueuedTrace {
    fn drop(&mut self) {
        if let Some((trace, recorder)) = self.0.take() {
            recorder.record(trace);
        }
    }
}

fn parse_chat(bytes: &[u8], shared: &Shared) -> Result<Accepted, String> {
    let req: ChatRequest<'_> =
        serde_json::from_slice(bytes).map_err(|e| format!("JSON decode error: {e}"))?;
    let messages = req.messages.as_deref().ok_or("messages: Field required")?;
    if messages.is_empty() {
        return Err("messages: List should have at least 1 item".into());
    }
    let prompt = chat_prompt_stats(messages, shared.chat_costs)?;
    let cached = shared
        .prefix_cache
        .as_ref()
        .map(|c| c.lookup_and_store(&prefix_cache::chat_ids(messages)));
    accept(req.model.as_deref(), prompt, &req.generation, shared).map(|a| Accepted {
        cached_tokens: cached,
        ..a
    })
}

fn parse_completion(bytes: &[u8], shared: &Shared) -> Result<Accepted, String> {
    let req: CompletionRequest<'_> =
        serde_json::from_slice(bytes).map_err(|e| format!("JSON decode error: {e}"))?;
    let prompt = req.prompt.as_ref().ok_or("prompt: Field required")?;
    let cached = shared
        .prefix_cache
        .as_ref()
        .map(|c| c.lookup_and_store(&prefix_cache::completion_ids(prompt)));
    let prompt = completion_prompt_stats(prompt);
    accept(req.model.as_deref(), prompt, &req.generation, shared).map(|a| Accepted {
        cached_tokens: cached,
        ..a
    })
}

fn accept(
    model: Option<&str>,
    prompt: PromptStats,
    generation: &GenerationParams,
    shared: &Shared,
) -> Result<Accepted, String> {
    let output =
        generation.output_plan_with_eos(&prompt, shared.max_model_len, shared.eos_ratio)?;
    Ok(Accepted {
        model: model.unwrap_or(&shared.model).to_owned(),
        prompt,
        output,
        stream: generation.stream(),
        include_usage: generation.include_usage(),
        cached_tokens: None,
    })
}

fn record_rejection(
    shared: &Shared,
    api: Api,
    received: Instant,
    (x_request_id, peer_port): (Option<String>, Option<u16>),
    status: u16,
    message: &str,
) {
    if let Some(r) = &shared.recorder {
        r.record(Box::new(RequestTrace {
            endpoint: api.as_str(),
            status,
            stream: false,
            model: String::new(),
            x_request_id,
            peer_port,
            received,
            admitted: None,
            first_token: None,
            last_token: None,
            text_tokens: 0,
            image_tokens: 0,
            template_tokens: 0,
            image_sizes: Vec::new(),
            roles: Vec::new(),
            output_tokens: 0,
            completed: true,
            cached_tokens: None,
            error: Some(message.to_owned()),
        }));
    }
}

/// "chatcmpl-" / "cmpl-" and 32 hex digits, unique per request and reproducible per seed.
fn response_id(api: Api, seed: u64, n: u64) -> String {
    let prefix = match api {
        Api::Chat => "chatcmpl-",
        Api::Completions => "cmpl-",
        Api::Responses => "resp_",
        Api::Messages => "msg_",
        Api::Generate | Api::GenerateStream => "gen-",
        Api::Solido => "rag-",
    };
    let a = splitmix64(seed ^ n);
    let b = splitmix64(a ^ n.rotate_left(32));
    format!("{prefix}{a:016x}{b:016x}")
}

fn json_response(status: StatusCode, body: Bytes) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn error_response(status: StatusCode, kind: &str, message: &str) -> Response {
    json_response(status, response::error_body(status.as_u16(), kind, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// Opens a connection and sends one POST with a JSON body; the response is not read.
    async fn send(addr: SocketAddr, path: &str, body: serde_json::Value) -> TcpStream {
        let body = body.to_string();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(head.as_bytes()).await.unwrap();
        tcp.write_all(body.as_bytes()).await.unwrap();
        tcp
    }

    /// Polls `cond` until it holds, failing after 5 s.
    async fn eventually(what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn chat_and_completions_share_the_slots_and_leavers_free_them() {
        let args = MockServerArgs {
            max_concurrency: Some(1),
            ttft: 20.0,
            itl: 10.0,
            ..MockServerArgs::in_process()
        };
        let server = super::super::start(args).await.unwrap();
        let (addr, load) = (server.addr(), server.load());
        let gauges = || (load.running(), load.waiting());

        // A long stream holds the only slot.
        let chat = |tokens: u64| {
            serde_json::json!({"messages": [{"role": "user", "content": "hi"}],
                               "max_tokens": tokens, "stream": true})
        };
        let long = send(addr, "/v1/chat/completions", chat(1000)).await;
        eventually("the stream to run", || gauges() == (1, 0)).await;
        // A completion queues behind it, then a chat request.
        let completion = serde_json::json!({"prompt": "hi", "max_tokens": 1});
        let leaver = send(addr, "/v1/completions", completion).await;
        eventually("the completion to queue", || gauges() == (1, 1)).await;
        let mut last = send(addr, "/v1/chat/completions", chat(1)).await;
        eventually("the chat request to queue", || gauges() == (1, 2)).await;

        // Health and model listing are not generation requests: they answer at once.
        for path in ["/health", "/v1/models"] {
            let mut tcp = TcpStream::connect(addr).await.unwrap();
            let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
            tcp.write_all(head.as_bytes()).await.unwrap();
            let mut buf = [0u8; 12];
            tokio::time::timeout(Duration::from_secs(2), tcp.read_exact(&mut buf))
                .await
                .unwrap_or_else(|_| panic!("{path} waited for a slot"))
                .unwrap();
            assert_eq!(&buf, b"HTTP/1.1 200", "{path}");
        }
        assert_eq!(gauges(), (1, 2));

        // The queued completion's client leaves: it drops out of the queue.
        drop(leaver);
        eventually("the leaver to drop out", || gauges() == (1, 1)).await;
        // The streaming client leaves: its slot goes to the chat request, which finishes.
        drop(long);
        let mut reply = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), async {
            let mut buf = [0u8; 4096];
            // The chunked body ends with a zero-length chunk.
            while !reply.ends_with(b"\r\n0\r\n\r\n") {
                let n = last.read(&mut buf).await.unwrap();
                assert!(n > 0, "connection closed early");
                reply.extend_from_slice(&buf[..n]);
            }
        })
        .await
        .expect("the queued request was served once the slot was freed");
        assert!(String::from_utf8_lossy(&reply).contains("data: [DONE]"));
        eventually("every slot to be free", || gauges() == (0, 0)).await;
        server.shutdown().await;
    }

    #[test]
    fn response_ids_are_unique_and_shaped() {
        let ids: std::collections::HashSet<String> =
            (0..1000).map(|n| response_id(Api::Chat, 7, n)).collect();
        assert_eq!(ids.len(), 1000);
        let id = response_id(Api::Completions, 0, 3);
        assert!(id.starts_with("cmpl-") && id.len() == 5 + 32, "{id}");
        assert_eq!(response_id(Api::Chat, 1, 2), response_id(Api::Chat, 1, 2));
    }
}
