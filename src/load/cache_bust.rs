//! `--cache-bust` at send time: each conversation's marker written into bodies that were
//! serialized before the run (see `dataset::cache_bust`).
//!
//! A `[rid:]` marker's digest depends on the run's benchmark id, the conversation (its
//! index and id) and its recycle pass: how many times the phase started that conversation
//! before (a run with more requests than conversations wraps around and gets new markers;
//! warmup and profiling count on their own, so a conversation's warmup and first profiling
//! use share one marker and warmup primes its cache). The bodies hold a 12-byte placeholder
//! digest; the send path copies the body and writes the 12 hex characters over it. Nothing
//! is serialized at send time, and the digests and their token counts are drawn up front for
//! every use the plan's order makes of a conversation (only a run limited by duration that
//! goes past the drawn order hashes and counts a 20-character marker when a use starts).
//!
//! Measured with `cost_of_a_stamp` below (a debug build on a shared 2-core machine): a 4 KB
//! body's stamp (allocation, copy, 12-byte patch) takes about 1.1 µs, a 64 KB body's about
//! 3.6 µs; an optimized build is faster still. A loopback exchange takes tens of µs.
//!
//! `warmup-isolation-*` bodies are built with `[warmup]\n\n`; before the run it is cut out of
//! the first bodies (so they are the bodies of a run without the flag, sent as they are in
//! profiling, and what the chat-template probe sees) and warmup sends a copy with those 12
//! bytes put back. A later turn's body (spliced at send time) keeps it and profiling sends a
//! copy without it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use memchr::memmem;

use crate::dataset::cache_bust::{CacheBust, HEX_LEN, PLACEHOLDER_HEX, WARMUP_MARKER, digest_hex};
use crate::endpoint::PreparedRequest;
use crate::record::Phase;

/// Counts the tokens of a text (the run's tokenizer).
pub type TokenCount = Arc<dyn Fn(&str) -> usize + Send + Sync>;

/// `[rid:` and the placeholder digest, as they appear in a body.
const RID_NEEDLE: &[u8] = b"[rid:000000000000]";
/// `[warmup]\n\n` as JSON writes it.
const WARMUP_NEEDLE: &[u8] = b"[warmup]\\n\\n";

/// One use of a conversation: its digest and the marker's tokens minus the placeholder's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    hex: [u8; HEX_LEN],
    token_delta: i64,
}

/// What the run needs to mark its bodies.
pub struct CacheBustPlan {
    target: CacheBust,
    benchmark_id: String,
    /// Per entry: its conversation id (the digest's trace id).
    trace_ids: Vec<String>,
    /// Per entry: where the marker starts in its first body.
    slots: Vec<Option<usize>>,
    /// Per entry, per recycle pass: the stamp, drawn before the run.
    stamps: Vec<Vec<Stamp>>,
    /// Per phase (warmup, profiling), per entry: conversations started so far.
    started: [Vec<AtomicU32>; 2],
    count: TokenCount,
    placeholder_tokens: usize,
    warmup_tokens: u64,
}

impl CacheBustPlan {
    /// The stamps of every use `order` (entry per conversation started) can make of an
    /// entry, and where each first body holds its marker (a warmup marker is cut out of it).
    pub fn new(
        target: CacheBust,
        benchmark_id: &str,
        trace_ids: &[String],
        order: &[u32],
        first_bodies: &mut [PreparedRequest],
        count: TokenCount,
    ) -> Self {
        let n = trace_ids.len();
        let needle = if target.is_rid() {
            RID_NEEDLE
        } else {
            WARMUP_NEEDLE
        };
        let finder = memmem::Finder::new(needle);
        let slots = first_bodies
            .iter_mut()
            .map(|r| {
                let at = finder.find(&r.body);
                if !target.is_rid() {
                    r.body = cut(&r.body, at);
                }
                at
            })
            .collect();
        let placeholder_tokens = count(&target.marker(PLACEHOLDER_HEX));
        let warmup_tokens = count(WARMUP_MARKER) as u64;
        let mut plan = CacheBustPlan {
            target,
            benchmark_id: benchmark_id.to_string(),
            trace_ids: trace_ids.to_vec(),
            slots,
            stamps: vec![Vec::new(); n],
            started: [0, 1].map(|_| (0..n).map(|_| AtomicU32::new(0)).collect()),
            count,
            placeholder_tokens,
            warmup_tokens,
        };
        if target.is_rid() {
            let mut uses = vec![0u32; n];
            order.iter().for_each(|&e| uses[e as usize] += 1);
            for (entry, &k) in uses.iter().enumerate() {
                plan.stamps[entry] = (0..k.max(1)).map(|pass| plan.stamp(entry, pass)).collect();
            }
        }
        plan
    }

    fn stamp(&self, entry: usize, pass: u32) -> Stamp {
        let hex = digest_hex(
            &self.benchmark_id,
            pass.into(),
            entry as u64,
            &self.trace_ids[entry],
        );
        let tokens = (self.count)(&self.target.marker(&hex));
        Stamp {
            hex: hex.as_bytes().try_into().expect("12 hex characters"),
            token_delta: tokens as i64 - self.placeholder_tokens as i64,
        }
    }

    /// Starts a use of `entry` in `phase`: the marker its requests carry.
    pub fn start(&self, entry: usize, phase: Phase) -> Mark<'_> {
        let kind = if self.target.is_rid() {
            let started = &self.started[usize::from(phase == Phase::Profiling)];
            let pass = started[entry].fetch_add(1, Ordering::Relaxed);
            // Past the drawn order (runs limited by duration): drawn now, once per use.
            let stamp = match self.stamps[entry].get(pass as usize) {
                Some(s) => *s,
                None => self.stamp(entry, pass),
            };
            Kind::Rid(stamp)
        } else if phase == Phase::Warmup {
            Kind::WarmupKeep
        } else {
            Kind::WarmupCut
        };
        Mark {
            plan: self,
            entry,
            kind,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rid(Stamp),
    /// A warmup request of a warmup-isolation run: the body as prepared.
    WarmupKeep,
    /// A profiling request of a warmup-isolation run: the body without the marker.
    WarmupCut,
}

/// One conversation's marker, applied to each of its requests.
pub struct Mark<'a> {
    plan: &'a CacheBustPlan,
    entry: usize,
    kind: Kind,
}

impl Mark<'_> {
    /// The first request's body and input length.
    pub fn first(&self, req: &PreparedRequest) -> (Bytes, u64) {
        let slot = self.plan.slots[self.entry];
        match self.kind {
            Kind::Rid(s) => (
                patch(&req.body, slot, &s.hex),
                req.input_tokens.saturating_add_signed(s.token_delta),
            ),
            Kind::WarmupKeep => (
                put_back(&req.body, slot),
                req.input_tokens + self.plan.warmup_tokens,
            ),
            Kind::WarmupCut => (req.body.clone(), req.input_tokens),
        }
    }

    /// A later turn's body (spliced at send time; the marker is found in it).
    pub fn turn(&self, body: Bytes) -> Bytes {
        match self.kind {
            Kind::Rid(s) => patch(&body, memmem::find(&body, RID_NEEDLE), &s.hex),
            Kind::WarmupKeep => body,
            Kind::WarmupCut => cut(&body, memmem::find(&body, WARMUP_NEEDLE)),
        }
    }

    /// The marker its requests carry and the target, for the raw export (AIPerf's: none
    /// in a warmup-isolation run's profiling requests).
    pub fn tag(&self) -> crate::record::CacheBustTag {
        let marker = match self.kind {
            Kind::Rid(s) => {
                let hex = std::str::from_utf8(&s.hex).expect("hex is ASCII");
                Some(self.plan.target.marker(hex).into())
            }
            Kind::WarmupKeep => Some(WARMUP_MARKER.into()),
            Kind::WarmupCut => None,
        };
        crate::record::CacheBustTag {
            marker,
            target: self.plan.target.as_str(),
        }
    }

    /// A later turn's texts, counted after the exchange: with this request's marker.
    pub fn history_text(&self, text: String) -> String {
        match self.kind {
            Kind::Rid(s) => {
                let placeholder = format!("[rid:{PLACEHOLDER_HEX}]");
                let hex = std::str::from_utf8(&s.hex).expect("hex is ASCII");
                text.replacen(&placeholder, &format!("[rid:{hex}]"), 1)
            }
            Kind::WarmupKeep => text,
            Kind::WarmupCut => text.replacen(WARMUP_MARKER, "", 1),
        }
    }
}

/// A copy of `body` with the digest of the `[rid:` marker at `slot` replaced by `hex`.
fn patch(body: &Bytes, slot: Option<usize>, hex: &[u8; HEX_LEN]) -> Bytes {
    let Some(at) = slot else {
        return body.clone();
    };
    let mut out = body.to_vec();
    let hex_at = at + "[rid:".len();
    out[hex_at..hex_at + HEX_LEN].copy_from_slice(hex);
    Bytes::from(out)
}

/// `body` without the warmup marker at `slot`.
fn cut(body: &Bytes, slot: Option<usize>) -> Bytes {
    let Some(at) = slot else {
        return body.clone();
    };
    let mut out = Vec::with_capacity(body.len() - WARMUP_NEEDLE.len());
    out.extend_from_slice(&body[..at]);
    out.extend_from_slice(&body[at + WARMUP_NEEDLE.len()..]);
    Bytes::from(out)
}

/// `body` with the warmup marker put back at `slot`.
fn put_back(body: &Bytes, slot: Option<usize>) -> Bytes {
    let Some(at) = slot else {
        return body.clone();
    };
    let mut out = Vec::with_capacity(body.len() + WARMUP_NEEDLE.len());
    out.extend_from_slice(&body[..at]);
    out.extend_from_slice(WARMUP_NEEDLE);
    out.extend_from_slice(&body[at..]);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(body: &str, tokens: u64) -> PreparedRequest {
        PreparedRequest {
            body: Bytes::from(body.to_string()),
            input_tokens: tokens,
            num_images: 0,
            max_output_tokens: None,
            audio_seconds: None,
        }
    }

    fn chars() -> TokenCount {
        Arc::new(|s: &str| s.len())
    }

    #[test]
    fn rid_stamps_per_pass_and_phase() {
        let mut bodies = [
            req(
                r#"{"messages":[{"role":"user","content":"[rid:000000000000]\n\nhi"}]}"#,
                10,
            ),
            req(
                r#"{"messages":[{"role":"user","content":"[rid:000000000000]\n\nyo"}]}"#,
                10,
            ),
        ];
        let ids = ["a".to_string(), "b".to_string()];
        let plan = CacheBustPlan::new(
            CacheBust::FirstTurnPrefix,
            "bench",
            &ids,
            &[0, 1, 0],
            &mut bodies,
            chars(),
        );
        let hex = |body: &Bytes| {
            let v: serde_json::Value = serde_json::from_slice(body).unwrap();
            v["messages"][0]["content"].as_str().unwrap()[5..17].to_string()
        };
        let w = plan.start(0, Phase::Warmup).first(&bodies[0]).0;
        let p0 = plan.start(0, Phase::Profiling).first(&bodies[0]).0;
        let p1 = plan.start(0, Phase::Profiling).first(&bodies[0]).0;
        let other = plan.start(1, Phase::Profiling).first(&bodies[1]).0;
        assert_eq!(hex(&w), digest_hex("bench", 0, 0, "a"));
        assert_eq!(
            hex(&w),
            hex(&p0),
            "warmup and the first profiling use share one marker"
        );
        assert_eq!(hex(&p1), digest_hex("bench", 1, 0, "a"));
        assert_eq!(hex(&other), digest_hex("bench", 0, 1, "b"));
        // Past the drawn uses: drawn on the spot, still distinct.
        let p2 = plan.start(0, Phase::Profiling).first(&bodies[0]).0;
        assert_eq!(hex(&p2), digest_hex("bench", 2, 0, "a"));
        // Only the 12 digest bytes change.
        assert_eq!(p2.len(), bodies[0].body.len());
    }

    #[test]
    fn warmup_isolation_cuts_the_marker_from_profiling() {
        let marked = r#"{"messages":[{"role":"user","content":"[warmup]\n\nhi"}]}"#;
        let clean = br#"{"messages":[{"role":"user","content":"hi"}]}"#;
        let mut bodies = [req(marked, 3)];
        let ids = ["a".to_string()];
        let plan = CacheBustPlan::new(
            CacheBust::WarmupIsolationFirstTurn,
            "b",
            &ids,
            &[0],
            &mut bodies,
            chars(),
        );
        // Cut before the run: the prepared body is the body of a run without the flag.
        assert_eq!(&bodies[0].body[..], clean);
        let (w, wt) = plan.start(0, Phase::Warmup).first(&bodies[0]);
        assert_eq!(&w[..], marked.as_bytes());
        assert_eq!(wt, 3 + WARMUP_MARKER.len() as u64);
        let (p, pt) = plan.start(0, Phase::Profiling).first(&bodies[0]);
        assert_eq!(&p[..], clean);
        assert_eq!(pt, 3);
        let m = plan.start(0, Phase::Profiling);
        assert_eq!(&m.turn(Bytes::from(marked))[..], clean);
        assert_eq!(m.history_text("[warmup]\n\nhi r".into()), "hi r");
    }

    /// The figure quoted at the top of this file; run with `--ignored --nocapture`.
    #[test]
    #[ignore]
    fn cost_of_a_stamp() {
        for size in [4 << 10, 64 << 10] {
            let text = "x".repeat(size);
            let body = format!(
                r#"{{"messages":[{{"role":"user","content":"[rid:000000000000]\n\n{text}"}}]}}"#
            );
            let mut bodies = [req(&body, 1)];
            let ids = ["a".to_string()];
            let n = 20_000;
            let order = vec![0; n];
            let plan = CacheBustPlan::new(
                CacheBust::FirstTurnPrefix,
                "b",
                &ids,
                &order,
                &mut bodies,
                chars(),
            );
            let t = std::time::Instant::now();
            for _ in 0..n {
                let m = plan.start(0, Phase::Profiling);
                std::hint::black_box(m.first(&bodies[0]));
            }
            println!(
                "{size} B body: {:.2} µs per stamp",
                t.elapsed().as_secs_f64() * 1e6 / n as f64
            );
        }
    }
}
