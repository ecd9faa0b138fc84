//! `aiperf chat`: its flags checked and resolved (the request URL, headers, tokenizer) with
//! the same rules as `profile`'s.

use std::path::PathBuf;

use http::{HeaderName, HeaderValue, Uri};

use super::endpoint::{
    build_request_uris, check_api_key, header_values, parse_header_pairs, url_basic_auth,
};
use super::{ConfigError, config_error};
use crate::cli::chat::ChatArgs;
use crate::endpoint::EndpointType;

/// A checked `aiperf chat` command line.
#[derive(Debug, Clone)]
pub struct ChatConfig {
    pub model: String,
    /// The chat completions URL.
    pub uri: Uri,
    /// Every header a request carries (content type, auth, `-H`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub system_prompt: Option<String>,
    pub quick: Option<String>,
    pub history: bool,
    /// What `tokenizer::resolve` is given.
    pub tokenizer: String,
    /// Images attached to the first message.
    pub images: Vec<PathBuf>,
    /// Lines for stderr before the session starts.
    pub warnings: Vec<String>,
}

impl ChatConfig {
    pub fn from_args(a: &ChatArgs) -> Result<ChatConfig, ConfigError> {
        if a.model.trim().is_empty() {
            return Err(config_error(
                "--model: empty; give the model name the server serves",
            ));
        }
        // A full chat completions URL is taken as it is (AIPerf's chat accepts the bare
        // host, a /v1 base or the whole path).
        let full = a
            .url
            .trim()
            .trim_end_matches('/')
            .ends_with("/chat/completions");
        let custom = match (&a.custom_endpoint, full) {
            (Some(path), _) => Some(path.as_str()),
            (None, true) => Some(""),
            (None, false) => None,
        };
        let (uris, userinfo) =
            build_request_uris(std::slice::from_ref(&a.url), custom, EndpointType::Chat)?;
        let uri = uris.into_iter().next().expect("one URL gives one URI");
        let mut warnings = Vec::new();
        let mut given = header_values(&parse_header_pairs(&a.headers)?)?;
        let api_key = a.api_key.as_deref().filter(|k| !k.is_empty());
        if let Some(key) = api_key {
            check_api_key(key)?;
        }
        if let Some(info) = &userinfo {
            url_basic_auth(info, api_key.is_some(), &mut given, &mut warnings)?;
        }
        let headers = EndpointType::Chat
            .request_headers(api_key, &given)
            .map_err(config_error)?;
        for image in &a.image {
            if !image.is_file() {
                return Err(config_error(format!(
                    "--image {}: no such file; give the path of a PNG, JPEG, WebP, GIF or BMP image",
                    image.display()
                )));
            }
        }
        Ok(ChatConfig {
            model: a.model.trim().to_string(),
            uri,
            headers,
            system_prompt: a.system_prompt.clone().filter(|s| !s.is_empty()),
            quick: a.quick.clone(),
            history: !a.no_history,
            tokenizer: a.tokenizer.clone().unwrap_or_else(|| a.model.clone()),
            images: a.image.clone(),
            warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        chat: ChatArgs,
    }

    fn cfg(args: &[&str]) -> Result<ChatConfig, ConfigError> {
        let w = Wrap::try_parse_from(std::iter::once("chat").chain(args.iter().copied())).unwrap();
        ChatConfig::from_args(&w.chat)
    }

    #[test]
    fn urls_resolve_to_the_chat_completions_path() {
        for (url, want) in [
            (
                "localhost:8000",
                "http://localhost:8000/v1/chat/completions",
            ),
            ("http://h:1/v1", "http://h:1/v1/chat/completions"),
            (
                "http://h:1/openai/v1/chat/completions",
                "http://h:1/openai/v1/chat/completions",
            ),
        ] {
            let c = cfg(&["-m", "m", "-u", url, "--api-key", ""]).unwrap();
            assert_eq!(c.uri.to_string(), want, "{url}");
        }
        let c = cfg(&[
            "-m",
            "m",
            "-u",
            "h:1",
            "--custom-endpoint",
            "chat",
            "--api-key",
            "",
        ])
        .unwrap();
        assert_eq!(c.uri.to_string(), "http://h:1/chat");
    }

    #[test]
    fn the_key_and_headers_are_sent() {
        let c = cfg(&["-m", "m", "--api-key", "sk-1", "-H", "X-A:b"]).unwrap();
        let get = |n: &str| {
            c.headers
                .iter()
                .find(|(k, _)| k.as_str() == n)
                .map(|(_, v)| v.to_str().unwrap().to_string())
        };
        assert_eq!(get("authorization").as_deref(), Some("Bearer sk-1"));
        assert_eq!(get("x-a").as_deref(), Some("b"));
        assert_eq!(get("content-type").as_deref(), Some("application/json"));
    }

    #[test]
    fn bad_input_names_the_flag() {
        let e = cfg(&["-m", "m", "--image", "/no/such.png", "--api-key", ""]).unwrap_err();
        assert!(e.0.starts_with("--image /no/such.png: no such file"), "{e}");
        let e = cfg(&["-m", "m", "-H", "nocolon", "--api-key", ""]).unwrap_err();
        assert!(e.0.starts_with("--header"), "{e}");
        let e = cfg(&["-m", "m", "--api-key", "a\nb"]).unwrap_err();
        assert!(e.0.starts_with("--api-key"), "{e}");
    }
}
