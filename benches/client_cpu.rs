//! Client CPU per streamed request: `aiperf profile` against a minimal raw-hyper client, both
//! driving the same standalone `aiperf mock-server --fast --workers 1` process in the same run.
//!
//! The raw client (this process) keeps one connection per worker
//! (`hyper::client::conn::http1`), sends a streamed chat request of `TOKENS` output tokens,
//! takes a timestamp as each body frame arrives and does nothing else. Its CPU is this
//! process's `getrusage(RUSAGE_SELF)` over the window. `aiperf profile` gets the same
//! concurrency, token count and request count (`--no-server-metrics --no-gpu-telemetry`); its
//! CPU is the child's whole `getrusage(RUSAGE_CHILDREN)` share (start-up and exports
//! included), and the JSON export's `client_overhead` (the sending window only) is printed
//! beside it. Each aiperf round runs between two raw runs, and its ratio takes the mean of
//! those two as the reference; medians are reported.
//!
//! `cargo bench --bench client_cpu`. Knobs (environment): `BENCH_REQUESTS` (20000),
//! `BENCH_CONCURRENCY` (64), `BENCH_ROUNDS` (5), `BENCH_CLIENT_THREADS` (the raw client's
//! runtime workers; default: one per core, as `aiperf profile` has), `BENCH_AIPERF_BIN` (the
//! `aiperf` binary to measure; default: the one cargo built with this bench).
//! Without `--bench` (as `cargo test --benches` runs it) a 300-request smoke round.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

const TOKENS: u64 = 16;
const ISL: u64 = 10;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `getrusage` user + system time, in ns, of this process (`RUSAGE_SELF`) or of its waited-for
/// children (`RUSAGE_CHILDREN`).
fn rusage_cpu_ns(who: i32) -> u64 {
    #[repr(C)]
    struct RUsage([i64; 18]);
    unsafe extern "C" {
        fn getrusage(who: std::ffi::c_int, usage: *mut RUsage) -> std::ffi::c_int;
    }
    let mut usage = RUsage([0; 18]);
    // SAFETY: `usage` is a writable buffer of the size and layout the kernel fills.
    assert_eq!(unsafe { getrusage(who, &mut usage) }, 0);
    let [user_s, user_us, sys_s, sys_us, ..] = usage.0;
    ((user_s + sys_s) * 1_000_000 + user_us + sys_us) as u64 * 1_000
}
const RUSAGE_SELF: i32 = 0;
const RUSAGE_CHILDREN: i32 = -1;

/// utime + stime of another process, in ns (clock ticks of 10 ms).
fn process_cpu_ns(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks * 10_000_000
}

fn start_mock(bin: &str) -> (Child, String) {
    let mut mock = Command::new(bin)
        .args(["mock-server", "--port", "0", "--fast", "--workers", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start aiperf mock-server");
    let mut line = String::new();
    BufReader::new(mock.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("mock address");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("mock url")
        .to_string();
    (mock, url)
}

/// A streamed chat request about the size of the one `aiperf profile --isl 10` sends.
fn request_body() -> Bytes {
    let body = serde_json::json!({
        "model": "mock-model",
        "messages": [{"role": "user", "content": "the of and to a in is you that it"}],
        "max_completion_tokens": TOKENS,
        "ignore_eos": true,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    Bytes::from(body.to_string())
}

/// One connection sending requests until `remaining` runs out; every body frame is stamped on
/// arrival into a reused buffer. Returns the number of frames of the last response and
/// whether it ended with `[DONE]`.
async fn raw_worker(addr: SocketAddr, body: Bytes, remaining: Arc<AtomicUsize>) -> (usize, bool) {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut stamps: Vec<Instant> = Vec::with_capacity(64);
    let mut last = (0, false);
    while remaining
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
    {
        stamps.clear();
        sender.ready().await.unwrap();
        let req = Request::post("/v1/chat/completions")
            .header(hyper::header::HOST, "127.0.0.1")
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(body.clone()))
            .unwrap();
        let start = Instant::now();
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        let mut done = false;
        while let Some(frame) = body.frame().await {
            stamps.push(Instant::now());
            if let Ok(data) = frame.unwrap().into_data() {
                done = data.ends_with(b"data: [DONE]\n\n");
            }
        }
        std::hint::black_box((start, &stamps));
        last = (stamps.len(), done);
    }
    last
}

struct Figures {
    cpu_us_per_req: f64,
    /// `aiperf profile` only: its own `client_overhead.cpu_per_request_us` (sending window).
    window_us_per_req: Option<f64>,
    req_per_s: f64,
    mock_cpu_us_per_req: f64,
}

fn drive_raw(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    mock_pid: u32,
    n: usize,
    concurrency: usize,
) -> Figures {
    let body = request_body();
    let remaining = Arc::new(AtomicUsize::new(n));
    let mock_before = process_cpu_ns(mock_pid);
    let cpu_before = rusage_cpu_ns(RUSAGE_SELF);
    let started = Instant::now();
    let results = rt.block_on(async {
        let workers: Vec<_> = (0..concurrency)
            .map(|_| tokio::spawn(raw_worker(addr, body.clone(), remaining.clone())))
            .collect();
        let mut out = Vec::new();
        for w in workers {
            out.push(w.await.unwrap());
        }
        out
    });
    let wall = started.elapsed();
    let cpu = rusage_cpu_ns(RUSAGE_SELF) - cpu_before;
    let mock_cpu = process_cpu_ns(mock_pid) - mock_before;
    for (frames, done) in results.into_iter().filter(|r| r.0 > 0) {
        assert!(done, "a raw stream did not end with [DONE]");
        assert!(frames >= TOKENS as usize, "{frames} frames");
    }
    Figures {
        cpu_us_per_req: cpu as f64 / 1e3 / n as f64,
        window_us_per_req: None,
        req_per_s: n as f64 / wall.as_secs_f64(),
        mock_cpu_us_per_req: mock_cpu as f64 / 1e3 / n as f64,
    }
}

fn drive_aiperf(bin: &str, url: &str, mock_pid: u32, n: usize, concurrency: usize) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let mock_before = process_cpu_ns(mock_pid);
    let cpu_before = rusage_cpu_ns(RUSAGE_CHILDREN);
    let (isl, osl) = (ISL.to_string(), TOKENS.to_string());
    let out = Command::new(bin)
        .args(["profile", "--model", "mock-model", "--tokenizer", "builtin"])
        .args(["--endpoint-type", "chat", "--streaming", "--url", url])
        .args([
            "--isl",
            &isl,
            "--osl",
            &osl,
            "--extra-inputs",
            "ignore_eos:true",
        ])
        .args(["--request-count", &n.to_string()])
        .args(["--concurrency", &concurrency.to_string()])
        .args(["--no-server-metrics", "--no-gpu-telemetry"])
        .args(["--artifact-dir", dir.path().to_str().unwrap()])
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .expect("run aiperf profile");
    let cpu = rusage_cpu_ns(RUSAGE_CHILDREN) - cpu_before;
    let mock_cpu = process_cpu_ns(mock_pid) - mock_before;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("profile_export_aiperf.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let count = v["request_count"]["avg"].as_f64().unwrap_or(0.0) as usize;
    assert_eq!(count, n, "aiperf completed {count} of {n} requests");
    let osl_avg = v["output_sequence_length"]["avg"].as_f64().unwrap();
    assert_eq!(osl_avg, TOKENS as f64, "output tokens per request");
    Figures {
        cpu_us_per_req: cpu as f64 / 1e3 / n as f64,
        window_us_per_req: v["client_overhead"]["cpu_per_request_us"].as_f64(),
        req_per_s: v["request_throughput"]["avg"].as_f64().unwrap_or(0.0),
        mock_cpu_us_per_req: mock_cpu as f64 / 1e3 / n as f64,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this without it and expects
    // a quick smoke run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n = env_usize("BENCH_REQUESTS", if quick { 300 } else { 20_000 });
    let concurrency = env_usize("BENCH_CONCURRENCY", 64);
    let rounds = env_usize("BENCH_ROUNDS", if quick { 1 } else { 5 });
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let threads = env_usize("BENCH_CLIENT_THREADS", cores);
    let bin = std::env::var("BENCH_AIPERF_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_aiperf").to_string());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .unwrap();

    let (mut mock, url) = start_mock(&bin);
    let addr: SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    // Warm the mock (its tokenizer, the page cache of the binary) before measuring.
    drive_raw(&rt, addr, mock.id(), concurrency * 4, concurrency);
    // Raw, aiperf, raw, aiperf, ..., raw: each aiperf round sits between two raw runs.
    let mut raw = vec![drive_raw(&rt, addr, mock.id(), n, concurrency)];
    let mut ours = Vec::new();
    for _ in 0..rounds {
        ours.push(drive_aiperf(&bin, &url, mock.id(), n, concurrency));
        std::thread::sleep(Duration::from_millis(200));
        raw.push(drive_raw(&rt, addr, mock.id(), n, concurrency));
    }
    let _ = mock.kill();
    let _ = mock.wait();

    let med = |v: &[Figures], f: fn(&Figures) -> f64| median(v.iter().map(f).collect());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "client_cpu: {n} streamed chat requests x {TOKENS} tokens, concurrency {concurrency}, \
         {rounds} rounds (median; raw runs before, between and after), \
         mock-server --fast --workers 1 (separate process); \
         load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let rounds_of = |v: &[Figures]| {
        v.iter()
            .map(|f| format!("{:.1}", f.cpu_us_per_req))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (r, o) = (
        med(&raw, |f| f.cpu_us_per_req),
        med(&ours, |f| f.cpu_us_per_req),
    );
    println!(
        "  raw hyper client ({threads} threads): {r:>7.1} us CPU/req  (runs: {})  {:>7.0} req/s  mock {:.1} us/req",
        rounds_of(&raw),
        med(&raw, |f| f.req_per_s),
        med(&raw, |f| f.mock_cpu_us_per_req),
    );
    println!(
        "  aiperf profile (whole process) : {o:>7.1} us CPU/req  (rounds: {})  {:>7.0} req/s  mock {:.1} us/req",
        rounds_of(&ours),
        med(&ours, |f| f.req_per_s),
        med(&ours, |f| f.mock_cpu_us_per_req),
    );
    let window: Vec<f64> = ours.iter().filter_map(|f| f.window_us_per_req).collect();
    if !window.is_empty() {
        println!(
            "  aiperf client_overhead (sending window only): {:.1} us CPU/req",
            median(window)
        );
    }
    // Each aiperf round against the mean of the raw runs just before and after it: the
    // host's drift over the round cancels to first order, and two raw runs halve the
    // variance of the reference (a single 20,000-request raw run moves by +-15%).
    let paired: Vec<f64> = raw
        .windows(2)
        .zip(&ours)
        .map(|(r, o)| 2.0 * o.cpu_us_per_req / (r[0].cpu_us_per_req + r[1].cpu_us_per_req))
        .collect();
    let per_round = paired
        .iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "  ratio aiperf/raw: {:.2} (medians); per round {per_round}, median {:.2}",
        o / r,
        median(paired)
    );
}
