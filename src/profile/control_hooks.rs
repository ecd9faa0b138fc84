//! The control requests around a run (AIPerf's endpoint control hooks): a KV-cache reset
//! POSTed to every server before the run, retried while the server says it is busy; a
//! profiler start before the profiling phase and its stop after it.

use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::config::Posts;
use crate::transport::HttpClient;

/// Answers that mean "busy, try again": the reset is retried on them and on no answer.
const BUSY: [u16; 4] = [409, 423, 429, 503];
/// How long a reset is retried in all, and the backoff between tries.
const RESET_RETRY_FOR: Duration = Duration::from_secs(60);
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// Why a control request did not succeed, and whether trying again may help.
struct Failed {
    why: String,
    busy: bool,
}

async fn post(client: &HttpClient, uri: &http::Uri, timeout: Duration) -> Result<(), Failed> {
    match client.probe(http::Method::POST, uri.clone(), timeout).await {
        Ok((status, _)) if (200..300).contains(&status) => Ok(()),
        Ok((status, body)) => {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
            let said = match text.trim() {
                "" => String::new(),
                t => format!(" ({t})"),
            };
            Err(Failed {
                why: format!("POST {uri} answered HTTP {status}{said}"),
                busy: BUSY.contains(&status),
            })
        }
        Err(e) => Err(Failed {
            why: format!("POST {uri}: {e}"),
            busy: true,
        }),
    }
}

/// `--reset-kv-cache`: every server's reset, in turn; a busy server is asked again with a
/// growing pause for up to a minute, any other failure ends the run before it starts.
pub async fn reset_kv_cache(client: &HttpClient, posts: &Posts) -> Result<(), String> {
    for uri in &posts.uris {
        let deadline = Instant::now() + RESET_RETRY_FOR;
        let mut backoff = FIRST_BACKOFF;
        loop {
            match post(client, uri, posts.timeout).await {
                Ok(()) => {
                    info!("KV cache reset: POST {uri}");
                    break;
                }
                Err(f) if f.busy && Instant::now() + backoff < deadline => {
                    warn!("KV cache reset: {}; trying again in {backoff:?}", f.why);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Err(f) => {
                    return Err(format!(
                        "--reset-kv-cache: {} (check --reset-kv-cache-path; vLLM serves /reset_prefix_cache)",
                        f.why
                    ));
                }
            }
        }
    }
    Ok(())
}

/// `--server-profiler`: every server's profiler start. When one fails, the ones started
/// are stopped again and the run does not start.
pub async fn start_profiler(
    client: &HttpClient,
    (start, stop): &(Posts, Posts),
) -> Result<(), String> {
    for (i, uri) in start.uris.iter().enumerate() {
        if let Err(f) = post(client, uri, start.timeout).await {
            for stop_uri in stop.uris[..i].iter().rev() {
                if let Err(g) = post(client, stop_uri, stop.timeout).await {
                    warn!("server profiler: stopping it again: {}", g.why);
                }
            }
            return Err(format!(
                "--server-profiler: {} (check --server-profiler-start-path; vLLM serves /start_profile when started with a profiler directory)",
                f.why
            ));
        }
        info!("Server profiler started: POST {uri}");
    }
    Ok(())
}

/// Every server's profiler stop; a failure is a warning (the results stand).
pub async fn stop_profiler(client: &HttpClient, (_, stop): &(Posts, Posts)) {
    for uri in &stop.uris {
        match post(client, uri, stop.timeout).await {
            Ok(()) => info!("Server profiler stopped: POST {uri}"),
            Err(f) => warn!("server profiler stop failed: {}", f.why),
        }
    }
}
