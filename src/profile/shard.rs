//! A shard's start: its clock offset against the server, the wait for `--start-at`, and
//! the `shard` block of its JSON export (what `aiperf merge` checks and shows).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::Uri;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{info, warn};

use crate::clock::iso8601_utc;
use crate::config::ProfileConfig;

/// Gap between two probes of the server's `Date` header.
const PROBE_GAP: Duration = Duration::from_millis(20);
/// Probes stop after this long without seeing the header's second change.
const PROBE_SPAN: Duration = Duration::from_millis(1300);
/// Each probe may take this long.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// This machine's wall clock minus the server's, measured from its `Date` header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockOffset {
    pub offset_ns: i64,
    /// Half the width of the interval the true offset lies in.
    pub uncertainty_ns: i64,
    pub probes: u32,
}

/// What a sharded (or `--start-at`) run knows before its first send.
pub(super) struct Start {
    /// The shared start on this machine's monotonic clock.
    pub at: Option<Instant>,
    pub clock_offset: Result<ClockOffset, String>,
}

fn wall_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Measures the clock offset, then waits (with a line every few seconds) until shortly
/// before `--start-at`; the load's precise timer takes the last stretch.
pub(super) async fn prepare(cfg: &ProfileConfig) -> Option<Start> {
    if cfg.shard.shard.is_none() && cfg.shard.start_at_wall_ns.is_none() {
        return None;
    }
    let clock_offset = measure_offset(cfg.request_uri()).await;
    match &clock_offset {
        Ok(o) => info!(
            "Clock offset against the server's Date header: {:+.1} ms (+/- {:.1} ms, {} probes)",
            o.offset_ns as f64 / 1e6,
            o.uncertainty_ns as f64 / 1e6,
            o.probes
        ),
        Err(why) => info!("Clock offset against the server not measured: {why}"),
    }
    let at = cfg.shard.start_at_wall_ns.map(|start_ns| {
        let now = wall_now_ns();
        if start_ns <= now {
            warn!(
                "--start-at {} passed {:.3} s ago: starting now",
                iso8601_utc(start_ns),
                (now - start_ns) as f64 / 1e9
            );
            Instant::now()
        } else {
            Instant::now() + Duration::from_nanos(start_ns - now)
        }
    });
    if let (Some(at), Some(start_ns)) = (at, cfg.shard.start_at_wall_ns) {
        let mut next_line = Instant::now();
        while at.saturating_duration_since(Instant::now()) > Duration::from_millis(200) {
            if Instant::now() >= next_line {
                info!(
                    "Waiting for --start-at {}: {:.1} s to go",
                    iso8601_utc(start_ns),
                    at.saturating_duration_since(Instant::now()).as_secs_f64()
                );
                next_line = Instant::now() + Duration::from_secs(5);
            }
            let step = at - Duration::from_millis(150);
            tokio::time::sleep_until(step.min(Instant::now() + Duration::from_secs(1)).into())
                .await;
        }
    }
    Some(Start { at, clock_offset })
}

/// One probe: (local wall ns before the send, local wall ns after the answer, the
/// server's `Date` in epoch seconds).
async fn probe(uri: &Uri) -> Result<(u64, u64, u64), String> {
    let host = uri.host().ok_or("the URL has no host")?;
    let port = uri.port_u16().unwrap_or(80);
    let host_header = match uri.port_u16() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let addr = format!(
        "{}:{port}",
        host.trim_start_matches('[').trim_end_matches(']')
    );
    let exchange = async {
        let mut conn = tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let _ = conn.set_nodelay(true);
        let request = format!(
            "GET / HTTP/1.1\r\nHost: {host_header}\r\nConnection: close\r\nAccept-Encoding: identity\r\n\r\n"
        );
        let sent = wall_now_ns();
        conn.write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut head = Vec::with_capacity(1024);
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
            let n = conn.read(&mut buf).await.map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let received = wall_now_ns();
        let text = String::from_utf8_lossy(&head);
        let date = text
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("date")
                    .then(|| value.trim().to_string())
            })
            .ok_or("the server's answer has no Date header")?;
        let when = httpdate::parse_http_date(&date)
            .map_err(|_| format!("the server's Date header {date:?} is not an HTTP date"))?;
        let secs = when
            .duration_since(UNIX_EPOCH)
            .map_err(|_| "the server's Date is before 1970")?
            .as_secs();
        Ok((sent, received, secs))
    };
    tokio::time::timeout(PROBE_TIMEOUT, exchange)
        .await
        .map_err(|_| "the server did not answer within 2 s".to_string())?
}

/// The server's `Date` has whole seconds: probes a few times a second until its second
/// changes between two probes. The server's clock passed that second somewhere between the
/// first probe's send and the second's answer; the middle of that span is the estimate and
/// half its width the uncertainty (about half the probe gap plus a round trip).
async fn measure_offset(uri: &Uri) -> Result<ClockOffset, String> {
    if uri.scheme_str() == Some("https") {
        return Err("https servers are not probed".into());
    }
    let deadline = Instant::now() + PROBE_SPAN;
    let mut previous: Option<(u64, u64, u64)> = None;
    let mut probes = 0u32;
    while Instant::now() < deadline {
        let p = probe(uri).await?;
        probes += 1;
        if let Some((sent, _, secs)) = previous
            && p.2 == secs + 1
        {
            let (from, to) = (sent, p.1);
            let boundary_local = (from + to) / 2;
            let boundary_server = p.2 * 1_000_000_000;
            return Ok(ClockOffset {
                offset_ns: boundary_local as i64 - boundary_server as i64,
                uncertainty_ns: ((to - from) / 2) as i64,
                probes,
            });
        }
        previous = Some(p);
        tokio::time::sleep(PROBE_GAP).await;
    }
    Err(format!(
        "the server's Date header did not change second over {probes} probes"
    ))
}

/// What every shard of one plan has in common: the resolved configuration (without where
/// the artifacts go), the seed (inside it) and the shard count. Two runs with the same hash
/// drew the same plan.
pub fn plan_hash(input_config: &Value, shard_count: u64) -> String {
    let mut cfg = input_config.clone();
    if let Some(a) = cfg.get_mut("artifacts").and_then(Value::as_object_mut) {
        a.remove("dir");
    }
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(&cfg).expect("JSON into memory"));
    h.update(format!("shards={shard_count}").as_bytes());
    h.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The `shard` block of the JSON export.
pub(super) fn block(
    cfg: &ProfileConfig,
    input_config: &Value,
    start: &Start,
    schedule_start_wall_ns: u64,
) -> Value {
    let (index, count) = cfg.shard.shard.map_or((0, 1), |s| (s.index, s.count));
    let clock_offset = match &start.clock_offset {
        Ok(o) => json!({
            "reference": "server Date header",
            "offset_ms": o.offset_ns as f64 / 1e6,
            "uncertainty_ms": o.uncertainty_ns as f64 / 1e6,
            "probes": o.probes,
        }),
        Err(why) => json!({"reference": null, "not_measured": why}),
    };
    json!({
        "index": index,
        "count": count,
        "plan_hash": plan_hash(input_config, count),
        "start_at": cfg.shard.start_at_wall_ns.map(iso8601_utc),
        "start_at_ns": cfg.shard.start_at_wall_ns,
        "schedule_start_ns": schedule_start_wall_ns,
        "clock_offset": clock_offset,
        // What `aiperf merge` needs to recompute every metric as this run did.
        "goodput": cfg.goodput,
        "slice_duration_ns": cfg.export.slice_duration_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_hash_ignores_the_artifact_directory_only() {
        let a = json!({"random_seed": 1, "artifacts": {"dir": "a/shard-0"}});
        let b = json!({"random_seed": 1, "artifacts": {"dir": "b/shard-3"}});
        let c = json!({"random_seed": 2, "artifacts": {"dir": "a/shard-0"}});
        assert_eq!(plan_hash(&a, 4), plan_hash(&b, 4));
        assert_ne!(plan_hash(&a, 4), plan_hash(&c, 4));
        assert_ne!(plan_hash(&a, 4), plan_hash(&a, 3));
    }

    #[tokio::test]
    async fn offset_against_a_local_server_is_small_and_bounded() {
        let server = crate::mock::start(crate::mock::MockServerArgs::in_process())
            .await
            .unwrap();
        let uri: Uri = server.url().parse().unwrap();
        let o = measure_offset(&uri).await.unwrap();
        // Same machine, same clock: the true offset is 0, inside the stated bound.
        assert!(o.offset_ns.abs() <= o.uncertainty_ns + 1_000_000, "{o:?}");
        assert!(o.uncertainty_ns < 100_000_000, "{o:?}");
        server.shutdown().await;
    }
}
