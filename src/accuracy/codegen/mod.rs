//! LiveCodeBench code generation (`lcb_codegeneration`), as AIPerf runs it through lighteval:
//! the problems of `livecodebench/code_generation_lite` (one release, `v4_v5` unless
//! `AIPERF_ACCURACY_LCB_RELEASE_TAG` says otherwise), lighteval's prompt, and the
//! `code_execution` grader: the reply's last fenced code block run on every public and
//! private test case (stopping at the first failure) in a sandboxed `python3`
//! ([`sandbox`]); right when every case passes.

mod pickle;
pub mod sandbox;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Problem;
use super::graders::Grade;
use crate::dataset::public::hub;
use crate::tokenizer::HubEnv;

pub const TASK: &str = "lcb_codegeneration";
const REPO: &str = "livecodebench/code_generation_lite";
/// lighteval's generation size for the task.
const GENERATION: u64 = 32768;

/// AIPerf's variable for the release (the dataset's config name).
pub const RELEASE_ENV: &str = "AIPERF_ACCURACY_LCB_RELEASE_TAG";
const DEFAULT_RELEASE: &str = "v4_v5";
/// AIPerf's ceiling on one problem's grading (all its cases), in seconds.
pub const GRADE_TIMEOUT_ENV: &str = "AIPERF_ACCURACY_LCB_GRADE_TIMEOUT_MAX_S";
/// This build's sandbox settings.
pub const CASE_TIMEOUT_ENV: &str = "AIPERF_ACCURACY_LCB_CASE_TIMEOUT_S";
pub const MEMORY_ENV: &str = "AIPERF_ACCURACY_LCB_MEMORY_MB";
pub const PYTHON_ENV: &str = "AIPERF_ACCURACY_LCB_PYTHON";

/// The sandbox limits and the grading ceiling, read from the environment once.
#[derive(Debug, Clone)]
pub struct Settings {
    pub limits: sandbox::Limits,
    pub grade_timeout: Duration,
}

static SETTINGS: OnceLock<Result<Settings, String>> = OnceLock::new();

/// The settings (checked when the benchmark loads, so a bad value stops the run early).
pub fn settings() -> Result<&'static Settings, String> {
    SETTINGS
        .get_or_init(|| {
            let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
            let number = |name: &str, default: f64, min: f64, max: f64| -> Result<f64, String> {
                match var(name) {
                    None => Ok(default),
                    Some(v) => v
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|n| (min..=max).contains(n))
                        .ok_or_else(|| format!("{name}={v}: expected a number from {min} to {max}")),
                }
            };
            let python = var(PYTHON_ENV).unwrap_or_else(|| "python3".into());
            let python = sandbox::find_python(&python).map_err(|e| {
                format!(
                    "the code_execution grader runs the model's code with Python 3 and {e}; install python3 or set {PYTHON_ENV} to an interpreter"
                )
            })?;
            match sandbox::landlock_abi() {
                0 => tracing::warn!(
                    "code_execution: this kernel does not enforce Landlock; the model's code is limited in time, memory and file size but can write wherever this user can"
                ),
                abi => tracing::info!(
                    "code_execution: the model's code runs under Landlock (ABI {abi}): writes only in its temporary directory"
                ),
            }
            Ok(Settings {
                limits: sandbox::Limits {
                    python,
                    timeout: Duration::from_secs_f64(number(CASE_TIMEOUT_ENV, 6.0, 0.1, 600.0)?),
                    memory_bytes: (number(MEMORY_ENV, 4096.0, 64.0, 1048576.0)? as u64) << 20,
                    output_bytes: 64 << 20,
                },
                grade_timeout: Duration::from_secs_f64(number(
                    GRADE_TIMEOUT_ENV,
                    300.0,
                    1.0,
                    86400.0,
                )?),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The dataset's JSONL files of a release, in order: `release_vN` is versions 1 to N,
/// `vN` version N, `vA_vB` versions A to B, `release_latest` every one (the dataset's
/// loading script; version 1 is `test.jsonl`, version N `testN.jsonl`).
fn release_files(tag: &str) -> Result<Option<Vec<String>>, String> {
    let file = |v: u32| match v {
        1 => "test.jsonl".to_string(),
        v => format!("test{v}.jsonl"),
    };
    let version = |s: &str| s.strip_prefix('v').and_then(|n| n.parse::<u32>().ok());
    let range = if tag == "release_latest" {
        return Ok(None);
    } else if let Some(n) = tag.strip_prefix("release_").and_then(version) {
        Some((1, n))
    } else if let Some((a, b)) = tag.split_once('_') {
        version(a).zip(version(b))
    } else {
        version(tag).map(|n| (n, n))
    };
    match range {
        Some((a, b)) if a >= 1 && a <= b => Ok(Some((a..=b).map(file).collect())),
        _ => Err(format!(
            "{RELEASE_ENV}={tag}: not a release of {REPO} (release_v6, release_latest, v6, v4_v5, ...)"
        )),
    }
}

/// The version a file holds (`test.jsonl` 1, `testN.jsonl` N).
fn file_version(name: &str) -> Option<u32> {
    let n = name.strip_prefix("test")?.strip_suffix(".jsonl")?;
    match n {
        "" => Some(1),
        n => n.parse().ok().filter(|v| *v > 1),
    }
}

/// lighteval's `prepare_prompt`: the instruction, the question, then the starter code to
/// complete or the stdin/stdout scaffold.
pub fn prompt(question: &str, starter_code: &str) -> String {
    let mut query = String::from(
        "You will be given a question (problem specification) and will generate a correct Python program that matches the specification and passes all tests.\n\n",
    );
    query.push_str(&format!("Question: {question}\n\n"));
    if starter_code.is_empty() {
        query.push_str("Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on the sample inputs). Enclose your code within delimiters as follows. Ensure that when the python program runs, it reads the inputs, runs the algorithm and writes output to STDOUT.\n");
        query.push_str("```python\n# YOUR CODE HERE\n```\n\n");
    } else {
        query.push_str("You will use the following starter code to write the solution to the problem and enclose your code within delimiters.\n");
        query.push_str(&format!("```python\n{starter_code}\n```\n\n"));
    }
    query
}

/// The release's problems, one question each, in file order. The gold is the row's
/// `starter_code`, `public_test_cases`, `private_test_cases` and `metadata` as one JSON
/// object (as AIPerf keeps it); the private cases stay encoded until graded.
pub fn load(env: &HubEnv, flag: &str) -> Result<Vec<Problem>, String> {
    settings().map_err(|e| format!("{flag}: {e}"))?;
    let tag = std::env::var(RELEASE_ENV)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| DEFAULT_RELEASE.into());
    let names = release_files(&tag).map_err(|e| format!("{flag}: {e}"))?;
    let wanted = |name: &str| match &names {
        Some(names) => names.iter().any(|n| n == name),
        None => file_version(name).is_some(),
    };
    let mut files = hub::Files::new(env, REPO, "main", &wanted);
    let mut found = Vec::new();
    for i in 0.. {
        match files.get(i) {
            Ok(Some(file)) => found.push(file),
            Ok(None) => break,
            Err(e) if !found.is_empty() && env.offline => {
                tracing::warn!("{flag}: {e}");
                break;
            }
            Err(e) => return Err(format!("{flag}: {e}")),
        }
    }
    found.sort_by_key(|(name, _)| file_version(name));
    let missing: Vec<&String> = names
        .iter()
        .flatten()
        .filter(|n| !found.iter().any(|(f, _)| f == *n))
        .collect();
    if found.is_empty() || !missing.is_empty() {
        let missing = match &names {
            None => "test*.jsonl".to_string(),
            Some(_) => missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        };
        return Err(format!(
            "{flag}: release {tag} of dataset {REPO} needs {missing}, not in the Hugging Face cache ({}){}",
            files.cache_dir().display(),
            if env.offline {
                "; HF_HUB_OFFLINE is set: run once without it to download them"
            } else {
                ""
            }
        ));
    }
    let mut problems = Vec::new();
    for (name, path) in found {
        tracing::info!("Reading {name} of dataset {REPO}");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{flag}: cannot read {}: {e}", path.display()))?;
        for (line_no, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = format!("{REPO} {name} line {}", line_no + 1);
            let row: Value =
                serde_json::from_str(line).map_err(|e| format!("{flag}: {at}: {e}"))?;
            problems.push(problem(&row, problems.len(), &at).map_err(|e| format!("{flag}: {e}"))?);
        }
    }
    Ok(problems)
}

fn problem(row: &Value, index: usize, at: &str) -> Result<Problem, String> {
    let field = |name: &str| row.get(name).and_then(Value::as_str).unwrap_or_default();
    let question = row
        .get("question_content")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{at}: no text field 'question_content'"))?;
    let prompt = prompt(question, field("starter_code"));
    let gold = json!({
        "starter_code": field("starter_code"),
        "public_test_cases": field("public_test_cases"),
        "private_test_cases": field("private_test_cases"),
        "metadata": field("metadata"),
    });
    Ok(Problem {
        id: format!("{TASK}-{index}"),
        task: TASK.into(),
        ground_truth: gold.to_string(),
        messages: vec![("user", prompt.clone())],
        prompt,
        max_tokens: GENERATION,
        stop: None,
        images: Vec::new(),
    })
}

/// lighteval's `extract_code`: the lines between the last two lines holding a fence
/// (```), or nothing when there are fewer than two.
pub fn extract_code(reply: &str) -> String {
    let lines: Vec<&str> = reply.split('\n').collect();
    let fences: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("```"))
        .collect();
    match fences.as_slice() {
        [.., open, close] => lines[open + 1..*close].join("\n"),
        _ => String::new(),
    }
}

/// One test case: its input and expected output.
#[derive(Debug)]
struct Case {
    input: String,
    output: String,
}

/// The problem's cases (public then private) and its function's name (call-based
/// problems), from the gold AIPerf's loader writes.
fn cases(gold: &str) -> Result<(Vec<Case>, Option<String>), String> {
    let payload: Value = serde_json::from_str(gold).map_err(|e| format!("gold not JSON: {e}"))?;
    let text = |name: &str| {
        payload
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let list = |json: &str, what: &str| -> Result<Vec<Case>, String> {
        if json.trim().is_empty() {
            return Ok(Vec::new());
        }
        let items: Vec<Value> =
            serde_json::from_str(json).map_err(|e| format!("{what} not a JSON list: {e}"))?;
        items
            .iter()
            .map(|c| match (c["input"].as_str(), c["output"].as_str()) {
                (Some(i), Some(o)) => Ok(Case {
                    input: i.to_string(),
                    output: o.to_string(),
                }),
                _ => Err(format!("{what}: a case without text input and output")),
            })
            .collect()
    };
    let mut all = list(text("public_test_cases"), "public_test_cases")?;
    let private = text("private_test_cases");
    if !private.trim().is_empty() {
        // Encoded in the dataset; plain JSON in some copies.
        let json = match pickle::decode_private_cases(private) {
            Ok(json) => json,
            Err(e) if private.trim_start().starts_with('[') => {
                tracing::debug!("private_test_cases taken as plain JSON ({e})");
                private.to_string()
            }
            Err(e) => return Err(format!("private_test_cases: {e}")),
        };
        all.extend(list(&json, "private_test_cases")?);
    }
    if all.is_empty() {
        // Every reply would pass an empty suite.
        return Err("the problem has no test cases".into());
    }
    let fn_name = match text("metadata") {
        "" => None,
        m => serde_json::from_str::<Value>(m)
            .map_err(|e| format!("metadata not JSON: {e}"))?
            .get("func_name")
            .and_then(Value::as_str)
            .map(String::from),
    };
    Ok((all, fn_name))
}

/// Grades a reply: right when its code passes every case.
pub fn grade(reply: &str, gold: &str) -> Grade {
    let failure = |reason: String| Grade {
        correct: false,
        unparsed: true,
        extracted: reply.trim().chars().take(200).collect(),
        expected: "<lcb test cases>".into(),
        explanation: format!("LCB grader failed: {reason}"),
    };
    let settings = match settings() {
        Ok(s) => s,
        Err(e) => return failure(e),
    };
    let (cases, fn_name) = match cases(gold) {
        Ok(c) => c,
        Err(e) => return failure(format!("malformed test cases: {e}")),
    };
    let code = extract_code(reply);
    let verdict = if code.is_empty() {
        // Nothing to run (lighteval would run the empty program and fail it).
        Err("no code block extracted".to_string())
    } else {
        run_cases(
            &settings.limits,
            settings.grade_timeout,
            &code,
            &cases,
            fn_name.as_deref(),
        )
    };
    Grade {
        correct: verdict.is_ok(),
        unparsed: code.is_empty(),
        explanation: match &verdict {
            Ok(()) => format!(
                "passed all {} test cases (code length={})",
                cases.len(),
                code.len()
            ),
            Err(why) => format!("{why} (code length={})", code.len()),
        },
        extracted: code,
        expected: "<lcb test cases>".into(),
    }
}

/// Runs the cases in order until one fails (lighteval stops there too).
fn run_cases(
    limits: &sandbox::Limits,
    grade_timeout: Duration,
    code: &str,
    cases: &[Case],
    fn_name: Option<&str>,
) -> Result<(), String> {
    let started = Instant::now();
    let mode = match fn_name {
        Some(name) => sandbox::Mode::Call(name),
        None => sandbox::Mode::Stdio,
    };
    let n = cases.len();
    for (k, case) in cases.iter().enumerate() {
        let at = |what: String| format!("test case {} of {n}: {what}", k + 1);
        if started.elapsed() >= grade_timeout {
            return Err(at(format!(
                "not run, the problem's grading passed {GRADE_TIMEOUT_ENV} ({:.0} s)",
                grade_timeout.as_secs_f64()
            )));
        }
        let outcome = sandbox::run(limits, code, mode, &case.input)
            .map_err(|e| at(format!("cannot run python: {e}")))?;
        let stdout = String::from_utf8_lossy(&outcome.stdout);
        let last_line = |s: &str| {
            s.lines()
                .last()
                .unwrap_or_default()
                .chars()
                .take(200)
                .collect::<String>()
        };
        match outcome.status {
            sandbox::Status::Exited(0) => {}
            sandbox::Status::Exited(3) => {
                return Err(at(format!("no function {}", fn_name.unwrap_or_default())));
            }
            sandbox::Status::Exited(4) => return Err(at("the return value is not JSON".into())),
            sandbox::Status::Exited(c) => {
                return Err(at(format!(
                    "runtime error (exit {c}): {}",
                    last_line(&outcome.stderr_tail)
                )));
            }
            sandbox::Status::Signaled(s) => return Err(at(format!("killed by signal {s}"))),
            sandbox::Status::TimedOut => {
                return Err(at(format!(
                    "time limit ({:.1} s) exceeded",
                    limits.timeout.as_secs_f64()
                )));
            }
            sandbox::Status::OutputTooLarge => return Err(at("output limit exceeded".into())),
        }
        let passed = match mode {
            sandbox::Mode::Stdio => stdio_match(&stdout, &case.output),
            sandbox::Mode::Call(_) => call_match(&stdout, &case.output),
        };
        if !passed {
            return Err(at(format!("wrong answer: got {:?}", last_line(&stdout))));
        }
    }
    Ok(())
}

/// lighteval's stdio check: the same number of (stripped) lines, each equal as text or,
/// failing that, as lists of decimal numbers.
fn stdio_match(got: &str, expected: &str) -> bool {
    let lines =
        |s: &str| -> Vec<String> { s.trim().split('\n').map(|l| l.trim().to_string()).collect() };
    let (got, expected) = (lines(got), lines(expected));
    got.len() == expected.len()
        && got.iter().zip(&expected).all(|(g, e)| {
            g == e
                || match (decimals(g), decimals(e)) {
                    (Some(g), Some(e)) => {
                        g.len() == e.len() && g.iter().zip(&e).all(|(a, b)| a.equals(b))
                    }
                    _ => false,
                }
        })
}

/// A line's whitespace-separated words as Python `Decimal`s, or None when one is not.
fn decimals(line: &str) -> Option<Vec<Decimal>> {
    line.split_whitespace().map(Decimal::parse).collect()
}

/// A decimal number as Python's `Decimal` reads it, kept in a form that compares by value.
#[derive(Debug, Clone, PartialEq)]
enum Decimal {
    /// Sign, significant digits (no leading or trailing zeros; empty for zero) and exponent.
    Finite(bool, String, i64),
    Infinite(bool),
    NaN,
}

impl Decimal {
    fn parse(word: &str) -> Option<Decimal> {
        let (neg, rest) = match word.as_bytes().first()? {
            b'-' => (true, &word[1..]),
            b'+' => (false, &word[1..]),
            _ => (false, word),
        };
        let lower = rest.to_ascii_lowercase();
        if lower == "inf" || lower == "infinity" {
            return Some(Decimal::Infinite(neg));
        }
        for nan in ["nan", "snan"] {
            if let Some(payload) = lower.strip_prefix(nan)
                && payload.bytes().all(|b| b.is_ascii_digit())
            {
                return Some(Decimal::NaN);
            }
        }
        let (mantissa, exponent) = match lower.split_once('e') {
            Some((m, e)) => (m, Some(e)),
            None => (lower.as_str(), None),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = |s: &str| -> Option<String> {
            // Underscores only between digits, as Python allows.
            let b = s.as_bytes();
            let ok = b.iter().enumerate().all(|(i, c)| {
                c.is_ascii_digit()
                    || *c == b'_'
                        && i > 0
                        && i + 1 < b.len()
                        && b[i - 1].is_ascii_digit()
                        && b[i + 1].is_ascii_digit()
            });
            ok.then(|| s.replace('_', ""))
        };
        let (int, frac) = (digits(int)?, digits(frac)?);
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let mut exp: i64 = match exponent {
            None => 0,
            Some(e) => {
                let (eneg, e) = match e.as_bytes().first()? {
                    b'-' => (true, &e[1..]),
                    b'+' => (false, &e[1..]),
                    _ => (false, e),
                };
                let e = digits(e).filter(|e| !e.is_empty())?;
                let v: i64 = e.parse().unwrap_or(i64::MAX / 4).min(i64::MAX / 4);
                if eneg { -v } else { v }
            }
        };
        exp -= frac.len() as i64;
        let all = format!("{int}{frac}");
        let trimmed = all.trim_start_matches('0');
        let significant = trimmed.trim_end_matches('0');
        exp += (trimmed.len() - significant.len()) as i64;
        Some(Decimal::Finite(neg, significant.to_string(), exp))
    }

    /// Python's `==` on two Decimals: by value (NaN equals nothing, -0 equals 0).
    fn equals(&self, other: &Decimal) -> bool {
        match (self, other) {
            (Decimal::Finite(_, a, _), Decimal::Finite(_, b, _))
                if a.is_empty() && b.is_empty() =>
            {
                true
            }
            (Decimal::NaN, _) | (_, Decimal::NaN) => false,
            (a, b) => a == b,
        }
    }
}

/// lighteval's call-based check: the returned value (a tuple taken as a list) equal, as
/// Python compares, to the expected output read as JSON.
fn call_match(got: &str, expected: &str) -> bool {
    match (
        serde_json::from_str::<Value>(got),
        serde_json::from_str::<Value>(expected),
    ) {
        (Ok(g), Ok(e)) => py_equal(&g, &e),
        _ => false,
    }
}

/// Python's `==` on values read from JSON: numbers by value (`1 == 1.0`), booleans as 0 and
/// 1 against numbers, lists item by item, objects key by key.
fn py_equal(a: &Value, b: &Value) -> bool {
    let number = |v: &Value| match v {
        Value::Bool(b) => Some(Num::Int(i128::from(*b))),
        Value::Number(n) => Some(match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Num::Int(i128::from(i)),
            (_, Some(u)) => Num::Int(i128::from(u)),
            _ => Num::Float(n.as_f64().unwrap_or(f64::NAN)),
        }),
        _ => None,
    };
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| py_equal(v, w)))
        }
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => x.equals(y),
            _ => false,
        },
    }
}

#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn equals(self, other: Num) -> bool {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a == b,
            (Num::Float(a), Num::Float(b)) => a == b,
            // Exact: the float must be integral and the same integer.
            (Num::Int(i), Num::Float(f)) | (Num::Float(f), Num::Int(i)) => {
                f.fract() == 0.0 && f.abs() < 1.7e38 && f as i128 == i
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_follow_lighteval() {
        let stdin = prompt("Add two numbers.", "");
        assert!(stdin.starts_with("You will be given a question (problem specification)"));
        assert!(stdin.contains("\n\nQuestion: Add two numbers.\n\nRead the inputs from stdin"));
        assert!(stdin.ends_with("STDOUT.\n```python\n# YOUR CODE HERE\n```\n\n"));
        let starter = prompt("Q", "class Solution:\n    def f(self):");
        assert!(
            starter.ends_with("delimiters.\n```python\nclass Solution:\n    def f(self):\n```\n\n")
        );
    }

    #[test]
    fn code_is_the_last_fenced_block() {
        assert_eq!(
            extract_code("```python\na = 1\n```\ntext\n```python\nb = 2\nc = 3\n```"),
            "b = 2\nc = 3"
        );
        // Any line holding a fence counts, the language tag is not checked.
        assert_eq!(extract_code("x ```\nprint(1)\n``` y"), "print(1)");
        assert_eq!(extract_code("```python\nprint(1)"), "");
        assert_eq!(extract_code("no code"), "");
    }

    #[test]
    fn releases() {
        assert_eq!(
            release_files("v4_v5").unwrap().unwrap(),
            ["test4.jsonl", "test5.jsonl"]
        );
        assert_eq!(
            release_files("release_v2").unwrap().unwrap(),
            ["test.jsonl", "test2.jsonl"]
        );
        assert_eq!(release_files("v1").unwrap().unwrap(), ["test.jsonl"]);
        assert_eq!(release_files("release_latest").unwrap(), None);
        assert!(release_files("v5_v4").is_err() && release_files("latest").is_err());
        assert_eq!(file_version("test.jsonl"), Some(1));
        assert_eq!(file_version("test6.jsonl"), Some(6));
        assert_eq!(file_version("test1.jsonl"), None);
        assert_eq!(file_version("code_generation_lite.py"), None);
    }

    #[test]
    fn stdio_outputs_compare_as_lighteval() {
        assert!(stdio_match("3\n4 5\n", "3\n4 5"));
        assert!(stdio_match("  3  \r\n4   5", "3\n4 5"));
        assert!(stdio_match("1.50 2\n", "1.5 2.0"));
        assert!(stdio_match("1e3 -0", "1000 0"));
        assert!(stdio_match("1_000", "1000"));
        assert!(!stdio_match("3\n4\n", "3"));
        assert!(!stdio_match("1.5", "1.50001"));
        assert!(!stdio_match("Yes", "YES"));
        // Equal text matches before any number is read; NaN equals no number.
        assert!(stdio_match("nan", "nan"));
        assert!(!stdio_match("NaN 1", "nan 1"));
        assert!(!stdio_match("1 2", "1 2 3"));
        // Big integers compare exactly (no float rounding).
        assert!(!stdio_match("50000000000000000", "50000000000000001"));
    }

    #[test]
    fn call_results_compare_as_python() {
        assert!(call_match("[1, 2]", "[1, 2]"));
        assert!(call_match("3.0", "3"));
        assert!(call_match("true", "1"));
        assert!(call_match(r#"{"a": [1]}"#, r#"{"a": [1.0]}"#));
        assert!(!call_match("[1, 2]", "[2, 1]"));
        assert!(!call_match("\"1\"", "1"));
        assert!(!call_match("null", "0"));
        assert!(!call_match("", "0"));
    }

    #[test]
    fn cases_public_then_private() {
        use base64::Engine;
        use std::io::Write;
        let private = r#"[{"input": "2", "output": "4", "testtype": "stdin"}]"#;
        let mut pickle = vec![0x80, 4, 0x8c, private.len() as u8];
        pickle.extend(private.as_bytes());
        pickle.push(b'.');
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&pickle).unwrap();
        let gold = json!({
            "public_test_cases": r#"[{"input": "1", "output": "2", "testtype": "stdin"}]"#,
            "private_test_cases": base64::engine::general_purpose::STANDARD.encode(z.finish().unwrap()),
            "metadata": "{}",
        });
        let (cases, name) = cases(&gold.to_string()).unwrap();
        let pairs: Vec<(&str, &str)> = cases
            .iter()
            .map(|c| (c.input.as_str(), c.output.as_str()))
            .collect();
        assert_eq!(pairs, [("1", "2"), ("2", "4")]);
        assert_eq!(name, None);
        let gold = json!({"public_test_cases": "[]", "private_test_cases": "", "metadata": r#"{"func_name": "f"}"#});
        assert!(
            super::cases(&gold.to_string())
                .unwrap_err()
                .contains("no test cases")
        );
        // A reply is graded against nothing malformed: unparsed, wrong.
        let g = grade("```python\nprint(1)\n```", "not json");
        assert!(!g.correct && g.unparsed && g.explanation.starts_with("LCB grader failed"));
    }
}
