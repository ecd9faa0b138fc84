//! The Prometheus text exposition format (and the OpenMetrics text servers send in its
//! place) into metric families. Hand-written: the `prometheus-parse` crate rejects metric
//! names with `:`, which every vLLM and SGLang metric has (`vllm:num_requests_running`).

use std::collections::{BTreeMap, HashMap};

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
    parse_capped(text, usize::MAX).0
}

/// [`parse`], keeping at most `max_series` series (the first ones in the text); also
/// returns how many more it left out.
pub fn parse_capped(text: &str, max_series: usize) -> (Vec<Family>, usize) {
    let mut series_count = 0usize;
    let mut dropped = 0usize;
    let mut kinds: BTreeMap<String, Kind> = BTreeMap::new();
    let mut helps: BTreeMap<String, String> = BTreeMap::new();
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    // Each family's series by label set: a family of 10,000 series is not searched in full
    // for each of its samples.
    let mut positions: HashMap<String, HashMap<BTreeMap<String, String>, usize>> = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.trim_start().splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("TYPE"), Some(name), Some(kind)) => {
                    kinds.insert(name.to_string(), kind_of(kind.trim()));
                }
                (Some("HELP"), Some(name), help) => {
                    helps.insert(name.to_string(), unescape(help.unwrap_or("").trim()));
                }
                _ => {}
            }
            continue;
        }
        let Some((name, labels, value)) = sample_line(line) else {
            continue;
        };
        let (family_name, part) = family_of(&name, &kinds);
        let kind = kinds.get(&family_name).copied().unwrap_or(Kind::Unknown);
        if part == Part::Created {
            continue;
        }
        let family = families
            .entry(family_name.clone())
            .or_insert_with(|| Family {
                help: helps.get(&family_name).cloned().unwrap_or_default(),
                name: family_name.clone(),
                kind,
                series: Vec::new(),
            });
        let positions = positions.entry(family_name).or_default();
        let mut labels = labels;
        // A bucket's bound and a quantile are part of the sample, not of its series.
        let bound = match part {
            Part::Bucket => labels.remove("le"),
            Part::Value if family.kind == Kind::Summary => labels.remove("quantile"),
            _ => None,
        };
        if !positions.contains_key(&labels) {
            if series_count == max_series {
                dropped += 1;
                continue;
            }
            series_count += 1;
        }
        add_sample(family, positions, part, labels, bound, value);
    }
    for f in families.values_mut() {
        if f.help.is_empty() {
            f.help = helps.get(&f.name).cloned().unwrap_or_default();
        }
    }
    // A family whose every series the cap left out has none: drop it too.
    let families = families
        .into_values()
        .filter(|f| !f.series.is_empty())
        .collect();
    (families, dropped)
}

/// Which part of its family a sample is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Value,
    Bucket,
    Sum,
    Count,
    Created,
}

/// The family a sample name belongs to: itself, or its base for `_bucket`/`_sum`/`_count`
/// of a histogram or summary, `_total`/`_created` of an OpenMetrics counter.
fn family_of(name: &str, kinds: &BTreeMap<String, Kind>) -> (String, Part) {
    if kinds.contains_key(name) {
        return (name.to_string(), Part::Value);
    }
    for (suffix, part) in [
        ("_bucket", Part::Bucket),
        ("_sum", Part::Sum),
        ("_count", Part::Count),
        ("_total", Part::Value),
        ("_created", Part::Created),
    ] {
        if let Some(base) = name.strip_suffix(suffix)
            && let Some(kind) = kinds.get(base)
        {
            let fits = match part {
                Part::Bucket => *kind == Kind::Histogram,
                Part::Sum | Part::Count => matches!(kind, Kind::Histogram | Kind::Summary),
                Part::Value => *kind == Kind::Counter,
                Part::Created => true,
            };
            if fits {
                return (base.to_string(), part);
            }
        }
    }
    (name.to_string(), Part::Value)
}

fn add_sample(
    family: &mut Family,
    positions: &mut HashMap<BTreeMap<String, String>, usize>,
    part: Part,
    labels: BTreeMap<String, String>,
    bound: Option<String>,
    v: f64,
) {
    let series = match positions.get(&labels) {
        Some(&i) => &mut family.series[i],
        None => {
            positions.insert(labels.clone(), family.series.len());
            let value = match family.kind {
                Kind::Histogram => Value::Histogram {
                    buckets: Vec::new(),
                    sum: 0.0,
                    count: 0.0,
                },
                Kind::Summary => Value::Summary {
                    quantiles: Vec::new(),
                    sum: 0.0,
                    count: 0.0,
                },
                _ => Value::Scalar(0.0),
            };
            family.series.push(Series { labels, value });
            family.series.last_mut().expect("just pushed")
        }
    };
    match (&mut series.value, part) {
        (Value::Scalar(x), _) => *x = v,
        (Value::Histogram { buckets, .. }, Part::Bucket) => {
            buckets.push((bound.unwrap_or_default(), v));
        }
        (Value::Summary { quantiles, .. }, Part::Value) => {
            quantiles.push((bound.unwrap_or_default(), v));
        }
        (Value::Histogram { sum, .. } | Value::Summary { sum, .. }, Part::Sum) => *sum = v,
        (Value::Histogram { count, .. } | Value::Summary { count, .. }, Part::Count) => *count = v,
        _ => {}
    }
}

fn kind_of(s: &str) -> Kind {
    match s {
        "counter" => Kind::Counter,
        "gauge" => Kind::Gauge,
        "histogram" => Kind::Histogram,
        "summary" => Kind::Summary,
        _ => Kind::Unknown,
    }
}

/// `name{k="v",...} value [timestamp]` -> (name, labels, value).
fn sample_line(line: &str) -> Option<(String, BTreeMap<String, String>, f64)> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let (parsed, after) = label_set(inner)?;
        labels = parsed;
        rest = after;
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some((name.to_string(), labels, value))
}

/// `k="v",k2="v2"}` -> the labels and what follows the `}`.
fn label_set(mut s: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        labels.insert(key, value);
        s = &s[end + 1..];
    }
}

fn unescape(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\\\", "\\")
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
    fn escapes_summaries_openmetrics_counters_and_untyped() {
        let text = "# TYPE rpc summary\nrpc{quantile=\"0.5\"} 0.2\nrpc{quantile=\"0.99\"} 0.9\nrpc_sum 10\nrpc_count 40\n\
# TYPE reqs counter\nreqs_total{path=\"a\\\"b\\\\c\",} 7\nreqs_created 1.7e9\nbare_metric 3 1700000000000\nbad line here\n";
        let f = parse(text);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["bare_metric", "reqs", "rpc"]);
        assert_eq!(f[0].kind, Kind::Unknown);
        assert_eq!(f[1].series[0].labels["path"], "a\"b\\c");
        assert_eq!(f[1].series[0].value, Value::Scalar(7.0));
        let Value::Summary {
            quantiles,
            sum,
            count,
        } = &f[2].series[0].value
        else {
            panic!()
        };
        assert_eq!(quantiles.len(), 2);
        assert_eq!((*sum, *count), (10.0, 40.0));
    }

    #[test]
    fn garbage_and_openmetrics_eof() {
        assert!(parse("").is_empty());
        let f = parse("# TYPE up gauge\nup 1\n# EOF\n");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].series[0].value, Value::Scalar(1.0));
    }
}
