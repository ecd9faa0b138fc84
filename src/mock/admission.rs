//! `--max-concurrency`: at most K generation requests are served at once; the others wait in
//! a first-come-first-served queue, so a loaded mock's latency grows the way a saturated
//! inference server's does.
//!
//! A request holds its [`Slot`] from admission until its response body ends or is dropped (a
//! client that disconnects drops it). A request whose client leaves while it is still queued
//! is dropped with its wait, so it never takes a slot. Tokio's semaphore hands out permits in
//! the order they were asked for and forgets a waiter whose future is dropped.
//!
//! [`LoadGauges`] count the requests holding a slot and those waiting, as vLLM's
//! `num_requests_running` and `num_requests_waiting`; they are kept with no limit too.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// `--max-concurrency`: a whole number of slots, 1 or more.
pub fn parse_max_concurrency(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=Semaphore::MAX_PERMITS).contains(&n) => Ok(n),
        _ => Err(format!(
            "'{s}' is not a number of requests served at once; give a whole number of 1 or \
             more, e.g. 8, or leave the flag out for no limit"
        )),
    }
}

/// How many requests are being served and how many wait for a slot, right now.
#[derive(Debug, Default)]
pub struct LoadGauges {
    running: AtomicU64,
    waiting: AtomicU64,
}

impl LoadGauges {
    /// Requests holding a slot (admitted, response not yet finished or abandoned).
    pub fn running(&self) -> u64 {
        self.running.load(Ordering::Relaxed)
    }

    /// Requests queued for a slot.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }
}

/// The server's admission gate.
#[derive(Debug)]
pub struct Admission {
    /// `None`: no limit, every request is admitted at once.
    slots: Option<Arc<Semaphore>>,
    gauges: Arc<LoadGauges>,
}

impl Admission {
    pub fn new(max_concurrency: Option<usize>) -> Self {
        Admission {
            slots: max_concurrency.map(|k| Arc::new(Semaphore::new(k))),
            gauges: Arc::default(),
        }
    }

    pub fn gauges(&self) -> &Arc<LoadGauges> {
        &self.gauges
    }

    /// Waits for a slot, first come first served. Dropping the returned future while it
    /// waits leaves the queue without taking a slot.
    pub async fn admit(&self) -> Slot {
        let permit = match &self.slots {
            None => None,
            Some(slots) => Some(match slots.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) => {
                    let _waiting = Counted::new(&self.gauges.waiting);
                    slots
                        .clone()
                        .acquire_owned()
                        .await
                        .expect("the semaphore is never closed")
                }
            }),
        };
        self.gauges.running.fetch_add(1, Ordering::Relaxed);
        Slot {
            _permit: permit,
            gauges: self.gauges.clone(),
        }
    }
}

/// Adds one to a gauge for as long as it lives (also when its future is cancelled).
struct Counted<'a>(&'a AtomicU64);

impl<'a> Counted<'a> {
    fn new(gauge: &'a AtomicU64) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        Counted(gauge)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One admitted request's place; freed when dropped.
#[derive(Debug)]
pub struct Slot {
    _permit: Option<OwnedSemaphorePermit>,
    gauges: Arc<LoadGauges>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.gauges.running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that holds its request's slot until the last frame has been handed to
/// the connection, an error ends it, or it is dropped (the client left).
pub struct SlotBody<B> {
    inner: B,
    slot: Option<Slot>,
}

impl<B> SlotBody<B> {
    pub fn new(inner: B, slot: Slot) -> Self {
        SlotBody {
            inner,
            slot: Some(slot),
        }
    }
}

impl<B: Body + Unpin> Body for SlotBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let finished = match &polled {
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            Poll::Pending => false,
        };
        if finished {
            this.slot = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use std::time::Duration;

    /// Lets spawned tasks run up to their next wait.
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn parses_a_positive_count() {
        assert_eq!(parse_max_concurrency("3"), Ok(3));
        for bad in ["0", "-1", "1.5", "many", ""] {
            let e = parse_max_concurrency(bad).unwrap_err();
            assert!(e.contains("whole number of 1 or more"), "{bad}: {e}");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn slots_are_handed_out_first_come_first_served() {
        let adm = Arc::new(Admission::new(Some(2)));
        let a = adm.admit().await;
        let b = adm.admit().await;
        assert_eq!((adm.gauges().running(), adm.gauges().waiting()), (2, 0));

        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut queued = Vec::new();
        for i in 0..3 {
            let (adm, tx) = (adm.clone(), tx.clone());
            queued.push(tokio::spawn(async move {
                let slot = adm.admit().await;
                tx.send(i).unwrap();
                // Hold the slot until the test lets go of it.
                std::future::pending::<()>().await;
                drop(slot);
            }));
            settle().await;
        }
        assert_eq!((adm.gauges().running(), adm.gauges().waiting()), (2, 3));
        assert!(rx.try_recv().is_err());

        drop(a);
        settle().await;
        assert_eq!(rx.try_recv(), Ok(0));
        drop(b);
        settle().await;
        assert_eq!(rx.try_recv(), Ok(1));
        assert_eq!((adm.gauges().running(), adm.gauges().waiting()), (2, 1));

        // The first admitted one leaves: the last in the queue gets its slot.
        queued[0].abort();
        settle().await;
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!((adm.gauges().running(), adm.gauges().waiting()), (2, 0));
        for q in queued {
            q.abort();
        }
        settle().await;
        assert_eq!((adm.gauges().running(), adm.gauges().waiting()), (0, 0));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_request_that_leaves_the_queue_takes_no_slot() {
        let adm = Arc::new(Admission::new(Some(1)));
        let held = adm.admit().await;
        let leaver = {
            let adm = adm.clone();
            tokio::spawn(async move { adm.admit().await })
        };
        settle().await;
        assert_eq!(adm.gauges().waiting(), 1);
        leaver.abort();
        settle().await;
        assert_eq!((adm.gauges().running(), adm.gauges().waiting()), (1, 0));
        drop(held);
        // The slot is free again: the next request is admitted at once.
        let next = tokio::time::timeout(Duration::from_secs(1), adm.admit()).await;
        assert!(next.is_ok(), "the slot was taken by a request that left");
        assert_eq!(adm.gauges().running(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn without_a_limit_everyone_runs_and_is_counted() {
        let adm = Admission::new(None);
        let mut slots = Vec::new();
        for _ in 0..50 {
            slots.push(adm.admit().await);
        }
        assert_eq!((adm.gauges().running(), adm.gauges().waiting()), (50, 0));
        drop(slots);
        assert_eq!(adm.gauges().running(), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_body_frees_its_slot_at_its_end_or_when_dropped() {
        let adm = Admission::new(Some(1));
        let mut body = SlotBody::new(Full::new(Bytes::from_static(b"x")), adm.admit().await);
        assert_eq!(adm.gauges().running(), 1);
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "x");
        // Freed with the last frame, before the body itself goes away.
        assert_eq!(adm.gauges().running(), 0);
        assert!(adm.slots.as_ref().unwrap().try_acquire().is_ok());
        drop(body);

        let body = SlotBody::new(Full::new(Bytes::from_static(b"y")), adm.admit().await);
        assert_eq!(adm.gauges().running(), 1);
        drop(body);
        assert_eq!(adm.gauges().running(), 0);
    }
}
