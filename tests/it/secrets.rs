//! Secrets given on the command line (API key, secret headers in every `-H` spelling, URL
//! credentials) never reach stdout, stderr, the logs or the exports; URL credentials are
//! sent as HTTP Basic auth.

use crate::common;
use crate::common::Profile;

use std::path::Path;

use common::{RecordingServer, read_json};

/// Every file under `dir`, as text.
fn all_text_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            out.extend(all_text_under(&path));
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            out.push((path.display().to_string(), text));
        }
    }
    out
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn profile(cwd: &Path, args: &[&str]) -> std::process::Output {
    Profile::new("m")
        .args(&["--request-count", "2", "--isl", "8"])
        .artifact_dir("run")
        .args(args)
        .run_in(cwd)
}

#[test]
fn no_spelling_of_a_secret_reaches_the_output() {
    let server = RecordingServer::start(true);
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://me:pw-F@{}", server.addr);
    let json_header = r#"{"Authorization":"Bearer tok-G","X-Api-Key":"xkey-B"}"#;
    let out = profile(
        tmp.path(),
        &[
            "--url",
            &url,
            "--api-key",
            "sk-KEY-A",
            "-H",
            json_header,
            "-HCookie: cookie-C",
            // A second value after one -H is a header too.
            "-H",
            "X-Plain: visible",
            "Proxy-Authorization: Basic proxy-D",
            "--header=Set-Cookie: setcookie-E",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");

    let secrets = [
        "sk-KEY-A",
        "xkey-B",
        "cookie-C",
        "proxy-D",
        "setcookie-E",
        "pw-F",
        "tok-G",
    ];
    let mut texts = all_text_under(&tmp.path().join("run"));
    texts.push(("stdout".into(), stdout.to_string()));
    texts.push(("stderr".into(), stderr.to_string()));
    for (name, text) in &texts {
        for s in secrets {
            assert!(!text.contains(s), "{s} leaked into {name}:\n{text}");
        }
    }

    // The command line is still shown, with the harmless header intact.
    let cli = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CLI Command: "))
        .expect("a CLI Command line");
    assert!(cli.contains("'X-Plain: visible'"), "{cli}");
    assert!(cli.contains("'--header=Set-Cookie: ***'"), "{cli}");
    assert!(cli.contains("http://***@"), "{cli}");
    let console =
        std::fs::read_to_string(tmp.path().join("run/profile_export_console.txt")).unwrap();
    assert!(
        console.contains(&format!("CLI Command: {cli}")),
        "{console}"
    );
    let json = read_json(&tmp.path().join("run/profile_export_aiperf.json"));
    assert_eq!(json["run_info"]["cli_command"], cli);
    let headers = &json["input_config"]["endpoint"]["headers"];
    for name in [
        "authorization",
        "x-api-key",
        "cookie",
        "proxy-authorization",
        "set-cookie",
    ] {
        assert_eq!(headers[name], "***", "{name}: {headers}");
    }
    assert_eq!(headers["x-plain"], "visible");

    // The explicit Authorization header is the one sent; the URL's credentials are not.
    // (Scrapes of /metrics carry no credentials.)
    let heads: Vec<String> = server
        .heads()
        .into_iter()
        .filter(|h| h.starts_with("POST"))
        .collect();
    assert!(!heads.is_empty());
    for head in &heads {
        assert_eq!(
            header(head, "authorization"),
            Some("Bearer tok-G"),
            "{head}"
        );
        assert_eq!(header(head, "cookie"), Some("cookie-C"), "{head}");
    }
    assert!(stderr.contains("not sent"), "{stderr}");
}

#[test]
fn url_credentials_are_sent_as_basic_auth() {
    let server = RecordingServer::start(true);
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://me:p%40ss-F@{}", server.addr);
    let out = profile(tmp.path(), &["--url", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr_text(&out));
    let heads: Vec<String> = server
        .heads()
        .into_iter()
        .filter(|h| h.starts_with("POST"))
        .collect();
    assert!(!heads.is_empty());
    for head in &heads {
        // base64("me:p@ss-F")
        assert_eq!(
            header(head, "authorization"),
            Some("Basic bWU6cEBzcy1G"),
            "{head}"
        );
        assert!(head.starts_with("POST /v1/chat/completions "), "{head}");
    }
    for (name, text) in all_text_under(&tmp.path().join("run")) {
        assert!(!text.contains("ss-F"), "the password leaked into {name}");
        assert!(
            !text.contains("bWU6cEBzcy1G"),
            "the token leaked into {name}"
        );
    }
}

/// A `/metrics` (server-metrics and DCGM-shaped) that answers only the right Basic
/// credentials (`scraper:S3cr3t-P`), beside a chat server; the number of authorized scrapes.
fn guarded_metrics() -> (
    common::raw_server::RawServer,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    use common::raw_server::{After, RawServer, Reply, json_reply};
    use std::sync::atomic::{AtomicU64, Ordering};
    let authorized = std::sync::Arc::new(AtomicU64::new(0));
    let count = authorized.clone();
    // base64("scraper:S3cr3t-P")
    let expected = "Basic c2NyYXBlcjpTM2NyM3QtUA==";
    let server = RawServer::start(move |r| {
        if r.head.starts_with("get /metrics") {
            if r.header("authorization") != Some(&expected.to_ascii_lowercase()) {
                return Reply::new(
                    vec![b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n".to_vec()],
                    After::KeepOpen,
                );
            }
            // A new value at every scrape: a repeated one is no new GPU sample.
            let n = count.fetch_add(1, Ordering::Relaxed);
            let text = format!(
                "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n\
                 # TYPE DCGM_FI_DEV_POWER_USAGE gauge\nDCGM_FI_DEV_POWER_USAGE{{gpu=\"0\"}} {n}\n"
            );
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
                text.len()
            );
            return Reply::new(
                vec![[head.as_bytes(), text.as_bytes()].concat()],
                After::KeepOpen,
            );
        }
        let body = serde_json::json!({"choices": [{"index": 0, "message": {"content": "a b"}}],
                                     "usage": {"prompt_tokens": 8, "completion_tokens": 2}});
        json_reply("", &body, After::KeepOpen)
    });
    (server, authorized)
}

#[test]
fn credentials_in_scrape_urls_are_sent_and_shown_nowhere() {
    let (server, authorized) = guarded_metrics();
    let tmp = tempfile::tempdir().unwrap();
    let host = server.url.trim_start_matches("http://").to_string();
    let metrics = format!("http://scraper:S3cr3t-P@{host}/metrics");
    let out = profile(
        tmp.path(),
        &[
            "--url",
            &server.url,
            "--server-metrics",
            &metrics,
            "--gpu-telemetry",
            &metrics,
            "--server-metrics-formats",
            "json,csv,jsonl",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // The credentials were used: the guarded endpoint answered both collectors.
    assert!(authorized.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    let sm = read_json(&tmp.path().join("run/server_metrics_export.json"));
    assert_eq!(
        sm["summary"]["endpoints_successful"],
        serde_json::json!([format!("http://{host}/metrics")]),
        "{sm}"
    );
    assert!(
        tmp.path().join("run/gpu_telemetry_export.jsonl").exists(),
        "{stderr}\n{stdout}"
    );
    // ... and never shown: not on the console, not in any file (logs, exports, report).
    for (what, text) in [("stdout", &*stdout), ("stderr", &*stderr)] {
        assert!(!text.contains("S3cr3t"), "{what}: {text}");
    }
    for (path, text) in all_text_under(&tmp.path().join("run")) {
        assert!(!text.contains("S3cr3t"), "{path}");
    }
    assert!(
        stdout.contains("scraper:***@") || stdout.contains("***@"),
        "{stdout}"
    );
}

#[test]
fn a_bad_scrape_url_is_refused_without_echoing_its_password() {
    let tmp = tempfile::tempdir().unwrap();
    for flag in ["--server-metrics", "--gpu-telemetry"] {
        let out = profile(
            tmp.path(),
            &[
                "--mock-server",
                flag,
                "http://u:S3cr3t-Q@exa mple:99999999/metrics",
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stderr.contains("S3cr3t") && !stdout.contains("S3cr3t"),
            "{flag}: {stderr}"
        );
    }
}
