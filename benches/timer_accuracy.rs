//! Accuracy and CPU cost of `aiperf::timer` against tokio's timer, measured in the same run,
//! and the mock server's TTFT / ITL with `--ttft 20 --itl 5` (which uses `aiperf::timer`).
//!
//! 1. Lateness (actual wake - deadline) of `BENCH_SLEEPS` (default 2000) sleeps with
//!    deadlines 1-10 ms ahead, at 1 and at 500 concurrent sleepers, for both timers.
//! 2. Process CPU time (getrusage) while 500 sleepers each sleep 5 ms in a loop for 2 s, for
//!    both timers, plus the precise-timer thread's own CPU, busy and idle.
//! 3. The mock server started in process, read by a raw hyper client: TTFT, time to second
//!    token and mean ITL per request, at concurrency 1 and 64 (`BENCH_MOCK_CONCURRENCY`).
//!
//! Run: `cargo bench --bench timer_accuracy`. `cargo test --benches` runs a short smoke version.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use tokio::net::TcpStream;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A comma-separated list of numbers; an empty value gives an empty list.
fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(v) => v.split(',').filter_map(|c| c.trim().parse().ok()).collect(),
        Err(_) => default.to_vec(),
    }
}

fn runtime(threads: usize, name: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .build()
        .unwrap()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Tokio,
    Precise,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Tokio => "tokio::time::sleep_until",
            Kind::Precise => "aiperf::timer::sleep_until",
        }
    }

    async fn sleep_until(self, deadline: Instant) {
        match self {
            Kind::Tokio => tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await,
            Kind::Precise => aiperf::api::sleep_until(deadline).await,
        }
    }
}

/// numpy-style linear-interpolation percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Lateness in microseconds of `total` sleeps split over `sleepers` concurrent tasks.
fn lateness(rt: &tokio::runtime::Runtime, kind: Kind, total: usize, sleepers: usize) -> Vec<f64> {
    let per_task = total.div_ceil(sleepers);
    let late = rt.block_on(async move {
        let tasks: Vec<_> = (0..sleepers)
            .map(|t| {
                tokio::spawn(async move {
                    let mut rng = ChaCha8Rng::seed_from_u64(t as u64);
                    let mut late = Vec::with_capacity(per_task);
                    for _ in 0..per_task {
                        let wait = Duration::from_micros(rng.random_range(1_000..=10_000));
                        let deadline = Instant::now() + wait;
                        kind.sleep_until(deadline).await;
                        let now = Instant::now();
                        assert!(now >= deadline, "{} woke early", kind.name());
                        late.push((now - deadline).as_secs_f64() * 1e6);
                    }
                    late
                })
            })
            .collect();
        let mut all = Vec::with_capacity(total);
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    });
    sorted(late)
}

/// User + system CPU time of the whole process.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn process_cpu() -> Option<Duration> {
    #[repr(C)]
    struct Timeval {
        sec: i64,
        usec: i64,
    }
    #[repr(C)]
    struct Rusage {
        utime: Timeval,
        stime: Timeval,
        rest: [i64; 14],
    }
    unsafe extern "C" {
        fn getrusage(who: std::ffi::c_int, usage: *mut Rusage) -> std::ffi::c_int;
    }
    const RUSAGE_SELF: std::ffi::c_int = 0;
    let mut u = Rusage {
        utime: Timeval { sec: 0, usec: 0 },
        stime: Timeval { sec: 0, usec: 0 },
        rest: [0; 14],
    };
    // SAFETY: `u` matches struct rusage on 64-bit Linux and outlives the call.
    if unsafe { getrusage(RUSAGE_SELF, &mut u) } != 0 {
        return None;
    }
    let us = |t: &Timeval| t.sec as u64 * 1_000_000 + t.usec as u64;
    Some(Duration::from_micros(us(&u.utime) + us(&u.stime)))
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn process_cpu() -> Option<Duration> {
    None
}

/// CPU time of this process's threads whose name starts with `prefix`, from the
/// nanosecond run-time counter in `/proc/self/task/*/schedstat`.
fn thread_cpu(prefix: &str) -> Option<Duration> {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).ok()?;
        if comm.starts_with(prefix) {
            let stat = std::fs::read_to_string(path.join("schedstat")).ok()?;
            ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
        }
    }
    Some(Duration::from_nanos(ns))
}

fn pct_of_core(cpu: Option<Duration>, wall: Duration) -> String {
    match cpu {
        Some(c) => format!("{:5.1}%", c.as_secs_f64() / wall.as_secs_f64() * 100.0),
        None => "  n/a".into(),
    }
}

/// `sleepers` tasks each sleeping `period` in a loop for `run`; returns (sleeps done,
/// process CPU, precise-timer thread CPU) over the run.
fn cpu_load(
    rt: &tokio::runtime::Runtime,
    kind: Kind,
    sleepers: usize,
    period: Duration,
    run: Duration,
) -> (usize, Option<Duration>, Option<Duration>) {
    let (cpu0, timer0) = (process_cpu(), thread_cpu("precise-timer"));
    let end = Instant::now() + run;
    let done = rt.block_on(async move {
        let tasks: Vec<_> = (0..sleepers)
            .map(|t| {
                tokio::spawn(async move {
                    // Stagger the starts so deadlines spread over the period, as in a server.
                    let offset = period.mul_f64(t as f64 / sleepers as f64);
                    kind.sleep_until(Instant::now() + offset).await;
                    let mut n = 0;
                    while Instant::now() < end {
                        kind.sleep_until(Instant::now() + period).await;
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let mut n = 0;
        for t in tasks {
            n += t.await.unwrap();
        }
        n
    });
    let diff = |a: Option<Duration>, b: Option<Duration>| Some(b? - a?);
    (
        done,
        diff(cpu0, process_cpu()),
        diff(timer0, thread_cpu("precise-timer")),
    )
}

/// Timing of one streamed response, in ms.
struct StreamTiming {
    ttft: f64,
    ttst: f64,
    itl: f64,
}

const MOCK_TOKENS: u64 = 50;

fn mock_request() -> Bytes {
    let body = serde_json::json!({
        "model": "mock-model",
        "messages": [{"role": "user", "content": "Describe the weather in one short sentence."}],
        "max_completion_tokens": MOCK_TOKENS,
        "stream": true,
    });
    Bytes::from(body.to_string())
}

/// One keep-alive connection sending `n` streamed requests one after another. SSE events
/// are counted by their "\n\n" terminators: event 0 is the role chunk, events 1..=tokens
/// carry the tokens; each is stamped with the arrival of the frame that completes it.
async fn mock_worker(addr: SocketAddr, n: usize) -> Vec<StreamTiming> {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        sender.ready().await.unwrap();
        let req = Request::post("/v1/chat/completions")
            .header(hyper::header::HOST, "127.0.0.1")
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(mock_request()))
            .unwrap();
        let sent = Instant::now();
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        let mut token_times = Vec::with_capacity(MOCK_TOKENS as usize);
        let mut events = 0u64;
        while let Some(frame) = body.frame().await {
            let now = Instant::now();
            let Ok(data) = frame.unwrap().into_data() else {
                continue;
            };
            for _ in memchr::memmem::find_iter(&data, b"\n\n") {
                if (1..=MOCK_TOKENS).contains(&events) {
                    token_times.push(now);
                }
                events += 1;
            }
        }
        assert_eq!(token_times.len(), MOCK_TOKENS as usize);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        out.push(StreamTiming {
            ttft: ms(token_times[0] - sent),
            ttst: ms(token_times[1] - token_times[0]),
            itl: ms(token_times[token_times.len() - 1] - token_times[0]) / (MOCK_TOKENS - 1) as f64,
        });
    }
    out
}

fn mock_timings(
    client: &tokio::runtime::Runtime,
    addr: SocketAddr,
    concurrency: usize,
    requests: usize,
) -> Vec<StreamTiming> {
    let per_worker = requests.div_ceil(concurrency);
    client.block_on(async {
        let workers: Vec<_> = (0..concurrency)
            .map(|_| tokio::spawn(mock_worker(addr, per_worker)))
            .collect();
        let mut all = Vec::new();
        for w in workers {
            all.extend(w.await.unwrap());
        }
        all
    })
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this without it and
    // expects a quick smoke run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let sleeps = env_usize("BENCH_SLEEPS", if quick { 100 } else { 2000 });
    let workers = env_usize("BENCH_WORKERS", 2);
    let rt = runtime(workers, "bench-rt");

    println!(
        "timer_accuracy: lateness of {sleeps} sleeps, deadlines 1-10 ms ahead, {workers} runtime workers (us)"
    );
    for sleepers in env_list("BENCH_SLEEPERS", &[1, 500]) {
        let mut p50 = [0.0; 2];
        for (i, kind) in [Kind::Tokio, Kind::Precise].into_iter().enumerate() {
            let late = lateness(&rt, kind, sleeps, sleepers.min(sleeps));
            p50[i] = percentile(&late, 50.0);
            println!(
                "  {sleepers:>3} sleepers  {:<27} p50 {:>7.1}  p99 {:>7.1}  max {:>7.1}",
                kind.name(),
                p50[i],
                percentile(&late, 99.0),
                late[late.len() - 1],
            );
        }
        println!(
            "  {sleepers:>3} sleepers  p50 ratio tokio/precise: {:.1}",
            p50[0] / p50[1]
        );
    }

    let run = Duration::from_millis(if quick { 200 } else { 2000 });
    let period = Duration::from_millis(5);
    println!("CPU while 500 sleepers each sleep {period:?} in a loop for {run:?} (% of one core)");
    for kind in [Kind::Tokio, Kind::Precise] {
        let (done, cpu, timer_cpu) = cpu_load(&rt, kind, 500, period, run);
        println!(
            "  {:<27} process {}  precise-timer thread {}  ({done} sleeps)",
            kind.name(),
            pct_of_core(cpu, run),
            pct_of_core(timer_cpu, run),
        );
    }
    let idle = Duration::from_millis(if quick { 100 } else { 1000 });
    let before = thread_cpu("precise-timer");
    std::thread::sleep(idle);
    let idle_cpu = before.zip(thread_cpu("precise-timer")).map(|(a, b)| b - a);
    println!(
        "  idle precise-timer thread over {idle:?}: {:?}",
        idle_cpu.unwrap_or_default()
    );
    drop(rt);

    let server = runtime(1, "bench-srv");
    let client = runtime(1, "bench-cli");
    let mut args = aiperf::api::MockServerArgs::fast_defaults();
    (args.fast, args.ttft, args.itl) = (false, 20.0, 5.0);
    let mock = server
        .block_on(aiperf::api::start_mock_server(args))
        .unwrap();
    let requests = env_usize("BENCH_MOCK_REQUESTS", if quick { 8 } else { 256 });
    let concurrencies = env_list("BENCH_MOCK_CONCURRENCY", &[1, 64]);
    println!(
        "mock server --ttft 20 --itl 5, {MOCK_TOKENS} tokens per request, raw hyper client (ms)"
    );
    for concurrency in concurrencies {
        // Concurrency 1 runs a quarter of the requests: they are sequential.
        let n = if concurrency == 1 {
            (requests / 4).max(4)
        } else {
            requests
        };
        let cpu0 = (thread_cpu("bench-srv"), thread_cpu("precise-timer"));
        let started = Instant::now();
        let t = mock_timings(&client, mock.addr(), concurrency, n);
        let wall = started.elapsed();
        let cpu = |prefix, before: Option<Duration>| Some(thread_cpu(prefix)? - before?);
        let ttft = sorted(t.iter().map(|s| s.ttft).collect());
        let ttst = sorted(t.iter().map(|s| s.ttst).collect());
        let itl: Vec<f64> = t.iter().map(|s| s.itl).collect();
        println!(
            "  concurrency {concurrency:>3} ({} requests): TTFT p50 {:.3} p99 {:.3}  \
             time to 2nd token p50 {:.3}  ITL mean {:.4}  server CPU {} timer thread {}",
            t.len(),
            percentile(&ttft, 50.0),
            percentile(&ttft, 99.0),
            percentile(&ttst, 50.0),
            mean(&itl),
            pct_of_core(cpu("bench-srv", cpu0.0), wall),
            pct_of_core(cpu("precise-timer", cpu0.1), wall),
        );
    }
    server.block_on(mock.shutdown());
}
