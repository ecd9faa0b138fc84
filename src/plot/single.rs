//! The plots of one run: latency distributions, the per-request timeline, throughput and
//! requests in flight over time, image size effects, server metrics and time slices.

use super::chart::{Axis, Chart, Mark, Series, SeriesKind};
use super::load::{MetricKey, RecordRow, RunArtifacts, ServerSample};

/// Every single-run chart the run has data for, by name; the names of those it has not.
pub fn charts(run: &RunArtifacts) -> Vec<(String, Option<Chart>)> {
    let ok = |r: &RecordRow| !r.failed;
    let mut out = Vec::new();
    for (name, tag, what) in [
        (
            "ttft_distribution",
            "time_to_first_token",
            "Time to first token",
        ),
        (
            "itl_distribution",
            "inter_token_latency",
            "Inter-token latency",
        ),
        (
            "request_latency_distribution",
            "request_latency",
            "Request latency",
        ),
    ] {
        let key = MetricKey::new(tag);
        let values: Vec<f64> = run
            .records
            .iter()
            .filter(|r| ok(r))
            .filter_map(|r| r.metric_of(key))
            .collect();
        out.push((name.into(), distribution(run, name, tag, what, values)));
    }
    out.push(("request_timeline".into(), request_timeline(run)));
    for (name, tag, what) in [
        (
            "ttft_over_time",
            "time_to_first_token",
            "Time to first token",
        ),
        (
            "itl_over_time",
            "inter_token_latency",
            "Inter-token latency",
        ),
        ("latency_over_time", "request_latency", "Request latency"),
    ] {
        out.push((name.into(), over_time(run, name, tag, what)));
    }
    out.push((
        "dispersed_throughput_over_time".into(),
        throughput_over_time(run),
    ));
    out.push(("image_tokens_by_size".into(), by_image_size(run, true)));
    out.push(("latency_by_image_size".into(), by_image_size(run, false)));
    out.push(("server_requests_over_time".into(), server_requests(run)));
    out.push(("server_kv_cache_over_time".into(), server_kv_cache(run)));
    out.push((
        "timeslices_ttft".into(),
        timeslice(run, "timeslices_ttft", "Time to First Token"),
    ));
    out.push((
        "timeslices_itl".into(),
        timeslice(run, "timeslices_itl", "Inter Token Latency"),
    ));
    out.push((
        "timeslices_latency".into(),
        timeslice(run, "timeslices_latency", "Request Latency"),
    ));
    out.push((
        "timeslices_throughput".into(),
        timeslice(run, "timeslices_throughput", "Output Token Throughput"),
    ));
    out
}

/// Seconds since the run's first send.
fn secs(run: &RunArtifacts, wall_ns: u64) -> f64 {
    let t0 = run.first_start_ns().unwrap_or(wall_ns);
    (wall_ns as f64 - t0 as f64) / 1e9
}

/// Sorted values at cumulative shares i/(n-1): the line crosses share q at numpy's
/// linear-interpolated q-quantile, so it meets the run's own percentiles.
pub fn cdf_points(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v = values.to_vec();
    // Values equal by `total_cmp` have the same bits: an unstable sort gives the same order.
    v.sort_unstable_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => Vec::new(),
        1 => vec![(v[0], 0.0), (v[0], 1.0)],
        _ => v
            .iter()
            .enumerate()
            .map(|(i, &x)| (x, i as f64 / (n - 1) as f64))
            .collect(),
    }
}

/// A histogram of about sqrt(n) bins (10 to 40) over the values' span.
fn histogram(values: &[f64]) -> (Vec<(f64, f64)>, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let bins = ((values.len() as f64).sqrt().ceil() as usize).clamp(10, 40);
    // Divided before subtracting: max - min overflows for values near f64::MAX.
    let width = if max > min {
        max / bins as f64 - min / bins as f64
    } else {
        (min.abs() * 0.05).max(1e-3)
    };
    let mut counts = vec![0.0; bins];
    for &v in values {
        let i = (((v - min) / width) as usize).min(bins - 1);
        counts[i] += 1.0;
    }
    let points = counts
        .into_iter()
        .enumerate()
        .map(|(i, c)| (min + i as f64 * width, c))
        .collect();
    (points, width)
}

fn distribution(
    run: &RunArtifacts,
    name: &str,
    tag: &str,
    what: &str,
    values: Vec<f64>,
) -> Option<Chart> {
    if values.is_empty() {
        return None;
    }
    let (bars, width) = histogram(&values);
    let mut hist = Series::new("Requests per bin", SeriesKind::Bars, bars);
    hist.bar_width = Some(width);
    let mut cdf = Series::new(
        "Cumulative share (CDF)",
        SeriesKind::Line,
        cdf_points(&values),
    );
    cdf.on_y2 = true;
    let marks = ["p50", "p90", "p99"]
        .iter()
        .filter_map(|p| {
            let v = run
                .stat(tag, p)
                .or_else(|| super::stats_percentile(&values, p))?;
            Some(Mark {
                on_x: true,
                value: v,
                label: format!("{p} {v:.1} ms"),
            })
        })
        .collect();
    Some(Chart {
        name: name.into(),
        title: format!("{what} distribution ({} requests)", values.len()),
        description: format!(
            "How {} is spread across requests: the bulk, the tail, and where p50/p90/p99 fall.",
            what.to_lowercase()
        ),
        x: Axis::linear(format!("{what} (ms)"), true),
        y: Axis::linear("Requests", true),
        y2: Some(Axis::linear("Share of requests at or below (CDF)", true)),
        series: vec![hist, cdf],
        marks,
    })
}

fn request_timeline(run: &RunArtifacts) -> Option<Chart> {
    if run.records.is_empty() {
        return None;
    }
    let point = |r: &RecordRow, key| Some((secs(run, r.start_ns), r.metric_of(key)?));
    let ok: Vec<&RecordRow> = run.records.iter().filter(|r| !r.failed).collect();
    let (latency_key, ttft_key) = (
        MetricKey::new("request_latency"),
        MetricKey::new("time_to_first_token"),
    );
    let latency = ok.iter().filter_map(|r| point(r, latency_key)).collect();
    let ttft = ok.iter().filter_map(|r| point(r, ttft_key)).collect();
    // A failed request has no latency metric: its time to the error stands in.
    let errors: Vec<(f64, f64)> = run
        .records
        .iter()
        .filter(|r| r.failed)
        .map(|r| {
            let ms = r.end_ns.saturating_sub(r.start_ns) as f64 / 1e6;
            (secs(run, r.start_ns), ms)
        })
        .collect();
    let mut series = vec![
        Series::new("Request latency", SeriesKind::Scatter, latency),
        Series::new("Time to first token", SeriesKind::Scatter, ttft),
    ];
    if !errors.is_empty() {
        let mut e = Series::new(
            "Failed request (time to error)",
            SeriesKind::Scatter,
            errors,
        );
        e.error_points = true;
        series.push(e);
    }
    Some(Chart {
        name: "request_timeline".into(),
        title: "Per-request latency and TTFT by send time".into(),
        description: "Whether latency or TTFT drifted during the run, and when requests failed."
            .into(),
        x: Axis::time("Send time since the first request (s)"),
        y: Axis::linear("Latency (ms)", true),
        y2: None,
        series,
        marks: Vec::new(),
    })
}

fn over_time(run: &RunArtifacts, name: &str, tag: &str, what: &str) -> Option<Chart> {
    let mut ok: Vec<&RecordRow> = run.records.iter().filter(|r| !r.failed).collect();
    ok.sort_by_key(|r| r.start_ns);
    let key = MetricKey::new(tag);
    let points: Vec<(f64, f64)> = ok
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some(((i + 1) as f64, r.metric_of(key)?)))
        .collect();
    if points.is_empty() {
        return None;
    }
    Some(Chart {
        name: name.into(),
        title: format!("{what} per request, in send order"),
        description: format!(
            "Whether {} grows as the run goes on (queueing, warm-up) or stays flat.",
            what.to_lowercase()
        ),
        x: Axis::linear("Request number (send order)", false),
        y: Axis::linear(format!("{what} (ms)"), true),
        y2: None,
        series: vec![Series::new(what, SeriesKind::Scatter, points)],
        marks: Vec::new(),
    })
}

/// Output tokens per second, each request's tokens spread evenly from its first token to
/// its end, in about 60 windows; requests in flight as a step line on the second axis.
fn throughput_over_time(run: &RunArtifacts) -> Option<Chart> {
    let ok: Vec<&RecordRow> = run.records.iter().filter(|r| !r.failed).collect();
    if ok.is_empty() {
        return None;
    }
    let end = run
        .records
        .iter()
        .map(|r| secs(run, r.end_ns))
        .fold(0.0, f64::max);
    let windows = 60usize;
    let width = (end / windows as f64).max(1e-3);
    let mut tokens = vec![0.0; windows + 1];
    let (osl_key, ttft_key) = (
        MetricKey::new("output_sequence_length"),
        MetricKey::new("time_to_first_token"),
    );
    for r in &ok {
        let Some(n) = r.metric_of(osl_key) else {
            continue;
        };
        let first = secs(run, r.start_ns) + r.metric_of(ttft_key).unwrap_or(0.0) / 1e3;
        let last = secs(run, r.end_ns).max(first);
        spread(&mut tokens, width, first, last, n);
    }
    let throughput = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (i as f64 * width, t / width))
        .collect();
    // Requests in flight change at each send and each end.
    let mut events: Vec<(f64, i64)> = run
        .records
        .iter()
        .flat_map(|r| [(secs(run, r.start_ns), 1), (secs(run, r.end_ns), -1)])
        .collect();
    // Whole-tuple order: equal events are identical, so an unstable sort gives the same.
    events.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut in_flight = 0i64;
    let mut steps = vec![(0.0, 0.0)];
    for (t, d) in events {
        in_flight += d;
        steps.push((t, in_flight as f64));
    }
    let mut flight = Series::new("Requests in flight", SeriesKind::Step, steps);
    flight.on_y2 = true;
    Some(Chart {
        name: "dispersed_throughput_over_time".into(),
        title: "Output token throughput and requests in flight over time".into(),
        description: "Whether the server kept a steady token rate, and how it followed the load in flight (ramp-up, tail).".into(),
        x: Axis::time("Time since the first request (s)"),
        y: Axis::linear("Output token throughput (tokens/s)", true),
        y2: Some(Axis::linear("Requests in flight", true)),
        series: vec![
            Series::new("Output tokens/s", SeriesKind::Area, throughput),
            flight,
        ],
        marks: Vec::new(),
    })
}

/// Adds `n` tokens spread evenly over [from, to] into windows of `width` seconds.
fn spread(bins: &mut [f64], width: f64, from: f64, to: f64, n: f64) {
    let last = bins.len() - 1;
    if to - from <= 0.0 {
        bins[((from / width) as usize).min(last)] += n;
        return;
    }
    let rate = n / (to - from);
    let mut t = from;
    while t < to {
        let i = ((t / width) as usize).min(last);
        let edge = ((i + 1) as f64 * width).min(to);
        let edge = if edge <= t { to } else { edge };
        bins[i] += rate * (edge - t);
        t = edge;
    }
}

fn by_image_size(run: &RunArtifacts, tokens: bool) -> Option<Chart> {
    let (tag, name) = if tokens {
        ("image_token_count", "image_tokens_by_size")
    } else {
        ("request_latency", "latency_by_image_size")
    };
    let key = MetricKey::new(tag);
    let points: Vec<(f64, f64)> = run
        .records
        .iter()
        .filter(|r| !r.failed && !r.images.is_empty())
        .filter_map(|r| {
            let px: f64 = r.images.iter().map(|(w, h)| *w as f64 * *h as f64).sum();
            Some((px / 1e6, r.metric_of(key)?))
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    let (title, y, description) = if tokens {
        (
            "Image tokens charged per request by image size",
            "Image tokens per request",
            "How many prompt tokens the server charged for images of each size (the model's image tokenization).",
        )
    } else {
        (
            "Request latency by image size",
            "Request latency (ms)",
            "How much larger images cost in end-to-end latency.",
        )
    };
    Some(Chart {
        name: name.into(),
        title: title.into(),
        description: description.into(),
        x: Axis::linear("Image pixels per request (megapixels)", true),
        y: Axis::linear(y, true),
        y2: None,
        series: vec![Series::new(y, SeriesKind::Scatter, points)],
        marks: Vec::new(),
    })
}

/// The first family present among `names`.
fn family<'a>(run: &'a RunArtifacts, names: &[&str]) -> Option<&'a [ServerSample]> {
    names
        .iter()
        .find_map(|n| run.server.get(*n).map(Vec::as_slice))
}

/// Client TTFT by send time, on the second axis of the server plots.
fn client_ttft(run: &RunArtifacts) -> Series {
    let key = MetricKey::new("time_to_first_token");
    let points = run
        .records
        .iter()
        .filter(|r| !r.failed)
        .filter_map(|r| Some((secs(run, r.start_ns), r.metric_of(key)?)))
        .collect();
    let mut s = Series::new("Client TTFT (ms)", SeriesKind::Scatter, points);
    s.on_y2 = true;
    s
}

const RUNNING: &[&str] = &[
    "vllm:num_requests_running",
    "sglang:num_running_reqs",
    "llamacpp:requests_processing",
];
const WAITING: &[&str] = &[
    "vllm:num_requests_waiting",
    "sglang:num_queue_reqs",
    "llamacpp:requests_deferred",
];
const KV_CACHE: &[&str] = &[
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:token_usage",
    "llamacpp:kv_cache_usage_ratio",
];

fn server_requests(run: &RunArtifacts) -> Option<Chart> {
    let running = family(run, RUNNING);
    let waiting = family(run, WAITING);
    if running.is_none() && waiting.is_none() || run.records.is_empty() {
        return None;
    }
    let line = |name: &str, s: &[ServerSample]| {
        let pts = s.iter().map(|x| (secs(run, x.wall_ns), x.sum)).collect();
        Series::new(name, SeriesKind::Step, pts)
    };
    let mut series = Vec::new();
    series.extend(running.map(|s| line("Server: requests running", s)));
    series.extend(waiting.map(|s| line("Server: requests waiting", s)));
    series.push(client_ttft(run));
    Some(Chart {
        name: "server_requests_over_time".into(),
        title: "Server requests running and waiting, with client TTFT".into(),
        description: "Whether TTFT rises when requests queue on the server (waiting > 0) rather than in the network or client.".into(),
        x: Axis::time("Time since the first request (s)"),
        y: Axis::linear("Requests on the server", true),
        y2: Some(Axis::linear("Client time to first token (ms)", true)),
        series,
        marks: Vec::new(),
    })
}

fn server_kv_cache(run: &RunArtifacts) -> Option<Chart> {
    let kv = family(run, KV_CACHE)?;
    if run.records.is_empty() {
        return None;
    }
    // Servers publish the usage as a 0-1 ratio; averaged over engines.
    let pts = kv
        .iter()
        .map(|x| (secs(run, x.wall_ns), 100.0 * x.sum / x.series.max(1) as f64))
        .collect();
    Some(Chart {
        name: "server_kv_cache_over_time".into(),
        title: "Server KV-cache usage, with client TTFT".into(),
        description: "How full the server's KV cache ran, and whether TTFT climbs as it fills."
            .into(),
        x: Axis::time("Time since the first request (s)"),
        y: Axis::linear("KV-cache usage (%)", true),
        y2: Some(Axis::linear("Client time to first token (ms)", true)),
        series: vec![
            Series::new("Server: KV-cache usage", SeriesKind::Step, pts),
            client_ttft(run),
        ],
        marks: Vec::new(),
    })
}

fn timeslice(run: &RunArtifacts, name: &str, metric: &str) -> Option<Chart> {
    let rows: Vec<_> = run
        .timeslices
        .iter()
        .filter(|r| r.metric == metric && r.stat == "avg")
        .collect();
    let unit = rows.first()?.unit.clone();
    let points = rows.iter().map(|r| (r.index as f64, r.value)).collect();
    let mut bars = Series::new(format!("{metric} (avg)"), SeriesKind::Bars, points);
    bars.bar_width = Some(0.8);
    Some(Chart {
        name: name.into(),
        title: format!("{metric} per time slice"),
        description: format!(
            "How the average {} changed from one time slice to the next.",
            metric.to_lowercase()
        ),
        x: Axis::linear("Time slice (index)", false),
        y: Axis::linear(format!("{metric} ({unit})"), true),
        y2: None,
        series: vec![bars],
        marks: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_crosses_half_at_the_median() {
        let pts = cdf_points(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!(
            pts,
            vec![(1.0, 0.0), (2.0, 1.0 / 3.0), (3.0, 2.0 / 3.0), (4.0, 1.0)]
        );
    }

    #[test]
    fn spread_keeps_every_token() {
        let mut bins = vec![0.0; 5];
        spread(&mut bins, 1.0, 0.5, 3.5, 30.0);
        assert!((bins.iter().sum::<f64>() - 30.0).abs() < 1e-9);
        assert!((bins[0] - 5.0).abs() < 1e-9 && (bins[1] - 10.0).abs() < 1e-9);
    }
}
