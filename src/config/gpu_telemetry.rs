//! `--gpu-telemetry [URL...]` and `--no-gpu-telemetry`: which DCGM exporters to scrape.
//! AIPerf always tries two local exporters besides the user's; those are scraped too, but an
//! unreachable one stays silent (no machine without DCGM should see anything about GPUs).

use std::time::Duration;

use super::endpoint::{basic_auth, scrape_credentials};
use super::{ConfigError, ScrapeOptions, config_error};
use crate::cli::ProfileArgs;
use crate::scrape::{ScrapeTiming, metrics_url};

/// Exporters tried on every run: dcgm-exporter's port and Dynamo's.
pub const DEFAULT_DCGM_ENDPOINTS: [&str; 2] = [
    "http://localhost:9400/metrics",
    "http://localhost:9401/metrics",
];
/// Replaces [`DEFAULT_DCGM_ENDPOINTS`] (a comma list; empty: none).
pub const DEFAULT_ENDPOINTS_ENV: &str = "AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS";

/// AIPerf's collection interval.
const INTERVAL: Duration = Duration::from_millis(333);
/// The most one scrape may take. An exporter answers in milliseconds; the bound keeps a port
/// that swallows packets from holding up the end of a run for long.
const TIMEOUT: Duration = Duration::from_secs(2);

/// The DCGM exporters to scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuTelemetryOptions {
    /// Every endpoint, defaults first, without duplicates.
    pub scrape: ScrapeOptions,
    /// The endpoints that are defaults only (not named by the user): unreachable, they are
    /// neither shown nor warned about.
    pub quiet_urls: Vec<String>,
}

impl GpuTelemetryOptions {
    pub fn is_quiet(&self, url: &str) -> bool {
        self.quiet_urls.iter().any(|u| u == url)
    }
}

/// The options from the flags and the environment; `None` with `--no-gpu-telemetry`.
pub(super) fn gpu_telemetry(a: &ProfileArgs) -> Result<Option<GpuTelemetryOptions>, ConfigError> {
    let items = a.collectors.gpu_telemetry.as_deref();
    if a.collectors.no_gpu_telemetry {
        if items.is_some() {
            return Err(config_error(
                "--no-gpu-telemetry cannot be combined with --gpu-telemetry: drop one of them",
            ));
        }
        return Ok(None);
    }
    let defaults: Vec<String> = match std::env::var(DEFAULT_ENDPOINTS_ENV) {
        Ok(list) => list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| endpoint(DEFAULT_ENDPOINTS_ENV, s))
            .collect::<Result<_, _>>()?,
        Err(_) => DEFAULT_DCGM_ENDPOINTS.map(String::from).to_vec(),
    };
    let mut user = Vec::new();
    let mut auth = Vec::new();
    for item in items.unwrap_or_default() {
        for part in item.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            // Credentials are taken out first: nothing below may show them.
            let (part, userinfo) = scrape_credentials(part);
            let url = classify(&part)?;
            if let Some(value) = userinfo.as_ref().and_then(basic_auth) {
                auth.push((url.clone(), value));
            }
            user.push(url);
        }
    }
    let mut urls: Vec<String> = Vec::new();
    for url in defaults.iter().chain(&user) {
        if !urls.contains(url) {
            urls.push(url.clone());
        }
    }
    let quiet_urls = defaults.into_iter().filter(|d| !user.contains(d)).collect();
    Ok(Some(GpuTelemetryOptions {
        scrape: ScrapeOptions {
            urls,
            auth,
            timing: ScrapeTiming {
                interval: INTERVAL,
                timeout: TIMEOUT,
            },
        },
        quiet_urls,
    }))
}

/// One `--gpu-telemetry` item: a DCGM exporter URL, or a source this build lacks.
fn classify(item: &str) -> Result<String, ConfigError> {
    let lower = item.to_ascii_lowercase();
    let unsupported = match lower.as_str() {
        "pynvml" | "amdsmi" => Some("reading GPUs locally is not supported by this build"),
        "dashboard" => Some("the live dashboard is not supported by this build"),
        _ if lower.ends_with(".csv") => {
            Some("a custom DCGM metric list is not supported by this build")
        }
        _ => None,
    };
    if let Some(why) = unsupported {
        return Err(config_error(format!(
            "--gpu-telemetry {item}: {why}; give DCGM exporter URLs (e.g. --gpu-telemetry \
             http://gpu-node:9400/metrics) or leave the flag out"
        )));
    }
    if !(lower.starts_with("http") || item.contains(':')) {
        return Err(config_error(format!(
            "--gpu-telemetry {item}: not a DCGM exporter endpoint; give host:port or a URL \
             (e.g. gpu-node:9400 or http://gpu-node:9400/metrics)"
        )));
    }
    endpoint("--gpu-telemetry", item)
}

/// `host:port` or a URL into the full `/metrics` URL, checked.
fn endpoint(source: &str, item: &str) -> Result<String, ConfigError> {
    let url = metrics_url(item);
    match url.parse::<http::Uri>() {
        Ok(uri) if uri.host().is_some_and(|h| !h.is_empty()) => Ok(url),
        _ => Err(config_error(format!(
            "{source} {item}: not a valid URL; give host:port or http://host:port/metrics"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};

    fn args(extra: &[&str]) -> ProfileArgs {
        let mut argv = vec!["aiperf", "profile", "-m", "m"];
        argv.extend_from_slice(extra);
        match Cli::parse_with_sources(argv).unwrap().command {
            Command::Profile(a) => *a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn defaults_are_quiet_and_user_urls_are_normalised() {
        // The environment variable is not set in the test process.
        let o = gpu_telemetry(&args(&[])).unwrap().unwrap();
        assert_eq!(o.scrape.urls, DEFAULT_DCGM_ENDPOINTS.map(String::from));
        assert_eq!(o.quiet_urls, o.scrape.urls);
        assert_eq!(o.scrape.timing.interval, Duration::from_millis(333));

        let o = gpu_telemetry(&args(&[
            "--gpu-telemetry",
            "node1:9400",
            "http://localhost:9401",
            "https://h/x/metrics",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            o.scrape.urls,
            [
                "http://localhost:9400/metrics",
                "http://localhost:9401/metrics",
                "http://node1:9400/metrics",
                "https://h/x/metrics",
            ]
        );
        // Named by the user, a default is no longer quiet.
        assert_eq!(o.quiet_urls, ["http://localhost:9400/metrics"]);
        assert!(!o.is_quiet("http://localhost:9401/metrics"));

        // Zero items: telemetry on, defaults only.
        let o = gpu_telemetry(&args(&["--gpu-telemetry"])).unwrap().unwrap();
        assert_eq!(o.scrape.urls.len(), 2);
        assert!(
            gpu_telemetry(&args(&["--no-gpu-telemetry"]))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn unsupported_sources_and_bad_items_name_the_item() {
        for (item, says) in [
            ("pynvml", "not supported by this build"),
            ("amdsmi", "not supported by this build"),
            ("dashboard", "not supported by this build"),
            ("metrics.csv", "not supported by this build"),
            ("gpubox", "not a DCGM exporter endpoint"),
            ("http://", "not a valid URL"),
        ] {
            let e = gpu_telemetry(&args(&["--gpu-telemetry", item])).unwrap_err();
            assert!(e.0.contains(item) && e.0.contains(says), "{item}: {}", e.0);
        }
        let e =
            gpu_telemetry(&args(&["--gpu-telemetry", "h:1", "--no-gpu-telemetry"])).unwrap_err();
        assert!(
            e.0.contains("--no-gpu-telemetry cannot be combined"),
            "{}",
            e.0
        );
    }
}
