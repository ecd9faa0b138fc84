//! When to send what. Closed loop: exactly `concurrency` requests (or conversations) in
//! flight until the phase's count has been sent; each finished record goes straight to the
//! collector. A conversation's next turn is sent after the previous reply, with the history.

pub mod schedule;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use tokio::sync::mpsc::UnboundedSender;

use crate::clock::Clock;
use crate::dataset::DatasetSampling;
use crate::endpoint::{PreparedConversation, PreparedRequest, TurnScript};
use crate::ids::uuid4;
use crate::record::{Phase, RequestInput, RequestRecord};
use crate::transport::HttpClient;

/// Everything decided before the first request: which entry each send uses and its ids.
pub struct SendPlan {
    pub requests: Vec<PreparedRequest>,
    /// One id per entry (its conversation / session id).
    pub conversation_ids: Vec<String>,
    /// For send number i (warmup first, then profiling): the entry index.
    pub order: Vec<u32>,
    /// For send number i: its `X-Request-ID`.
    pub request_ids: Vec<String>,
    /// Per entry: its later turns, for multi-turn conversations (empty scripts otherwise).
    /// With any multi-turn entry, `order` lists conversations to start, not sends.
    pub scripts: Vec<TurnScript>,
    /// Per entry: its trace timestamp (ms), if the input had one. Not used for pacing yet.
    pub timestamps_ms: Vec<Option<u64>>,
    /// Conversations started so far, over all phases (multi-turn only).
    next_session: AtomicU64,
}

impl SendPlan {
    /// Entries are used in shuffled order, every entry once per cycle (AIPerf's synthetic
    /// default), reshuffled each cycle; all drawn from the run's seed.
    pub fn new(requests: Vec<PreparedRequest>, total_sends: u64, seed: u64) -> Self {
        let n = requests.len();
        let mut plan = SendPlan {
            requests,
            conversation_ids: Vec::new(),
            order: Vec::new(),
            request_ids: Vec::new(),
            scripts: vec![TurnScript::default(); n],
            timestamps_ms: vec![None; n],
            next_session: AtomicU64::new(0),
        };
        plan.draw(DatasetSampling::Shuffle, total_sends, seed);
        plan
    }

    /// A plan over prepared conversations, used in the dataset's order: file order
    /// (sequential), reshuffled cycles, or draws with replacement.
    pub fn from_conversations(
        conversations: Vec<PreparedConversation>,
        sampling: DatasetSampling,
        total_sends: u64,
        seed: u64,
    ) -> Self {
        let n = conversations.len();
        let mut plan = SendPlan {
            requests: Vec::with_capacity(n),
            conversation_ids: Vec::new(),
            order: Vec::new(),
            request_ids: Vec::new(),
            scripts: Vec::with_capacity(n),
            timestamps_ms: Vec::with_capacity(n),
            next_session: AtomicU64::new(0),
        };
        for c in conversations {
            plan.requests.push(c.first);
            plan.scripts.push(c.script);
            plan.timestamps_ms.push(c.timestamp_ms);
        }
        plan.draw(sampling, total_sends, seed);
        plan
    }

    /// Ids and order, all from the run's seed. Sessions never outnumber sends, so
    /// `total_sends` entries of `order` are always enough.
    fn draw(&mut self, sampling: DatasetSampling, total_sends: u64, seed: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5e4d_91a7_c3b2_0f61);
        let n = self.requests.len();
        let total = total_sends as usize;
        self.conversation_ids = (0..n).map(|_| uuid4(&mut rng)).collect();
        let mut order = Vec::with_capacity(total);
        match sampling {
            DatasetSampling::Shuffle => {
                let mut cycle: Vec<u32> = (0..n as u32).collect();
                while order.len() < total {
                    cycle.shuffle(&mut rng);
                    let take = (total - order.len()).min(n);
                    order.extend_from_slice(&cycle[..take]);
                }
            }
            DatasetSampling::Sequential => order.extend((0..total).map(|i| (i % n) as u32)),
            DatasetSampling::Random => {
                order.extend((0..total).map(|_| rng.random_range(0..n as u32)));
            }
        }
        self.order = order;
        self.request_ids = (0..total_sends).map(|_| uuid4(&mut rng)).collect();
    }

    /// True when some entry is a conversation of two or more turns.
    pub fn is_multi_turn(&self) -> bool {
        self.scripts.iter().any(|s| s.turns.len() > 1)
    }
}

/// Shared by the workers of one run.
pub struct LoadContext {
    pub client: HttpClient,
    pub clock: Clock,
    pub plan: SendPlan,
    /// Set on the first Ctrl-C: no new request starts after it.
    pub stop: AtomicBool,
    /// Requests currently in flight.
    pub in_flight: AtomicU64,
}

/// Runs one phase closed-loop: sends `count` requests, starting at send number `first_send`,
/// keeping `concurrency` in flight. Returns how many were sent.
pub async fn run_closed_loop(
    ctx: Arc<LoadContext>,
    phase: Phase,
    first_send: u64,
    count: u64,
    concurrency: u64,
    records: UnboundedSender<RequestRecord>,
) -> u64 {
    if ctx.plan.is_multi_turn() {
        return run_sessions(ctx, phase, first_send, count, concurrency, records).await;
    }
    let next = Arc::new(AtomicU64::new(0));
    let workers = concurrency.min(count).max(1);
    let mut tasks = Vec::with_capacity(workers as usize);
    for _ in 0..workers {
        let ctx = ctx.clone();
        let next = next.clone();
        let records = records.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                if ctx.stop.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                let send = (first_send + i) as usize;
                let entry = ctx.plan.order[send] as usize;
                let prepared = &ctx.plan.requests[entry];
                let input = RequestInput {
                    session_num: send as u64,
                    conversation_id: ctx.plan.conversation_ids[entry].clone(),
                    turn_index: 0,
                    input_tokens: Some(prepared.input_tokens),
                    num_images: prepared.num_images,
                    requested_output_tokens: prepared.requested_output_tokens,
                };
                ctx.in_flight.fetch_add(1, Ordering::Relaxed);
                let record = ctx
                    .client
                    .exchange(
                        &ctx.clock,
                        phase,
                        input,
                        ctx.plan.request_ids[send].clone(),
                        prepared.body.clone(),
                    )
                    .await;
                ctx.in_flight.fetch_sub(1, Ordering::Relaxed);
                if records.send(record).is_err() {
                    break; // collector gone: the run is being torn down
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    next.load(Ordering::Relaxed).min(count)
}

/// Closed loop over conversations: each worker runs one conversation at a time, sending
/// turn k+1 after the reply to turn k (and the turn's delay), with the history. Every turn
/// takes one of the phase's `count` sends; a failed turn ends its conversation.
async fn run_sessions(
    ctx: Arc<LoadContext>,
    phase: Phase,
    first_send: u64,
    count: u64,
    concurrency: u64,
    records: UnboundedSender<RequestRecord>,
) -> u64 {
    let next = Arc::new(AtomicU64::new(0));
    let workers = concurrency.min(count).max(1);
    let mut tasks = Vec::with_capacity(workers as usize);
    for _ in 0..workers {
        let ctx = ctx.clone();
        let next = next.clone();
        let records = records.clone();
        tasks.push(tokio::spawn(async move {
            'sessions: loop {
                let plan = &ctx.plan;
                let session = plan.next_session.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(&entry) = plan.order.get(session) else {
                    break;
                };
                let entry = entry as usize;
                let script = &plan.scripts[entry];
                let mut replies: Vec<String> = Vec::new();
                for turn in 0..script.num_turns() {
                    if ctx.stop.load(Ordering::Relaxed) {
                        break 'sessions;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break 'sessions;
                    }
                    let send = (first_send + i) as usize;
                    let (body, input) = if turn == 0 {
                        let first = &plan.requests[entry];
                        let input = RequestInput {
                            session_num: session as u64,
                            conversation_id: plan.conversation_ids[entry].clone(),
                            turn_index: 0,
                            input_tokens: Some(first.input_tokens),
                            num_images: first.num_images,
                            requested_output_tokens: first.requested_output_tokens,
                        };
                        (first.body.clone(), input)
                    } else {
                        let t = &script.turns[turn];
                        if let Some(ms) = t.delay_ms.filter(|&ms| ms > 0) {
                            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                        }
                        let input = RequestInput {
                            session_num: session as u64,
                            conversation_id: plan.conversation_ids[entry].clone(),
                            turn_index: turn as u32,
                            // The history holds the replies, which are only tokenized in the
                            // collector: the client cannot know this prompt's length here.
                            input_tokens: None,
                            num_images: t.num_images,
                            requested_output_tokens: t.requested_output_tokens,
                        };
                        (script.turn_body(turn, &replies), input)
                    };
                    ctx.in_flight.fetch_add(1, Ordering::Relaxed);
                    let record = ctx
                        .client
                        .exchange(
                            &ctx.clock,
                            phase,
                            input,
                            plan.request_ids[send].clone(),
                            body,
                        )
                        .await;
                    ctx.in_flight.fetch_sub(1, Ordering::Relaxed);
                    let failed = record.error.is_some();
                    replies.push(record.output_text());
                    if records.send(record).is_err() {
                        break 'sessions;
                    }
                    if failed {
                        continue 'sessions;
                    }
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    next.load(Ordering::Relaxed).min(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn reqs(n: usize) -> Vec<PreparedRequest> {
        (0..n)
            .map(|i| PreparedRequest {
                body: Bytes::from(format!("{i}")),
                input_tokens: 1,
                num_images: 0,
                requested_output_tokens: None,
            })
            .collect()
    }

    #[test]
    fn every_entry_once_per_cycle_and_seeded() {
        let plan = SendPlan::new(reqs(5), 12, 42);
        assert_eq!(plan.order.len(), 12);
        let mut first: Vec<u32> = plan.order[..5].to_vec();
        first.sort();
        assert_eq!(first, vec![0, 1, 2, 3, 4]);
        let mut second: Vec<u32> = plan.order[5..10].to_vec();
        second.sort();
        assert_eq!(second, vec![0, 1, 2, 3, 4]);
        let again = SendPlan::new(reqs(5), 12, 42);
        assert_eq!(plan.order, again.order);
        assert_eq!(plan.request_ids, again.request_ids);
        let other = SendPlan::new(reqs(5), 12, 43);
        assert_ne!(plan.request_ids, other.request_ids);
    }

    #[test]
    fn sequential_and_random_orders() {
        let convs = |n: usize| {
            reqs(n)
                .into_iter()
                .map(|first| PreparedConversation {
                    first,
                    script: TurnScript::default(),
                    timestamp_ms: None,
                })
                .collect::<Vec<_>>()
        };
        let seq = SendPlan::from_conversations(convs(3), DatasetSampling::Sequential, 7, 1);
        assert_eq!(seq.order, vec![0, 1, 2, 0, 1, 2, 0]);
        assert!(!seq.is_multi_turn());
        let rnd = SendPlan::from_conversations(convs(3), DatasetSampling::Random, 300, 1);
        let again = SendPlan::from_conversations(convs(3), DatasetSampling::Random, 300, 1);
        assert_eq!(rnd.order, again.order);
        for k in 0..3u32 {
            let c = rnd.order.iter().filter(|&&o| o == k).count();
            assert!((60..140).contains(&c), "entry {k} drawn {c} times of 300");
        }
        // The synthetic constructor keeps its shuffled cycles.
        let shuffled = SendPlan::new(reqs(3), 6, 42);
        let via = SendPlan::from_conversations(convs(3), DatasetSampling::Shuffle, 6, 42);
        assert_eq!(shuffled.order, via.order);
        assert_eq!(shuffled.request_ids, via.request_ids);
    }
}
