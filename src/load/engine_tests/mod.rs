//! Unit tests of the load engine (`phase.rs`) against a fake HTTP side ([`fake::Fake`]) on
//! tokio's paused clock. Time moves only when every task waits, and then straight to the
//! next deadline (rounded up to tokio's 1 ms tick), so send times, slot waits and
//! cancellations are asserted to the millisecond and a minute of load takes no real time.
//!
//! Times are from the test's time zero, which is also the run clock's 0: a record's
//! `start_perf_ns` reads as "ms after the phase was started". The open loop and the users
//! start their schedule 1 ms after the phase starts (a lead for the timer).

mod closed_loop;
mod conversations;
mod fake;
mod gates;
mod limits;
mod open_loop;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc::unbounded_channel;

use self::fake::{Fake, Seen};
use super::phase::PhaseResult;
use super::{LoadContext, Pacing, PhaseSpec, Ramps, SendPlan, run_phase};
use crate::clock::Clock;
use crate::dataset::DatasetSampling;
use crate::endpoint::{PreparedConversation, PreparedRequest, PreparedTurn, TurnScript};
use crate::record::{Phase, RequestRecord};

/// The seed of every plan and phase here.
const SEED: u64 = 7;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A duration in whole milliseconds; fails on a fraction (the paused clock moves in ticks).
fn whole_ms(d: Duration) -> u64 {
    assert_eq!(d.subsec_nanos() % 1_000_000, 0, "{d:?} is not whole ms");
    d.as_millis() as u64
}

/// Run-clock ns as whole ms.
fn ns_ms(ns: u64) -> u64 {
    whole_ms(Duration::from_nanos(ns))
}

fn requests(n: usize) -> Vec<PreparedRequest> {
    (0..n)
        .map(|i| PreparedRequest {
            body: Bytes::from(format!("body{i}")),
            input_tokens: 1,
            num_images: 0,
            max_output_tokens: None,
            audio_seconds: None,
        })
        .collect()
}

/// Single requests: `entries` bodies in shuffled cycles, ids for `sends` sends.
fn single_plan(entries: usize, sends: u64) -> SendPlan {
    SendPlan::new(requests(entries), sends, SEED)
}

/// Conversations used in order, one per slice: its turns' think times in ms (the first
/// turn's is not used). Turn k of conversation c says `c<c>t<k>`; ids for `sends` sends.
fn conversation_plan(conversations: &[&[u64]], sends: u64) -> SendPlan {
    let head = Bytes::from_static(br#"{"messages":["#);
    let tail = Bytes::from_static(b"]}");
    let prepared = conversations
        .iter()
        .enumerate()
        .map(|(c, delays)| {
            let turns: Vec<PreparedTurn> = delays
                .iter()
                .enumerate()
                .map(|(k, &delay)| PreparedTurn {
                    message: Bytes::from(format!(r#"{{"role":"user","content":"c{c}t{k}"}}"#)),
                    tail: tail.clone(),
                    input_tokens: 1,
                    text: format!("c{c}t{k}"),
                    num_images: 0,
                    max_output_tokens: None,
                    audio_seconds: None,
                    delay: (k > 0).then(|| ms(delay)),
                    standalone: false,
                    whole_body: false,
                    after_first: None,
                })
                .collect();
            let script = TurnScript {
                head: head.clone(),
                turns,
                lead: String::new(),
            };
            let first = PreparedRequest {
                body: script.turn_body(0, &[]),
                ..requests(1).remove(0)
            };
            PreparedConversation {
                first,
                script,
                timestamp_ms: None,
                session_id: Some(format!("conv{c}")),
            }
        })
        .collect();
    SendPlan::from_conversations(prepared, DatasetSampling::Sequential, sends, SEED)
}

/// A profiling phase paced by `pacing`, with no limit, cap, ramp or cancellation yet.
fn spec(pacing: Pacing) -> PhaseSpec {
    PhaseSpec {
        phase: Phase::Profiling,
        first_send: 0,
        count: None,
        sessions: None,
        duration: None,
        grace: None,
        concurrency: None,
        pacing,
        cancellation: None,
        seed: SEED,
        ramps: Ramps::default(),
        prefill_concurrency: None,
        shard: None,
        start: None,
    }
}

/// What one phase did, seen from the engine and from the fake.
struct Outcome {
    result: PhaseResult,
    /// The records the collector got, in the order it got them.
    records: Vec<RequestRecord>,
    seen: Seen,
    /// When `run_phase` returned.
    ended: Duration,
}

impl Outcome {
    /// When each request reached the fake, in ms, in order.
    fn send_ms(&self) -> Vec<u64> {
        self.seen.calls.iter().map(|c| whole_ms(c.at)).collect()
    }

    /// The record of the fake's request `n`.
    fn record_of(&self, n: usize) -> &RequestRecord {
        let id = &self.seen.calls[n].request_id;
        let mut of = self.records.iter().filter(|r| &r.x_request_id == id);
        let record = of.next().expect("every request has a record");
        assert!(of.next().is_none(), "one record per request");
        record
    }

    /// How and when the fake's request `n` ended.
    fn end_of(&self, n: usize) -> fake::End {
        *self.seen.ends.iter().find(|e| e.n == n).expect("ended")
    }

    /// Fake request numbers whose record says cancelled, in order.
    fn cancelled(&self) -> Vec<usize> {
        (0..self.seen.calls.len())
            .filter(|&n| self.record_of(n).was_cancelled)
            .collect()
    }
}

/// The run's shared state over `fake` and `plan`; the run clock starts at the fake's zero.
fn context(fake: Fake, plan: SendPlan) -> Arc<LoadContext<Fake>> {
    Arc::new(LoadContext {
        clock: Clock::anchored_at(fake.t0()),
        client: fake,
        plan,
        stop: AtomicBool::new(false),
        in_flight: AtomicU64::new(0),
        spawner: Default::default(),
    })
}

/// Runs one phase on `ctx` to its end.
async fn run_on(ctx: &Arc<LoadContext<Fake>>, spec: PhaseSpec) -> Outcome {
    let (records, mut collected) = unbounded_channel();
    let result = run_phase(ctx.clone(), spec, records).await;
    let ended = tokio::time::Instant::now().into_std() - ctx.client.t0();
    let mut records = Vec::new();
    while let Ok(r) = collected.try_recv() {
        records.push(r);
    }
    Outcome {
        result,
        records,
        seen: ctx.client.seen(),
        ended,
    }
}

/// Runs one phase of `plan` against `fake`.
async fn run(fake: Fake, plan: SendPlan, spec: PhaseSpec) -> Outcome {
    run_on(&context(fake, plan), spec).await
}
