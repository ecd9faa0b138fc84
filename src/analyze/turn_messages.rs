//! `aiperf analyze turn-messages`: one HTML page listing what each turn of a run sent,
//! conversation -> turn -> message, read from the raw request export (AIPerf's
//! `--export-level raw`: `raw_records/*.jsonl` or `profile_export_raw.jsonl`). Every turn
//! re-sends the history, so each distinct (role, body) is stored once and turns refer to
//! it by number; the page builds a conversation's turns only when it is opened.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

const RAW_FOLDER: &str = "raw_records";
const RAW_FILE: &str = "profile_export_raw.jsonl";

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub conversations: usize,
    pub turns: usize,
    pub chars: usize,
}

/// One raw record, as far as the page needs it.
#[derive(Debug)]
struct Turn {
    conv: String,
    turn: Option<u64>,
    depth: u64,
    parent_corr: Option<String>,
    x_corr: Option<String>,
    model: Option<String>,
    max_tokens: Option<Value>,
    phase: Option<String>,
    cancelled: bool,
    error: bool,
    messages: Vec<Value>,
    start_ns: u64,
}

/// The raw-record files of `dir` (or `dir` itself when it is a file).
fn files(dir: &Path) -> Vec<PathBuf> {
    if dir.is_file() {
        return vec![dir.to_path_buf()];
    }
    let folder = dir.join(RAW_FOLDER);
    let mut shards: Vec<PathBuf> = std::fs::read_dir(&folder)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    shards.sort();
    if !shards.is_empty() {
        return shards;
    }
    let single = dir.join(RAW_FILE);
    if single.is_file() {
        vec![single]
    } else {
        Vec::new()
    }
}

fn text(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

fn turn_of(r: &Value) -> Turn {
    let md = &r["metadata"];
    let pl = &r["payload"];
    Turn {
        conv: text(&md["conversation_id"]).unwrap_or_else(|| "(none)".into()),
        turn: md["turn_index"].as_u64(),
        depth: md["agent_depth"].as_u64().unwrap_or(0),
        parent_corr: text(&md["parent_correlation_id"]),
        x_corr: text(&md["x_correlation_id"]),
        model: text(&pl["model"]),
        max_tokens: [&pl["max_completion_tokens"], &pl["max_tokens"]]
            .into_iter()
            .find(|v| !v.is_null())
            .cloned(),
        phase: text(&md["benchmark_phase"]),
        cancelled: md["was_cancelled"].as_bool().unwrap_or(false),
        error: !r["error"].is_null(),
        messages: pl["messages"].as_array().cloned().unwrap_or_default(),
        start_ns: md["request_start_ns"].as_u64().unwrap_or(0),
    }
}

fn read(files: &[PathBuf]) -> Result<Vec<Turn>, String> {
    let mut out = Vec::new();
    for f in files {
        let body = std::fs::read_to_string(f)
            .map_err(|e| format!("{}: cannot read it: {e}", f.display()))?;
        for (i, line) in body.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(line) {
                Ok(v) if v.is_object() => out.push(turn_of(&v)),
                Ok(_) => eprintln!(
                    "warning: {}:{}: not a JSON object, skipped",
                    f.display(),
                    i + 1
                ),
                Err(e) => eprintln!(
                    "warning: {}:{}: not JSON ({e}), skipped",
                    f.display(),
                    i + 1
                ),
            }
        }
    }
    Ok(out)
}

/// (role, body): a plain text message keeps its text; anything else (parts, tool calls,
/// other fields) is shown as the JSON that was sent.
fn display(m: &Value) -> (String, String) {
    let Some(obj) = m.as_object() else {
        return match m {
            Value::Null => ("?".into(), String::new()),
            Value::String(s) => ("?".into(), s.clone()),
            other => ("?".into(), other.to_string()),
        };
    };
    let role = match obj.get("role") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "?".into(),
    };
    let rest: serde_json::Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| *k != "role")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let plain = rest.keys().all(|k| k == "content")
        && matches!(
            rest.get("content"),
            None | Some(Value::Null) | Some(Value::String(_))
        );
    if plain {
        let body = rest
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        return (role, body);
    }
    (role, Value::Object(rest).to_string())
}

fn short(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Keeps the part of an id that tells conversations apart (`<trace>::sa:<id>`).
fn disp_id(conv: &str) -> String {
    match conv.split_once("::") {
        Some((base, suffix)) => format!("{}…::{suffix}", short(base, 10)),
        None => format!("{}…", short(conv, 20)),
    }
}

/// The page's data: conversations (roots first, then by first request), their turns, and
/// the table of distinct messages.
fn payload(mut recs: Vec<Turn>, n_files: usize, limits: Limits) -> Value {
    let corr2conv: HashMap<String, String> = recs
        .iter()
        .filter_map(|r| r.x_corr.clone().map(|x| (x, r.conv.clone())))
        .collect();
    // A conversation replayed by several sessions: each session (x_correlation_id) its own
    // entry, numbered by first arrival; without ids, by repeated turn indexes.
    let mut order: Vec<usize> = (0..recs.len()).collect();
    order.sort_by_key(|&i| recs[i].start_ns);
    let mut lanes: HashMap<String, HashMap<String, usize>> = HashMap::new();
    let mut seen: HashMap<(String, Option<u64>), usize> = HashMap::new();
    let mut replay = vec![0usize; recs.len()];
    for i in order {
        let r = &recs[i];
        replay[i] = match &r.x_corr {
            Some(x) => {
                let l = lanes.entry(r.conv.clone()).or_default();
                let n = l.len();
                *l.entry(x.clone()).or_insert(n)
            }
            None => {
                let n = seen.entry((r.conv.clone(), r.turn)).or_insert(0);
                *n += 1;
                *n - 1
            }
        };
    }
    let n_turns = recs.len();
    let n_msgs: usize = recs.iter().map(|r| r.messages.len()).sum();
    let mut roles: BTreeMap<String, usize> = BTreeMap::new();
    for m in recs.iter().flat_map(|r| &r.messages) {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
        *roles.entry(role.to_string()).or_default() += 1;
    }
    let mut legend: Vec<(String, usize)> = roles.into_iter().collect();
    legend.sort_by_key(|r| std::cmp::Reverse(r.1));
    let mut by_conv: BTreeMap<String, Vec<Turn>> = BTreeMap::new();
    for (r, rep) in recs.drain(..).zip(replay) {
        let key = match rep {
            0 => r.conv.clone(),
            n => format!("{} · replay {}", r.conv, n + 1),
        };
        by_conv.entry(key).or_default().push(r);
    }
    let mut conv_order: Vec<&String> = by_conv.keys().collect();
    conv_order.sort_by_key(|c| {
        let turns = &by_conv[*c];
        (
            turns.iter().map(|r| r.depth).min().unwrap_or(0),
            turns.iter().map(|r| r.start_ns).min().unwrap_or(0),
            (*c).clone(),
        )
    });
    let total = conv_order.len();
    let shown: Vec<String> = conv_order
        .into_iter()
        .take(limits.conversations)
        .cloned()
        .collect();
    let mut intern: HashMap<(String, String), usize> = HashMap::new();
    let mut table: Vec<Value> = Vec::new();
    let mut convs = Vec::new();
    for key in &shown {
        let turns = by_conv.get_mut(key).expect("a shown conversation");
        turns.sort_by_key(|r| (r.turn.unwrap_or(0), r.start_ns));
        let depth = turns.iter().map(|r| r.depth).min().unwrap_or(0);
        let parent = turns
            .iter()
            .find_map(|r| r.parent_corr.as_ref())
            .and_then(|p| corr2conv.get(p))
            .map(|c| disp_id(c));
        let mut models: Vec<&str> = turns
            .iter()
            .map(|r| r.model.as_deref().unwrap_or("?"))
            .collect();
        models.sort_unstable();
        models.dedup();
        let nt = turns.len();
        let lane = turns
            .iter()
            .find_map(|r| r.x_corr.as_deref())
            .map(|x| short(x, 8));
        let (base, replay_tag) = key.split_once(" · ").unwrap_or((key, ""));
        let mut turns_out = Vec::new();
        for r in turns.iter().take(limits.turns) {
            let ids: Vec<usize> = r
                .messages
                .iter()
                .map(|m| {
                    let (role, body) = display(m);
                    let next = table.len();
                    let id = *intern.entry((role.clone(), body.clone())).or_insert(next);
                    if id == next {
                        let len = body.chars().count();
                        table.push(json!({
                            "role": role,
                            "len": len,
                            "body": short(&body, limits.chars),
                            "trunc": len.saturating_sub(limits.chars),
                        }));
                    }
                    id
                })
                .collect();
            turns_out.push(json!({
                "ti": r.turn,
                "phase": r.phase,
                "maxTokens": r.max_tokens,
                "cancelled": r.cancelled,
                "error": r.error,
                "ids": ids,
            }));
        }
        convs.push(json!({
            "id": base,
            "disp": disp_id(base),
            "kind": if depth == 0 { "root".to_string() } else { format!("subagent (depth {depth})") },
            "isRoot": depth == 0,
            "parent": parent,
            "lane": lane,
            "models": models.join(","),
            "nt": nt,
            "moreTurns": nt.saturating_sub(limits.turns),
            "replayTag": replay_tag,
            "turns": turns_out,
        }));
    }
    let stat = format!(
        "{total} conversations ({} shown) · {n_turns} turns · {n_msgs} message refs ({} unique) · from {n_files} raw file(s)",
        shown.len(),
        table.len()
    );
    json!({"stat": stat, "legend": legend, "msgs": table, "convs": convs})
}

/// The page for run directory (or raw file) `dir`.
pub fn page(dir: &Path, limits: Limits) -> Result<String, String> {
    let files = files(dir);
    if files.is_empty() {
        return Err(format!(
            "no raw request records under {} ({RAW_FOLDER}/*.jsonl or {RAW_FILE}, as AIPerf's --export-level raw writes them); this build does not write them, so this view reads AIPerf's runs",
            dir.display()
        ));
    }
    let recs = read(&files)?;
    if recs.is_empty() {
        return Err(format!(
            "no raw records could be read under {}",
            dir.display()
        ));
    }
    let data = payload(recs, files.len(), limits);
    // `<` only occurs inside JSON strings, where \u003c reads the same and cannot end the
    // script element.
    let data = data.to_string().replace('<', "\\u003c");
    Ok(TEMPLATE.replace("__DATA__", &data))
}

const TEMPLATE: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Turn messages</title>
<style>
body{font-family:sans-serif;margin:16px;font-size:14px}
summary{cursor:pointer;padding:2px 0}
details details{margin-left:20px}
.msg{margin:4px 0 8px 20px;border-left:3px solid #ccc;padding-left:8px}
.role{font-weight:bold;font-size:12px;color:#555}
.role.user{color:#1f77b4}.role.assistant{color:#2ca02c}.role.system{color:#9467bd}.role.tool{color:#ff7f0e}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font-size:12px}
.note{color:#888;font-size:12px}
.bad{color:#c00}
</style></head><body>
<h2>Turn messages</h2>
<div id="stat" class="note"></div>
<div id="legend" class="note"></div>
<div id="convs"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
const D = JSON.parse(document.getElementById('data').textContent);
document.getElementById('stat').textContent = D.stat;
document.getElementById('legend').textContent = 'roles: ' + D.legend.map(([r, n]) => r + ' ' + n).join(' · ');
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function lazy(details, build) {
  details.addEventListener('toggle', () => {
    if (details.open && !details.dataset.built) { details.dataset.built = '1'; build(); }
  });
}
function turnView(t) {
  const d = el('details');
  const flags = [t.phase, t.maxTokens != null ? 'max_tokens ' + t.maxTokens : null,
    t.cancelled ? 'cancelled' : null, t.error ? 'error' : null].filter(Boolean).join(' · ');
  const s = el('summary', t.error || t.cancelled ? 'bad' : '', 'turn ' + t.ti + ' · ' + t.ids.length + ' messages' + (flags ? ' · ' + flags : ''));
  d.appendChild(s);
  lazy(d, () => {
    for (const id of t.ids) {
      const m = D.msgs[id];
      const box = el('div', 'msg');
      box.appendChild(el('div', 'role ' + m.role, m.role + ' · ' + m.len + ' chars'));
      box.appendChild(el('pre', '', m.body));
      if (m.trunc) box.appendChild(el('div', 'note', '… ' + m.trunc + ' more characters (raise --content-cap)'));
      d.appendChild(box);
    }
  });
  return d;
}
const root = document.getElementById('convs');
for (const c of D.convs) {
  const d = el('details');
  const parts = [c.disp, c.kind];
  if (c.parent) parts.push('parent ' + c.parent);
  if (c.replayTag) parts.push(c.replayTag);
  if (c.lane) parts.push('session ' + c.lane);
  parts.push(c.nt + ' turns', c.models);
  d.appendChild(el('summary', '', parts.join(' · ')));
  lazy(d, () => {
    for (const t of c.turns) d.appendChild(turnView(t));
    if (c.moreTurns) d.appendChild(el('div', 'note', c.moreTurns + ' more turns not shown (raise --max-turns)'));
  });
  root.appendChild(d);
}
</script>
</body></html>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(conv: &str, turn: u64, x: &str, start: u64, messages: Value) -> Turn {
        turn_of(&json!({
            "metadata": {"conversation_id": conv, "turn_index": turn, "x_correlation_id": x, "request_start_ns": start},
            "payload": {"model": "m", "max_tokens": 10, "messages": messages},
        }))
    }

    #[test]
    fn history_is_stored_once_and_replays_apart() {
        let sys = json!({"role": "system", "content": "be brief"});
        let u1 = json!({"role": "user", "content": "hi"});
        let a1 = json!({"role": "assistant", "content": "hello"});
        let u2 = json!({"role": "user", "content": [{"type": "text", "text": "more"}]});
        let recs = vec![
            raw("c1", 0, "s1", 1, json!([sys, u1])),
            raw("c1", 1, "s1", 2, json!([sys, u1, a1, u2])),
            raw("c1", 0, "s2", 3, json!([sys, u1])),
        ];
        let p = payload(
            recs,
            1,
            Limits {
                conversations: 40,
                turns: 60,
                chars: 4,
            },
        );
        let msgs = p["msgs"].as_array().unwrap();
        assert_eq!(msgs.len(), 4);
        assert_eq!(
            msgs[0],
            json!({"role": "system", "len": 8, "body": "be b", "trunc": 4})
        );
        assert_eq!(msgs[3]["body"], "{\"co");
        let convs = p["convs"].as_array().unwrap();
        assert_eq!(convs.len(), 2);
        assert_eq!(convs[0]["turns"][1]["ids"], json!([0, 1, 2, 3]));
        assert_eq!(convs[1]["replayTag"], "replay 2");
        assert_eq!(convs[1]["turns"][0]["ids"], json!([0, 1]));
        assert!(
            p["stat"]
                .as_str()
                .unwrap()
                .starts_with("2 conversations (2 shown) · 3 turns · 8 message refs (4 unique)")
        );
    }

    #[test]
    fn ids_keep_their_distinguishing_part() {
        assert_eq!(disp_id("0123456789abcdef::sa:7"), "0123456789…::sa:7");
        assert_eq!(disp_id("short"), "short…");
    }
}
