//! What the live views cost the measurement: `aiperf profile --ui-type dashboard` (drawn
//! into a real pseudo-terminal made by util-linux `script`), `--prometheus-port` (scraped
//! once a second) and `--otel-url` (pushed every 2 s to a receiver in this process that
//! answers 200 and does nothing else) against `--ui-type none` in the same pseudo-terminal,
//! alternated in the same run against one `aiperf mock-server --fast --workers 1` process.
//!
//! - CPU: streamed chat requests at concurrency 64 as fast as the client goes (about 20k
//!   req/s on 2 cores); the figure is the JSON export's `client_overhead.cpu_per_request_us`
//!   (the whole client process over the sending window, the dashboard's thread included).
//!   Each dashboard round is paired with the mean of the `none` rounds before and after it.
//! - Send lag: 1,000 req/s open loop; `load_pacing.send_lag` p50/p99 of each.
//!
//! `cargo bench --bench live_views`. Knobs: `BENCH_REQUESTS` (20000), `BENCH_ROUNDS` (5),
//! `BENCH_RATE_SECONDS` (5). Without `--bench` (as `cargo test --benches` runs it) one small
//! round of each.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const BIN: &str = env!("CARGO_BIN_EXE_aiperf");

fn env_num(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs `f` with a free port while a thread scrapes `http://127.0.0.1:<port>/metrics` once a
/// second, as a Prometheus server would.
fn with_scraper<T>(f: impl FnOnce(u16) -> T) -> T {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let scraper = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut scrapes = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                    let _ = write!(s, "GET /metrics HTTP/1.0\r\n\r\n");
                    let mut body = String::new();
                    if s.read_to_string(&mut body).is_ok() && body.contains("aiperf_requests_total")
                    {
                        scrapes += 1;
                    }
                }
                // Every 100 ms until the endpoint is up, then once a second.
                let pause = if scrapes == 0 { 100 } else { 1000 };
                std::thread::sleep(std::time::Duration::from_millis(pause));
            }
            scrapes
        })
    };
    let out = f(port);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let scrapes = scraper.join().unwrap();
    assert!(scrapes > 0, "the live endpoint was never scraped");
    out
}

/// An OTLP/HTTP receiver that reads each request, answers 200 and counts it: the export's
/// cost is the client's alone. Returns its URL and the count.
fn null_receiver() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received = Arc::new(AtomicU64::new(0));
    let count = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let count = count.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    count.fetch_add(1, Ordering::Relaxed);
                    let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                    if reader.get_mut().write_all(reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, received)
}

/// Runs `aiperf profile <args> --ui-type <ui>` in a 140x45 pseudo-terminal and returns its
/// JSON export; checks that the dashboard drew when asked for.
fn profile(url: &str, ui: &str, args: &[String]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let screen = dir.path().join("screen.txt");
    let command = format!(
        "stty rows 45 cols 140; exec {BIN} profile --model m --tokenizer builtin \
         --endpoint-type chat --streaming --isl 10 --osl 16 --url {url} \
         --no-server-metrics --no-gpu-telemetry --ui-type {ui} --artifact-dir {} {}",
        dir.path().join("out").display(),
        args.join(" ")
    );
    // stdin stays open (a pipe) for the run: `script` ends its session at end of input.
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &command])
        .arg(&screen)
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run `script` (util-linux) for a pseudo-terminal");
    let stdin = child.stdin.take();
    let status = child.wait().unwrap();
    drop(stdin);
    assert!(status.success(), "aiperf profile --ui-type {ui}: {status}");
    let drawn = std::fs::read_to_string(&screen).unwrap_or_default();
    assert_eq!(
        drawn.contains("Real-Time Metrics"),
        ui == "dashboard",
        "the dashboard draws exactly when asked for"
    );
    let text = std::fs::read_to_string(dir.path().join("out/profile_export_aiperf.json"))
        .expect("the JSON export");
    let mut export: serde_json::Value = serde_json::from_str(&text).unwrap();
    // The OpenTelemetry exporter logs its own thread's CPU: a figure the machine's load
    // barely moves, unlike the whole process's.
    let log = std::fs::read_to_string(dir.path().join("out/logs/aiperf.log")).unwrap_or_default();
    // The dashboard and the OpenTelemetry exporter log their own thread's CPU: a figure the
    // machine's load does not blur.
    let thread_ms = log.lines().find_map(|l| {
        let (_, rest) = l.split_once(" thread used ")?;
        rest.strip_suffix(" ms CPU")?.parse::<f64>().ok()
    });
    export["view_thread_cpu_ms"] = thread_ms.into();
    export
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let requests = env_num("BENCH_REQUESTS", if quick { 500.0 } else { 20_000.0 }) as u64;
    let rounds = env_num("BENCH_ROUNDS", if quick { 1.0 } else { 5.0 }) as usize;
    let rate_seconds = env_num("BENCH_RATE_SECONDS", if quick { 1.0 } else { 5.0 });
    let rate = if quick { 200.0 } else { 1000.0 };

    let mut mock = Command::new(BIN)
        .args(["mock-server", "--port", "0", "--fast", "--workers", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mock server");
    let mut line = String::new();
    BufReader::new(mock.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("mock url")
        .to_string();

    // CPU: each live view's run sits between two runs without one:
    // none, dashboard, none, prometheus, none, otel, none, dashboard, ...
    let (otel_url, otel_received) = null_receiver();
    let closed = vec![
        "--concurrency".to_string(),
        "64".into(),
        "--request-count".into(),
        requests.to_string(),
    ];
    let cpu = |v: &serde_json::Value| v["client_overhead"]["cpu_per_request_us"].as_f64();
    let throughput = |v: &serde_json::Value| v["request_throughput"]["avg"].as_f64().unwrap();
    let mut none = vec![profile(&url, "none", &closed)];
    let mut views: Vec<(&str, Vec<serde_json::Value>)> = vec![
        ("dashboard", Vec::new()),
        ("prometheus", Vec::new()),
        ("otel", Vec::new()),
    ];
    for _ in 0..rounds {
        for (view, runs) in views.iter_mut() {
            runs.push(match *view {
                "dashboard" => profile(&url, "dashboard", &closed),
                "otel" => {
                    let mut args = closed.clone();
                    args.extend(["--otel-url".to_string(), otel_url.clone()]);
                    profile(&url, "none", &args)
                }
                _ => with_scraper(|port| {
                    let mut args = closed.clone();
                    args.extend(["--prometheus-port".to_string(), port.to_string()]);
                    profile(&url, "none", &args)
                }),
            });
            none.push(profile(&url, "none", &closed));
        }
    }
    assert!(
        otel_received.load(Ordering::Relaxed) >= rounds as u64,
        "each --otel-url run pushed at least once"
    );
    let thread_us = |runs: &[serde_json::Value]| -> Vec<f64> {
        runs.iter()
            .map(|v| {
                let ms = v["view_thread_cpu_ms"].as_f64();
                ms.expect("the view logs its thread's CPU") * 1e3 / requests as f64
            })
            .collect()
    };
    let dashboard_thread_us = thread_us(&views[0].1);
    let otel_thread_us = thread_us(&views[2].1);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "live_views: {requests} streamed chat requests x 16 tokens, concurrency 64, {rounds} rounds \
         (each view's run between two runs without one); load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    if cpu(&none[0]).is_none() {
        println!("  no client_overhead in the export (no /proc): CPU not measured");
        let _ = mock.kill();
        let _ = mock.wait();
        return;
    }
    let us = |v: &[serde_json::Value]| v.iter().filter_map(cpu).collect::<Vec<_>>();
    let rps = |v: &[serde_json::Value]| median(v.iter().map(throughput).collect());
    let rounded = |v: &[f64]| {
        v.iter()
            .map(|x| (x * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    };
    let n_us = us(&none);
    println!(
        "  --ui-type none        : {:>6.1} us CPU/req (median of {:?})  {:>7.0} req/s",
        median(n_us.clone()),
        rounded(&n_us),
        rps(&none)
    );
    for (k, (view, runs)) in views.iter().enumerate() {
        let v_us = us(runs);
        // Run i of view k came after `none` run i * views + k and before the next.
        let paired: Vec<f64> = v_us
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let before = n_us[i * views.len() + k];
                let after = n_us[i * views.len() + k + 1];
                2.0 * x / (before + after)
            })
            .collect();
        println!(
            "  {:<22}: {:>6.1} us CPU/req (median of {:?})  {:>7.0} req/s  ratio to none {:.3} (per round {:?})",
            match *view {
                "dashboard" => "--ui-type dashboard",
                "otel" => "--otel-url (every 2 s)",
                _ => "--prometheus-port (1/s)",
            },
            median(v_us.clone()),
            rounded(&v_us),
            rps(runs),
            median(paired.clone()),
            paired
                .iter()
                .map(|x| (x * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>()
        );
    }

    for (what, per_req) in [
        ("--ui-type dashboard drawing thread", &dashboard_thread_us),
        ("--otel-url exporter thread", &otel_thread_us),
    ] {
        println!(
            "  {what} alone: {:.2} us CPU/req (median of {:?}), {:.2}% of the none runs' {:.1} us/req",
            median(per_req.clone()),
            per_req
                .iter()
                .map(|x| (x * 100.0).round() / 100.0)
                .collect::<Vec<_>>(),
            100.0 * median(per_req.clone()) / median(n_us.clone()),
            median(n_us.clone())
        );
    }

    // Send lag at a fixed rate.
    let count = (rate * rate_seconds).round() as u64;
    let paced = vec![
        "--request-rate".to_string(),
        rate.to_string(),
        "--request-count".into(),
        count.to_string(),
    ];
    println!("  send lag at {rate} req/s, {count} requests (us):");
    let paced_otel = [&paced[..], &["--otel-url".to_string(), otel_url]].concat();
    for (ui, args) in [
        ("none", &paced),
        ("dashboard", &paced),
        ("otel", &paced_otel),
    ] {
        let v = match ui {
            "otel" => profile(&url, "none", args),
            _ => profile(&url, ui, args),
        };
        let lag = |k: &str| v["load_pacing"]["send_lag"][k].as_f64().unwrap_or(f64::NAN) * 1e3;
        println!(
            "    {ui:<9} p50 {:>7.1}  p99 {:>7.1}  max {:>8.1}",
            lag("p50"),
            lag("p99"),
            lag("max")
        );
    }
    let _ = mock.kill();
    let _ = mock.wait();
}
