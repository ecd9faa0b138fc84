//! The GPU telemetry of a run: the DCGM exporters' scrapes summarised over the profiling
//! window, and what the user hears about exporters that gave nothing.

use std::sync::Arc;

use tracing::{debug, warn};

use super::observe::Observed;
use crate::clock::Clock;
use crate::config::ProfileConfig;
use crate::metrics::gpu_telemetry::{self, GpuTelemetry};

/// GPU telemetry over the profiling window, when an exporter gave data. Endpoints the user
/// named that gave none get a warning; the default ones a debug line only.
pub(super) fn summarise(
    cfg: &ProfileConfig,
    observed: &Observed,
    profiling_ns: (u64, u64),
    clock: Clock,
) -> Option<Arc<GpuTelemetry>> {
    let options = cfg.gpu_telemetry.as_ref()?;
    for (_, log) in &observed.gpu {
        let answered = log.scrapes > 0;
        let why = log.first_error.as_deref().unwrap_or("no answer");
        match (options.is_quiet(&log.url), answered) {
            (true, false) => debug!("GPU telemetry: no DCGM exporter at {} ({why})", log.url),
            (false, false) => warn!("GPU telemetry: no data from {} ({why})", log.url),
            _ => {}
        }
    }
    let collectors: Vec<_> = observed.gpu.iter().map(|(c, log)| (c, log)).collect();
    let t = gpu_telemetry::summarize(&collectors, |u| options.is_quiet(u), profiling_ns, clock);
    for e in t.endpoints.iter().filter(|e| !e.has_data()) {
        let answered = observed
            .gpu
            .iter()
            .any(|(_, l)| l.url == e.url && l.scrapes > 0);
        if answered {
            warn!(
                "GPU telemetry: {} answered but published no DCGM GPU metrics",
                e.url
            );
        }
    }
    let restarted: Vec<String> = t
        .gpus()
        .filter(|(_, g)| !g.restarts.is_empty())
        .map(|(e, g)| {
            format!(
                "GPU {} at {}: {}",
                g.gpu.index,
                e.url,
                g.restarts.join(", ")
            )
        })
        .collect();
    if !restarted.is_empty() {
        warn!(
            "GPU telemetry: counters went down during the run (a GPU or exporter restart?), each \
             counted on from zero as Prometheus' rate() does: {}",
            restarted.join("; ")
        );
    }
    t.has_data().then(|| Arc::new(t))
}
