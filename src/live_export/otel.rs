//! The live OpenTelemetry export (`--otel-url`): OTLP/HTTP protobuf pushed every interval
//! and once at the end, as AIPerf's OTel streamer sends it. `metrics`: every profiling
//! request's metrics folded into cumulative histograms (the GenAI spec names where AIPerf
//! maps them, `aiperf.<tag>` otherwise). `timing`: per-phase request counters, read from
//! the live board the collector publishes.
//!
//! Nothing here is on the request path: the collector thread hands each record's values
//! to a bounded channel (dropped and counted when full, never waited on), and this
//! module's own thread folds them, encodes and posts.

mod semconv;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use tracing::{debug, info, warn};

use crate::config::OtelOptions;
use crate::metrics::catalog::METRIC_COUNT;
use crate::metrics::live::{LiveBoard, LivePhase};
use crate::metrics::{MetricId, RecordMetrics, RecordTap};
use crate::record::RequestRecord;

/// Records the channel holds between two drains (AIPerf buffers 10 000 events).
const FEED_CAPACITY: usize = 16_384;
/// How often the exporter thread drains the channel: at 20 000 requests/s it holds 1 000.
const DRAIN_EVERY: Duration = Duration::from_millis(50);

/// What the export needs to know about the run.
pub struct RunInfo {
    pub benchmark_id: String,
    pub model: String,
    pub endpoint_type: &'static str,
    /// The servers' URLs (for `gen_ai.provider.name`).
    pub urls: Vec<String>,
}

/// One profiling record's facts, as the collector hands them over.
struct Fact {
    error_type: Option<&'static str>,
    cancelled: bool,
    values: Vec<(MetricId, f64)>,
}

/// The collector's end of the channel.
pub struct Feed {
    tx: SyncSender<Fact>,
    dropped: Arc<AtomicU64>,
}

impl RecordTap for Feed {
    fn observe(&mut self, record: &RequestRecord, metrics: &RecordMetrics) {
        let fact = Fact {
            error_type: record.error.as_ref().map(semconv::error_type),
            cancelled: (record.error.as_ref())
                .is_some_and(|e| e.kind == "RequestCancellationError"),
            values: metrics.scalars().collect(),
        };
        if let Err(TrySendError::Full(_)) = self.tx.try_send(fact) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The exporter's end of the channel.
pub struct FeedEnd {
    rx: Option<Receiver<Fact>>,
    dropped: Arc<AtomicU64>,
}

/// The channel from the collector to the exporter; no feed without `--stream metrics`.
pub fn feed(opts: &OtelOptions) -> (Option<Feed>, FeedEnd) {
    let dropped = Arc::new(AtomicU64::new(0));
    if !opts.metrics {
        return (None, FeedEnd { rx: None, dropped });
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(FEED_CAPACITY);
    let feed = Feed {
        tx,
        dropped: dropped.clone(),
    };
    (
        Some(feed),
        FeedEnd {
            rx: Some(rx),
            dropped,
        },
    )
}

/// A running exporter; [`Exporter::finish`] sends the last figures.
pub struct Exporter {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Exporter {
    /// Starts the exporter thread. `feed` is what [`feed`] returned (its [`Feed`] given to
    /// the collector); `board` is the collector's live board, read with `--stream timing`.
    pub fn start(
        opts: &OtelOptions,
        run: RunInfo,
        feed: FeedEnd,
        board: Option<Arc<LiveBoard>>,
        in_flight: Arc<dyn Fn() -> u64 + Send + Sync>,
        handle: tokio::runtime::Handle,
    ) -> anyhow::Result<Exporter> {
        let FeedEnd { rx, dropped } = feed;
        let stop = Arc::new(AtomicBool::new(false));
        let mut state = State::new(opts, &run, board.filter(|_| opts.timing), in_flight);
        let sender = Sender::new(opts)?;
        let stopping = stop.clone();
        let interval = opts.interval;
        let thread = std::thread::Builder::new()
            .name("otel-export".into())
            .spawn(move || {
                let mut next_push = Instant::now() + interval;
                loop {
                    let last = stopping.load(Ordering::Acquire);
                    if let Some(rx) = &rx {
                        state.drain(rx);
                    }
                    state.read_board();
                    if last || Instant::now() >= next_push {
                        let body = state.encode();
                        handle.block_on(sender.push(body, last));
                        next_push = Instant::now() + interval;
                    }
                    if last {
                        break;
                    }
                    std::thread::sleep(DRAIN_EVERY.min(interval));
                }
                let dropped = dropped.load(Ordering::Relaxed);
                if dropped > 0 {
                    warn!(
                        "OpenTelemetry export: {dropped} records were left out of the live histograms (the exporter fell behind)"
                    );
                }
                sender.report(crate::overhead::thread_cpu());
            })?;
        Ok(Exporter { stop, thread })
    }

    /// Sends the final figures (call once the collector has taken every record) and waits.
    pub fn finish(self) {
        self.stop.store(true, Ordering::Release);
        if self.thread.join().is_err() {
            warn!("the OpenTelemetry exporter thread panicked");
        }
    }
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attr {
    S(String),
    B(bool),
}

type Attrs = Vec<(&'static str, Attr)>;

fn key_values(attrs: &[(impl AsRef<str>, Attr)]) -> Vec<KeyValue> {
    attrs
        .iter()
        .map(|(k, v)| KeyValue {
            key: k.as_ref().to_string(),
            value: Some(AnyValue {
                value: Some(match v {
                    Attr::S(s) => any_value::Value::StringValue(s.clone()),
                    Attr::B(b) => any_value::Value::BoolValue(*b),
                }),
            }),
            ..Default::default()
        })
        .collect()
}

/// One histogram series: explicit buckets, cumulative since the export started.
#[derive(Debug, Clone)]
struct Series {
    counts: Vec<u64>,
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

impl Series {
    fn new(buckets: usize) -> Series {
        Series {
            counts: vec![0; buckets + 1],
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    /// OTLP buckets are upper-inclusive: bucket i holds (bounds[i-1], bounds[i]].
    fn record(&mut self, bounds: &[f64], v: f64) {
        let i = bounds.partition_point(|b| *b < v);
        self.counts[i] += 1;
        self.count += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
}

/// What sets a record's series apart: AIPerf's outcome attributes (a handful of values,
/// so the fold compares two words instead of hashing attribute lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Outcome {
    cancelled: bool,
    error_type: Option<&'static str>,
}

/// Per-phase figures of the timing stream, as last seen.
#[derive(Debug, Clone, Copy, Default)]
struct PhaseFigures {
    completed: u64,
    errors: u64,
    in_flight: u64,
    elapsed_s: f64,
    /// Run-clock ns the phase was seen to start.
    started_ns: Option<u64>,
    ended: bool,
}

/// What the exporter thread keeps between pushes.
struct State {
    resource: Vec<(String, Attr)>,
    /// `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`.
    genai: Attrs,
    /// Per catalogue metric (indexed by `MetricId`): its series by outcome.
    series: Vec<Vec<(Outcome, Series)>>,
    /// The metrics seen, in the order first seen (each push lists them in that order).
    seen: Vec<MetricId>,
    board: Option<Arc<LiveBoard>>,
    in_flight: Arc<dyn Fn() -> u64 + Send + Sync>,
    phases: [(LivePhase, &'static str, Option<PhaseFigures>); 2],
    start_unix_ns: u64,
}

impl State {
    fn new(
        opts: &OtelOptions,
        run: &RunInfo,
        board: Option<Arc<LiveBoard>>,
        in_flight: Arc<dyn Fn() -> u64 + Send + Sync>,
    ) -> State {
        let s = |v: &str| Attr::S(v.to_string());
        let mut resource: Vec<(String, Attr)> = vec![
            ("service.name".into(), s("aiperf")),
            ("service.instance.id".into(), s("records-manager")),
            ("aiperf.benchmark.id".into(), s(&run.benchmark_id)),
            ("aiperf.endpoint.type".into(), s(run.endpoint_type)),
            ("aiperf.model.name".into(), s(&run.model)),
        ];
        for (k, v) in &opts.resource_attributes {
            resource.retain(|(key, _)| key != k);
            resource.push((k.clone(), s(v)));
        }
        let genai = vec![
            (
                "gen_ai.operation.name",
                s(semconv::operation_name(run.endpoint_type)),
            ),
            (
                "gen_ai.provider.name",
                Attr::S(semconv::provider_name(
                    opts.gen_ai_provider.as_deref(),
                    &run.urls,
                )),
            ),
            ("gen_ai.request.model", s(&run.model)),
        ];
        State {
            resource,
            genai,
            series: vec![Vec::new(); METRIC_COUNT],
            seen: Vec::new(),
            board,
            in_flight,
            phases: [
                (LivePhase::Warmup, "warmup", None),
                (LivePhase::Profiling, "profiling", None),
            ],
            start_unix_ns: unix_ns(),
        }
    }

    fn drain(&mut self, rx: &Receiver<Fact>) {
        while let Ok(fact) = rx.try_recv() {
            self.fold(&fact);
        }
    }

    /// Each value into its metric's series for the record's outcome.
    fn fold(&mut self, fact: &Fact) {
        let outcome = Outcome {
            cancelled: fact.cancelled,
            error_type: fact.error_type,
        };
        for &(id, value) in &fact.values {
            if !value.is_finite() {
                continue;
            }
            let (bounds, factor) = match semconv::spec(id) {
                Some(spec) => (spec.buckets, spec.factor),
                None => (semconv::DEFAULT_BUCKETS, 1.0),
            };
            let list = &mut self.series[id as usize];
            if list.is_empty() {
                self.seen.push(id);
            }
            let series = match list.iter().position(|(o, _)| *o == outcome) {
                Some(i) => &mut list[i].1,
                None => {
                    list.push((outcome, Series::new(bounds.len())));
                    &mut list.last_mut().expect("just pushed").1
                }
            };
            series.record(bounds, value * factor);
        }
    }

    /// AIPerf's attributes of a record's values: the phase and outcome, then the spec's.
    fn attributes(&self, id: MetricId, outcome: Outcome) -> Attrs {
        let mut attrs: Attrs = vec![
            ("aiperf.benchmark_phase", Attr::S("profiling".into())),
            ("aiperf.was_cancelled", Attr::B(outcome.cancelled)),
            ("aiperf.has_error", Attr::B(outcome.error_type.is_some())),
        ];
        if let Some(spec) = semconv::spec(id) {
            attrs.extend(self.genai.iter().cloned());
            match (spec.token_type, outcome.error_type) {
                (Some(t), _) => attrs.push(("gen_ai.token.type", Attr::S(t.into()))),
                (None, Some(e)) => attrs.push(("error.type", Attr::S(e.into()))),
                (None, None) => {}
            }
        }
        attrs
    }

    /// The timing figures now: the board's per-phase counts, in-flight requests of the
    /// current phase and how long each phase ran (until the next one started).
    fn read_board(&mut self) {
        let Some(board) = &self.board else {
            return;
        };
        let snapshot = board.snapshot();
        let (now_phase, started_ns) = board.phase();
        for (phase, _, seen) in &mut self.phases {
            let counts = match phase {
                LivePhase::Warmup => snapshot.warmup,
                _ => snapshot.profiling,
            };
            let current = now_phase == *phase;
            if !current && counts.completed == 0 && seen.is_none() {
                continue;
            }
            let f = seen.get_or_insert_with(PhaseFigures::default);
            f.completed = counts.completed;
            f.errors = counts.errors;
            f.in_flight = if current { (self.in_flight)() } else { 0 };
            if current {
                f.started_ns = Some(started_ns);
                f.elapsed_s = snapshot.at_ns.saturating_sub(started_ns) as f64 / 1e9;
            } else if (now_phase as u8) > (*phase as u8) && !f.ended {
                // Over: it ran until the phase after it started.
                f.ended = true;
                f.elapsed_s = match f.started_ns {
                    Some(start) => started_ns.saturating_sub(start) as f64 / 1e9,
                    // Too short to be seen running: the live figures' span.
                    None if *phase == LivePhase::Profiling => snapshot.profiling_secs,
                    None => 0.0,
                };
            }
        }
    }

    /// The request body: every instrument's series, cumulative.
    fn encode(&self) -> Vec<u8> {
        let now = unix_ns();
        let start = self.start_unix_ns;
        let mut metrics: Vec<Metric> = Vec::new();
        for &id in &self.seen {
            let (name, unit, description, bounds) = match semconv::spec(id) {
                Some(spec) => (
                    spec.name.to_string(),
                    spec.unit.to_string(),
                    format!("GenAI semconv metric: {}", spec.name),
                    spec.buckets,
                ),
                None => {
                    let tag = id.def().tag;
                    (
                        format!("aiperf.{tag}"),
                        semconv::base_unit(id),
                        format!("AIPerf streaming metric: {tag}"),
                        semconv::DEFAULT_BUCKETS,
                    )
                }
            };
            let data_points = self.series[id as usize]
                .iter()
                .map(|(outcome, s)| HistogramDataPoint {
                    attributes: key_values(&self.attributes(id, *outcome)),
                    start_time_unix_nano: start,
                    time_unix_nano: now,
                    count: s.count,
                    sum: Some(s.sum),
                    bucket_counts: s.counts.clone(),
                    explicit_bounds: bounds.to_vec(),
                    min: Some(s.min),
                    max: Some(s.max),
                    ..Default::default()
                })
                .collect();
            metrics.push(Metric {
                name,
                description,
                unit,
                data: Some(metric::Data::Histogram(Histogram {
                    data_points,
                    aggregation_temporality: AggregationTemporality::Cumulative as i32,
                })),
                ..Default::default()
            });
        }
        metrics.extend(self.timing_metrics(start, now));
        let request = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: key_values(&self.resource),
                    ..Default::default()
                }),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(InstrumentationScope {
                        name: "aiperf.records".into(),
                        ..Default::default()
                    }),
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        request.encode_to_vec()
    }

    /// AIPerf's `aiperf.timing.*`: counters (monotonic sums) and gauges it sends as
    /// up-down counters (non-monotonic sums), one series per phase seen.
    fn timing_metrics(&self, start: u64, now: u64) -> Vec<Metric> {
        type Field = fn(&PhaseFigures) -> f64;
        let fields: [(&str, &str, &str, bool, Field); 5] = [
            (
                "aiperf.timing.requests.sent",
                "requests_sent",
                "1",
                true,
                |f| (f.completed + f.in_flight) as f64,
            ),
            (
                "aiperf.timing.requests.completed",
                "requests_completed",
                "1",
                true,
                |f| f.completed as f64,
            ),
            (
                "aiperf.timing.requests.errors",
                "request_errors",
                "1",
                true,
                |f| f.errors as f64,
            ),
            (
                "aiperf.timing.requests.in_flight",
                "in_flight_requests",
                "1",
                false,
                |f| f.in_flight as f64,
            ),
            (
                "aiperf.timing.phase.elapsed_sec",
                "requests_elapsed_time",
                "s",
                false,
                |f| f.elapsed_s,
            ),
        ];
        let mut out = Vec::new();
        for (name, field, unit, monotonic, value) in fields {
            let data_points: Vec<_> = (self.phases.iter())
                .filter_map(|(_, label, f)| Some((label, f.as_ref()?)))
                .filter(|(_, f)| !monotonic || value(f) > 0.0)
                .map(|(label, f)| {
                    let mut attrs = vec![("aiperf.benchmark_phase", Attr::S(label.to_string()))];
                    attrs.extend(self.genai.iter().cloned());
                    NumberDataPoint {
                        attributes: key_values(&attrs),
                        start_time_unix_nano: start,
                        time_unix_nano: now,
                        value: Some(match monotonic {
                            true => number_data_point::Value::AsInt(value(f) as i64),
                            false => number_data_point::Value::AsDouble(value(f)),
                        }),
                        ..Default::default()
                    }
                })
                .collect();
            if data_points.is_empty() {
                continue;
            }
            let kind = if monotonic { "counter" } else { "gauge metric" };
            out.push(Metric {
                name: name.into(),
                description: format!("AIPerf timing {kind}: {field}"),
                unit: unit.into(),
                data: Some(metric::Data::Sum(Sum {
                    data_points,
                    aggregation_temporality: AggregationTemporality::Cumulative as i32,
                    is_monotonic: monotonic,
                })),
                ..Default::default()
            });
        }
        out
    }
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Posts the bodies; a collector that cannot be reached is told once, the run goes on.
struct Sender {
    client: HttpsClient,
    uri: http::Uri,
    timeout: Duration,
    sent: AtomicU64,
    failed: AtomicU64,
    warned: AtomicBool,
    last_error: Mutex<Option<String>>,
}

impl Sender {
    fn new(opts: &OtelOptions) -> anyhow::Result<Sender> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(Sender {
            client: Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(1)
                .build(connector),
            uri: opts.metrics_url.clone(),
            timeout: opts.timeout,
            sent: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            warned: AtomicBool::new(false),
            last_error: Mutex::new(None),
        })
    }

    async fn push(&self, body: Vec<u8>, last: bool) {
        let request = http::Request::post(self.uri.clone())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(Bytes::from(body)));
        let result = match request {
            Err(e) => Err(e.to_string()),
            Ok(request) => {
                match tokio::time::timeout(self.timeout, self.client.request(request)).await {
                    Err(_) => Err(format!("no answer within {:?}", self.timeout)),
                    Ok(Err(e)) => Err(e.to_string()),
                    Ok(Ok(response)) if response.status().is_success() => Ok(()),
                    Ok(Ok(response)) => Err(format!("HTTP {}", response.status())),
                }
            }
        };
        match result {
            Ok(()) => {
                self.sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                if !self.warned.swap(true, Ordering::Relaxed) {
                    warn!(
                        "OpenTelemetry export to {} failed: {e}; the run goes on (no more warnings of this)",
                        self.uri
                    );
                } else if last {
                    debug!("OpenTelemetry final export to {} failed: {e}", self.uri);
                }
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            }
        }
    }

    /// One line at the end; `cpu` is what the exporter's thread used (the bench reads it).
    fn report(&self, cpu: Duration) {
        let (sent, failed) = (
            self.sent.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        );
        match failed {
            0 => info!(
                "OpenTelemetry: {sent} exports sent to {}; the exporter thread used {:.3} ms CPU",
                self.uri,
                cpu.as_secs_f64() * 1e3
            ),
            _ => warn!(
                "OpenTelemetry: {sent} exports sent to {}, {failed} failed (last: {}); the exporter thread used {:.3} ms CPU",
                self.uri,
                self.last_error
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_deref()
                    .unwrap_or("-"),
                cpu.as_secs_f64() * 1e3
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_upper_inclusive() {
        let bounds = [1.0, 2.0];
        let mut s = Series::new(bounds.len());
        for v in [0.5, 1.0, 1.5, 2.0, 3.0] {
            s.record(&bounds, v);
        }
        assert_eq!(s.counts, [2, 2, 1]);
        assert_eq!((s.count, s.sum, s.min, s.max), (5, 8.0, 0.5, 3.0));
    }
}
