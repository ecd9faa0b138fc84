//! Values spelled as Python prints them (`str()` / `repr()`), for the places where AIPerf's
//! files and labels carry Python renderings: `5.0`, `1e-05`, `True`, `None`,
//! `['run_0001', 'run_0002']`, `{'phases.profiling.concurrency': 2}`.

use serde_json::Value;

/// Python's `repr(float)`: the shortest digits that read back the same, with `.0` on whole
/// numbers and an exponent (`1e-05`, `1.5e+16`) outside 1e-4 <= |v| < 1e16.
pub fn float(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    if (-4..16).contains(&exp) {
        let plain = format!("{v}");
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

/// Python's `repr(str)`: single quotes unless the text holds a single quote and no double.
fn string(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `repr()` of a JSON value (numbers that JSON holds as integers stay integers).
pub fn repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.to_string(),
            (_, Some(u)) => u.to_string(),
            _ => float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => string(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(repr).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => {
            let pairs: Vec<(String, Value)> =
                map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            dict(&pairs)
        }
    }
}

/// Python's `repr(dict)` of pairs kept in the given order.
pub fn dict(pairs: &[(String, Value)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}: {}", string(k), repr(v)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// Python's `str()`: text as it is, anything else as its `repr()`.
pub fn str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => repr(other),
    }
}

/// Python's `str.title()`: each run of letters starts upper-case, the rest lower-case.
pub fn title(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut after_letter = false;
    for c in s.chars() {
        if c.is_alphabetic() {
            if after_letter {
                out.extend(c.to_lowercase());
            } else {
                out.extend(c.to_uppercase());
            }
            after_letter = true;
        } else {
            out.push(c);
            after_letter = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_read_like_python_repr() {
        let cases = [
            (5.0, "5.0"),
            (0.5, "0.5"),
            (0.95, "0.95"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (123456.789, "123456.789"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (9999999999999998.0, "9999999999999998.0"),
            (-2.5, "-2.5"),
            (0.1 + 0.2, "0.30000000000000004"),
            (0.0, "0.0"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
        ];
        for (v, want) in cases {
            assert_eq!(float(v), want, "{v}");
        }
    }

    #[test]
    fn containers_and_scalars_read_like_python_repr() {
        assert_eq!(
            repr(&json!(["run_0001", "run_0002"])),
            "['run_0001', 'run_0002']"
        );
        assert_eq!(
            dict(&[
                ("phases.profiling.concurrency".into(), json!(2)),
                ("phases.profiling.rate".into(), json!(5.0)),
            ]),
            "{'phases.profiling.concurrency': 2, 'phases.profiling.rate': 5.0}"
        );
        assert_eq!(repr(&json!(true)), "True");
        assert_eq!(repr(&json!(null)), "None");
        assert_eq!(repr(&json!("it's")), "\"it's\"");
        assert_eq!(repr(&json!("a'b\"c\n")), "'a\\'b\"c\\n'");
        assert_eq!(str(&json!("plain")), "plain");
        assert_eq!(str(&json!(0.0)), "0.0");
        assert_eq!(repr(&json!([])), "[]");
    }

    #[test]
    fn title_case_follows_python() {
        assert_eq!(title("confidence level"), "Confidence Level");
        assert_eq!(title("run labels"), "Run Labels");
        assert_eq!(title("best latency p99"), "Best Latency P99");
        assert_eq!(title("TTFT mode"), "Ttft Mode");
    }
}
