//! GPU telemetry over the profiling window, per GPU: gauges as distributions of their
//! samples (sample std, ddof = 1, as AIPerf), counters as their rise since the last sample
//! before the window. The window's end is open so the scrape taken after the last request
//! counts.
//!
//! Each exporter's scrapes are taken in as they arrive (`GpuCollector`): per GPU its
//! identity and each metric's samples, run-length encoded, so memory hardly grows with the
//! run (an exporter repeats its values between refreshes; a repeat is no new sample).

use std::collections::BTreeMap;

use super::column::SampleRuns;
use crate::clock::Clock;
use crate::scrape::dcgm::{GPU_METRICS, GpuIdentity, GpuMetric, readings};
use crate::scrape::{EndpointLog, ScrapeEvent, ScrapeSink};
use crate::stats::Stats;

/// A gauge's statistics over the window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaugeStats {
    pub avg: f64,
    pub min: f64,
    pub max: f64,
    /// At [`crate::stats::PERCENTILES`].
    pub percentiles: [f64; 9],
    /// Sample standard deviation (ddof = 1); 0 for a single sample.
    pub std: f64,
}

/// One metric of one GPU over the window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Summary {
    Gauge(GaugeStats),
    /// How much the counter rose (never negative).
    Counter(f64),
}

impl Summary {
    /// The value shown as `avg`.
    pub fn avg(&self) -> f64 {
        match self {
            Summary::Gauge(g) => g.avg,
            Summary::Counter(rise) => *rise,
        }
    }
}

/// One GPU's metrics, in [`GPU_METRICS`] order (those it published).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSummary {
    pub gpu: GpuIdentity,
    pub metrics: Vec<(&'static GpuMetric, Summary)>,
    /// Counters (their keys) that went down in the window and were counted on from zero.
    pub restarts: Vec<&'static str>,
}

impl GpuSummary {
    pub fn get(&self, key: &str) -> Option<Summary> {
        self.metrics
            .iter()
            .find(|(m, _)| m.key == key)
            .map(|(_, s)| *s)
    }
}

/// What one DCGM exporter gave.
#[derive(Debug, Clone)]
pub struct EndpointTelemetry {
    pub url: String,
    pub gpus: Vec<GpuSummary>,
    pub failures: u64,
    pub first_error: Option<String>,
}

impl EndpointTelemetry {
    /// `host:port` (AIPerf's key for an endpoint).
    pub fn host_port(&self) -> &str {
        let rest = self
            .url
            .split_once("://")
            .map_or(self.url.as_str(), |(_, r)| r);
        rest.split('/').next().unwrap_or(rest)
    }

    pub fn has_data(&self) -> bool {
        !self.gpus.is_empty()
    }
}

/// Telemetry of a run: the endpoints shown (the user's, and defaults that answered).
#[derive(Debug, Clone)]
pub struct GpuTelemetry {
    pub endpoints: Vec<EndpointTelemetry>,
    /// Run-clock ns when profiling started and ended.
    pub window_ns: (u64, u64),
    /// The run's clock, to turn run-clock ns into wall-clock ns.
    pub clock: Clock,
}

impl GpuTelemetry {
    pub fn has_data(&self) -> bool {
        self.endpoints.iter().any(EndpointTelemetry::has_data)
    }

    /// Every GPU with its endpoint.
    pub fn gpus(&self) -> impl Iterator<Item = (&EndpointTelemetry, &GpuSummary)> {
        self.endpoints
            .iter()
            .flat_map(|e| e.gpus.iter().map(move |g| (e, g)))
    }

    /// Energy all GPUs used in the window, in J (from the energy counters).
    pub fn total_energy_j(&self) -> Option<f64> {
        let rises: Vec<f64> = self
            .gpus()
            .filter_map(|(_, g)| g.get("nvidia_energy_consumption"))
            .map(|s| s.avg() * 1e6)
            .collect();
        (!rises.is_empty()).then(|| rises.iter().sum())
    }

    /// The GPUs' average power draws added up, in W.
    pub fn average_power_w(&self) -> Option<f64> {
        let powers: Vec<f64> = self
            .gpus()
            .filter_map(|(_, g)| g.get("nvidia_power_usage"))
            .map(|s| s.avg())
            .collect();
        (!powers.is_empty()).then(|| powers.iter().sum())
    }
}

/// One GPU's scrapes: its identity as last seen and each metric's samples, by the ordinal
/// of the exporter's changed scrapes.
#[derive(Debug, Default)]
struct GpuSeries {
    identity: GpuIdentity,
    samples: [SampleRuns; GPU_METRICS.len()],
}

/// One DCGM exporter's scrapes as they arrive.
#[derive(Debug)]
pub struct GpuCollector {
    pub url: String,
    /// First-byte time (run clock) of each changed scrape that carried GPU data.
    at_ns: Vec<u64>,
    gpus: BTreeMap<u32, GpuSeries>,
}

impl GpuCollector {
    pub fn new(url: &str) -> GpuCollector {
        GpuCollector {
            url: url.to_string(),
            at_ns: Vec::new(),
            gpus: BTreeMap::new(),
        }
    }
}

impl ScrapeSink for GpuCollector {
    fn scraped(&mut self, s: &ScrapeEvent) {
        if !s.changed {
            return;
        }
        let gpus = readings(&s.families);
        if gpus.is_empty() {
            return;
        }
        let ordinal = self.at_ns.len() as u64;
        self.at_ns.push(s.first_byte_ns);
        for r in gpus {
            let gpu = self.gpus.entry(r.gpu.index).or_default();
            for (samples, v) in gpu.samples.iter_mut().zip(r.values) {
                if let Some(v) = v {
                    samples.push(ordinal, v);
                }
            }
            gpu.identity = r.gpu;
        }
    }
}

/// Summarises each exporter over the profiling window (run-clock ns). Endpoints that gave
/// no GPU data and for which `quiet(url)` holds are left out.
pub fn summarize(
    collectors: &[(&GpuCollector, &EndpointLog)],
    quiet: impl Fn(&str) -> bool,
    window_ns: (u64, u64),
    clock: Clock,
) -> GpuTelemetry {
    let endpoints = collectors
        .iter()
        .map(|(c, log)| endpoint(c, log, window_ns.0))
        .filter(|e| e.has_data() || !quiet(&e.url))
        .collect();
    GpuTelemetry {
        endpoints,
        window_ns,
        clock,
    }
}

fn endpoint(c: &GpuCollector, log: &EndpointLog, window_start_ns: u64) -> EndpointTelemetry {
    let gpus = c
        .gpus
        .values()
        .filter_map(|g| gpu_summary(c, g, window_start_ns))
        .collect();
    EndpointTelemetry {
        url: c.url.clone(),
        gpus,
        failures: log.failures,
        first_error: log.first_error.clone(),
    }
}

fn gpu_summary(c: &GpuCollector, gpu: &GpuSeries, window_start_ns: u64) -> Option<GpuSummary> {
    let mut restarts = Vec::new();
    let metrics: Vec<(&'static GpuMetric, Summary)> = GPU_METRICS
        .iter()
        .zip(&gpu.samples)
        .filter_map(|(metric, runs)| {
            let samples: Vec<(u64, f64)> =
                runs.iter().map(|(o, v)| (c.at_ns[o as usize], v)).collect();
            let summary = if metric.counter {
                let (rise, restarted) = counter_rise(&samples, window_start_ns)?;
                if restarted {
                    restarts.push(metric.key);
                }
                Summary::Counter(rise)
            } else {
                let mut in_window: Vec<f64> = samples
                    .iter()
                    .filter(|(t, _)| *t >= window_start_ns)
                    .map(|(_, v)| *v)
                    .collect();
                Summary::Gauge(gauge_stats(&mut in_window)?)
            };
            Some((metric, summary))
        })
        .collect();
    (!metrics.is_empty()).then(|| GpuSummary {
        gpu: gpu.identity.clone(),
        metrics,
        restarts,
    })
}

/// avg, min, max, percentiles and the sample std of `values` (sorted in place).
pub fn gauge_stats(values: &mut [f64]) -> Option<GaugeStats> {
    let s = Stats::compute(values)?;
    let n = s.count as f64;
    // Stats gives the population std; AIPerf reports the sample std for telemetry.
    let std = if s.count > 1 {
        s.std * (n / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    Some(GaugeStats {
        avg: s.avg,
        min: s.min,
        max: s.max,
        percentiles: s.percentiles,
        std,
    })
}

/// How much a counter rose in the window, as Prometheus' `rate()` counts it: from the last
/// sample before the window (the first in the window when none came before) to the last
/// one, a drop counting as a restart from zero (a GPU reset or an exporter restart). `None`
/// without a sample in the window; with the rise, whether the counter restarted.
pub fn counter_rise(samples: &[(u64, f64)], window_start_ns: u64) -> Option<(f64, bool)> {
    let first_in = samples.iter().position(|(t, _)| *t >= window_start_ns)?;
    let from = first_in.saturating_sub(1);
    let mut rise = 0.0;
    let mut restarted = false;
    for w in samples[from..].windows(2) {
        let (before, now) = (w[0].1, w[1].1);
        if now >= before {
            rise += now - before;
        } else {
            rise += now;
            restarted = true;
        }
    }
    Some((rise, restarted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrape::parse;
    use std::sync::Arc;

    #[test]
    fn gauge_std_is_the_sample_std() {
        let g = gauge_stats(&mut [100.0, 200.0, 300.0]).unwrap();
        assert_eq!((g.avg, g.min, g.max), (200.0, 100.0, 300.0));
        assert!((g.std - 100.0).abs() < 1e-12);
        assert_eq!(g.percentiles[4], 200.0);
        // p90 by linear interpolation: 200 + 0.8 * 100.
        assert!((g.percentiles[6] - 280.0).abs() < 1e-9);
        assert_eq!(gauge_stats(&mut [5.0]).unwrap().std, 0.0);
        assert!(gauge_stats(&mut []).is_none());
    }

    #[test]
    fn counters_rise_from_the_last_sample_before_the_window() {
        let samples = [(10, 1.0), (20, 4.0), (30, 6.0), (40, 9.0)];
        // The reference is the sample at 20, the last before 25.
        assert_eq!(counter_rise(&samples, 25), Some((5.0, false)));
        // No sample before the window: from the first one inside.
        assert_eq!(counter_rise(&samples, 5), Some((8.0, false)));
        assert_eq!(counter_rise(&samples, 50), None);
        // A drop is a restart from zero: 9 -> 1 is a rise of 1, then 1 -> 4 of 3.
        assert_eq!(
            counter_rise(&[(10, 9.0), (20, 1.0), (30, 4.0)], 15),
            Some((4.0, true))
        );
    }

    /// An exporter's collector after `texts`, each compared with the one before as the
    /// scraper does, and how its scraping went.
    fn collected(url: &str, texts: &[(u64, String)]) -> (GpuCollector, EndpointLog) {
        let mut c = GpuCollector::new(url);
        let mut previous: Option<Arc<Vec<crate::scrape::Family>>> = None;
        for (t, text) in texts {
            let families = Arc::new(parse::parse(text));
            c.scraped(&ScrapeEvent {
                sent_ns: *t,
                first_byte_ns: *t,
                done_ns: *t,
                changed: previous.as_ref() != Some(&families),
                families: families.clone(),
            });
            previous = Some(families);
        }
        let log = EndpointLog {
            url: url.into(),
            scrapes: texts.len() as u64,
            failures: 0,
            first_error: None,
        };
        (c, log)
    }

    fn exposition(power: f64, energy_mj: f64) -> String {
        format!(
            "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n\
             DCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",modelName=\"M\"}} {power}\n\
             # TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n\
             DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu=\"0\",modelName=\"M\"}} {energy_mj}\n"
        )
    }

    #[test]
    fn an_endpoint_is_summarised_over_the_window_and_quiet_failures_hidden() {
        let good = collected(
            "http://h:9400/metrics",
            &[
                (5, exposition(50.0, 1e9)),
                (15, exposition(100.0, 2e9)),
                // A repeat of the scrape before: not a new sample.
                (16, exposition(100.0, 2e9)),
                (25, exposition(200.0, 3e9)),
                (35, exposition(300.0, 5e9)),
            ],
        );
        let silent = collected("http://localhost:9401/metrics", &[]);
        let named = collected("http://other:9400/metrics", &[]);
        let t = summarize(
            &[
                (&good.0, &good.1),
                (&silent.0, &silent.1),
                (&named.0, &named.1),
            ],
            |u| u.contains("localhost"),
            (10, 30),
            Clock::new(),
        );
        assert_eq!(t.endpoints.len(), 2);
        assert_eq!(t.endpoints[0].host_port(), "h:9400");
        // The repeat at 16 was no new sample.
        assert_eq!(good.0.at_ns, [5, 15, 25, 35]);
        assert!(!t.endpoints[1].has_data());
        let gpu = &t.endpoints[0].gpus[0];
        assert_eq!(gpu.gpu.model_name.as_deref(), Some("M"));
        let Some(Summary::Gauge(p)) = gpu.get("nvidia_power_usage") else {
            panic!("{gpu:?}")
        };
        assert_eq!((p.avg, p.min, p.max), (200.0, 100.0, 300.0));
        // 5e9 mJ at the end, 1e9 mJ just before the window: 4 MJ.
        assert_eq!(
            gpu.get("nvidia_energy_consumption"),
            Some(Summary::Counter(4.0))
        );
        assert_eq!(t.total_energy_j(), Some(4e6));
        assert_eq!(t.average_power_w(), Some(200.0));
    }
}
