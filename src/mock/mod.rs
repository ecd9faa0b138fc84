//! The built-in OpenAI-compatible mock server (`aiperf mock-server`).
//!
//! It answers `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models` and
//! `GET /health` with vLLM's response shapes, and `POST /v1/responses` and
//! `POST /v1/messages` in the OpenAI Responses and Anthropic Messages shapes. Output is deterministic (see [`words`]), prompt
//! usage counts images the way Qwen2-VL does plus a chat-template cost per message (see
//! [`request`]), and tokens are released on an
//! absolute TTFT/ITL schedule (see [`body`]). `--record-requests` writes the server's own
//! timestamps for every request (see [`recorder`]), as ground truth for client measurements.
//! `--max-concurrency` queues generation requests beyond K (see [`admission`]).

pub mod admission;
pub mod audio;
pub mod body;
pub mod embeddings;
pub mod fault;
pub mod image;
pub mod image_generation;
pub mod messages;
pub mod metrics;
pub mod prefix_cache;
pub mod rankings;
pub mod recorder;
pub mod request;
pub mod response;
pub mod responses;
pub mod retrieval;
mod server;
pub mod solido;
pub mod tgi;
pub mod video;
pub mod video_generation;
pub mod words;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

/// Chat-template tokens per message by default: what llama-server charged a one-message
/// text request beyond its text (108 prompt tokens for 100 text tokens).
pub const DEFAULT_CHAT_TEMPLATE_TOKENS: u64 = 8;

/// `--eos-ratio`: a share of `max_tokens` in (0, 1].
fn eos_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err(format!(
            "'{s}' is not a share of max_tokens; give a number above 0 and at most 1, e.g. 0.5"
        )),
    }
}

/// `aiperf mock-server` options.
#[derive(Debug, Clone, clap::Args)]
pub struct MockServerArgs {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to bind; 0 picks a free port.
    #[arg(long, short = 'p', default_value_t = 8000)]
    pub port: u16,
    /// Time to first token in milliseconds.
    #[arg(long, short = 't', default_value_t = 20.0)]
    pub ttft: f64,
    /// Inter-token latency in milliseconds.
    #[arg(long, default_value_t = 5.0)]
    pub itl: f64,
    /// Prefill cost: milliseconds added to the time to first token per prompt token, so
    /// TTFT grows with the input length (0 = off).
    #[arg(long, value_name = "MS", default_value_t = 0.0)]
    pub ttft_per_prompt_token: f64,
    /// Batching cost: milliseconds added to the inter-token latency per other request
    /// being served when a request is admitted, so ITL grows with load (0 = off).
    #[arg(long, value_name = "MS", default_value_t = 0.0)]
    pub itl_per_running: f64,
    /// Zero latency: sets --ttft and --itl to 0.
    #[arg(long, short = 'f')]
    pub fast: bool,
    /// Model name listed by /v1/models and used when a request names none (any requested
    /// model is accepted and echoed).
    #[arg(long, default_value = "mock-model")]
    pub model: String,
    /// Write one JSON line per request with the server's own timestamps to FILE.
    #[arg(long, value_name = "FILE")]
    pub record_requests: Option<PathBuf>,
    /// Seed for latency jitter.
    #[arg(long, default_value_t = 0)]
    pub random_seed: u64,
    /// Coefficient of variation of lognormal TTFT jitter (mean 1); 0 = off.
    #[arg(long, default_value_t = 0.0)]
    pub ttft_jitter_cv: f64,
    /// Coefficient of variation of lognormal ITL jitter (mean 1); 0 = off.
    #[arg(long, default_value_t = 0.0)]
    pub itl_jitter_cv: f64,
    /// Prompt tokens counted for each http(s) image URL (such images are not fetched).
    #[arg(long, default_value_t = 0)]
    pub remote_image_tokens: u64,
    /// Prompt tokens the chat template adds per chat message (role markers and separators),
    /// counted in `usage.prompt_tokens` as a real server's template is; 0 = none.
    #[arg(long, default_value_t = DEFAULT_CHAT_TEMPLATE_TOKENS)]
    pub chat_template_tokens: u64,
    /// Largest prompt + output length accepted, as vLLM's --max-model-len.
    #[arg(long, default_value_t = 131_072)]
    pub max_model_len: u64,
    /// Stop at a simulated end-of-sequence token after this share of `max_tokens` (rounded,
    /// at least 1 and at least `min_tokens`), finishing with `stop`, unless the request sets
    /// `ignore_eos`; 1 = always generate `max_tokens`.
    #[arg(long, default_value_t = 1.0, value_parser = eos_ratio)]
    pub eos_ratio: f64,
    /// Serve at most K chat/completions requests at once; later ones wait in a
    /// first-come-first-served queue and their time to first token starts when they are
    /// admitted, so latency grows with load past K (default: no limit).
    #[arg(long, value_name = "K", value_parser = admission::parse_max_concurrency)]
    pub max_concurrency: Option<usize>,
    /// Runtime worker threads for the standalone server (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,

    /// Keep a prefix cache of N blocks of 16 prompt tokens (least recently used evicted) and
    /// report the leading prompt tokens found in it as
    /// `usage.prompt_tokens_details.cached_tokens` (and `cached_tokens` in
    /// --record-requests). Off by default.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub prefix_cache_blocks: Option<u64>,

    /// Fault injection (boxed: rarely used, and keeps the argument struct small).
    #[command(flatten)]
    pub faults: Box<fault::FaultArgs>,
}

impl MockServerArgs {
    /// Every flag at its default, on 127.0.0.1 with a free port: the server
    /// `aiperf profile --mock-server` starts. The defaults are the flags' own, read through
    /// clap, so they are written once.
    pub fn in_process() -> Self {
        #[derive(clap::Parser)]
        struct Flags {
            #[command(flatten)]
            args: MockServerArgs,
        }
        let mut args = <Flags as clap::Parser>::parse_from(["mock-server"]).args;
        args.host = "127.0.0.1".into();
        args.port = 0;
        args
    }

    /// [`in_process`](Self::in_process) with `--fast`: no latency.
    pub fn fast_defaults() -> Self {
        MockServerArgs {
            fast: true,
            ..Self::in_process()
        }
    }

    /// The fault percentages, validated.
    pub fn fault_rates(&self) -> anyhow::Result<fault::FaultRates> {
        let f = &self.faults;
        let rates = fault::FaultRates {
            error: f.error_rate,
            rate_limit: f.rate_limit_rate,
            reset: f.reset_rate,
            truncate: f.truncate_rate,
            malformed: f.malformed_rate,
            error_event: f.error_event_rate,
            stall: f.stall_rate,
        };
        rates.validate()?;
        Ok(rates)
    }

    /// TTFT and ITL as durations (both zero with `--fast`).
    fn delays(&self) -> anyhow::Result<(Duration, Duration)> {
        if self.fast {
            return Ok((Duration::ZERO, Duration::ZERO));
        }
        let ms = |name: &str, v: f64| {
            anyhow::ensure!(
                v.is_finite() && v >= 0.0,
                "--{name} must be a number >= 0, got {v}"
            );
            // Whole nanoseconds, rounded, so "30" is exactly 30 ms.
            Ok(Duration::from_nanos((v * 1e6).round() as u64))
        };
        Ok((ms("ttft", self.ttft)?, ms("itl", self.itl)?))
    }

    /// --ttft-per-prompt-token and --itl-per-running in nanoseconds (zero with `--fast`).
    fn load_costs(&self) -> anyhow::Result<(f64, f64)> {
        if self.fast {
            return Ok((0.0, 0.0));
        }
        let ns = |name: &str, v: f64| {
            anyhow::ensure!(
                v.is_finite() && v >= 0.0,
                "--{name} must be a number >= 0, got {v}"
            );
            Ok(v * 1e6)
        };
        Ok((
            ns("ttft-per-prompt-token", self.ttft_per_prompt_token)?,
            ns("itl-per-running", self.itl_per_running)?,
        ))
    }
}

/// Blocking entry point for `aiperf mock-server`: builds a tokio runtime, binds, prints
/// `aiperf mock-server listening on http://<ip>:<port>` as the first stdout line and serves
/// until Ctrl-C or SIGTERM.
pub fn run(args: MockServerArgs) -> Result<(), MockError> {
    // Bad flags are found before anything listens.
    args.fault_rates()
        .map_err(|e| MockError::Input(e.to_string()))?;
    if args.workers == Some(0) {
        return Err(MockError::Input("--workers: give 1 or more".into()));
    }
    Ok(serve(args)?)
}

/// Why `aiperf mock-server` stopped: a bad flag (exit 2) or anything else (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    #[error("{0}")]
    Input(String),
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

fn serve(args: MockServerArgs) -> anyhow::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.workers {
        builder.worker_threads(n);
    }
    let runtime = builder
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    runtime.block_on(async move {
        let server = start(args).await?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "aiperf mock-server listening on {}", server.url())?;
        out.flush()?;
        drop(out);
        wait_for_stop_signal().await;
        server.shutdown().await;
        anyhow::Ok(())
    })?;
    // Connections still open after the grace period are dropped with the runtime.
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}

async fn wait_for_stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Starts the server on the current tokio runtime and returns once the socket is bound.
pub async fn start(args: MockServerArgs) -> anyhow::Result<MockServer> {
    // The prompt-counting tokenizer is built before the first request can arrive, so no
    // request waits for it and no timing is skewed by it.
    tokio::task::spawn_blocking(|| request::text_tokens("warm up"))
        .await
        .map_err(|e| anyhow::anyhow!("cannot build the builtin tokenizer: {e}"))?;
    server::start(args).await
}

/// A running mock server.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    recorder: Option<recorder::RecorderHandle>,
    load: std::sync::Arc<admission::LoadGauges>,
}

/// How long `shutdown` waits for in-flight responses to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl MockServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests being served and requests queued for a slot (`--max-concurrency`), live.
    pub fn load(&self) -> &admission::LoadGauges {
        &self.load
    }

    /// `http://<ip>:<port>` without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, lets in-flight responses finish (up to 5 s), then flushes
    /// `--record-requests`.
    pub async fn shutdown(self) {
        let _ = self.stop.send(());
        let mut task = self.task;
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
            .await
            .is_err()
        {
            task.abort();
            let _ = task.await;
        }
        if let Some(rec) = self.recorder {
            match tokio::task::spawn_blocking(move || rec.finish()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!("writing the request record failed: {e}"),
                Err(e) => tracing::warn!("request record writer failed: {e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: MockServerArgs,
    }

    fn parse(argv: &[&str]) -> MockServerArgs {
        Cli::try_parse_from(std::iter::once("mock").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn defaults_and_delays() {
        let a = parse(&[]);
        assert_eq!((a.host.as_str(), a.port), ("127.0.0.1", 8000));
        assert_eq!(
            a.delays().unwrap(),
            (Duration::from_millis(20), Duration::from_millis(5))
        );
        let a = parse(&["--ttft", "0.5", "--itl", "30"]);
        assert_eq!(
            a.delays().unwrap(),
            (Duration::from_micros(500), Duration::from_millis(30))
        );
        let a = parse(&["--ttft", "50", "--fast"]);
        assert_eq!(a.delays().unwrap(), (Duration::ZERO, Duration::ZERO));
        assert!(parse(&["--ttft=-1"]).delays().is_err());
        assert!(parse(&["--itl", "NaN"]).delays().is_err());
        let f = MockServerArgs::fast_defaults();
        assert_eq!((f.port, f.fast), (0, true));
        assert_eq!(f.delays().unwrap(), (Duration::ZERO, Duration::ZERO));
    }
}
