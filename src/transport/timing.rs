//! Where a request's HTTP time went (AIPerf's k6-style `http_req_*` phases): stamps taken
//! on the connection as it connects, writes and reads, and read back by the exchange.
//!
//! The stamps live on the connection (one `ConnStamps` per connection, not per request):
//! HTTP/1.1 carries one request at a time, so while an exchange holds the connection its
//! per-request stamps are that request's. Stamps are ns since a process-wide base instant,
//! turned into run-clock times when read.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};

use crate::clock::Clock;
use crate::record::HttpTiming;

/// No stamp taken.
const NONE: u64 = u64::MAX;

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Now, in ns since the base instant (never `NONE`).
#[inline]
pub(crate) fn stamp() -> u64 {
    (base().elapsed().as_nanos() as u64).min(NONE - 1)
}

/// One connection's stamps: when it was made, and where its current request is.
#[derive(Debug)]
pub struct ConnStamps {
    dns_start: AtomicU64,
    dns_end: AtomicU64,
    connect_start: AtomicU64,
    connect_end: AtomicU64,
    /// Requests started on this connection (1 for its first).
    requests: AtomicU64,
    write_start: AtomicU64,
    write_end: AtomicU64,
    first_read: AtomicU64,
    last_read: AtomicU64,
    bytes_written: AtomicU64,
    write_calls: AtomicU64,
    bytes_read: AtomicU64,
    read_calls: AtomicU64,
}

impl ConnStamps {
    pub fn new() -> Arc<ConnStamps> {
        let none = || AtomicU64::new(NONE);
        let zero = || AtomicU64::new(0);
        Arc::new(ConnStamps {
            dns_start: none(),
            dns_end: none(),
            connect_start: none(),
            connect_end: none(),
            requests: zero(),
            write_start: none(),
            write_end: none(),
            first_read: none(),
            last_read: none(),
            bytes_written: zero(),
            write_calls: zero(),
            bytes_read: zero(),
            read_calls: zero(),
        })
    }

    pub fn connect_started(&self) {
        self.connect_start.store(stamp(), Relaxed);
    }

    pub fn connected(&self) {
        self.connect_end.store(stamp(), Relaxed);
    }

    /// The first byte of a new request is about to be written.
    pub fn request_started(&self) {
        self.requests.fetch_add(1, Relaxed);
        self.write_start.store(stamp(), Relaxed);
        self.write_end.store(NONE, Relaxed);
        self.first_read.store(NONE, Relaxed);
        self.last_read.store(NONE, Relaxed);
        self.bytes_written.store(0, Relaxed);
        self.write_calls.store(0, Relaxed);
        self.bytes_read.store(0, Relaxed);
        self.read_calls.store(0, Relaxed);
    }

    pub fn wrote(&self, n: usize) {
        self.write_end.store(stamp(), Relaxed);
        self.bytes_written.fetch_add(n as u64, Relaxed);
        self.write_calls.fetch_add(1, Relaxed);
    }

    /// `n` response bytes arrived; `first` when they are the response's first.
    pub fn read(&self, n: usize, first: bool) {
        let now = stamp();
        if first {
            self.first_read.store(now, Relaxed);
        }
        self.last_read.store(now, Relaxed);
        self.bytes_read.fetch_add(n as u64, Relaxed);
        self.read_calls.fetch_add(1, Relaxed);
    }

    /// When the current request's last response byte arrived (a `stamp`), if one did.
    pub fn last_read(&self) -> Option<u64> {
        Some(self.last_read.load(Relaxed)).filter(|&v| v != NONE)
    }

    /// The current request's timing, in `clock`'s ns. `start_ns` is when the exchange
    /// began, `first_body_ns` when the first byte of the response body arrived.
    pub fn timing(&self, clock: &Clock, start_ns: u64, first_body_ns: Option<u64>) -> HttpTiming {
        let at = |a: &AtomicU64| {
            let v = a.load(Relaxed);
            (v != NONE).then(|| clock.ns_of(base() + Duration::from_nanos(v)))
        };
        let connect_start = at(&self.connect_start);
        // A connection made for this request (not one another request had opened earlier
        // and that this one found in the pool).
        let fresh =
            self.requests.load(Relaxed) == 1 && connect_start.is_some_and(|c| c >= start_ns);
        HttpTiming {
            connection_reused: !fresh,
            dns_start_ns: at(&self.dns_start).filter(|_| fresh),
            dns_end_ns: at(&self.dns_end).filter(|_| fresh),
            connect_start_ns: connect_start.filter(|_| fresh),
            connect_end_ns: at(&self.connect_end).filter(|_| fresh),
            send_start_ns: at(&self.write_start),
            send_end_ns: at(&self.write_end),
            headers_ns: at(&self.first_read),
            first_body_ns,
            last_byte_ns: at(&self.last_read),
            bytes_sent: self.bytes_written.load(Relaxed),
            chunks_sent: self.write_calls.load(Relaxed),
            bytes_received: self.bytes_read.load(Relaxed),
            chunks_received: self.read_calls.load(Relaxed),
        }
    }
}

tokio::task_local! {
    /// The stamps of the connection being made by the current connect future.
    static CONNECTING: Arc<ConnStamps>;
}

/// Runs a connect future with `stamps` as the connection the resolver reports to.
pub fn connecting<F: Future>(stamps: Arc<ConnStamps>, f: F) -> impl Future<Output = F::Output> {
    CONNECTING.scope(stamps, f)
}

/// The system resolver, stamping the lookup on the connection being made.
#[derive(Clone)]
pub struct StampedResolver(GaiResolver);

impl StampedResolver {
    pub fn new() -> StampedResolver {
        StampedResolver(GaiResolver::new())
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Name> for StampedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let stamps = CONNECTING.try_with(Arc::clone).ok();
        if let Some(s) = &stamps {
            s.dns_start.store(stamp(), Relaxed);
        }
        let lookup = self.0.call(name);
        Box::pin(async move {
            let addrs = lookup.await;
            if let Some(s) = &stamps {
                s.dns_end.store(stamp(), Relaxed);
            }
            Ok(addrs?.collect::<Vec<_>>().into_iter())
        })
    }
}
