//! The end of a run's server-metrics collection: statistics per phase, the console table and
//! the files.

use std::collections::BTreeSet;

use tracing::{info, warn};

use super::observe::Observed;
use super::phases::Ran;
use crate::config::ProfileConfig;
use crate::export::{self, RunInfo, ServerMetricsFiles, ServerMetricsRun};
use crate::metrics::MetricsSummary;
use crate::metrics::server_metrics::{self, MetricSummary};
use crate::metrics::server_series::{EndpointSeries, Phase};

/// What was made of the scrapes.
pub(super) struct ServerMetrics {
    pub profiling: Vec<MetricSummary>,
    pub warmup: Option<Vec<MetricSummary>>,
    /// The console table and fidelity lines (may be empty).
    pub console: String,
}

/// `None` when scraping was off or no endpoint answered (then no file is written).
pub(super) fn summarise(
    cfg: &ProfileConfig,
    ran: &Ran,
    observed: &Observed,
    client: &MetricsSummary,
) -> Option<ServerMetrics> {
    cfg.server_metrics.as_ref()?;
    if observed.server.iter().all(|e| e.log.scrapes == 0) {
        return None;
    }
    for log in observed
        .server
        .iter()
        .map(|e| &e.log)
        .filter(|l| l.failures > 0)
    {
        info!(
            "Server metrics: {} of {} scrapes of {} failed (first: {})",
            log.failures,
            log.failures + log.scrapes,
            log.url,
            log.first_error.as_deref().unwrap_or("?")
        );
    }
    let endpoints: Vec<&EndpointSeries> = observed.server.iter().map(|e| &e.series).collect();
    let skipped = server_metrics::skipped_summaries(&endpoints);
    if !skipped.is_empty() {
        info!(
            "Server metrics: summary-type families are not summarised: {}",
            skipped.join(", ")
        );
    }
    let (profiling, inconsistent) = server_metrics::summarise(&endpoints, Phase::Profiling);
    let warmup = ran
        .warmup_window
        .map(|_| server_metrics::summarise(&endpoints, Phase::Warmup).0);
    let reset: BTreeSet<&String> = endpoints.iter().flat_map(|e| e.reset_families()).collect();
    if !reset.is_empty() {
        warn!(
            "Server metrics: counters went down during the run (a server restart?) in {}; each \
             is counted on from zero, as Prometheus' rate() does",
            reset.into_iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    if !inconsistent.is_empty() {
        warn!(
            "Server metrics: histograms left out, their buckets, count or sum contradict each \
             other: {}",
            inconsistent.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    let console = export::render_server_metrics(&profiling, client, export::console::CONSOLE_WIDTH);
    Some(ServerMetrics {
        profiling,
        warmup,
        console,
    })
}

/// The writer of the asked files (none without `--server-metrics`).
pub(super) fn files<'a>(
    cfg: &'a ProfileConfig,
    info: &'a RunInfo,
    ran: &Ran,
    observed: &'a Observed,
    sm: &'a ServerMetrics,
    clock: crate::clock::Clock,
) -> Option<ServerMetricsFiles<'a>> {
    let options = cfg.server_metrics.as_ref()?;
    let run = ServerMetricsRun {
        benchmark_id: &info.benchmark_id,
        clock,
        configured: &options.urls,
        endpoints: observed
            .server
            .iter()
            .map(|e| (&e.log, &e.series.times))
            .collect(),
        jsonl: observed.server_jsonl.clone(),
        profiling_window: ran.profiling_window,
        warmup_window: ran.warmup_window,
        profiling: &sm.profiling,
        warmup: sm.warmup.as_deref(),
        input_config: info.input_config.clone(),
    };
    Some(ServerMetricsFiles {
        base: &cfg.export.names.server_metrics,
        formats: cfg.export.server_metrics_formats,
        run,
    })
}
