//! When to send what. Closed loop: exactly `concurrency` requests in flight until the
//! phase's count has been sent; each finished record goes straight to the collector.

pub mod schedule;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use tokio::sync::mpsc::UnboundedSender;

use crate::clock::Clock;
use crate::endpoint::PreparedRequest;
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
}

impl SendPlan {
    /// Entries are used in shuffled order, every entry once per cycle (AIPerf's synthetic
    /// default), reshuffled each cycle; all drawn from the run's seed.
    pub fn new(requests: Vec<PreparedRequest>, total_sends: u64, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5e4d_91a7_c3b2_0f61);
        let n = requests.len();
        let conversation_ids = (0..n).map(|_| uuid4(&mut rng)).collect();
        let mut order = Vec::with_capacity(total_sends as usize);
        let mut cycle: Vec<u32> = (0..n as u32).collect();
        while order.len() < total_sends as usize {
            cycle.shuffle(&mut rng);
            let take = (total_sends as usize - order.len()).min(n);
            order.extend_from_slice(&cycle[..take]);
        }
        let request_ids = (0..total_sends).map(|_| uuid4(&mut rng)).collect();
        SendPlan {
            requests,
            conversation_ids,
            order,
            request_ids,
        }
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
}
