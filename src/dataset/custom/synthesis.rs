//! `--synthesis-*`: a mooncake trace reshaped before it is sent, as AIPerf's trace
//! synthesizer does. Prefixes shared by several rows (hash ids seen more than once, up to a
//! row's first unshared block) are stretched or cut (`--synthesis-prefix-len-multiplier`),
//! each row's own part scaled (`--synthesis-prompt-len-multiplier`) with fresh block ids,
//! rows spread over independent copies of the prefix tree (`--synthesis-prefix-root-multiplier`),
//! output lengths scaled and timestamps divided (`--synthesis-speedup-ratio`). Rows longer
//! than `--synthesis-max-isl` are dropped before, outputs capped at `--synthesis-max-osl`
//! after.

use std::collections::HashMap;

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};
use tracing::info;

use super::fields::Line;

/// The `--synthesis-*` flags (AIPerf's defaults change nothing).
#[derive(Debug, Clone, PartialEq)]
pub struct Synthesis {
    pub speedup_ratio: f64,
    pub prefix_len_multiplier: f64,
    pub prefix_root_multiplier: u32,
    pub prompt_len_multiplier: f64,
    pub output_len_multiplier: f64,
    pub max_isl: Option<u64>,
    pub max_osl: Option<u64>,
}

impl Default for Synthesis {
    fn default() -> Synthesis {
        Synthesis {
            speedup_ratio: 1.0,
            prefix_len_multiplier: 1.0,
            prefix_root_multiplier: 1,
            prompt_len_multiplier: 1.0,
            output_len_multiplier: 1.0,
            max_isl: None,
            max_osl: None,
        }
    }
}

impl Synthesis {
    /// Whether any reshaping is asked (the caps alone do not rebuild the trace).
    pub fn reshapes(&self) -> bool {
        self.speedup_ratio != 1.0
            || self.prefix_len_multiplier != 1.0
            || self.prefix_root_multiplier != 1
            || self.prompt_len_multiplier != 1.0
            || self.output_len_multiplier != 1.0
    }

    /// Whether any flag is set at all.
    pub fn is_set(&self) -> bool {
        self != &Synthesis::default()
    }
}

fn u64_of(obj: &serde_json::Map<String, Value>, key: &str) -> Option<u64> {
    obj.get(key).and_then(Value::as_u64)
}

fn hash_ids(obj: &serde_json::Map<String, Value>) -> Vec<u64> {
    obj.get("hash_ids")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// The trace's rows after `s`: those over the ISL cap dropped, reshaped when asked, outputs
/// capped. Fields the synthesizer does not touch pass through.
pub(super) fn apply<'a>(
    rows: Vec<Line<'a>>,
    s: &Synthesis,
    block_size: usize,
    seed: u64,
) -> Vec<Line<'a>> {
    if !s.is_set() {
        return rows;
    }
    let before = rows.len();
    let mut rows: Vec<Line> = rows
        .into_iter()
        .filter(|(_, obj)| match (s.max_isl, u64_of(obj, "input_length")) {
            (Some(max), Some(len)) => len <= max,
            _ => true,
        })
        .collect();
    if rows.len() < before {
        info!(
            "Skipped {} traces because input_length exceeded --synthesis-max-isl {}",
            before - rows.len(),
            s.max_isl.unwrap_or_default()
        );
    }
    if s.reshapes() {
        reshape(&mut rows, s, block_size as u64, seed);
    }
    if let Some(max) = s.max_osl {
        let mut capped = 0;
        for (_, obj) in &mut rows {
            if u64_of(obj, "output_length").is_some_and(|o| o > max) {
                obj.insert("output_length".into(), json!(max));
                capped += 1;
            }
        }
        if capped > 0 {
            info!("{capped} traces exceeded --synthesis-max-osl {max} and were capped to it");
        }
    }
    rows
}

/// AIPerf's multipliers, in its order: shared prefixes stretched or cut, the rows' own
/// blocks scaled with fresh ids, rows moved to one of the prefix-tree copies.
fn reshape(rows: &mut [Line], s: &Synthesis, block_size: u64, seed: u64) {
    let all: Vec<Vec<u64>> = rows.iter().map(|(_, o)| hash_ids(o)).collect();
    let mut seen: HashMap<u64, u32> = HashMap::new();
    for h in all.iter().flatten() {
        *seen.entry(*h).or_default() += 1;
    }
    let shared = |h: &u64| seen.get(h).is_some_and(|n| *n > 1);
    let stretch = if s.prefix_len_multiplier > 1.0 {
        s.prefix_len_multiplier as u64
    } else {
        1
    };
    // Fresh ids start above every stretched shared id.
    let mut max_id = (seen
        .keys()
        .filter(|h| shared(h))
        .max()
        .copied()
        .unwrap_or(0)
        + 1)
        * stretch;
    let mut new_ids: Vec<Vec<u64>> = Vec::with_capacity(rows.len());
    let mut new_lens: Vec<Option<u64>> = Vec::with_capacity(rows.len());
    for ((_, obj), ids) in rows.iter().zip(&all) {
        let input_len = u64_of(obj, "input_length").unwrap_or(0);
        if ids.is_empty() {
            new_ids.push(Vec::new());
            new_lens.push(None);
            continue;
        }
        let prefix: Vec<u64> = ids.iter().copied().take_while(|h| shared(h)).collect();
        let prefix_len = prefix.len() as u64 * block_size;
        // A row shorter than its shared blocks cannot be split: it keeps its length.
        let prompt_len = input_len.saturating_sub(prefix_len);
        let (mut out, new_prefix_len) = if s.prefix_len_multiplier > 1.0 {
            let mut out: Vec<u64> = prefix
                .iter()
                .flat_map(|h| (0..stretch).map(move |j| h * stretch + j))
                .collect();
            let target = (prefix.len() as f64 * s.prefix_len_multiplier).ceil() as u64;
            let extra = target.saturating_sub(out.len() as u64);
            out.extend(max_id + 1..=max_id + extra);
            max_id += extra;
            let len = out.len() as u64 * block_size;
            (out, len)
        } else if s.prefix_len_multiplier < 1.0 {
            let blocks = ((prefix.len() as f64 * s.prefix_len_multiplier) as usize).max(1);
            let out: Vec<u64> = prefix.iter().copied().take(blocks).collect();
            let len = out.len() as u64 * block_size;
            (out, len)
        } else {
            (prefix.clone(), prefix_len)
        };
        let new_prompt_len = (prompt_len as f64 * s.prompt_len_multiplier) as u64;
        let prompt_blocks = new_prompt_len.div_ceil(block_size);
        out.extend(max_id + 1..=max_id + prompt_blocks);
        max_id += prompt_blocks;
        new_lens.push(Some(new_prefix_len + new_prompt_len));
        new_ids.push(out);
    }
    if s.prefix_root_multiplier > 1 {
        let offset = max_id + 1;
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5379_6e74_6865_7369);
        for ids in new_ids.iter_mut().filter(|ids| !ids.is_empty()) {
            let tree = rng.random_range(0..u64::from(s.prefix_root_multiplier));
            for h in ids.iter_mut() {
                *h += tree * offset;
            }
        }
    }
    for (((_, obj), ids), len) in rows.iter_mut().zip(new_ids).zip(new_lens) {
        let mut isl = match len {
            Some(len) => {
                obj.insert("hash_ids".into(), json!(ids));
                len
            }
            None => {
                obj.remove("hash_ids");
                u64_of(obj, "input_length").unwrap_or(block_size)
            }
        };
        if let Some(max) = s.max_isl {
            isl = isl.min(max);
        }
        let literal = ["text_input", "messages", "payload"]
            .iter()
            .any(|k| obj.get(*k).is_some_and(|v| !v.is_null()));
        if !literal {
            obj.insert("input_length".into(), json!(isl));
        }
        if s.speedup_ratio > 0.0
            && let Some(t) = obj.get("timestamp").and_then(Value::as_f64)
        {
            obj.insert(
                "timestamp".into(),
                json!((t / s.speedup_ratio).trunc() as i64),
            );
        }
        if let Some(o) = obj.get("output_length").and_then(Value::as_f64) {
            // Python's round: halves to even.
            let scaled = (o * s.output_len_multiplier).round_ties_even() as u64;
            let capped = s.max_osl.map_or(scaled, |m| scaled.min(m));
            obj.insert("output_length".into(), json!(capped.max(1)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn rows(text: &str) -> Vec<Line<'static>> {
        let file: &'static Path = Path::new("t.jsonl");
        text.lines()
            .enumerate()
            .map(|(i, l)| {
                let Value::Object(o) = serde_json::from_str(l).unwrap() else {
                    panic!()
                };
                (super::super::At { file, line: i + 1 }, o)
            })
            .collect()
    }

    fn field(rows: &[Line], key: &str) -> Vec<Value> {
        rows.iter()
            .map(|(_, o)| o.get(key).cloned().unwrap_or(Value::Null))
            .collect()
    }

    const TRACE: &str = r#"{"timestamp": 1000, "input_length": 1200, "output_length": 5, "hash_ids": [1, 2, 3]}
{"timestamp": 2001, "input_length": 1100, "output_length": 10, "hash_ids": [1, 2, 4]}
{"timestamp": 3000, "input_length": 300, "output_length": 7, "hash_ids": [9]}
{"timestamp": 4000, "text_input": "hello", "output_length": 3}"#;

    #[test]
    fn defaults_change_nothing() {
        let before = rows(TRACE);
        let after = apply(rows(TRACE), &Synthesis::default(), 512, 0);
        assert_eq!(field(&before, "hash_ids"), field(&after, "hash_ids"));
    }

    #[test]
    fn prefixes_stretch_and_prompts_scale_with_fresh_blocks() {
        let s = Synthesis {
            prefix_len_multiplier: 2.0,
            prompt_len_multiplier: 0.5,
            ..Synthesis::default()
        };
        let out = apply(rows(TRACE), &s, 512, 0);
        // Shared [1, 2] (1024 tokens) becomes [2, 3, 4, 5] (2048); the own 176 tokens
        // become 88 in one fresh block (ids above (2 + 1) * 2 = 6).
        assert_eq!(
            field(&out, "hash_ids")[..3],
            [json!([2, 3, 4, 5, 7]), json!([2, 3, 4, 5, 8]), json!([9])]
        );
        assert_eq!(
            field(&out, "input_length")[..3],
            [json!(2048 + 88), json!(2048 + 38), json!(150)]
        );
        // A text row keeps its text and gets no input_length.
        assert!(out[3].1.get("input_length").is_none());
        assert_eq!(out[3].1["text_input"], "hello");
    }

    #[test]
    fn fractional_stretch_adds_fresh_prefix_blocks_and_cuts_keep_one() {
        let s = Synthesis {
            prefix_len_multiplier: 1.5,
            ..Synthesis::default()
        };
        let out = apply(rows(TRACE), &s, 512, 0);
        // ceil(2 * 1.5) = 3 prefix blocks: the two shared ones and one fresh.
        assert_eq!(field(&out, "hash_ids")[0], json!([1, 2, 4, 5]));
        let s = Synthesis {
            prefix_len_multiplier: 0.2,
            ..Synthesis::default()
        };
        let out = apply(rows(TRACE), &s, 512, 0);
        assert_eq!(field(&out, "hash_ids")[0], json!([1, 4]));
        assert_eq!(field(&out, "input_length")[0], json!(512 + 176));
    }

    #[test]
    fn time_output_and_caps() {
        let s = Synthesis {
            speedup_ratio: 2.0,
            output_len_multiplier: 1.5,
            max_isl: Some(1150),
            max_osl: Some(9),
            ..Synthesis::default()
        };
        let out = apply(rows(TRACE), &s, 512, 0);
        // The 1200-token row is dropped before anything else.
        assert_eq!(out.len(), 3);
        assert_eq!(
            field(&out, "timestamp"),
            [json!(1000), json!(1500), json!(2000)]
        );
        // 10 * 1.5 = 15 capped to 9; 7 * 1.5 = 10.5 rounds to even 10, capped to 9; 3 * 1.5
        // = 4.5 rounds to 4.
        assert_eq!(field(&out, "output_length"), [json!(9), json!(9), json!(4)]);
    }

    #[test]
    fn prefix_roots_move_whole_rows_by_one_offset() {
        let s = Synthesis {
            prefix_root_multiplier: 4,
            ..Synthesis::default()
        };
        let many: String = (0..40)
            .map(|i| {
                format!(
                    "{{\"input_length\": 1100, \"output_length\": 1, \"hash_ids\": [1, 2, {}]}}\n",
                    100 + i
                )
            })
            .collect();
        let out = apply(rows(many.trim_end()), &s, 512, 7);
        let mut trees = std::collections::BTreeSet::new();
        for ids in field(&out, "hash_ids") {
            let ids: Vec<u64> = serde_json::from_value(ids).unwrap();
            // Each row is shifted as a whole: its shared blocks stay 1 apart.
            assert_eq!(ids[1] - ids[0], 1);
            trees.insert(ids[0]);
        }
        assert!(trees.len() > 1 && trees.len() <= 4, "{trees:?}");
        assert_eq!(out.len(), 40);
    }
}
