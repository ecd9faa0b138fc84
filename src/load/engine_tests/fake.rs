//! A fake HTTP side for the engine's tests. It logs every send (when, which conversation and
//! turn, on which session), answers as its script says (a reply after a delay, an error, or
//! nothing until cancelled), and counts how many requests were in flight, and how many were
//! still without their first token, at once. It reads and waits on tokio's clock, which the
//! tests pause: time only moves when every task waits, straight to the next deadline.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, watch};

use crate::clock::Clock;
use crate::load::exchange::Exchange;
use crate::record::{ErrorDetails, Phase, RequestInput, RequestRecord, SendTiming};
use crate::transport::CANCELLED_CODE;

/// How the fake answers one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Answer {
    /// The first token after `first_token`, the end of the reply after `end` (both from
    /// the send). The reply's text is `r<n>` for the fake's n-th request.
    Reply {
        first_token: Duration,
        end: Duration,
    },
    /// An HTTP 500 after this long, before any token.
    Fail(Duration),
    /// No answer at all, until the request is cancelled or abandoned.
    Never,
}

/// Every request answered after `d`, its first token with its end.
pub fn reply_after(d: Duration) -> impl Fn(&Call) -> Answer + Send + Sync + 'static {
    move |_| Answer::Reply {
        first_token: d,
        end: d,
    }
}

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Call {
    /// Order of arrival at the fake, from 0.
    pub n: usize,
    /// When it was sent, from the test's time zero.
    pub at: Duration,
    pub request_id: String,
    pub conversation_id: String,
    pub correlation_id: String,
    /// The conversation number (multi-turn) or send number (single requests).
    pub session_num: u64,
    pub turn: u32,
    pub body: Bytes,
    /// The sticky session it came on (numbered from 0 in opening order); `None`: the
    /// shared client.
    pub session: Option<u64>,
    pub timing: SendTiming,
}

/// How a request ended at the fake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    Replied,
    Failed,
    /// Ended by `cancel_in_flight`.
    Cancelled,
    /// Abandoned by the engine: its exchange was dropped unfinished (`--request-cancellation`).
    Dropped,
}

/// The end of request `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    pub n: usize,
    pub at: Duration,
    pub how: How,
}

type Script = Box<dyn Fn(&Call) -> Answer + Send + Sync>;

/// What the fake saw over a run.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub calls: Vec<Call>,
    pub ends: Vec<End>,
    pub in_flight: usize,
    pub max_in_flight: usize,
    /// Requests sent and still without a first token (holding a prefill slot).
    pub before_first_token: usize,
    pub max_before_first_token: usize,
    pub sessions_opened: u64,
    /// Sticky sessions ended: (session, when).
    pub sessions_ended: Vec<(u64, Duration)>,
    /// When `cancel_in_flight` was called.
    pub cancels: Vec<Duration>,
}

struct Shared {
    t0: Instant,
    sticky: bool,
    script: Script,
    seen: Mutex<Seen>,
    /// The cancel generation, as in the HTTP client: `cancel_in_flight` bumps it.
    cancel: watch::Sender<u64>,
}

impl Shared {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn since_t0(&self) -> Duration {
        tokio::time::Instant::now().into_std() - self.t0
    }
}

/// The fake. Clones share one log; a sticky session's is a clone that knows its session.
#[derive(Clone)]
pub struct Fake {
    shared: Arc<Shared>,
    session: Option<u64>,
}

impl Fake {
    /// A fake whose time zero is now on tokio's clock, answering as `script` says.
    pub fn new(script: impl Fn(&Call) -> Answer + Send + Sync + 'static) -> Self {
        Fake {
            shared: Arc::new(Shared {
                t0: tokio::time::Instant::now().into_std(),
                sticky: false,
                script: Box::new(script),
                seen: Mutex::default(),
                cancel: watch::channel(0).0,
            }),
            session: None,
        }
    }

    /// With sticky sessions: `for_session` gives each conversation a session of its own.
    pub fn sticky(self) -> Self {
        let shared = Arc::into_inner(self.shared).expect("not shared yet");
        Fake {
            shared: Arc::new(Shared {
                sticky: true,
                ..shared
            }),
            session: None,
        }
    }

    pub fn t0(&self) -> Instant {
        self.shared.t0
    }

    /// A copy of the log so far.
    pub fn seen(&self) -> Seen {
        self.shared.seen().clone()
    }
}

/// Keeps the fake's counts right however a request ends, also when the engine drops it.
struct InFlight<'a> {
    shared: &'a Shared,
    n: usize,
    how: How,
    token: bool,
}

impl InFlight<'_> {
    fn first_token(&mut self) {
        if !self.token {
            self.token = true;
            self.shared.seen().before_first_token -= 1;
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let at = self.shared.since_t0();
        let mut seen = self.shared.seen();
        seen.in_flight -= 1;
        if !self.token {
            seen.before_first_token -= 1;
        }
        seen.ends.push(End {
            n: self.n,
            at,
            how: self.how,
        });
    }
}

impl Exchange for Fake {
    fn exchange_gated(
        &self,
        clock: &Clock,
        phase: Phase,
        input: RequestInput,
        request_id: String,
        body: Bytes,
        until_first_token: Option<OwnedSemaphorePermit>,
    ) -> impl Future<Output = RequestRecord> + Send {
        let shared = self.shared.clone();
        let session = self.session;
        let clock = *clock;
        async move {
            let mut until_first_token = until_first_token;
            let sent = tokio::time::Instant::now().into_std();
            let mut cancel = shared.cancel.subscribe();
            let generation = *cancel.borrow_and_update();
            let (n, answer) = {
                let mut seen = shared.seen();
                let call = Call {
                    n: seen.calls.len(),
                    at: sent - shared.t0,
                    request_id: request_id.clone(),
                    conversation_id: input.conversation_id.clone(),
                    correlation_id: input.correlation_id.clone(),
                    session_num: input.session_num,
                    turn: input.turn_index,
                    body,
                    session,
                    timing: input.timing,
                };
                let answer = (shared.script)(&call);
                seen.calls.push(call);
                seen.in_flight += 1;
                seen.max_in_flight = seen.max_in_flight.max(seen.in_flight);
                seen.before_first_token += 1;
                seen.max_before_first_token =
                    seen.max_before_first_token.max(seen.before_first_token);
                (seen.calls.len() - 1, answer)
            };
            let mut guard = InFlight {
                shared: &shared,
                n,
                how: How::Dropped,
                token: false,
            };
            let mut record = RequestRecord::new(phase, input, request_id);
            record.start_perf_ns = clock.ns_of(sent);
            let outcome = {
                let answered = async {
                    match answer {
                        Answer::Reply { first_token, end } => {
                            tokio::time::sleep(first_token).await;
                            guard.first_token();
                            until_first_token.take();
                            tokio::time::sleep(end.saturating_sub(first_token)).await;
                            How::Replied
                        }
                        Answer::Fail(after) => {
                            tokio::time::sleep(after).await;
                            How::Failed
                        }
                        Answer::Never => std::future::pending().await,
                    }
                };
                tokio::select! {
                    how = answered => how,
                    _ = cancel.wait_for(|g| *g != generation) => How::Cancelled,
                }
            };
            drop(until_first_token);
            guard.how = outcome;
            let end = tokio::time::Instant::now().into_std();
            record.end_perf_ns = clock.ns_of(end);
            record.start_wall_ns = clock.wall_ns(record.start_perf_ns);
            record.end_wall_ns = clock.wall_ns(record.end_perf_ns);
            match outcome {
                How::Replied => {
                    record.status = Some(200);
                    record.output_text = format!("r{n}");
                }
                How::Failed => {
                    record.status = Some(500);
                    record.error = Some(ErrorDetails {
                        code: Some(500),
                        kind: "ServerError".into(),
                        message: "scripted failure".into(),
                    });
                }
                How::Cancelled | How::Dropped => {
                    record.was_cancelled = true;
                    record.cancellation_perf_ns = Some(record.end_perf_ns);
                    record.error = Some(ErrorDetails {
                        code: Some(CANCELLED_CODE),
                        kind: "RequestCancellationError".into(),
                        message: "cancelled in flight".into(),
                    });
                }
            }
            drop(guard);
            record
        }
    }

    fn for_session(&self) -> Option<Self> {
        if !self.shared.sticky {
            return None;
        }
        let mut seen = self.shared.seen();
        let session = seen.sessions_opened;
        seen.sessions_opened += 1;
        Some(Fake {
            shared: self.shared.clone(),
            session: Some(session),
        })
    }

    fn end_session(&self) {
        let session = self.session.expect("only a session's own client is ended");
        let at = self.shared.since_t0();
        self.shared.seen().sessions_ended.push((session, at));
    }

    fn cancel_in_flight(&self) {
        let at = self.shared.since_t0();
        self.shared.seen().cancels.push(at);
        self.shared.cancel.send_modify(|g| *g += 1);
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send {
        tokio::time::sleep_until(deadline.into())
    }
}
