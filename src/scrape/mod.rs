//! Prometheus scraping beside the load: the server's `/metrics` and DCGM exporters. Each
//! endpoint gets its own task and its own connection (never the request path's), every fetch
//! is bounded in time, and each scrape is stamped on the run's clock at its first response
//! byte, so server and GPU series share the client records' time axis.
//!
//! Nothing here keeps scrapes: each one is parsed on a thread of its own (one per scraper,
//! never a runtime worker that sends requests, and always the same one, so its allocations
//! come from one allocator arena however long the run) and handed at once to the endpoint's
//! sinks (the summaries, the per-scrape exports), which keep what they need. A slow parse
//! delays that endpoint's next scrape rather than queueing them.

pub mod dcgm;
pub mod engines;
pub mod parse;

pub use parse::{Family, Kind, Value};

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderValue;
use http_body_util::{BodyExt, Empty};
use hyper::Uri;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::clock::Clock;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Series kept from one exposition; past it the rest are dropped with one warning (each
/// series costs memory in every summary snapshot).
pub const MAX_SERIES: usize = 50_000;

/// One successful scrape as its sinks get it.
#[derive(Debug, Clone)]
pub struct ScrapeEvent {
    /// Run-clock ns (monotonic since the run's anchor) when the request was sent.
    pub sent_ns: u64,
    /// Run-clock ns when the first byte of the response came.
    pub first_byte_ns: u64,
    /// Run-clock ns when the body was complete.
    pub done_ns: u64,
    pub families: Arc<Vec<Family>>,
    /// The exposition differs from the endpoint's previous one: an exporter that refreshes
    /// slower than it is scraped repeats itself, and a repeat is no new sample.
    pub changed: bool,
}

/// What an endpoint's scrapes are handed to, in order, on the blocking pool.
pub trait ScrapeSink: Send {
    fn scraped(&mut self, scrape: &ScrapeEvent);
}

/// An endpoint's last two distinct scrapes (shared, not copied), for live views that show
/// the latest gauges and a counter's rise between the two.
#[derive(Debug, Default)]
pub struct Latest {
    pub previous: Option<Arc<Vec<Family>>>,
    pub latest: Option<Arc<Vec<Family>>>,
}

impl ScrapeSink for Latest {
    fn scraped(&mut self, scrape: &ScrapeEvent) {
        if scrape.changed || self.latest.is_none() {
            self.previous = self.latest.replace(scrape.families.clone());
        }
    }
}

/// A sink shared with whoever reads it after the run.
pub type Sink = Arc<Mutex<dyn ScrapeSink>>;

/// Locks a sink (a sink that panicked keeps what it had).
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How one endpoint's scraping went.
#[derive(Debug, Clone)]
pub struct EndpointLog {
    pub url: String,
    /// Scrapes that succeeded.
    pub scrapes: u64,
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
    /// The most one fetch may take (connect, headers and body).
    pub timeout: Duration,
}

impl Scraper {
    /// Starts one task per endpoint on the current tokio runtime; the first scrape is
    /// immediate.
    pub fn start(
        endpoints: Vec<ScrapeEndpoint>,
        timing: ScrapeTiming,
        clock: Clock,
    ) -> anyhow::Result<Scraper> {
        let client = client()?;
        let (jobs, queue) = std::sync::mpsc::channel::<ParseJob>();
        // Ends when every endpoint's task has ended (each holds a sender).
        std::thread::Builder::new()
            .name("aiperf-scrape-parse".into())
            .spawn(move || queue.into_iter().for_each(|job| job()))?;
        let (stop, stopped) = watch::channel(false);
        let mut marks = Vec::new();
        let tasks = endpoints
            .into_iter()
            .map(|e| {
                let url = e.url;
                let uri: Uri = url.parse().map_err(|err| anyhow::anyhow!("{url}: {err}"))?;
                let (mark, marked) = mpsc::unbounded_channel();
                marks.push(mark);
                let endpoint = Endpoint {
                    client: client.clone(),
                    url,
                    uri,
                    auth: e.auth,
                    sinks: e.sinks,
                    clock,
                    jobs: jobs.clone(),
                };
                Ok(tokio::spawn(scrape_loop(
                    endpoint,
                    timing,
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

    /// Takes one last scrape of every endpoint, stops, and says how each went.
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

/// An endpoint to scrape: its URL (as shown), the `Authorization` it was given with (its
/// credentials are never in the URL), and where its scrapes go.
pub struct ScrapeEndpoint {
    pub url: String,
    pub auth: Option<HeaderValue>,
    pub sinks: Vec<Sink>,
}

/// Work for the scraper's parse thread.
type ParseJob = Box<dyn FnOnce() + Send>;

/// One endpoint and where its scrapes go.
struct Endpoint {
    client: HttpsClient,
    url: String,
    uri: Uri,
    auth: Option<HeaderValue>,
    sinks: Vec<Sink>,
    clock: Clock,
    /// The scraper's parse thread.
    jobs: std::sync::mpsc::Sender<ParseJob>,
}

async fn scrape_loop(
    endpoint: Endpoint,
    timing: ScrapeTiming,
    mut stopped: watch::Receiver<bool>,
    mut marked: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
) -> EndpointLog {
    let mut log = EndpointLog {
        url: endpoint.url.clone(),
        scrapes: 0,
        failures: 0,
        first_error: None,
    };
    let endpoint = Arc::new(endpoint);
    let mut previous: Option<Arc<Vec<Family>>> = None;
    let mut warned_cap = false;
    let mut tick = tokio::time::interval(timing.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    let mut timed_out = false;
    loop {
        let last = *stopped.borrow();
        // After a fetch that timed out, the closing one is skipped: a hung endpoint holds
        // up the end of a run by at most one timeout.
        if last && timed_out {
            return log;
        }
        timed_out = false;
        let fetched = tokio::time::timeout(
            timing.timeout,
            fetch(
                &endpoint.client,
                &endpoint.uri,
                endpoint.auth.as_ref(),
                &endpoint.clock,
            ),
        )
        .await;
        match fetched {
            Ok(Ok(body)) => {
                let (ep, prev) = (endpoint.clone(), previous.take());
                let (done, delivered) = oneshot::channel();
                let job: ParseJob = Box::new(move || {
                    let _ = done.send(deliver(&ep, body, prev));
                });
                let _ = endpoint.jobs.send(job);
                match delivered.await {
                    Ok((families, dropped)) => {
                        log.scrapes += 1;
                        previous = Some(families);
                        if dropped > 0 && !std::mem::replace(&mut warned_cap, true) {
                            tracing::warn!(
                                "{} publishes more than {MAX_SERIES} series; {dropped} were left \
                                 out of this scrape and will be of later ones",
                                endpoint.url
                            );
                        }
                    }
                    Err(_) => fail(&mut log, "parsing: the parse thread stopped".into()),
                }
            }
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

/// A fetched exposition: its times and body.
struct Body {
    sent_ns: u64,
    first_byte_ns: u64,
    done_ns: u64,
    bytes: Bytes,
}

async fn fetch(
    client: &HttpsClient,
    uri: &Uri,
    auth: Option<&HeaderValue>,
    clock: &Clock,
) -> Result<Body, String> {
    let mut request = http::Request::get(uri.clone());
    if let Some(auth) = auth {
        request = request.header(http::header::AUTHORIZATION, auth.clone());
    }
    let request = request
        .body(Empty::new())
        .map_err(|e| format!("not a request: {e}"))?;
    let sent_ns = clock.now_ns();
    let response = client
        .request(request)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let first_byte_ns = clock.now_ns();
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading the body: {e}"))?
        .to_bytes();
    let done_ns = clock.now_ns();
    if !status.is_success() {
        return Err(format!("HTTP {status}"));
    }
    Ok(Body {
        sent_ns,
        first_byte_ns,
        done_ns,
        bytes,
    })
}

/// Parses `body` and hands it to the endpoint's sinks; returns the families (the next
/// scrape's `previous`) and how many series the cap left out.
fn deliver(
    endpoint: &Endpoint,
    body: Body,
    previous: Option<Arc<Vec<Family>>>,
) -> (Arc<Vec<Family>>, usize) {
    let started = Instant::now();
    let (families, dropped) =
        parse::parse_capped(&String::from_utf8_lossy(&body.bytes), MAX_SERIES);
    tracing::trace!(
        "Scraped {} families from {} ({} bytes, parsed in {:?})",
        families.len(),
        endpoint.url,
        body.bytes.len(),
        started.elapsed()
    );
    let changed = previous.as_deref() != Some(&families);
    let families = Arc::new(families);
    let event = ScrapeEvent {
        sent_ns: body.sent_ns,
        first_byte_ns: body.first_byte_ns,
        done_ns: body.done_ns,
        families: families.clone(),
        changed,
    };
    for sink in &endpoint.sinks {
        lock(sink).scraped(&event);
    }
    (families, dropped)
}

/// One scrape of each endpoint (URL and `Authorization`) at once, each fetch bounded by
/// `timeout`: `Err(why)` for those that answered no metrics (refused, not 2xx, timed out,
/// nothing Prometheus could read). Run before collecting, so an endpoint that is not there is
/// named once and left alone.
pub async fn probe(
    endpoints: &[(String, Option<HeaderValue>)],
    timeout: Duration,
    clock: Clock,
) -> Vec<Result<(), String>> {
    let client = match client() {
        Ok(c) => c,
        Err(e) => return endpoints.iter().map(|_| Err(format!("{e:#}"))).collect(),
    };
    let one = |(url, auth): &(String, Option<HeaderValue>)| {
        let client = client.clone();
        let (url, auth) = (url.clone(), auth.clone());
        async move {
            let uri: Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
            let fetched = fetch(&client, &uri, auth.as_ref(), &clock);
            let body = match tokio::time::timeout(timeout, fetched).await {
                Ok(r) => r?,
                Err(_) => return Err(format!("no answer within {:.1} s", timeout.as_secs_f64())),
            };
            let answered_ms = (body.done_ns - body.sent_ns) as f64 / 1e6;
            let size = body.bytes.len();
            let started = Instant::now();
            let (families, _) = tokio::task::spawn_blocking(move || {
                parse::parse_capped(&String::from_utf8_lossy(&body.bytes), MAX_SERIES)
            })
            .await
            .map_err(|e| format!("parsing: {e}"))?;
            let parse = started.elapsed();
            if families.is_empty() {
                return Err("the answer holds no Prometheus metrics".to_string());
            }
            if parse > timeout {
                return Err(format!(
                    "it answered in {answered_ms:.0} ms, but reading its {size}-byte exposition \
                     took {:.1} s, longer than the {:.1} s a scrape may take",
                    parse.as_secs_f64(),
                    timeout.as_secs_f64()
                ));
            }
            Ok(())
        }
    };
    futures_util::future::join_all(endpoints.iter().map(one)).await
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
        let endpoint = ScrapeEndpoint {
            url: "http://127.0.0.1:1/metrics".to_string(),
            auth: None,
            sinks: Vec::new(),
        };
        let scraper = Scraper::start(
            vec![endpoint],
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
        assert_eq!(logs[0].scrapes, 0);
        assert!(logs[0].failures >= 2, "{:?}", logs[0]);
        assert!(
            logs[0]
                .first_error
                .as_deref()
                .unwrap()
                .contains("cannot connect")
        );
    }

    /// An endpoint that answers at once with an exposition that takes longer to read than a
    /// scrape may take is named for what happened: the answer's time, its size and the read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_exposition_slower_to_read_than_the_timeout_is_named_so() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // Many distinct series with long label values: cheap to send, slow to read.
        let pad = "x".repeat(400);
        let mut text = String::from("# TYPE g gauge\n");
        for i in 0..40_000 {
            text.push_str(&format!("g{{adapter=\"a{i}\",note=\"{pad}{i}\"}} {i}\n"));
        }
        let started = Instant::now();
        let _ = parse::parse_capped(&text, MAX_SERIES);
        let read = started.elapsed();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let body = text.into_bytes();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let body = body.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = sock.read(&mut buf).await;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    let _ = sock.write_all(head.as_bytes()).await;
                    let _ = sock.write_all(&body).await;
                });
            }
        });
        let url = format!("http://{addr}/metrics");
        let endpoints = [(url, None)];
        // The fetch alone, with all the time it wants.
        let fetched = probe(&endpoints, Duration::from_secs(600), Clock::new()).await;
        assert!(fetched[0].is_ok(), "{fetched:?}");
        // A timeout between the answer and the read: well above a local fetch, well below
        // the read measured above.
        let timeout = read / 4;
        let started = Instant::now();
        let got = probe(&endpoints, timeout, Clock::new()).await;
        let whole = started.elapsed();
        let e = got[0].clone().unwrap_err();
        assert!(
            e.starts_with("it answered in "),
            "{e} (read {read:?}, whole {whole:?})"
        );
        assert!(e.contains("-byte exposition took "), "{e}");
    }
}
