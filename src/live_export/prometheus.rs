//! `--prometheus-port`: the client's live metrics on `/metrics` in the Prometheus text
//! format, so one Grafana board shows the client beside the server it loads. Served from
//! its own thread and runtime, from the snapshots the collector publishes: a scrape never
//! touches the requests or the collector.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;

use crate::metrics::live::{LiveBoard, LiveMetric, LivePhase, LiveSnapshot};

/// Labels on every series: which run this is.
#[derive(Debug, Clone)]
pub struct RunLabels {
    pub benchmark_id: String,
    pub model: String,
    /// The endpoint type (`chat`, `completions`, ...).
    pub endpoint: String,
}

impl RunLabels {
    fn render(&self) -> String {
        format!(
            "benchmark_id=\"{}\",model=\"{}\",endpoint=\"{}\"",
            escape(&self.benchmark_id),
            escape(&self.model),
            escape(&self.endpoint)
        )
    }
}

/// A label value as the text format wants it (backslash, quote and newline escaped).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Prometheus' name and help for each live metric's histogram.
fn histogram_name(m: LiveMetric) -> (&'static str, &'static str) {
    match m {
        LiveMetric::TimeToFirstToken => (
            "aiperf_time_to_first_token_seconds",
            "Time to first token of each successful profiling request.",
        ),
        LiveMetric::InterTokenLatency => (
            "aiperf_inter_token_latency_seconds",
            "Mean inter-token latency of each successful streamed profiling request.",
        ),
        LiveMetric::RequestLatency => (
            "aiperf_request_latency_seconds",
            "Latency of each successful profiling request.",
        ),
    }
}

/// The exposition of one snapshot.
pub fn exposition(
    s: &LiveSnapshot,
    phase: LivePhase,
    in_flight: u64,
    labels: &RunLabels,
) -> String {
    let l = labels.render();
    let mut out = String::with_capacity(4096);
    let head = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };

    head(
        &mut out,
        "aiperf_requests_total",
        "counter",
        "Requests completed (successful or failed), by phase.",
    );
    for (p, c) in [("warmup", s.warmup), ("profiling", s.profiling)] {
        let _ = writeln!(
            out,
            "aiperf_requests_total{{{l},phase=\"{p}\"}} {}",
            c.completed
        );
    }
    head(
        &mut out,
        "aiperf_request_errors_total",
        "counter",
        "Failed profiling requests, by error type.",
    );
    for (kind, n) in &s.errors_by_type {
        let _ = writeln!(
            out,
            "aiperf_request_errors_total{{{l},error_type=\"{}\"}} {n}",
            escape(kind)
        );
    }
    for (name, help, v) in [
        (
            "aiperf_output_tokens_total",
            "Output tokens of successful profiling requests.",
            s.output_tokens,
        ),
        (
            "aiperf_input_tokens_total",
            "Input tokens of successful profiling requests.",
            s.input_tokens,
        ),
    ] {
        head(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name}{{{l}}} {v}");
    }
    head(
        &mut out,
        "aiperf_requests_in_flight",
        "gauge",
        "Requests sent and not yet answered.",
    );
    let _ = writeln!(out, "aiperf_requests_in_flight{{{l}}} {in_flight}");
    head(
        &mut out,
        "aiperf_phase",
        "gauge",
        "1 for the phase the run is in.",
    );
    for (name, p) in [
        ("starting", LivePhase::Starting),
        ("warmup", LivePhase::Warmup),
        ("profiling", LivePhase::Profiling),
        ("done", LivePhase::Done),
    ] {
        let _ = writeln!(
            out,
            "aiperf_phase{{{l},phase=\"{name}\"}} {}",
            u8::from(phase == p)
        );
    }
    if let Some(lag) = &s.send_lag {
        head(
            &mut out,
            "aiperf_send_lag_seconds",
            "gauge",
            "Actual minus scheduled send time over the last 10 s (paced runs), by quantile.",
        );
        for (q, v) in [("0.5", lag.p50), ("0.99", lag.p99)] {
            let _ = writeln!(
                out,
                "aiperf_send_lag_seconds{{{l},quantile=\"{q}\"}} {}",
                v / 1e9
            );
        }
    }
    for (m, b) in LiveMetric::ALL.iter().zip(&s.buckets) {
        let (name, help) = histogram_name(*m);
        head(&mut out, name, "histogram", help);
        for (le, n) in b.cumulative() {
            let le = if le.is_infinite() {
                "+Inf".to_string()
            } else {
                format!("{}", le / 1e9)
            };
            let _ = writeln!(out, "{name}_bucket{{{l},le=\"{le}\"}} {n}");
        }
        let _ = writeln!(out, "{name}_sum{{{l}}} {}", b.sum / 1e9);
        let _ = writeln!(out, "{name}_count{{{l}}} {}", b.count);
    }
    out
}

/// The running endpoint; stops when dropped.
pub struct PrometheusEndpoint {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PrometheusEndpoint {
    /// Listens on `addr`: called before the run builds anything, so a port in use fails
    /// it before it sends.
    pub fn bind(addr: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
        let listener = std::net::TcpListener::bind(addr)
            .with_context(|| format!("--prometheus-port: cannot listen on {addr}"))?;
        listener.set_nonblocking(true)?;
        Ok(listener)
    }

    /// Serves `/metrics` on `listener` from `board`, on a thread of its own.
    pub fn start(
        listener: std::net::TcpListener,
        board: Arc<LiveBoard>,
        in_flight: Box<dyn Fn() -> u64 + Send + Sync>,
        labels: RunLabels,
    ) -> anyhow::Result<PrometheusEndpoint> {
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = Arc::new((board, in_flight, labels));
        let thread = std::thread::Builder::new()
            .name("prometheus".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a current-thread runtime");
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let app = axum::Router::new()
                        .route("/metrics", axum::routing::get(metrics))
                        .with_state(state);
                    let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                        let _ = stopped.await;
                    });
                    if let Err(e) = serve.await {
                        tracing::warn!("--prometheus-port: the endpoint stopped: {e}");
                    }
                });
            })?;
        tracing::info!("Live client metrics at http://{addr}/metrics");
        Ok(PrometheusEndpoint {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

type State = Arc<(
    Arc<LiveBoard>,
    Box<dyn Fn() -> u64 + Send + Sync>,
    RunLabels,
)>;

async fn metrics(
    axum::extract::State(state): axum::extract::State<State>,
) -> impl axum::response::IntoResponse {
    let (board, in_flight, labels) = &*state;
    let (phase, _) = board.phase();
    let body = exposition(&board.snapshot(), phase, in_flight(), labels);
    (
        [(
            http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
}

impl Drop for PrometheusEndpoint {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::live::{LiveRecorder, PhaseCounts};
    use crate::metrics::{MetricId, RecordMetrics};
    use crate::record::{Phase, RequestRecord};
    use crate::scrape::{Kind, Value, parse::parse};

    fn labels() -> RunLabels {
        RunLabels {
            benchmark_id: "b-1".into(),
            model: "Qwen/Qwen2-VL-2B-Instruct".into(),
            endpoint: "chat".into(),
        }
    }

    #[test]
    fn the_exposition_parses_back_to_the_snapshot_s_figures() {
        let s = LiveSnapshot {
            warmup: PhaseCounts {
                completed: 3,
                errors: 0,
            },
            profiling: PhaseCounts {
                completed: 42,
                errors: 2,
            },
            output_tokens: 4000.0,
            input_tokens: 1200.0,
            errors_by_type: vec![("Internal \"Server\" Error".into(), 2)],
            ..Default::default()
        };
        let text = exposition(&s, LivePhase::Profiling, 7, &labels());
        let families = parse(&text);
        let names: Vec<&str> = families.iter().map(|f| f.name.as_str()).collect();
        let get = |n: &str| {
            families
                .iter()
                .find(|f| f.name == n)
                .unwrap_or_else(|| panic!("{n} not in {names:?}"))
        };
        let scalar = |n: &str, extra: Option<(&str, &str)>| {
            get(n)
                .series
                .iter()
                .find(|s| extra.is_none_or(|(k, v)| s.labels.get(k).map(String::as_str) == Some(v)))
                .map(|s| match s.value {
                    Value::Scalar(v) => v,
                    _ => panic!("not a scalar"),
                })
                .unwrap()
        };
        assert_eq!(get("aiperf_requests_total").kind, Kind::Counter);
        assert_eq!(
            scalar("aiperf_requests_total", Some(("phase", "profiling"))),
            42.0
        );
        assert_eq!(
            scalar("aiperf_requests_total", Some(("phase", "warmup"))),
            3.0
        );
        assert_eq!(
            scalar(
                "aiperf_request_errors_total",
                Some(("error_type", "Internal \"Server\" Error"))
            ),
            2.0
        );
        assert_eq!(scalar("aiperf_output_tokens_total", None), 4000.0);
        assert_eq!(scalar("aiperf_requests_in_flight", None), 7.0);
        assert_eq!(scalar("aiperf_phase", Some(("phase", "profiling"))), 1.0);
        assert_eq!(scalar("aiperf_phase", Some(("phase", "warmup"))), 0.0);
        let series = &get("aiperf_requests_in_flight").series[0];
        assert_eq!(series.labels["model"], "Qwen/Qwen2-VL-2B-Instruct");
        assert_eq!(series.labels["benchmark_id"], "b-1");
        assert_eq!(series.labels["endpoint"], "chat");
    }

    #[test]
    fn histograms_count_each_request_in_seconds() {
        let board = Arc::new(LiveBoard::default());
        let mut live = LiveRecorder::new(board.clone());
        for (ttft_ms, latency_ms) in [(8.0, 90.0), (30.0, 300.0), (30.0, 3000.0)] {
            let record = RequestRecord::new(Phase::Profiling, Default::default(), String::new());
            let m = RecordMetrics::from_display(
                [
                    (MetricId::TimeToFirstToken, ttft_ms),
                    (MetricId::RequestLatency, latency_ms),
                ],
                None,
            );
            live.observe(&record, &m);
        }
        live.publish(1, true);
        let text = exposition(&board.snapshot(), LivePhase::Done, 0, &labels());
        let families = parse(&text);
        let ttft = families
            .iter()
            .find(|f| f.name == "aiperf_time_to_first_token_seconds")
            .unwrap();
        assert_eq!(ttft.kind, Kind::Histogram);
        let Value::Histogram {
            buckets,
            sum,
            count,
        } = &ttft.series[0].value
        else {
            panic!("not a histogram")
        };
        assert_eq!(*count, 3.0);
        assert!((sum - 0.068).abs() < 1e-12);
        let at = |le: &str| buckets.iter().find(|(b, _)| b == le).unwrap().1;
        assert_eq!(at("0.005"), 0.0);
        assert_eq!(at("0.01"), 1.0);
        assert_eq!(at("0.025"), 1.0);
        assert_eq!(at("0.05"), 3.0);
        assert_eq!(at("+Inf"), 3.0);
    }
}
