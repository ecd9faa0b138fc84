//! The swim-lane layout of a run: its requests grouped into sessions, sessions (with the
//! subagent sessions under their root) packed into lanes that are reused once free, and
//! the concurrency curves beneath. Drawing is `swim_draw`'s.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value;

use crate::export::record_line;

/// One request: when it ran and which session it belongs to.
#[derive(Debug, Clone)]
pub struct Request {
    pub start_ns: u64,
    pub end_ns: u64,
    pub turn_index: u64,
    pub depth: u64,
    pub root: Option<String>,
    pub parent: Option<String>,
}

/// One session instance: its id and its requests in turn order.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    pub requests: Vec<Request>,
}

impl Session {
    /// First start, last end (with parallel turns the last turn is not always the last to end).
    pub fn span(&self) -> (u64, u64) {
        let start = self.requests.iter().map(|r| r.start_ns).min().unwrap_or(0);
        let end = self.requests.iter().map(|r| r.end_ns).max().unwrap_or(0);
        (start, end)
    }

    pub fn is_sub(&self) -> bool {
        self.requests.iter().any(|r| r.depth > 0)
    }

    /// The union of its request intervals, in order; the gaps are idle time.
    pub fn busy(&self) -> Vec<(u64, u64)> {
        let mut iv: Vec<(u64, u64)> = self
            .requests
            .iter()
            .map(|r| (r.start_ns, r.end_ns))
            .collect();
        iv.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (s, e) in iv {
            match out.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        out
    }

    /// Each request's sub-row (overlapping requests are stacked) and the rows used.
    pub fn depths(&self) -> (Vec<usize>, usize) {
        let times: Vec<(u64, u64)> = self
            .requests
            .iter()
            .map(|r| (r.start_ns, r.end_ns))
            .collect();
        pack(&times)
    }
}

/// First-fit packing of intervals into rows, by start time: (row of each, rows used).
fn pack(times: &[(u64, u64)]) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..times.len()).collect();
    order.sort_by_key(|&i| times[i].0);
    let mut ends: Vec<u64> = Vec::new();
    let mut rows = vec![0; times.len()];
    for i in order {
        let (s, e) = times[i];
        match ends.iter().position(|&end| s >= end) {
            Some(r) => {
                ends[r] = e;
                rows[i] = r;
            }
            None => {
                ends.push(e);
                rows[i] = ends.len() - 1;
            }
        }
    }
    (rows, ends.len())
}

/// A session placed in its lane: rows from `row0`, one per parallel request.
#[derive(Debug, Clone)]
pub struct Member {
    pub session: usize,
    pub row0: usize,
    pub rows: usize,
    pub depths: Vec<usize>,
}

/// One lane's occupant: a root session and the subagent sessions nested under it.
#[derive(Debug, Clone)]
pub struct Group {
    pub slot: usize,
    pub rows: usize,
    pub span: (u64, u64),
    pub members: Vec<Member>,
}

/// What the chart shows, in seconds from the first request's start.
#[derive(Debug)]
pub struct SwimLane {
    pub sessions: Vec<Session>,
    pub groups: Vec<Group>,
    pub slots: usize,
    /// Rows per slot (the most any of its occupants needed).
    pub slot_rows: Vec<usize>,
    pub t0_ns: u64,
    pub t_max_s: f64,
    /// Requests in flight and sessions alive but between turns, as steps (time, value).
    pub active: Vec<(f64, f64)>,
    pub idle: Vec<(f64, f64)>,
    pub ramp_s: Option<f64>,
    pub bench_s: Option<f64>,
}

impl SwimLane {
    pub fn seconds(&self, ns: u64) -> f64 {
        ns.saturating_sub(self.t0_ns) as f64 / 1e9
    }

    pub fn total_rows(&self) -> usize {
        self.slot_rows.iter().sum()
    }

    /// The first row of each slot.
    pub fn slot_offsets(&self) -> Vec<usize> {
        self.slot_rows
            .iter()
            .scan(0, |acc, r| {
                let at = *acc;
                *acc += r;
                Some(at)
            })
            .collect()
    }

    pub fn peak_active(&self) -> u64 {
        self.active.iter().map(|p| p.1 as u64).max().unwrap_or(0)
    }

    pub fn subagents(&self) -> usize {
        self.sessions.iter().filter(|s| s.is_sub()).count()
    }
}

/// Reads `profile_export.jsonl` (and the summary beside it, when there) of `run_dir`;
/// `ramp` overrides the ramp length read from the summary.
pub fn read(run_dir: &Path, ramp: Option<f64>) -> Result<SwimLane, String> {
    let path = run_dir.join(crate::export::JSONL_FILE);
    if !path.is_file() {
        return Err(format!(
            "{} not found: give a directory `aiperf profile` wrote (with --export-level records, the default)",
            path.display()
        ));
    }
    let mut by_id: BTreeMap<String, Vec<Request>> = BTreeMap::new();
    let mut first_seen: HashMap<String, usize> = HashMap::new();
    let read = record_line::for_each_line(&path, |number, text| {
        let line = record_line::parse(text)
            .map_err(|e| Failure::Line(format!("{}:{number}: not JSON: {e}", path.display())))?;
        let m = &line.metadata;
        if m.was_cancelled.0 == Some(true) {
            return Ok(());
        }
        let (Some(start_ns), Some(end_ns)) =
            (m.request_start_ns.as_u64(), m.request_end_ns.as_u64())
        else {
            return Ok(());
        };
        let id = m
            .x_correlation_id
            .as_str()
            .filter(|s| !s.is_empty())
            .or(m.conversation_id.as_str())
            .unwrap_or("")
            .to_string();
        let n = first_seen.len();
        first_seen.entry(id.clone()).or_insert(n);
        by_id.entry(id).or_default().push(Request {
            start_ns,
            end_ns: end_ns.max(start_ns),
            turn_index: m.turn_index.as_u64().unwrap_or(0),
            depth: m.agent_depth.as_u64().unwrap_or(0),
            root: m
                .root_correlation_id
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            parent: m
                .parent_correlation_id
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        });
        Ok::<_, Failure>(())
    });
    read.map_err(|e| match e {
        Failure::Io(e) => format!("{}: cannot read it: {e}", path.display()),
        Failure::Line(e) => e,
    })?;
    if by_id.is_empty() {
        return Err(format!("{}: no finished requests in it", path.display()));
    }
    let mut sessions: Vec<Session> = by_id
        .into_iter()
        .map(|(id, mut requests)| {
            requests.sort_by_key(|r| r.turn_index);
            Session { id, requests }
        })
        .collect();
    sessions.sort_by_key(|s| first_seen[&s.id]);
    let (ramp_s, bench_s) = summary_marks(run_dir)?;
    Ok(layout(sessions, ramp.or(ramp_s), bench_s))
}

enum Failure {
    Io(std::io::Error),
    Line(String),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Io(e)
    }
}

/// The ramp length of the profiling phase and the benchmark duration, from the summary.
fn summary_marks(run_dir: &Path) -> Result<(Option<f64>, Option<f64>), String> {
    let path = run_dir.join(crate::export::JSON_FILE);
    if !path.is_file() {
        return Ok((None, None));
    }
    let doc = crate::export::read::read_summary(&path)?;
    let config = &doc["input_config"];
    let ramp = config["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["exclude_from_results"] != Value::Bool(true) && p["kind"] != "warmup")
        .find_map(|p| p["concurrency_ramp"]["duration"].as_f64());
    let bench = match &doc["benchmark_duration"] {
        Value::Object(o) => o.get("avg").and_then(Value::as_f64),
        v => v.as_f64(),
    };
    Ok((ramp, bench))
}

/// The lane key of each session: its tree's root. With `root_correlation_id` in the
/// export, that; else walk `parent_correlation_id` up through the sessions present (a
/// parent not in the export is the shared lane of its children).
fn roots(sessions: &[Session]) -> Vec<String> {
    if sessions
        .iter()
        .flat_map(|s| &s.requests)
        .any(|r| r.root.is_some())
    {
        return sessions
            .iter()
            .map(|s| {
                s.requests
                    .iter()
                    .find_map(|r| r.root.clone())
                    .unwrap_or_else(|| s.id.clone())
            })
            .collect();
    }
    let parent: HashMap<&str, Option<&str>> = sessions
        .iter()
        .map(|s| {
            (
                s.id.as_str(),
                s.requests.iter().find_map(|r| r.parent.as_deref()),
            )
        })
        .collect();
    sessions
        .iter()
        .map(|s| {
            let mut seen = vec![s.id.as_str()];
            let mut cur = s.id.as_str();
            while let Some(Some(next)) = parent.get(cur)
                && parent.contains_key(next)
                && !seen.contains(next)
            {
                cur = next;
                seen.push(cur);
            }
            match parent.get(cur).copied().flatten() {
                None => cur.to_string(),
                Some(top) if seen.contains(&top) => s.id.clone(),
                Some(top) => top.to_string(),
            }
        })
        .collect()
}

fn layout(sessions: Vec<Session>, ramp_s: Option<f64>, bench_s: Option<f64>) -> SwimLane {
    let root_of = roots(&sessions);
    let index: HashMap<&str, usize> = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    // Each tree: its root session (when present) and its other sessions, by root id in the
    // order first seen.
    let mut trees: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, root) in root_of.iter().enumerate() {
        match trees.iter_mut().find(|(r, _)| r == root) {
            Some((_, kids)) => kids.push(i),
            None => trees.push((root.clone(), vec![i])),
        }
    }
    let spans: Vec<(u64, u64)> = trees
        .iter()
        .map(|(_, members)| {
            let s: Vec<(u64, u64)> = members.iter().map(|&m| sessions[m].span()).collect();
            (
                s.iter().map(|p| p.0).min().unwrap_or(0),
                s.iter().map(|p| p.1).max().unwrap_or(0),
            )
        })
        .collect();
    // Lanes: a tree takes the first lane free by its start, in order of start.
    let mut order: Vec<usize> = (0..trees.len()).collect();
    order.sort_by_key(|&t| spans[t].0);
    let mut lane_ends: Vec<u64> = Vec::new();
    let mut groups = Vec::new();
    for t in order {
        let (start, end) = spans[t];
        let slot = match lane_ends.iter().position(|&e| start >= e) {
            Some(s) => {
                lane_ends[s] = end;
                s
            }
            None => {
                lane_ends.push(end);
                lane_ends.len() - 1
            }
        };
        let (root, members) = &trees[t];
        let mut placed = Vec::new();
        let root_rows = match index.get(root.as_str()) {
            Some(&r) if members.contains(&r) => {
                let (depths, rows) = sessions[r].depths();
                placed.push(Member {
                    session: r,
                    row0: 0,
                    rows,
                    depths,
                });
                rows
            }
            // A root with no requests of its own: its subagents start at row 0.
            _ => 0,
        };
        let mut kids: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&m| sessions[m].id != *root)
            .collect();
        kids.sort_by_key(|&k| sessions[k].span().0);
        let mut row_ends: Vec<u64> = Vec::new();
        for k in kids {
            let (depths, rows) = sessions[k].depths();
            let (ks, ke) = sessions[k].span();
            let row = (0..=row_ends.len())
                .find(|&r| (0..rows).all(|j| row_ends.get(r + j).is_none_or(|&e| e <= ks)))
                .unwrap_or(row_ends.len());
            if row_ends.len() < row + rows {
                row_ends.resize(row + rows, 0);
            }
            for e in &mut row_ends[row..row + rows] {
                *e = ke;
            }
            placed.push(Member {
                session: k,
                row0: root_rows + row,
                rows,
                depths,
            });
        }
        groups.push(Group {
            slot,
            rows: (root_rows + row_ends.len()).max(1),
            span: (start, end),
            members: placed,
        });
    }
    let slots = lane_ends.len();
    let mut slot_rows = vec![1; slots];
    for g in &groups {
        slot_rows[g.slot] = slot_rows[g.slot].max(g.rows);
    }
    let t0_ns = sessions.iter().map(|s| s.span().0).min().unwrap_or(0);
    let secs = |ns: u64| ns.saturating_sub(t0_ns) as f64 / 1e9;
    let t_max_s = sessions
        .iter()
        .map(|s| secs(s.span().1))
        .fold(0.0, f64::max);
    let requests: Vec<(f64, f64)> = sessions
        .iter()
        .flat_map(|s| &s.requests)
        .map(|r| (secs(r.start_ns), secs(r.end_ns)))
        .collect();
    let alive: Vec<(f64, f64)> = sessions
        .iter()
        .map(|s| s.span())
        .map(|(a, b)| (secs(a), secs(b)))
        .collect();
    let active = sweep(&requests);
    let alive = sweep(&alive);
    let idle = difference(&alive, &active);
    SwimLane {
        sessions,
        groups,
        slots,
        slot_rows,
        t0_ns,
        t_max_s,
        active,
        idle,
        ramp_s,
        bench_s,
    }
}

/// How many intervals are open, as steps: (time, count from then on). An interval is
/// counted on [start, end); ends before starts at the same time.
pub fn sweep(intervals: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut events: Vec<(f64, i64)> = intervals
        .iter()
        .flat_map(|&(s, e)| [(s, 1), (e, -1)])
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut n = 0i64;
    for (t, d) in events {
        n += d;
        match out.last_mut() {
            Some(last) if last.0 == t => last.1 = n as f64,
            _ => out.push((t, n as f64)),
        }
    }
    out
}

/// The value of step function `f` at `t` (0 before its first step).
fn at(f: &[(f64, f64)], t: f64) -> f64 {
    match f.partition_point(|p| p.0 <= t) {
        0 => 0.0,
        i => f[i - 1].1,
    }
}

/// `a - b` on the merged grid of both, clamped at 0.
fn difference(a: &[(f64, f64)], b: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut ts: Vec<f64> = a.iter().chain(b).map(|p| p.0).collect();
    ts.sort_by(f64::total_cmp);
    ts.dedup();
    ts.into_iter()
        .map(|t| (t, (at(a, t) - at(b, t)).max(0.0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(start_s: f64, end_s: f64, turn: u64) -> Request {
        Request {
            start_ns: (start_s * 1e9) as u64,
            end_ns: (end_s * 1e9) as u64,
            turn_index: turn,
            depth: 0,
            root: None,
            parent: None,
        }
    }

    fn session(id: &str, requests: Vec<Request>) -> Session {
        Session {
            id: id.into(),
            requests,
        }
    }

    #[test]
    fn lanes_are_reused_once_free_and_curves_count() {
        let s = vec![
            session("a", vec![req(0.0, 1.0, 0), req(2.0, 3.0, 1)]),
            session("b", vec![req(0.5, 1.5, 0)]),
            session("c", vec![req(1.5, 4.0, 0)]),
        ];
        let lane = layout(s, None, None);
        assert_eq!(lane.slots, 2);
        let slot_of = |id: &str| {
            let g = lane
                .groups
                .iter()
                .find(|g| lane.sessions[g.members[0].session].id == id);
            g.unwrap().slot
        };
        assert_eq!((slot_of("a"), slot_of("b"), slot_of("c")), (0, 1, 1));
        assert_eq!(lane.t_max_s, 4.0);
        // 0: a; 0.5: a+b; 1: b; 1.5: c (b ends as c starts); 2: a+c; 3: c; 4: none.
        assert_eq!(
            lane.active,
            [
                (0.0, 1.0),
                (0.5, 2.0),
                (1.0, 1.0),
                (1.5, 1.0),
                (2.0, 2.0),
                (3.0, 1.0),
                (4.0, 0.0)
            ]
        );
        // a is alive but idle between 1 and 2.
        assert_eq!(at(&lane.idle, 1.2), 1.0);
        assert_eq!(at(&lane.idle, 2.5), 0.0);
        assert_eq!(lane.peak_active(), 2);
        assert_eq!(lane.sessions[0].busy().len(), 2);
    }

    #[test]
    fn parallel_turns_stack_and_subagents_nest_under_their_root() {
        let mut sub = req(0.2, 0.8, 0);
        sub.depth = 1;
        sub.root = Some("root".into());
        let mut r0 = req(0.0, 1.0, 0);
        r0.root = Some("root".into());
        let mut r1 = req(0.5, 0.9, 1);
        r1.root = Some("root".into());
        let s = vec![session("root", vec![r0, r1]), session("sub", vec![sub])];
        let lane = layout(s, None, None);
        assert_eq!(lane.slots, 1);
        let g = &lane.groups[0];
        assert_eq!(g.rows, 3, "two parallel root turns, one subagent row");
        assert_eq!(g.members[0].depths, [0, 1]);
        assert_eq!((g.members[1].row0, g.members[1].rows), (2, 1));
        assert_eq!(lane.subagents(), 1);
    }

    #[test]
    fn parents_absent_from_the_export_share_a_lane() {
        let mut a = req(0.0, 1.0, 0);
        a.parent = Some("gone".into());
        a.depth = 1;
        let mut b = req(0.0, 1.0, 0);
        b.parent = Some("gone".into());
        b.depth = 1;
        let lane = layout(
            vec![session("a", vec![a]), session("b", vec![b])],
            None,
            None,
        );
        assert_eq!(lane.slots, 1);
        assert_eq!(lane.groups[0].rows, 2);
    }
}
