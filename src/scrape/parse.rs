//! The Prometheus text exposition format (and the OpenMetrics text that servers send in its
//! place) into metric families, with the `prometheus-parse` crate doing the line work.

use std::collections::BTreeMap;

/// What a family measures, as its `# TYPE` line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    /// No `# TYPE` (or `untyped`): treated like a gauge, reported as `unknown`.
    Unknown,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
            Kind::Unknown => "unknown",
        }
    }
}

/// One sample of one label set.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Counter, gauge or untyped value.
    Scalar(f64),
    /// Cumulative bucket counts by upper bound (`le`, as written, `+Inf` last), sum, count.
    Histogram {
        buckets: Vec<(String, f64)>,
        sum: f64,
        count: f64,
    },
    /// Quantiles by `quantile`, sum, count.
    Summary {
        quantiles: Vec<(String, f64)>,
        sum: f64,
        count: f64,
    },
}

/// One label set of a family and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub value: Value,
}

/// A metric family: its name, type, help text and series.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub kind: Kind,
    pub help: String,
    pub series: Vec<Series>,
}

/// Parses one exposition. Lines the format does not allow are skipped (a server that
/// writes one bad line still gives the rest); families come out sorted by name.
pub fn parse(text: &str) -> Vec<Family> {
    // OpenMetrics ends with `# EOF` and may add `_created` samples; the crate reads the rest.
    let lines = text
        .lines()
        .filter(|l| l.trim() != "# EOF")
        .map(|l| Ok::<_, std::io::Error>(l.to_string()));
    let Ok(scrape) = prometheus_parse::Scrape::parse(lines) else {
        return Vec::new();
    };
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for s in scrape.samples {
        let (kind, value) = match s.value {
            prometheus_parse::Value::Counter(v) => (Kind::Counter, Value::Scalar(v)),
            prometheus_parse::Value::Gauge(v) => (Kind::Gauge, Value::Scalar(v)),
            prometheus_parse::Value::Untyped(v) => (Kind::Unknown, Value::Scalar(v)),
            prometheus_parse::Value::Histogram(buckets) => (
                Kind::Histogram,
                Value::Histogram {
                    buckets: buckets
                        .iter()
                        .map(|b| (le_text(b.less_than), b.count))
                        .collect(),
                    sum: 0.0,
                    count: 0.0,
                },
            ),
            prometheus_parse::Value::Summary(quantiles) => (
                Kind::Summary,
                Value::Summary {
                    quantiles: quantiles
                        .iter()
                        .map(|q| (q.quantile.to_string(), q.count))
                        .collect(),
                    sum: 0.0,
                    count: 0.0,
                },
            ),
        };
        let labels: BTreeMap<String, String> = s
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let family = families.entry(s.metric.clone()).or_insert_with(|| Family {
            name: s.metric.clone(),
            kind,
            help: scrape.docs.get(&s.metric).cloned().unwrap_or_default(),
            series: Vec::new(),
        });
        family.series.push(Series { labels, value });
    }
    // The crate reports `_sum` and `_count` of histograms and summaries as plain samples of
    // their own names; fold them into their family.
    let names: Vec<String> = families.keys().cloned().collect();
    for name in names {
        for (suffix, is_sum) in [("_sum", true), ("_count", false)] {
            let Some(base) = name.strip_suffix(suffix) else {
                continue;
            };
            let is_aggregate = families
                .get(base)
                .is_some_and(|f| matches!(f.kind, Kind::Histogram | Kind::Summary));
            if !is_aggregate {
                continue;
            }
            let part = families.remove(&name).expect("listed above");
            let family = families.get_mut(base).expect("checked above");
            for p in part.series {
                let Value::Scalar(v) = p.value else { continue };
                if let Some(series) = family.series.iter_mut().find(|s| s.labels == p.labels) {
                    match &mut series.value {
                        Value::Histogram { sum, count, .. } | Value::Summary { sum, count, .. } => {
                            if is_sum {
                                *sum = v;
                            } else {
                                *count = v;
                            }
                        }
                        Value::Scalar(_) => {}
                    }
                }
            }
        }
    }
    families.into_values().collect()
}

/// A bucket bound as Prometheus writes it (`0.1`, `+Inf`).
fn le_text(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".to_string()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1234.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.01",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 5.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 6.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 6.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.75
"#;

    #[test]
    fn gauges_counters_and_histograms_with_labels() {
        let f = parse(VLLM);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "vllm:num_requests_running",
                "vllm:prompt_tokens_total",
                "vllm:time_to_first_token_seconds"
            ]
        );
        assert_eq!(f[0].kind, Kind::Gauge);
        assert_eq!(f[0].help, "Number of requests in model execution batches.");
        assert_eq!(f[0].series[0].labels["model_name"], "m");
        assert_eq!(f[0].series[0].value, Value::Scalar(3.0));
        assert_eq!(f[1].kind, Kind::Counter);
        assert_eq!(f[1].series[0].value, Value::Scalar(1234.0));
        let Value::Histogram {
            buckets,
            sum,
            count,
        } = &f[2].series[0].value
        else {
            panic!("{:?}", f[2]);
        };
        assert_eq!(
            buckets,
            &[
                ("0.01".to_string(), 1.0),
                ("0.1".to_string(), 5.0),
                ("+Inf".to_string(), 6.0)
            ]
        );
        assert_eq!((*sum, *count), (0.75, 6.0));
        assert!(!f[2].series[0].labels.contains_key("le"));
    }

    #[test]
    fn garbage_and_openmetrics_eof() {
        assert!(parse("").is_empty());
        let f = parse("# TYPE up gauge\nup 1\n# EOF\n");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].series[0].value, Value::Scalar(1.0));
    }
}
