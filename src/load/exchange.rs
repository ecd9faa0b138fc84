//! The load engine's one seam to the HTTP side: everything a phase asks of it. The engine
//! is generic over [`Exchange`]; the run uses [`HttpClient`], the engine's unit tests a fake
//! that answers on a script.
//!
//! The clock belongs to the exchange too: records are stamped with the exchange's "now",
//! and a send's scheduled time must be comparable with its record's start. The HTTP client
//! reads the monotonic clock and waits with the precise timer; a fake can read and wait on
//! tokio's pausable clock, so a test runs a minute of load in no real time, exactly.

use std::future::Future;
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::OwnedSemaphorePermit;

use crate::clock::Clock;
use crate::record::{Phase, RequestInput, RequestRecord};
use crate::timer;
use crate::transport::HttpClient;

/// What the load engine needs of the HTTP side.
pub trait Exchange: Send + Sync + Sized + 'static {
    /// Sends one prepared request and records what happened, holding `until_first_token`
    /// (a prefill slot) until the first content token arrives or the exchange ends. Never
    /// fails: every problem is an error on the record. Dropping the future abandons the
    /// request (its connection closes).
    fn exchange_gated(
        &self,
        clock: &Clock,
        phase: Phase,
        input: RequestInput,
        request_id: String,
        body: Bytes,
        until_first_token: Option<OwnedSemaphorePermit>,
    ) -> impl Future<Output = RequestRecord> + Send;

    /// With sticky sessions, an exchange of one conversation's own (every turn on one
    /// connection to one server); `None`: the shared one serves every conversation.
    fn for_session(&self) -> Option<Self>;

    /// Ends a session from [`Exchange::for_session`]: whatever still waits for its
    /// connection fails at once.
    fn end_session(&self);

    /// Ends the exchanges in flight now with a cancellation record; later ones run as
    /// usual (the end of a phase's grace period).
    fn cancel_in_flight(&self);

    /// Now, on the clock the records are stamped with.
    fn now(&self) -> Instant {
        Instant::now()
    }

    /// Waits until `deadline` on that clock.
    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send {
        timer::sleep_until(deadline)
    }
}

impl Exchange for HttpClient {
    fn exchange_gated(
        &self,
        clock: &Clock,
        phase: Phase,
        input: RequestInput,
        request_id: String,
        body: Bytes,
        until_first_token: Option<OwnedSemaphorePermit>,
    ) -> impl Future<Output = RequestRecord> + Send {
        HttpClient::exchange_gated(
            self,
            clock,
            phase,
            input,
            request_id,
            body,
            until_first_token,
        )
    }

    fn for_session(&self) -> Option<Self> {
        HttpClient::for_session(self)
    }

    fn end_session(&self) {
        HttpClient::end_session(self);
    }

    fn cancel_in_flight(&self) {
        HttpClient::cancel_in_flight(self);
    }
}
