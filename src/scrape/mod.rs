//! Prometheus scraping beside the load: the server's `/metrics` and DCGM exporters. Each
//! endpoint gets its own task and its own connection (never the request path's), every scrape
//! is bounded in time, and each is stamped on the run's clock at its first response byte, so
//! server and GPU series share the client records' time axis.

pub mod dcgm;
pub mod parse;

pub use parse::{Family, Kind, Series, Value};

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Uri;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::clock::Clock;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// One successful scrape.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// Run-clock ns (monotonic since the run's anchor) when the request was sent.
    pub sent_ns: u64,
    /// Run-clock ns when the first byte of the response came.
    pub first_byte_ns: u64,
    /// Run-clock ns when the body was complete.
    pub done_ns: u64,
    pub families: Arc<Vec<Family>>,
}

/// Everything scraped from one endpoint.
#[derive(Debug, Clone)]
pub struct EndpointLog {
    pub url: String,
    pub scrapes: Vec<Scrape>,
    /// Scrapes that failed (refused, timed out, not 2xx).
    pub failures: u64,
    /// Why the first failure failed, for the one line a user sees.
    pub first_error: Option<String>,
}

/// Scrapes a set of endpoints every `interval` until [`Scraper::finish`].
pub struct Scraper {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<EndpointLog>>,
    /// Asks each endpoint's task for a scrape now (see [`Scraper::scrape_now`]).
    marks: Vec<mpsc::UnboundedSender<oneshot::Sender<()>>>,
    timeout: Duration,
}

/// How often and how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScrapeTiming {
    pub interval: Duration,
    /// The most one scrape may take (connect, headers and body).
    pub timeout: Duration,
}

impl Scraper {
    /// Starts one task per URL on the current tokio runtime; the first scrape is immediate.
    pub fn start(urls: &[String], timing: ScrapeTiming, clock: Clock) -> anyhow::Result<Scraper> {
        let client = client()?;
        let (stop, stopped) = watch::channel(false);
        let mut marks = Vec::new();
        let tasks = urls
            .iter()
            .map(|url| {
                let uri: Uri = url.parse().map_err(|e| anyhow::anyhow!("{url}: {e}"))?;
                let (mark, marked) = mpsc::unbounded_channel();
                marks.push(mark);
                Ok(tokio::spawn(scrape_loop(
                    client.clone(),
                    url.clone(),
                    uri,
                    timing,
                    clock,
                    stopped.clone(),
                    marked,
                )))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Scraper {
            stop,
            tasks,
            marks,
            timeout: timing.timeout,
        })
    }

    /// Scrapes every endpoint now and waits until each scrape ended (at most the scrape
    /// timeout): a sample at a phase boundary, so that the phase's counters start there.
    pub async fn scrape_now(&self) {
        let acks: Vec<_> = self
            .marks
            .iter()
            .filter_map(|m| {
                let (ack, acked) = oneshot::channel();
                m.send(ack).ok().map(|_| acked)
            })
            .collect();
        let all = async {
            for a in acks {
                let _ = a.await;
            }
        };
        let _ = tokio::time::timeout(self.timeout, all).await;
    }

    /// Takes one last scrape of every endpoint, stops, and returns what was scraped.
    pub async fn finish(self) -> Vec<EndpointLog> {
        let _ = self.stop.send(true);
        let mut out = Vec::new();
        for t in self.tasks {
            if let Ok(log) = t.await {
                out.push(log);
            }
        }
        out
    }
}

fn client() -> anyhow::Result<HttpsClient> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())?
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1)
        .build(connector))
}

async fn scrape_loop(
    client: HttpsClient,
    url: String,
    uri: Uri,
    timing: ScrapeTiming,
    clock: Clock,
    mut stopped: watch::Receiver<bool>,
    mut marked: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
) -> EndpointLog {
    let mut log = EndpointLog {
        url,
        scrapes: Vec::new(),
        failures: 0,
        first_error: None,
    };
    let mut tick = tokio::time::interval(timing.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    let mut timed_out = false;
    loop {
        let last = *stopped.borrow();
        // After a scrape that timed out, the closing one is skipped: a hung endpoint holds
        // up the end of a run by at most one timeout.
        if last && timed_out {
            return log;
        }
        timed_out = false;
        match tokio::time::timeout(timing.timeout, scrape_once(&client, &uri, &clock)).await {
            Ok(Ok(s)) => log.scrapes.push(s),
            Ok(Err(e)) => fail(&mut log, e),
            Err(_) => {
                timed_out = true;
                fail(
                    &mut log,
                    format!("no answer within {:.1} s", timing.timeout.as_secs_f64()),
                )
            }
        }
        for ack in waiting.drain(..) {
            let _ = ack.send(());
        }
        if last {
            return log;
        }
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => {}
            Some(ack) = marked.recv() => waiting.push(ack),
        }
    }
}

fn fail(log: &mut EndpointLog, why: String) {
    log.failures += 1;
    log.first_error.get_or_insert(why);
}

async fn scrape_once(client: &HttpsClient, uri: &Uri, clock: &Clock) -> Result<Scrape, String> {
    let sent_ns = clock.now_ns();
    let response = client
        .get(uri.clone())
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let first_byte_ns = clock.now_ns();
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading the body: {e}"))?
        .to_bytes();
    let done_ns = clock.now_ns();
    if !status.is_success() {
        return Err(format!("HTTP {status}"));
    }
    // Parsed on the blocking pool, not on the runtime workers that send the requests.
    let size = body.len();
    let started = Instant::now();
    let families =
        tokio::task::spawn_blocking(move || parse::parse(&String::from_utf8_lossy(&body)))
            .await
            .map_err(|e| format!("parsing: {e}"))?;
    tracing::trace!(
        "Scraped {} families from {uri} ({size} bytes, parsed in {:?})",
        families.len(),
        started.elapsed()
    );
    Ok(Scrape {
        sent_ns,
        first_byte_ns,
        done_ns,
        families: Arc::new(families),
    })
}

/// One scrape of each URL at once, each bounded by `timeout`: `Err(why)` for those that
/// answered no metrics (refused, not 2xx, timed out). Run before collecting, so an endpoint
/// that is not there is named once and left alone.
pub async fn probe(urls: &[String], timeout: Duration, clock: Clock) -> Vec<Result<(), String>> {
    let client = match client() {
        Ok(c) => c,
        Err(e) => return urls.iter().map(|_| Err(format!("{e:#}"))).collect(),
    };
    let one = |url: &String| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let uri: Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
            match tokio::time::timeout(timeout, scrape_once(&client, &uri, &clock)).await {
                Ok(Ok(s)) if s.families.is_empty() => {
                    Err("the answer holds no Prometheus metrics".to_string())
                }
                Ok(r) => r.map(|_| ()),
                Err(_) => Err(format!("no answer within {:.1} s", timeout.as_secs_f64())),
            }
        }
    };
    futures_util::future::join_all(urls.iter().map(one)).await
}

/// `http://h:8000` -> `http://h:8000/metrics`: the scheme added when missing, a trailing `/`
/// dropped, `/metrics` appended unless the URL ends with it (AIPerf's rule).
pub fn metrics_url(base: &str) -> String {
    let with_scheme = if base.starts_with("http://") || base.starts_with("https://") {
        base.to_string()
    } else {
        format!("http://{base}")
    };
    let trimmed = with_scheme.trim_end_matches('/');
    if trimmed.ends_with("/metrics") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/metrics")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_urls_follow_aiperf() {
        assert_eq!(metrics_url("http://h:8000"), "http://h:8000/metrics");
        assert_eq!(metrics_url("http://h:8000/v1/"), "http://h:8000/v1/metrics");
        assert_eq!(metrics_url("node1:8081"), "http://node1:8081/metrics");
        assert_eq!(metrics_url("https://h/metrics"), "https://h/metrics");
    }

    #[tokio::test]
    async fn an_endpoint_that_refuses_is_logged_once_per_scrape_and_finish_is_prompt() {
        let scraper = Scraper::start(
            &["http://127.0.0.1:1/metrics".to_string()],
            ScrapeTiming {
                interval: Duration::from_millis(20),
                timeout: Duration::from_secs(1),
            },
            Clock::new(),
        )
        .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let logs = scraper.finish().await;
        assert_eq!(logs.len(), 1);
        assert!(logs[0].scrapes.is_empty());
        assert!(logs[0].failures >= 2, "{:?}", logs[0]);
        assert!(
            logs[0]
                .first_error
                .as_deref()
                .unwrap()
                .contains("cannot connect")
        );
    }
}
