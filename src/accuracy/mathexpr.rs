//! Answers as mathematical values, for lighteval's extractive match: a LaTeX or plain
//! expression parsed into a small expression tree, then compared as lighteval compares
//! sympy values: numbers exactly (to 5 decimals when either side is a decimal), tuples in
//! order, sets in any order, intervals by their ends and brackets, and expressions with
//! variables by evaluating both at fixed random points (so `x^2+2x` equals `x(x+2)`).
//!
//! Not sympy: no simplification beyond evaluation, real numbers only, and an answer this
//! parser cannot read is compared as text by the caller.

/// A parsed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Expr(Ex),
    /// `(a, b)`, `[a, b)`, ...: the brackets and the items.
    Seq(char, char, Vec<Ex>),
    /// `\{a, b\}` or a bare `a, b`.
    Set(Vec<Ex>),
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Ex {
    /// A number and whether it was written as a decimal (compared to 5 decimals).
    Num(f64, bool),
    Sym(String),
    Add(Box<Ex>, Box<Ex>),
    Sub(Box<Ex>, Box<Ex>),
    Mul(Box<Ex>, Box<Ex>),
    Div(Box<Ex>, Box<Ex>),
    Pow(Box<Ex>, Box<Ex>),
    Neg(Box<Ex>),
    Func(&'static str, Box<Ex>),
    /// `x%`: x / 100.
    Pct(Box<Ex>),
    Factorial(Box<Ex>),
}

/// lighteval's comparison precision for these graders (decimal places).
const PRECISION: i32 = 5;

impl Ex {
    fn eval(&self, vars: &dyn Fn(&str) -> f64) -> f64 {
        match self {
            Ex::Num(v, _) => *v,
            Ex::Sym(s) => vars(s),
            Ex::Add(a, b) => a.eval(vars) + b.eval(vars),
            Ex::Sub(a, b) => a.eval(vars) - b.eval(vars),
            Ex::Mul(a, b) => a.eval(vars) * b.eval(vars),
            Ex::Div(a, b) => a.eval(vars) / b.eval(vars),
            Ex::Pow(a, b) => a.eval(vars).powf(b.eval(vars)),
            Ex::Neg(a) => -a.eval(vars),
            Ex::Pct(a) => a.eval(vars) / 100.0,
            Ex::Factorial(a) => {
                let n = a.eval(vars);
                if n < 0.0 || n.fract() != 0.0 || n > 170.0 {
                    return f64::NAN;
                }
                (1..=n as u64).map(|k| k as f64).product()
            }
            Ex::Func(f, a) => {
                let x = a.eval(vars);
                match *f {
                    "sqrt" => x.sqrt(),
                    "sin" => x.sin(),
                    "cos" => x.cos(),
                    "tan" => x.tan(),
                    "ln" | "log" => x.ln(),
                    "exp" => x.exp(),
                    _ => f64::NAN,
                }
            }
        }
    }

    fn symbols(&self, out: &mut Vec<String>) {
        match self {
            Ex::Num(..) => {}
            Ex::Sym(s) => {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
            Ex::Add(a, b) | Ex::Sub(a, b) | Ex::Mul(a, b) | Ex::Div(a, b) | Ex::Pow(a, b) => {
                a.symbols(out);
                b.symbols(out);
            }
            Ex::Neg(a) | Ex::Func(_, a) | Ex::Pct(a) | Ex::Factorial(a) => a.symbols(out),
        }
    }

    /// Whether a decimal literal or a percentage is in it: then numbers compare rounded.
    fn inexact(&self) -> bool {
        match self {
            Ex::Num(_, decimal) => *decimal,
            Ex::Sym(_) => false,
            Ex::Pct(_) => true,
            Ex::Add(a, b) | Ex::Sub(a, b) | Ex::Mul(a, b) | Ex::Div(a, b) | Ex::Pow(a, b) => {
                a.inexact() || b.inexact()
            }
            Ex::Neg(a) | Ex::Func(_, a) | Ex::Factorial(a) => a.inexact(),
        }
    }
}

fn round_to(v: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (v * scale).round() / scale
}

/// Two numbers equal as lighteval's numeric comparison has them.
fn numbers_equal(a: f64, b: f64, inexact: bool) -> bool {
    if !a.is_finite() || !b.is_finite() {
        return a == b && !a.is_nan();
    }
    if inexact {
        return round_to(a, PRECISION) == round_to(b, PRECISION);
    }
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Fixed points at which expressions with variables are compared (a pseudo-random spread
/// that avoids the integers, where distinct polynomials agree more often).
const POINTS: [f64; 4] = [0.713_254, 1.618_034, 2.291_712, -1.397_331];

fn expressions_equal(a: &Ex, b: &Ex) -> bool {
    let mut names = Vec::new();
    a.symbols(&mut names);
    b.symbols(&mut names);
    let inexact = a.inexact() || b.inexact();
    if names.is_empty() {
        let (x, y) = (a.eval(&|_| f64::NAN), b.eval(&|_| f64::NAN));
        if numbers_equal(x, y, inexact) {
            return true;
        }
        // lighteval's "9% == 9": a percentage against a whole number compares the numbers.
        return match (a, b) {
            (Ex::Pct(p), other) | (other, Ex::Pct(p)) => {
                numbers_equal(p.eval(&|_| f64::NAN), other.eval(&|_| f64::NAN), inexact)
            }
            _ => false,
        };
    }
    let mut evaluated_any = false;
    for (k, shift) in POINTS.iter().enumerate() {
        let at = |s: &str| {
            let i = names.iter().position(|n| n == s).unwrap_or(0);
            shift + 0.37 * (i as f64 + 1.0) * (k as f64 + 1.0)
        };
        let (x, y) = (a.eval(&at), b.eval(&at));
        if x.is_nan() && y.is_nan() {
            continue;
        }
        // Looser than for numbers: evaluation at a point rounds differently on each side.
        if (x - y).abs() > 1e-7 * x.abs().max(y.abs()).max(1.0) || x.is_nan() != y.is_nan() {
            return false;
        }
        evaluated_any = true;
    }
    evaluated_any
}

/// Sets: the same size, each item of one matched by a distinct item of the other.
fn sets_equal(a: &[Ex], b: &[Ex]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut used = vec![false; b.len()];
    a.iter().all(|x| {
        let hit = (0..b.len()).find(|&j| !used[j] && expressions_equal(x, &b[j]));
        hit.map(|j| used[j] = true).is_some()
    })
}

/// Whether a gold value and a predicted one are the same answer.
pub fn equal(gold: &Value, pred: &Value) -> bool {
    match (gold, pred) {
        (Value::Expr(a), Value::Expr(b)) => expressions_equal(a, b),
        (Value::Seq(o1, c1, a), Value::Seq(o2, c2, b)) => {
            // A pair in parentheses may be a point or an open interval: either reading.
            let brackets = (o1, c1) == (o2, c2);
            brackets && a.len() == b.len() && a.iter().zip(b).all(|(x, y)| expressions_equal(x, y))
        }
        (Value::Set(a), Value::Set(b)) => sets_equal(a, b),
        (Value::Set(a), Value::Expr(b)) | (Value::Expr(b), Value::Set(a)) if a.len() == 1 => {
            expressions_equal(&a[0], b)
        }
        (Value::Seq('(', ')', a), Value::Set(b)) | (Value::Set(b), Value::Seq('(', ')', a)) => {
            sets_equal(a, b)
        }
        _ => false,
    }
}

// ----- parsing -----

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64, bool),
    Sym(String),
    Cmd(String),
    Op(char),
}

fn tokenize(s: &str) -> Option<Vec<Tok>> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)
        {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            out.push(Tok::Num(text.parse().ok()?, text.contains('.')));
        } else if c == '\\' {
            let start = i + 1;
            i += 1;
            while i < chars.len() && chars[i].is_ascii_alphabetic() {
                i += 1;
            }
            if i == start {
                // `\{`, `\}`, `\%`, `\,` ...
                let escaped = *chars.get(i)?;
                i += 1;
                match escaped {
                    '{' => out.push(Tok::Op('⟨')),
                    '}' => out.push(Tok::Op('⟩')),
                    '%' => out.push(Tok::Op('%')),
                    _ => {}
                }
            } else {
                out.push(Tok::Cmd(chars[start..i].iter().collect()));
            }
        } else if c.is_alphabetic() {
            let start = i;
            while i < chars.len() && chars[i].is_alphabetic() {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if FUNCS.contains(&word.as_str()) || word == "pi" {
                out.push(Tok::Cmd(word));
            } else {
                // Letters side by side are a product of single-letter variables.
                out.extend(word.chars().map(|l| Tok::Sym(l.to_string())));
            }
        } else {
            let op = match c {
                '×' | '·' => '*',
                '÷' => '/',
                '−' => '-',
                other => other,
            };
            if !"+-*/^()[]{},!%_=".contains(op) {
                return None;
            }
            out.push(Tok::Op(op));
            i += 1;
        }
    }
    Some(out)
}

const FUNCS: &[&str] = &["sqrt", "sin", "cos", "tan", "ln", "log", "exp"];

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

fn b(e: Ex) -> Box<Ex> {
    Box::new(e)
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn eat(&mut self, op: char) -> bool {
        if self.peek() == Some(&Tok::Op(op)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expr(&mut self) -> Option<Ex> {
        let mut left = self.term()?;
        loop {
            if self.eat('+') {
                left = Ex::Add(b(left), b(self.term()?));
            } else if self.eat('-') {
                left = Ex::Sub(b(left), b(self.term()?));
            } else if self.peek() == Some(&Tok::Cmd("pm".into())) {
                // `a \pm b`: the first of the two.
                self.at += 1;
                left = Ex::Add(b(left), b(self.term()?));
            } else {
                return Some(left);
            }
        }
    }

    fn starts_factor(&self) -> bool {
        match self.peek() {
            Some(Tok::Num(..) | Tok::Sym(_)) => true,
            Some(Tok::Op(c)) => matches!(c, '(' | '{' | '['),
            Some(Tok::Cmd(c)) => !matches!(c.as_str(), "cdot" | "times" | "div" | "pm"),
            None => false,
        }
    }

    fn term(&mut self) -> Option<Ex> {
        let mut left = self.unary()?;
        loop {
            let cmd = match self.peek() {
                Some(Tok::Cmd(c)) => c.clone(),
                _ => String::new(),
            };
            if self.eat('*') || cmd == "cdot" || cmd == "times" {
                if !cmd.is_empty() {
                    self.at += 1;
                }
                left = Ex::Mul(b(left), b(self.unary()?));
            } else if self.eat('/') || cmd == "div" {
                if !cmd.is_empty() {
                    self.at += 1;
                }
                left = Ex::Div(b(left), b(self.unary()?));
            } else if self.starts_factor() {
                left = Ex::Mul(b(left), b(self.power()?));
            } else {
                return Some(left);
            }
        }
    }

    fn unary(&mut self) -> Option<Ex> {
        if self.eat('-') {
            return Some(Ex::Neg(b(self.unary()?)));
        }
        if self.eat('+') {
            return self.unary();
        }
        self.power()
    }

    fn power(&mut self) -> Option<Ex> {
        let base = self.postfix()?;
        if self.eat('^') {
            let exp = if self.eat('-') {
                Ex::Neg(b(self.postfix()?))
            } else {
                self.postfix()?
            };
            return Some(Ex::Pow(b(base), b(exp)));
        }
        Some(base)
    }

    fn postfix(&mut self) -> Option<Ex> {
        let mut e = self.atom()?;
        loop {
            if self.eat('!') {
                e = Ex::Factorial(b(e));
            } else if self.eat('%') {
                e = Ex::Pct(b(e));
            } else {
                return Some(e);
            }
        }
    }

    /// `{...}` (LaTeX argument) or one atom.
    fn group(&mut self) -> Option<Ex> {
        if self.eat('{') {
            let e = self.expr()?;
            return self.eat('}').then_some(e);
        }
        self.atom()
    }

    fn atom(&mut self) -> Option<Ex> {
        match self.next()? {
            Tok::Num(v, d) => Some(Ex::Num(v, d)),
            Tok::Sym(s) => {
                let mut name = s;
                // Subscripts name the variable (`x_1`, `a_{n}`).
                if self.eat('_') {
                    match self.next()? {
                        Tok::Op('{') => {
                            while let Some(t) = self.next() {
                                match t {
                                    Tok::Op('}') => break,
                                    Tok::Num(v, _) => name.push_str(&v.to_string()),
                                    Tok::Sym(s) => name.push_str(&s),
                                    _ => return None,
                                }
                            }
                        }
                        Tok::Num(v, _) => name.push_str(&v.to_string()),
                        Tok::Sym(s) => name.push_str(&s),
                        _ => return None,
                    }
                    name.insert(0, '_');
                }
                Some(Ex::Sym(name))
            }
            Tok::Op(open @ ('(' | '[' | '{')) => {
                let close = match open {
                    '(' => ')',
                    '[' => ']',
                    _ => '}',
                };
                let e = self.expr()?;
                self.eat(close).then_some(e)
            }
            Tok::Cmd(c) => match c.as_str() {
                "frac" | "dfrac" | "tfrac" => {
                    let n = self.group()?;
                    let d = self.group()?;
                    Some(Ex::Div(b(n), b(d)))
                }
                "sqrt" => {
                    if self.eat('[') {
                        let root = self.expr()?;
                        if !self.eat(']') {
                            return None;
                        }
                        let x = self.group()?;
                        return Some(Ex::Pow(b(x), b(Ex::Div(b(Ex::Num(1.0, false)), b(root)))));
                    }
                    Some(Ex::Func("sqrt", b(self.group()?)))
                }
                "pi" => Some(Ex::Num(std::f64::consts::PI, false)),
                "infty" | "inf" => Some(Ex::Num(f64::INFINITY, false)),
                "e" => Some(Ex::Num(std::f64::consts::E, false)),
                // Relations are not values here: the answer is compared as text.
                "le" | "leq" | "ge" | "geq" | "lt" | "gt" | "ne" | "neq" | "approx" => None,
                f if FUNCS.contains(&f) => {
                    let name = FUNCS.iter().find(|n| **n == f)?;
                    Some(Ex::Func(name, b(self.power()?)))
                }
                // Greek letters and other named symbols are variables.
                other => Some(Ex::Sym(format!("\\{other}"))),
            },
            _ => None,
        }
    }
}

/// Splits on commas outside brackets.
fn top_level_items(toks: &[Tok]) -> Vec<&[Tok]> {
    let mut depth = 0i32;
    let mut items = Vec::new();
    let mut start = 0;
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::Op('(' | '[' | '{' | '⟨') => depth += 1,
            Tok::Op(')' | ']' | '}' | '⟩') => depth -= 1,
            Tok::Op(',') if depth == 0 => {
                items.push(&toks[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&toks[start..]);
    items
}

fn parse_expr_tokens(toks: &[Tok]) -> Option<Ex> {
    let mut p = Parser {
        toks: toks.to_vec(),
        at: 0,
    };
    let e = p.expr()?;
    (p.at == p.toks.len()).then_some(e)
}

fn parse_items(toks: &[Tok]) -> Option<Vec<Ex>> {
    top_level_items(toks)
        .into_iter()
        .map(parse_expr_tokens)
        .collect()
}

/// An answer parsed from normalised LaTeX or a plain expression; `None` when it is not one
/// this parser reads.
pub fn parse(text: &str) -> Option<Value> {
    let toks = tokenize(text.trim())?;
    if toks.is_empty() {
        return None;
    }
    // `\{a, b\}`: a set.
    if toks.first() == Some(&Tok::Op('⟨')) && toks.last() == Some(&Tok::Op('⟩')) {
        return Some(Value::Set(parse_items(&toks[1..toks.len() - 1])?));
    }
    let items = top_level_items(&toks);
    if items.len() > 1 {
        return Some(Value::Set(parse_items(&toks)?));
    }
    // `(a, b)`, `[a, b)`: a tuple or an interval.
    if let (Some(Tok::Op(open @ ('(' | '['))), Some(Tok::Op(close @ (')' | ']')))) =
        (toks.first(), toks.last())
    {
        let inner = &toks[1..toks.len() - 1];
        if top_level_items(inner).len() > 1 && balanced(inner) {
            return Some(Value::Seq(*open, *close, parse_items(inner)?));
        }
    }
    parse_expr_tokens(&toks).map(Value::Expr)
}

fn balanced(toks: &[Tok]) -> bool {
    let mut depth = 0i32;
    for t in toks {
        match t {
            Tok::Op('(' | '[' | '{' | '⟨') => depth += 1,
            Tok::Op(')' | ']' | '}' | '⟩') => depth -= 1,
            _ => {}
        }
        if depth < 0 {
            return false;
        }
    }
    depth == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &str, b: &str) -> bool {
        equal(&parse(a).unwrap(), &parse(b).unwrap())
    }

    #[test]
    fn numbers_fractions_and_roots() {
        assert!(same("\\frac{1}{2}", "0.5"));
        assert!(same("\\frac{14}{3}", "14/3"));
        assert!(!same("\\frac{14}{3}", "4.6"));
        assert!(same("\\frac{1}{3}", "0.333333"));
        assert!(!same("\\frac{1}{3}", "0.3333"));
        assert!(same("2\\sqrt{3}", "\\sqrt{12}"));
        assert!(same("\\sqrt[3]{8}", "2"));
        assert!(same("3\\pi", "\\pi \\cdot 3"));
        assert!(same("204", "204"));
        assert!(!same("204", "205"));
        assert!(same("-\\frac{3}{4}", "-0.75"));
        assert!(same("2^{10}", "1024"));
        assert!(same("5!", "120"));
    }

    #[test]
    fn expressions_with_variables_compare_by_value() {
        assert!(same("x^2+2x", "x(x+2)"));
        assert!(same("\\frac{a}{b}", "a/b"));
        assert!(!same("x^2+2x", "x^2+2"));
        assert!(same("2\\sqrt{x_1}", "\\sqrt{4x_{1}}"));
    }

    #[test]
    fn tuples_sets_and_intervals() {
        assert!(same("(3, \\frac{\\pi}{2})", "(3, 1.5707963)"));
        assert!(!same("(1, 2)", "(2, 1)"));
        assert!(same("1, 2, 3", "3, 1, 2"));
        assert!(same("\\{1, 2\\}", "2, 1"));
        assert!(!same("[1, 2)", "[1, 2]"));
        assert!(same("[1, 2)", "[1,2)"));
        assert!(same("(-\\infty, 3]", "(-\\infty,3]"));
    }

    #[test]
    fn percentages() {
        assert!(same("9\\%", "9"));
        assert!(same("50\\%", "0.5"));
    }

    #[test]
    fn relations_and_unknown_characters_are_not_values() {
        assert!(parse("x \\le 3").is_none());
        assert!(parse("y = 2x").is_none());
        assert!(parse("").is_none());
        assert!(parse("3 @ 4").is_none());
    }
}
