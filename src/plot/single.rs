//! The plots of one run: latency distributions, the per-request timeline, throughput and
//! requests in flight over time, image size effects, server metrics and time slices.

use super::artifacts::{MetricKey, RecordRow, RunArtifacts, ServerSample};
use super::chart::{Axis, Chart, Mark, Series, SeriesKind};
use crate::scrape::engines::{KV_CACHE, RUNNING, WAITING};

/// What the per-request charts show of a run's records, worked out from them: from every
/// record in memory (`PerRecord::of`), or read as a stream with each series already thinned
/// for the report (`streamed`).
#[derive(Debug, Default)]
pub struct PerRecord {
    /// TTFT, ITL and request latency (`DISTRIBUTIONS`).
    pub distributions: [Option<Distribution>; 3],
    /// Latency, TTFT and failed requests by send time; `None` without records.
    pub timeline: Option<[Series; 3]>,
    /// TTFT, ITL and request latency in send order (`OVER_TIME`).
    pub over_time: [Option<Series>; 3],
    /// Output tokens per second and requests in flight; `None` without a valid request.
    pub throughput: Option<(Series, Series)>,
}

/// A distribution chart's data: `count` values, their histogram, their CDF, and the
/// percentiles of the values themselves (for a run whose summary lacks them).
#[derive(Debug)]
pub struct Distribution {
    pub count: usize,
    pub bars: (Vec<(f64, f64)>, f64),
    pub cdf: Series,
    /// p50, p90, p99 (`MARKS`).
    pub percentiles: [Option<f64>; 3],
}

/// The distribution charts: name, tag, what.
pub const DISTRIBUTIONS: [(&str, &str, &str); 3] = [
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
];

/// The per-request charts in send order: name, tag, what.
pub const OVER_TIME: [(&str, &str, &str); 3] = [
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
];

/// The percentiles marked on a distribution.
pub const MARKS: [&str; 3] = ["p50", "p90", "p99"];

impl PerRecord {
    /// From the run's records, every point kept.
    pub fn of(run: &RunArtifacts) -> PerRecord {
        let ok = |r: &RecordRow| !r.failed;
        let distributions = DISTRIBUTIONS.map(|(_, tag, _)| {
            let key = MetricKey::new(tag);
            let values: Vec<f64> = run
                .records
                .iter()
                .filter(|r| ok(r))
                .filter_map(|r| r.metric_of(key))
                .collect();
            (!values.is_empty()).then(|| Distribution {
                count: values.len(),
                bars: histogram(&values),
                cdf: cdf_series(cdf_points(&values)),
                percentiles: MARKS.map(|p| super::stats_percentile(&values, p)),
            })
        });
        PerRecord {
            distributions,
            timeline: request_timeline(run),
            over_time: OVER_TIME.map(|(_, tag, what)| over_time(run, tag, what)),
            throughput: throughput_over_time(run),
        }
    }
}

/// Every single-run chart the run has data for, by name; the names of those it has not.
pub fn charts(run: &RunArtifacts) -> Vec<(String, Option<Chart>)> {
    charts_of(run, PerRecord::of(run))
}

/// The single-run charts, the per-request ones from `data`. The image charts read the
/// run's records: a streamed run keeps only those with images.
pub fn charts_of(run: &RunArtifacts, data: PerRecord) -> Vec<(String, Option<Chart>)> {
    let mut out = Vec::new();
    let PerRecord {
        distributions,
        timeline,
        over_time,
        throughput,
    } = data;
    for ((name, tag, what), d) in DISTRIBUTIONS.into_iter().zip(distributions) {
        out.push((
            name.into(),
            d.map(|d| distribution(run, name, tag, what, d)),
        ));
    }
    // The server charts show the timeline's TTFT series on their second axis.
    let client_ttft = timeline.as_ref().map(|t| {
        let mut s = t[1].clone();
        s.name = "Client TTFT (ms)".into();
        s.on_y2 = true;
        s
    });
    out.push(("request_timeline".into(), timeline.map(timeline_chart)));
    for ((name, _, what), points) in OVER_TIME.into_iter().zip(over_time) {
        out.push((name.into(), points.map(|p| over_time_chart(name, what, p))));
    }
    out.push((
        "dispersed_throughput_over_time".into(),
        throughput.map(throughput_chart),
    ));
    out.push(("image_tokens_by_size".into(), by_image_size(run, true)));
    out.push(("latency_by_image_size".into(), by_image_size(run, false)));
    out.push((
        "server_requests_over_time".into(),
        client_ttft.clone().and_then(|c| server_requests(run, c)),
    ));
    out.push((
        "server_kv_cache_over_time".into(),
        client_ttft.and_then(|c| server_kv_cache(run, c)),
    ));
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
    // Every chart says how many requests failed: most draw only the others.
    if let Some(requests) = run.requests() {
        let line = format!("Run: {}", requests.text());
        for chart in out.iter_mut().filter_map(|(_, c)| c.as_mut()) {
            chart.subtitle = line.clone();
        }
    }
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

/// The CDF line of a distribution chart.
pub fn cdf_series(points: Vec<(f64, f64)>) -> Series {
    let mut cdf = Series::new("Cumulative share (CDF)", SeriesKind::Line, points);
    cdf.on_y2 = true;
    cdf
}

/// A histogram of about sqrt(n) bins (10 to 40) over the span of `n` values from `min`
/// to `max`, the values added one at a time.
pub struct Histogram {
    min: f64,
    width: f64,
    counts: Vec<f64>,
}

impl Histogram {
    pub fn new(n: usize, min: f64, max: f64) -> Histogram {
        let bins = ((n as f64).sqrt().ceil() as usize).clamp(10, 40);
        // Divided before subtracting: max - min overflows for values near f64::MAX.
        let width = if max > min {
            max / bins as f64 - min / bins as f64
        } else {
            (min.abs() * 0.05).max(1e-3)
        };
        Histogram {
            min,
            width,
            counts: vec![0.0; bins],
        }
    }

    pub fn add(&mut self, v: f64) {
        let bins = self.counts.len();
        let i = (((v - self.min) / self.width) as usize).min(bins - 1);
        self.counts[i] += 1.0;
    }

    /// The bars (left edge, count) and their width.
    pub fn bars(self) -> (Vec<(f64, f64)>, f64) {
        let (min, width) = (self.min, self.width);
        let points = self
            .counts
            .into_iter()
            .enumerate()
            .map(|(i, c)| (min + i as f64 * width, c))
            .collect();
        (points, width)
    }
}

/// The least and the largest value as the histogram takes them.
fn extremes(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    (
        values.clone().fold(f64::INFINITY, f64::min),
        values.fold(f64::NEG_INFINITY, f64::max),
    )
}

fn histogram(values: &[f64]) -> (Vec<(f64, f64)>, f64) {
    let (min, max) = extremes(values.iter().copied());
    let mut h = Histogram::new(values.len(), min, max);
    for &v in values {
        h.add(v);
    }
    h.bars()
}

fn distribution(run: &RunArtifacts, name: &str, tag: &str, what: &str, d: Distribution) -> Chart {
    let (bars, width) = d.bars;
    let mut hist = Series::new("Requests per bin", SeriesKind::Bars, bars);
    hist.bar_width = Some(width);
    let marks = MARKS
        .iter()
        .zip(d.percentiles)
        .filter_map(|(p, own)| {
            let v = run.stat(tag, p).or(own)?;
            Some(Mark {
                on_x: true,
                value: v,
                label: format!("{p} {v:.1} ms"),
            })
        })
        .collect();
    Chart {
        name: name.into(),
        title: format!("{what} distribution ({} requests)", d.count),
        description: format!(
            "How {} is spread across requests: the bulk, the tail, and where p50/p90/p99 fall.",
            what.to_lowercase()
        ),
        x: Axis::linear(format!("{what} (ms)"), false),
        y: Axis::count("Requests", true),
        y2: Some(Axis::linear("Share of requests at or below (CDF)", true)),
        series: vec![hist, d.cdf],
        marks,
        subtitle: String::new(),
    }
}

/// Distributions drawn over each other, one CDF line per (name, values): where one line
/// runs right of another, its requests took longer at that share.
pub fn overlaid_cdfs(name: &str, what: &str, unit: &str, sides: &[(&str, &[f64])]) -> Chart {
    let series = sides
        .iter()
        .map(|(label, values)| {
            let title = format!("{label} ({} requests)", values.len());
            Series::new(title, SeriesKind::Line, cdf_points(values))
        })
        .collect();
    Chart {
        name: name.into(),
        title: format!("{what}: distributions compared"),
        description: format!(
            "The share of requests at or below each {} value, per run: a shift right is slower at that share, a wider spread a longer tail.",
            what.to_lowercase()
        ),
        x: Axis::linear(format!("{what} ({unit})"), false),
        y: Axis::linear("Share of requests at or below (CDF)", true),
        y2: None,
        series,
        marks: Vec::new(),
        subtitle: String::new(),
    }
}

/// The timeline's series: latency and TTFT of the valid requests, and failed requests'
/// time to their error, by send time.
fn request_timeline(run: &RunArtifacts) -> Option<[Series; 3]> {
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
    let errors: Vec<(f64, f64)> = run
        .records
        .iter()
        .filter(|r| r.failed)
        .map(|r| (secs(run, r.start_ns), time_to_error(r.start_ns, r.end_ns)))
        .collect();
    Some(timeline_series(latency, ttft, errors))
}

/// A failed request has no latency metric: its time to the error (ms) stands in.
pub fn time_to_error(start_ns: u64, end_ns: u64) -> f64 {
    end_ns.saturating_sub(start_ns) as f64 / 1e6
}

pub fn timeline_series(
    latency: Vec<(f64, f64)>,
    ttft: Vec<(f64, f64)>,
    errors: Vec<(f64, f64)>,
) -> [Series; 3] {
    let mut e = Series::new(
        "Failed request (time to error)",
        SeriesKind::Scatter,
        errors,
    );
    e.error_points = true;
    [
        Series::new("Request latency", SeriesKind::Scatter, latency),
        Series::new("Time to first token", SeriesKind::Scatter, ttft),
        e,
    ]
}

fn timeline_chart([latency, ttft, errors]: [Series; 3]) -> Chart {
    let mut series = vec![latency, ttft];
    if !errors.points.is_empty() {
        series.push(errors);
    }
    Chart {
        name: "request_timeline".into(),
        title: "Per-request latency and TTFT by send time".into(),
        description: "Whether latency or TTFT drifted during the run, and when requests failed."
            .into(),
        x: Axis::time("Send time since the first request (s)"),
        y: Axis::linear("Latency (ms)", true),
        y2: None,
        series,
        marks: Vec::new(),
        subtitle: String::new(),
    }
}

/// The valid requests' values of `tag` by their place in send order.
fn over_time(run: &RunArtifacts, tag: &str, what: &str) -> Option<Series> {
    let mut ok: Vec<&RecordRow> = run.records.iter().filter(|r| !r.failed).collect();
    ok.sort_by_key(|r| r.start_ns);
    let key = MetricKey::new(tag);
    let points: Vec<(f64, f64)> = ok
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some(((i + 1) as f64, r.metric_of(key)?)))
        .collect();
    (!points.is_empty()).then(|| Series::new(what, SeriesKind::Scatter, points))
}

fn over_time_chart(name: &str, what: &str, series: Series) -> Chart {
    Chart {
        name: name.into(),
        title: format!("{what} per request, in send order"),
        description: format!(
            "Whether {} grows as the run goes on (queueing, warm-up) or stays flat.",
            what.to_lowercase()
        ),
        x: Axis::count("Request number (send order)", false),
        y: Axis::linear(format!("{what} (ms)"), true),
        y2: None,
        series: vec![series],
        marks: Vec::new(),
        subtitle: String::new(),
    }
}

/// Windows of the throughput chart.
pub const WINDOWS: usize = 60;

/// The throughput chart's window width (s) for a run whose last response came `end`
/// seconds after its first send.
pub fn window_width(end: f64) -> f64 {
    (end / WINDOWS as f64).max(1e-3)
}

/// Adds one valid request's output tokens to the windows.
pub fn add_tokens(
    tokens: &mut [f64],
    width: f64,
    (start, end): (f64, f64),
    osl: Option<f64>,
    ttft: Option<f64>,
) {
    let Some(n) = osl else {
        return;
    };
    let first = start + ttft.unwrap_or(0.0) / 1e3;
    let last = end.max(first);
    spread(tokens, width, first, last, n);
}

/// The throughput series of the windows' tokens.
pub fn throughput_series(tokens: &[f64], width: f64) -> Series {
    let points = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (i as f64 * width, t / width))
        .collect();
    Series::new("Output tokens/s", SeriesKind::Area, points)
}

/// The requests in flight, from the point (0, 0) and one step per send or end.
pub fn in_flight_series(steps: Vec<(f64, f64)>) -> Series {
    let mut flight = Series::new("Requests in flight", SeriesKind::Step, steps);
    flight.on_y2 = true;
    flight
}

/// Output tokens per second, each request's tokens spread evenly from its first token to
/// its end, in about 60 windows; requests in flight as a step line on the second axis.
fn throughput_over_time(run: &RunArtifacts) -> Option<(Series, Series)> {
    let ok: Vec<&RecordRow> = run.records.iter().filter(|r| !r.failed).collect();
    if ok.is_empty() {
        return None;
    }
    let end = run
        .records
        .iter()
        .map(|r| secs(run, r.end_ns))
        .fold(0.0, f64::max);
    let width = window_width(end);
    let mut tokens = vec![0.0; WINDOWS + 1];
    let (osl_key, ttft_key) = (
        MetricKey::new("output_sequence_length"),
        MetricKey::new("time_to_first_token"),
    );
    for r in &ok {
        let span = (secs(run, r.start_ns), secs(run, r.end_ns));
        add_tokens(
            &mut tokens,
            width,
            span,
            r.metric_of(osl_key),
            r.metric_of(ttft_key),
        );
    }
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
    Some((throughput_series(&tokens, width), in_flight_series(steps)))
}

fn throughput_chart((throughput, flight): (Series, Series)) -> Chart {
    Chart {
        name: "dispersed_throughput_over_time".into(),
        title: "Output token throughput and requests in flight over time".into(),
        description: "Whether the server kept a steady token rate, and how it followed the load in flight (ramp-up, tail).".into(),
        x: Axis::time("Time since the first request (s)"),
        y: Axis::linear("Output token throughput (tokens/s)", true),
        y2: Some(Axis::count("Requests in flight", true)),
        series: vec![throughput, flight],
        marks: Vec::new(),
        subtitle: String::new(),
    }
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
        y: Axis {
            integer: tokens,
            ..Axis::linear(y, true)
        },
        y2: None,
        series: vec![Series::new(y, SeriesKind::Scatter, points)],
        marks: Vec::new(),
        subtitle: String::new(),
    })
}

/// The first family present among `names`.
fn family<'a>(run: &'a RunArtifacts, names: &[&str]) -> Option<&'a [ServerSample]> {
    names
        .iter()
        .find_map(|n| run.server.get(*n).map(Vec::as_slice))
}

/// The server's requests running and waiting, with `client_ttft` (the client's TTFT by
/// send time; there are records).
fn server_requests(run: &RunArtifacts, client_ttft: Series) -> Option<Chart> {
    let running = family(run, RUNNING);
    let waiting = family(run, WAITING);
    if running.is_none() && waiting.is_none() {
        return None;
    }
    let line = |name: &str, s: &[ServerSample]| {
        let pts = s.iter().map(|x| (secs(run, x.wall_ns), x.sum)).collect();
        Series::new(name, SeriesKind::Step, pts)
    };
    let mut series = Vec::new();
    series.extend(running.map(|s| line("Server: requests running", s)));
    series.extend(waiting.map(|s| line("Server: requests waiting", s)));
    series.push(client_ttft);
    Some(Chart {
        name: "server_requests_over_time".into(),
        title: "Server requests running and waiting, with client TTFT".into(),
        description: "Whether TTFT rises when requests queue on the server (waiting > 0) rather than in the network or client.".into(),
        x: Axis::time("Time since the first request (s)"),
        y: Axis::count("Requests on the server", true),
        y2: Some(Axis::linear("Client time to first token (ms)", true)),
        series,
        marks: Vec::new(),
        subtitle: String::new(),
    })
}

fn server_kv_cache(run: &RunArtifacts, client_ttft: Series) -> Option<Chart> {
    let kv = family(run, KV_CACHE)?;
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
            client_ttft,
        ],
        marks: Vec::new(),
        subtitle: String::new(),
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
        x: Axis::count("Time slice (index)", false),
        y: Axis::linear(format!("{metric} ({unit})"), true),
        y2: None,
        series: vec![bars],
        marks: Vec::new(),
        subtitle: String::new(),
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
