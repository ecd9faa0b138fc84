//! `--server-metrics`, `--no-server-metrics` and `--server-metrics-formats`: which
//! Prometheus endpoints are scraped during the run, how often, and which files are written.

use std::time::Duration;

use super::endpoint::{basic_auth, scrape_credentials};
use super::{ConfigError, ScrapeOptions, config_error};
use crate::cli::collectors::CollectorArgs;
use crate::export::ServerMetricsFormats;
use crate::scrape::{ScrapeTiming, metrics_url};

/// The environment variable that sets the scrape interval in seconds (AIPerf's name).
pub const INTERVAL_ENV: &str = "AIPERF_SERVER_METRICS_COLLECTION_INTERVAL";
/// AIPerf's default scrape interval.
const DEFAULT_INTERVAL: Duration = Duration::from_millis(333);
/// The most one scrape may take. AIPerf allows 30 s; 5 s keeps a hung endpoint from
/// holding up the start of a run for long, and a healthy one answers in milliseconds.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// The `/metrics` URL of a `--url` value: its query and credentials left out (scrapes carry
/// none, and the URL is shown in logs and files), then AIPerf's normalisation.
pub fn server_metrics_url_of(base: &str) -> String {
    let base = base.trim().split('?').next().unwrap_or("");
    let (scheme, rest) = match base.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), base),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..authority_end].rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    metrics_url(&format!("{scheme}{rest}"))
}

/// The scrape configuration (`None`: off) and the files to write.
pub(super) fn server_metrics(
    a: &CollectorArgs,
    urls: &[String],
    interval_env: Option<&str>,
) -> Result<(Option<ScrapeOptions>, ServerMetricsFormats), ConfigError> {
    let formats = formats(a.server_metrics_formats.as_deref())?;
    if a.no_server_metrics {
        if a.server_metrics.is_some() {
            return Err(config_error(
                "--no-server-metrics and --server-metrics contradict each other; keep one \
                 (--server-metrics adds endpoints to the default, --no-server-metrics scrapes none)",
            ));
        }
        return Ok((None, formats));
    }
    let interval = match interval_env {
        None => DEFAULT_INTERVAL,
        Some(v) => match v.trim().parse::<f64>() {
            Ok(s) if s.is_finite() && (0.01..=3600.0).contains(&s) => Duration::from_secs_f64(s),
            _ => {
                return Err(config_error(format!(
                    "{INTERVAL_ENV}={v:?}: not a scrape interval; give seconds between 0.01 and \
                     3600, e.g. 0.333 (the default) or 1"
                )));
            }
        },
    };
    let mut out: Vec<String> = Vec::new();
    let mut push = |u: String| {
        if !out.contains(&u) {
            out.push(u);
        }
    };
    for u in urls {
        push(server_metrics_url_of(u));
    }
    let mut auth = Vec::new();
    for item in a.server_metrics.iter().flatten() {
        // Credentials are taken out first: nothing below may show them.
        let (item, userinfo) = scrape_credentials(item.trim());
        let item = item.as_str();
        // AIPerf's rule: only items that look like a URL or host:port are endpoints.
        if item.starts_with("http") || item.contains(':') {
            let url = metrics_url(item);
            if let Some(value) = userinfo.as_ref().and_then(basic_auth) {
                auth.push((url.clone(), value));
            }
            push(url);
        } else if !item.is_empty() {
            return Err(config_error(format!(
                "--server-metrics {item:?}: not an endpoint; give host:port or a URL such as \
                 http://node1:8081/metrics"
            )));
        }
    }
    let timing = ScrapeTiming {
        interval,
        timeout: SCRAPE_TIMEOUT,
    };
    let options = ScrapeOptions {
        urls: out,
        auth,
        timing,
    };
    Ok((Some(options), formats))
}

/// `--network-latency-*`: the round trip to the server subtracted from the latencies that
/// start at the send, as `network_adjusted_*` metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NetworkLatency {
    /// `--network-latency-mean`: a known mean in ms; no probes.
    Fixed { mean_ms: f64 },
    /// `--network-latency-automatic`: a TCP connect to each server every `interval` during
    /// profiling.
    Probed { interval: Duration },
}

/// AIPerf's default probe interval.
const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(1);

/// The calibration asked for (`None`: off), with AIPerf's rules between the three flags.
pub(super) fn network_latency(a: &CollectorArgs) -> Result<Option<NetworkLatency>, ConfigError> {
    let interval = a.network_latency_ping_interval;
    if let Some(s) = interval
        && !(s.is_finite() && s > 0.0 && s <= 86_400.0)
    {
        return Err(config_error(format!(
            "--network-latency-ping-interval {s}: give the seconds between probes, above 0 \
             (e.g. 0.5; the default is 1)"
        )));
    }
    match (a.network_latency_automatic, a.network_latency_mean) {
        (true, Some(_)) => Err(config_error(
            "--network-latency-automatic and --network-latency-mean exclude each other: \
             automatic measures the round trip, mean gives it; keep one",
        )),
        (false, Some(ms)) => {
            if !(ms.is_finite() && ms >= 0.0) {
                return Err(config_error(format!(
                    "--network-latency-mean {ms}: give the mean round trip in ms, 0 or more"
                )));
            }
            if interval.is_some() {
                return Err(config_error(
                    "--network-latency-ping-interval only applies with \
                     --network-latency-automatic, not with --network-latency-mean; drop it",
                ));
            }
            Ok(Some(NetworkLatency::Fixed { mean_ms: ms }))
        }
        (true, None) => Ok(Some(NetworkLatency::Probed {
            interval: interval.map_or(DEFAULT_PING_INTERVAL, Duration::from_secs_f64),
        })),
        (false, None) => match interval {
            Some(_) => Err(config_error(
                "--network-latency-ping-interval only applies with \
                 --network-latency-automatic; add it or drop the interval",
            )),
            None => Ok(None),
        },
    }
}

fn formats(given: Option<&[String]>) -> Result<ServerMetricsFormats, ConfigError> {
    let Some(given) = given else {
        return Ok(ServerMetricsFormats::default());
    };
    let mut f = ServerMetricsFormats {
        json: false,
        csv: false,
        jsonl: false,
    };
    for v in given {
        match v.trim().to_ascii_lowercase().as_str() {
            "json" => f.json = true,
            "csv" => f.csv = true,
            "jsonl" => f.jsonl = true,
            "parquet" => {
                return Err(config_error(
                    "--server-metrics-formats parquet: this build writes no Parquet files; use \
                     json, csv and/or jsonl (jsonl has every scrape, for your own analysis)",
                ));
            }
            other => {
                return Err(config_error(format!(
                    "--server-metrics-formats {other:?}: unknown format; give json, csv or jsonl"
                )));
            }
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(sm: Option<&[&str]>, no: bool, formats: Option<&[&str]>) -> CollectorArgs {
        let v = |x: Option<&[&str]>| x.map(|s| s.iter().map(|s| s.to_string()).collect());
        CollectorArgs {
            server_metrics: v(sm),
            no_server_metrics: no,
            server_metrics_formats: v(formats),
            ..Default::default()
        }
    }

    #[test]
    fn endpoints_default_to_every_url_and_extras_are_normalised_and_deduplicated() {
        let urls = vec![
            "localhost:8000".to_string(),
            "http://h:9000/v1/".to_string(),
        ];
        let (o, f) = server_metrics(
            &args(Some(&["node1:8081", "http://localhost:8000"]), false, None),
            &urls,
            None,
        )
        .unwrap();
        let o = o.unwrap();
        assert_eq!(
            o.urls,
            [
                "http://localhost:8000/metrics",
                "http://h:9000/v1/metrics",
                "http://node1:8081/metrics"
            ]
        );
        assert_eq!(o.timing.interval, Duration::from_millis(333));
        assert!(f.json && f.csv && !f.jsonl);
        assert_eq!(
            server_metrics_url_of("http://me:p%40ss@h:1/v1?k=v"),
            "http://h:1/v1/metrics"
        );
        let (o, _) = server_metrics(&args(None, false, None), &urls, Some("1")).unwrap();
        assert_eq!(o.unwrap().timing.interval, Duration::from_secs(1));
    }

    #[test]
    fn contradictions_and_bad_values_are_refused() {
        let u = vec!["localhost:8000".to_string()];
        let e = |a: CollectorArgs, env: Option<&str>| server_metrics(&a, &u, env).unwrap_err().0;
        assert!(e(args(Some(&[]), true, None), None).contains("--no-server-metrics"));
        assert!(e(args(None, false, Some(&["parquet"])), None).contains("Parquet"));
        assert!(e(args(None, false, Some(&["xml"])), None).contains("unknown format"));
        assert!(e(args(None, false, None), Some("0")).contains(INTERVAL_ENV));
        assert!(e(args(Some(&["nohost"]), false, None), None).contains("not an endpoint"));
        let (o, _) = server_metrics(&args(None, true, None), &u, None).unwrap();
        assert!(o.is_none());
    }
}
