//! `--prometheus-port` against a real Prometheus server (Debian's `prometheus`): it scrapes
//! the client every second during a run against the mock server, and its HTTP API is asked
//! for the rate of our counters and for our labels.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{BIN, MockChild, read_json};

/// The `prometheus` binary: skipped (with a notice) without one, unless
/// `AIPERF_REQUIRE_PROMETHEUS=1` makes that a failure.
fn prometheus_bin() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("prometheus"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("AIPERF_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
            "AIPERF_REQUIRE_PROMETHEUS=1 but no prometheus on PATH"
        );
        eprintln!("NOTICE: prometheus not found; the live endpoint's Prometheus test is skipped");
    }
    found
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET over HTTP/1.0 (no chunked body to undo); `None` when nothing answers.
fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// A Prometheus instant query's result vector.
fn query(prom: SocketAddr, promql: &str) -> Vec<serde_json::Value> {
    let encoded: String = promql
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (status, body) = get(prom, &format!("/api/v1/query?query={encoded}"))
        .unwrap_or_else(|| panic!("prometheus did not answer {promql}"));
    assert_eq!(status, 200, "{promql}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn value_of(sample: &serde_json::Value) -> f64 {
    sample["value"][1].as_str().unwrap().parse().unwrap()
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn prometheus_scrapes_the_live_counters_and_histograms_during_the_run() {
    let Some(prometheus) = prometheus_bin() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (port, prom_port) = (free_port(), free_port());
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: aiperf\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .unwrap();
    let prom_addr: SocketAddr = format!("127.0.0.1:{prom_port}").parse().unwrap();
    let _prom = Killed(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={prom_addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(prom_addr, "/-/ready").is_none_or(|(s, _)| s != 200) {
        assert!(Instant::now() < deadline, "prometheus never became ready");
        std::thread::sleep(Duration::from_millis(200));
    }

    // ~0.22 s per request, 2 at a time: 80 requests take about 9 s.
    let mock = MockChild::spawn(&["--ttft", "20", "--itl", "5"]);
    let out = dir.path().join("out");
    let mut run = Killed(
        Command::new(BIN)
            .args([
                "profile",
                "--model",
                "prom-model",
                "--endpoint-type",
                "chat",
            ])
            .args(["--streaming", "--url", &mock.url, "--tokenizer", "builtin"])
            .args([
                "--isl",
                "20",
                "--osl",
                "40",
                "--extra-inputs",
                "ignore_eos:true",
            ])
            .args(["--request-count", "80", "--concurrency", "2"])
            .args(["--prometheus-port", &port.to_string()])
            .arg("--artifact-dir")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // Straight from the endpoint mid-run: the text format, our families, our labels.
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        if let Some((200, body)) = get(addr, "/metrics")
            && body.contains("phase=\"profiling\"} 1\n")
        {
            break body;
        }
        assert!(Instant::now() < deadline, "no live endpoint on {addr}");
        std::thread::sleep(Duration::from_millis(200));
    };
    for needle in [
        "# TYPE aiperf_requests_total counter",
        "# TYPE aiperf_time_to_first_token_seconds histogram",
        "aiperf_time_to_first_token_seconds_bucket{",
        "le=\"+Inf\"",
        "aiperf_requests_in_flight{",
        "model=\"prom-model\"",
        "endpoint=\"chat\"",
    ] {
        assert!(body.contains(needle), "{needle} not in\n{body}");
    }

    // Prometheus' view during the run: the profiling request rate, about 9 per second.
    let deadline = Instant::now() + Duration::from_secs(30);
    let rate = loop {
        let r = query(
            prom_addr,
            "rate(aiperf_requests_total{job=\"aiperf\",phase=\"profiling\"}[3s])",
        );
        if let Some(v) = r.first().map(value_of)
            && v > 0.0
        {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "no rate of aiperf_requests_total"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!((2.0..40.0).contains(&rate), "rate {rate} req/s");
    let ttft = query(
        prom_addr,
        "histogram_quantile(0.5, rate(aiperf_time_to_first_token_seconds_bucket[5s]))",
    );
    let p50 = ttft.first().map(value_of).expect("a TTFT quantile");
    // The mock's 20 ms falls in the 10-25 ms bucket.
    assert!((0.010..=0.025).contains(&p50), "TTFT p50 {p50} s");

    assert!(run.0.wait().unwrap().success());
    let summary = read_json(&out.join("profile_export_aiperf.json"));
    // What Prometheus kept: the counter never exceeded the run's count, and the labels
    // name this run.
    let kept = query(
        prom_addr,
        "max_over_time(aiperf_requests_total{phase=\"profiling\"}[5m])",
    );
    let most = value_of(&kept[0]);
    assert!(most > 0.0 && most <= 80.0, "{most}");
    assert_eq!(
        kept[0]["metric"]["benchmark_id"].as_str(),
        summary["benchmark_id"].as_str()
    );
    assert_eq!(kept[0]["metric"]["model"], "prom-model");
    // The endpoint is gone with the run.
    assert!(get(addr, "/metrics").is_none());
}

#[test]
fn a_port_in_use_fails_the_run_before_it_sends() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served.jsonl");
    let mock = MockChild::spawn(&["--record-requests", served.to_str().unwrap()]);
    let out = Command::new(BIN)
        .args([
            "profile",
            "--model",
            "m",
            "--url",
            &mock.url,
            "--tokenizer",
            "builtin",
        ])
        .args(["--request-count", "3", "--prometheus-port", &port])
        .arg("--artifact-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "--prometheus-port: cannot listen on 127.0.0.1:{port}"
        )),
        "{stderr}"
    );
    drop(mock);
    let sent = std::fs::read_to_string(&served).unwrap_or_default();
    assert_eq!(sent.lines().count(), 0, "nothing was sent: {sent}");
}
