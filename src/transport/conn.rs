//! Kept-alive connections the server has closed.
//!
//! Some servers close a connection after a response although it was kept alive:
//! llama.cpp's llama-server (cpp-httplib) shuts the write side down right after each streamed
//! response and then reads and discards whatever arrives for 100 ms; others close between
//! requests or when a keep-alive timeout ends. The pool still holds such a connection until
//! hyper notices the end of the socket, and the next request, sent on it, fails.
//!
//! So each connection is wrapped in `Watched`, which tells a request the server did not
//! take in (sent again on a new connection) from one it may have acted on (never sent
//! twice). On a reused connection, with no byte of the response yet:
//! - Before the first byte of a request goes out, it asks the kernel directly (a non-blocking
//!   `MSG_PEEK`) whether the server has closed; if so nothing is written.
//! - A reset (RST) after the write: the server closed its socket with the request unread, or
//!   the request arrived after it had closed. Either way it never read the request.
//! - An end of stream (FIN) within `CLOSE_AFTER_RESPONSE` of the previous response's end:
//!   the close belongs to that response (the request crossed it on the wire), as with
//!   llama-server. Its drain may have read the request's bytes, so TCP cannot tell this case
//!   from a server that read the request and closed without a word in that moment; the
//!   timing does, for any server that takes longer than that to act on a request.
//! - A later end of stream is held back for a few round trips: a reset following it shows the
//!   request went unread; without one, hyper sees the end and the request fails.
//!
//! `unsent` tells the exchange how the request went, and the pool learns from closes that
//! follow responses (see `pool`).

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::MaybeHttpsStream;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::timing::{ConnStamps, StampedResolver};

type Inner = hyper_rustls::HttpsConnector<HttpConnector<StampedResolver>>;
type Stream = MaybeHttpsStream<TokioIo<tokio::net::TcpStream>>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A server that closes a connection this soon after a response ended closes it because that
/// response ended; llama-server's close follows its stream's last byte by 0.2-11 ms on a
/// loaded 2-core machine.
pub const CLOSE_AFTER_RESPONSE: Duration = Duration::from_millis(50);

/// A request failed on a reused connection the server had closed without taking the
/// request in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerClosedIdle {
    /// Bytes of the request were written before the close showed (else the close was found
    /// first and nothing went out).
    pub written: bool,
    /// The close came within `CLOSE_AFTER_RESPONSE` of the previous response's end.
    pub after_response: bool,
}

impl std::fmt::Display for ServerClosedIdle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.written, self.after_response) {
            (false, _) => f.write_str(
                "the server had closed the kept-alive connection; the request was not written",
            ),
            (true, true) => f.write_str(
                "the server closed the kept-alive connection right after its previous response, \
                 as the request was written",
            ),
            (true, false) => f.write_str(
                "the server reset the kept-alive connection without reading the request",
            ),
        }
    }
}

impl std::error::Error for ServerClosedIdle {}

/// How the request behind `e` failed, when the server did not take it in (see the module
/// doc): hyper gave it back unsent (the connection was found closed before writing), or
/// `Watched` stopped it or saw the server close without it. `None`: the server may have it.
pub fn unsent(e: &(dyn std::error::Error + 'static)) -> Option<ServerClosedIdle> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err
            .downcast_ref::<hyper::Error>()
            .is_some_and(|h| h.is_canceled())
        {
            return Some(ServerClosedIdle {
                written: false,
                after_response: false,
            });
        }
        if let Some(io) = err.downcast_ref::<io::Error>()
            && let Some(closed) = io
                .get_ref()
                .and_then(|i| i.downcast_ref::<ServerClosedIdle>())
        {
            return Some(*closed);
        }
        cur = err.source();
    }
    None
}

/// How long an end of stream with no response, on a reused connection, is held back for
/// the reset that would show the request went unread. The reset leaves the server when
/// the request arrives there, so it follows the close by at most a round trip; the floor
/// covers loopback and a busy host.
fn reset_grace(srtt: Option<Duration>) -> Duration {
    let floor = Duration::from_millis(20);
    srtt.map_or(floor, |rtt| (rtt * 4).clamp(floor, Duration::from_secs(3)))
}

/// The HTTPS-or-HTTP connector, its connections wrapped in `Watched`. With a one-permit
/// semaphore (a sticky session), a new connection waits until the previous one is gone, so
/// a session never holds two at once. Closing the semaphore fails such waiting connects.
#[derive(Clone)]
pub struct WatchedConnector(pub Inner, pub Option<Arc<Semaphore>>);

impl WatchedConnector {
    /// A new connection to `uri`'s server, its connect stamped (lookup, TCP, TLS; the
    /// resolver stamps the lookup). A sticky session's wait for its one connection comes
    /// first and is not stamped.
    pub async fn connect(&self, uri: Uri) -> Result<Watched, BoxError> {
        let stamps = ConnStamps::new();
        let mut inner = self.0.clone();
        let only =
            match &self.1 {
                Some(s) => Some(s.clone().acquire_owned().await.map_err(|_| {
                    io::Error::other("the sticky session is over; no new connection")
                })?),
                None => None,
            };
        std::future::poll_fn(|cx| tower_service::Service::poll_ready(&mut inner, cx)).await?;
        stamps.connect_started();
        let stream = super::timing::connecting(
            stamps.clone(),
            tower_service::Service::call(&mut inner, uri),
        )
        .await?;
        stamps.connected();
        Ok(Watched {
            _only: only,
            stream,
            read_since_write: false,
            reused: false,
            response_started: false,
            wrote_any: false,
            previous_response_end: None,
            reset_wait: None,
            stamps,
        })
    }
}

/// One connection, tracking where it is in the request/response cycle of HTTP/1.1.
pub struct Watched {
    /// Held while the connection lives (see `WatchedConnector`).
    _only: Option<OwnedSemaphorePermit>,
    stream: Stream,
    /// Response bytes arrived since the last write: the next write starts a new request.
    read_since_write: bool,
    /// The current request is not the connection's first.
    reused: bool,
    /// A byte of the current request's response has arrived.
    response_started: bool,
    /// Some request was written on this connection.
    wrote_any: bool,
    /// When the last byte of the previous request's response arrived (a `timing::stamp`).
    previous_response_end: Option<u64>,
    /// Set while an end of stream before the response is held back (see the module doc):
    /// until when, and the timer that polls for the reset meanwhile.
    reset_wait: Option<(Instant, Pin<Box<tokio::time::Sleep>>)>,
    /// Timing of the connection and its current request (see `timing`).
    stamps: std::sync::Arc<ConnStamps>,
}

impl Watched {
    /// The stamps of this connection and its current request.
    pub fn stamps(&self) -> Arc<ConnStamps> {
        self.stamps.clone()
    }

    fn tcp(&self) -> &tokio::net::TcpStream {
        match &self.stream {
            MaybeHttpsStream::Http(tcp) => tcp.inner(),
            MaybeHttpsStream::Https(tls) => tls.inner().get_ref().0.inner().inner(),
        }
    }

    /// True when the server has closed (FIN) or reset the socket. Asks the kernel itself:
    /// the runtime may not have seen the event yet. Pending bytes (e.g. a TLS alert) are
    /// left for the normal read.
    fn peer_closed(&self) -> bool {
        let mut byte = [MaybeUninit::<u8>::uninit()];
        match socket2::SockRef::from(self.tcp()).peek(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => {
                e.kind() != io::ErrorKind::WouldBlock && e.kind() != io::ErrorKind::Interrupted
            }
        }
    }

    /// Bookkeeping before any write: the first write after response bytes starts a new
    /// request on a reused connection, which fails at once if the server has closed it.
    fn begin_write(&mut self) -> io::Result<()> {
        if self.read_since_write {
            self.read_since_write = false;
            self.reused = true;
            self.response_started = false;
            self.reset_wait = None;
            self.previous_response_end = self.stamps.last_read();
            if self.peer_closed() {
                return Err(self.closed(false, self.soon_after_response()));
            }
            self.stamps.request_started();
        } else if !self.wrote_any {
            self.stamps.request_started();
        }
        self.wrote_any = true;
        Ok(())
    }

    fn closed(&self, written: bool, after_response: bool) -> io::Error {
        let closed = ServerClosedIdle {
            written,
            after_response,
        };
        io::Error::new(io::ErrorKind::ConnectionAborted, closed)
    }

    /// Now is within `CLOSE_AFTER_RESPONSE` of the previous response's end.
    fn soon_after_response(&self) -> bool {
        self.previous_response_end.is_some_and(|end| {
            super::timing::stamp().saturating_sub(end) <= CLOSE_AFTER_RESPONSE.as_nanos() as u64
        })
    }

    /// A reset before the response began, on a reused connection, means the server closed
    /// it with the request unread.
    fn classify(&self, e: io::Error) -> io::Error {
        let refused = matches!(
            e.kind(),
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
        );
        if refused && self.awaits_response_on_reuse() {
            self.closed(true, self.soon_after_response())
        } else {
            e
        }
    }

    /// A request went out on a reused connection and no byte of its response came yet.
    fn awaits_response_on_reuse(&self) -> bool {
        self.reused && self.wrote_any && !self.response_started
    }

    /// True when the server has reset the socket (the kernel's pending error). Taking the
    /// error is harmless: the caller turns it into `Unread`.
    fn was_reset(&self) -> bool {
        matches!(
            self.tcp().take_error(),
            Ok(Some(e)) if matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe)
        )
    }

    /// The smoothed round-trip time the kernel measured on this connection.
    #[cfg(target_os = "linux")]
    fn srtt(&self) -> Option<Duration> {
        use std::os::fd::AsRawFd;
        // SAFETY: `tcp_info` is plain data; the kernel fills at most `len` bytes of it.
        unsafe {
            let mut info: libc::tcp_info = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
            let rc = libc::getsockopt(
                self.tcp().as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&mut info as *mut libc::tcp_info).cast(),
                &mut len,
            );
            (rc == 0).then(|| Duration::from_micros(info.tcpi_rtt.into()))
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn srtt(&self) -> Option<Duration> {
        None
    }

    /// The server ended the stream before any byte of the response to a request on a
    /// reused connection (see the module doc): the close is that of the previous response
    /// when it came soon enough after it; else a reset showing up within the grace means the
    /// request went unread, and without one the end of stream stands. Polls every
    /// millisecond meanwhile: after the end of stream the socket stays readable, so
    /// readiness cannot announce the reset.
    fn poll_end_before_response(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.reset_wait.is_none() && self.soon_after_response() {
            return Poll::Ready(Err(self.closed(true, true)));
        }
        loop {
            if self.was_reset() {
                self.reset_wait = None;
                return Poll::Ready(Err(self.closed(true, false)));
            }
            let now = Instant::now();
            if self.reset_wait.is_none() {
                let until = now + reset_grace(self.srtt());
                self.reset_wait = Some((until, Box::pin(tokio::time::sleep_until(now.into()))));
            }
            let (until, tick) = self.reset_wait.as_mut().expect("set above");
            if now >= *until {
                return Poll::Ready(Ok(()));
            }
            let next = (now + Duration::from_millis(1)).min(*until);
            tick.as_mut().reset(next.into());
            if tick.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

impl Read for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // Read through a view of the cursor's free space to learn how many bytes came.
        // SAFETY: the view only initializes bytes; the cursor advances over exactly those.
        let n = unsafe {
            let mut view = hyper::rt::ReadBuf::uninit(buf.as_mut());
            match Pin::new(&mut self.stream).poll_read(cx, view.unfilled()) {
                Poll::Ready(Ok(())) => view.filled().len(),
                // TLS without its close_notify: the server's end of stream all the same.
                Poll::Ready(Err(e))
                    if e.kind() == io::ErrorKind::UnexpectedEof
                        && self.awaits_response_on_reuse() =>
                {
                    0
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(self.classify(e))),
                Poll::Pending => return Poll::Pending,
            }
        };
        if n == 0 && self.awaits_response_on_reuse() {
            return self.poll_end_before_response(cx);
        }
        // SAFETY: the view initialized these `n` bytes.
        unsafe { buf.advance(n) };
        if n > 0 {
            self.stamps.read(n, !self.response_started);
            self.read_since_write = true;
            self.response_started = true;
        }
        Poll::Ready(Ok(()))
    }
}

impl Write for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Err(e) = self.begin_write() {
            return Poll::Ready(Err(e));
        }
        match Pin::new(&mut self.stream).poll_write(cx, buf) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(self.classify(e))),
            Poll::Ready(Ok(n)) => {
                self.stamps.wrote(n);
                Poll::Ready(Ok(n))
            }
            other => other,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // Headers and body go out in one writev: hyper hands both buffers at once.
        if let Err(e) = self.begin_write() {
            return Poll::Ready(Err(e));
        }
        match Pin::new(&mut self.stream).poll_write_vectored(cx, bufs) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(self.classify(e))),
            Poll::Ready(Ok(n)) => {
                self.stamps.wrote(n);
                Poll::Ready(Ok(n))
            }
            other => other,
        }
    }
}
