//! `aiperf mock-server --max-concurrency K`: past K requests in flight the mock queues the
//! rest, so throughput saturates and time to first token grows with the queue, and a client
//! that leaves (queued or being served) gives its place back.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;

use common::{MockChild, post_json, read_json, read_served, run_profile, stderr_text};

/// Profiles `url` with short streamed chat requests (4 output tokens) at `concurrency`;
/// returns the run's request throughput (per second) and TTFT p50 (ms) read from
/// `profile_export_aiperf.json`.
fn profile(dir: &Path, url: &str, concurrency: u32, requests: u32) -> (f64, f64) {
    let (concurrency, requests) = (concurrency.to_string(), requests.to_string());
    let out = run_profile(&[
        "-m",
        "m",
        "-u",
        url,
        "--tokenizer",
        "builtin",
        "--streaming",
        "--isl",
        "10",
        "--osl",
        "4",
        "--concurrency",
        &concurrency,
        "--request-count",
        &requests,
        "--artifact-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(
        summary["request_count"]["avg"].as_f64(),
        Some(requests.parse().unwrap())
    );
    let throughput = summary["request_throughput"]["avg"].as_f64().unwrap();
    let ttft_p50 = summary["time_to_first_token"]["p50"].as_f64().unwrap();
    eprintln!("concurrency {concurrency}: {throughput:.1} requests/s, TTFT p50 {ttft_p50:.0} ms");
    (throughput, ttft_p50)
}

fn ns(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// Most intervals [start, end) open at once.
fn max_overlap(intervals: &[(u64, u64)]) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for &(s, e) in intervals {
        edges.push((s, 1));
        edges.push((e, -1));
    }
    // At equal times an end comes before a start: the intervals are half-open.
    edges.sort();
    let (mut open, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        open += d;
        most = most.max(open);
    }
    most as usize
}

#[test]
fn throughput_saturates_and_ttft_grows_with_the_queue() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("served.jsonl");
    let mock = MockChild::spawn(&[
        "--max-concurrency",
        "2",
        "--ttft",
        "100",
        "--itl",
        "5",
        "--record-requests",
        log.to_str().unwrap(),
    ]);
    let (tput2, ttft2) = profile(&tmp.path().join("c2"), &mock.url, 2, 24);
    let (tput6, ttft6) = profile(&tmp.path().join("c6"), &mock.url, 6, 36);
    mock.terminate();

    // One request holds a slot for about 100 + 3 x 5 ms, so 2 slots serve about 17 per
    // second whatever the client's concurrency.
    let ratio = tput6 / tput2;
    assert!(
        (0.75..=1.25).contains(&ratio),
        "throughput at concurrency 6 is {tput6:.1}/s, at 2 {tput2:.1}/s: not saturated"
    );
    assert!(
        tput6 < 2.0 / 0.115 * 1.1,
        "{tput6:.1}/s is more than 2 slots can serve"
    );
    // At 6 each request waits behind 4 others (about 2 service times) before its TTFT starts.
    assert!(
        ttft6 >= 2.0 * ttft2,
        "TTFT p50 {ttft6:.0} ms at concurrency 6 vs {ttft2:.0} ms at 2: no queue wait"
    );
    assert!((95.0..200.0).contains(&ttft2), "TTFT p50 at 2: {ttft2} ms");

    // The server's own record: never more than 2 served at once, and the TTFT schedule
    // starts at admission, after the wait.
    let served = read_served(&log);
    assert_eq!(served.len(), 24 + 36);
    let in_service: Vec<_> = served
        .iter()
        .map(|r| (ns(r, "admitted_ns"), ns(r, "last_token_ns")))
        .collect();
    assert_eq!(max_overlap(&in_service), 2);
    let waited = served
        .iter()
        .filter(|r| ns(r, "admitted_ns") - ns(r, "received_ns") > 100_000_000)
        .count();
    assert!(
        waited >= 20,
        "only {waited} requests waited 100 ms for a slot"
    );
    for r in &served {
        let first = ns(r, "first_token_ns") - ns(r, "admitted_ns");
        assert!(
            first >= 100_000_000,
            "first token {first} ns after admission"
        );
    }
}

#[test]
fn without_the_flag_the_same_load_is_not_queued() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "100", "--itl", "5"]);
    let (tput6, ttft6) = profile(&tmp.path().join("c6"), &mock.url, 6, 36);
    // Six at once, each in about 115 ms: about 50 per second, three times what 2 slots give.
    assert!(tput6 > 2.0 / 0.115 * 1.8, "{tput6:.1}/s");
    assert!(ttft6 < 200.0, "TTFT p50 {ttft6} ms");
}

/// Sends a streamed chat request for `tokens` tokens on its own connection without reading
/// the reply.
fn open_stream(addr: SocketAddr, id: &str, tokens: u64) -> TcpStream {
    let body = json!({
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": tokens,
        "stream": true,
    })
    .to_string();
    let mut tcp = TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         X-Request-ID: {id}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).unwrap();
    tcp.write_all(body.as_bytes()).unwrap();
    tcp
}

/// Whether any response bytes arrive within `wait`: an admitted request gets its headers
/// and role chunk at once, a queued one nothing.
fn answered_within(tcp: &mut TcpStream, wait: Duration) -> bool {
    tcp.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 256];
    match tcp.read(&mut buf) {
        Ok(n) => {
            assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
            true
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
        Err(e) => panic!("read: {e}"),
    }
}

#[test]
fn clients_that_leave_give_their_slots_back() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("served.jsonl");
    let mock = MockChild::spawn(&[
        "--max-concurrency",
        "2",
        "--ttft",
        "50",
        "--itl",
        "10",
        "--record-requests",
        log.to_str().unwrap(),
    ]);
    // Two 10-second streams take both slots; a third request queues behind them.
    let mut a = open_stream(mock.addr, "served-a", 1000);
    let mut b = open_stream(mock.addr, "served-b", 1000);
    assert!(answered_within(&mut a, Duration::from_secs(5)));
    assert!(answered_within(&mut b, Duration::from_secs(5)));
    let mut queued = open_stream(mock.addr, "queued", 1000);
    assert!(
        !answered_within(&mut queued, Duration::from_millis(300)),
        "a third request was served with 2 slots taken"
    );

    // The queued client leaves first (and is noticed), then the two being served.
    drop(queued);
    std::thread::sleep(Duration::from_millis(300));
    drop((a, b));

    // Two new requests are both served at once: no slot is held by a client that left,
    // nor taken by the one that left the queue (each would hold it for 10 s).
    let started = Instant::now();
    let replies: Vec<_> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let body = json!({
                        "messages": [{"role": "user", "content": "hello"}],
                        "max_tokens": 30,
                    });
                    post_json(mock.addr, "/v1/chat/completions", &body)
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let elapsed = started.elapsed();
    for r in &replies {
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["usage"]["completion_tokens"], 30);
    }
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    mock.terminate();

    let served = common::read_jsonl(&log);
    assert_eq!(served.len(), 5, "{served:#?}");
    let by_id = |id: &str| {
        served
            .iter()
            .find(|r| r["x_request_id"] == id)
            .unwrap_or_else(|| panic!("{id} not recorded"))
    };
    // The one that left the queue was never admitted; the two that left mid-stream stopped
    // early.
    let left = by_id("queued");
    assert_eq!(left["admitted_ns"], Value::Null, "{left}");
    assert_eq!(
        (&left["completed"], &left["output_tokens"]),
        (&json!(false), &json!(0))
    );
    for id in ["served-a", "served-b"] {
        let r = by_id(id);
        assert_eq!(r["completed"], false, "{r}");
        assert!(ns(r, "output_tokens") < 1000, "{r}");
    }
    // Each new request (30 tokens, about 340 ms of service) was admitted without waiting
    // for the other.
    let new: Vec<_> = served
        .iter()
        .filter(|r| r["x_request_id"].is_null())
        .collect();
    assert_eq!(new.len(), 2);
    for r in new {
        let wait = ns(r, "admitted_ns") - ns(r, "received_ns");
        assert!(wait < 150_000_000, "waited {wait} ns for a slot");
        assert_eq!(r["completed"], true, "{r}");
    }
}

#[test]
fn a_limit_below_one_is_refused() {
    for bad in ["0", "two"] {
        let out = common::run_aiperf_in(Path::new("."), &["mock-server", "--max-concurrency", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = stderr_text(&out);
        assert!(
            err.contains("--max-concurrency") && err.contains("whole number of 1 or more"),
            "{err}"
        );
    }
}
