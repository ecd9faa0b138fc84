//! Request bodies from a Jinja2 template (`--endpoint-type template`), given as
//! `--extra-inputs payload_template:<name|file|inline template>`, and the `response_field`
//! path that finds the answer text in a response (`template` and `raw`).
//!
//! The template sees `text` (the first text), `texts` (all of them), `model`, `max_tokens`
//! (none without an output length), `stream` and `role`, and must render one JSON object;
//! the other `--extra-inputs` are merged into it, then the entry's own `extra`. As in
//! AIPerf, printed values are HTML-escaped (`"` -> `&#34;`): put strings in with `tojson`.

use minijinja::value::Value as JinjaValue;
use minijinja::{AutoEscape, Environment, context};
use serde_json::{Map, Value};

use crate::dataset::Entry;

/// `--extra-inputs` keys that configure the endpoint instead of going into the body.
pub const PAYLOAD_TEMPLATE: &str = "payload_template";
pub const RESPONSE_FIELD: &str = "response_field";

/// Named templates, as AIPerf names them.
const NAMED: &[(&str, &str)] = &[("nv-embedqa", r#"{"text": {{ texts|tojson }}}"#)];

const NAME: &str = "payload";

/// The `payload_template` value as a template: `--extra-inputs` reads values that are
/// valid JSON as JSON, so a template without tags comes back as the text it was.
pub fn spec_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The compiled template.
pub struct PayloadTemplate {
    env: Environment<'static>,
}

impl std::fmt::Debug for PayloadTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PayloadTemplate")
    }
}

impl PayloadTemplate {
    /// `spec` is a named template, else a file holding one, else the template itself.
    pub fn new(spec: &str) -> Result<PayloadTemplate, String> {
        let source = if let Some((_, t)) = NAMED.iter().find(|(n, _)| *n == spec) {
            t.to_string()
        } else if std::path::Path::new(spec).is_file() {
            std::fs::read_to_string(spec).map_err(|e| format!("cannot read '{spec}': {e}"))?
        } else {
            spec.to_string()
        };
        let mut env = Environment::new();
        // Escaping is done by `markupsafe_formatter`, the way Jinja2 does it.
        env.set_auto_escape_callback(|_| AutoEscape::None);
        env.set_formatter(markupsafe_formatter);
        env.add_template_owned(NAME, source)
            .map_err(|e| format!("the template does not compile: {e}"))?;
        Ok(PayloadTemplate { env })
    }

    /// Renders the body for one entry and checks it is a JSON object.
    pub fn render(
        &self,
        entry: &Entry,
        model: &str,
        streaming: bool,
    ) -> Result<Map<String, Value>, String> {
        let texts: Vec<String> = std::iter::once(&entry.text)
            .chain(&entry.extra_texts)
            .filter(|t| !t.is_empty())
            .cloned()
            .collect();
        let ctx = context! {
            text => texts.first().cloned(),
            texts => texts,
            model => model,
            max_tokens => entry.max_output_tokens,
            stream => streaming,
            role => entry.role.clone().unwrap_or_else(|| "user".into()),
        };
        let rendered = self
            .env
            .get_template(NAME)
            .and_then(|t| t.render(ctx))
            .map_err(|e| format!("the template does not render: {e}"))?;
        match serde_json::from_str::<Value>(&rendered) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(other) => Err(format!(
                "the template rendered {}, not a JSON object: {}",
                kind(&other),
                clip(&rendered)
            )),
            Err(e) => Err(format!(
                "the template did not render valid JSON ({e}): {}",
                clip(&rendered)
            )),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "a list",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        _ => "null",
    }
}

fn clip(s: &str) -> String {
    let mut end = s.len().min(200);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Writes a value as Jinja2 with `autoescape=True` does: strings not marked safe get
/// `& < > ' "` escaped (markupsafe's forms); `tojson` output is safe and goes as it is.
fn markupsafe_formatter(
    out: &mut minijinja::Output,
    state: &mut minijinja::State,
    value: &JinjaValue,
) -> Result<(), minijinja::Error> {
    match value.as_str() {
        Some(s) if !value.is_safe() => {
            let mut escaped = String::with_capacity(s.len());
            for c in s.chars() {
                match c {
                    '&' => escaped.push_str("&amp;"),
                    '<' => escaped.push_str("&lt;"),
                    '>' => escaped.push_str("&gt;"),
                    '\'' => escaped.push_str("&#39;"),
                    '"' => escaped.push_str("&#34;"),
                    c => escaped.push(c),
                }
            }
            out.write_str(&escaped).map_err(minijinja::Error::from)
        }
        _ => minijinja::escape_formatter(out, state, value),
    }
}

/// A path to a value in a JSON response: dotted keys with list indexes, e.g.
/// `choices[0].message.content` or `[0].generated_text` (the JMESPath subset that names
/// one value).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldPath {
    text: String,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(i64),
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl FieldPath {
    pub fn parse(text: &str) -> Result<FieldPath, String> {
        let bad = |why: &str| {
            format!(
                "'{text}' is not a field path ({why}); give dotted keys with list indexes, e.g. choices[0].message.content"
            )
        };
        let mut steps = Vec::new();
        for (i, part) in text.split('.').enumerate() {
            let (key, mut rest) = part.split_at(part.find('[').unwrap_or(part.len()));
            if !key.is_empty() {
                if !key
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
                {
                    return Err(bad(&format!("'{key}' is not a plain key")));
                }
                steps.push(Step::Key(key.to_string()));
            } else if rest.is_empty() || i > 0 {
                return Err(bad("an empty key"));
            }
            while !rest.is_empty() {
                let close = rest.find(']').ok_or_else(|| bad("a '[' without ']'"))?;
                let index = rest[1..close]
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| bad(&format!("'{}' is not a list index", &rest[1..close])))?;
                steps.push(Step::Index(index));
                rest = &rest[close + 1..];
                if !rest.is_empty() && !rest.starts_with('[') {
                    return Err(bad(&format!("'{rest}' after an index")));
                }
            }
        }
        Ok(FieldPath {
            text: text.to_string(),
            steps,
        })
    }

    /// The value at the path, if there is one (negative indexes count from the end).
    pub fn find<'v>(&self, mut v: &'v Value) -> Option<&'v Value> {
        for step in &self.steps {
            v = match step {
                Step::Key(k) => v.get(k)?,
                Step::Index(i) => {
                    let list = v.as_array()?;
                    let at = if *i < 0 { list.len() as i64 + i } else { *i };
                    list.get(usize::try_from(at).ok()?)?
                }
            };
        }
        Some(v)
    }
}

/// The body of one template request: the rendered object, then `--extra-inputs` (but the
/// template's own keys), then the entry's `extra`.
pub fn body(
    template: &PayloadTemplate,
    mut entry: Entry,
    model: &str,
    streaming: bool,
    extra_inputs: &Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let mut body = template.render(&entry, model, streaming)?;
    for (k, v) in extra_inputs {
        if k != PAYLOAD_TEMPLATE && k != RESPONSE_FIELD {
            body.insert(k.clone(), v.clone());
        }
    }
    body.extend(std::mem::take(&mut entry.extra));
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(texts: &[&str]) -> Entry {
        Entry {
            text: texts[0].into(),
            input_tokens: 1,
            images: Vec::new(),
            audios: Vec::new(),
            videos: Vec::new(),
            max_output_tokens: Some(9),
            extra_texts: texts[1..].iter().map(|t| t.to_string()).collect(),
            role: None,
            extra: Map::new(),
            timestamp_ms: None,
            delay: None,
            own: None,
        }
    }

    #[test]
    fn named_inline_and_escaping() {
        let t = PayloadTemplate::new("nv-embedqa").unwrap();
        let body = t.render(&entry(&["a \"b\"", "c"]), "m", false).unwrap();
        assert_eq!(Value::Object(body), json!({"text": ["a \"b\"", "c"]}));
        let t = PayloadTemplate::new(
            r#"{"q": "{{ text }}", "m": {{ model|tojson }}, "n": {{ max_tokens }}, "s": {{ stream|tojson }}}"#,
        )
        .unwrap();
        let body = t.render(&entry(&["x<y"]), "org/m", true).unwrap();
        assert_eq!(
            Value::Object(body),
            json!({"q": "x&lt;y", "m": "org/m", "n": 9, "s": true})
        );
        let bad = PayloadTemplate::new("{{ text }}").unwrap();
        let err = bad.render(&entry(&["hi"]), "m", false).unwrap_err();
        assert!(err.contains("not render valid JSON"), "{err}");
        assert!(PayloadTemplate::new("{% if %}").is_err());
    }

    #[test]
    fn field_paths() {
        let v = json!({"choices": [{"message": {"content": "hi"}}], "out": [[1, 2], [3]]});
        let p = FieldPath::parse("choices[0].message.content").unwrap();
        assert_eq!(p.find(&v), Some(&json!("hi")));
        assert_eq!(
            FieldPath::parse("out[-1][0]").unwrap().find(&v),
            Some(&json!(3))
        );
        assert_eq!(
            FieldPath::parse("choices[1].message").unwrap().find(&v),
            None
        );
        let list = json!([{"generated_text": "g"}]);
        assert_eq!(
            FieldPath::parse("[0].generated_text").unwrap().find(&list),
            Some(&json!("g"))
        );
        for bad in ["a..b", "a[x]", "a[0", "a[0]b", "a b", ""] {
            assert!(FieldPath::parse(bad).is_err(), "{bad}");
        }
    }
}
