//! When to send what. Closed loop: exactly `concurrency` requests (or conversations) in
//! flight until the phase's count has been sent; each finished record goes straight to the
//! collector. A conversation's next turn is sent after the previous reply, with the history.
//!
//! The engine (`phase.rs`) reaches the HTTP side, and the clock it paces by, only through
//! the `Exchange` trait (`exchange.rs`), which `transport::HttpClient` implements.

pub mod cache_bust;
#[cfg(test)]
mod engine_tests;
mod exchange;
mod options;
pub mod pacing;
mod phase;
pub mod ramp;
pub mod schedule;
pub mod senders;
pub mod shard;

pub use options::{LoadOptions, UserCentric, WarmupOptions};
pub use phase::{Cancellation, Pacing, PhaseSpec, run_phase};
pub use ramp::Ramps;
pub use shard::Shard;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::ids::{format_uuid, uuid4, uuid4_bytes};

use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

use crate::clock::Clock;
use crate::dataset::DatasetSampling;
use crate::endpoint::{PreparedConversation, PreparedRequest, TurnScript};
use crate::transport::HttpClient;

/// Everything decided before the first request: which entry each send uses and its ids.
pub struct SendPlan {
    pub requests: Vec<PreparedRequest>,
    /// One id per entry (its conversation / session id).
    pub conversation_ids: Vec<String>,
    /// For send number i (warmup first, then profiling): the entry index.
    pub order: Vec<u32>,
    /// For send number i: its `X-Request-ID` (as bytes: a long run holds one per request).
    pub request_ids: Vec<[u8; 16]>,
    /// Per entry: its later turns, for multi-turn conversations (empty scripts otherwise).
    /// With any multi-turn entry, `order` lists conversations to start, not sends.
    pub scripts: Vec<TurnScript>,
    /// Some entry has two or more turns (fixed once the entries are in; read per send).
    multi_turn: bool,
    /// Per entry: its trace timestamp (ms), if the input had one (see `fixed_schedule`).
    pub timestamps_ms: Vec<Option<u64>>,
    /// Conversations started so far, over all phases.
    next_session: AtomicU64,
    /// Seed of the ids drawn past the end of `request_ids` (runs limited by duration).
    id_seed: u64,
    /// This run's id (`benchmark_id` of the summary; cache-bust markers digest it).
    pub benchmark_id: String,
    /// `--cache-bust`: the markers written into the bodies at send time.
    pub cache_bust: Option<cache_bust::CacheBustPlan>,
}

impl SendPlan {
    #[cfg(test)]
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
            multi_turn: false,
            timestamps_ms: vec![None; n],
            next_session: AtomicU64::new(0),
            id_seed: seed,
            benchmark_id: uuid4(&mut rand::rng()),
            cache_bust: None,
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
            multi_turn: false,
            timestamps_ms: Vec::with_capacity(n),
            next_session: AtomicU64::new(0),
            id_seed: seed,
            benchmark_id: uuid4(&mut rand::rng()),
            cache_bust: None,
        };
        let mut session_ids = Vec::with_capacity(n);
        for c in conversations {
            session_ids.push(c.session_id);
            plan.requests.push(c.first);
            plan.scripts.push(c.script);
            plan.timestamps_ms.push(c.timestamp_ms);
        }
        plan.multi_turn = plan.scripts.iter().any(|s| s.turns.len() > 1);
        plan.draw(sampling, total_sends, seed);
        // The input file's session ids stay the conversations' ids.
        for (id, given) in plan.conversation_ids.iter_mut().zip(session_ids) {
            if let Some(given) = given {
                *id = given;
            }
        }
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
        self.request_ids = (0..total_sends).map(|_| uuid4_bytes(&mut rng)).collect();
    }

    /// True when some entry is a conversation of two or more turns.
    pub fn is_multi_turn(&self) -> bool {
        self.multi_turn
    }

    /// `--ignore-trace-delays`: forgets the input's timestamps and turn delays, so every
    /// turn follows its previous reply at once and no entry asks for a schedule.
    pub fn drop_delays(&mut self) {
        self.timestamps_ms.iter_mut().for_each(|t| *t = None);
        for script in &mut self.scripts {
            script.turns.iter_mut().for_each(|t| {
                t.delay = None;
                t.after_first = None;
            });
        }
    }

    /// `--inter-turn-delay-cap-seconds`: cuts every turn delay longer than `cap` to it;
    /// returns how many were cut and the longest before the cut.
    pub fn cap_delays(&mut self, cap: std::time::Duration) -> (usize, std::time::Duration) {
        let mut cut = (0, std::time::Duration::ZERO);
        for script in &mut self.scripts {
            for d in script.turns.iter_mut().filter_map(|t| t.delay.as_mut()) {
                if *d > cap {
                    cut = (cut.0 + 1, cut.1.max(*d));
                    *d = cap;
                }
            }
        }
        cut
    }

    /// True when the input carried timestamps: it asks for a fixed schedule.
    pub fn has_timestamps(&self) -> bool {
        self.timestamps_ms.iter().any(Option::is_some)
    }

    /// The entry of send number `send` (single-turn). Past the drawn order (runs limited by
    /// duration) the order repeats.
    pub fn entry_of_send(&self, send: u64) -> usize {
        self.order[(send % self.order.len() as u64) as usize] as usize
    }

    /// The entry of conversation number `session` (multi-turn).
    pub fn entry_of_session(&self, session: u64) -> usize {
        self.entry_of_send(session)
    }

    /// Requests that conversations `first..first + n` make: every turn of each.
    pub fn turns_of_sessions(&self, first: u64, n: u64) -> u64 {
        (first..first + n)
            .map(|s| self.scripts[self.entry_of_session(s)].num_turns() as u64)
            .sum()
    }

    /// The `X-Correlation-ID` of session number `session`: a fixed function of the seed and
    /// the session number, so a conversation replayed by several sessions gets one per session.
    pub fn correlation_id(&self, session: u64) -> String {
        uuid4(&mut ChaCha8Rng::seed_from_u64(
            self.id_seed ^ 0x5e55_1011_c0de ^ session.rotate_left(17),
        ))
    }

    /// Takes the next conversation number (shared by all phases).
    pub fn next_session(&self) -> u64 {
        self.next_session.fetch_add(1, Ordering::Relaxed)
    }

    /// The `X-Request-ID` of send number `send`: drawn up front, or past the drawn ones a
    /// fixed function of the seed and the send number.
    pub fn request_id(&self, send: u64) -> String {
        match self.request_ids.get(send as usize) {
            Some(id) => format_uuid(id),
            None => uuid4(&mut ChaCha8Rng::seed_from_u64(
                self.id_seed ^ 0x0001_d50f_5e4d ^ send.rotate_left(32),
            )),
        }
    }

    /// Arranges the plan for a trace replay: entries with a timestamp inside the window
    /// (inclusive, ms), in timestamp order. Returns each one's send offset in ns from the
    /// phase start: its timestamp minus the first kept one with `auto_offset`, else minus
    /// the start of the window (0 without one). Fails when no entry is left.
    pub fn fixed_schedule(&mut self, window: &ScheduleWindow) -> Result<Vec<u64>, String> {
        let mut kept: Vec<(u64, u32)> = self
            .timestamps_ms
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.map(|t| (t, i as u32)))
            .filter(|(t, _)| window.start_ms.is_none_or(|s| *t >= s))
            .filter(|(t, _)| window.end_ms.is_none_or(|e| *t <= e))
            .collect();
        if kept.is_empty() {
            return Err(
                "no entry of the input file has a timestamp inside the schedule window".into(),
            );
        }
        // Stable: entries with equal timestamps keep their file order.
        kept.sort_by_key(|&(t, _)| t);
        let base = if window.auto_offset {
            kept[0].0
        } else {
            window.start_ms.unwrap_or(0)
        };
        self.order = kept.iter().map(|&(_, i)| i).collect();
        let sends: usize = kept
            .iter()
            .map(|&(_, i)| self.scripts[i as usize].num_turns())
            .sum();
        let mut rng = ChaCha8Rng::seed_from_u64(self.id_seed ^ 0x00f1_8ed5);
        self.request_ids = (0..sends).map(|_| uuid4_bytes(&mut rng)).collect();
        // Saturating: the loader bounds timestamps, so this never clips a real schedule.
        Ok(kept
            .iter()
            .map(|&(t, _)| (t - base).saturating_mul(1_000_000))
            .collect())
    }

    /// The earliest timestamp of the input, if any.
    pub fn first_timestamp_ms(&self) -> Option<u64> {
        self.timestamps_ms.iter().flatten().copied().min()
    }

    /// Sends a fixed schedule makes: every turn of every scheduled conversation.
    pub fn fixed_schedule_sends(&self) -> u64 {
        self.order
            .iter()
            .map(|&i| self.scripts[i as usize].num_turns() as u64)
            .sum()
    }
}

/// `--fixed-schedule-auto-offset`, `--fixed-schedule-start-offset`, `--fixed-schedule-end-offset`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScheduleWindow {
    pub auto_offset: bool,
    pub start_ms: Option<u64>,
    pub end_ms: Option<u64>,
}

impl ScheduleWindow {
    /// Absolute (epoch) timestamps would wait decades from 0: the schedule starts at the
    /// first one instead, as with auto offset. True when it did so (nothing else set where
    /// the schedule starts).
    pub fn rebase_epoch(&mut self, first_ms: Option<u64>) -> bool {
        let absolute = first_ms.is_some_and(|t| t > crate::dataset::custom::EPOCH_MS_AFTER);
        let rebase = absolute && !self.auto_offset && self.start_ms.is_none();
        self.auto_offset |= rebase;
        rebase
    }
}

/// Shared by the workers of one run. `client` is the HTTP side (a fake in the unit tests).
pub struct LoadContext<E = HttpClient> {
    pub client: E,
    pub clock: Clock,
    pub plan: SendPlan,
    /// Set on the first Ctrl-C: no new request starts after it.
    pub stop: AtomicBool,
    /// Requests currently in flight.
    pub in_flight: AtomicU64,
    /// The threads a phase's request tasks run on.
    pub spawner: senders::Spawner,
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
                max_output_tokens: None,
                audio_seconds: None,
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
                    session_id: None,
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
