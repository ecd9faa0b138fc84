//! Throughput of the built-in mock server against a minimal raw-hyper SSE server that sends
//! the same bytes apart from each chunk's `id` and `created`, measured in the same run.
//!
//! Both servers run in-process on their own tokio runtime (`BENCH_SERVER_THREADS`, default 1)
//! and are driven by a raw hyper http1 client on another runtime (`BENCH_CLIENT_THREADS`,
//! default 1): `BENCH_CONCURRENCY` workers (default 64), one keep-alive connection each, send
//! `BENCH_REQUESTS` (default 50000) streamed chat requests of 16 output tokens. Rounds
//! alternate between the servers (`BENCH_ROUNDS`, default 3); the median is reported.
//!
//! Run: `cargo bench --bench mock_throughput`

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aiperf::api::{
    Api, ChatCosts, ChatRequest, ChunkWriter, DEFAULT_CHAT_TEMPLATE_TOKENS, FinishReason,
    ResponseHeader, UsageCounts, chat_prompt_stats,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

const TOKENS: u64 = 16;
const PROMPT: &str = "Describe the weather in one short sentence.";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn runtime(threads: usize, name: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .build()
        .unwrap()
}

fn request_body() -> Bytes {
    let body = serde_json::json!({
        "model": "mock-model",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_completion_tokens": TOKENS,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    Bytes::from(body.to_string())
}

/// Prompt tokens of `body` as the mock counts them, with its own parser and counter
/// (o200k_base text tokens). Counted once: the reference does not parse requests.
fn prompt_tokens(body: &[u8]) -> u64 {
    let request: ChatRequest = serde_json::from_slice(body).unwrap();
    let messages = request.messages.as_deref().unwrap_or_default();
    let costs = ChatCosts {
        remote_image_tokens: 0,
        template_tokens_per_message: DEFAULT_CHAT_TEMPLATE_TOKENS,
    };
    chat_prompt_stats(messages, costs).unwrap().prompt_tokens()
}

/// The frames the mock sends for one request, rendered by the mock's own formatter.
fn reference_frames() -> Vec<Bytes> {
    let header = ResponseHeader {
        api: Api::Chat,
        id: format!("chatcmpl-{}", "0".repeat(32)),
        created: 1_800_000_000,
        model: "mock-model".into(),
    };
    let w = ChunkWriter::new(&header, FinishReason::Length);
    let mut frames = vec![w.role_chunk().unwrap()];
    frames.extend((0..TOKENS).map(|i| w.token_chunk(i, i + 1 == TOKENS)));
    frames.push(w.tail(Some(UsageCounts {
        prompt_tokens: prompt_tokens(&request_body()),
        completion_tokens: TOKENS,
        cached_tokens: None,
    })));
    frames
}

/// `body` with every `id` and `created` value blanked: the only bytes in which the mock's
/// responses differ from the reference's (and from each other).
fn masked(body: &[u8]) -> String {
    let mut s = String::from_utf8_lossy(body).into_owned();
    for key in ["\"id\":\"", "\"created\":"] {
        let mut from = 0;
        while let Some(i) = s[from..].find(key) {
            let start = from + i + key.len();
            let end = start + s[start..].find([',', '"']).unwrap();
            s.replace_range(start..end, "_");
            from = start;
        }
    }
    s
}

/// A minimal SSE server on raw hyper: reads the request body, streams fixed frames.
async fn start_reference() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let frames = Arc::new(reference_frames());
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            stream.set_nodelay(true).unwrap();
            let frames = frames.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let frames = frames.clone();
                        async move {
                            req.into_body().collect().await?;
                            let stream = futures_util::stream::iter(
                                frames
                                    .iter()
                                    .cloned()
                                    .map(|b| Ok::<_, Infallible>(Frame::data(b)))
                                    .collect::<Vec<_>>(),
                            );
                            let mut resp = Response::new(StreamBody::new(stream));
                            resp.headers_mut().insert(
                                hyper::header::CONTENT_TYPE,
                                "text/event-stream; charset=utf-8".parse().unwrap(),
                            );
                            Ok::<_, hyper::Error>(resp)
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// One keep-alive connection sending requests until `remaining` runs out. Returns the bytes
/// of the last response body for checking.
async fn worker(addr: SocketAddr, body: Bytes, remaining: Arc<AtomicUsize>) -> Bytes {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut last = Bytes::new();
    while remaining
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
    {
        sender.ready().await.unwrap();
        let req = Request::post("/v1/chat/completions")
            .header(hyper::header::HOST, "127.0.0.1")
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(body.clone()))
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        let mut collected = Vec::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.unwrap().into_data() {
                collected.extend_from_slice(&data);
            }
        }
        last = Bytes::from(collected);
    }
    last
}

/// CPU time (user + system) of this process's threads whose name starts with `prefix`.
fn thread_cpu(prefix: &str) -> Option<Duration> {
    let ticks_per_sec = 100.0; // USER_HZ on Linux
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).ok()?;
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).ok()?;
        // Fields after the ")" that closes the command name; utime and stime are 14 and 15.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        ticks += fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    }
    Some(Duration::from_secs_f64(ticks as f64 / ticks_per_sec))
}

struct Measurement {
    req_per_s: f64,
    server_cpu_us_per_req: Option<f64>,
    last_body: Bytes,
}

fn drive(
    client: &tokio::runtime::Runtime,
    addr: SocketAddr,
    n: usize,
    concurrency: usize,
) -> Measurement {
    let body = request_body();
    let cpu_before = thread_cpu("bench-srv");
    let remaining = Arc::new(AtomicUsize::new(n));
    let started = Instant::now();
    let last_body = client.block_on(async {
        let workers: Vec<_> = (0..concurrency)
            .map(|_| tokio::spawn(worker(addr, body.clone(), remaining.clone())))
            .collect();
        let mut last = Bytes::new();
        for w in workers {
            let b = w.await.unwrap();
            if !b.is_empty() {
                last = b;
            }
        }
        last
    });
    let elapsed = started.elapsed();
    let server_cpu_us_per_req = match (cpu_before, thread_cpu("bench-srv")) {
        (Some(a), Some(b)) => Some((b - a).as_secs_f64() * 1e6 / n as f64),
        _ => None,
    };
    Measurement {
        req_per_s: n as f64 / elapsed.as_secs_f64(),
        server_cpu_us_per_req,
        last_body,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this with no such flag and
    // expects a quick smoke run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n = env_usize("BENCH_REQUESTS", if quick { 500 } else { 50_000 });
    let concurrency = env_usize("BENCH_CONCURRENCY", 64);
    let rounds = env_usize("BENCH_ROUNDS", if quick { 1 } else { 3 });
    let server_rt = runtime(env_usize("BENCH_SERVER_THREADS", 1), "bench-srv");
    let client_rt = runtime(env_usize("BENCH_CLIENT_THREADS", 1), "bench-cli");

    let mock = server_rt
        .block_on(aiperf::api::start_mock_server(
            aiperf::api::MockServerArgs::fast_defaults(),
        ))
        .unwrap();
    let reference = server_rt.block_on(start_reference());

    // Warm up both and check they send the same bytes, ids and `created` aside.
    let warm = (n / 10).max(concurrency);
    let a = drive(&client_rt, mock.addr(), warm, concurrency);
    let b = drive(&client_rt, reference, warm, concurrency);
    assert!(a.last_body.ends_with(b"data: [DONE]\n\n"));
    assert_eq!(
        masked(&a.last_body),
        masked(&b.last_body),
        "servers send different bytes"
    );

    let (mut mock_rps, mut ref_rps, mut mock_cpu, mut ref_cpu) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let m = drive(&client_rt, mock.addr(), n, concurrency);
        let r = drive(&client_rt, reference, n, concurrency);
        mock_rps.push(m.req_per_s);
        ref_rps.push(r.req_per_s);
        mock_cpu.extend(m.server_cpu_us_per_req);
        ref_cpu.extend(r.server_cpu_us_per_req);
    }
    let (m, r) = (median(mock_rps.clone()), median(ref_rps.clone()));
    println!(
        "mock_throughput: {n} streamed chat requests x {TOKENS} tokens, concurrency {concurrency}, \
         {rounds} rounds (median)"
    );
    let cpu = |v: &Vec<f64>| {
        if v.is_empty() {
            "n/a".to_string()
        } else {
            format!("{:.1} us", median(v.clone()))
        }
    };
    println!(
        "  aiperf mock-server : {m:>9.0} req/s  (rounds: {mock_rps:.0?})  server CPU/req {}",
        cpu(&mock_cpu)
    );
    println!(
        "  raw hyper reference: {r:>9.0} req/s  (rounds: {ref_rps:.0?})  server CPU/req {}",
        cpu(&ref_cpu)
    );
    println!("  ratio mock/reference: {:.2}", m / r);
    server_rt.block_on(mock.shutdown());
}
