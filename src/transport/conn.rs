//! Kept-alive connections the server has closed.
//!
//! Some servers (llama.cpp's llama-server, servers that close between requests) close a
//! connection after a response although it was kept alive. The pool still holds it until
//! hyper notices the end of the socket, which it does only when the runtime has polled the
//! socket, and the next request, sent on it, fails.
//!
//! So each connection is wrapped in `Watched`: before the first byte of a request goes out on
//! a reused connection it asks the kernel directly (a non-blocking `MSG_PEEK`) whether the
//! server has closed; if so nothing is written and the request fails with
//! `ServerClosedIdle`. A reset by the server before any byte of the response also fails
//! that way: a server resets a connection it closed with data unread, so the request was
//! never taken in. `is_unsent` tells the exchange such a request may be sent again.

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

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

/// A request failed on a reused connection the server had closed, before any byte of the
/// response: the server did not take it in.
#[derive(Debug, thiserror::Error)]
#[error("the server closed the kept-alive connection before the request reached it")]
pub struct ServerClosedIdle;

/// True when the request behind `e` never reached the server: hyper gave it back unsent
/// (the connection was found closed before writing), or `Watched` stopped or saw it refused.
pub fn is_unsent(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err
            .downcast_ref::<hyper::Error>()
            .is_some_and(|h| h.is_canceled())
        {
            return true;
        }
        if let Some(io) = err.downcast_ref::<io::Error>()
            && io
                .get_ref()
                .is_some_and(|inner| inner.is::<ServerClosedIdle>())
        {
            return true;
        }
        cur = err.source();
    }
    false
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
            if self.peer_closed() {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    ServerClosedIdle,
                ));
            }
            self.stamps.request_started();
        } else if !self.wrote_any {
            self.stamps.request_started();
        }
        self.wrote_any = true;
        Ok(())
    }

    /// A reset before the response began, on a reused connection, means the server closed
    /// it with the request unread.
    fn classify(&self, e: io::Error) -> io::Error {
        let refused = matches!(
            e.kind(),
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
        );
        if refused && self.reused && !self.response_started {
            io::Error::new(e.kind(), ServerClosedIdle)
        } else {
            e
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
                Poll::Ready(Err(e)) => return Poll::Ready(Err(self.classify(e))),
                Poll::Pending => return Poll::Pending,
            }
        };
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
