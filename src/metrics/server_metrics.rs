//! Statistics of scraped Prometheus series over one phase's window (AIPerf's server-metrics
//! summary): gauges over the samples in the window, counters and histograms as the change
//! between a reference sample (the last at or before the window start) and a closing sample
//! (the first at or after the window end: the scrape taken when the phase ended).
//!
//! Histogram percentiles are estimated by linear interpolation inside the delta buckets, as
//! Prometheus' `histogram_quantile` does; AIPerf fits a learned per-bucket mean instead, so
//! its estimates can differ within a bucket.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::server_series::{EndpointSeries, Phase, Snapshot};
pub use super::server_units::unit_of;
use crate::scrape::{Family, Kind, Value};
use crate::stats::percentile_sorted;

/// The percentiles of gauge statistics.
pub const GAUGE_PERCENTILES: [(&str, f64); 9] = [
    ("p1", 1.0),
    ("p5", 5.0),
    ("p10", 10.0),
    ("p25", 25.0),
    ("p50", 50.0),
    ("p75", 75.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
];
/// The percentiles estimated from histogram buckets.
pub const HISTOGRAM_PERCENTILES: [(&str, f64); 9] = [
    ("p1_estimate", 1.0),
    ("p5_estimate", 5.0),
    ("p10_estimate", 10.0),
    ("p25_estimate", 25.0),
    ("p50_estimate", 50.0),
    ("p75_estimate", 75.0),
    ("p90_estimate", 90.0),
    ("p95_estimate", 95.0),
    ("p99_estimate", 99.0),
];

/// A phase's time span on the run clock (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// One series' statistics.
#[derive(Debug, Clone, PartialEq)]
pub enum SeriesStats {
    Gauge {
        avg: f64,
        min: f64,
        max: f64,
        std: f64,
        /// In the order of [`GAUGE_PERCENTILES`].
        percentiles: Vec<f64>,
    },
    Counter {
        total: f64,
        rate: f64,
    },
    Histogram {
        count: f64,
        sum: f64,
        avg: Option<f64>,
        count_rate: f64,
        sum_rate: f64,
        /// Cumulative delta count per bucket, by upper bound as written (Prometheus'
        /// shape); `None` when a bucket went down (a reset).
        buckets: Option<Vec<(String, f64)>>,
        /// In the order of [`HISTOGRAM_PERCENTILES`]; empty when the count is 0.
        estimates: Vec<f64>,
    },
}

impl SeriesStats {
    /// The `p`-th percentile: a gauge's own, a histogram's estimate from its buckets.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        let at = |table: &[(&str, f64)]| table.iter().position(|(_, q)| *q == p);
        match self {
            SeriesStats::Gauge { percentiles, .. } => {
                at(&GAUGE_PERCENTILES).and_then(|i| percentiles.get(i).copied())
            }
            SeriesStats::Histogram { estimates, .. } => {
                at(&HISTOGRAM_PERCENTILES).and_then(|i| estimates.get(i).copied())
            }
            SeriesStats::Counter { .. } => None,
        }
    }
}

/// One (endpoint, label set) of a family.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesSummary {
    pub endpoint_url: String,
    pub labels: BTreeMap<String, String>,
    pub stats: SeriesStats,
}

/// One family over every endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSummary {
    pub name: String,
    pub kind: Kind,
    pub help: String,
    pub unit: Option<&'static str>,
    pub series: Vec<SeriesSummary>,
}

/// The name a family is exported under: a counter's without `_total`, as Prometheus'
/// own parsers name the family (`vllm:generation_tokens_total` is `vllm:generation_tokens`).
pub fn exported_name(name: &str, kind: Kind) -> &str {
    match kind {
        Kind::Counter => name.strip_suffix("_total").unwrap_or(name),
        _ => name,
    }
}

/// Families left out, as AIPerf leaves them out: creation stamps, uptimes, summaries.
pub fn is_kept(f: &Family) -> bool {
    !(f.name.ends_with("_created")
        || f.name.ends_with("_uptime")
        || f.name.contains("_uptime_")
        || f.kind == Kind::Summary
        || f.series.is_empty())
}

/// The summaries of every kept family scraped in `phase`'s window, sorted by name, series
/// by endpoint then labels; and the histograms left out because their figures contradict
/// each other (see `histogram`).
pub fn summarise(
    endpoints: &[&EndpointSeries],
    phase: Phase,
) -> (Vec<MetricSummary>, BTreeSet<String>) {
    let mut out: BTreeMap<String, MetricSummary> = BTreeMap::new();
    let mut refused = BTreeSet::new();
    for endpoint in endpoints {
        let Some(samples) = Samples::of(endpoint, phase) else {
            continue;
        };
        let mut names: Vec<&Family> = samples.closing.families.iter().collect();
        names.retain(|f| is_kept(f));
        for fam in names {
            let name = exported_name(&fam.name, fam.kind);
            let entry = out
                .entry(name.to_string())
                .or_insert_with(|| MetricSummary {
                    name: name.to_string(),
                    kind: fam.kind,
                    help: fam.help.clone(),
                    unit: unit_of(name, &fam.help),
                    series: Vec::new(),
                });
            for s in &fam.series {
                let stats = match fam.kind {
                    Kind::Counter => counter(&samples, &fam.name, &s.labels),
                    Kind::Histogram => match histogram(&samples, &fam.name, &s.labels) {
                        Ok(stats) => stats,
                        Err(Inconsistent) => {
                            refused.insert(fam.name.clone());
                            None
                        }
                    },
                    _ => gauge(&samples, &fam.name, &s.labels),
                };
                if let Some(stats) = stats {
                    entry.series.push(SeriesSummary {
                        endpoint_url: endpoint.url.clone(),
                        labels: s.labels.clone(),
                        stats,
                    });
                }
            }
        }
    }
    let mut v: Vec<MetricSummary> = out.into_values().filter(|m| !m.series.is_empty()).collect();
    for m in &mut v {
        m.series.sort_by(|a, b| {
            (&a.endpoint_url, label_text(&a.labels)).cmp(&(&b.endpoint_url, label_text(&b.labels)))
        });
    }
    (v, refused)
}

/// A histogram whose figures contradict each other: a bucket below the one before it, a
/// count or sum that is not a number, or (after resets are counted on) one that went down.
struct Inconsistent;

/// Names of summary-type families in each endpoint's last scrape (skipped), for one info
/// line.
pub fn skipped_summaries(endpoints: &[&EndpointSeries]) -> Vec<String> {
    let mut names: Vec<String> = endpoints
        .iter()
        .filter_map(|e| e.last())
        .flat_map(|s| s.families.iter())
        .filter(|f| f.kind == Kind::Summary)
        .map(|f| f.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

pub fn label_text(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A kept scrape with its series indexed by family and labels.
struct Indexed<'a> {
    at_ns: u64,
    families: &'a [Family],
    values: HashMap<(&'a str, &'a BTreeMap<String, String>), &'a Value>,
}

impl<'a> Indexed<'a> {
    fn of(s: &'a Snapshot) -> Indexed<'a> {
        let values = s
            .families
            .iter()
            .flat_map(|f| {
                f.series
                    .iter()
                    .map(move |x| ((f.name.as_str(), &x.labels), &x.value))
            })
            .collect();
        Indexed {
            at_ns: s.at_ns,
            families: &s.families,
            values,
        }
    }

    fn find(&self, name: &str, labels: &BTreeMap<String, String>) -> Option<&'a Value> {
        self.values.get(&(name, labels)).copied()
    }
}

/// What one endpoint's summary of a window reads: the reference and closing scrapes, and
/// the ordinals of the scrapes inside (for gauge samples).
struct Samples<'a> {
    endpoint: &'a EndpointSeries,
    reference: Indexed<'a>,
    inside: Option<(u64, u64)>,
    closing: Indexed<'a>,
}

impl<'a> Samples<'a> {
    fn of(endpoint: &'a EndpointSeries, phase: Phase) -> Option<Samples<'a>> {
        let pins = endpoint.pins(phase)?;
        let reference = pins.reference()?;
        let closing = pins.closing()?;
        Some(Samples {
            endpoint,
            reference: Indexed::of(reference),
            inside: endpoint.inside(pins.window),
            closing: Indexed::of(closing),
        })
    }
}

fn scalar(v: Option<&Value>) -> Option<f64> {
    match v {
        Some(Value::Scalar(x)) if x.is_finite() => Some(*x),
        _ => None,
    }
}

fn gauge(s: &Samples, name: &str, labels: &BTreeMap<String, String>) -> Option<SeriesStats> {
    let mut values = s.inside.map_or_else(Vec::new, |range| {
        s.endpoint.gauge_samples(name, labels, range)
    });
    if values.is_empty() {
        values.extend(scalar(s.closing.find(name, labels)));
    }
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len() as f64;
    let avg = values.iter().sum::<f64>() / n;
    let std = if values.len() > 1 {
        (values.iter().map(|v| (v - avg).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    Some(SeriesStats::Gauge {
        avg,
        min: values[0],
        max: values[values.len() - 1],
        std,
        percentiles: GAUGE_PERCENTILES
            .iter()
            .map(|(_, p)| percentile_sorted(&values, *p))
            .collect(),
    })
}

fn seconds_between(a: &Indexed, b: &Indexed) -> f64 {
    b.at_ns.saturating_sub(a.at_ns) as f64 / 1e9
}

fn per_second(v: f64, secs: f64) -> f64 {
    if secs > 0.0 { v / secs } else { 0.0 }
}

fn counter(s: &Samples, name: &str, labels: &BTreeMap<String, String>) -> Option<SeriesStats> {
    let last = scalar(s.closing.find(name, labels))?;
    // A series that appeared during the window started from zero.
    let first = scalar(s.reference.find(name, labels)).unwrap_or(0.0);
    let total = (last - first).max(0.0);
    Some(SeriesStats::Counter {
        total,
        rate: per_second(total, seconds_between(&s.reference, &s.closing)),
    })
}

fn histogram(
    s: &Samples,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> Result<Option<SeriesStats>, Inconsistent> {
    let Some(Value::Histogram {
        buckets,
        sum,
        count,
    }) = s.closing.find(name, labels)
    else {
        return Ok(None);
    };
    let (ref_buckets, ref_sum, ref_count) = match s.reference.find(name, labels) {
        Some(Value::Histogram {
            buckets,
            sum,
            count,
        }) => (buckets.as_slice(), *sum, *count),
        _ => (&[][..], 0.0, 0.0),
    };
    let ascending = |b: &[(String, f64)]| b.windows(2).all(|w| w[0].1 <= w[1].1);
    if !ascending(buckets) || !ascending(ref_buckets) {
        return Err(Inconsistent);
    }
    let cumulative: Vec<(String, f64)> = buckets
        .iter()
        .map(|(le, c)| {
            let before = ref_buckets
                .iter()
                .find(|(l, _)| l == le)
                .map_or(0.0, |(_, c)| *c);
            (le.clone(), c - before)
        })
        .collect();
    let count_delta = count - ref_count;
    let sum_delta = sum - ref_sum;
    let mut figures = [count_delta, sum_delta]
        .into_iter()
        .chain(cumulative.iter().map(|(_, c)| *c));
    if figures.any(|v| !v.is_finite()) || count_delta < 0.0 {
        return Err(Inconsistent);
    }
    let secs = seconds_between(&s.reference, &s.closing);
    let buckets_ok = cumulative.iter().all(|(_, c)| *c >= 0.0) && ascending(&cumulative);
    let estimates = if count_delta > 0.0 && buckets_ok {
        HISTOGRAM_PERCENTILES
            .iter()
            .map(|(_, p)| estimate(&cumulative, *p / 100.0))
            .collect::<Option<Vec<f64>>>()
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    Ok(Some(SeriesStats::Histogram {
        count: count_delta,
        sum: sum_delta,
        avg: (count_delta > 0.0).then(|| sum_delta / count_delta),
        count_rate: per_second(count_delta, secs),
        sum_rate: per_second(sum_delta, secs),
        buckets: buckets_ok.then_some(cumulative),
        estimates,
    }))
}

/// The `q` quantile from cumulative bucket counts: linear inside the bucket holding the
/// rank, from the previous bound (0 for the first); in the `+Inf` bucket, the last finite
/// bound.
pub fn estimate(cumulative: &[(String, f64)], q: f64) -> Option<f64> {
    let total = cumulative.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut prev_bound = 0.0;
    let mut prev_count = 0.0;
    for (le, c) in cumulative {
        let bound: f64 = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().ok()?
        };
        if *c >= rank && *c > prev_count {
            if bound.is_infinite() {
                return Some(prev_bound);
            }
            let lower = if prev_bound < bound { prev_bound } else { 0.0 };
            return Some(lower + (bound - lower) * (rank - prev_count) / (c - prev_count));
        }
        if bound.is_finite() {
            prev_bound = bound;
        }
        prev_count = *c;
    }
    Some(prev_bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::server_series::replay;
    use crate::scrape::ScrapeEvent;
    use crate::scrape::parse::parse;
    use std::sync::Arc;

    fn scrape(at: u64, text: &str) -> ScrapeEvent {
        ScrapeEvent {
            sent_ns: at,
            first_byte_ns: at,
            done_ns: at,
            families: Arc::new(parse(text)),
            changed: true,
        }
    }

    fn summarise_one(scrapes: Vec<ScrapeEvent>, w: Window) -> (Vec<MetricSummary>, EndpointSeries) {
        let s = replay("http://h:1/metrics", &scrapes, &[(Phase::Profiling, w)]);
        (summarise(&[&s], Phase::Profiling).0, s)
    }

    const H: &str = "# TYPE t histogram\n";

    #[test]
    fn counters_take_the_reference_before_the_window_and_the_closing_scrape_after() {
        let c = |v: u64| format!("# TYPE c counter\nc_total {v}\n# TYPE g gauge\ng 1\n");
        let l = vec![
            scrape(0, &c(5)),
            scrape(1_000_000_000, &c(10)),
            scrape(2_000_000_000, &c(40)),
            scrape(3_000_000_000, &c(70)),
            scrape(4_000_000_000, &c(100)),
        ];
        let w = Window {
            start_ns: 1_500_000_000,
            end_ns: 2_500_000_000,
        };
        let (m, _) = summarise_one(l, w);
        let c = m.iter().find(|m| m.name == "c").unwrap();
        assert_eq!(
            c.series[0].stats,
            SeriesStats::Counter {
                total: 60.0,
                rate: 30.0
            }
        );
    }

    #[test]
    fn gauges_use_the_samples_inside_with_sample_std() {
        let g = |v: f64| format!("# TYPE g gauge\ng{{a=\"x\"}} {v}\n");
        let l = (0..6).map(|i| scrape(i * 10, &g(i as f64))).collect();
        let (m, _) = summarise_one(
            l,
            Window {
                start_ns: 10,
                end_ns: 40,
            },
        );
        match &m[0].series[0].stats {
            SeriesStats::Gauge {
                avg,
                min,
                max,
                std,
                percentiles,
            } => {
                assert_eq!((*avg, *min, *max), (2.5, 1.0, 4.0));
                assert!((std - 1.2909944).abs() < 1e-6);
                assert_eq!(percentiles[4], 2.5);
            }
            s => panic!("{s:?}"),
        }
    }

    #[test]
    fn histograms_give_delta_buckets_and_interpolated_estimates() {
        let before = format!(
            "{H}t_bucket{{le=\"0.1\"}} 1\nt_bucket{{le=\"0.5\"}} 2\nt_bucket{{le=\"+Inf\"}} 2\nt_sum 0.3\nt_count 2\n"
        );
        let after = format!(
            "{H}t_bucket{{le=\"0.1\"}} 1\nt_bucket{{le=\"0.5\"}} 12\nt_bucket{{le=\"+Inf\"}} 12\nt_sum 3.3\nt_count 12\n"
        );
        let l = vec![scrape(0, &before), scrape(1_000_000_000, &after)];
        let (m, _) = summarise_one(
            l,
            Window {
                start_ns: 0,
                end_ns: 1_000_000_000,
            },
        );
        match &m[0].series[0].stats {
            SeriesStats::Histogram {
                count,
                sum,
                avg,
                buckets,
                estimates,
                count_rate,
                ..
            } => {
                assert_eq!(*count, 10.0);
                assert!((sum - 3.0).abs() < 1e-9);
                assert!((avg.unwrap() - 0.3).abs() < 1e-9);
                assert_eq!(*count_rate, 10.0);
                let b = buckets.as_ref().unwrap();
                assert_eq!(b[1], ("0.5".to_string(), 10.0));
                // All 10 in (0.1, 0.5]: the median is halfway.
                assert!((estimates[P50] - 0.3).abs() < 1e-9, "{estimates:?}");
            }
            s => panic!("{s:?}"),
        }
    }

    #[test]
    fn estimate_in_the_inf_bucket_is_the_last_bound() {
        let c = vec![("1".to_string(), 1.0), ("+Inf".to_string(), 10.0)];
        assert_eq!(estimate(&c, 0.99), Some(1.0));
        assert_eq!(estimate(&c, 0.05), Some(0.5));
    }

    /// Where p50 sits among the estimates.
    const P50: usize = 4;

    const VLLM: &str = include_str!("../../tests/fixtures/prometheus/vllm.txt");
    const SGLANG: &str = include_str!("../../tests/fixtures/prometheus/sglang.txt");
    const LLAMACPP: &str = include_str!("../../tests/fixtures/prometheus/llamacpp.txt");

    #[test]
    fn vllm_fixture_families_and_window_deltas() {
        let fams = parse(VLLM);
        let get = |n: &str| fams.iter().find(|f| f.name == n).expect(n);
        assert_eq!(get("vllm:num_requests_running").kind, Kind::Gauge);
        assert_eq!(
            get("vllm:num_requests_running").series[0].labels["model_name"],
            "Qwen/Qwen2-VL-2B-Instruct"
        );
        assert_eq!(get("vllm:request_success_total").series.len(), 2);
        assert!(!is_kept(get("vllm:prompt_tokens_created")));
        match &get("vllm:time_to_first_token_seconds").series[0].value {
            Value::Histogram {
                buckets,
                count,
                sum,
            } => {
                assert_eq!(buckets.len(), 4);
                assert_eq!((*count, *sum), (100.0, 3.1));
            }
            v => panic!("{v:?}"),
        }
        let later = VLLM
            .replace("} 52000.0", "} 53000.0")
            .replace("le=\"0.04\",model_name=\"Qwen/Qwen2-VL-2B-Instruct\"} 90.0", "le=\"0.04\",model_name=\"Qwen/Qwen2-VL-2B-Instruct\"} 100.0")
            .replace("le=\"+Inf\",model_name=\"Qwen/Qwen2-VL-2B-Instruct\"} 100.0\nvllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"Qwen/Qwen2-VL-2B-Instruct\"} 100.0", "le=\"+Inf\",model_name=\"Qwen/Qwen2-VL-2B-Instruct\"} 110.0\nvllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"Qwen/Qwen2-VL-2B-Instruct\"} 110.0");
        let l = vec![scrape(0, VLLM), scrape(2_000_000_000, &later)];
        let (m, _) = summarise_one(
            l,
            Window {
                start_ns: 0,
                end_ns: 2_000_000_000,
            },
        );
        let by = |n: &str| &m.iter().find(|x| x.name == n).expect(n).series[0].stats;
        assert_eq!(
            by("vllm:prompt_tokens"),
            &SeriesStats::Counter {
                total: 1000.0,
                rate: 500.0
            }
        );
        match by("vllm:time_to_first_token_seconds") {
            SeriesStats::Histogram {
                count, estimates, ..
            } => {
                assert_eq!(*count, 10.0);
                // All ten new ones in (0.02, 0.04]: p50 halfway.
                assert!((estimates[P50] - 0.03).abs() < 1e-9, "{estimates:?}");
            }
            s => panic!("{s:?}"),
        }
        assert!(m.iter().all(|x| x.name != "vllm:prompt_tokens_created"));
    }

    #[test]
    fn sglang_summaries_are_skipped_and_histograms_read_in_any_order() {
        let (m, l) = summarise_one(
            vec![scrape(0, SGLANG)],
            Window {
                start_ns: 0,
                end_ns: 0,
            },
        );
        assert_eq!(skipped_summaries(&[&l]), ["sglang:func_latency_seconds"]);
        assert!(m.iter().all(|x| x.kind != Kind::Summary));
        let names: Vec<&str> = m.iter().map(|x| x.name.as_str()).collect();
        assert!(names.contains(&"sglang:token_usage"), "{names:?}");
        assert!(names.contains(&"sglang:time_to_first_token_seconds"));
    }

    #[test]
    fn llamacpp_unlabelled_series_and_escaped_label_values() {
        let fams = parse(LLAMACPP);
        let get = |n: &str| fams.iter().find(|f| f.name == n).expect(n);
        assert_eq!(get("llamacpp:prompt_tokens_total").kind, Kind::Counter);
        assert!(
            get("llamacpp:kv_cache_usage_ratio").series[0]
                .labels
                .is_empty()
        );
        let info = &get("build_info").series[0].labels;
        assert_eq!(info["path"], r"C:\models\m.gguf");
        assert_eq!(info["note"], "say \"hi\"\nbye");
        assert_eq!(get("build_info").kind, Kind::Unknown);
    }
}
