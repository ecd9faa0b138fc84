//! Running one phase (warmup or profiling): closed loop, open loop at a rate, or a fixed
//! schedule; stopped by a request count and/or a duration; with optional per-request
//! cancellation.
//!
//! Open-loop send times are absolute (phase start + offset), drawn before the phase starts,
//! and waited for on the exchange's clock (the precise timer, `crate::timer`, for HTTP), so
//! one late send never shifts the next one. Every read of the clock and every wait goes
//! through the [`Exchange`], which lets the unit tests (`super::engine_tests`) drive a phase
//! on tokio's paused clock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::cache_bust::Mark;
use super::exchange::Exchange;
use super::pacing::{PacingReport, SendSample, SendSamples};
use super::ramp::{self, Ramps};
use super::schedule::{ArrivalPattern, Arrivals};
use super::shard::Shard;
use super::{LoadContext, UserCentric};
use crate::endpoint::TurnScript;
use crate::hash::splitmix64;
use crate::record::{ErrorDetails, Phase, RequestInput, RequestRecord, SendTiming};
use crate::transport::CANCELLED_CODE;

/// How the sends of a phase are timed.
#[derive(Debug, Clone)]
pub enum Pacing {
    /// A new request as soon as one of `concurrency` slots frees.
    ClosedLoop,
    /// Arrivals at `rate` per second with the given gaps, regardless of replies.
    Rate { rate: f64, pattern: ArrivalPattern },
    /// Arrivals at given offsets (ns from the phase start), one per conversation in plan
    /// order: a replayed trace.
    Fixed { offsets_ns: Arc<[u64]> },
    /// `--user-centric-rate`: users whose turns keep a fixed gap (see `run_users`).
    Users(UserCentric),
}

/// `--request-cancellation-rate` / `--request-cancellation-delay`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cancellation {
    /// Share of requests to cancel, 0 to 1.
    pub share: f64,
    /// How long after its send a chosen request is cancelled.
    pub delay: Duration,
}

/// Everything one phase needs to know.
#[derive(Debug, Clone)]
pub struct PhaseSpec {
    pub phase: Phase,
    /// Send number of the phase's first request (warmup sends come first).
    pub first_send: u64,
    /// Most requests to send; `None` when only the duration or `sessions` limit the phase.
    pub count: Option<u64>,
    /// Most conversations to start (every turn of each is sent); `None`: no such limit.
    pub sessions: Option<u64>,
    /// Stop issuing this long after the phase starts.
    pub duration: Option<Duration>,
    /// After the duration: how long in-flight requests may still finish before they are
    /// cancelled. `None` waits for all of them.
    pub grace: Option<Duration>,
    /// Cap on requests in flight. Required for the closed loop; optional with a rate or a
    /// fixed schedule (then a ceiling, and the wait for a slot is recorded).
    pub concurrency: Option<u64>,
    pub pacing: Pacing,
    pub cancellation: Option<Cancellation>,
    /// Seed for the arrival gaps and the cancellation draws.
    pub seed: u64,
    /// Concurrency and rate ramps.
    pub ramps: Ramps,
    /// `--prefill-concurrency`: most requests sent but still without their first token.
    pub prefill_concurrency: Option<u64>,
    /// This load generator's part of a plan shared by several (`None`: all of it). Counts
    /// and sessions above are the whole plan's; `concurrency` is already this shard's.
    pub shard: Option<Shard>,
    /// Start at this instant (a `--start-at` shared by the shards) instead of at once; a
    /// schedule's offsets count from it.
    pub start: Option<Instant>,
}

/// What a phase did.
#[derive(Debug, Clone)]
pub struct PhaseResult {
    pub sent: u64,
    /// Pacing figures when sends had a schedule (open loop, fixed schedule, turn delays).
    pub pacing: Option<PacingReport>,
}

/// State shared by the tasks of one phase.
struct PhaseRun<E> {
    ctx: Arc<LoadContext<E>>,
    spec: PhaseSpec,
    records: UnboundedSender<RequestRecord>,
    /// Sends claimed so far in this phase.
    claimed: AtomicU64,
    /// Conversations started (or refused at the limit) so far in this phase.
    sessions_started: AtomicU64,
    /// Set when the grace period is over: sends still waiting (for a slot or a think
    /// time) are dropped instead of starting after the phase's end.
    cut: AtomicBool,
    /// Sends claimed but dropped by `cut`, never sent.
    dropped: AtomicU64,
    /// No request is issued at or after this instant (duration mode).
    issue_until: Option<Instant>,
    /// Concurrency cap of the open loop (the closed loop's workers are its slots).
    slots: Option<Arc<Semaphore>>,
    /// Prefill slots: a request holds one from its send to its first token.
    prefill: Option<Arc<Semaphore>>,
    samples: Mutex<SendSamples>,
}

/// Runs one phase to its end: every request issued has finished (or been cancelled).
pub async fn run_phase<E: Exchange>(
    ctx: Arc<LoadContext<E>>,
    spec: PhaseSpec,
    records: UnboundedSender<RequestRecord>,
) -> PhaseResult {
    if let Some(at) = spec.start {
        ctx.client.sleep_until(at).await;
    }
    let started = spec.start.unwrap_or_else(|| ctx.client.now());
    let issue_until = spec.duration.map(|d| started + d);
    let open_loop = !matches!(spec.pacing, Pacing::ClosedLoop);
    let slots = match (open_loop, spec.concurrency) {
        // With a ramp the cap starts at 1; `ramped_slots` adds the others on time.
        (true, Some(n)) => Some(ramped_slots(&ctx, n, spec.ramps.concurrency, started)),
        _ => None,
    };
    let target_rate = match &spec.pacing {
        // A rate series has no one target.
        Pacing::Rate { rate, .. } if spec.ramps.series.is_none() => Some(*rate),
        Pacing::Users(users) => Some(users.qps),
        _ => None,
    }
    // A shard's target is its part of the rate.
    .map(|r| r / spec.shard.map_or(1.0, |s| s.count as f64));
    let prefill = spec
        .prefill_concurrency
        .map(|n| ramped_slots(&ctx, n, spec.ramps.prefill, started));
    let run = Arc::new(PhaseRun {
        ctx: ctx.clone(),
        spec,
        records,
        claimed: AtomicU64::new(0),
        sessions_started: AtomicU64::new(0),
        cut: AtomicBool::new(false),
        dropped: AtomicU64::new(0),
        issue_until,
        slots,
        prefill,
        samples: Mutex::new(SendSamples::default()),
    });

    // After the duration, in-flight requests get the grace period, then are cancelled.
    let grace_watch = match (issue_until, run.spec.grace) {
        (Some(end), Some(grace)) => {
            let ctx = ctx.clone();
            let run = run.clone();
            Some(tokio::spawn(async move {
                ctx.client.sleep_until(end + grace).await;
                run.cut.store(true, Ordering::SeqCst);
                let left = ctx.in_flight.load(Ordering::SeqCst);
                if left > 0 {
                    tracing::info!(
                        "Grace period of {:.1} s after the benchmark duration is over: cancelling {left} requests in flight",
                        grace.as_secs_f64()
                    );
                    ctx.client.cancel_in_flight();
                }
            }))
        }
        _ => None,
    };

    // A schedule is walked on the first sender thread, where the requests it starts mostly
    // run too (`Spawner::spawn_least_busy`): a send then wakes no other thread.
    if let Pacing::Users(users) = run.spec.pacing {
        joined(ctx.spawner.spawn(0, run_users(run.clone(), users))).await;
    } else if open_loop {
        joined(ctx.spawner.spawn(0, run_open_loop(run.clone()))).await;
    } else {
        run_closed_loop(run.clone()).await;
    }
    if let Some(w) = grace_watch {
        w.abort();
    }

    let claimed = run.claimed.load(Ordering::SeqCst);
    let sent =
        run.local_limit().map_or(claimed, |c| claimed.min(c)) - run.dropped.load(Ordering::SeqCst);
    let samples = run.samples.lock().unwrap_or_else(|e| e.into_inner());
    PhaseResult {
        sent,
        pacing: samples.report(target_rate),
    }
}

impl<E: Exchange> PhaseRun<E> {
    /// Now, on the exchange's clock.
    fn now(&self) -> Instant {
        self.ctx.client.now()
    }

    /// Takes the next send number of the phase, unless the phase is over.
    fn claim(&self) -> Option<u64> {
        if self.ctx.stop.load(Ordering::Relaxed) {
            return None;
        }
        if self.issue_until.is_some_and(|end| self.now() >= end) {
            return None;
        }
        let i = self.claimed.fetch_add(1, Ordering::SeqCst);
        if self.local_limit().is_some_and(|c| i >= c) {
            return None;
        }
        Some(self.spec.first_send + self.global(i))
    }

    /// Most sends this load generator makes in the phase: the count, or a shard's exact
    /// part of it. A replayed trace's shard sends whatever its sessions hold.
    fn local_limit(&self) -> Option<u64> {
        match self.spec.shard {
            None => self.spec.count,
            Some(_) if matches!(self.spec.pacing, Pacing::Fixed { .. }) => None,
            Some(shard) => self.spec.count.map(|c| shard.share_of(c)),
        }
    }

    /// The plan-wide index of this shard's `local`-th send (the same without shards); for
    /// every N-th send, the very send of the single run.
    fn global(&self, local: u64) -> u64 {
        self.spec.shard.map_or(local, |s| s.global(local))
    }

    /// A shard takes whole conversations (by session id) rather than every N-th send:
    /// multi-turn conversations and replayed traces.
    fn split_by_session(&self) -> bool {
        matches!(self.spec.pacing, Pacing::Fixed { .. }) || self.ctx.plan.is_multi_turn()
    }

    /// Whether the plan's conversation number `session` is this shard's.
    fn owns_session(&self, shard: Shard, session: u64) -> bool {
        let plan = &self.ctx.plan;
        match self.spec.pacing {
            // A trace's own session ids, the same whatever the seed.
            Pacing::Fixed { .. } => {
                shard.owns_session(&plan.conversation_ids[plan.entry_of_session(session)])
            }
            _ => shard.owns_session(&plan.correlation_id(session)),
        }
    }

    /// Whether arrival `k` of the phase's schedule is this shard's.
    fn owns_arrival(&self, k: u64) -> bool {
        match self.spec.shard {
            None => true,
            Some(shard) if self.split_by_session() => {
                self.owns_session(shard, self.spec.first_send + k)
            }
            Some(shard) => shard.owns_index(k),
        }
    }

    /// A sharded conversation: its plan-wide number (`arrival` for a schedule, else the
    /// next one this shard owns) and its first send number.
    fn start_sharded(&self, shard: Shard, arrival: Option<u64>) -> Option<(u64, u64)> {
        let base = self.spec.first_send;
        let past_limit = |g: u64| self.spec.sessions.is_some_and(|max| g >= max);
        if !self.split_by_session() {
            let send = self.claim()?;
            let g = send - base;
            return (!past_limit(g)).then_some((base + g, send));
        }
        let g = match arrival {
            Some(k) => k,
            None => loop {
                let g = self.sessions_started.fetch_add(1, Ordering::SeqCst);
                if past_limit(g) || self.is_over() {
                    return None;
                }
                if self.owns_session(shard, base + g) {
                    break g;
                }
            },
        };
        if past_limit(g) {
            return None;
        }
        let send = self.claim()?;
        // A single-turn entry is picked by its send number: the conversation's own.
        let send = match self.ctx.plan.is_multi_turn() {
            true => send,
            false => base + g,
        };
        Some((base + g, send))
    }

    /// True when no more request can be issued (stopped, past the duration, count reached).
    fn is_over(&self) -> bool {
        self.ctx.stop.load(Ordering::Relaxed)
            || self.issue_until.is_some_and(|end| self.now() >= end)
            || self
                .local_limit()
                .is_some_and(|c| self.claimed.load(Ordering::SeqCst) >= c)
    }

    /// Starts a conversation: its session number and its first send number, unless the
    /// phase is over or has started all of its sessions.
    fn start_conversation(&self, arrival: Option<u64>) -> Option<(u64, u64)> {
        if let Some(shard) = self.spec.shard {
            return self.start_sharded(shard, arrival);
        }
        if let Some(max) = self.spec.sessions
            && self.sessions_started.fetch_add(1, Ordering::SeqCst) >= max
        {
            return None;
        }
        let send = self.claim()?;
        Some((self.ctx.plan.next_session(), send))
    }

    /// How long after its send request number `send` is cancelled, if it is one of the
    /// cancelled share (see `is_cancelled`).
    fn cancel_after(&self, send: u64) -> Option<Duration> {
        let c = self.spec.cancellation?;
        is_cancelled(self.spec.seed, c.share, send).then_some(c.delay)
    }

    /// Sends one request and hands its record to the collector. Returns the record's
    /// error state and reply text (for the next turn), or `None` when the collector is gone.
    /// For a later turn, `history` is its script, turn number and the replies so far: the
    /// texts it sent are joined onto the record after the exchange, not before the send.
    async fn send(
        &self,
        client: &E,
        send: u64,
        input: RequestInput,
        body: Bytes,
        permit: Option<OwnedSemaphorePermit>,
        history: Option<(&TurnScript, usize, &[String], Option<&Mark<'_>>)>,
    ) -> Option<(bool, String)> {
        let ctx = &self.ctx;
        let mut input = input;
        let prefill = match &self.prefill {
            None => None,
            Some(gate) => {
                let waited = self.now();
                let p = gate.clone().acquire_owned().await;
                input.timing.slot_wait_ns += (self.now() - waited).as_nanos() as u64;
                p.ok()
            }
        };
        if self.cut.load(Ordering::SeqCst) {
            // Claimed before the end but still waiting when the grace period ran out.
            self.dropped.fetch_add(1, Ordering::SeqCst);
            return Some((true, String::new()));
        }
        let request_id = ctx.plan.request_id(send);
        let scheduled = input.timing;
        ctx.in_flight.fetch_add(1, Ordering::SeqCst);
        let mut record = match self.cancel_after(send) {
            None => {
                let phase = self.spec.phase;
                client
                    .exchange_gated(&ctx.clock, phase, input, request_id, body, prefill)
                    .await
            }
            Some(delay) => {
                let exchange = (client, request_id, body, prefill);
                cancellable_exchange(ctx, self.spec.phase, input, exchange, delay).await
            }
        };
        ctx.in_flight.fetch_sub(1, Ordering::SeqCst);
        drop(permit);
        if let Some(at) = scheduled.scheduled_perf_ns {
            self.samples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .add(&SendSample {
                    scheduled_ns: at,
                    actual_ns: record.start_perf_ns,
                    slot_wait_ns: scheduled.slot_wait_ns,
                });
        }
        let failed = record.error.is_some();
        let reply = if ctx.plan.is_multi_turn() {
            record.output_text.clone()
        } else {
            String::new()
        };
        if let Some((script, turn, replies, mark)) = history {
            let text = script.history_text(turn, replies);
            record.input.history_text = Some(match mark {
                Some(m) => m.history_text(text),
                None => text,
            });
        }
        self.records.send(record).ok()?;
        Some((failed, reply))
    }

    /// Waits for a concurrency slot (open loop with a cap). `scheduled` is when the send
    /// was due; `behind` is true when earlier sends already had to wait past it.
    async fn slot(&self, scheduled: Instant, behind: bool) -> (Option<OwnedSemaphorePermit>, u64) {
        let Some(slots) = &self.slots else {
            return (None, 0);
        };
        if let Ok(p) = slots.clone().try_acquire_owned() {
            let wait = if behind {
                self.now().saturating_duration_since(scheduled)
            } else {
                Duration::ZERO
            };
            return (Some(p), wait.as_nanos() as u64);
        }
        let p = slots
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let wait = self.now().saturating_duration_since(scheduled);
        (Some(p), wait.as_nanos() as u64)
    }

    /// One conversation (or single request) whose first turn is send `first`, already
    /// timed. Later turns follow their previous reply after the turn's delay, or, for a
    /// user (`user_gap`: the gap and the first turn's due time), one gap after the previous
    /// turn was due and never before its reply.
    async fn conversation(
        self: Arc<Self>,
        session: u64,
        first: u64,
        first_timing: SendTiming,
        first_permit: Option<OwnedSemaphorePermit>,
        user_gap: Option<(Duration, Instant)>,
    ) -> Ended {
        let started = self.now();
        let mut last_due = user_gap.map_or_else(|| started, |(_, due)| due);
        let ended = |go_on| Ended { go_on, last_due };
        let ctx = self.ctx.clone();
        let plan = &ctx.plan;
        let entry = if plan.is_multi_turn() {
            plan.entry_of_session(session)
        } else {
            plan.entry_of_send(first)
        };
        let script = &plan.scripts[entry];
        let first_req = &plan.requests[entry];
        // `--cache-bust`: this conversation's marker, written into each of its bodies.
        let mark = plan
            .cache_bust
            .as_ref()
            .map(|c| c.start(entry, self.spec.phase));
        let (first_body, first_tokens) = match &mark {
            Some(m) => m.first(first_req),
            None => (first_req.body.clone(), first_req.input_tokens),
        };
        // Sticky sessions: every turn on the conversation's own connection.
        let own_client = SessionClient(ctx.client.for_session());
        let client = own_client.0.as_ref().unwrap_or(&ctx.client);
        let correlation_id = plan.correlation_id(session);
        let tag = mark.as_ref().map(|m| m.tag());
        let input = RequestInput {
            session_num: if plan.is_multi_turn() { session } else { first },
            conversation_id: plan.conversation_ids[entry].clone(),
            correlation_id: correlation_id.clone(),
            turn_index: 0,
            input_tokens: Some(first_tokens),
            history_text: None,
            num_images: first_req.num_images,
            requested_output_tokens: first_req.max_output_tokens,
            audio_seconds: first_req.audio_seconds,
            timing: first_timing,
            cache_bust: tag.clone(),
        };
        let Some((failed, reply)) = self
            .send(client, first, input, first_body, first_permit, None)
            .await
        else {
            return ended(false);
        };
        if failed {
            return ended(true);
        }
        let mut replies = vec![reply];
        for turn in 1..script.num_turns() {
            let t = &script.turns[turn];
            let due = match user_gap {
                // A reply later than the gap: the turn goes at once and the user's
                // schedule restarts from there (no catching up in a burst).
                Some((gap, _)) => (last_due + gap).max(self.now()),
                None => match (t.after_first, &self.spec.pacing) {
                    // A trace turn replayed at its own time, never before the previous reply.
                    (Some(after), Pacing::Fixed { .. }) => (started + after).max(self.now()),
                    // The think time counts from the reply; its end is this turn's scheduled
                    // time.
                    _ => self.now() + t.delay.unwrap_or_default(),
                },
            };
            if user_gap.is_some() && self.issue_until.is_some_and(|end| due >= end) {
                return Ended {
                    go_on: true,
                    last_due,
                };
            }
            ctx.client.sleep_until(due).await;
            // From the actual send (a late timer must not shorten the next gap).
            last_due = self.now().max(due);
            let Some(send) = self.claim() else {
                return Ended {
                    go_on: true,
                    last_due,
                };
            };
            let (permit, slot_wait_ns) = self.slot(due, false).await;
            let input = RequestInput {
                session_num: session,
                conversation_id: plan.conversation_ids[entry].clone(),
                correlation_id: correlation_id.clone(),
                turn_index: turn as u32,
                // The history holds replies: its tokens are counted in the collector,
                // from the texts `send` joins onto the record after the exchange.
                input_tokens: None,
                history_text: None,
                num_images: t.num_images,
                requested_output_tokens: t.max_output_tokens,
                audio_seconds: t.audio_seconds,
                timing: SendTiming {
                    scheduled_perf_ns: Some(ctx.clock.ns_of(due)),
                    slot_wait_ns,
                },
                cache_bust: tag.clone(),
            };
            let mut body = script.turn_body(turn, &replies);
            if let Some(m) = &mark {
                body = m.turn(body);
            }
            let history = Some((script, turn, replies.as_slice(), mark.as_ref()));
            let sent = self.send(client, send, input, body, permit, history).await;
            let Some((failed, reply)) = sent else {
                return Ended {
                    go_on: false,
                    last_due,
                };
            };
            if failed {
                return Ended {
                    go_on: true,
                    last_due,
                };
            }
            replies.push(reply);
        }
        Ended {
            go_on: true,
            last_due,
        }
    }
}

/// How a conversation ended.
struct Ended {
    /// False when the collector is gone: the run is being torn down.
    go_on: bool,
    /// When its last turn was due (for a user: sent).
    last_due: Instant,
}

/// A sticky session's own client, ended (its waiting connects failed) however the
/// conversation ends.
struct SessionClient<E: Exchange>(Option<E>);

impl<E: Exchange> Drop for SessionClient<E> {
    fn drop(&mut self) {
        if let Some(c) = &self.0 {
            c.end_session();
        }
    }
}

/// An exchange that is cut `delay` after its send and recorded as cancelled (code 499,
/// AIPerf's `RequestCancellationError`), unless it finished first.
async fn cancellable_exchange<E: Exchange>(
    ctx: &LoadContext<E>,
    phase: Phase,
    input: RequestInput,
    (client, request_id, body, prefill): (&E, String, Bytes, Option<OwnedSemaphorePermit>),
    delay: Duration,
) -> RequestRecord {
    let kept_input = input.clone();
    let kept_id = request_id.clone();
    let sent_at = ctx.client.now();
    let start_perf_ns = ctx.clock.ns_of(sent_at);
    let exchange = client.exchange_gated(&ctx.clock, phase, input, request_id, body, prefill);
    tokio::select! {
        record = exchange => record,
        _ = ctx.client.sleep_until(sent_at + delay) => {
            // Dropping the exchange closes its connection: the server sees the client go.
            let end_perf_ns = ctx.clock.ns_of(ctx.client.now());
            RequestRecord {
                start_perf_ns,
                end_perf_ns,
                start_wall_ns: ctx.clock.wall_ns(start_perf_ns),
                end_wall_ns: ctx.clock.wall_ns(end_perf_ns),
                error: Some(ErrorDetails {
                    code: Some(CANCELLED_CODE),
                    kind: "RequestCancellationError".into(),
                    message: format!("Request was cancelled after {:.3} seconds", delay.as_secs_f64()),
                }),
                was_cancelled: true,
                cancellation_perf_ns: Some(end_perf_ns),
                ..RequestRecord::new(phase, kept_input, kept_id)
            }
        }
    }
}

/// Waits for a task, passing its panic on.
async fn joined(task: tokio::task::JoinHandle<()>) {
    if let Err(e) = task.await
        && e.is_panic()
    {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Whether send number `send` is one of the cancelled `share` of a run seeded `seed`: a
/// fixed function of the two, so the same run cancels the same requests.
pub(super) fn is_cancelled(seed: u64, share: f64, send: u64) -> bool {
    let x = splitmix64(seed ^ 0xcace_11ed_0000_0000 ^ send);
    let u = (x >> 11) as f64 / (1u64 << 53) as f64;
    u < share
}

/// `n` slots; with a ramp only the first is open at the start, the others open at their
/// ramp times.
fn ramped_slots<E: Exchange>(
    ctx: &Arc<LoadContext<E>>,
    n: u64,
    ramp: Option<Duration>,
    started: Instant,
) -> Arc<Semaphore> {
    match ramp {
        Some(_) => {
            let slots = Arc::new(Semaphore::new(1));
            open_slots(ctx, slots.clone(), n, ramp, started);
            slots
        }
        None => Arc::new(Semaphore::new(n as usize)),
    }
}

/// Adds slots 2..=n at their ramp times (the first is open from the start).
fn open_slots<E: Exchange>(
    ctx: &Arc<LoadContext<E>>,
    slots: Arc<Semaphore>,
    n: u64,
    ramp: Option<Duration>,
    started: Instant,
) {
    let ctx = ctx.clone();
    tokio::spawn(async move {
        for k in 1..n {
            let opens = started + ramp::slot_opens_at(k, n, ramp);
            ctx.client.sleep_until(opens).await;
            slots.add_permits(1);
        }
    });
}

/// `concurrency` workers, each sending its next request (or conversation) as soon as the
/// previous one finished. With a concurrency ramp, worker k starts at its step.
async fn run_closed_loop<E: Exchange>(run: Arc<PhaseRun<E>>) {
    let workers = run
        .spec
        .concurrency
        .unwrap_or(1)
        .min(run.spec.count.unwrap_or(u64::MAX))
        .min(run.spec.sessions.unwrap_or(u64::MAX))
        .max(1);
    let mut tasks = Vec::with_capacity(workers as usize);
    let started = run.now();
    for k in 0..workers {
        let run = run.clone();
        let opens = started + ramp::slot_opens_at(k, workers, run.spec.ramps.concurrency);
        let spawner = run.ctx.spawner.clone();
        tasks.push(spawner.spawn(k as usize, async move {
            // In steps, so that a phase that ends during the ramp is not held up.
            while run.now() < opens && !run.is_over() {
                let step = opens.min(run.now() + Duration::from_millis(50));
                run.ctx.client.sleep_until(step).await;
            }
            while let Some((session, send)) = run.start_conversation(None) {
                let ended = run
                    .clone()
                    .conversation(session, send, SendTiming::default(), None, None)
                    .await;
                if !ended.go_on {
                    break; // collector gone: the run is being torn down
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// One dispatcher walks the schedule: waits for each arrival time, takes a slot if there
/// is a cap, and starts the conversation in its own task.
async fn run_open_loop<E: Exchange>(run: Arc<PhaseRun<E>>) {
    let offsets: Box<dyn Iterator<Item = u64> + Send> = match &run.spec.pacing {
        Pacing::Rate { rate, pattern } => {
            let arrivals = Arrivals::new(*pattern, *rate, run.spec.seed);
            let ramps = run.spec.ramps.clone();
            let rate = *rate;
            Box::new(arrivals.map(move |o| ramps.arrival_offset_ns(o, rate)))
        }
        Pacing::Fixed { offsets_ns } => {
            let offsets_ns = offsets_ns.clone();
            Box::new((0..offsets_ns.len()).map(move |i| offsets_ns[i]))
        }
        Pacing::ClosedLoop | Pacing::Users(_) => unreachable!("these have no schedule"),
    };
    let ctx = run.ctx.clone();
    // A little lead so that the first arrival is met by the timer, not late from setup.
    let t0 = run
        .spec
        .start
        .unwrap_or_else(|| run.now() + Duration::from_millis(1));
    let mut waited_until: Option<Instant> = None;
    let mut tasks = tokio::task::JoinSet::new();
    for (k, offset) in offsets.enumerate() {
        let due = t0 + Duration::from_nanos(offset);
        if run.issue_until.is_some_and(|end| due >= end) {
            break;
        }
        // Another shard's arrival: skipped, unless the plan's limits end here.
        if !run.owns_arrival(k as u64) {
            let k = k as u64;
            let single = !run.split_by_session();
            if run.spec.sessions.is_some_and(|m| k >= m)
                || (single && run.spec.count.is_some_and(|c| k >= c))
                || ctx.stop.load(Ordering::Relaxed)
            {
                break;
            }
            continue;
        }
        // Sleep in bounded steps so that Ctrl-C is noticed during long trace gaps.
        while run.now() < due && !ctx.stop.load(Ordering::Relaxed) {
            let step = run.now() + Duration::from_millis(100);
            ctx.client.sleep_until(due.min(step)).await;
        }
        let Some((session, send)) = run.start_conversation(Some(k as u64)) else {
            break;
        };
        let behind = waited_until.is_some_and(|w| w > due);
        let (permit, slot_wait_ns) = run.slot(due, behind).await;
        if slot_wait_ns > 0 {
            waited_until = Some(run.now());
        }
        let timing = SendTiming {
            scheduled_perf_ns: Some(ctx.clock.ns_of(due)),
            slot_wait_ns,
        };
        ctx.spawner.spawn_least_busy(
            &mut tasks,
            run.clone()
                .conversation(session, send, timing, permit, None),
        );
        // Reap finished tasks as we go so the set stays small in long runs.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
}

/// `--user-centric-rate`: one task per user. User i starts at i/QPS, so the users' turns
/// interleave evenly; a user sends a turn every `turn_gap` (later only when a reply came
/// late). When a user's conversation ends, a new user takes its place one gap after its
/// last turn: in steady state U users at one turn per U/QPS s make QPS requests per second.
async fn run_users<E: Exchange>(run: Arc<PhaseRun<E>>, users: UserCentric) {
    let gap = users.turn_gap();
    let t0 = run.now() + Duration::from_millis(1);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..users.users {
        let run = run.clone();
        let mut due = t0 + Duration::from_secs_f64(i as f64 / users.qps);
        let spawner = run.ctx.spawner.clone();
        spawner.spawn_least_busy(&mut tasks, async move {
            loop {
                if run.issue_until.is_some_and(|end| due >= end) {
                    break;
                }
                // Bounded steps so that Ctrl-C is noticed during long gaps.
                while run.now() < due && !run.ctx.stop.load(Ordering::Relaxed) {
                    let step = run.now() + Duration::from_millis(100);
                    run.ctx.client.sleep_until(due.min(step)).await;
                }
                let Some((session, send)) = run.start_conversation(None) else {
                    break;
                };
                let (permit, slot_wait_ns) = run.slot(due, false).await;
                let timing = SendTiming {
                    scheduled_perf_ns: Some(run.ctx.clock.ns_of(due)),
                    slot_wait_ns,
                };
                // The gaps count from the actual send (a late timer must not shorten them).
                let sent_at = run.now().max(due);
                let ended = run
                    .clone()
                    .conversation(session, send, timing, permit, Some((gap, sent_at)))
                    .await;
                if !ended.go_on {
                    break;
                }
                due = (ended.last_due + gap).max(run.now());
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_spreads_a_counter_evenly() {
        let n = 100_000u64;
        let below = (0..n)
            .filter(|&i| ((splitmix64(i) >> 11) as f64 / (1u64 << 53) as f64) < 0.3)
            .count();
        let share = below as f64 / n as f64;
        assert!((share - 0.3).abs() < 0.01, "{share}");
    }
}
