//! `--network-latency-automatic`: the round trip to each server, measured as AIPerf does by
//! timing a fresh TCP handshake (no TLS, no pooled connection) to the host:port of every
//! `--url`, every `--network-latency-ping-interval` seconds of the profiling phase. Its mean
//! is what the `network_adjusted_*` metrics subtract; every probe goes to
//! `profile_export_network_latency.jsonl`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::clock::Clock;
use crate::export::{Exporter, FileNames, Written};

/// The most one handshake may take (AIPerf's default).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A short run still gets this many successful probes per server: the missing ones are
/// taken when profiling ends (AIPerf's floor).
const MIN_SAMPLES: usize = 5;
/// The whole top-up at the end takes at most this long.
const TOP_UP_BUDGET: Duration = Duration::from_secs(3);

/// Where the probe loops are in the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    BeforeProfiling,
    Profiling,
    Done,
}

/// One server: its URL as shown, its host and port, and its address once resolved (so a
/// probe times the connect, not a DNS lookup).
#[derive(Debug)]
struct Target {
    url: String,
    host: String,
    port: u16,
}

/// One probe's outcome.
#[derive(Debug, Clone)]
pub(super) struct Sample {
    target: usize,
    /// Wall-clock ns when the probe was issued.
    timestamp_ns: u64,
    rtt_ns: Option<u64>,
    /// The failure's kind and message.
    error: Option<(&'static str, String)>,
}

/// The probe loops of a run.
pub(super) struct NetworkProbe {
    state: watch::Sender<State>,
    targets: Arc<Vec<Target>>,
    samples: Arc<Mutex<Vec<Sample>>>,
    loops: Vec<tokio::task::JoinHandle<()>>,
    clock: Clock,
}

/// What the probes found.
#[derive(Debug, Default)]
pub(crate) struct Probed {
    targets: Vec<(String, String, u16)>,
    samples: Vec<Sample>,
}

impl NetworkProbe {
    /// Starts one waiting loop per distinct host:port of `uris` (on the current runtime);
    /// they probe from `profiling_started` to `profiling_ended`.
    pub fn start(uris: &[http::Uri], interval: Duration, clock: Clock) -> NetworkProbe {
        let mut targets: Vec<Target> = Vec::new();
        for uri in uris {
            let Some(host) = uri.host() else { continue };
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let https = uri.scheme_str() == Some("https");
            let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
            if targets.iter().any(|t| t.host == host && t.port == port) {
                continue;
            }
            let scheme = uri.scheme_str().unwrap_or("http");
            let url = format!("{scheme}://{}", uri.authority().map_or("", |a| a.as_str()));
            targets.push(Target { url, host, port });
        }
        info!(
            "Network latency: probing {} every {:.3} s during profiling",
            targets
                .iter()
                .map(|t| format!("{}:{}", t.host, t.port))
                .collect::<Vec<_>>()
                .join(", "),
            interval.as_secs_f64()
        );
        let (state, _) = watch::channel(State::BeforeProfiling);
        let targets = Arc::new(targets);
        let samples = Arc::new(Mutex::new(Vec::new()));
        let loops = (0..targets.len())
            .map(|i| {
                let (targets, samples) = (targets.clone(), samples.clone());
                let rx = state.subscribe();
                tokio::spawn(probe_loop(i, targets, samples, rx, interval, clock))
            })
            .collect();
        NetworkProbe {
            state,
            targets,
            samples,
            loops,
            clock,
        }
    }

    pub fn profiling_started(&self) {
        self.state.send_replace(State::Profiling);
    }

    pub fn profiling_ended(&self) {
        self.state.send_replace(State::Done);
    }

    /// Stops the loops (a probe in flight is dropped), takes the probes a short run lacks,
    /// and hands over every probe.
    pub async fn finish(self) -> Probed {
        self.state.send_replace(State::Done);
        for l in self.loops {
            let _ = l.await;
        }
        let deadline = Instant::now() + TOP_UP_BUDGET;
        for (i, target) in self.targets.iter().enumerate() {
            let successes = |s: &Arc<Mutex<Vec<Sample>>>| {
                lock(s)
                    .iter()
                    .filter(|p| p.target == i && p.rtt_ns.is_some())
                    .count()
            };
            let mut attempts = 0;
            while successes(&self.samples) < MIN_SAMPLES
                && attempts < 2 * MIN_SAMPLES
                && Instant::now() < deadline
            {
                attempts += 1;
                let addr = resolve(target).await;
                let sample = probe_once(i, target, addr, self.clock).await;
                lock(&self.samples).push(sample);
            }
        }
        let samples = std::mem::take(&mut *lock(&self.samples));
        Probed {
            targets: self
                .targets
                .iter()
                .map(|t| (t.url.clone(), t.host.clone(), t.port))
                .collect(),
            samples,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits for profiling, then fires a probe at once and every `interval` (not waiting for
/// one in flight, so a slow handshake does not delay the next), until profiling ends.
async fn probe_loop(
    i: usize,
    targets: Arc<Vec<Target>>,
    samples: Arc<Mutex<Vec<Sample>>>,
    mut state: watch::Receiver<State>,
    interval: Duration,
    clock: Clock,
) {
    if state
        .wait_for(|s| *s != State::BeforeProfiling)
        .await
        .map_or(true, |s| *s == State::Done)
    {
        return;
    }
    let addr = resolve(&targets[i]).await;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut in_flight = JoinSet::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let (targets, samples) = (targets.clone(), samples.clone());
                in_flight.spawn(async move {
                    let sample = probe_once(i, &targets[i], addr, clock).await;
                    lock(&samples).push(sample);
                });
            }
            _ = state.wait_for(|s| *s == State::Done) => break,
            Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
        }
    }
    in_flight.abort_all();
}

/// The target's first address, looked up once; `None` leaves the lookup to each probe.
async fn resolve(t: &Target) -> Option<SocketAddr> {
    match tokio::net::lookup_host((t.host.as_str(), t.port)).await {
        Ok(mut addrs) => addrs.next(),
        Err(e) => {
            warn!(
                "Network latency: cannot resolve {}:{} ({e}); each probe looks it up",
                t.host, t.port
            );
            None
        }
    }
}

/// One handshake, timed from the connect call to the connection being made.
async fn probe_once(i: usize, t: &Target, addr: Option<SocketAddr>, clock: Clock) -> Sample {
    let timestamp_ns = clock.wall_ns(clock.now_ns());
    let started = Instant::now();
    let connect = async {
        match addr {
            Some(a) => tokio::net::TcpStream::connect(a).await,
            None => tokio::net::TcpStream::connect((t.host.as_str(), t.port)).await,
        }
    };
    let (rtt_ns, error) = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(stream)) => {
            let rtt = started.elapsed().as_nanos() as u64;
            drop(stream);
            (Some(rtt), None)
        }
        Ok(Err(e)) => (None, Some((error_kind(&e), e.to_string()))),
        Err(_) => (
            None,
            Some((
                "TimeoutError",
                format!(
                    "no TCP handshake within {} s",
                    CONNECT_TIMEOUT.as_secs_f64()
                ),
            )),
        ),
    };
    Sample {
        target: i,
        timestamp_ns,
        rtt_ns,
        error,
    }
}

/// The failure's name as AIPerf's Python records it.
fn error_kind(e: &std::io::Error) -> &'static str {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => "ConnectionRefusedError",
        K::ConnectionReset => "ConnectionResetError",
        K::TimedOut => "TimeoutError",
        _ => "OSError",
    }
}

impl Probed {
    /// Mean round trip (ns) over every successful probe; `None` without one.
    pub fn mean_rtt_ns(&self) -> Option<f64> {
        let rtts: Vec<f64> = self
            .samples
            .iter()
            .filter_map(|s| s.rtt_ns)
            .map(|r| r as f64)
            .collect();
        (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64)
    }

    /// The successful probes.
    pub fn successes(&self) -> usize {
        self.samples.iter().filter(|s| s.rtt_ns.is_some()).count()
    }

    /// The failed probes.
    pub fn failures(&self) -> usize {
        self.samples.len() - self.successes()
    }
}

/// One probe as a JSON line, in AIPerf's field order (absent fields left out).
#[derive(serde::Serialize)]
struct Line<'a> {
    timestamp_ns: u64,
    target_url: &'a str,
    target_host: &'a str,
    target_port: u16,
    probe_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rtt_ns: Option<u64>,
    success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<LineError<'a>>,
}

#[derive(serde::Serialize)]
struct LineError<'a> {
    r#type: &'static str,
    message: &'a str,
}

/// `profile_export_network_latency.jsonl`: every probe, in the order taken.
pub(super) struct NetworkLatencyJsonl<'a> {
    pub names: &'a FileNames,
    pub probed: Option<&'a Probed>,
}

impl Exporter for NetworkLatencyJsonl<'_> {
    fn what(&self) -> &'static str {
        "the network latency JSONL"
    }

    fn export(&self, dir: &Path) -> std::io::Result<Vec<Written>> {
        use std::io::Write;
        let Some(probed) = self.probed else {
            return Ok(Vec::new());
        };
        let path = dir.join(&self.names.network_latency_jsonl);
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
        let mut samples: Vec<&Sample> = probed.samples.iter().collect();
        samples.sort_by_key(|s| s.timestamp_ns);
        for s in samples {
            let (url, host, port) = &probed.targets[s.target];
            let line = Line {
                timestamp_ns: s.timestamp_ns,
                target_url: url,
                target_host: host,
                target_port: *port,
                probe_type: "tcp_connect",
                rtt_ns: s.rtt_ns,
                success: s.rtt_ns.is_some(),
                error: s.error.as_ref().map(|(kind, message)| LineError {
                    r#type: kind,
                    message,
                }),
            };
            serde_json::to_writer(&mut out, &line)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        Ok(vec![Written::listed("Network Latency", path)])
    }
}
