//! Kept-alive HTTP/1.1 connections, one per exchange in flight.
//!
//! An exchange takes a connection (the idle one of its server returned last, or a new one)
//! and gives it back only once its response was read to the end; any other end (an error,
//! the timeout, a cancel) drops it, which closes it. A connection is made only when no idle
//! one is left, so a run never holds more connections than it has exchanges in flight.
//!
//! This is hyper's own per-connection client (`hyper::client::conn::http1`) under a list
//! behind a mutex. hyper-util's pool, which this replaces, cost a raw client about 7-10 us
//! of CPU per streamed request on top of its 17 us (`benches/client_cpu.rs`, 5 Dec 2026),
//! and raced a new connect against every idle connection on its way back (~600
//! connections for 512 streams).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderValue, Uri};
use hyper::client::conn::http1::{self, SendRequest};

use super::conn::WatchedConnector;
use super::request_body::RequestBody;
use super::timing::ConnStamps;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Idle connections unused this long are closed rather than taken.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

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

/// One connection an exchange holds.
pub struct Conn {
    pub sender: SendRequest<RequestBody>,
    /// The stamps of the connection and its current request (see `timing`).
    pub stamps: Arc<ConnStamps>,
    server: usize,
    idle_since: Instant,
}

/// Why no connection could be had.
#[derive(Debug, thiserror::Error)]
#[error("client error (Connect)")]
pub struct ConnectError(#[source] pub BoxError);

/// The idle connections of each server, and how new ones are made.
pub struct Pool {
    connector: WatchedConnector,
    idle: Vec<Mutex<Vec<Conn>>>,
    /// Idle connections kept per server: 0 makes a new connection for every request.
    max_idle: usize,
}

impl Pool {
    pub fn new(connector: WatchedConnector, servers: usize, max_idle: usize) -> Pool {
        Pool {
            connector,
            idle: (0..servers).map(|_| Mutex::new(Vec::new())).collect(),
            max_idle,
        }
    }

    /// A connection to `target` (server `server`) ready for a request: an idle one if any
    /// is still open, else a new one.
    pub async fn take(&self, server: usize, target: &Target) -> Result<Conn, ConnectError> {
        while let Some(mut conn) = self.pop(server) {
            if conn.sender.is_closed() || conn.idle_since.elapsed() > IDLE_TIMEOUT {
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

    fn pop(&self, server: usize) -> Option<Conn> {
        self.idle[server]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
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
            idle_since: Instant::now(),
        })
    }

    /// Keeps `conn`, whose last response was read to its end, for a later request.
    pub fn give_back(&self, mut conn: Conn) {
        if self.max_idle == 0 || conn.sender.is_closed() {
            return;
        }
        conn.idle_since = Instant::now();
        let mut idle = self.idle[conn.server]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.max_idle {
            idle.push(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
