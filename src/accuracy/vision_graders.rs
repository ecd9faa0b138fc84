//! The vision sets' graders, rule-based (no judge model), each as the set's community
//! evaluation defines it:
//!
//! - `relaxed_accuracy` (ChartQA): a numeric answer within 5% of the gold (relative), else
//!   the same text ignoring case (the ChartQA paper, section 5.1; lmms-eval's
//!   `relaxed_correctness`).
//! - `anls` (DocVQA): the average normalised Levenshtein similarity against the best of the
//!   reference answers, zero below 0.5 (the DocVQA challenge's metric, as lmms-eval computes
//!   it). A reply counts correct when its ANLS is at least 0.5; the mean ANLS is reported as
//!   the task score.
//! - `mmmu` (MMMU): the MMMU repository's rule-based parsers: the option letter from a
//!   multiple-choice reply, the numbers and key phrases of an open reply.
//!
//! Golds with several answers (ChartQA's `label`, DocVQA's `answers`) are passed as a JSON
//! array of strings; MMMU's as a JSON object (`question_type`, `answer`, `options`).

use std::sync::LazyLock;

use fancy_regex::Regex;
use serde_json::Value;

use super::graders::{Grade, py_bool};

/// ChartQA's tolerance: 5% of the gold, relative.
const RELAXED_MAX_CHANGE: f64 = 0.05;
/// DocVQA's ANLS threshold: a similarity below it scores 0.
pub const ANLS_THRESHOLD: f64 = 0.5;

/// A gold that is a JSON array of strings, else the text itself as the one answer.
pub fn gold_answers(gold: &str) -> Vec<String> {
    match serde_json::from_str::<Vec<String>>(gold) {
        Ok(list) if !list.is_empty() => list,
        _ => vec![gold.to_string()],
    }
}

/// Answers as shown in the export: one answer as it is, several joined by " | ".
fn shown(answers: &[String]) -> String {
    answers.join(" | ")
}

/// Python's `float(text)`, with a trailing `%` read as hundredths (ChartQA's `_to_float`).
fn chartqa_float(text: &str) -> Option<f64> {
    match text.strip_suffix('%') {
        Some(number) => number
            .trim_end_matches('%')
            .trim()
            .parse::<f64>()
            .ok()
            .map(|v| v / 100.0),
        None => text.trim().parse::<f64>().ok(),
    }
}

/// ChartQA's relaxed correctness of one reply against one gold answer: both numbers and the
/// gold not zero: within 5% of the gold; else equal ignoring case.
pub fn relaxed_correct(pred: &str, target: &str) -> bool {
    match (chartqa_float(pred), chartqa_float(target)) {
        (Some(p), Some(t)) if t != 0.0 => (p - t).abs() / t.abs() <= RELAXED_MAX_CHANGE,
        _ => pred.to_lowercase() == target.to_lowercase(),
    }
}

/// The reply (whitespace trimmed) against each gold answer: right when any is relaxed-equal.
/// Unparsed: an empty reply, or a reply that is not a number when the gold is one.
pub fn relaxed_accuracy(reply: &str, gold: &str) -> Grade {
    let answers: Vec<String> = gold_answers(gold)
        .iter()
        .map(|a| a.trim().to_string())
        .collect();
    let pred = reply.trim().to_string();
    let correct = answers.iter().any(|a| relaxed_correct(&pred, a));
    let numeric_gold = chartqa_float(&answers[0]).is_some();
    let unparsed = pred.is_empty() || numeric_gold && chartqa_float(&pred).is_none();
    Grade {
        correct,
        unparsed,
        explanation: format!(
            "relaxed accuracy ({}): pred '{pred}' vs gold '{}'; match={}{}",
            if numeric_gold {
                "numeric, within 5%"
            } else {
                "text, ignoring case"
            },
            shown(&answers),
            py_bool(correct),
            match (pred.is_empty(), unparsed) {
                (true, _) => " (empty response)",
                (false, true) => " (not a number)",
                _ => "",
            }
        ),
        extracted: pred,
        expected: shown(&answers),
    }
}

/// Python's `" ".join(s.strip().lower().split())`.
fn anls_normal(s: &str) -> Vec<char> {
    s.to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .collect()
}

fn levenshtein(a: &[char], b: &[char]) -> usize {
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// The ANLS of a reply against the reference answers: 1 minus the smallest normalised
/// distance (the distance between the lower-cased, whitespace-collapsed strings over the
/// longer of the two strings as given, as the DocVQA evaluation divides), 0 below 0.5.
pub fn anls_score(reply: &str, answers: &[String]) -> f64 {
    let pred = anls_normal(reply);
    let pred_len = reply.to_uppercase().chars().count();
    let smallest = answers
        .iter()
        .map(|answer| {
            let length = answer.to_uppercase().chars().count().max(pred_len);
            match length {
                0 => 0.0,
                n => levenshtein(&anls_normal(answer), &pred) as f64 / n as f64,
            }
        })
        .fold(f64::INFINITY, f64::min);
    let score = 1.0 - smallest.min(1.0);
    if score < ANLS_THRESHOLD { 0.0 } else { score }
}

/// DocVQA: the reply's ANLS; correct when it is at least 0.5 (not zeroed by the threshold).
/// Unparsed: an empty reply.
pub fn anls(reply: &str, gold: &str) -> (Grade, f64) {
    let answers = gold_answers(gold);
    let score = anls_score(reply, &answers);
    let pred = reply.trim().to_string();
    let correct = score >= ANLS_THRESHOLD;
    let grade = Grade {
        correct,
        unparsed: pred.is_empty(),
        explanation: format!(
            "ANLS {score:.4} of pred '{pred}' against the best of '{}' (threshold 0.5); match={}{}",
            shown(&answers),
            py_bool(correct),
            if pred.is_empty() {
                " (empty response)"
            } else {
                ""
            }
        ),
        extracted: pred,
        expected: shown(&answers),
    };
    (grade, score)
}

/// Python's `ast.literal_eval` of a list of string (or bare number) literals, as MMMU
/// keeps its `options` (`"['$6', \"Mother's\"]"`).
pub fn py_str_list(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    let mut out = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return Some(out);
        };
        if first == '\'' || first == '"' {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next()? {
                    c if c == first => break,
                    '\\' => match chars.next()? {
                        'n' => s.push('\n'),
                        't' => s.push('\t'),
                        'r' => s.push('\r'),
                        'u' => {
                            let hex: String = (0..4).filter_map(|_| chars.next()).collect();
                            s.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                        }
                        c @ ('\\' | '\'' | '"') => s.push(c),
                        c => {
                            s.push('\\');
                            s.push(c);
                        }
                    },
                    c => s.push(c),
                }
            }
            out.push(s);
        } else {
            let token: String = std::iter::from_fn(|| chars.next_if(|c| *c != ',')).collect();
            let token = token.trim();
            token.parse::<f64>().ok()?;
            out.push(token.to_string());
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.next() {
            Some(',') => continue,
            None => return Some(out),
            Some(_) => return None,
        }
    }
}

/// An MMMU question as graded: its type, gold and options (empty for open questions).
#[derive(Debug, Clone, PartialEq)]
pub struct MmmuGold {
    pub multiple_choice: bool,
    pub answer: String,
    pub options: Vec<String>,
}

impl MmmuGold {
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "question_type": if self.multiple_choice { "multiple-choice" } else { "open" },
            "answer": self.answer,
            "options": self.options,
        })
        .to_string()
    }

    /// The gold as `to_json` wrote it; any other text is an open question's answer.
    pub fn parse(gold: &str) -> MmmuGold {
        let v: Value = serde_json::from_str(gold).unwrap_or(Value::Null);
        match (v["question_type"].as_str(), v["answer"].as_str()) {
            (Some(kind), Some(answer)) => MmmuGold {
                multiple_choice: kind == "multiple-choice",
                answer: answer.to_string(),
                options: v["options"]
                    .as_array()
                    .map(|o| {
                        o.iter()
                            .filter_map(|s| s.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            _ => MmmuGold {
                multiple_choice: false,
                answer: gold.to_string(),
                options: Vec::new(),
            },
        }
    }
}

fn letters(n: usize) -> Vec<String> {
    (0..n.min(26))
        .map(|i| char::from(b'A' + i as u8).to_string())
        .collect()
}

/// How a multiple-choice answer was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChoiceFound {
    /// A letter: `(B)`, `B ` or `B.`.
    Letter,
    /// An option's text in a longer reply (a fallback).
    Content,
    /// Nothing (MMMU's script then guesses at random; here the reply is wrong).
    None,
}

/// MMMU's `parse_multi_choice_response`: the reply's punctuation ends stripped, then a
/// bracketed letter `(X)`, else `X ` , else `X.`, else (a reply of more than five words) an
/// option's text; of several candidates the one found last in the reply.
pub fn mmmu_choice(reply: &str, options: &[String]) -> (Option<String>, ChoiceFound) {
    let mut response = reply;
    for c in [',', '.', '!', '?', ';', ':', '\''] {
        response = response.trim_matches(c);
    }
    let response = format!(" {response} ");
    let choices = letters(options.len());
    let mut candidates: Vec<&String> = choices
        .iter()
        .filter(|c| response.contains(&format!("({c})")))
        .collect();
    let bracketed = !candidates.is_empty();
    for pattern in ["{} ", "{}."] {
        if candidates.is_empty() {
            candidates = choices
                .iter()
                .filter(|c| response.contains(&pattern.replace("{}", c)))
                .collect();
        }
    }
    let mut by_content = false;
    if candidates.is_empty() && response.split_whitespace().count() > 5 {
        let lower = response.to_lowercase();
        candidates = choices
            .iter()
            .zip(options)
            .filter(|(_, o)| lower.contains(&o.to_lowercase()))
            .map(|(c, _)| c)
            .collect();
        by_content = !candidates.is_empty();
    }
    let found = match (candidates.is_empty(), by_content) {
        (true, _) => return (None, ChoiceFound::None),
        (false, true) => ChoiceFound::Content,
        (false, false) => ChoiceFound::Letter,
    };
    if candidates.len() == 1 {
        return (Some(candidates[0].clone()), found);
    }
    // The last one in the reply (numpy's argmax: the first of equal positions).
    let lower = response.to_lowercase();
    let position = |c: &String| -> Option<usize> {
        if by_content {
            let i = c.as_bytes()[0] - b'A';
            lower.rfind(&options[i as usize].to_lowercase())
        } else if bracketed {
            response.rfind(&format!("({c})"))
        } else {
            response.rfind(&format!(" {c} "))
        }
    };
    let mut best = candidates[0];
    let mut best_at = position(best);
    for c in &candidates[1..] {
        let at = position(c);
        // None (Python's -1) is below every position.
        if at.map_or(-1, |a| a as i64) > best_at.map_or(-1, |a| a as i64) {
            best = c;
            best_at = at;
        }
    }
    (Some(best.clone()), found)
}

/// A normalised open answer: a number (rounded to 2 decimals) or lower-cased text.
#[derive(Debug, Clone, PartialEq)]
pub enum OpenValue {
    Number(f64),
    Text(String),
}

/// Python's `float(s.replace(",", ""))` succeeding.
fn mmmu_number(s: &str) -> Option<f64> {
    s.replace(',', "").trim().parse::<f64>().ok()
}

/// MMMU's `normalize_str`: a number rounded to 2 decimals, else the lower-cased text (a
/// single character padded with a space on either side, to avoid trivial matches).
pub fn mmmu_normalize(s: &str) -> Vec<OpenValue> {
    let s = s.trim();
    if let Some(v) = mmmu_number(s) {
        let rounded = format!("{v:.2}").parse().unwrap_or(v);
        return vec![OpenValue::Number(rounded)];
    }
    let lower = s.to_lowercase();
    if lower.chars().count() == 1 {
        return vec![
            OpenValue::Text(format!(" {lower}")),
            OpenValue::Text(format!("{lower} ")),
        ];
    }
    vec![OpenValue::Text(lower)]
}

/// MMMU's `extract_numbers`: numbers with thousands commas, in scientific notation, then
/// plain ones.
fn extract_numbers(s: &str) -> Vec<String> {
    static PATTERNS: LazyLock<[Regex; 3]> = LazyLock::new(|| {
        [
            r"-?\b\d{1,3}(?:,\d{3})+\b",
            r"-?\d+(?:\.\d+)?[eE][+-]?\d+",
            r"-?(?:\d+\.\d+|\.\d+|\d+\b)(?![eE][+-]?\d+)(?![,\d])",
        ]
        .map(|p| Regex::new(p).expect("a valid pattern"))
    });
    PATTERNS
        .iter()
        .flat_map(|re| {
            re.find_iter(s)
                .filter_map(Result::ok)
                .map(|m| m.as_str().to_string())
        })
        .collect()
}

/// MMMU's `parse_open_response`: the reply lower-cased and split into lines; of each line
/// the shortest tail after a key phrase ("so ", "is ", "therefore ", "answer ", ...; on the
/// last line also "="), or the whole reply when no line has one; plus every number in
/// those; each normalised, duplicates dropped.
pub fn mmmu_open_predictions(reply: &str) -> Vec<OpenValue> {
    let response = reply.trim().trim_matches('.').to_lowercase();
    // MMMU splits on `\.\s(?=[A-Z])|\n` after lower-casing: only the newlines split.
    let lines: Vec<&str> = response.split('\n').collect();
    let mut indicators = vec![
        "could be ",
        "so ",
        "is ",
        "thus ",
        "therefore ",
        "final ",
        "answer ",
        "result ",
    ];
    let mut keys: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if i == lines.len() - 1 {
            indicators.push("=");
        }
        let mut shortest: Option<String> = None;
        for indicator in &indicators {
            if let Some(tail) = line
                .rsplit(indicator)
                .next()
                .filter(|_| line.contains(indicator))
            {
                let tail = tail.trim().to_string();
                // Python's `not shortest`: an empty tail is replaced by the next one.
                match &shortest {
                    Some(s) if !s.is_empty() && tail.chars().count() >= s.chars().count() => {}
                    _ => shortest = Some(tail),
                }
            }
        }
        if let Some(s) = shortest
            && !s.is_empty()
            && ![":", ",", ".", "!", "?", ";", "'"].contains(&s.as_str())
        {
            keys.push(s);
        }
    }
    if keys.is_empty() {
        keys.push(response.clone());
    }
    let numbers: Vec<String> = keys.iter().flat_map(|k| extract_numbers(k)).collect();
    let mut out: Vec<OpenValue> = Vec::new();
    for v in keys.iter().chain(&numbers).flat_map(|s| mmmu_normalize(s)) {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// MMMU's `eval_open`: a text prediction is right when it contains a normalised gold text;
/// a number when it equals a normalised gold number.
pub fn mmmu_open_correct(golds: &[String], predictions: &[OpenValue]) -> bool {
    let norm: Vec<OpenValue> = golds.iter().flat_map(|g| mmmu_normalize(g)).collect();
    predictions.iter().any(|p| match p {
        OpenValue::Text(pred) => norm.iter().any(|g| match g {
            OpenValue::Text(gold) => pred.contains(gold.as_str()),
            OpenValue::Number(_) => false,
        }),
        number => norm.contains(number),
    })
}

fn shown_value(v: &OpenValue) -> String {
    match v {
        OpenValue::Number(n) => format!("{n}"),
        OpenValue::Text(t) => t.clone(),
    }
}

/// MMMU: a multiple-choice reply's letter must equal the gold letter (unparsed when no
/// letter was found, or only an option's text); an open reply is right when one of its
/// parsed answers matches the gold (unparsed when empty).
pub fn mmmu(reply: &str, gold: &str) -> Grade {
    let gold = MmmuGold::parse(gold);
    if gold.multiple_choice {
        let (letter, found) = mmmu_choice(reply, &gold.options);
        let pred = letter.unwrap_or_default();
        let expected = gold.answer.trim().to_string();
        let correct = !pred.is_empty() && pred == expected;
        return Grade {
            correct,
            unparsed: found != ChoiceFound::Letter,
            explanation: format!(
                "MMMU multiple choice: extracted '{pred}'{}; gold '{expected}'; match={}",
                match found {
                    ChoiceFound::Letter => "",
                    ChoiceFound::Content => " (by an option's text)",
                    ChoiceFound::None => " (no option found)",
                },
                py_bool(correct)
            ),
            extracted: pred,
            expected,
        };
    }
    let golds = py_str_list(&gold.answer)
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| vec![gold.answer.clone()]);
    let predictions = match reply.trim() {
        "" => Vec::new(),
        _ => mmmu_open_predictions(reply),
    };
    let correct = mmmu_open_correct(&golds, &predictions);
    let extracted = predictions
        .iter()
        .map(shown_value)
        .collect::<Vec<_>>()
        .join(" | ");
    Grade {
        correct,
        unparsed: predictions.is_empty(),
        explanation: format!(
            "MMMU open: parsed [{extracted}] vs gold '{}'; match={}",
            shown(&golds),
            py_bool(correct)
        ),
        extracted,
        expected: shown(&golds),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(list: &[&str]) -> String {
        serde_json::to_string(list).unwrap()
    }

    #[test]
    fn relaxed_accuracy_edges() {
        // Exactly 5% off either way is right; beyond it is wrong.
        assert!(relaxed_correct("105", "100"));
        assert!(relaxed_correct("95", "100"));
        assert!(!relaxed_correct("105.1", "100"));
        assert!(!relaxed_correct("94.9", "100"));
        assert!(relaxed_correct("-10.4", "-10"));
        // A percentage is hundredths: "12%" is 0.12, far from 12; equal to 0.12.
        assert!(!relaxed_correct("12%", "12"));
        assert!(relaxed_correct("12%", "0.12"));
        assert!(relaxed_correct("12%", "12%"));
        // A zero gold: compared as text.
        assert!(relaxed_correct("0", "0"));
        assert!(!relaxed_correct("0.0", "0"));
        // Text: equal ignoring case, nothing more.
        assert!(relaxed_correct("Yes", "yes"));
        assert!(!relaxed_correct("Yes.", "yes"));
        assert!(!relaxed_correct("12 million", "12"));

        let g = relaxed_accuracy(" 103 \n", &json(&["100"]));
        assert!(g.correct && !g.unparsed, "{g:?}");
        assert_eq!((g.extracted.as_str(), g.expected.as_str()), ("103", "100"));
        let g = relaxed_accuracy("About 100", &json(&["100"]));
        assert!(!g.correct && g.unparsed, "{g:?}");
        let g = relaxed_accuracy("", &json(&["Brazil"]));
        assert!(!g.correct && g.unparsed);
        let g = relaxed_accuracy("brazil", &json(&["Brazil"]));
        assert!(g.correct && !g.unparsed);
        // Any of several answers; a plain (non-JSON) gold is one answer.
        assert!(relaxed_accuracy("b", &json(&["a", "B"])).correct);
        assert!(relaxed_accuracy("7", "7").correct);
    }

    #[test]
    fn anls_by_hand() {
        let a = |reply: &str, answers: &[&str]| {
            anls_score(
                reply,
                &answers.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        // One substitution in five characters: 1 - 1/5.
        assert!((a("hallo", &["hello"]) - 0.8).abs() < 1e-12);
        // One insertion over the longer (4): 0.75.
        assert!((a("abcd", &["abc"]) - 0.75).abs() < 1e-12);
        // Case and spaces are normalised away.
        assert_eq!(a("  ABC  Def ", &["abc def"]), 1.0);
        // Exactly 0.5 is kept; below it is 0.
        assert_eq!(a("ax", &["ab"]), 0.5);
        assert_eq!(a("xyz", &["abc"]), 0.0);
        assert_eq!(a("abcdx", &["abxyz"]), 0.0);
        // The best answer wins: "1990." is 1 edit from "1990" over 5 characters.
        assert!((a("1990.", &["in 1990", "1990"]) - 0.8).abs() < 1e-12);
        // The divisor is the longer string as given: "a  b" normalises to "a b", 1 edit
        // from "ab", over 4 characters.
        assert!((a("a  b", &["ab"]) - 0.75).abs() < 1e-12);
        assert_eq!(a("", &["ab"]), 0.0);

        let (g, s) = anls("hallo", &json(&["hello", "hi"]));
        assert!(g.correct && !g.unparsed && (s - 0.8).abs() < 1e-12);
        assert_eq!(g.expected, "hello | hi");
        let (g, s) = anls("ax", &json(&["ab"]));
        assert!(g.correct && s == 0.5);
        let (g, s) = anls("  ", &json(&["ab"]));
        assert!(!g.correct && g.unparsed && s == 0.0);
    }

    #[test]
    fn python_list_literals() {
        assert_eq!(
            py_str_list(r#"['$6', "Mother's Day", 'a \'b\'', 'x\\y']"#).unwrap(),
            ["$6", "Mother's Day", "a 'b'", "x\\y"]
        );
        assert_eq!(py_str_list("[]").unwrap(), Vec::<String>::new());
        assert_eq!(py_str_list("[1, 2.5]").unwrap(), ["1", "2.5"]);
        assert!(py_str_list("['open").is_none());
        assert!(py_str_list("B").is_none());
    }

    fn opts(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn mmmu_multiple_choice_parsing() {
        let o = opts(&["$6", "$7", "$8", "$9"]);
        let c = |r: &str| mmmu_choice(r, &o);
        assert_eq!(c("B"), (Some("B".into()), ChoiceFound::Letter));
        assert_eq!(c("(C)"), (Some("C".into()), ChoiceFound::Letter));
        assert_eq!(c("D."), (Some("D".into()), ChoiceFound::Letter));
        assert_eq!(
            c("The answer is A."),
            (Some("A".into()), ChoiceFound::Letter)
        );
        // Bracketed letters win over bare ones; the last bracketed one is taken.
        assert_eq!(
            c("Not (A) nor B but (C) it is"),
            (Some("C".into()), ChoiceFound::Letter)
        );
        // Several bare letters: the last one with spaces around it.
        assert_eq!(c("A or D"), (Some("D".into()), ChoiceFound::Letter));
        // No letter in a reply of more than five words: the option's text.
        assert_eq!(
            c("it costs $8 for the whole set"),
            (Some("C".into()), ChoiceFound::Content)
        );
        // A short reply with no letter: nothing (MMMU would guess).
        assert_eq!(c("no idea"), (None, ChoiceFound::None));

        let gold = MmmuGold {
            multiple_choice: true,
            answer: "B".into(),
            options: o.clone(),
        }
        .to_json();
        let g = mmmu("B", &gold);
        assert!(g.correct && !g.unparsed);
        let g = mmmu("C", &gold);
        assert!(!g.correct && !g.unparsed);
        let g = mmmu("the total would be $7 in all cases", &gold);
        assert!(g.correct && g.unparsed, "{g:?}");
        let g = mmmu("hmm", &gold);
        assert!(!g.correct && g.unparsed && g.extracted.is_empty());
    }

    #[test]
    fn mmmu_open_parsing() {
        let p = mmmu_open_predictions;
        // The tail after "is", and its number, rounded to 2 decimals.
        assert_eq!(
            p("The area is 12.3456 m"),
            vec![
                OpenValue::Text("12.3456 m".into()),
                OpenValue::Number(12.35)
            ]
        );
        // The shortest tail ("=" counts on the last line), then its numbers: "4,000" and,
        // as MMMU's plain-number pattern finds it, "000".
        assert_eq!(
            p("first line\nso x = 4,000"),
            vec![OpenValue::Number(4000.0), OpenValue::Number(0.0)]
        );
        let golds = opts(&["4000"]);
        assert!(mmmu_open_correct(&golds, &p("so x = 4,000")));
        assert!(mmmu_open_correct(
            &opts(&["12.35"]),
            &p("The area is 12.3456 m")
        ));
        // Text golds are found inside the prediction.
        assert!(mmmu_open_correct(&opts(&["Mitosis"]), &p("It is mitosis.")));
        assert!(!mmmu_open_correct(
            &opts(&["meiosis"]),
            &p("It is mitosis.")
        ));
        // A one-letter gold must stand apart.
        assert!(!mmmu_open_correct(&opts(&["a"]), &p("banana")));

        let gold = MmmuGold {
            multiple_choice: false,
            answer: "['7', '7.0']".into(),
            options: Vec::new(),
        }
        .to_json();
        let g = mmmu("Therefore the answer is 7", &gold);
        assert!(g.correct && !g.unparsed, "{g:?}");
        assert_eq!(g.expected, "7 | 7.0");
        let g = mmmu("", &gold);
        assert!(!g.correct && g.unparsed);
        // A gold that is not MMMU's JSON: an open answer.
        assert!(mmmu("It is 3", "3").correct);
    }
}
