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

use super::body::{Jitter, Schedule, ScheduledBody};
use super::fault::{Fault, FaultRates, FaultyBody};
use super::recorder::{self, Recorder, RequestTrace};
use super::request::{
    ChatCosts, ChatRequest, CompletionRequest, GenerationParams, OutputPlan, PromptStats,
    chat_prompt_stats, completion_prompt_stats,
};
use super::response::{self, Api, ChunkWriter, ResponseHeader, UsageCounts};
use super::{MockServer, MockServerArgs};
use crate::clock::Clock;
use crate::hash::splitmix64;

/// Everything handlers share, fixed at start.
struct Shared {
    ttft: Duration,
    itl: Duration,
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
}

pub(super) async fn start(args: MockServerArgs) -> anyhow::Result<MockServer> {
    let (ttft, itl) = args.delays()?;
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
    })
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/health", get(health))
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
}

async fn handle(shared: Arc<Shared>, req: Request, api: Api) -> Response {
    let (parts, body) = req.into_parts();
    let x_request_id = parts
        .headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let peer_port = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0.port());
    let bytes = axum::body::to_bytes(body, usize::MAX).await;
    // The latency schedule starts once the whole request is in.
    let received = Instant::now();
    let parsed = match &bytes {
        Ok(bytes) => match api {
            Api::Chat => parse_chat(bytes, &shared),
            Api::Completions => parse_completion(bytes, &shared),
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
    };
    let schedule = Schedule::new(
        received,
        shared.ttft,
        shared.itl,
        shared.ttft_jitter,
        shared.itl_jitter,
        shared.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    let trace = shared.recorder.as_ref().map(|r| {
        let trace = RequestTrace {
            endpoint: api.as_str(),
            status: 200,
            stream: accepted.stream,
            model: header.model.clone(),
            x_request_id: x_request_id.clone(),
            peer_port,
            received,
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
        };
        (Box::new(trace), r.clone())
    });

    let tokens = accepted.output.tokens;
    // Streamed faults strike once half the tokens (after the role chunk) have gone out.
    let strike = match api {
        Api::Chat => 1 + tokens / 2,
        Api::Completions => tokens / 2,
    };
    let (body, content_type) = if accepted.stream {
        let writer = ChunkWriter::new(&header, accepted.output.finish_reason);
        let tail = writer.tail(accepted.include_usage.then_some(usage));
        let body = ScheduledBody::stream(writer, tokens, tail, schedule, trace);
        (body, "text/event-stream; charset=utf-8")
    } else {
        let full = response::full_body(&header, tokens, accepted.output.finish_reason, usage);
        (
            ScheduledBody::whole(full, tokens, schedule, trace),
            "application/json",
        )
    };
    let body = match fault {
        Some(f) => Body::new(FaultyBody::new(
            body,
            f,
            accepted.stream,
            if accepted.stream { strike } else { 0 },
            shared.stall,
        )),
        None => Body::new(body),
    };
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(id) = x_request_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        resp.headers_mut().insert("x-request-id", id);
    }
    resp
}

fn parse_chat(bytes: &[u8], shared: &Shared) -> Result<Accepted, String> {
    let req: ChatRequest<'_> =
        serde_json::from_slice(bytes).map_err(|e| format!("JSON decode error: {e}"))?;
    let messages = req.messages.as_deref().ok_or("messages: Field required")?;
    if messages.is_empty() {
        return Err("messages: List should have at least 1 item".into());
    }
    let prompt = chat_prompt_stats(messages, shared.chat_costs)?;
    accept(req.model.as_deref(), prompt, &req.generation, shared)
}

fn parse_completion(bytes: &[u8], shared: &Shared) -> Result<Accepted, String> {
    let req: CompletionRequest<'_> =
        serde_json::from_slice(bytes).map_err(|e| format!("JSON decode error: {e}"))?;
    let prompt = req.prompt.as_ref().ok_or("prompt: Field required")?;
    let prompt = completion_prompt_stats(prompt);
    accept(req.model.as_deref(), prompt, &req.generation, shared)
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
            first_token: None,
            last_token: None,
            text_tokens: 0,
            image_tokens: 0,
            template_tokens: 0,
            image_sizes: Vec::new(),
            roles: Vec::new(),
            output_tokens: 0,
            completed: true,
            error: Some(message.to_owned()),
        }));
    }
}

/// "chatcmpl-" / "cmpl-" and 32 hex digits, unique per request and reproducible per seed.
fn response_id(api: Api, seed: u64, n: u64) -> String {
    let prefix = match api {
        Api::Chat => "chatcmpl-",
        Api::Completions => "cmpl-",
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
