//! Helpers for tests that run `aiperf mock-server` as a child process and talk to it over a
//! raw HTTP/1.1 socket, stamping every read so event arrival times can be checked.

#![allow(dead_code)]

pub mod hub_fixture;
pub mod raw_server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_aiperf");

/// Runs `aiperf profile <args>` with the hub offline and waits for it.
pub fn run_profile(args: &[&str]) -> Output {
    let mut all = vec!["profile"];
    all.extend_from_slice(args);
    run_aiperf_in(Path::new("."), &all)
}

/// Runs `aiperf <args>` in `cwd` with the hub offline and waits for it.
pub fn run_aiperf_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(cwd)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .expect("run aiperf")
}

/// `aiperf profile` with what nearly every test gives: a model and the builtin tokenizer (no
/// hub access); the rest is added with `url`, `artifact_dir` and `args`, in that order.
#[derive(Clone)]
pub struct Profile {
    args: Vec<String>,
}

impl Profile {
    /// `aiperf profile --model MODEL --tokenizer builtin`.
    pub fn new(model: &str) -> Self {
        Profile::without_model().args(&["--model", model])
    }

    /// `aiperf profile --tokenizer builtin`: the test gives the model itself (or none).
    pub fn without_model() -> Self {
        Profile {
            args: ["profile", "--tokenizer", "builtin"]
                .map(String::from)
                .to_vec(),
        }
    }

    pub fn url(self, url: &str) -> Self {
        self.args(&["--url", url])
    }

    pub fn artifact_dir(self, dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref().to_str().expect("a UTF-8 path").to_string();
        self.args(&["--artifact-dir", &dir])
    }

    pub fn args<S: AsRef<str>>(mut self, args: &[S]) -> Self {
        self.args
            .extend(args.iter().map(|a| a.as_ref().to_string()));
        self
    }

    /// Runs it in `cwd` (relative artifact directories land there) and waits for it.
    pub fn run_in(&self, cwd: &Path) -> Output {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        run_aiperf_in(cwd, &args)
    }

    /// Runs it in the current directory.
    pub fn run(&self) -> Output {
        self.run_in(Path::new("."))
    }
}

/// `aiperf profile <args>` (hub offline, with `envs`), with its peak resident memory in
/// bytes (the kernel's `ru_maxrss` of that one process) and its wall time.
// The child is reaped by `wait4`, which `Child::wait` cannot give the usage of.
#[allow(clippy::zombie_processes)]
pub fn run_profile_measured(args: &[&str], envs: &[(&str, &str)]) -> (Output, u64, Duration) {
    use std::os::unix::process::ExitStatusExt;
    let started = Instant::now();
    let mut child = Command::new(BIN)
        .arg("profile")
        .args(args)
        .env("HF_HUB_OFFLINE", "1")
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run aiperf");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let mut status = 0;
    // SAFETY: `rusage` is plain data the kernel fills; the pid is our own child, reaped here.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let pid = libc::wait4(child.id() as i32, &mut status, 0, &mut usage);
        assert!(pid > 0, "wait4: {}", std::io::Error::last_os_error());
        usage
    };
    let out = Output {
        status: ExitStatus::from_raw(status),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    (out, usage.ru_maxrss as u64 * 1024, started.elapsed())
}

/// `aiperf profile -m m --mock-server <extra>` exits 2 before running (the artifact
/// directory could never be made), saying `want`.
pub fn assert_refused(extra: &[&str], want: &str) {
    let mut args = vec![
        "-m",
        "m",
        "--mock-server",
        "--artifact-dir",
        "/nonexistent/never",
    ];
    args.extend_from_slice(extra);
    let out = run_profile(&args);
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
    assert!(stderr.contains(want), "{extra:?}: {stderr}");
}

/// The JSON lines of a file (none when it does not exist).
pub fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect()
}

/// The mock's `--record-requests` lines for the run's own requests, without the
/// chat-template probe that aiperf sends before a run with images.
pub fn read_served(path: &Path) -> Vec<serde_json::Value> {
    let probe = aiperf::api::PROBE_REQUEST_ID;
    read_jsonl(path)
        .into_iter()
        .filter(|r| r["x_request_id"] != probe)
        .collect()
}

pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn stderr_text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A running `aiperf mock-server` child; killed when dropped.
pub struct MockChild {
    child: Option<Child>,
    pub addr: SocketAddr,
    /// `http://<addr>`, for `--url`.
    pub url: String,
}

impl MockChild {
    /// Starts `aiperf mock-server --port 0 <args>` and reads its address from the first
    /// stdout line.
    pub fn spawn(args: &[&str]) -> Self {
        Self::spawn_on(0, args)
    }

    /// Like `spawn`, on a given port.
    pub fn spawn_on(port: u16, args: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .args(["mock-server", "--port", &port.to_string()])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn aiperf mock-server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read first stdout line");
        let addr: SocketAddr = line
            .trim_end()
            .strip_prefix("aiperf mock-server listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .expect("socket address");
        MockChild {
            child: Some(child),
            addr,
            url: format!("http://{addr}"),
        }
    }

    /// Sends SIGTERM and waits for a clean exit (the graceful path that flushes records).
    pub fn terminate(mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("mock server did not exit after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for MockChild {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One SSE event and when its first byte arrived.
#[derive(Debug, Clone)]
pub struct Event {
    pub at: Instant,
    pub data: String,
}

#[derive(Debug)]
pub struct HttpResponse {
    /// Taken just before the request was written.
    pub sent_at: Instant,
    pub status: u16,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the last byte of the body arrived.
    pub body_done_at: Instant,
    /// Arrival time of each body byte (index into `reads`).
    body_read_index: Vec<u32>,
    reads: Vec<Instant>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body split into SSE events (`data: ` payloads), each stamped with the arrival of
    /// its first byte.
    pub fn events(&self) -> Vec<Event> {
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(pos) = find(&self.body[start..], b"\n\n") {
            let raw = std::str::from_utf8(&self.body[start..start + pos]).unwrap();
            let data = raw
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data line: {raw:?}"));
            out.push(Event {
                at: self.reads[self.body_read_index[start] as usize],
                data: data.to_owned(),
            });
            start += pos + 2;
        }
        assert_eq!(
            start,
            self.body.len(),
            "trailing bytes after the last event"
        );
        out
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Sends one request on a fresh connection (`Connection: close`) and reads the whole response.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let sent_at = Instant::now();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();

    // Read to EOF, remembering which read delivered each byte.
    let mut raw = Vec::new();
    let mut raw_read_index = Vec::new();
    let mut reads = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buf).expect("read response");
        if n == 0 {
            break;
        }
        reads.push(Instant::now());
        raw.extend_from_slice(&buf[..n]);
        raw_read_index.extend(std::iter::repeat_n(reads.len() as u32 - 1, n));
    }
    let head_end = find(&raw, b"\r\n\r\n").expect("end of headers") + 4;
    let head = std::str::from_utf8(&raw[..head_end]).unwrap();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));

    let mut body = Vec::new();
    let mut body_read_index = Vec::new();
    if chunked {
        let mut pos = head_end;
        loop {
            let line_end = pos + find(&raw[pos..], b"\r\n").expect("chunk size line");
            let size_hex = std::str::from_utf8(&raw[pos..line_end]).unwrap();
            let size = usize::from_str_radix(size_hex.split(';').next().unwrap().trim(), 16)
                .expect("chunk size");
            pos = line_end + 2;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&raw[pos..pos + size]);
            body_read_index.extend_from_slice(&raw_read_index[pos..pos + size]);
            pos += size + 2;
        }
    } else {
        body.extend_from_slice(&raw[head_end..]);
        body_read_index.extend_from_slice(&raw_read_index[head_end..]);
    }
    let body_done_at = body_read_index
        .last()
        .map(|&i| reads[i as usize])
        .unwrap_or(sent_at);
    HttpResponse {
        sent_at,
        status,
        headers,
        body,
        body_done_at,
        body_read_index,
        reads,
    }
}

/// POSTs a JSON body.
pub fn post_json(addr: SocketAddr, path: &str, body: &serde_json::Value) -> HttpResponse {
    request(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
}

/// A minimal OpenAI chat server on a thread that records each request's head (request line
/// and headers), for checking what the client sent. Answers every POST with one fixed,
/// non-streamed completion, with or without a `usage` object.
pub struct RecordingServer {
    pub addr: SocketAddr,
    heads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl RecordingServer {
    pub fn start(with_usage: bool) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().unwrap();
        let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let shared = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let heads = shared.clone();
                std::thread::spawn(move || serve_connection(stream, &heads, with_usage));
            }
        });
        RecordingServer { addr, heads }
    }

    /// The heads received so far, header names as sent.
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn serve_connection(stream: TcpStream, heads: &std::sync::Mutex<Vec<String>>, with_usage: bool) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let length = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        heads.lock().unwrap().push(head);
        let usage = if with_usage {
            r#","usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}"#
        } else {
            ""
        };
        let reply = format!(
            r#"{{"id":"c1","object":"chat.completion","model":"m","choices":[{{"index":0,"message":{{"role":"assistant","content":"one two three"}},"finish_reason":"stop"}}]{usage}}}"#
        );
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
            reply.len()
        );
        if out.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
