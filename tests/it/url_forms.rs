//! What reaches the server for each `--url` form.

use crate::common;

use common::{RecordingServer, run_aiperf_in};

/// The request line of the first request `aiperf` sends for `url`.
fn first_request_line(url: &str) -> String {
    let server = RecordingServer::start(true);
    let tmp = tempfile::tempdir().unwrap();
    let url = url.replace("ADDR", &server.addr.to_string());
    let out = run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "-m",
            "m",
            "--tokenizer",
            "builtin",
            "--request-count",
            "1",
            "--isl",
            "8",
            "--artifact-dir",
            "run",
            "--url",
            &url,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr_text(&out));
    // The first chat request (a /metrics scrape may come before it).
    let heads = server.heads();
    let first = heads
        .iter()
        .find(|h| h.starts_with("POST"))
        .expect("a POST");
    first.lines().next().unwrap().to_string()
}

#[test]
fn a_query_in_the_url_follows_the_endpoint_path() {
    assert_eq!(
        first_request_line("ADDR/?api-version=2"),
        "POST /v1/chat/completions?api-version=2 HTTP/1.1"
    );
    assert_eq!(
        first_request_line("http://ADDR/v1?x=1"),
        "POST /v1/chat/completions?x=1 HTTP/1.1"
    );
}
