//! Side collectors that watch the server while the load runs: its Prometheus `/metrics`
//! and the GPUs' DCGM exporters. They scrape on their own connections from before the
//! warmup until after the profiling phase, on the run's clock. Each scrape goes at once to
//! what keeps it: the summaries (which keep what their statistics need) and, when asked,
//! the per-scrape JSONL files (written beside the artifacts as scrapes come). The network
//! round-trip probes run beside them, during profiling only.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tracing::{info, warn};

use crate::clock::Clock;
use crate::config::NetworkLatency;
use crate::config::ProfileConfig;
use crate::config::ScrapeOptions;
use crate::export::{self, GpuJsonlSpool, ServerMetricsSpool};
use crate::metrics::gpu_telemetry::GpuCollector;
use crate::metrics::server_series::{EndpointSeries, Phase};
use crate::scrape::{self, EndpointLog, ScrapeEndpoint, Scraper, Sink};

use super::network_probe::{NetworkProbe, Probed};

/// One collector's scraper and what its endpoints' scrapes go to.
struct Collecting<S, J> {
    scraper: Scraper,
    /// One per endpoint, in the scraper's order.
    summaries: Vec<Arc<Mutex<S>>>,
    /// One per endpoint when the per-scrape file is asked for.
    spools: Vec<Arc<Mutex<J>>>,
    /// Each endpoint's latest scrapes, when a live view shows them.
    latest: Vec<(String, Arc<Mutex<scrape::Latest>>)>,
}

/// The latest server readings, one per `/metrics` endpoint.
pub(super) type LiveServers = Box<dyn Fn() -> Vec<crate::dashboard::ServerView> + Send>;
/// The latest GPU readings, one per GPU.
pub(super) type LiveGpus = Box<dyn Fn() -> Vec<crate::dashboard::GpuView> + Send>;

/// The running collectors.
pub(super) struct Observers {
    server: Option<Collecting<EndpointSeries, ServerMetricsSpool>>,
    gpu: Option<Collecting<GpuCollector, GpuJsonlSpool>>,
    network: Option<NetworkProbe>,
}

/// What the server's `/metrics` gave, per endpoint.
#[derive(Debug)]
pub(crate) struct ServerEndpoint {
    pub log: EndpointLog,
    pub series: EndpointSeries,
}

/// What they collected.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// The server's `/metrics` (`--server-metrics`).
    pub server: Vec<ServerEndpoint>,
    /// The spooled server-metrics JSONL lines, per endpoint that had any.
    pub server_jsonl: Vec<PathBuf>,
    /// DCGM exporters (`--gpu-telemetry`).
    pub gpu: Vec<(GpuCollector, EndpointLog)>,
    /// The spooled GPU telemetry JSONL lines, per exporter that had any.
    pub gpu_jsonl: Vec<PathBuf>,
    /// The network round-trip probes (`--network-latency-automatic`).
    pub network: Option<Probed>,
}

impl Drop for Observed {
    /// Spools not turned into their files (a run that wrote no results, a failed write) go.
    fn drop(&mut self) {
        for spool in self.server_jsonl.iter().chain(&self.gpu_jsonl) {
            let _ = std::fs::remove_file(spool);
        }
    }
}

impl Observers {
    /// Starts the collectors the configuration asks for, on the current runtime. One that
    /// cannot start is a warning, never a failed run.
    pub fn start(cfg: &ProfileConfig, clock: Clock) -> Observers {
        let live = cfg.ui == crate::ui::UiType::Dashboard;
        let dir = &cfg.artifact_dir;
        let names = &cfg.export.names;
        let server = cfg.server_metrics.as_ref().and_then(|o| {
            let urls = reachable_server_metrics(o, clock);
            let jsonl = cfg.export.server_metrics_formats.jsonl;
            let spool = |i, url: &str| {
                jsonl.then(|| {
                    let path = export::server_metrics_spool(dir, names, i);
                    ServerMetricsSpool::new(url, path, clock)
                })
            };
            collect(
                "Server metrics",
                o,
                &urls,
                clock,
                EndpointSeries::new,
                spool,
                live,
            )
        });
        let gpu = cfg.gpu_telemetry.as_ref().and_then(|o| {
            let spool = |i, url: &str| {
                let path = export::gpu_telemetry_spool(dir, names, i);
                Some(GpuJsonlSpool::new(url, path, clock))
            };
            let o = &o.scrape;
            collect(
                "GPU telemetry",
                o,
                &o.urls,
                clock,
                GpuCollector::new,
                spool,
                live,
            )
        });
        let network = match cfg.network_latency {
            Some(NetworkLatency::Probed { interval }) => {
                Some(NetworkProbe::start(&cfg.request_uris, interval, clock))
            }
            _ => None,
        };
        Observers {
            server,
            gpu,
            network,
        }
    }

    /// Readers of the latest server and GPU scrapes, for the dashboard.
    pub fn live_views(&self) -> (LiveServers, LiveGpus) {
        let servers = self
            .server
            .as_ref()
            .map_or_else(Vec::new, |c| c.latest.clone());
        let gpus = self
            .gpu
            .as_ref()
            .map_or_else(Vec::new, |c| c.latest.clone());
        let servers: LiveServers = Box::new(move || {
            servers
                .iter()
                .map(|(url, l)| {
                    let l = scrape::lock(l);
                    crate::dashboard::server_view(
                        url,
                        l.previous.as_ref().map(|f| f.as_slice()),
                        l.latest.as_ref().map(|f| f.as_slice()),
                    )
                })
                .collect()
        });
        let gpus: LiveGpus = Box::new(move || {
            gpus.iter()
                .flat_map(|(_, l)| {
                    let latest = scrape::lock(l).latest.clone();
                    latest.map_or_else(Vec::new, |f| crate::dashboard::gpu_views(&f))
                })
                .collect()
        });
        (servers, gpus)
    }

    /// A scrape of every server endpoint now, waited for: the boundary sample of a phase.
    pub fn mark_phase_boundary(&self, runtime: &tokio::runtime::Runtime) {
        if let Some(s) = &self.server {
            runtime.block_on(s.scraper.scrape_now());
        }
    }

    /// A phase started at run-clock `start_ns`: the server summaries pin its scrapes.
    pub fn phase_started(&self, phase: Phase, start_ns: u64) {
        for s in self.server.iter().flat_map(|c| &c.summaries) {
            scrape::lock(s).window_started(phase, start_ns);
        }
        if let (Phase::Profiling, Some(n)) = (phase, &self.network) {
            n.profiling_started();
        }
    }

    /// A phase ended at run-clock `end_ns`.
    pub fn phase_ended(&self, phase: Phase, end_ns: u64) {
        for s in self.server.iter().flat_map(|c| &c.summaries) {
            scrape::lock(s).window_ended(phase, end_ns);
        }
        if let (Phase::Profiling, Some(n)) = (phase, &self.network) {
            n.profiling_ended();
        }
    }

    /// Takes a last scrape of every endpoint, stops, and hands over what was kept.
    pub async fn finish(self) -> Observed {
        let mut observed = Observed::default();
        if let Some(c) = self.server {
            let (kept, spooled) = c
                .finish(|s: &mut EndpointSeries| std::mem::replace(s, EndpointSeries::new(&s.url)))
                .await;
            observed.server = kept
                .into_iter()
                .map(|(series, log)| ServerEndpoint { log, series })
                .collect();
            observed.server_jsonl = close_spools(spooled, ServerMetricsSpool::close);
        }
        if let Some(c) = self.gpu {
            let (kept, spooled) = c
                .finish(|g: &mut GpuCollector| std::mem::replace(g, GpuCollector::new(&g.url)))
                .await;
            observed.gpu = kept;
            observed.gpu_jsonl = close_spools(spooled, GpuJsonlSpool::close);
        }
        if let Some(n) = self.network {
            observed.network = Some(n.finish().await);
        }
        observed
    }
}

impl<S: scrape::ScrapeSink + 'static, J: scrape::ScrapeSink + 'static> Collecting<S, J> {
    /// Stops the scraper; each endpoint's summary (taken out of its lock) with its log, and
    /// the spools.
    async fn finish(
        self,
        take: impl Fn(&mut S) -> S,
    ) -> (Vec<(S, EndpointLog)>, Vec<Arc<Mutex<J>>>) {
        let logs = self.scraper.finish().await;
        let kept = self
            .summaries
            .iter()
            .zip(logs)
            .map(|(s, log)| (take(&mut scrape::lock(s)), log))
            .collect();
        (kept, self.spools)
    }
}

/// Starts one scraper over `urls` (of `options`), each endpoint's scrapes going to a new
/// summary and, when `spool` gives one, to a per-scrape file.
fn collect<S, J>(
    what: &str,
    options: &ScrapeOptions,
    urls: &[String],
    clock: Clock,
    summary: impl Fn(&str) -> S,
    spool: impl Fn(usize, &str) -> Option<J>,
    live: bool,
) -> Option<Collecting<S, J>>
where
    S: scrape::ScrapeSink + 'static,
    J: scrape::ScrapeSink + 'static,
{
    if urls.is_empty() {
        return None;
    }
    let mut summaries = Vec::new();
    let mut spools = Vec::new();
    let mut latest = Vec::new();
    let endpoints = urls
        .iter()
        .enumerate()
        .map(|(i, url)| {
            let s = Arc::new(Mutex::new(summary(url)));
            summaries.push(s.clone());
            let mut sinks: Vec<Sink> = vec![s];
            if let Some(j) = spool(i, url) {
                let j = Arc::new(Mutex::new(j));
                spools.push(j.clone());
                sinks.push(j);
            }
            if live {
                let l = Arc::new(Mutex::new(scrape::Latest::default()));
                latest.push((url.clone(), l.clone()));
                sinks.push(l);
            }
            ScrapeEndpoint {
                url: url.clone(),
                auth: options.auth_of(url),
                sinks,
            }
        })
        .collect();
    Scraper::start(endpoints, options.timing, clock)
        .inspect_err(|e| warn!("{what} will not be collected: {e:#}"))
        .ok()
        .map(|scraper| Collecting {
            scraper,
            summaries,
            spools,
            latest,
        })
}

/// The spools' files, closed; one that could not be written is a warning.
fn close_spools<J>(
    spools: Vec<Arc<Mutex<J>>>,
    close: impl Fn(&mut J) -> std::io::Result<Option<PathBuf>>,
) -> Vec<PathBuf> {
    spools
        .iter()
        .filter_map(|j| match close(&mut scrape::lock(j)) {
            Ok(path) => path,
            Err(e) => {
                warn!("A per-scrape JSONL file could not be written: {e}");
                None
            }
        })
        .collect()
}

/// The server-metrics endpoints that answer a first scrape; each one that does not is named
/// in one info line (a server without `/metrics` is common and not an error).
fn reachable_server_metrics(options: &ScrapeOptions, clock: Clock) -> Vec<String> {
    let urls = &options.urls;
    let endpoints: Vec<_> = urls
        .iter()
        .map(|u| (u.clone(), options.auth_of(u)))
        .collect();
    let probe = crate::scrape::probe(&endpoints, options.timing.timeout, clock);
    let probed = tokio::runtime::Handle::current().block_on(probe);
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
