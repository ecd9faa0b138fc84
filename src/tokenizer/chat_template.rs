//! A model's chat template (the Jinja2 text Hugging Face ships with a tokenizer), rendered
//! the way `transformers.apply_chat_template` does, so the prompt a server builds from a
//! request's messages can be reproduced on the client.
//!
//! Where it is read from, in a tokenizer directory (first found wins, as in transformers):
//! `chat_template.jinja`, `chat_template.json` (a processor's, as vision models ship),
//! `tokenizer_config.json`'s `chat_template` (a string, or a list of named templates of
//! which `default` is taken).

use std::path::{Path, PathBuf};

use minijinja::value::Value;
use minijinja::{Environment, ErrorKind, context};

/// Why a chat template could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not valid JSON: {source}", path.display())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{}: 'chat_template' is neither a string nor a list of named templates", path.display())]
    Shape { path: PathBuf },
    #[error("chat template: {0:#}")]
    Template(#[from] minijinja::Error),
}

/// One chat message as the template sees it: `content` is a string, or a list of
/// `{"type": "text", "text": ...}` parts.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: String,
    pub content: MessageContent,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MessageContent {
    Text(String),
    TextParts(Vec<String>),
}

/// A compiled chat template plus the special-token strings templates refer to.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
    /// The file the template came from, for messages.
    source: PathBuf,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source", &self.source)
            .finish()
    }
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// The chat template in tokenizer directory `dir`, or `None` when it has none.
    pub fn from_dir(dir: &Path) -> Result<Option<ChatTemplate>, ChatTemplateError> {
        let config_path = dir.join("tokenizer_config.json");
        let config = match std::fs::read_to_string(&config_path) {
            Ok(text) => Some(parse_json(&config_path, &text)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(ChatTemplateError::Read {
                    path: config_path,
                    source,
                });
            }
        };
        let jinja = dir.join("chat_template.jinja");
        let processor = dir.join("chat_template.json");
        let (source, path) = if jinja.is_file() {
            (read(&jinja)?, jinja)
        } else if processor.is_file() {
            let json = parse_json(&processor, &read(&processor)?)?;
            match template_field(&processor, &json)? {
                Some(t) => (t, processor),
                None => return Ok(None),
            }
        } else {
            match config
                .as_ref()
                .map(|c| template_field(&config_path, c))
                .transpose()?
                .flatten()
            {
                Some(t) => (t, config_path),
                None => return Ok(None),
            }
        };
        let token = |key: &str| {
            config
                .as_ref()
                .map(|c| token_text(&c[key]))
                .unwrap_or_default()
        };
        ChatTemplate::new(source, &token("bos_token"), &token("eos_token"), path).map(Some)
    }

    /// Compiles `source` in an environment that behaves like transformers' (trimmed blocks,
    /// Python string methods, `raise_exception`, `strftime_now`).
    pub fn new(
        source: String,
        bos_token: &str,
        eos_token: &str,
        origin: PathBuf,
    ) -> Result<ChatTemplate, ChatTemplateError> {
        let mut env = Environment::new();
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .expect("the default delimiters are valid"),
        );
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        minijinja_contrib::add_to_environment(&mut env);
        env.add_function("raise_exception", |message: String| -> Result<Value, _> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        });
        // Templates that print today's date (Llama 3.x) only need a date of the usual
        // length for the token count; a fixed one keeps the count reproducible.
        env.add_function("strftime_now", |_format: String| "26 Jul 2024".to_string());
        env.add_template_owned(NAME, source)?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
            source: origin,
        })
    }

    /// Where the template was read from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The prompt text for `messages`, ending with the assistant's turn header
    /// (`add_generation_prompt=True`), as a server builds it for a chat request.
    pub fn render(&self, messages: &[ChatMessage]) -> Result<String, ChatTemplateError> {
        self.render_values(messages.iter().map(message_value).collect())
    }

    /// `render` of messages given as JSON objects: `role`, `content` and any other field a
    /// template reads (`tool_calls` of a replayed assistant turn).
    pub fn render_json(&self, messages: &[serde_json::Value]) -> Result<String, ChatTemplateError> {
        self.render_values(messages.iter().map(jinja_value).collect())
    }

    fn render_values(&self, messages: Vec<Value>) -> Result<String, ChatTemplateError> {
        let template = self.env.get_template(NAME)?;
        Ok(template.render(context! {
            messages => messages,
            add_generation_prompt => true,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        })?)
    }
}

/// Texts the wrapping of a template is measured on (`ChatTemplate::overheads`).
const PROBES: [&str; 3] = [
    "Hello, how are you today?",
    "Could you write a Python function to reverse a string?",
    "What's the difference between TCP and UDP in networking?",
];

impl ChatTemplate {
    /// The tokens the template adds, as (per request, per message): the assistant prompt
    /// at the end, and the role header and end-of-turn marker around each message. Measured
    /// as AIPerf does, on one user message and on user/assistant/user of the same probe
    /// text, averaged over three probes and rounded. The BOS the template writes is left
    /// out of the per-request cost (a server's tokenizer adds it; prompts never carry it).
    /// `None` when rendering fails or a cost comes out negative.
    pub fn overheads(&self, tokenizer: &super::Tokenizer) -> Option<(u64, u64)> {
        let text = |t: &str| MessageContent::Text(t.to_string());
        let (mut fixed, mut wrap) = (0.0, 0.0);
        for probe in PROBES {
            let msg = |role: &str| ChatMessage {
                role: role.into(),
                content: text(probe),
            };
            let single = self.render(&[msg("user")]).ok()?;
            let triple = self
                .render(&[msg("user"), msg("assistant"), msg("user")])
                .ok()?;
            let bare = tokenizer.count(probe) as f64;
            let bos = f64::from(u8::from(
                !self.bos_token.is_empty() && single.starts_with(&self.bos_token),
            ));
            let (single, triple) = (
                tokenizer.count(&single) as f64,
                tokenizer.count(&triple) as f64,
            );
            let w = (triple - single - 2.0 * bare) / 2.0;
            let f = single - bare - w - bos;
            if w < 0.0 || f < 0.0 {
                return None;
            }
            fixed += f;
            wrap += w;
        }
        let n = PROBES.len() as f64;
        // Python's round: halves to even.
        let round = |v: f64| (v / n).round_ties_even() as u64;
        Some((round(fixed), round(wrap)))
    }
}

/// A JSON value as the template sees it.
fn jinja_value(v: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match v {
        J::Null => Value::from(()),
        J::Bool(b) => Value::from(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::from(i),
            (_, Some(u)) => Value::from(u),
            _ => Value::from(n.as_f64().unwrap_or(0.0)),
        },
        J::String(s) => Value::from(s.as_str()),
        J::Array(items) => Value::from(items.iter().map(jinja_value).collect::<Vec<_>>()),
        J::Object(map) => Value::from(
            map.iter()
                .map(|(k, v)| (k.clone(), jinja_value(v)))
                .collect::<std::collections::BTreeMap<String, Value>>(),
        ),
    }
}

fn message_value(m: &ChatMessage) -> Value {
    let content = match &m.content {
        MessageContent::Text(t) => Value::from(t.as_str()),
        MessageContent::TextParts(parts) => Value::from(
            parts
                .iter()
                .map(|t| context! { type => "text", text => t })
                .collect::<Vec<_>>(),
        ),
    };
    context! { role => m.role.as_str(), content => content }
}

fn read(path: &Path) -> Result<String, ChatTemplateError> {
    std::fs::read_to_string(path).map_err(|source| ChatTemplateError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn parse_json(path: &Path, text: &str) -> Result<serde_json::Value, ChatTemplateError> {
    serde_json::from_str(text).map_err(|source| ChatTemplateError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// `chat_template` of a config: a string, or `[{"name", "template"}, ...]` of which the one
/// named `default` is used (transformers' choice when no name is asked for).
fn template_field(
    path: &Path,
    config: &serde_json::Value,
) -> Result<Option<String>, ChatTemplateError> {
    match &config[NAME] {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some(s.clone())),
        serde_json::Value::Array(named) => Ok(named
            .iter()
            .find(|t| t["name"] == "default")
            .and_then(|t| t["template"].as_str())
            .map(str::to_string)),
        _ => Err(ChatTemplateError::Shape {
            path: path.to_path_buf(),
        }),
    }
}

/// A special token in tokenizer_config.json: a string, or an AddedToken object.
fn token_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other["content"].as_str().unwrap_or_default().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen2-vl")
    }

    fn user(text: &str) -> ChatMessage {
        ChatMessage {
            role: "user".into(),
            content: MessageContent::Text(text.into()),
        }
    }

    #[test]
    fn renders_the_qwen2_vl_template_from_tokenizer_config() {
        let t = ChatTemplate::from_dir(&fixture_dir()).unwrap().unwrap();
        assert!(t.source().ends_with("tokenizer_config.json"));
        // No system message: Qwen2-VL's template adds its default one.
        assert_eq!(
            t.render(&[user("What is in the picture?")]).unwrap(),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n\
             <|im_start|>user\nWhat is in the picture?<|im_end|>\n\
             <|im_start|>assistant\n"
        );
        // Text parts are concatenated; a system message replaces the default one.
        let messages = [
            ChatMessage {
                role: "system".into(),
                content: MessageContent::Text("Be brief.".into()),
            },
            ChatMessage {
                role: "user".into(),
                content: MessageContent::TextParts(vec!["Describe".into(), " this.".into()]),
            },
        ];
        assert_eq!(
            t.render(&messages).unwrap(),
            "<|im_start|>system\nBe brief.<|im_end|>\n\
             <|im_start|>user\nDescribe this.<|im_end|>\n\
             <|im_start|>assistant\n"
        );
    }

    #[test]
    fn chat_template_jinja_wins_and_special_tokens_are_passed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("tokenizer_config.json"),
            r#"{"chat_template": "ignored", "bos_token": {"content": "<s>"}, "eos_token": "</s>"}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("chat_template.jinja"),
            "{{ bos_token }}{% for m in messages %}[{{ m.role | upper }}] {{ m.content.strip() }}\n{% endfor %}{{ eos_token }}",
        )
        .unwrap();
        let t = ChatTemplate::from_dir(dir.path()).unwrap().unwrap();
        assert_eq!(t.render(&[user("  hi ")]).unwrap(), "<s>[USER] hi\n</s>");
    }

    #[test]
    fn overheads_of_a_chatml_template_counted_by_hand() {
        let dir = crate::metrics::template_overhead::tests::chatml_tokenizer_dir();
        let tok = crate::tokenizer::Tokenizer::from_file(dir.path()).unwrap();
        let t = tok.chat_template().unwrap().unwrap();
        // GPT-2 tokens with the ChatML markers: the default system message
        // `<|im_start|> system \n You are a helpful assistant . <|im_end|> \n` is 11, a
        // user message's wrap `<|im_start|> user \n ... <|im_end|> \n` 5, an assistant's 6
        // (`ass istant`), the assistant prompt `<|im_start|> ass istant \n` 4. So one user
        // message adds 11 + 5 + 4 = 20, user/assistant/user adds 11 + 16 + 4 = 31: the
        // wrap is (31 - 20) / 2 = 5.5 and the per-request cost 20 - 5.5 = 14.5; rounded
        // half to even (Python's round), 14 and 6.
        assert_eq!(t.overheads(&tok), Some((14, 6)));
        // No BOS written by this template, none taken off.
        assert!(
            t.bos_token.is_empty() || !t.render(&[user("x")]).unwrap().starts_with(&t.bos_token)
        );
    }

    #[test]
    fn named_templates_use_default() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("tokenizer_config.json"),
            r#"{"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ messages | length }}"}]}"#,
        )
        .unwrap();
        let t = ChatTemplate::from_dir(dir.path()).unwrap().unwrap();
        assert_eq!(t.render(&[user("x"), user("y")]).unwrap(), "D2");
    }

    #[test]
    fn missing_templates_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        // No config at all, then a config without a template: no template, no error.
        assert!(ChatTemplate::from_dir(dir.path()).unwrap().is_none());
        std::fs::write(
            dir.path().join("tokenizer_config.json"),
            r#"{"bos_token": "<s>"}"#,
        )
        .unwrap();
        assert!(ChatTemplate::from_dir(dir.path()).unwrap().is_none());

        std::fs::write(dir.path().join("tokenizer_config.json"), "{ nope").unwrap();
        let err = ChatTemplate::from_dir(dir.path()).unwrap_err();
        assert!(matches!(err, ChatTemplateError::Json { .. }), "{err}");

        std::fs::write(dir.path().join("chat_template.jinja"), "{% for %}").unwrap();
        std::fs::write(dir.path().join("tokenizer_config.json"), "{}").unwrap();
        let err = ChatTemplate::from_dir(dir.path()).unwrap_err();
        assert!(matches!(err, ChatTemplateError::Template(_)), "{err}");

        std::fs::write(
            dir.path().join("chat_template.jinja"),
            "{{ raise_exception('only user turns') }}",
        )
        .unwrap();
        let t = ChatTemplate::from_dir(dir.path()).unwrap().unwrap();
        let err = t.render(&[user("x")]).unwrap_err().to_string();
        assert!(err.contains("only user turns"), "{err}");
    }
}
