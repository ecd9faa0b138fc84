//! The request body: one prebuilt buffer that notes when the connection took it.
//!
//! hyper asks a request for its body only once it holds a connection and is writing the
//! request, so that moment splits the time before the server sees the request into the
//! client's part (pool checkout or connect) and the rest (loopback, the server reading).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use crate::clock::Clock;

/// No stamp yet: the body was never taken (the request failed before it had a connection).
const NOT_TAKEN: u64 = u64::MAX;

/// Where a body notes when it was taken; read after the exchange.
#[derive(Debug, Clone)]
pub struct TakenAt(Arc<AtomicU64>);

impl Default for TakenAt {
    fn default() -> Self {
        TakenAt(Arc::new(AtomicU64::new(NOT_TAKEN)))
    }
}

impl TakenAt {
    /// Forgets a stamp, before the request is sent again.
    pub fn reset(&self) {
        self.0.store(NOT_TAKEN, Ordering::Relaxed);
    }

    /// Monotonic ns (run clock) when the connection took the body, if it did.
    pub fn get(&self) -> Option<u64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|&ns| ns != NOT_TAKEN)
    }
}

pub struct RequestBody {
    data: Option<Bytes>,
    stamp: Option<(Clock, TakenAt)>,
}

impl RequestBody {
    /// A body that notes in `taken`, on `clock`, when it is taken.
    pub fn stamped(data: Bytes, clock: Clock, taken: TakenAt) -> RequestBody {
        let mut body = RequestBody::plain(data);
        body.stamp = Some((clock, taken));
        body
    }

    /// A body without a stamp. An empty one has no frame at all.
    pub fn plain(data: Bytes) -> RequestBody {
        RequestBody {
            data: (!data.is_empty()).then_some(data),
            stamp: None,
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let data = self.data.take();
        if data.is_some()
            && let Some((clock, taken)) = &self.stamp
        {
            taken.0.store(clock.now_ns(), Ordering::Relaxed);
        }
        Poll::Ready(data.map(|d| Ok(Frame::data(d))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    /// Exact, so hyper sends a Content-Length; what is left once taken is nothing.
    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn the_body_is_stamped_when_taken_and_only_then() {
        let clock = Clock::new();
        let taken = TakenAt::default();
        let mut body = RequestBody::stamped(Bytes::from_static(b"{\"a\":1}"), clock, taken.clone());
        assert_eq!(body.size_hint().exact(), Some(7));
        assert!(!body.is_end_stream());
        assert_eq!(taken.get(), None);
        let before = clock.now_ns();
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), Bytes::from_static(b"{\"a\":1}"));
        let at = taken.get().expect("stamped");
        assert!(at >= before && at <= clock.now_ns());
        assert!(body.is_end_stream());
        assert_eq!(body.size_hint().exact(), Some(0));
        assert!(body.frame().await.is_none());
        assert_eq!(taken.get(), Some(at), "stamped once");
    }
}
