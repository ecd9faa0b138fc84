//! AIPerf's `math` grader in the mode it runs without sympy (its stdlib fallback): the
//! answer taken from the last `\boxed{}` (else an "answer is" phrase, else the last
//! number), both sides normalised by the MATH/ToRA `strip_string`, then compared as exact
//! fractions when both are numbers, else as normalised text. No symbolic equivalence.

use std::sync::LazyLock;

use fancy_regex::Regex;

use super::graders::Grade;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid pattern")
}

/// Python's `re.sub` (every match).
fn sub(pattern: &Regex, with: &str, s: &str) -> String {
    pattern.replace_all(s, with).into_owned()
}

/// The contents of the last `\boxed{...}`, braces balanced.
fn last_boxed(text: &str) -> Option<&str> {
    const TOKEN: &str = "\\boxed{";
    let start = text.rfind(TOKEN)? + TOKEN.len();
    let mut depth = 0;
    for (i, c) in text[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(&text[start..start + i]),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn last_number(text: &str) -> Option<&str> {
    static NUMBER: LazyLock<Regex> = LazyLock::new(|| re(r"-?\d+(?:\.\d+)?(?:/\d+)?"));
    NUMBER
        .find_iter(text)
        .filter_map(Result::ok)
        .last()
        .map(|m| m.as_str())
}

/// The recipe's cleanup of a boxed answer: newlines joined, a leading `:` and a trailing
/// `.` or `/` dropped.
fn response_tail(boxed: &str) -> String {
    static NEWLINES: LazyLock<Regex> = LazyLock::new(|| re(r"\n\s*"));
    let mut pred = sub(&NEWLINES, "", boxed);
    if pred.starts_with(':') {
        pred.remove(0);
    }
    for end in ['.', '/'] {
        if pred.ends_with(end) {
            pred.pop();
        }
    }
    pred
}

/// The answer and whether a fallback past `\boxed{}` found it.
fn extract(reply: &str) -> (String, bool) {
    static PHRASE: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"(?i)(?:final\s+answer|the\s+answer\s+is|answer\s*[:=]|answer\s+is)\s*[:=]?\s*(.+?)(?:(?<!\d)\.(?!\d)|\n|$)",
        )
    });
    static LATEX_HINT: LazyLock<Regex> = LazyLock::new(|| re(r"[\\{}]"));
    if reply.is_empty() {
        return (String::new(), true);
    }
    if let Some(boxed) = last_boxed(reply) {
        return (response_tail(boxed), false);
    }
    if let Some(c) = PHRASE.captures_iter(reply).filter_map(Result::ok).last() {
        let tail = c[1].trim();
        if let Some(boxed) = last_boxed(tail) {
            return (response_tail(boxed), true);
        }
        if LATEX_HINT.is_match(tail).unwrap_or(false) {
            return (tail.to_string(), true);
        }
        return (last_number(tail).unwrap_or(tail).to_string(), true);
    }
    match last_number(reply) {
        Some(n) => (n.to_string(), true),
        None => (reply.trim().to_string(), true),
    }
}

const UNIT_TEXTS: &[&str] = &[
    "east",
    "degree",
    "mph",
    "kmph",
    "ft",
    "m square",
    " m east",
    "sq m",
    "deg",
    "mile",
    "q .",
    "monkey",
    "prime",
    "ratio",
    "profit of rs",
    "rd",
    "o",
    "gm",
    "p . m",
    "lb",
    "tile",
    "per",
    "dm",
    "lt",
    "gain",
    "ab",
    "way",
    "west",
    "a .",
    "b .",
    "c .",
    "d .",
    "e .",
    "f .",
    "g .",
    "h .",
    "t",
    "a",
    "h",
    "no change",
    "men",
    "soldier",
    "pie",
    "bc",
    "excess",
    "st",
    "inches",
    "noon",
    "percent",
    "by",
    "gal",
    "kmh",
    "c",
    "acre",
    "rise",
    "a . m",
    "th",
    "π r 2",
    "sq",
    "mark",
    "l",
    "toy",
    "coin",
    "sq . m",
    "gallon",
    "° f",
    "profit",
    "minw",
    "yr",
    "women",
    "feet",
    "am",
    "pm",
    "hr",
    "cu cm",
    "square",
    "v â € ™",
    "are",
    "rupee",
    "rounds",
    "cubic",
    "cc",
    "mtr",
    "s",
    "ohm",
    "number",
    "kmph",
    "day",
    "hour",
    "minute",
    "min",
    "second",
    "man",
    "woman",
    "sec",
    "cube",
    "mt",
    "sq inch",
    "mp",
    "∏ cm ³",
    "hectare",
    "more",
    "sec",
    "unit",
    "cu . m",
    "cm 2",
    "rs .",
    "rs",
    "kg",
    "g",
    "month",
    "km",
    "m",
    "cm",
    "mm",
    "apple",
    "liter",
    "loss",
    "yard",
    "pure",
    "year",
    "increase",
    "decrease",
    "d",
    "less",
    "Surface",
    "litre",
    "pi sq m",
    "s .",
    "metre",
    "meter",
    "inch",
];

/// The unit words removed where they stand alone (used as regexes, as the recipe does:
/// their `.` matches any character), then the same with a plural `s`.
static UNITS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    UNIT_TEXTS
        .iter()
        .map(|u| u.to_string())
        .chain(UNIT_TEXTS.iter().map(|u| format!("{u}s")))
        .map(|u| re(&format!(r"(^|\W){u}($|\W)")))
        .collect()
});

/// `\fracab` as `\frac{a}{b}`.
fn fix_fracs(s: &str) -> String {
    let mut parts = s.split("\\frac");
    let mut out = parts.next().unwrap_or("").to_string();
    for part in parts {
        out.push_str("\\frac");
        let chars: Vec<char> = part.chars().collect();
        if chars.first() == Some(&'{') {
            out.push_str(part);
            continue;
        }
        if chars.len() < 2 {
            return s.to_string();
        }
        let (a, b) = (chars[0], chars[1]);
        let rest: String = chars[2..].iter().collect();
        if b == '{' {
            out.push_str(&format!("{{{a}}}{b}{rest}"));
        } else {
            out.push_str(&format!("{{{a}}}{{{b}}}{rest}"));
        }
    }
    out
}

/// Python's `int()` of a string: optional sign, digits (underscores between them).
fn py_int(s: &str) -> Option<i128> {
    let s = s.trim();
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    s.replace('_', "").parse().ok()
}

/// `a/b` of integers as `\frac{a}{b}` (a side holding `sqrt` kept as written).
fn fix_a_slash_b(s: &str) -> String {
    let parts: Vec<&str> = s.split('/').collect();
    let [a, b] = parts[..] else {
        return s.to_string();
    };
    let side = |x: &str| match x.contains("sqrt") {
        true => Some(x.to_string()),
        false => py_int(x).map(|n| n.to_string()),
    };
    match (side(a), side(b)) {
        (Some(a), Some(b)) => format!("\\frac{{{a}}}{{{b}}}"),
        _ => s.to_string(),
    }
}

/// The recipe's `strip_string` (MATH / ToRA normalisation), step by step; word numbers are
/// left alone, as in AIPerf.
pub fn strip_string(input: &str) -> String {
    static ARRAY_BEGIN: LazyLock<Regex> = LazyLock::new(|| re(r"\\begin\{array\}\{.*?\}"));
    static ARRAY_END: LazyLock<Regex> = LazyLock::new(|| re(r"\\end\{array\}"));
    static TRAILING_TEXT: LazyLock<Regex> = LazyLock::new(|| re(r"\\text\{.*?\}$"));
    static TEXT: LazyLock<Regex> = LazyLock::new(|| re(r"\\text\{(.*?)\}"));
    static MONTHS: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"(?i)\b(January|February|March|April|May|June|July|August|September|October|November|December)\b",
        )
    });
    static MBOX: LazyLock<Regex> = LazyLock::new(|| re(r"\\mbox\{.*?\}"));
    static ZEROS_BEFORE: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+)\.0*([^\d])"));
    static ZEROS_END: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+)\.0*$"));
    static SQRT: LazyLock<Regex> = LazyLock::new(|| re(r"\\sqrt(\w+)"));

    let mut s = input.trim().replace('\n', "");
    s = s.trim_end_matches('.').to_string();
    s = s.replace("\\!", "");
    s = sub(&ARRAY_BEGIN, r"\begin{pmatrix}", &s);
    s = sub(&ARRAY_END, r"\end{pmatrix}", &s);
    s = s.replace("bmatrix", "pmatrix");
    s = s.replace("tfrac", "frac").replace("dfrac", "frac");
    s = s
        .replace("\\neq", "\\ne")
        .replace("\\leq", "\\le")
        .replace("\\geq", "\\ge");
    s = s.replace("\\left", "").replace("\\right", "");
    s = s.replace("\\{", "{").replace("\\}", "}");
    let without = sub(&TRAILING_TEXT, "", &s).trim().to_string();
    if !without.is_empty() && without != s {
        s = without;
    }
    for unit in UNITS.iter() {
        let without = sub(unit, "${1}${2}", &s);
        if !without.is_empty() {
            s = without;
        }
    }
    s = s.replace("^{\\circ}", "").replace("^\\circ", "");
    s = s.replace("\\$", "").replace('$', "");
    s = s.replace("\\(", "").replace("\\)", "");
    s = sub(&TEXT, "${1}", &s);
    for key in [
        "x=", "y=", "z=", "x\\in", "y\\in", "z\\in", "x\\to", "y\\to", "z\\to",
    ] {
        s = s.replace(key, "");
    }
    s = s.replace("\\emptyset", "{}");
    s = s.replace("(-\\infty,\\infty)", "\\mathbb{R}");
    s = s.replace("\\%", "").replace('%', "");
    s = sub(&MONTHS, "", &s);
    s = s.replace(" .", " 0.").replace("{.", "{0.");
    // (The recipe's unwrapping of `{x}`, `(x)`, `[x]` needs the bracketed text to be
    // alphanumeric, brackets included, so it never applies.)
    s = s.replace("infinity", "\\infty");
    if !s.contains("\\infty") {
        s = s.replace("inf", "\\infty");
    }
    s = s.replace("+\\inity", "\\infty");
    s = s.replace("and", "");
    s = s.replace("\\mathbf", "");
    s = sub(&MBOX, "", &s);
    if s.contains('j') && !s.contains('i') {
        s = s.replace('j', "i");
    }
    s = sub(&ZEROS_BEFORE, "${1}${2}", &s);
    s = sub(&ZEROS_END, "${1}", &s);
    if s.is_empty() {
        return s;
    }
    if s.starts_with('.') {
        s.insert(0, '0');
    }
    let sides: Vec<&str> = s.split('=').collect();
    if sides.len() == 2 && sides[0].chars().count() <= 2 {
        s = sides[1].to_string();
    }
    s = sub(&SQRT, r"\sqrt{${1}}", &s);
    s = s.replace(' ', "");
    s = fix_fracs(&s);
    fix_a_slash_b(&s)
}

/// The fallback's light LaTeX normalisation: `$...$`, `\left`/`\right`, `\frac{a}{b}` as
/// `(a)/(b)`, `\text{}` unwrapped, trailing punctuation and all whitespace dropped.
fn stdlib_normalize(expr: &str) -> String {
    static TRAILING_PUNCT: LazyLock<Regex> = LazyLock::new(|| re(r"[.,;:!?]+$"));
    static LEFT_RIGHT: LazyLock<Regex> = LazyLock::new(|| re(r"\\(?:left|right)"));
    static DFRAC: LazyLock<Regex> = LazyLock::new(|| re(r"\\(?:dfrac|tfrac)"));
    static SIMPLE_FRAC: LazyLock<Regex> = LazyLock::new(|| re(r"\\frac\{([^{}]+)\}\{([^{}]+)\}"));
    static WRAPPER: LazyLock<Regex> =
        LazyLock::new(|| re(r"\\(?:text|mathrm|mathit|mathbf)\{([^{}]*)\}"));
    static SPACE: LazyLock<Regex> = LazyLock::new(|| re(r"\s+"));
    let mut s = sub(&TRAILING_PUNCT, "", expr.trim());
    if s.len() >= 2 && s.starts_with('$') && s.ends_with('$') {
        s = s[1..s.len() - 1].to_string();
    }
    s = sub(&LEFT_RIGHT, "", &s);
    s = sub(&DFRAC, r"\frac", &s);
    s = sub(&SIMPLE_FRAC, "(${1})/(${2})", &s);
    s = sub(&WRAPPER, "${1}", &s);
    sub(&SPACE, "", &s)
}

/// Python's `Fraction(str)` for plain numbers: an integer, a decimal (with an optional
/// exponent) or `a/b`; as a reduced (numerator, denominator).
fn fraction(value: &str) -> Option<(i128, i128)> {
    let s: String = value
        .trim()
        .chars()
        .filter(|c| !matches!(c, '(' | ')'))
        .collect();
    if s.is_empty() {
        return None;
    }
    let (num, den) = match s.split_once('/') {
        Some((a, b)) => (py_int(a)?, py_int(b)?),
        None => decimal(&s)?,
    };
    if den == 0 {
        return None;
    }
    let g = gcd(num.unsigned_abs(), den.unsigned_abs()) as i128;
    let sign = if den < 0 { -1 } else { 1 };
    Some((sign * num / g.max(1), sign * den / g.max(1)))
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// `-1.25e2` as (-125, 1).
fn decimal(s: &str) -> Option<(i128, i128)> {
    let (mantissa, exp) = match s.split_once(['e', 'E']) {
        Some((m, e)) => (m, py_int(e)?),
        None => (s, 0),
    };
    let (sign, m) = match mantissa.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, mantissa.strip_prefix('+').unwrap_or(mantissa)),
    };
    let (int, frac) = m.split_once('.').unwrap_or((m, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let digits: i128 = format!("{int}{frac}").parse().ok()?;
    let scale = exp - frac.len() as i128;
    let pow = |n: i128| 10i128.checked_pow(u32::try_from(n).ok()?);
    if scale >= 0 {
        Some((sign * digits.checked_mul(pow(scale)?)?, 1))
    } else {
        Some((sign * digits, pow(-scale)?))
    }
}

fn stdlib_equal(prediction: &str, reference: &str) -> bool {
    let pred = stdlib_normalize(prediction);
    let gold = stdlib_normalize(reference);
    match (fraction(&pred), fraction(&gold)) {
        (Some(p), Some(g)) => p == g,
        _ => pred == gold && !pred.is_empty(),
    }
}

pub fn grade(reply: &str, gold: &str) -> Grade {
    let (pred, unparsed) = extract(reply);
    let pred_stripped = strip_string(&pred);
    let gold_stripped = strip_string(gold);
    let correct = stdlib_equal(&pred_stripped, &gold_stripped);
    Grade {
        correct,
        unparsed,
        explanation: format!(
            "extracted '{pred}' (stripped '{pred_stripped}'); ground_truth '{gold}' (stripped '{gold_stripped}'); compared via stdlib-fallback; match={}{}",
            if correct { "True" } else { "False" },
            if unparsed { " (regex fallback)" } else { "" }
        ),
        extracted: pred,
        expected: gold.trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_prefers_the_last_box() {
        assert_eq!(
            extract("so \\boxed{1} no wait \\boxed{\\frac{1}{2}}."),
            ("\\frac{1}{2}".into(), false)
        );
        assert_eq!(extract("The answer is 3.14. Done"), ("3.14".into(), true));
        assert_eq!(
            extract("the answer is 5. Wait, actually the final answer: 12\nok"),
            ("12".into(), true)
        );
        assert_eq!(
            extract("answer: \\frac{1}{2}"),
            ("\\frac{1}{2}".into(), true)
        );
        assert_eq!(extract("I get 7 then 204 in all"), ("204".into(), true));
        assert_eq!(extract("no idea"), ("no idea".into(), true));
    }

    #[test]
    fn strip_string_normalises_like_the_recipe() {
        assert_eq!(strip_string("\\dfrac{1}{2}"), "\\frac{1}{2}");
        assert_eq!(strip_string("1/2"), "\\frac{1}{2}");
        assert_eq!(strip_string("x = 5"), "5");
        assert_eq!(strip_string("10\\%"), "10");
        assert_eq!(strip_string("90^\\circ"), "90");
        assert_eq!(strip_string("$204$"), "204");
        assert_eq!(strip_string("5 \\text{ cm}"), "5");
        assert_eq!(strip_string("12.00"), "12");
        assert_eq!(strip_string("\\frac12"), "\\frac{1}{2}");
        assert_eq!(strip_string("\\sqrt2"), "\\sqrt{2}");
        assert_eq!(strip_string(".5"), "0.5");
        assert_eq!(strip_string("\\left( 1, 2 \\right)"), "(1,2)");
    }

    #[test]
    fn fallback_compares_numbers_exactly() {
        assert!(stdlib_equal("\\frac{1}{2}", "0.5"));
        assert!(stdlib_equal("(1)/(2)", "2/4"));
        assert!(stdlib_equal("204", "204.0"));
        assert!(!stdlib_equal("204", "205"));
        assert!(stdlib_equal("\\text{(A)}", "(A)"));
        assert!(!stdlib_equal("", ""));
        let g = grade("Thus \\boxed{033}.", "33");
        assert!(g.correct && !g.unparsed, "{g:?}");
        let g = grade("The answer is 204", "204");
        assert!(g.correct && g.unparsed);
    }
}
