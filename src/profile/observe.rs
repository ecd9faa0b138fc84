//! Side collectors that watch the server while the load runs: its Prometheus `/metrics`
//! and the GPUs' DCGM exporters. They scrape on their own connections from before the
//! warmup until after the profiling phase, on the run's clock.

use tracing::{info, warn};

use crate::clock::Clock;
use crate::config::ProfileConfig;
use crate::scrape::{EndpointLog, ScrapeTiming, Scraper};

/// The running collectors.
pub(super) struct Observers {
    server: Option<Scraper>,
    gpu: Option<Scraper>,
}

/// What they collected, per endpoint.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// The server's `/metrics` (`--server-metrics`).
    pub server: Vec<EndpointLog>,
    /// DCGM exporters (`--gpu-telemetry`).
    pub gpu: Vec<EndpointLog>,
}

impl Observers {
    /// Starts the collectors the configuration asks for, on the current runtime. One that
    /// cannot start is a warning, never a failed run.
    pub fn start(cfg: &ProfileConfig, clock: Clock) -> Observers {
        let start = |what: &str, urls: &[String], timing: ScrapeTiming| {
            if urls.is_empty() {
                return None;
            }
            Scraper::start(urls, timing, clock)
                .inspect_err(|e| warn!("{what} will not be collected: {e:#}"))
                .ok()
        };
        Observers {
            server: cfg.server_metrics.as_ref().and_then(|o| {
                let urls = reachable_server_metrics(&o.urls, o.timing.timeout, clock);
                start("Server metrics", &urls, o.timing)
            }),
            gpu: cfg
                .gpu_telemetry
                .as_ref()
                .and_then(|o| start("GPU telemetry", &o.scrape.urls, o.scrape.timing)),
        }
    }

    /// A scrape of every server endpoint now, waited for: the boundary sample of a phase.
    pub fn mark_phase_boundary(&self, runtime: &tokio::runtime::Runtime) {
        if let Some(s) = &self.server {
            runtime.block_on(s.scrape_now());
        }
    }

    /// Takes a last scrape of every endpoint and stops.
    pub async fn finish(self) -> Observed {
        let server = match self.server {
            Some(s) => s.finish().await,
            None => Vec::new(),
        };
        let gpu = match self.gpu {
            Some(s) => s.finish().await,
            None => Vec::new(),
        };
        Observed { server, gpu }
    }
}

/// The server-metrics endpoints that answer a first scrape; each one that does not is named
/// in one info line (a server without `/metrics` is common and not an error).
fn reachable_server_metrics(
    urls: &[String],
    timeout: std::time::Duration,
    clock: Clock,
) -> Vec<String> {
    let probed =
        tokio::runtime::Handle::current().block_on(crate::scrape::probe(urls, timeout, clock));
    urls.iter()
        .zip(probed)
        .filter_map(|(url, r)| match r {
            Ok(()) => Some(url.clone()),
            Err(why) => {
                info!("Server metrics not available at {url}: {why}");
                None
            }
        })
        .collect()
}
