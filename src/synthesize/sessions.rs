//! The agentic-code session generator: per session, a layered prefix (L1 for all, L1.5 per
//! Zipf-chosen group, L2 its own files) then turns that grow the context by new tokens and
//! the previous output, until the context window or a reset ends it (or, with explicit
//! turns, a drawn turn count). Hash ids name KV-cache blocks so that shared prefixes share
//! ids. Random draws come from one ChaCha8 stream seeded by `--seed`.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, LogNormal};

use super::params::{Lognormal, OUTPUT_MIN, Params};

/// Ids reserved per group (L1.5) and per session (L2 and history).
const MAX_GROUP_BLOCKS: u64 = 200;
const MAX_GROUPS: u64 = 1_000;
const MAX_SESSION_BLOCKS: u64 = 4_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    ForcedRetire,
    ProbabilisticReset,
    RestartSplit,
    TargetTurnCount,
}

#[derive(Debug, Clone)]
pub struct Turn {
    pub index: usize,
    /// The whole context of this turn.
    pub input_length: u64,
    pub output_length: u64,
    /// Tokens added since the previous turn (the whole context on turn 0).
    pub new_tokens: u64,
    pub delay_ms: f64,
    pub timestamp_ms: f64,
    pub hash_ids: Vec<u64>,
}

#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    pub group: u64,
    pub turns: Vec<Turn>,
    pub end: EndReason,
    pub restart: bool,
}

/// Hash ids of the layers: L1 `0..l1`, L1.5 per group after it, sessions after all groups.
struct Prefix {
    block: u64,
    l1: u64,
    l15: u64,
}

impl Prefix {
    fn new(p: &Params) -> Result<Prefix, String> {
        let block = p.block_size;
        let l1 = p.cache.layer1_tokens.div_ceil(block);
        let l15 = p.cache.layer1_5_tokens.div_ceil(block);
        if p.cache.layer1_5_groups.num_groups > MAX_GROUPS {
            return Err(format!(
                "cache.layer1_5_groups.num_groups: at most {MAX_GROUPS}"
            ));
        }
        if l15 > MAX_GROUP_BLOCKS {
            return Err(format!(
                "cache.layer1_5_tokens: {} tokens need {l15} blocks of {block}; at most {MAX_GROUP_BLOCKS}",
                p.cache.layer1_5_tokens
            ));
        }
        Ok(Prefix { block, l1, l15 })
    }

    /// L1 and L1.5 as whole blocks: session content starts in a block of its own.
    fn tokens(&self) -> u64 {
        (self.l1 + self.l15) * self.block
    }

    /// The ids of a turn of `input_length` tokens: L1, the group's L1.5, then the
    /// session's, extending (or cutting) the previous turn's session ids.
    fn ids(
        &self,
        session: u64,
        group: u64,
        input_length: u64,
        prev: Option<&[u64]>,
    ) -> Result<Vec<u64>, String> {
        let total = input_length.div_ceil(self.block);
        let l1 = self.l1.min(total);
        let mut out: Vec<u64> = (0..l1).collect();
        let rest = total - l1;
        let l15 = self.l15.min(rest);
        let base = self.l1 + group * MAX_GROUP_BLOCKS;
        out.extend(base..base + l15);
        let need = rest - l15;
        if need == 0 {
            return Ok(out);
        }
        if need > MAX_SESSION_BLOCKS {
            return Err(format!(
                "input_length {input_length} needs {need} session blocks; at most {MAX_SESSION_BLOCKS} (raise block_size or lower max_prompt_tokens)"
            ));
        }
        let base = self.l1 + MAX_GROUPS * MAX_GROUP_BLOCKS + session * MAX_SESSION_BLOCKS;
        match prev {
            None => out.extend(base..base + need),
            Some(prev) if (prev.len() as u64) < need => {
                let next = prev.last().map_or(base, |l| l + 1);
                out.extend_from_slice(prev);
                out.extend(next..next + need - prev.len() as u64);
            }
            Some(prev) => out.extend_from_slice(&prev[..need as usize]),
        }
        Ok(out)
    }

    fn session_ids<'a>(&self, ids: &'a [u64]) -> &'a [u64] {
        let n = (self.l1 + self.l15) as usize;
        if ids.len() <= n { &[] } else { &ids[n..] }
    }
}

pub struct Synthesizer<'p> {
    p: &'p Params,
    rng: ChaCha8Rng,
    prefix: Prefix,
    sessions: u64,
    /// Cumulative Zipf weights of the groups.
    groups: Vec<f64>,
    output_min: u64,
    /// New tokens' mu, shifted by ln(bias).
    new_tokens_mu: f64,
}

impl<'p> Synthesizer<'p> {
    pub fn new(p: &'p Params, seed: u64) -> Result<Self, String> {
        let g = &p.cache.layer1_5_groups;
        let weights: Vec<f64> = (1..=g.num_groups)
            .map(|k| 1.0 / (k as f64).powf(g.zipf_alpha))
            .collect();
        let sum: f64 = weights.iter().sum();
        let groups = weights
            .iter()
            .scan(0.0, |acc, w| {
                *acc += w / sum;
                Some(*acc)
            })
            .collect();
        let nt = &p.new_tokens_per_turn;
        Ok(Synthesizer {
            p,
            rng: ChaCha8Rng::seed_from_u64(seed),
            prefix: Prefix::new(p)?,
            sessions: 0,
            groups,
            output_min: p
                .generation_length
                .max
                .map_or(OUTPUT_MIN, |m| OUTPUT_MIN.min(m as u64)),
            new_tokens_mu: nt.mu() + nt.bias.unwrap_or(1.0).ln(),
        })
    }

    /// One draw of `l` (with mu `mu`): out-of-bounds draws are redrawn up to 100 times,
    /// then clamped.
    fn lognormal(&mut self, l: &Lognormal, mu: f64) -> f64 {
        let dist = LogNormal::new(mu, l.sigma()).expect("sigma checked >= 0 and finite");
        let inside = |v: f64| l.min.is_none_or(|lo| v >= lo) && l.max.is_none_or(|hi| v <= hi);
        let mut v = dist.sample(&mut self.rng);
        for _ in 0..100 {
            if inside(v) {
                break;
            }
            v = dist.sample(&mut self.rng);
        }
        if let Some(lo) = l.min {
            v = v.max(lo);
        }
        if let Some(hi) = l.max {
            v = v.min(hi);
        }
        v
    }

    fn session_id(&mut self) -> String {
        let bytes: [u8; 6] = self.rng.random();
        format!(
            "sess-{}",
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        )
    }

    fn group(&mut self) -> u64 {
        let u: f64 = self.rng.random();
        self.groups
            .iter()
            .position(|&c| u < c)
            .unwrap_or(self.groups.len() - 1) as u64
    }

    fn initial_context(&mut self) -> u64 {
        let l2 = &self.p.cache.layer2;
        let tokens = (self.lognormal(l2, l2.mu()) as u64).max(1);
        (self.prefix.tokens() + tokens).min(self.p.max_prompt_tokens - 1)
    }

    fn output(&mut self) -> u64 {
        let g = &self.p.generation_length;
        (self.lognormal(g, g.mu()) as u64).max(self.output_min)
    }

    fn new_tokens(&mut self) -> u64 {
        let nt = &self.p.new_tokens_per_turn;
        (self.lognormal(nt, self.new_tokens_mu) as u64).max(1)
    }

    /// Agentic or human, shorter as the context fills (down to a fifth), clipped at max.
    fn delay_ms(&mut self, prev_input: u64) -> f64 {
        let d = &self.p.inter_turn_delay;
        let agentic = self.rng.random::<f64>() < d.agentic_fraction;
        let l = if agentic {
            &d.agentic_delay
        } else {
            &d.human_delay
        };
        let mut ms = self.lognormal(l, l.mu());
        ms *= (1.0 - 0.8 * prev_input as f64 / self.p.max_prompt_tokens as f64).max(0.2);
        d.max.map_or(ms, |m| ms.min(m))
    }

    fn reset(&mut self, input: u64) -> bool {
        let Some(r) = &self.p.reset else { return false };
        let ratio = input as f64 / self.p.max_prompt_tokens as f64;
        let p = r.base_probability * (1.0 + (r.context_scaling - 1.0) * ratio);
        self.rng.random::<f64>() < p
    }

    fn first_turn(
        &mut self,
        session: u64,
        group: u64,
        input: u64,
        prev: Option<&[u64]>,
    ) -> Result<Turn, String> {
        Ok(Turn {
            index: 0,
            input_length: input,
            output_length: self.output(),
            new_tokens: input,
            delay_ms: 0.0,
            timestamp_ms: 0.0,
            hash_ids: self.prefix.ids(session, group, input, prev)?,
        })
    }

    /// The next turn after `turns`, or why the session ends instead.
    fn next_turn(
        &mut self,
        session: u64,
        group: u64,
        turns: &[Turn],
        resets: bool,
    ) -> Result<Result<Turn, EndReason>, String> {
        let last = turns.last().expect("a first turn");
        let delay_ms = self.delay_ms(last.input_length);
        let new_tokens = self.new_tokens();
        let input = last.input_length + last.output_length + new_tokens;
        if input >= self.p.max_prompt_tokens {
            return Ok(Err(EndReason::ForcedRetire));
        }
        if resets && self.reset(input) {
            return Ok(Err(EndReason::ProbabilisticReset));
        }
        let output = self.output();
        let prev = self.prefix.session_ids(&last.hash_ids).to_vec();
        Ok(Ok(Turn {
            index: turns.len(),
            input_length: input,
            output_length: output,
            new_tokens,
            delay_ms,
            timestamp_ms: last.timestamp_ms + delay_ms,
            hash_ids: self.prefix.ids(session, group, input, Some(&prev))?,
        }))
    }

    fn next_session(&mut self) -> u64 {
        self.sessions += 1;
        self.sessions - 1
    }

    /// A session (two when split at a restart: the second continues from the first's
    /// context under a new id).
    fn session(&mut self, restart: bool) -> Result<Vec<Session>, String> {
        let index = self.next_session();
        let id = self.session_id();
        let [lo, hi] = self.p.restart_turn_range;
        let restart_at = if restart {
            self.rng.random_range(lo..hi) as usize
        } else {
            usize::MAX
        };
        let group = self.group();
        let input = self.initial_context();
        let mut turns = vec![self.first_turn(index, group, input, None)?];
        loop {
            if turns.len() == restart_at {
                let last = turns.last().expect("a turn");
                let (prev_input, prev_output) = (last.input_length, last.output_length);
                let prev = self.prefix.session_ids(&last.hash_ids).to_vec();
                let a = Session {
                    id,
                    group,
                    turns,
                    end: EndReason::RestartSplit,
                    restart: false,
                };
                let b = self.continuation(index, group, prev_input + prev_output, &prev)?;
                return Ok(vec![a, b]);
            }
            match self.next_turn(index, group, &turns, true)? {
                Ok(t) => turns.push(t),
                Err(end) => {
                    return Ok(vec![Session {
                        id,
                        group,
                        turns,
                        end,
                        restart: false,
                    }]);
                }
            }
        }
    }

    fn continuation(
        &mut self,
        index: u64,
        group: u64,
        input: u64,
        prev: &[u64],
    ) -> Result<Session, String> {
        let id = self.session_id();
        let input = input.min(self.p.max_prompt_tokens - 1);
        let mut turns = vec![self.first_turn(index, group, input, Some(prev))?];
        loop {
            match self.next_turn(index, group, &turns, true)? {
                Ok(t) => turns.push(t),
                Err(end) => {
                    return Ok(Session {
                        id,
                        group,
                        turns,
                        end,
                        restart: true,
                    });
                }
            }
        }
    }

    /// A session of a drawn turn count, drawn again (up to max_session_attempts) when it
    /// does not fit, or cut at the window with allow_truncation.
    fn explicit_session(&mut self) -> Result<Session, String> {
        let t = self.p.turns.as_ref().expect("explicit turns");
        let bounded = Lognormal {
            mu: Some((t.median as f64).ln()),
            sigma: Some({
                let r = t.mean as f64 / t.median as f64;
                if r > 1.0 { (2.0 * r.ln()).sqrt() } else { 0.0 }
            }),
            mean: t.mean as f64,
            median: t.median as f64,
            min: Some(t.min as f64),
            max: Some(t.max as f64),
            bias: None,
        };
        let (t_min, t_max, truncate) = (t.min, t.max, t.allow_truncation);
        let attempts = t.max_session_attempts.unwrap_or(1);
        let target =
            (self.lognormal(&bounded, bounded.mu()).round() as u64).clamp(t_min, t_max) as usize;
        for _ in 0..attempts {
            let index = self.next_session();
            let id = self.session_id();
            let group = self.group();
            let input = self.initial_context();
            if input >= self.p.max_prompt_tokens {
                continue;
            }
            let mut turns = vec![self.first_turn(index, group, input, None)?];
            let mut fits = true;
            while turns.len() < target {
                match self.next_turn(index, group, &turns, false)? {
                    Ok(t) => turns.push(t),
                    Err(_) if truncate => {
                        return Ok(Session {
                            id,
                            group,
                            turns,
                            end: EndReason::ForcedRetire,
                            restart: false,
                        });
                    }
                    Err(_) => {
                        fits = false;
                        break;
                    }
                }
            }
            if fits {
                return Ok(Session {
                    id,
                    group,
                    turns,
                    end: EndReason::TargetTurnCount,
                    restart: false,
                });
            }
        }
        Err(format!(
            "no session of {target} turns fits under max_prompt_tokens {} in {attempts} attempts; lower turns or raise max_prompt_tokens",
            self.p.max_prompt_tokens
        ))
    }

    /// `n` sessions. A restart splits a session with a chance falling from
    /// restart_initial_probability to 0 over the first 75% of sessions; each continuation
    /// is placed at least a quarter of the sessions after its first part.
    pub fn sessions(&mut self, n: usize) -> Result<Vec<Session>, String> {
        if self.p.turns.is_some() {
            return (0..n).map(|_| self.explicit_session()).collect();
        }
        let mut primary: Vec<Session> = Vec::with_capacity(n);
        let mut deferred: Vec<(Session, usize)> = Vec::new();
        for i in 0..n {
            let progress = i as f64 / (n.max(2) - 1) as f64;
            let p = if progress >= 0.75 {
                0.0
            } else {
                self.p.restart_initial_probability * (1.0 - progress / 0.75)
            };
            let restart = self.rng.random::<f64>() < p;
            let mut made = self.session(restart)?.into_iter();
            let origin = primary.len();
            primary.push(made.next().expect("a session"));
            deferred.extend(made.map(|s| (s, origin)));
        }
        let min_offset = ((n as f64 * 0.25) as usize).max(1);
        for (s, origin) in deferred {
            let low = (origin + min_offset).min(primary.len());
            let at = if low >= primary.len() {
                primary.len()
            } else {
                self.rng.random_range(low..=primary.len())
            };
            primary.insert(at, s);
        }
        Ok(primary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sessions_grow_their_context_and_share_the_prefix() {
        let p = Params::from_value(json!({"max_prompt_tokens": 60000, "cache": {"layer1_tokens": 2048, "layer1_5_tokens": 1024, "layer1_5_groups": {"num_groups": 3}}})).unwrap();
        let mut s = Synthesizer::new(&p, 7).unwrap();
        let sessions = s.sessions(20).unwrap();
        assert_eq!(sessions.len(), 20);
        for sess in &sessions {
            assert_eq!(sess.turns[0].hash_ids[..4], [0, 1, 2, 3], "L1 is shared");
            for w in sess.turns.windows(2) {
                let (a, b) = (&w[0], &w[1]);
                assert_eq!(
                    b.input_length,
                    a.input_length + a.output_length + b.new_tokens
                );
                assert!(b.input_length < 60000);
                assert_eq!(b.hash_ids.len() as u64, b.input_length.div_ceil(512));
                assert_eq!(
                    b.hash_ids[..a.hash_ids.len()],
                    a.hash_ids[..],
                    "history extends the prefix"
                );
                assert!(b.timestamp_ms > a.timestamp_ms);
            }
            assert!(sess.turns.iter().all(|t| t.output_length >= OUTPUT_MIN));
        }
        // The same seed, the same sessions.
        let again = Synthesizer::new(&p, 7).unwrap().sessions(20).unwrap();
        assert_eq!(again[5].turns.len(), sessions[5].turns.len());
        assert_eq!(again[5].id, sessions[5].id);
    }

    #[test]
    fn explicit_turns_and_restarts() {
        let p = Params::from_value(json!({"turns": {"mean": 4, "median": 4, "min": 4, "max": 4}, "max_prompt_tokens": 100000})).unwrap();
        let sessions = Synthesizer::new(&p, 1).unwrap().sessions(10).unwrap();
        assert!(
            sessions
                .iter()
                .all(|s| s.turns.len() == 4 && s.end == EndReason::TargetTurnCount)
        );
        let p = Params::from_value(json!({"restart_initial_probability": 1.0, "reset": null, "restart_turn_range": [2, 3], "max_prompt_tokens": 1000000})).unwrap();
        let sessions = Synthesizer::new(&p, 1).unwrap().sessions(8).unwrap();
        let restarts = sessions.iter().filter(|s| s.restart).count();
        let splits = sessions
            .iter()
            .filter(|s| s.end == EndReason::RestartSplit)
            .count();
        assert!(restarts > 0 && restarts == splits, "{restarts} {splits}");
        assert!(
            sessions
                .iter()
                .filter(|s| s.end == EndReason::RestartSplit)
                .all(|s| s.turns.len() == 2)
        );
    }
}
