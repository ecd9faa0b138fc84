//! lighteval's extractive match (`MultilingualExtractiveMatchMetric`, English), as AIPerf's
//! `lighteval_expr` (AIME 2024/2025), `lighteval_latex` (MATH-500) and `lighteval_gpqa`
//! (GPQA Diamond) graders configure it. Answers are found by prioritised patterns ("final
//! answer is ...", `\boxed{}`, "Answer: ...", then any LaTeX or number), right-most match
//! first within a priority; the first that parses is the answer, and the first matched text
//! is kept beside it (lighteval's `first_match` fallback). Gold and prediction match when any
//! pair of their answers is equal as values (`mathexpr`) or as the same non-empty text.
//!
//! The patterns follow lighteval's; the values are this crate's parser, not sympy (see
//! `mathexpr`). A reply in which no pattern finds anything is counted as unparsed.

use std::sync::LazyLock;

use fancy_regex::{Captures, Regex};

use super::graders::{Grade, py_bool};
use super::mathexpr::{self, Value};

/// What a pattern set looks for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    /// Plain numbers and arithmetic (`ExprExtractionConfig`).
    Expr,
    /// LaTeX environments and `\boxed{}` (`LatexExtractionConfig`).
    Latex,
    /// A choice letter A-D (`IndicesExtractionConfig`, native letters, anchored only).
    Indices,
}

struct Pattern {
    re: Regex,
    priority: u32,
    target: Target,
}

/// One answer found: its value when it parsed, and the text matched.
#[derive(Debug, Clone)]
enum Found {
    Value(Value, String),
    Text(String),
}

impl Found {
    fn shown(&self) -> &str {
        match self {
            Found::Value(_, s) | Found::Text(s) => s,
        }
    }
}

fn compile(pattern: &str, priority: u32, target: Target) -> Pattern {
    Pattern {
        re: Regex::new(pattern).expect("a valid extraction pattern"),
        priority,
        target,
    }
}

const COLON: &str = "[:]";
const FULL_STOP: &str = r"[\.]";
const COMMA: &str = "[,]";
const ANSWER: &str = "(?i:answer)";

/// lighteval's two "final answer" patterns (priorities 0 and 50) for `target`; `gap` is
/// what may stand between "is:" and the answer, `flags` the pattern's flags.
fn final_answer(flags: &str, gap: &str, target: &str, t: Target) -> [Pattern; 2] {
    [
        compile(
            &format!(r"{flags}(?i:final answer is)\:?\s*{target}\.?\s?I hope"),
            0,
            t,
        ),
        compile(
            &format!(r"{flags}(?i:final answer.{{0,100}}?)\s+is\:?{gap}{target}"),
            50,
            t,
        ),
    ]
}

/// lighteval's number and expression patterns.
fn expr_patterns() -> Vec<Pattern> {
    let number = r"(?:(?P<integer1>-?\d{1,3}(?:[ ,]\d{3})+)(?P<decimal1>\.\d+)?|(?P<integer2>-?\d+)(?P<decimal2>[.,]\d+)|(?P<decimal3>\.\d+)|(?P<integer3>-?\d+))(?P<percent>\s*(?:%|[Pp]ercent|\s*[Pp]ercentage|\s*[Pp]ct))?";
    let ops = r"\+\-\*×\/\^\(\)÷";
    let all = format!(r"[\d\.\s{ops}]");
    let expr = format!(r"(?P<expr>-?\(?-?\d{all}*[{ops}]{all}+\)?)");
    let space = r"(?:\s| )";
    let currency = "[$€£¥₹₽₪₩₫฿₡₢₣₤₥₦₧₨₭₮₯₰₱₲₳₴₵₶₷₸₺₻₼₾₿]";
    let prefix = format!(r"(?:^|{space}|\=)(?:\*\*)?");
    let suffix = format!(r"(?:\*\*)?(?:{FULL_STOP}|{COMMA}|\s?{COLON}|{space}|\)|\$|$)");
    let expr_anchored = format!("(?:{prefix}{expr}{suffix})");
    let number_anchored = format!("(?:{prefix}{currency}?{number})");
    let either = format!("(?:{expr_anchored}|{number_anchored})");
    let t = Target::Expr;
    let mut patterns = Vec::from(final_answer("", "", &either, t));
    patterns.extend([
        compile(
            &format!(r"{ANSWER}\s?{COLON}(?:.{{0,100}}=\s*|.{{0,50}}?){either}(?!\s*=)"),
            100,
            t,
        ),
        compile(
            &format!(r"{ANSWER}(?:.{{0,100}}=\s*|.{{0,50}}?){either}(?!\s*=)"),
            200,
            t,
        ),
        compile(&expr_anchored, 300, t),
        compile(&number_anchored, 300, t),
    ]);
    patterns
}

/// One LaTeX environment (`$...$`, `$$...$$`, `\(...\)`, `\[...\]`, ` [...] `, and in plain
/// context a bare `\frac{a}{b}`), its groups named with `prefix`; `boxed` asks for one
/// holding a `\boxed{}`.
fn latex_env(prefix: &str, boxed: bool) -> String {
    let percent = format!(r"(?P<{prefix}percent>(?:\\?%|[Pp]ercent|[Pp]ercentage|[Pp]ct))");
    let mut contents = [
        r"(?:[^$]|\$(?!\$))".to_string(),
        r"(?:[^\\]|\\(?!\]))".to_string(),
        r"(?:\\[$]|[^\n$])".to_string(),
        r"(?:[^\\\n]|\\(?!\)))".to_string(),
        r"[^\n\]\[]".to_string(),
    ];
    for c in &mut contents {
        *c = if boxed {
            format!(r"{c}*?\\boxed\{{{c}+?\}}{c}*?")
        } else {
            format!("{c}+?")
        };
    }
    let [dd, db, id, ip, ib] = &contents;
    let mut alternatives = vec![
        format!(r"(?<!\\)\$\$(?P<{prefix}latexDisplayDollar>{dd})(?<!\\)\$\$"),
        format!(r"(?<!\\)\\\[(?P<{prefix}latexDisplayBracket>{db})(?<!\\)\\\]"),
        format!(r"(?<!\\|\d)\$(?P<{prefix}latexInlineDollar>{id})(?<!\\)\$"),
        format!(r"(?<!\\)\\\((?P<{prefix}latexInlineParenthesis>{ip})(?<!\\)\\\)"),
        format!(r"\s\[(?P<{prefix}latexInlineBracket>{ib})\]\s"),
    ];
    if !boxed {
        let n = r"-?\d+(?:[.,]\d+)?";
        alternatives.push(format!(
            r"(?P<{prefix}latexFraction>-?\\frac\{{{n}\}}\{{{n}\}})"
        ));
    }
    format!(r"(?:(?:{})\s*{percent}?)", alternatives.join("|"))
}

/// Up to six environments joined by "and", "or" or commas ("1, 2 and 3").
fn latex_envs(boxed: bool) -> String {
    let mut s = latex_env("first_", boxed);
    for i in 1..=5 {
        s.push_str(&format!(
            r"(?:\s*(?:and|or|,)\s*{})?",
            latex_env(&format!("next{i}_"), boxed)
        ));
    }
    s
}

/// lighteval's LaTeX patterns; `boxed_priority` is where `\boxed{}` ranks (0: first).
fn latex_patterns(boxed_priority: u32) -> Vec<Pattern> {
    let l = latex_envs(false);
    let t = Target::Latex;
    let mut patterns = Vec::from(final_answer("(?s)", r"\s*", &l, t));
    patterns.extend([
        compile(&format!(r"(?s){ANSWER}\s?{COLON}.{{0,50}}?{l}"), 100, t),
        compile(&format!(r"(?s){ANSWER}.{{0,50}}?{l}"), 200, t),
        compile(&format!("(?s){l}"), 300, t),
        compile(&format!("(?s){}", latex_envs(true)), boxed_priority, t),
        compile(
            r"(?s)(?P<first_latexBoxed>\\boxed\{.+\})",
            boxed_priority,
            t,
        ),
    ]);
    patterns
}

/// lighteval's choice-letter patterns for four choices (A-D), anchored ones only.
fn indices_patterns() -> Vec<Pattern> {
    let ind = r"(?P<indices>(?:A|\(A\))|(?:B|\(B\))|(?:C|\(C\))|(?:D|\(D\)))";
    let suffix = format!(r"(?:\*\*)?(?:{FULL_STOP}|{COMMA}|\s?{COLON}| |$)");
    let answer = format!(r"(?:^| )(?:\*\*)?{ind}{suffix}");
    let t = Target::Indices;
    let mut patterns = Vec::from(final_answer("", r"\s*", ind, t));
    patterns.extend([
        compile(&format!(r"{ANSWER}\s?{COLON}.{{0,50}}?{answer}"), 100, t),
        compile(&format!(r"{ANSWER}.{{0,50}}?{answer}"), 150, t),
        compile(&format!(r"^(?:\*\*)?{ind}{suffix}"), 200, t),
        compile(&format!(r"\n(?:\*\*)?{ind}{suffix}"), 210, t),
    ]);
    patterns
}

static EXPR: LazyLock<Vec<Pattern>> = LazyLock::new(expr_patterns);
/// Gold answers in LaTeX (MATH-500's solutions): `\boxed{}` after "final answer" phrases.
static LATEX_GOLD: LazyLock<Vec<Pattern>> = LazyLock::new(|| latex_patterns(55));
/// Predictions: `\boxed{}` first.
static LATEX_PRED: LazyLock<Vec<Pattern>> = LazyLock::new(|| latex_patterns(0));
static INDICES: LazyLock<Vec<Pattern>> = LazyLock::new(indices_patterns);

fn group<'t>(c: &Captures<'t, str>, name: &str) -> Option<&'t str> {
    c.name(name).map(|m| m.as_str()).filter(|s| !s.is_empty())
}

/// A number or expression match: its value and text.
fn extract_expr(c: &Captures<str>) -> (Option<Value>, String) {
    let integer = ["integer1", "integer2", "integer3"]
        .iter()
        .find_map(|n| group(c, n));
    let decimal = ["decimal1", "decimal2", "decimal3"]
        .iter()
        .find_map(|n| group(c, n));
    let percent = group(c, "percent").is_some();
    if integer.is_some() || decimal.is_some() {
        let mut int: String = integer
            .unwrap_or("")
            .chars()
            .filter(|c| *c != ',' && *c != ' ')
            .collect();
        let negative = int.starts_with('-');
        int = int
            .trim_start_matches('-')
            .trim_start_matches('0')
            .to_string();
        if int.is_empty() {
            int.push('0');
        }
        let text = format!(
            "{}{int}{}",
            if negative { "-" } else { "" },
            decimal.unwrap_or("").replace(',', ".")
        );
        let value = text.parse::<f64>().ok().map(|v| {
            let num = mathexpr::Ex::Num(v.abs(), decimal.is_some());
            let num = if negative {
                mathexpr::Ex::Neg(Box::new(num))
            } else {
                num
            };
            Value::Expr(if percent {
                mathexpr::Ex::Pct(Box::new(num))
            } else {
                num
            })
        });
        return (value, text);
    }
    let expr = group(c, "expr").unwrap_or("");
    let value = mathexpr::parse(&expr.replace('\n', " ")).filter(|v| matches!(v, Value::Expr(_)));
    (value, expr.to_string())
}

/// A LaTeX match: every environment it joined, normalised; several parsed ones form a set.
fn extract_latex(c: &Captures<str>, names: &[&str]) -> (Option<Value>, String) {
    let mut texts = Vec::new();
    let mut values = Vec::new();
    for prefix in ["first_", "next1_", "next2_", "next3_", "next4_", "next5_"] {
        let Some((name, latex)) = names
            .iter()
            .filter(|n| n.starts_with(prefix) && n.contains("latex"))
            .find_map(|n| group(c, n).map(|v| (*n, v)))
        else {
            continue;
        };
        let boxed_last = name.ends_with("latexBoxed");
        let normalized = normalize_latex(latex, boxed_last);
        let percent = group(c, &format!("{prefix}percent")).is_some();
        let value = mathexpr::parse(&normalized).map(|v| match v {
            Value::Expr(e) if percent => Value::Expr(mathexpr::Ex::Pct(Box::new(e))),
            other => other,
        });
        texts.push(normalized);
        values.push(value);
    }
    if texts.is_empty() {
        return (None, String::new());
    }
    if values.len() > 1 && values.iter().all(Option::is_some) {
        let mut items = Vec::new();
        for v in values.into_iter().flatten() {
            match v {
                Value::Expr(e) => items.push(e),
                Value::Set(s) => items.extend(s),
                _ => return (None, texts.join(" and ")),
            }
        }
        return (Some(Value::Set(items)), texts.join(" and "));
    }
    (values.swap_remove(0), texts.swap_remove(0))
}

/// The contents of each `\boxed{...}` (braces balanced), in order.
fn boxed_contents(text: &str) -> Vec<&str> {
    const TOKEN: &str = "\\boxed{";
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(TOKEN) {
        let start = from + at + TOKEN.len();
        let mut depth = 0;
        let mut end = None;
        for (i, c) in text[start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    end = Some(start + i);
                    break;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else { break };
        out.push(&text[start..end]);
        from = end + 1;
    }
    out
}

/// Words a `\text{}` after a number may hold that are units, not the answer.
const UNITS: &[&str] = &[
    "unit", "units", "cm", "m", "km", "mm", "inch", "inches", "foot", "feet", "ft", "yard",
    "yards", "mile", "miles", "meter", "meters", "degree", "degrees", "dollar", "dollars", "cent",
    "cents", "second", "seconds", "minute", "minutes", "hour", "hours", "day", "days", "mph",
    "pound", "pounds", "square", "sq", "cubic", "percent",
];

/// latex2sympy's normalisation as lighteval asks for it (basic LaTeX, units, equations,
/// `\boxed{}`): what is left is the answer's expression.
fn normalize_latex(latex: &str, boxed_last: bool) -> String {
    static TEXT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\\(?:text|textbf|mathrm|mbox|mathbf|textit)\{([^{}]*)\}").unwrap()
    });
    static NITS_FRAC: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\\([dt]?frac)(\d)(\d)").unwrap());
    static NITS_SQRT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\\sqrt(\d+|[a-zA-Z](?![a-zA-Z]))").unwrap());
    let mut s = latex.to_string();
    let boxes = boxed_contents(&s);
    if !boxes.is_empty() {
        s = if boxed_last {
            boxes[boxes.len() - 1].to_string()
        } else {
            boxes.join(",")
        };
    }
    for (from, to) in [
        ("\\left", ""),
        ("\\right", ""),
        ("\\displaystyle", ""),
        ("\\!", ""),
        ("\\,", ""),
        ("\\;", ""),
        ("\\:", ""),
        ("\\ ", " "),
        ("\\quad", " "),
        ("{,}", ""),
        ("^{\\circ}", ""),
        ("^\\circ", ""),
        ("\\circ", ""),
        ("°", ""),
        ("\\$", ""),
        ("$", ""),
        ("~", " "),
        ("\\dfrac", "\\frac"),
        ("\\tfrac", "\\frac"),
    ] {
        s = s.replace(from, to);
    }
    s = TEXT
        .replace_all(&s, |c: &Captures<str>| {
            let inner = c[1].trim();
            let is_unit = !inner.is_empty()
                && inner.split_whitespace().all(|w| {
                    UNITS.contains(
                        &w.trim_end_matches(['.', '^', '2', '3'])
                            .to_lowercase()
                            .as_str(),
                    )
                });
            if is_unit {
                String::new()
            } else {
                inner.to_string()
            }
        })
        .into_owned();
    s = NITS_FRAC.replace_all(&s, r"\$1{$2}{$3}").into_owned();
    s = NITS_SQRT.replace_all(&s, r"\sqrt{$1}").into_owned();
    // An equation's answer is its right side (`x = 5`).
    if let Some((_, right)) = s.rsplit_once('=')
        && !s.contains("\\le")
        && !s.contains("\\ge")
    {
        s = right.to_string();
    }
    s.trim().trim_end_matches('.').trim().to_string()
}

/// Every answer `text` yields with `patterns` (lighteval's `extract_target_from_pred`,
/// `any_match` extraction with the `first_match` fallback).
fn extract(text: &str, sets: &[&[Pattern]]) -> Vec<Found> {
    let mut all: Vec<&Pattern> = sets.iter().flat_map(|s| s.iter()).collect();
    // Stable: within a priority, indices then LaTeX then expressions, as lighteval orders.
    all.sort_by_key(|p| {
        let kind = match p.target {
            Target::Indices => 0,
            Target::Latex => 1,
            Target::Expr => 2,
        };
        (p.priority, kind)
    });
    let mut found = Vec::new();
    let mut fallbacks = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let priority = all[i].priority;
        let group_end = all[i..]
            .iter()
            .position(|p| p.priority != priority)
            .map_or(all.len(), |n| i + n);
        let mut matches = Vec::new();
        for p in &all[i..group_end] {
            for c in p.re.captures_iter(text).filter_map(Result::ok) {
                let m = c.get(0).expect("group 0");
                matches.push((m.start(), m.end(), p, c));
            }
        }
        // Right-most end first, then left-most start.
        matches.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for (_, _, p, c) in &matches {
            let (value, shown) = match p.target {
                Target::Expr => extract_expr(c),
                Target::Latex => {
                    let names: Vec<&str> = p.re.capture_names().flatten().collect();
                    extract_latex(c, &names)
                }
                Target::Indices => {
                    let letter = c["indices"].replace(['(', ')'], "").trim().to_string();
                    (None, letter)
                }
            };
            if p.target == Target::Indices {
                found.push(Found::Text(shown.clone()));
                fallbacks.push(shown);
                break;
            }
            if !shown.is_empty() {
                fallbacks.push(shown.clone());
            }
            if let Some(v) = value {
                found.push(Found::Value(v, shown));
                break;
            }
        }
        if !found.is_empty() {
            break;
        }
        i = group_end;
    }
    if let Some(first) = fallbacks.into_iter().next() {
        found.push(Found::Text(first));
    }
    found
}

fn same(a: &Found, b: &Found) -> bool {
    match (a, b) {
        (Found::Value(x, _), Found::Value(y, _)) => mathexpr::equal(x, y),
        (Found::Text(x), Found::Text(y)) => {
            let (x, y) = (x.trim(), y.trim());
            !x.is_empty() && x == y
        }
        _ => false,
    }
}

/// Which of AIPerf's lighteval graders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// `expr_gold_metric`: gold a plain number or expression.
    Expr,
    /// `latex_gold_metric`: gold a LaTeX solution with a boxed answer.
    Latex,
    /// `gpqa_metric`: gold and reply a choice letter.
    Gpqa,
}

pub fn grade(metric: Metric, reply: &str, gold: &str) -> Grade {
    let (golds, preds) = match metric {
        Metric::Expr => (
            extract(gold, &[&EXPR]),
            extract(reply, &[&EXPR, &LATEX_PRED]),
        ),
        Metric::Latex => (
            extract(gold, &[&LATEX_GOLD]),
            extract(reply, &[&EXPR, &LATEX_PRED]),
        ),
        Metric::Gpqa => {
            let letter = gold.trim().to_uppercase();
            let gold = if ["A", "B", "C", "D"].contains(&letter.as_str()) {
                vec![Found::Text(letter)]
            } else {
                Vec::new()
            };
            (gold, extract(reply, &[&INDICES]))
        }
    };
    let correct = golds.iter().any(|g| preds.iter().any(|p| same(g, p)));
    let unparsed = preds.is_empty();
    let shown = |f: &[Found]| f.first().map(|f| f.shown().to_string()).unwrap_or_default();
    let (extracted, expected) = (shown(&preds), shown(&golds));
    Grade {
        correct,
        unparsed,
        explanation: format!(
            "lighteval extractive match: gold '{expected}' vs pred '{extracted}'; match={}{}",
            py_bool(correct),
            if unparsed {
                " (no answer found in the response)"
            } else {
                ""
            }
        ),
        extracted,
        expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn right(metric: Metric, reply: &str, gold: &str) -> bool {
        let g = grade(metric, reply, gold);
        assert!(!g.unparsed, "{reply:?}: {}", g.explanation);
        g.correct
    }

    #[test]
    fn aime_answers_in_boxes_phrases_and_numbers() {
        assert!(right(
            Metric::Expr,
            "So the total is 12, hence \\boxed{204}.",
            "204"
        ));
        assert!(right(
            Metric::Expr,
            "The final answer is 204. I hope it is correct.",
            "204"
        ));
        assert!(right(Metric::Expr, "Answer: 033", "33"));
        assert!(right(
            Metric::Expr,
            "We get $x = 25$ so the answer is 25",
            "25"
        ));
        assert!(!right(Metric::Expr, "So \\boxed{205}, not 204", "204"));
        // The box outranks a later number.
        assert!(right(Metric::Expr, "\\boxed{204} (check: 17 + 3)", "204"));
        assert!(right(Metric::Expr, "The answer is 1,024.", "1024"));
        let none = grade(Metric::Expr, "I cannot solve this.", "204");
        assert!(none.unparsed && !none.correct);
    }

    #[test]
    fn math500_gold_is_the_solutions_box() {
        let gold = "Converting, we get $r = 3$ and $\\theta = \\frac{\\pi}{2}$, so \
                    $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.$";
        assert!(right(
            Metric::Latex,
            "Thus the point is $\\boxed{(3, \\frac{\\pi}{2})}$.",
            gold
        ));
        assert!(!right(Metric::Latex, "$\\boxed{(3, \\pi)}$", gold));
        let gold = "The sum is $\\boxed{\\dfrac{14}{3}}$.";
        assert!(right(Metric::Latex, "so \\boxed{\\frac{14}{3}}", gold));
        assert!(right(Metric::Latex, "The final answer is $14/3$", gold));
        assert!(!right(Metric::Latex, "\\boxed{4.67}", gold));
        let gold = "Therefore $\\boxed{x^2+2x}$.";
        assert!(right(Metric::Latex, "$\\boxed{x(x+2)}$", gold));
        let gold = "so it takes $\\boxed{5\\text{ hours}}$";
        assert!(right(Metric::Latex, "\\boxed{5}", gold));
        let gold = "The answer is $\\boxed{\\text{Evelyn}}$.";
        assert!(right(Metric::Latex, "$\\boxed{\\text{Evelyn}}$", gold));
    }

    #[test]
    fn gpqa_letters_need_an_anchor() {
        assert!(right(Metric::Gpqa, "Reasoning...\nAnswer: C", "C"));
        assert!(right(Metric::Gpqa, "B", "B"));
        assert!(right(Metric::Gpqa, "The final answer is (D)", "D"));
        assert!(!right(Metric::Gpqa, "Answer: A", "B"));
        let g = grade(Metric::Gpqa, "It is probably the second option", "B");
        assert!(g.unparsed && !g.correct);
    }
}
