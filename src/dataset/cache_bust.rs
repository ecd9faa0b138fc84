//! `--cache-bust`: a marker in each conversation's system message or first user turn, so a
//! server's prefix cache cannot share work between conversations (the `[rid:<hex12>]`
//! targets) or between warmup and profiling (the `warmup-isolation-*` targets).
//!
//! The bodies are built before the run and the digest depends on the run (its benchmark
//! id) and on how often a conversation was used before, so here the marker goes into the
//! text with a fixed placeholder digest ([`PLACEHOLDER_HEX`]); the send path
//! (`load::cache_bust`) writes each request's 12 hex characters over it. JSON never escapes
//! hex digits or `[rid:]`, so the placeholder is the same 12 bytes in every body.
//!
//! `warmup-isolation-*` put [`WARMUP_MARKER`] in the text; the send path cuts it out of
//! profiling requests. Their input length is the length without it: the profiling bodies
//! are the bodies of a run without the flag.

use sha2::{Digest, Sha256};

use super::shaping::recount_first_turn;
use super::{BuildError, Dataset};
use crate::tokenizer::Tokenizer;

/// Where the marker goes and which marker it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheBust {
    /// `[rid:<hex12>]\n\n` at the start of the system message.
    SystemPrefix,
    /// `\n\n[rid:<hex12>]` at the end of the system message.
    SystemSuffix,
    /// `[rid:<hex12>]\n\n` at the start of the first user turn.
    FirstTurnPrefix,
    /// `\n\n[rid:<hex12>]` at the end of the first user turn.
    FirstTurnSuffix,
    /// `[warmup]\n\n` at the start of the system message, in warmup requests only.
    WarmupIsolationSystem,
    /// `[warmup]\n\n` at the start of the first user turn, in warmup requests only.
    WarmupIsolationFirstTurn,
}

/// The digest written into the bodies before the run, replaced at send time.
pub const PLACEHOLDER_HEX: &str = "000000000000";

/// The text `warmup-isolation-*` put before the system message or first user turn.
pub const WARMUP_MARKER: &str = "[warmup]\n\n";

/// Hex characters of the digest in a marker (48 bits: plenty within one run).
pub const HEX_LEN: usize = 12;

/// Markers whose token counts are averaged for the input-length budget (as AIPerf does).
const COST_SAMPLES: u64 = 8;

impl CacheBust {
    /// AIPerf's name of the target (`cache_bust.target` of its configuration).
    pub fn as_str(self) -> &'static str {
        match self {
            CacheBust::SystemPrefix => "system_prefix",
            CacheBust::SystemSuffix => "system_suffix",
            CacheBust::FirstTurnPrefix => "first_turn_prefix",
            CacheBust::FirstTurnSuffix => "first_turn_suffix",
            CacheBust::WarmupIsolationSystem => "warmup_isolation_system",
            CacheBust::WarmupIsolationFirstTurn => "warmup_isolation_first_turn",
        }
    }

    /// The `[rid:...]` targets, whose marker is the same in warmup and profiling.
    pub fn is_rid(self) -> bool {
        !matches!(
            self,
            CacheBust::WarmupIsolationSystem | CacheBust::WarmupIsolationFirstTurn
        )
    }

    /// Targets that mark the system message (the first user turn when there is none).
    pub fn targets_system(self) -> bool {
        matches!(
            self,
            CacheBust::SystemPrefix | CacheBust::SystemSuffix | CacheBust::WarmupIsolationSystem
        )
    }

    fn is_suffix(self) -> bool {
        matches!(self, CacheBust::SystemSuffix | CacheBust::FirstTurnSuffix)
    }

    /// The marker text with digest `hex` (ignored by the warmup targets).
    pub fn marker(self, hex: &str) -> String {
        if !self.is_rid() {
            WARMUP_MARKER.to_string()
        } else if self.is_suffix() {
            format!("\n\n[rid:{hex}]")
        } else {
            format!("[rid:{hex}]\n\n")
        }
    }

    /// The mean token count of the marker over a few digests, rounded (AIPerf's
    /// `estimate_marker_token_cost`): what a synthetic first turn or shared system prompt
    /// gives up so the input length on the wire stays as set.
    pub fn mean_cost(self, tokenizer: &Tokenizer) -> usize {
        let total: usize = (0..COST_SAMPLES)
            .map(|i| {
                let hex = digest_hex("estimator", i, i, &format!("estimator-{i}"));
                tokenizer.count(&self.marker(&hex))
            })
            .sum();
        (total as f64 / COST_SAMPLES as f64).round() as usize
    }
}

/// The first 12 hex characters of SHA-256 of
/// `"<benchmark_id>:<recycle_pass>:<trajectory_index>:<trace_id>"`.
pub fn digest_hex(
    benchmark_id: &str,
    recycle_pass: u64,
    trajectory: u64,
    trace_id: &str,
) -> String {
    let digest = Sha256::digest(format!(
        "{benchmark_id}:{recycle_pass}:{trajectory}:{trace_id}"
    ));
    digest[..HEX_LEN / 2]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Puts `target`'s marker (with the placeholder digest) into every conversation: the
/// system message for the system targets when the conversation has one, else the start or
/// end of the first turn's first text. The first turn's input length counts a `[rid:]`
/// marker; a warmup marker is left out of it (profiling sends none).
pub fn mark(
    dataset: &mut Dataset,
    target: CacheBust,
    tokenizer: &Tokenizer,
) -> Result<(), BuildError> {
    let marker = target.marker(PLACEHOLDER_HEX);
    for (i, conv) in dataset.conversations.iter_mut().enumerate() {
        if conv.turns.iter().any(|t| t.own.is_some()) {
            return Err(BuildError::Input(format!(
                "--cache-bust: conversation {} is sent as the input file's own messages, request body or recorded prompt, where this aiperf cannot place a marker; drop --cache-bust or give prompts as text",
                i + 1
            )));
        }
        let on_system = target.targets_system() && conv.system.is_some();
        let slot = if on_system {
            conv.system.as_mut()
        } else {
            conv.turns.first_mut().map(|t| &mut t.text)
        };
        let Some(text) = slot else { continue };
        if target.is_suffix() {
            text.push_str(&marker);
        } else {
            text.insert_str(0, &marker);
        }
        if target.is_rid() {
            recount_first_turn(conv, tokenizer);
        }
    }
    Ok(())
}

/// Where a `[rid:]` marker of a synthetic dataset lands, for the input-length budget: on
/// the shared system prompt (shortened by the marker's cost), on the first turn (its ISL
/// shortened), or on a verbatim system prompt (no length to keep: the marker adds to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    SharedSystem(usize),
    FirstTurn(usize),
    None,
}

/// The budget of `target` for a synthetic dataset with a verbatim system prompt
/// (`verbatim`) or a shared synthetic one (`shared`). The warmup targets change only warmup
/// requests: the profiling bodies keep their lengths.
pub fn budget(target: CacheBust, tokenizer: &Tokenizer, verbatim: bool, shared: bool) -> Budget {
    if !target.is_rid() {
        return Budget::None;
    }
    let cost = target.mean_cost(tokenizer);
    match (target.targets_system(), verbatim, shared) {
        (true, true, _) => Budget::None,
        (true, _, true) => Budget::SharedSystem(cost),
        _ => Budget::FirstTurn(cost),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{Conversation, DatasetSampling, Entry};

    fn conv(system: Option<&str>, texts: &[&str]) -> Conversation {
        Conversation {
            session_id: None,
            system: system.map(str::to_string),
            context: None,
            turns: texts
                .iter()
                .map(|t| Entry::synthetic(t.to_string(), 1, Vec::new(), Some(4)))
                .collect(),
        }
    }

    #[test]
    fn digest_is_the_documented_sha256_prefix() {
        // sha256("b:0:1:t") computed independently.
        let hex = digest_hex("b", 0, 1, "t");
        let full = Sha256::digest(b"b:0:1:t");
        let want: String = full.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, want[..12]);
        assert_ne!(digest_hex("b", 1, 1, "t"), hex);
    }

    #[test]
    fn markers_land_where_the_target_says() {
        let t = Tokenizer::builtin().unwrap();
        let mut d = Dataset {
            conversations: vec![conv(Some("sys"), &["one", "two"]), conv(None, &["solo"])],
            sampling: DatasetSampling::Sequential,
        };
        mark(&mut d, CacheBust::SystemSuffix, &t).unwrap();
        let c = &d.conversations;
        assert_eq!(c[0].system.as_deref(), Some("sys\n\n[rid:000000000000]"));
        assert_eq!(c[0].turns[0].text, "one");
        assert_eq!(c[0].turns[1].text, "two");
        // No system message: the first turn takes it.
        assert_eq!(c[1].turns[0].text, "solo\n\n[rid:000000000000]");
        assert_eq!(
            c[0].turns[0].input_tokens,
            t.count("sys\n\n[rid:000000000000] one") as u64
        );

        let mut d = Dataset {
            conversations: vec![conv(Some("sys"), &["one"])],
            sampling: DatasetSampling::Sequential,
        };
        mark(&mut d, CacheBust::WarmupIsolationFirstTurn, &t).unwrap();
        assert_eq!(d.conversations[0].turns[0].text, "[warmup]\n\none");
        // The profiling length: without the warmup marker.
        assert_eq!(d.conversations[0].turns[0].input_tokens, 1);
    }
}
