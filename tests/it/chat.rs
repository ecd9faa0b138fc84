//! `aiperf chat`: piped sessions against the mock server (the reply and its stats) and
//! against a small server that keeps each request body (history, system prompt, images).

use std::io::Write;
use std::process::{Command, Output, Stdio};

use base64::Engine;
use serde_json::Value;

use crate::common::raw_server::{After, RawServer, Reply, sse_reply, token_event};
use crate::common::{BIN, MockChild};

/// Runs `aiperf chat ARGS` with `input` on its stdin (a pipe).
fn chat(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(BIN)
        .arg("chat")
        .args(["--tokenizer", "builtin", "--api-key", ""])
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The number after `prefix` on the line that starts with it, each such line in order.
fn numbers_after(out: &str, prefix: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|rest| {
            let num: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            num.parse()
                .unwrap_or_else(|_| panic!("no number in {rest:?}"))
        })
        .collect()
}

#[test]
fn a_piped_session_prints_each_reply_and_its_stats() {
    let mock = MockChild::spawn(&["--ttft", "80", "--itl", "2"]);
    let out = chat(
        &["-m", "mock-model", "-u", &mock.url],
        "Hello there\n\nWhat is a GPU?\n",
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    // The transcript shows each message sent (the empty line is skipped), then its reply.
    let sent: Vec<&str> = stdout.lines().filter(|l| l.starts_with("> ")).collect();
    assert_eq!(sent, ["> Hello there", "> What is a GPU?"], "{stdout}");
    let first_reply = stdout
        .lines()
        .skip_while(|l| !l.starts_with("> Hello"))
        .nth(1)
        .unwrap();
    assert!(
        first_reply.split_whitespace().count() >= 2,
        "the reply is printed: {stdout}"
    );
    // One stats block per turn: TTFT at least the server's 80 ms, a plausible rate.
    let ttft = numbers_after(&stdout, "TTFT: ");
    assert_eq!(ttft.len(), 2, "{stdout}");
    for t in &ttft {
        assert!((80.0..5000.0).contains(t), "TTFT {t} ms: {stdout}");
    }
    let tps = numbers_after(&stdout, "TPS:  ");
    assert_eq!(tps.len(), 2, "{stdout}");
    for line in stdout.lines().filter(|l| l.starts_with("TPS:  ")) {
        // "TPS:  123.45 tokens/s (20 tokens in 0.12s)"
        let (rate, rest) = line["TPS:  ".len()..].split_once(" tokens/s (").unwrap();
        let (tokens, rest) = rest.split_once(" tokens in ").unwrap();
        let secs: f64 = rest.trim_end_matches("s)").parse().unwrap();
        let (rate, tokens): (f64, f64) = (rate.parse().unwrap(), tokens.parse().unwrap());
        assert!(tokens >= 1.0, "{line}");
        assert!(secs >= 0.08, "latency includes the TTFT: {line}");
        // The rate is the tokens over the latency (both rounded as printed).
        let want = tokens / secs;
        assert!((rate - want).abs() <= want * 0.1 + 0.5, "{line}");
    }
    // The mock sends token k at TTFT + k * ITL from the request: a first token read late
    // (a busy machine) shortens the measured ITL, so only its range is checked.
    let itl = numbers_after(&stdout, "ITL:  ");
    assert_eq!(itl.len(), 2, "{stdout}");
    for v in &itl {
        assert!(*v > 0.0 && *v < 1000.0, "ITL {v} ms/token: {stdout}");
    }
}

#[test]
fn quick_sends_one_message_and_exits() {
    let mock = MockChild::spawn(&["--ttft", "30"]);
    let out = chat(
        &["-m", "mock-model", "-u", &mock.url, "--quick", "ping"],
        "this is not read\n",
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!stdout.contains("this is not read"), "{stdout}");
    assert!(!stdout.contains("> "), "no prompt with --quick: {stdout}");
    assert_eq!(numbers_after(&stdout, "TTFT: ").len(), 1, "{stdout}");
    assert!(numbers_after(&stdout, "TTFT: ")[0] >= 30.0, "{stdout}");
}

/// A server that streams "reply N" to the N-th request and keeps every body.
fn recording_server() -> RawServer {
    let count = std::sync::atomic::AtomicUsize::new(0);
    RawServer::start(move |_| {
        let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let events = vec![
            token_event("reply "),
            token_event(&n.to_string()),
            "data: [DONE]\n\n".to_string(),
        ];
        sse_reply("", &events, After::KeepOpen)
    })
}

fn bodies(server: &RawServer) -> Vec<Value> {
    server
        .requests()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

#[test]
fn each_turn_resends_the_conversation_unless_no_history() {
    let server = recording_server();
    let out = chat(
        &[
            "-m",
            "m1",
            "-u",
            &server.url,
            "--system-prompt",
            "Be brief.",
        ],
        "first question\nsecond question\n",
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("> first question\nreply 1\nTTFT: "),
        "{stdout}"
    );
    assert!(
        stdout.contains("> second question\nreply 2\nTTFT: "),
        "{stdout}"
    );
    let b = bodies(&server);
    assert_eq!(b.len(), 2);
    assert_eq!(b[0]["model"], "m1");
    assert_eq!(b[0]["stream"], true);
    assert_eq!(
        b[1]["messages"],
        serde_json::json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "reply 1"},
            {"role": "user", "content": "second question"},
        ])
    );
    assert_eq!(
        server.requests()[0].head.lines().next().unwrap(),
        "post /v1/chat/completions http/1.1"
    );

    let server = recording_server();
    let out = chat(
        &["-m", "m1", "-u", &server.url, "--no-history"],
        "first question\nsecond question\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let b = bodies(&server);
    assert_eq!(
        b[1]["messages"],
        serde_json::json!([{"role": "user", "content": "second question"}])
    );
}

fn write_image(path: &std::path::Path, format: image::ImageFormat) -> Vec<u8> {
    let img = image::RgbImage::from_fn(6, 4, |x, y| image::Rgb([x as u8 * 40, y as u8 * 60, 9]));
    img.save_with_format(path, format).unwrap();
    std::fs::read(path).unwrap()
}

/// The image parts of a user message: (mime type, decoded bytes).
fn image_parts(message: &Value) -> Vec<(String, Vec<u8>)> {
    let parts = message["content"].as_array().expect("a list of parts");
    parts
        .iter()
        .filter(|p| p["type"] == "image_url")
        .map(|p| {
            let url = p["image_url"]["url"].as_str().unwrap();
            let (head, data) = url.split_once(";base64,").unwrap();
            let mime = head.strip_prefix("data:").unwrap().to_string();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap();
            (mime, bytes)
        })
        .collect()
}

#[test]
fn images_go_as_data_url_parts_of_their_own_type() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("a.png");
    let jpg = dir.path().join("b.jpg");
    let png_bytes = write_image(&png, image::ImageFormat::Png);
    let jpg_bytes = write_image(&jpg, image::ImageFormat::Jpeg);
    let server = recording_server();
    let input = format!(
        "What is this?\n/image {}\nAnd this one?\n/image {} Last one\n",
        jpg.display(),
        png.display()
    );
    let out = chat(
        &[
            "-m",
            "vlm",
            "-u",
            &server.url,
            "--image",
            png.to_str().unwrap(),
        ],
        &input,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("goes with the next message"), "{stdout}");
    let b = bodies(&server);
    assert_eq!(b.len(), 3, "`/image PATH` alone sends nothing");
    let last = |i: usize| b[i]["messages"].as_array().unwrap().last().unwrap().clone();
    // --image: the first message, text part first.
    assert_eq!(
        last(0)["content"][0],
        serde_json::json!({"type": "text", "text": "What is this?"})
    );
    assert_eq!(
        image_parts(&last(0)),
        [("image/png".to_string(), png_bytes.clone())]
    );
    assert_eq!(
        image_parts(&last(1)),
        [("image/jpeg".to_string(), jpg_bytes)]
    );
    assert_eq!(last(2)["content"][0]["text"], "Last one");
    assert_eq!(
        image_parts(&last(2)),
        [("image/png".to_string(), png_bytes)]
    );
    // The history keeps the first message's image.
    assert_eq!(image_parts(&b[2]["messages"][0]).len(), 1);
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let out = chat(&["-m", "m", "-u", &url, "--quick"], "");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: cannot connect to {url}/v1/chat/completions ("
        )) && stderr.contains("check --url and that the server is running"),
        "{stderr}"
    );
    // A session goes on after a failed turn, and exits 1.
    let out = chat(&["-m", "m", "-u", &url], "one\ntwo\n");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("request failed: cannot connect").count(),
        2,
        "{stderr}"
    );
}

#[test]
fn an_http_error_shows_the_servers_message_and_the_session_goes_on() {
    let count = std::sync::atomic::AtomicUsize::new(0);
    let server = RawServer::start(move |_| {
        if count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            let body = r#"{"error": {"message": "The model `nope` does not exist."}}"#;
            let head = format!(
                "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            return Reply::new(
                vec![[head.as_bytes(), body.as_bytes()].concat()],
                After::KeepOpen,
            );
        }
        sse_reply(
            "",
            &[token_event("ok"), "data: [DONE]\n\n".into()],
            After::KeepOpen,
        )
    });
    let out = chat(&["-m", "nope", "-u", &server.url], "a\nb\n");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("answered HTTP 404"), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(stdout.contains("> b\nok\nTTFT: "), "{stdout}");
    // The failed turn is not in the history.
    let b = bodies(&server);
    assert_eq!(b[1]["messages"].as_array().unwrap().len(), 1);
}

#[test]
fn bad_input_exits_2() {
    let out = chat(&["-m", "m", "--image", "/no/such/file.png"], "");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: --image /no/such/file.png: no such file"),
        "{stderr}"
    );
    let out = chat(&["-m", "m", "-u", "http://h:99999"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--url"), "{}", text(&out.stderr));
}
