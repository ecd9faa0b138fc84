//! What the exports may show: the command line and URIs with every secret replaced by `***`.

use serde_json::{Map, Value};

use super::*;

pub(super) fn redact_header_arg(item: &str) -> String {
    match item.split_once(':') {
        Some((k, _)) if is_secret_header(k) => format!("{k}:***"),
        _ => item.to_string(),
    }
}

/// Headers whose values are credentials: never shown in the command line, logs or exports.
/// Broad on purpose: hiding a harmless value costs nothing, showing a token does.
pub fn is_secret_header(name: &str) -> bool {
    let n = name.trim().to_ascii_lowercase();
    ["auth", "cookie", "key", "token", "secret", "password"]
        .iter()
        .any(|w| n.contains(w))
}

/// Every secret string the parsed flags carry: the API key, each secret header's value and
/// the credentials of `--url` and of the scrape URLs (as typed and percent-decoded). The command line is redacted from
/// these values, so no spelling of a flag lets one through.
pub(super) fn collect_secrets(
    api_key: Option<&str>,
    headers: &[(String, String)],
    userinfo: &[&UserInfo],
) -> Vec<String> {
    let mut out: Vec<String> = api_key.map(str::to_string).into_iter().collect();
    for (name, value) in headers {
        if is_secret_header(name) {
            out.push(value.clone());
        }
    }
    for u in userinfo {
        out.extend([u.raw.clone(), u.password.clone()]);
        out.extend(u.raw_password.clone());
    }
    out.retain(|s| !s.trim().is_empty());
    // Longest first, so a secret that contains another is replaced whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// Whether an argument shows a credential: it holds one of `secrets`, or is a JSON header
/// object with a secret header (whatever escapes spell its value).
pub fn carries_secret(arg: &str, secrets: &[String]) -> bool {
    redact_json_headers(arg) != arg || secrets.iter().any(|s| arg.contains(s.as_str()))
}

/// One argument as the exports show it: shell-quoted, every secret replaced by `***`.
pub fn redacted_arg(arg: &str, secrets: &[String]) -> String {
    let mut shown = redact_json_headers(arg);
    for s in secrets {
        shown = shown.replace(s.as_str(), "***");
    }
    shell_quote(&shown)
}

/// The command line as typed, shell-quoted, with every occurrence of a secret replaced by
/// `***`. A JSON object in an argument (the `-H '{"Authorization": ...}'` form) has its
/// secret headers' values replaced too, whatever escapes spell them.
pub fn redacted_command_line(args: &[String], secrets: &[String]) -> String {
    let mut out: Vec<String> = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        out.push(if i == 0 {
            "aiperf".to_string()
        } else {
            redacted_arg(arg, secrets)
        });
    }
    out.join(" ")
}

/// `{"Authorization": "Bearer x"}` (alone or after a flag, e.g. `--header={...}`) with
/// the values of secret headers replaced by `***`; other arguments unchanged.
pub(super) fn redact_json_headers(arg: &str) -> String {
    let Some(start) = arg.find('{') else {
        return arg.to_string();
    };
    let Ok(mut obj) = serde_json::from_str::<Map<String, Value>>(&arg[start..]) else {
        return arg.to_string();
    };
    let mut changed = false;
    for (k, v) in obj.iter_mut() {
        if is_secret_header(k) {
            *v = Value::String("***".into());
            changed = true;
        }
    }
    if !changed {
        return arg.to_string();
    }
    format!("{}{}", &arg[..start], Value::Object(obj))
}

pub(super) fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
