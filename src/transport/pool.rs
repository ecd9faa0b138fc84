//! Kept-alive HTTP/1.1 connections, one per exchange in flight.
//!
//! An exchange takes a connection (the idle one of its server returned last, or a new one)
//! and gives it back only once its response was read to the end; any other end (an error,
//! the timeout, a cancel) drops it, which closes it. A connection is made only when no idle
//! one is left on the thread's lane, so a run holds no more connections than it has
//! exchanges in flight, besides the few its probes left on lane 0.
//!
//! A server that closes its connections right after each response although it says
//! keep-alive (llama.cpp's server after a stream) is learned: after `CLOSES_TO_LEARN` closes
//! that followed a response within `conn::CLOSE_AFTER_RESPONSE`, its connections are no longer
//! kept, so no request goes out on one that is being closed.
//!
//! A connection's task runs on the runtime that made it, so each runtime thread that sends
//! (see `set_thread_lane`) keeps its own idle list: a request never goes out on a connection
//! driven by another thread, which would cost a cross-thread wake-up per frame.
//!
//! This is hyper's own per-connection client (`hyper::client::conn::http1`) under a list
//! behind a mutex. hyper-util's pool, which this replaces, cost a raw client about 7-10 us
//! of CPU per streamed request on top of its 17 us (`benches/client_cpu.rs`, 5 Dec 2026),
//! and raced a new connect against every idle connection on its way back (~600
//! connections for 512 streams).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderValue, Uri};
use hyper::client::conn::http1::{self, SendRequest};

use super::conn::{CLOSE_AFTER_RESPONSE, WatchedConnector};
use super::request_body::RequestBody;
use super::timing::ConnStamps;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Idle connections unused this long are closed rather than taken.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Closes right after a response that make a server one whose connections are not kept.
/// More than one, so that a single close (a restart, a keep-alive timeout that happened to
/// fall just after a response) does not change how a run uses connections.
const CLOSES_TO_LEARN: u32 = 3;

/// Where a request goes: the URI it names on the wire (origin form) and its `Host`.
#[derive(Debug, Clone)]
pub struct Target {
    /// The server's URI as given (scheme and authority pick the connection).
    pub uri: Uri,
    /// Path and query only, as HTTP/1.1 sends it to an origin server.
    pub origin: Uri,
    /// `host[:port]`, the port left out when it is the scheme's default.
    pub host: HeaderValue,
}

impl Target {
    pub fn new(uri: Uri) -> Target {
        let origin = uri
            .path_and_query()
            .map(|pq| pq.as_str())
            .filter(|pq| !pq.is_empty())
            .unwrap_or("/")
            .parse()
            .unwrap_or_else(|_| Uri::from_static("/"));
        let host = uri.host().unwrap_or("");
        let default_port = match uri.scheme_str() {
            Some("https") => 443,
            _ => 80,
        };
        let host = match uri.port_u16() {
            Some(port) if port != default_port => format!("{host}:{port}"),
            _ => host.to_string(),
        };
        Target {
            host: HeaderValue::from_str(&host).unwrap_or(HeaderValue::from_static("localhost")),
            origin,
            uri,
        }
    }
}

thread_local! {
    /// This thread's idle lists (0 unless `set_thread_lane` said otherwise).
    static LANE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Gives the calling thread its own idle lists, `lane` (the sender threads of a run each
/// take one; every other thread shares lane 0). A connection goes back to the lane of the
/// thread that made it, and a request takes one from its own thread's lane.
pub fn set_thread_lane(lane: usize) {
    LANE.with(|l| l.set(lane));
}

/// The calling thread's lane (see `set_thread_lane`).
pub fn thread_lane() -> usize {
    LANE.with(|l| l.get())
}

/// One connection an exchange holds.
pub struct Conn {
    pub sender: SendRequest<RequestBody>,
    /// The stamps of the connection and its current request (see `timing`).
    pub stamps: Arc<ConnStamps>,
    server: usize,
    /// The idle list of the thread whose runtime drives the connection.
    lane: usize,
    idle_since: Instant,
}

impl Conn {
    /// The index of the server the connection goes to.
    pub fn server(&self) -> usize {
        self.server
    }
}

/// Why no connection could be had.
#[derive(Debug, thiserror::Error)]
#[error("client error (Connect)")]
pub struct ConnectError(#[source] pub BoxError);

/// One server's idle connections, and what the pool learned of how it closes them.
#[derive(Default)]
struct ServerConns {
    /// Idle connections by lane (see `set_thread_lane`), grown as lanes appear.
    idle: Mutex<Vec<Vec<Conn>>>,
    /// Closes seen within `CLOSE_AFTER_RESPONSE` of a response's end.
    closes_after_response: AtomicU32,
    /// Set after `CLOSES_TO_LEARN` of them: the server's connections are not kept.
    not_kept: AtomicBool,
}

/// The idle connections of each server, and how new ones are made.
pub struct Pool {
    connector: WatchedConnector,
    servers: Vec<ServerConns>,
    /// Idle connections kept per server: 0 makes a new connection for every request.
    max_idle: usize,
    /// Kept-alive connections the server had closed by the time a request came for them.
    found_closed: AtomicU64,
}

impl Pool {
    pub fn new(connector: WatchedConnector, servers: usize, max_idle: usize) -> Pool {
        Pool {
            connector,
            servers: (0..servers).map(|_| ServerConns::default()).collect(),
            max_idle,
            found_closed: AtomicU64::new(0),
        }
    }

    /// A connection to `target` (server `server`) ready for a request: an idle one if any
    /// is still open, else a new one.
    pub async fn take(&self, server: usize, target: &Target) -> Result<Conn, ConnectError> {
        while let Some(mut conn) = self.pop(server) {
            if conn.sender.is_closed() {
                let soon = conn.idle_since.elapsed() <= CLOSE_AFTER_RESPONSE;
                self.found_closed(server, target, soon);
                continue;
            }
            if conn.idle_since.elapsed() > IDLE_TIMEOUT {
                continue;
            }
            // Mostly ready already; a connection whose last response just ended may still
            // be finishing it on its own task.
            if conn.sender.is_ready() || conn.sender.ready().await.is_ok() {
                return Ok(conn);
            }
        }
        self.connect(server, target.uri.clone()).await
    }

    fn idle(&self, server: usize) -> std::sync::MutexGuard<'_, Vec<Vec<Conn>>> {
        self.servers[server]
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn pop(&self, server: usize) -> Option<Conn> {
        self.idle(server).get_mut(thread_lane())?.pop()
    }

    /// Notes a kept-alive connection of server `server` found closed when a request came for
    /// it; `after_response` when it closed within `CLOSE_AFTER_RESPONSE` of its last response.
    pub fn found_closed(&self, server: usize, target: &Target, after_response: bool) {
        self.found_closed.fetch_add(1, Ordering::Relaxed);
        if after_response {
            self.closed_after_response(server, target);
        }
    }

    /// Kept-alive connections found closed when a request came for them.
    pub fn found_closed_count(&self) -> u64 {
        self.found_closed.load(Ordering::Relaxed)
    }

    /// Notes that server `server` closed a kept-alive connection right after a response;
    /// at the `CLOSES_TO_LEARN`th its connections stop being kept, and the log says so once.
    pub fn closed_after_response(&self, server: usize, target: &Target) {
        let conns = &self.servers[server];
        let seen = conns.closes_after_response.fetch_add(1, Ordering::Relaxed) + 1;
        if seen == CLOSES_TO_LEARN {
            conns.not_kept.store(true, Ordering::Relaxed);
            self.idle(server).clear();
            tracing::info!(
                "The server at {} closes connections right after its responses although they \
                 say keep-alive (seen {seen} times): from now on each request to it goes on a \
                 new connection",
                target.host.to_str().unwrap_or("?")
            );
        }
    }

    /// A new connection to `uri`, counted as server `server`'s when given back.
    pub async fn connect(&self, server: usize, uri: Uri) -> Result<Conn, ConnectError> {
        let io = self.connector.connect(uri).await.map_err(ConnectError)?;
        let stamps = io.stamps();
        let (sender, connection) = http1::handshake(io)
            .await
            .map_err(|e| ConnectError(e.into()))?;
        // The connection runs on its own task until both sides are done with it; its errors
        // reach the exchange through the response or its body.
        tokio::spawn(connection);
        Ok(Conn {
            sender,
            stamps,
            server,
            lane: thread_lane(),
            idle_since: Instant::now(),
        })
    }

    /// Keeps `conn`, whose last response was read to its end, for a later request.
    pub fn give_back(&self, mut conn: Conn) {
        if self.max_idle == 0
            || conn.sender.is_closed()
            || self.servers[conn.server].not_kept.load(Ordering::Relaxed)
        {
            return;
        }
        conn.idle_since = Instant::now();
        let mut lanes = self.idle(conn.server);
        if lanes.len() <= conn.lane {
            lanes.resize_with(conn.lane + 1, Vec::new);
        }
        let idle = &mut lanes[conn.lane];
        if idle.len() < self.max_idle {
            idle.push(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::record::RequestRecord;
    use crate::transport::tests::{chat_client, stream_once};

    /// Each sending thread (lane) keeps its own kept-alive connections: a request on
    /// another lane opens its own, and the first lane's is still there for it afterwards.
    #[test]
    fn a_thread_reuses_its_own_connections_and_no_other_threads() {
        let server_rt = tokio::runtime::Runtime::new().unwrap();
        let server = server_rt
            .block_on(crate::mock::start(
                crate::mock::MockServerArgs::fast_defaults(),
            ))
            .unwrap();
        // Short: a request that went out on the other lane's connection would wait for a
        // runtime that is not running (the first lane's thread is blocked).
        let client = chat_client(&server.url(), Duration::from_secs(5));
        let on_lane = |lane: usize| {
            set_thread_lane(lane);
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        };
        let reused = |r: &RequestRecord| {
            assert!(r.error.is_none(), "{:?}", r.error);
            r.http.as_ref().unwrap().connection_reused
        };
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let client = &client;
        let (on_lane, reused) = (&on_lane, &reused);
        let (first, other, last) = std::thread::scope(|scope| {
            // Owned here: a failure below drops it, which ends the first lane's wait.
            let go_tx = go_tx;
            let first_lane = scope.spawn(move || {
                let rt = on_lane(1);
                let first: Vec<bool> = (0..3)
                    .map(|_| reused(&rt.block_on(stream_once(client, 2))))
                    .collect();
                // Its connection stays with this runtime while lane 2 sends.
                done_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                (first, reused(&rt.block_on(stream_once(client, 2))))
            });
            done_rx.recv().unwrap();
            let other = scope
                .spawn(|| reused(&on_lane(2).block_on(stream_once(client, 2))))
                .join()
                .unwrap();
            go_tx.send(()).unwrap();
            let (first, last) = first_lane.join().unwrap();
            (first, other, last)
        });
        assert!(!other, "lane 2 took lane 1's connection");
        assert!(!first[0], "the first request found a connection");
        assert!(first[1..].iter().any(|&r| r), "{first:?}");
        assert!(last, "lane 1's connection was not reused after lane 2 sent");
        server_rt.block_on(server.shutdown());
    }

    #[test]
    fn targets_name_the_origin_and_the_host_without_a_default_port() {
        let t = Target::new(
            "http://127.0.0.1:8000/v1/chat/completions?x=1"
                .parse()
                .unwrap(),
        );
        assert_eq!(t.origin, "/v1/chat/completions?x=1");
        assert_eq!(t.host, "127.0.0.1:8000");
        let t = Target::new("https://api.example.com:443".parse().unwrap());
        assert_eq!(t.origin, "/");
        assert_eq!(t.host, "api.example.com");
        let t = Target::new("http://example.com:80/x".parse().unwrap());
        assert_eq!(t.host, "example.com");
        let t = Target::new("http://[::1]:9/x".parse().unwrap());
        assert_eq!(t.host, "[::1]:9");
    }
}
