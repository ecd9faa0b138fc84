//! One shard's part of a plan that several load generators run together. Every shard
//! draws the same plan from the same seed; the rules here pick its part so that the union
//! of all shards is exactly the single-machine run:
//! - arrivals of a rate and single-turn sends: every N-th (global index i mod N == I);
//! - conversations (multi-turn, trace sessions): whole, by a stable hash of the session id;
//! - concurrency and other caps: C / N each, the remainder to the lowest indices.

use sha2::{Digest, Sha256};

/// Shard `index` of `count` (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// The global index of this shard's `local`-th strided item.
    pub fn global(&self, local: u64) -> u64 {
        self.index + local * self.count
    }

    /// True when global item `i` (an arrival or a single-turn send) is this shard's.
    pub fn owns_index(&self, i: u64) -> bool {
        i % self.count == self.index
    }

    /// How many of `total` strided items are this shard's (the sum over shards is `total`).
    pub fn share_of(&self, total: u64) -> u64 {
        total / self.count + u64::from(self.index < total % self.count)
    }

    /// True when the conversation with this session id is this shard's. SHA-256, not a
    /// std hasher, so that every build and platform splits the same way.
    pub fn owns_session(&self, session_id: &str) -> bool {
        let digest = Sha256::digest(session_id.as_bytes());
        let h = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        h % self.count == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shards(n: u64) -> Vec<Shard> {
        (0..n).map(|index| Shard { index, count: n }).collect()
    }

    #[test]
    fn strided_items_cover_every_index_once() {
        for n in 1..6 {
            for total in [0u64, 1, 7, 10, 101] {
                let mut seen = Vec::new();
                for s in shards(n) {
                    let mine: Vec<u64> = (0..s.share_of(total)).map(|j| s.global(j)).collect();
                    assert!(mine.iter().all(|&i| s.owns_index(i) && i < total));
                    seen.extend(mine);
                }
                seen.sort();
                assert_eq!(seen, (0..total).collect::<Vec<_>>(), "n {n} total {total}");
            }
        }
    }

    #[test]
    fn counts_and_concurrency_split_exactly_with_the_remainder_first() {
        let split: Vec<u64> = shards(4).iter().map(|s| s.share_of(10)).collect();
        assert_eq!(split, vec![3, 3, 2, 2]);
        let split: Vec<u64> = shards(3).iter().map(|s| s.share_of(64)).collect();
        assert_eq!(split, vec![22, 21, 21]);
        assert_eq!(split.iter().sum::<u64>(), 64);
    }

    #[test]
    fn rate_arrivals_split_into_every_nth_of_the_global_schedule() {
        use crate::load::schedule::{ArrivalPattern, arrival_offsets_ns};
        let global = arrival_offsets_ns(ArrivalPattern::Poisson, 50.0, 400, 9);
        let mut union: Vec<u64> = Vec::new();
        for s in shards(3) {
            let mine: Vec<u64> = global
                .iter()
                .enumerate()
                .filter(|(i, _)| s.owns_index(*i as u64))
                .map(|(_, o)| *o)
                .collect();
            // Each shard runs about a third of the rate.
            let span_s = (mine[mine.len() - 1] - mine[0]) as f64 / 1e9;
            let rate = (mine.len() - 1) as f64 / span_s;
            assert!((rate / (50.0 / 3.0) - 1.0).abs() < 0.2, "shard rate {rate}");
            union.extend(mine);
        }
        union.sort();
        assert_eq!(union, global);
    }

    #[test]
    fn sessions_go_whole_to_exactly_one_shard_and_spread_evenly() {
        let ids: Vec<String> = (0..3000).map(|i| format!("session-{i}")).collect();
        let all = shards(4);
        let mut per_shard = [0usize; 4];
        for id in &ids {
            let owners: Vec<&Shard> = all.iter().filter(|s| s.owns_session(id)).collect();
            assert_eq!(owners.len(), 1, "{id}");
            per_shard[owners[0].index as usize] += 1;
        }
        for n in per_shard {
            assert!((650..850).contains(&n), "{per_shard:?}");
        }
        // Stable: the same id always lands on the same shard.
        let s = Shard { index: 2, count: 4 };
        assert_eq!(s.owns_session("abc"), s.owns_session("abc"));
    }
}
