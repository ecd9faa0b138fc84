//! Fault injection: each accepted request may be answered with one injected failure, chosen
//! from a seeded hash of the request counter, so the same seed and the same number of requests
//! always give the same faults.
//!
//! Streamed faults strike at the "middle" frame (half the tokens sent), so the client has
//! received tokens before the failure. A non-streamed response has one frame: the fault
//! applies to it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

use super::body::ScheduledBody;
use super::response::DONE_EVENT;
use crate::hash::splitmix64;

/// One injected failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 500 with an OpenAI-shaped error body.
    ServerError,
    /// HTTP 429 with an OpenAI-shaped error body.
    RateLimit,
    /// The connection is closed mid-response (no end of the chunked body).
    Reset,
    /// The stream ends cleanly but without its closing event (`data: [DONE]`, or the other
    /// APIs' `message_stop` / `response.completed`; non-streamed: half a JSON body).
    Truncate,
    /// One extra chunk of invalid JSON (non-streamed: the body is not JSON).
    Malformed,
    /// An `event: error` chunk with an `{"error": ...}` payload, then `[DONE]`.
    ErrorEvent,
    /// No bytes for the stall duration, then the response continues normally.
    Stall,
}

/// `aiperf mock-server` fault flags: percentages (0-100) of accepted requests, at most one
/// fault per request, chosen from a hash of --random-seed and the request counter.
#[derive(Debug, Clone, clap::Args)]
pub struct FaultArgs {
    /// Percent of requests answered with HTTP 500 and an error body.
    #[arg(long, default_value_t = 0.0, help_heading = "Fault injection")]
    pub error_rate: f64,
    /// Percent of requests answered with HTTP 429.
    #[arg(long, default_value_t = 0.0, help_heading = "Fault injection")]
    pub rate_limit_rate: f64,
    /// Percent of responses whose connection is closed mid-stream.
    #[arg(long, default_value_t = 0.0, help_heading = "Fault injection")]
    pub reset_rate: f64,
    /// Percent of streams that end without `data: [DONE]` (non-streamed: half a body).
    #[arg(long, default_value_t = 0.0, help_heading = "Fault injection")]
    pub truncate_rate: f64,
    /// Percent of responses with one chunk of invalid JSON.
    #[arg(long, default_value_t = 0.0, help_heading = "Fault injection")]
    pub malformed_rate: f64,
    /// Percent of streams with an `event: error` / `{"error": ...}` chunk.
    #[arg(long, default_value_t = 0.0, help_heading = "Fault injection")]
    pub error_event_rate: f64,
    /// Percent of responses that send no bytes for --stall-ms midway.
    #[arg(long, default_value_t = 0.0, help_heading = "Fault injection")]
    pub stall_rate: f64,
    /// How long a stalled response stays silent, in milliseconds.
    #[arg(long, default_value_t = 5000, help_heading = "Fault injection")]
    pub stall_ms: u64,
}

impl Default for FaultArgs {
    fn default() -> Self {
        FaultArgs {
            error_rate: 0.0,
            rate_limit_rate: 0.0,
            reset_rate: 0.0,
            truncate_rate: 0.0,
            malformed_rate: 0.0,
            error_event_rate: 0.0,
            stall_rate: 0.0,
            stall_ms: 5000,
        }
    }
}

/// Percentages (0-100) of requests that get each fault.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FaultRates {
    pub error: f64,
    pub rate_limit: f64,
    pub reset: f64,
    pub truncate: f64,
    pub malformed: f64,
    pub error_event: f64,
    pub stall: f64,
}

impl FaultRates {
    fn in_order(&self) -> [(Fault, f64, &'static str); 7] {
        [
            (Fault::ServerError, self.error, "--error-rate"),
            (Fault::RateLimit, self.rate_limit, "--rate-limit-rate"),
            (Fault::Reset, self.reset, "--reset-rate"),
            (Fault::Truncate, self.truncate, "--truncate-rate"),
            (Fault::Malformed, self.malformed, "--malformed-rate"),
            (Fault::ErrorEvent, self.error_event, "--error-event-rate"),
            (Fault::Stall, self.stall, "--stall-rate"),
        ]
    }

    /// Each rate is within 0-100 and together they are at most 100 (one fault per request).
    pub fn validate(&self) -> anyhow::Result<()> {
        let mut total = 0.0;
        for (_, rate, flag) in self.in_order() {
            anyhow::ensure!(
                rate.is_finite() && (0.0..=100.0).contains(&rate),
                "{flag}: {rate} is not allowed; give a percentage of requests from 0 to 100"
            );
            total += rate;
        }
        anyhow::ensure!(
            total <= 100.0 + 1e-9,
            "the fault rates add up to {total}%; one request gets at most one fault, so their sum must be <= 100"
        );
        Ok(())
    }

    pub fn any(&self) -> bool {
        self.in_order().iter().any(|(_, r, _)| *r > 0.0)
    }

    /// The fault (if any) for accepted request number `n` under `seed`. A uniform draw in
    /// [0, 100) from a hash of (seed, n) falls into one of the back-to-back rate ranges.
    pub fn decide(&self, seed: u64, n: u64) -> Option<Fault> {
        if !self.any() {
            return None;
        }
        let h = splitmix64(splitmix64(seed ^ 0xFA17_5EED_0000_0000).wrapping_add(n));
        // 53 random bits -> [0, 1) exactly representable, then percent.
        let u = (h >> 11) as f64 / (1u64 << 53) as f64 * 100.0;
        let mut upper = 0.0;
        for (fault, rate, _) in self.in_order() {
            upper += rate;
            if u < upper {
                return Some(fault);
            }
        }
        None
    }
}

/// The `{"error": ...}` payload sent inside a stream (and as a 200 body when not streamed).
pub const ERROR_EVENT_JSON: &str = r#"{"error":{"message":"mock server: injected error event","type":"InternalServerError","param":null,"code":500}}"#;
/// The invalid JSON chunk sent by `--malformed-rate`.
pub const MALFORMED_CHUNK: &[u8] = b"data: {\"id\":\"broken\",\"choices\":[{\"delta\":\n\n";

/// The frame without the stream's closing event, when it ends with one: `[DONE]`, the
/// Messages API's `message_stop` or the Responses API's `response.completed`.
fn without_final_event(data: &[u8]) -> Option<&[u8]> {
    data.strip_suffix(DONE_EVENT)
        .or_else(|| data.strip_suffix(super::messages::STOP_EVENT))
        .or_else(|| {
            let at = memchr::memmem::rfind(data, super::responses::COMPLETED_EVENT)?;
            (at == 0 || data[..at].ends_with(b"\n\n")).then(|| &data[..at])
        })
}

/// Wraps a response body and applies a body-level fault at data frame `strike` (0-based).
pub struct FaultyBody {
    inner: ScheduledBody,
    fault: Fault,
    streamed: bool,
    strike: u64,
    frames: u64,
    stall: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
    /// Frames to send before asking `inner` again (the fault's own frames).
    queued: Vec<Bytes>,
    /// Set once the body must end after `queued` is drained.
    ending: bool,
    /// The stall (or the pause before a reset) has started.
    stalled: bool,
}

impl FaultyBody {
    pub fn new(
        inner: ScheduledBody,
        fault: Fault,
        streamed: bool,
        strike: u64,
        stall: Duration,
    ) -> Self {
        FaultyBody {
            inner,
            fault,
            streamed,
            strike,
            frames: 0,
            stall,
            sleep: None,
            queued: Vec::new(),
            ending: false,
            stalled: false,
        }
    }
}

/// The error hyper gets from a body: it aborts the connection without ending the body.
fn reset_error() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "mock server: injected connection reset",
    )
}

impl Body for FaultyBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        if !this.queued.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(this.queued.remove(0)))));
        }
        if this.ending {
            return Poll::Ready(None);
        }
        let at_strike = this.frames == this.strike;
        if at_strike && this.fault == Fault::Stall && !this.stalled {
            let stall = this.stall;
            let sleep = this
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.stalled = true;
        }
        if at_strike && this.fault == Fault::Reset {
            // Yield once first, so hyper flushes the frames already written: the client
            // must see the tokens that went out before the connection dropped.
            if !this.stalled {
                this.stalled = true;
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(Duration::from_millis(5))));
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
            let sleep = this.sleep.as_mut().expect("armed above");
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            return Poll::Ready(Some(Err(reset_error())));
        }
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Ready(Some(Err(never))) => match never {},
            Poll::Ready(Some(Ok(frame))) => frame,
        };
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(other) => return Poll::Ready(Some(Ok(other))),
        };
        this.frames += 1;
        let out = match (this.fault, this.streamed) {
            (Fault::Truncate, true) => match without_final_event(&data) {
                Some(rest) => {
                    this.ending = true;
                    data.slice(..rest.len())
                }
                None => data,
            },
            (Fault::Truncate, false) => data.slice(..data.len() / 2),
            (Fault::Malformed, true) if at_strike => {
                this.queued.push(data);
                Bytes::from_static(MALFORMED_CHUNK)
            }
            (Fault::Malformed, false) => Bytes::from_static(b"{\"id\": \"broken\", \"choices\": ["),
            (Fault::ErrorEvent, true) if at_strike => {
                this.ending = true;
                this.queued.push(Bytes::from_static(DONE_EVENT));
                Bytes::from(format!("event: error\ndata: {ERROR_EVENT_JSON}\n\n"))
            }
            (Fault::ErrorEvent, false) => Bytes::from_static(ERROR_EVENT_JSON.as_bytes()),
            _ => data,
        };
        Poll::Ready(Some(Ok(Frame::data(out))))
    }

    fn size_hint(&self) -> SizeHint {
        // The fault may change the length: always chunked.
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(f: impl FnOnce(&mut FaultRates)) -> FaultRates {
        let mut r = FaultRates::default();
        f(&mut r);
        r
    }

    #[test]
    fn no_rates_no_faults_and_full_rate_always() {
        let none = FaultRates::default();
        assert!((0..1000).all(|n| none.decide(1, n).is_none()));
        let all = rates(|r| r.reset = 100.0);
        assert!((0..1000).all(|n| all.decide(1, n) == Some(Fault::Reset)));
    }

    #[test]
    fn shares_follow_the_rates_and_the_seed() {
        let r = rates(|r| {
            r.error = 20.0;
            r.stall = 30.0;
        });
        let count = |seed, f| {
            (0..10_000)
                .filter(|&n| r.decide(seed, n) == Some(f))
                .count()
        };
        let errors = count(7, Fault::ServerError);
        let stalls = count(7, Fault::Stall);
        assert!((1_800..2_200).contains(&errors), "{errors}");
        assert!((2_800..3_200).contains(&stalls), "{stalls}");
        let a: Vec<_> = (0..100).map(|n| r.decide(7, n)).collect();
        let b: Vec<_> = (0..100).map(|n| r.decide(7, n)).collect();
        let c: Vec<_> = (0..100).map(|n| r.decide(8, n)).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn validation_names_the_flag() {
        let e = rates(|r| r.truncate = 120.0).validate().unwrap_err();
        assert!(e.to_string().starts_with("--truncate-rate: 120"), "{e}");
        let e = rates(|r| {
            r.error = 60.0;
            r.reset = 50.0
        })
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("110"), "{e}");
        assert!(rates(|r| r.error = 100.0).validate().is_ok());
    }
}
