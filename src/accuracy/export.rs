//! Grading as the records arrive, and the accuracy outputs: `accuracy_export.jsonl` (one
//! line per graded reply), `accuracy_results.csv` (task, correct, total, unparsed,
//! accuracy) and the console table, as AIPerf writes them.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tracing::{info, warn};

use super::{AccuracyOptions, Grader, Problem, Questions};
use crate::export::table::{Justify, Table};
use crate::metrics::{RecordMetrics, RecordSink};
use crate::record::{Phase, RequestRecord};

pub const JSONL_FILE: &str = "accuracy_export.jsonl";
pub const CSV_FILE: &str = "accuracy_results.csv";

/// Replies graded right, in all, and with the answer found by a fallback.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub correct: u64,
    pub total: u64,
    pub unparsed: u64,
}

impl Counts {
    fn add(&mut self, correct: bool, unparsed: bool) {
        self.total += 1;
        self.correct += u64::from(correct);
        self.unparsed += u64::from(unparsed);
    }

    pub fn accuracy(&self) -> f64 {
        match self.total {
            0 => 0.0,
            n => self.correct as f64 / n as f64,
        }
    }
}

/// The profiling phase's grades so far.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub overall: Counts,
    pub per_task: BTreeMap<String, Counts>,
    /// Profiling requests that failed: no reply to grade.
    pub failed: u64,
    /// The name of the per-reply score the grader gives besides right or wrong (`anls`),
    /// and its sums (overall and per task), reported as means in their own column.
    pub score_name: Option<&'static str>,
    pub score_sum: f64,
    pub task_score_sums: BTreeMap<String, f64>,
}

impl Tally {
    /// The mean score of the replies of `task` (None: all), when the grader gives one.
    pub fn mean_score(&self, task: Option<&str>) -> Option<f64> {
        self.score_name?;
        let (sum, counts) = match task {
            None => (self.score_sum, self.overall),
            Some(t) => (
                self.task_score_sums.get(t).copied().unwrap_or(0.0),
                self.per_task.get(t).copied().unwrap_or_default(),
            ),
        };
        Some(match counts.total {
            0 => 0.0,
            n => sum / n as f64,
        })
    }
}

impl Tally {
    /// AIPerf's `accuracy.*` metrics for the summary JSON and CSV, in its order: overall,
    /// each task (sorted), unparsed overall, unparsed per task.
    pub fn metrics(&self) -> Vec<crate::export::ExtraMetric> {
        if self.overall.total == 0 {
            return Vec::new();
        }
        let metric = |tag: String, header: String, of: u64, c: &Counts| {
            let value = match c.total {
                0 => 0.0,
                n => of as f64 / n as f64,
            };
            crate::export::ExtraMetric {
                tag,
                header,
                unit: "ratio",
                count: c.total,
                sum: of,
                value,
            }
        };
        let tasks = || self.per_task.iter();
        std::iter::once(metric(
            "accuracy.overall".into(),
            "Accuracy (Overall)".into(),
            self.overall.correct,
            &self.overall,
        ))
        .chain(tasks().map(|(t, c)| {
            metric(
                format!("accuracy.task.{t}"),
                format!("Accuracy ({t})"),
                c.correct,
                c,
            )
        }))
        .chain(std::iter::once(metric(
            "accuracy.unparsed".into(),
            "Accuracy Unparsed (Overall)".into(),
            self.overall.unparsed,
            &self.overall,
        )))
        .chain(tasks().map(|(t, c)| {
            metric(
                format!("accuracy.unparsed.task.{t}"),
                format!("Accuracy Unparsed ({t})"),
                c.unparsed,
                c,
            )
        }))
        .collect()
    }
}

/// One line of `accuracy_export.jsonl`: AIPerf's `AccuracyRecordsData`, in its order.
#[derive(Serialize)]
struct Line<'a> {
    session_num: u64,
    conversation_id: &'a str,
    x_request_id: &'a str,
    worker_id: &'a str,
    benchmark_phase: &'a str,
    timestamp_ns: u64,
    task: &'a str,
    grader_name: &'a str,
    passed: bool,
    unparsed: bool,
    confidence: f64,
    expected: &'a str,
    actual: &'a str,
    explanation: &'a str,
    model_output: &'a str,
    model_thinking: Option<&'a str>,
    /// The reply's ANLS (the anls grader only).
    #[serde(skip_serializing_if = "Option::is_none")]
    anls: Option<f64>,
}

/// The run's grading: the questions, the grader and the tally the sink fills.
#[derive(Clone)]
pub struct Grading {
    questions: Arc<Questions>,
    grader: Grader,
    verbose: bool,
    tally: Arc<Mutex<Tally>>,
}

impl Grading {
    pub fn new(questions: Arc<Questions>, opts: &AccuracyOptions) -> Grading {
        Grading {
            questions,
            grader: opts.grader,
            verbose: opts.verbose,
            tally: Arc::new(Mutex::new(Tally {
                score_name: opts.grader.score_name(),
                ..Tally::default()
            })),
        }
    }

    /// A sink that passes every record on to `inner` (the per-record export, if any) and
    /// grades the profiling ones into `<dir>/accuracy_export.jsonl`.
    pub fn sink(
        &self,
        dir: &Path,
        inner: Option<Box<dyn RecordSink>>,
    ) -> std::io::Result<Box<dyn RecordSink>> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(JSONL_FILE);
        let file = File::create(&path)?;
        let out = Arc::new(Mutex::new(BufWriter::new(file)));
        // Running code takes seconds: those grades are made by a few threads, so the
        // collector goes on with the next records.
        let pool = (self.grader == Grader::CodeExecution).then(|| {
            let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
            Pool::new(threads, self.clone(), out.clone())
        });
        Ok(Box::new(GradingSink {
            inner,
            out,
            path,
            grading: self.clone(),
            pool,
        }))
    }

    pub fn tally(&self) -> Tally {
        self.tally.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Writes `accuracy_results.csv` into `dir` and gives the console table.
    pub fn finish(&self, dir: &Path) -> std::io::Result<String> {
        let tally = self.tally();
        let path = dir.join(CSV_FILE);
        std::fs::write(&path, csv(&tally))?;
        info!("Accuracy results exported to {}", path.display());
        Ok(console(&tally))
    }

    /// Grades one reply to `problem`, counts it and writes its line.
    fn grade(
        &self,
        reply: &Reply,
        problem: &Problem,
        out: &Mutex<BufWriter<File>>,
    ) -> std::io::Result<()> {
        // The answer channel is graded; a reply with only reasoning is graded on that.
        let output = match reply.output.is_empty() {
            true => reply.reasoning.as_str(),
            false => reply.output.as_str(),
        };
        let (grade, score) = self.grader.grade_scored(output, &problem.ground_truth);
        let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        tally.overall.add(grade.correct, grade.unparsed);
        if let Some(score) = score {
            tally.score_sum += score;
            *tally
                .task_score_sums
                .entry(problem.task.clone())
                .or_default() += score;
        }
        tally
            .per_task
            .entry(problem.task.clone())
            .or_default()
            .add(grade.correct, grade.unparsed);
        drop(tally);
        if self.verbose {
            let preview: String = output
                .trim()
                .replace('\n', "\\n")
                .chars()
                .take(200)
                .collect();
            info!(
                "[accuracy] session={} correct={} unparsed={} reason={:?} extracted={:?} response_len={} response_preview={:?}",
                reply.session_num,
                super::graders::py_bool(grade.correct),
                super::graders::py_bool(grade.unparsed),
                grade.explanation,
                grade.extracted.chars().take(120).collect::<String>(),
                output.len(),
                preview
            );
        }
        let line = Line {
            session_num: reply.session_num,
            conversation_id: &reply.conversation_id,
            x_request_id: &reply.x_request_id,
            worker_id: crate::export::jsonl::WORKER_ID,
            benchmark_phase: "profiling",
            timestamp_ns: reply.end_wall_ns,
            task: &problem.task,
            grader_name: self.grader.name(),
            passed: grade.correct,
            unparsed: grade.unparsed,
            confidence: if grade.correct { 1.0 } else { 0.0 },
            expected: &grade.expected,
            actual: &grade.extracted,
            explanation: &grade.explanation,
            model_output: output,
            model_thinking: Some(reply.reasoning.as_str()).filter(|t| !t.is_empty()),
            anls: score.filter(|_| self.grader.score_name() == Some("anls")),
        };
        let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")
    }
}

/// What grading needs of a record.
struct Reply {
    session_num: u64,
    conversation_id: String,
    x_request_id: String,
    end_wall_ns: u64,
    output: String,
    reasoning: String,
}

/// Threads that grade replies off the collector's thread (code execution).
struct Pool {
    jobs: Option<std::sync::mpsc::Sender<(Reply, usize)>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    pending: Arc<std::sync::atomic::AtomicUsize>,
    /// The first error writing a line.
    error: Arc<Mutex<Option<std::io::Error>>>,
}

impl Pool {
    fn new(n: usize, grading: Grading, out: Arc<Mutex<BufWriter<File>>>) -> Pool {
        let (tx, rx) = std::sync::mpsc::channel::<(Reply, usize)>();
        let rx = Arc::new(Mutex::new(rx));
        let pending = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let error = Arc::new(Mutex::new(None));
        let threads = (0..n)
            .map(|i| {
                let (rx, grading, out) = (rx.clone(), grading.clone(), out.clone());
                let (pending, error) = (pending.clone(), error.clone());
                std::thread::Builder::new()
                    .name(format!("grader-{i}"))
                    .spawn(move || {
                        loop {
                            let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                            let Ok((reply, index)) = job else { break };
                            let problem = &grading.questions.problems[index];
                            if let Err(e) = grading.grade(&reply, problem, &out) {
                                error
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .get_or_insert(e);
                            }
                            pending.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    })
                    .expect("a grading thread")
            })
            .collect();
        Pool {
            jobs: Some(tx),
            threads,
            pending,
            error,
        }
    }

    fn submit(&self, reply: Reply, index: usize) {
        self.pending
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(jobs) = &self.jobs {
            // The threads live until `wait`: the send cannot fail before.
            let _ = jobs.send((reply, index));
        }
    }

    /// Waits for every reply handed in to be graded.
    fn wait(mut self) -> std::io::Result<()> {
        let pending = self.pending.load(std::sync::atomic::Ordering::SeqCst);
        if pending > 0 {
            info!("Accuracy: waiting for {pending} replies to be graded");
        }
        self.jobs = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        match self.error.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

struct GradingSink {
    inner: Option<Box<dyn RecordSink>>,
    out: Arc<Mutex<BufWriter<File>>>,
    path: PathBuf,
    grading: Grading,
    pool: Option<Pool>,
}

impl RecordSink for GradingSink {
    fn write(&mut self, record: &RequestRecord, metrics: &RecordMetrics) -> std::io::Result<()> {
        if let Some(inner) = &mut self.inner {
            inner.write(record, metrics)?;
        }
        // As AIPerf: warmup replies are not part of the accuracy results.
        if record.phase != Phase::Profiling {
            return Ok(());
        }
        let g = &self.grading;
        if !record.is_valid() {
            g.tally.lock().unwrap_or_else(|e| e.into_inner()).failed += 1;
            return Ok(());
        }
        let Some(index) = g.questions.index(&record.input.conversation_id) else {
            warn!(
                "accuracy: request {} answers no known question ({}); not graded",
                record.x_request_id, record.input.conversation_id
            );
            return Ok(());
        };
        let reply = Reply {
            session_num: record.input.session_num,
            conversation_id: record.input.conversation_id.clone(),
            x_request_id: record.x_request_id.clone(),
            end_wall_ns: record.end_wall_ns,
            output: record.output_text.clone(),
            reasoning: record.reasoning_text.clone(),
        };
        match &self.pool {
            Some(pool) => {
                pool.submit(reply, index);
                Ok(())
            }
            None => g.grade(&reply, &g.questions.problems[index], &self.out),
        }
    }

    fn finish(self: Box<Self>) -> std::io::Result<()> {
        let GradingSink {
            inner,
            out,
            path,
            pool,
            ..
        } = *self;
        if let Some(pool) = pool {
            pool.wait()?;
        }
        out.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
        info!("Accuracy JSONL export: {}", path.display());
        match inner {
            Some(inner) => inner.finish(),
            None => Ok(()),
        }
    }
}

/// AIPerf's CSV: the OVERALL row, then each task (sorted), accuracy with 4 decimals; with
/// a grader that scores each reply (anls), its mean in a last column named after it.
fn csv(t: &Tally) -> String {
    let mut out = String::from("task,correct,total,unparsed,accuracy");
    if let Some(name) = t.score_name {
        out.push(',');
        out.push_str(name);
    }
    out.push('\n');
    if t.overall.total == 0 {
        return out;
    }
    let rows = std::iter::once(("OVERALL", &t.overall, None)).chain(
        t.per_task
            .iter()
            .map(|(k, c)| (k.as_str(), c, Some(k.as_str()))),
    );
    for (task, c, key) in rows {
        out.push_str(&format!(
            "{},{},{},{},{:.4}",
            csv_field(task),
            c.correct,
            c.total,
            c.unparsed,
            c.accuracy()
        ));
        if let Some(score) = t.mean_score(key) {
            out.push_str(&format!(",{score:.4}"));
        }
        out.push('\n');
    }
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `0.75` as `75.00%` (Python's `:.2%`).
fn percent(v: f64) -> String {
    format!("{:.2}%", v * 100.0)
}

/// AIPerf's "Accuracy Benchmark Results" table: each task, then OVERALL; a warning when
/// every reply was unparsed (most likely the server, not the model).
fn console(t: &Tally) -> String {
    let mut out = String::new();
    if t.overall.total == 0 {
        if t.failed > 0 {
            out.push_str(&format!(
                "\nAccuracy: no reply to grade ({} requests failed)\n",
                t.failed
            ));
        }
        return out;
    }
    // rich's min_width=30 for the task column.
    let mut table = Table::new("Accuracy Benchmark Results")
        .column(&format!("{:<30}", "Task"), Justify::Left)
        .column("Correct", Justify::Right)
        .column("Total", Justify::Right)
        .column("Unparsed", Justify::Right)
        .column("Accuracy", Justify::Right);
    if let Some(name) = t.score_name {
        table = table.column(&name.to_uppercase(), Justify::Right);
    }
    let rows = t
        .per_task
        .iter()
        .map(|(k, c)| (k.as_str(), c, Some(k.as_str())))
        .chain(std::iter::once(("OVERALL", &t.overall, None)));
    for (task, c, key) in rows {
        let mut cells = vec![
            task.to_string(),
            c.correct.to_string(),
            c.total.to_string(),
            c.unparsed.to_string(),
            percent(c.accuracy()),
        ];
        if let Some(score) = t.mean_score(key) {
            cells.push(format!("{score:.4}"));
        }
        table.row(cells);
    }
    out.push('\n');
    out.push_str(&table.render(crate::export::console::CONSOLE_WIDTH));
    if t.overall.unparsed >= t.overall.total {
        out.push_str(
            "Warning: every accuracy response was unparsed (accuracy=0). The grader could not \
             extract an answer from any model output. Verify the inference server returns valid \
             completions for this benchmark before trusting the accuracy CSV.\n",
        );
    }
    if t.failed > 0 {
        out.push_str(&format!(
            "Accuracy: {} failed requests had no reply and were not graded\n",
            t.failed
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally() -> Tally {
        let mut t = Tally::default();
        for (task, correct, unparsed) in [
            ("b_task", true, false),
            ("a_task", true, false),
            ("a_task", false, true),
            ("a_task", true, true),
        ] {
            t.overall.add(correct, unparsed);
            t.per_task
                .entry(task.into())
                .or_default()
                .add(correct, unparsed);
        }
        t
    }

    #[test]
    fn csv_rows_are_overall_then_sorted_tasks() {
        assert_eq!(
            csv(&tally()),
            "task,correct,total,unparsed,accuracy\nOVERALL,3,4,2,0.7500\na_task,2,3,2,0.6667\nb_task,1,1,0,1.0000\n"
        );
        assert_eq!(
            csv(&Tally::default()),
            "task,correct,total,unparsed,accuracy\n"
        );
    }

    #[test]
    fn console_table_ends_with_overall() {
        let text = console(&tally());
        assert!(text.contains("Accuracy Benchmark Results"));
        let a = text.find("a_task").unwrap();
        let o = text.find("OVERALL").unwrap();
        assert!(a < o && text.contains("75.00%") && text.contains("66.67%"));
        assert!(!text.contains("Warning"));
        let mut scored = tally();
        scored.score_name = Some("anls");
        scored.score_sum = 2.5;
        scored.task_score_sums.insert("a_task".into(), 1.5);
        scored.task_score_sums.insert("b_task".into(), 1.0);
        assert_eq!(
            csv(&scored),
            "task,correct,total,unparsed,accuracy,anls\nOVERALL,3,4,2,0.7500,0.6250\na_task,2,3,2,0.6667,0.5000\nb_task,1,1,0,1.0000,1.0000\n"
        );
        let text = console(&scored);
        assert!(text.contains("ANLS") && text.contains("0.6250"), "{text}");
        let mut all_unparsed = Tally::default();
        all_unparsed.overall.add(false, true);
        assert!(console(&all_unparsed).contains("every accuracy response was unparsed"));
    }
}
