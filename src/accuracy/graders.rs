//! The graders: AIPerf's ports of lighteval's and DeepEval's answer checks. Each returns
//! whether the reply is right and whether its answer had to be dug out by a fallback
//! (`unparsed`: the model did not answer in the expected format; a right answer found by
//! a fallback still counts as right).

use std::sync::LazyLock;

use fancy_regex::Regex;

use super::extractive::{self, Metric};

/// A grader by AIPerf's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grader {
    /// lighteval's `quasi_exact_match_gsm8k`, with AIPerf's last-number fallback.
    Gsm8k,
    /// lighteval's ExactMatches on the first line (A-D), with AIPerf's letter fallbacks.
    MultipleChoice,
    /// The MMLU-Pro cascade (A-J): "answer is (X)", then "Answer: X", then a lone letter.
    MmluPro,
    /// DeepEval's `exact_match_score`: stripped strings equal, case-sensitive.
    ExactMatch,
    /// AIPerf's `math` grader without sympy: `\boxed{}` answers, MATH normalisation.
    Math,
    /// lighteval's `expr_gold_metric` (AIME 2024/2025).
    LightevalExpr,
    /// lighteval's `latex_gold_metric` (MATH-500).
    LightevalLatex,
    /// lighteval's `gpqa_metric` (GPQA Diamond).
    LightevalGpqa,
    /// lighteval's `codegen_metrics` (LiveCodeBench): the reply's code run on every test
    /// case in a sandboxed `python3`.
    CodeExecution,
    /// Vision (not in AIPerf): ChartQA's relaxed accuracy (numbers within 5%).
    RelaxedAccuracy,
    /// Vision (not in AIPerf): DocVQA's ANLS; right at 0.5 or more, the mean reported.
    Anls,
    /// Vision (not in AIPerf): MMMU's rule-based answer parsers.
    Mmmu,
}

const BUILT: &[Grader] = &[
    Grader::Gsm8k,
    Grader::MultipleChoice,
    Grader::MmluPro,
    Grader::ExactMatch,
    Grader::Math,
    Grader::LightevalExpr,
    Grader::LightevalLatex,
    Grader::LightevalGpqa,
    Grader::CodeExecution,
    Grader::RelaxedAccuracy,
    Grader::Anls,
    Grader::Mmmu,
];

/// One graded reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Grade {
    pub correct: bool,
    pub unparsed: bool,
    /// The answer taken from the reply.
    pub extracted: String,
    /// The expected answer, normalised as compared.
    pub expected: String,
    /// Why it was graded so.
    pub explanation: String,
}

impl Grader {
    pub fn name(self) -> &'static str {
        match self {
            Grader::Gsm8k => "lighteval_gsm8k",
            Grader::MultipleChoice => "multiple_choice",
            Grader::MmluPro => "mmlu_pro",
            Grader::ExactMatch => "exact_match",
            Grader::Math => "math",
            Grader::LightevalExpr => "lighteval_expr",
            Grader::LightevalLatex => "lighteval_latex",
            Grader::LightevalGpqa => "lighteval_gpqa",
            Grader::CodeExecution => "code_execution",
            Grader::RelaxedAccuracy => "relaxed_accuracy",
            Grader::Anls => "anls",
            Grader::Mmmu => "mmmu",
        }
    }

    /// The grader called `name`, or why there is none.
    pub fn lookup(name: &str) -> Result<Grader, String> {
        let name = name.trim();
        if let Some(g) = BUILT.iter().find(|g| g.name().eq_ignore_ascii_case(name)) {
            return Ok(*g);
        }
        let built = BUILT
            .iter()
            .map(|g| g.name())
            .collect::<Vec<_>>()
            .join(", ");
        Err(format!(
            "--accuracy-grader {name}: is not a grader name; the graders are: {built}"
        ))
    }

    pub fn grade(self, reply: &str, gold: &str) -> Grade {
        match self {
            Grader::Gsm8k => gsm8k(reply, gold),
            Grader::MultipleChoice => multiple_choice(reply, gold),
            Grader::MmluPro => mmlu_pro(reply, gold),
            Grader::ExactMatch => exact_match(reply, gold),
            Grader::Math => super::math::grade(reply, gold),
            Grader::LightevalExpr => extractive::grade(Metric::Expr, reply, gold),
            Grader::LightevalLatex => extractive::grade(Metric::Latex, reply, gold),
            Grader::LightevalGpqa => extractive::grade(Metric::Gpqa, reply, gold),
            Grader::CodeExecution => super::codegen::grade(reply, gold),
            Grader::RelaxedAccuracy => super::vision_graders::relaxed_accuracy(reply, gold),
            Grader::Anls => super::vision_graders::anls(reply, gold).0,
            Grader::Mmmu => super::vision_graders::mmmu(reply, gold),
        }
    }

    /// The name of the score it gives each reply besides right or wrong (`anls`), if any.
    pub fn score_name(self) -> Option<&'static str> {
        match self {
            Grader::Anls => Some("anls"),
            _ => None,
        }
    }

    /// The grade, and the reply's score when the grader gives one (`score_name`).
    pub fn grade_scored(self, reply: &str, gold: &str) -> (Grade, Option<f64>) {
        match self {
            Grader::Anls => {
                let (grade, score) = super::vision_graders::anls(reply, gold);
                (grade, Some(score))
            }
            _ => (self.grade(reply, gold), None),
        }
    }
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid pattern")
}

const INVALID: &str = "[invalid]";

/// lighteval's `gsm8k_normalizer`: the number after `####`, commas removed.
fn gsm8k_normalizer(text: &str) -> String {
    static ANS: LazyLock<Regex> = LazyLock::new(|| re(r"#### (\-?[0-9\.\,]+)"));
    match ANS.captures(text).ok().flatten() {
        Some(c) => c[1].trim().replace(',', ""),
        None => INVALID.to_string(),
    }
}

/// The reply's number: after `####` when there is one (lighteval), else the last number
/// in the reply (AIPerf's fallback for chat models, flagged unparsed).
fn gsm8k_prediction(reply: &str) -> (String, bool) {
    static NUMBER: LazyLock<Regex> = LazyLock::new(|| re(r"-?[0-9][0-9,]*(?:\.[0-9]+)?"));
    let normalized = gsm8k_normalizer(reply);
    if normalized != INVALID {
        return (normalized, false);
    }
    match NUMBER.find_iter(reply).filter_map(Result::ok).last() {
        Some(m) => (m.as_str().replace(',', ""), true),
        None => (INVALID.to_string(), true),
    }
}

/// Numerically equal within 1e-6 when both are numbers ("24" = "24.0"), else equal text.
fn numbers_match(gold: &str, pred: &str) -> bool {
    match (gold.parse::<f64>(), pred.parse::<f64>()) {
        (Ok(g), Ok(p)) => (g - p).abs() <= 1e-6,
        _ => gold == pred,
    }
}

fn gsm8k(reply: &str, gold: &str) -> Grade {
    let gold = gsm8k_normalizer(gold.trim());
    let (pred, fallback) = gsm8k_prediction(reply.trim());
    let parseable = pred != INVALID;
    let correct = parseable && gold != INVALID && numbers_match(&gold, &pred);
    let note = if !parseable {
        " (no number in response)"
    } else if fallback {
        " (no #### marker; used last-number fallback)"
    } else {
        ""
    };
    Grade {
        correct,
        unparsed: fallback || !parseable,
        explanation: format!(
            "gsm8k quasi-exact-match: gold '{gold}' vs pred '{pred}'; match={}{note}",
            py_bool(correct)
        ),
        extracted: pred,
        expected: gold,
    }
}

/// Python's `str(bool)`, as AIPerf's explanations and log lines show it.
pub(super) fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// The MMLU-Pro extraction cascade over the letters `letters` (e.g. "ABCD"): the letter and
/// its tier (1: "answer is (X)", the last one; 2: "Answer: X", the last one; 3: the last
/// lone letter; 0: none).
fn choice_letter(text: &str, letters: &str) -> (String, u8) {
    let cls = format!("[{letters}]");
    let tier1 = re(&format!(r"answer is \(?({cls})\)?"));
    if let Some(c) = tier1.captures_iter(text).filter_map(Result::ok).last() {
        return (c[1].to_string(), 1);
    }
    let tier2 = re(&format!(r"(?s).*[aA]nswer:\s*({cls})"));
    if let Ok(Some(c)) = tier2.captures(text) {
        return (c[1].to_string(), 2);
    }
    let tier3 = re(&format!(r"(?s)\b{cls}\b(?!.*\b{cls}\b)"));
    if let Ok(Some(m)) = tier3.find(text) {
        return (m.as_str().to_string(), 3);
    }
    (String::new(), 0)
}

/// The answer of a multiple-choice reply (A-D) and whether a fallback found it.
fn multiple_choice_answer(reply: &str) -> (String, bool) {
    static LONE: LazyLock<Regex> = LazyLock::new(|| re(r"(?<!\w)([A-D])(?!\w)"));
    let first_line = reply.split('\n').next().unwrap_or("").trim();
    if matches!(first_line, "A" | "B" | "C" | "D") {
        return (first_line.to_string(), false);
    }
    let (letter, tier) = choice_letter(reply, "ABCD");
    match tier {
        // "The answer is (X)" is the format asked for with chain of thought.
        1 => return (letter, false),
        2 => return (letter, true),
        _ => {}
    }
    if let Ok(Some(c)) = LONE.captures(first_line) {
        return (c[1].to_string(), true);
    }
    if !letter.is_empty() {
        return (letter, true);
    }
    (first_line.to_string(), true)
}

fn multiple_choice(reply: &str, gold: &str) -> Grade {
    let (pred, unparsed) = multiple_choice_answer(reply);
    letter_grade(pred, unparsed, gold, |pred, gold, correct| {
        format!(
            "first-line-of-response extracted to '{pred}'{}; ground_truth stripped to '{gold}'; match={}",
            if unparsed { " (regex fallback)" } else { "" },
            py_bool(correct)
        )
    })
}

/// A letter answer against the gold letter: right when they are equal and not empty;
/// `explain` words it as the grader does.
fn letter_grade(
    pred: String,
    unparsed: bool,
    gold: &str,
    explain: impl Fn(&str, &str, bool) -> String,
) -> Grade {
    let gold = gold.trim().to_string();
    let correct = pred == gold && !pred.is_empty();
    Grade {
        correct,
        unparsed,
        explanation: explain(&pred, &gold, correct),
        extracted: pred,
        expected: gold,
    }
}

fn mmlu_pro(reply: &str, gold: &str) -> Grade {
    const LETTERS: &str = "ABCDEFGHIJ";
    let first_line = reply.split('\n').next().unwrap_or("").trim();
    let (pred, unparsed) = if first_line.chars().count() == 1 && LETTERS.contains(first_line) {
        (first_line.to_string(), false)
    } else {
        let (letter, tier) = choice_letter(reply, LETTERS);
        (letter, tier != 1)
    };
    letter_grade(pred, unparsed, gold, |pred, gold, correct| {
        format!(
            "extracted '{pred}'{}; ground_truth '{gold}'; match={}",
            if unparsed { " (fallback)" } else { "" },
            py_bool(correct)
        )
    })
}

fn exact_match(reply: &str, gold: &str) -> Grade {
    let pred = reply.trim().to_string();
    let gold = gold.trim().to_string();
    let unparsed = pred.is_empty() && !gold.is_empty();
    let correct = !pred.is_empty() && pred == gold;
    Grade {
        correct,
        unparsed,
        explanation: format!(
            "strict equality: stripped pred '{pred}' vs gold '{gold}'; match={}{}",
            py_bool(correct),
            if unparsed { " (empty response)" } else { "" }
        ),
        extracted: pred,
        expected: gold,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gsm8k_takes_the_marker_then_the_last_number() {
        let gold = "Natalia sold 48/2 = 24 clips in May.\n#### 72";
        let g = Grader::Gsm8k.grade("She sold 48 + 24.\n#### 72", gold);
        assert!(g.correct && !g.unparsed);
        assert_eq!((g.extracted.as_str(), g.expected.as_str()), ("72", "72"));
        // No marker: the last number, right but unparsed; 72.0 equals 72.
        let g = Grader::Gsm8k.grade("In all 48 + 24 = 72.0 clips.", gold);
        assert!(g.correct && g.unparsed, "{g:?}");
        // Thousands commas are dropped on both sides.
        let g = Grader::Gsm8k.grade("#### 1,200", "#### 1200");
        assert!(g.correct && !g.unparsed);
        let g = Grader::Gsm8k.grade("The answer is 71", gold);
        assert!(!g.correct && g.unparsed);
        let g = Grader::Gsm8k.grade("I cannot tell.", gold);
        assert!(!g.correct && g.unparsed);
        assert_eq!(g.extracted, "[invalid]");
    }

    #[test]
    fn multiple_choice_prefers_a_bare_first_line_then_the_cascade() {
        let mc = |r: &str| multiple_choice_answer(r);
        assert_eq!(mc(" B\n\nQuestion: next"), ("B".into(), false));
        // Chain of thought echoing the options: the stated answer wins, cleanly.
        assert_eq!(
            mc("A. 0, B. 4, C. 2\nso the answer is (C)."),
            ("C".into(), false)
        );
        assert_eq!(mc("A. 0, B. 4\nAnswer: D"), ("D".into(), true));
        assert_eq!(mc("I pick (B), surely"), ("B".into(), true));
        // A letter inside a word is not an answer.
        assert_eq!(mc("BAD idea"), ("BAD idea".into(), true));
        let g = Grader::MultipleChoice.grade("The answer is B.", " B");
        assert!(g.correct && !g.unparsed);
        assert_eq!(g.expected, "B");
    }

    #[test]
    fn choice_cascade_tiers() {
        assert_eq!(
            choice_letter("the answer is A ... no, the answer is (J)", "ABCDEFGHIJ"),
            ("J".into(), 1)
        );
        assert_eq!(
            choice_letter("Answer: C\nreally Answer: E", "ABCDEFGHIJ"),
            ("E".into(), 2)
        );
        assert_eq!(
            choice_letter("maybe B or perhaps D then", "ABCD"),
            ("D".into(), 3)
        );
        assert_eq!(choice_letter("FLAG", "ABCDEFGHIJ"), (String::new(), 0));
        let g = Grader::MmluPro.grade("G", "G");
        assert!(g.correct && !g.unparsed);
        let g = Grader::MmluPro.grade("Thinking... B or G", "G");
        assert!(g.correct && g.unparsed);
    }

    #[test]
    fn exact_match_is_strict() {
        assert!(Grader::ExactMatch.grade("  A \n", "A").correct);
        assert!(!Grader::ExactMatch.grade("a", "A").correct);
        let g = Grader::ExactMatch.grade("  ", "A");
        assert!(!g.correct && g.unparsed);
    }

    #[test]
    fn names() {
        assert_eq!(
            Grader::lookup("multiple_choice").unwrap(),
            Grader::MultipleChoice
        );
        assert_eq!(
            Grader::lookup("lighteval_gpqa").unwrap(),
            Grader::LightevalGpqa
        );
        assert!(
            Grader::lookup("judge")
                .unwrap_err()
                .contains("not a grader name")
        );
    }
}
