//! The client against a real llama.cpp `llama-server`: a tiny random-weight model with Qwen2's
//! vocabulary and a LLaVA-style vision projector (256 tokens per image), made by
//! `.ci/llama_models.py`. `.ci/run` builds the server and models and says where they are
//! (`AIPERF_LLAMA_SERVER`, `AIPERF_LLAMA_MODELS`, `AIPERF_QWEN2_TOKENIZER`); without them these
//! tests say so and pass, unless `AIPERF_REQUIRE_LLAMA=1` (CI), where they fail.
//!
//! llama-server closes each connection right after a streamed response although the
//! response says keep-alive, which is what these runs must survive without losing a request.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::{read_json, read_jsonl, request, run_profile};

/// One server at a time: each test reads the server's token counters around its runs, and
/// the machine has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

struct Setup {
    server: PathBuf,
    models: PathBuf,
    tokenizer: PathBuf,
}

/// Where CI put the server, the models and the tokenizer; `None` (after saying why) when
/// they are not here and not required.
fn setup() -> Option<Setup> {
    let var = |name: &str| std::env::var_os(name).map(PathBuf::from);
    match (
        var("AIPERF_LLAMA_SERVER"),
        var("AIPERF_LLAMA_MODELS"),
        var("AIPERF_QWEN2_TOKENIZER"),
    ) {
        (Some(server), Some(models), Some(tokenizer)) => Some(Setup {
            server,
            models,
            tokenizer,
        }),
        _ if std::env::var("AIPERF_REQUIRE_LLAMA").as_deref() == Ok("1") => {
            panic!(
                "AIPERF_REQUIRE_LLAMA=1 but the llama-server setup is missing (.ci/llama_server.sh)"
            )
        }
        _ => {
            eprintln!(
                "skipped: no llama-server here (source .ci/llama_server.sh to build one and run these)"
            );
            None
        }
    }
}

/// A running llama-server, killed when dropped.
struct LlamaServer {
    child: Child,
    addr: SocketAddr,
    url: String,
    log: PathBuf,
}

impl LlamaServer {
    /// Starts the server as a user would for this model (4 slots, one thread, metrics on)
    /// and waits until `/health` says it is ready.
    fn start(setup: &Setup, dir: &Path) -> LlamaServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = dir.join("llama-server.log");
        let child = Command::new(&setup.server)
            .arg("-m")
            .arg(setup.models.join("text.gguf"))
            .arg("--mmproj")
            .arg(setup.models.join("mmproj.gguf"))
            .args(["-a", "Qwen/Qwen2-VL-2B-Instruct", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .args([
                "-c",
                "16384",
                "-np",
                "4",
                "-t",
                "1",
                "--no-webui",
                "--metrics",
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start llama-server");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut server = LlamaServer {
            child,
            addr,
            url: format!("http://{addr}"),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("llama-server exited ({status}): {}", server.log_text());
            }
            let ready = std::net::TcpStream::connect(addr).is_ok()
                && request(addr, "GET", "/health", &[], b"").status == 200;
            if ready {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "llama-server not ready: {}",
                server.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A counter of the server's own `/metrics`.
    fn counter(&self, name: &str) -> f64 {
        let text = request(self.addr, "GET", "/metrics", &[], b"").text();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    }

    /// Prompt tokens the server took in (computed and from its cache) and tokens it wrote.
    fn tokens(&self) -> (f64, f64) {
        let prompt = self.counter("llamacpp:prompt_tokens_total")
            + self.counter("llamacpp:prompt_tokens_cached_total");
        (prompt, self.counter("llamacpp:tokens_predicted_total"))
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The README's first command against the server instead of the mock, with the Qwen2
/// tokenizer (and Qwen2-VL's chat template) so token counts are the server's, and `extra`.
fn seed_command(server: &LlamaServer, setup: &Setup, dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "--model",
        "Qwen/Qwen2-VL-2B-Instruct",
        "--endpoint-type",
        "chat",
        "--image-width-mean",
        "512",
        "--image-height-mean",
        "512",
        "--synthetic-input-tokens-mean",
        "100",
        "--output-tokens-mean",
        "100",
        "--streaming",
        "--url",
        &server.url,
        "--tokenizer",
        setup.tokenizer.to_str().unwrap(),
        "--artifact-dir",
        dir.to_str().unwrap(),
        "--ui",
        "none",
    ];
    args.extend_from_slice(extra);
    let out = run_profile(&args);
    Output {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    }
}

struct Output {
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

/// Every one of `n` requests in `dir` succeeded; returns the summed usage (prompt,
/// completion) of its records.
fn all_succeeded(dir: &Path, n: usize, out: &Output) -> (f64, f64) {
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert_eq!(records.len(), n, "{}", out.stderr);
    let failed: Vec<&Value> = records.iter().filter(|r| !r["error"].is_null()).collect();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        failed[0]["error"]
    );
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    assert!(summary.get("error_request_count").is_none(), "{summary}");
    assert!(!out.stdout.contains("FAILED REQUESTS"), "{}", out.stdout);
    let sum = |key: &str| -> f64 {
        records
            .iter()
            .map(|r| r["metrics"][key]["value"].as_f64().unwrap())
            .sum()
    };
    (sum("usage_prompt_tokens"), sum("usage_completion_tokens"))
}

#[test]
fn the_seed_command_loses_no_request_and_counts_what_the_server_counts() {
    let Some(setup) = setup() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let server = LlamaServer::start(&setup, tmp.path());
    for concurrency in ["4", "8"] {
        let dir = tmp.path().join(format!("c{concurrency}"));
        let before = server.tokens();
        let out = seed_command(
            &server,
            &setup,
            &dir,
            &["--request-count", "100", "--concurrency", concurrency],
        );
        let (prompt, completion) = all_succeeded(&dir, 100, &out);
        let after = server.tokens();
        // The server's own counters rose by exactly what the records say it charged.
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            (prompt, completion),
            "c={concurrency}"
        );
        assert_eq!(completion, 100.0 * 100.0);
        // Each 512x512 image is 256 tokens to this projector; the rest of the prompt is the
        // text and the chat template, counted with the same vocabulary and template.
        for r in read_jsonl(&dir.join("profile_export.jsonl")) {
            assert_eq!(r["metrics"]["image_token_count"]["value"], 256, "{r}");
        }
        let summary = read_json(&dir.join("profile_export_aiperf.json"));
        let resent = summary["resent_requests"].as_u64().unwrap();
        eprintln!(
            "c={concurrency}: 100 requests, none lost, {resent} sent again; {}",
            out.stderr
                .lines()
                .find(|l| l.contains("closes connections right after"))
                .unwrap_or("the client did not learn that the server closes connections")
        );
    }
}

#[test]
fn a_concurrency_sweep_loses_no_request() {
    let Some(setup) = setup() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let server = LlamaServer::start(&setup, tmp.path());
    let base = tmp.path().join("sweep");
    let out = seed_command(
        &server,
        &setup,
        &base,
        &["--request-count", "12", "--concurrency", "1,2,4"],
    );
    for c in [1, 2, 4] {
        all_succeeded(&base.join(format!("concurrency_{c}")), 12, &out);
    }
    // The sweep table's Errors column: 0 at every point.
    let cells = |l: &str| -> Vec<String> {
        l.split(['│', '┃'])
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect()
    };
    let table = out
        .stdout
        .split_once("NVIDIA AIPerf | Sweep Summary")
        .expect("the sweep table")
        .1;
    let header = table.lines().find(|l| l.contains("┃ concurrency")).unwrap();
    let errors = cells(header).iter().position(|c| c == "Errors").unwrap();
    let rows: Vec<Vec<String>> = table
        .lines()
        .take_while(|l| !l.starts_with('└'))
        .filter(|l| l.starts_with('│'))
        .map(cells)
        .collect();
    assert_eq!(rows.len(), 3, "{}", out.stdout);
    assert!(rows.iter().all(|r| r[errors] == "0"), "{rows:?}");
}
