//! Request bodies as vLLM accepts them, and what the mock derives from them: prompt token
//! counts and the number of output tokens.
//!
//! Prompt token accounting:
//! - text: each text part is counted with the builtin o200k_base tokenizer (the one AIPerf's
//!   mock and our client's `--tokenizer builtin` use), so with that tokenizer the client's
//!   ISL equals the server's text tokens and `prompt_tokens - ISL` is exactly the image and
//!   chat-template cost; with another model's tokenizer the text count is an approximation. A completions prompt
//!   given as token ids counts one per id;
//! - images: each base64 data-URL image costs `qwen2_vl_image_tokens(width, height)`, with the
//!   size read from its PNG/JPEG header; http(s) image URLs are not fetched and cost
//!   `remote_image_tokens` each (0 by default);
//! - audio (`input_audio`) and video (`video_url`) parts: see `audio` and `video`;
//! - chat template: each chat message adds `template_tokens_per_message` (a real server's
//!   template wraps every message in role markers), none for a completions prompt.

use std::borrow::Cow;

use std::sync::OnceLock;

use serde::Deserialize;

use crate::tokenizer::Tokenizer;

use super::audio::input_audio_tokens;
use super::image::qwen2_vl_image_tokens;
use super::video::video_url_tokens;
use crate::dataset::data_url::image_size;

/// Output lengths without `max_tokens` are the prompt's text tokens clamped to this range.
pub const DEFAULT_OUTPUT_MIN: u64 = 16;
pub const DEFAULT_OUTPUT_MAX: u64 = 256;

#[derive(Debug, Deserialize)]
pub struct ChatRequest<'a> {
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub messages: Option<Vec<Message<'a>>>,
    #[serde(flatten)]
    pub generation: GenerationParams,
}

#[derive(Debug, Deserialize)]
pub struct CompletionRequest<'a> {
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub prompt: Option<Prompt<'a>>,
    #[serde(flatten)]
    pub generation: GenerationParams,
}

/// The sampling fields the mock honours; everything else in the body is ignored.
#[derive(Debug, Default, Deserialize)]
pub struct GenerationParams {
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub min_tokens: Option<u64>,
    #[serde(default)]
    pub ignore_eos: Option<bool>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct Message<'a> {
    #[serde(borrow, default)]
    pub role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub content: Option<Content<'a>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Parts(#[serde(borrow)] Vec<Part<'a>>),
}

/// One content part. Kept as a struct (not a tagged enum) so unknown part types pass through.
#[derive(Debug, Deserialize)]
pub struct Part<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub image_url: Option<ImageUrl<'a>>,
    #[serde(borrow, default)]
    pub input_audio: Option<InputAudio<'a>>,
    #[serde(borrow, default)]
    pub video_url: Option<ImageUrl<'a>>,
    /// vLLM's multimodal cache id of an image part.
    #[serde(borrow, default)]
    pub uuid: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
pub struct InputAudio<'a> {
    #[serde(borrow, default)]
    pub data: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub format: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ImageUrl<'a> {
    Object {
        #[serde(borrow)]
        url: Cow<'a, str>,
    },
    Bare(#[serde(borrow)] Cow<'a, str>),
}

impl ImageUrl<'_> {
    fn url(&self) -> &str {
        match self {
            ImageUrl::Object { url } | ImageUrl::Bare(url) => url,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Prompt<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Texts(#[serde(borrow)] Vec<Cow<'a, str>>),
    Ids(Vec<u64>),
    IdLists(Vec<Vec<u64>>),
}

/// Prompt-side facts of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptStats {
    pub text_tokens: u64,
    pub image_tokens: u64,
    /// Audio and video tokens (see `audio` and `video`).
    pub media_tokens: u64,
    /// What the chat template adds around the messages.
    pub template_tokens: u64,
    /// (width, height) of each image, in request order; (0, 0) for an http(s) URL.
    pub image_sizes: Vec<(u32, u32)>,
    /// Each chat message's role, in order, for `--record-requests`.
    pub roles: Vec<String>,
}

impl PromptStats {
    pub fn prompt_tokens(&self) -> u64 {
        self.text_tokens + self.image_tokens + self.media_tokens + self.template_tokens
    }
}

/// How the mock answers one request: the output length and why it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputPlan {
    pub tokens: u64,
    pub finish_reason: FinishReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// The requested maximum was reached.
    Length,
    /// No maximum was given and the mock stopped at its default length, or its simulated
    /// end-of-sequence token came first (`--eos-ratio`).
    Stop,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Length => "length",
            FinishReason::Stop => "stop",
        }
    }
}

/// Text tokens of one text part (see the module doc).
pub fn text_tokens(s: &str) -> u64 {
    builtin_tokenizer().count(s) as u64
}

/// The builtin o200k_base tokenizer the mock counts with, loaded once.
pub fn builtin_tokenizer() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| Tokenizer::builtin().expect("the builtin tokenizer is embedded"))
}

/// What a chat prompt costs beyond its text and data-URL images.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChatCosts {
    /// Tokens for each http(s) image URL (not fetched).
    pub remote_image_tokens: u64,
    /// Chat-template tokens added per message.
    pub template_tokens_per_message: u64,
}

/// Counts the prompt of a chat request. Errors are 400 messages.
pub fn chat_prompt_stats(
    messages: &[Message<'_>],
    costs: ChatCosts,
) -> Result<PromptStats, String> {
    let mut stats = PromptStats {
        template_tokens: costs.template_tokens_per_message * messages.len() as u64,
        ..PromptStats::default()
    };
    for (m, message) in messages.iter().enumerate() {
        stats
            .roles
            .push(message.role.as_deref().unwrap_or_default().to_string());
        match &message.content {
            None => {}
            Some(Content::Text(s)) => stats.text_tokens += text_tokens(s),
            Some(Content::Parts(parts)) => {
                for (p, part) in parts.iter().enumerate() {
                    count_part(part, costs.remote_image_tokens, &mut stats)
                        .map_err(|e| format!("messages[{m}].content[{p}]: {e}"))?;
                }
            }
        }
    }
    Ok(stats)
}

fn count_part(
    part: &Part<'_>,
    remote_image_tokens: u64,
    stats: &mut PromptStats,
) -> Result<(), String> {
    match part.kind.as_ref() {
        "text" => {
            let text = part
                .text
                .as_deref()
                .ok_or("a 'text' part needs a 'text' field")?;
            stats.text_tokens += text_tokens(text);
        }
        "image_url" => {
            let url = part
                .image_url
                .as_ref()
                .ok_or("an 'image_url' part needs an 'image_url' field")?
                .url();
            if url.is_empty() && part.uuid.is_some() {
                // A cache reference (vLLM, `--uuid-and-strip`): the data came earlier.
                stats.image_sizes.push((0, 0));
            } else if url.starts_with("data:") {
                let (w, h) = image_size(url).map_err(|e| e.to_string())?;
                stats.image_tokens += qwen2_vl_image_tokens(w, h);
                stats.image_sizes.push((w, h));
            } else if url.starts_with("http://") || url.starts_with("https://") {
                stats.image_tokens += remote_image_tokens;
                stats.image_sizes.push((0, 0));
            } else {
                return Err("image URL must be a data URL or an http(s) URL".into());
            }
        }
        "input_audio" => {
            let audio = part
                .input_audio
                .as_ref()
                .ok_or("an 'input_audio' part needs an 'input_audio' field")?;
            let data = audio
                .data
                .as_deref()
                .ok_or("an 'input_audio' part needs 'input_audio.data'")?;
            let (tokens, _) = input_audio_tokens(data, audio.format.as_deref())?;
            stats.media_tokens += tokens;
        }
        "video_url" => {
            let url = part
                .video_url
                .as_ref()
                .ok_or("a 'video_url' part needs a 'video_url' field")?
                .url();
            stats.media_tokens += video_url_tokens(url)?;
        }
        // Other part types are accepted and not counted.
        _ => {}
    }
    Ok(())
}

/// Counts the prompt of a completions request.
pub fn completion_prompt_stats(prompt: &Prompt<'_>) -> PromptStats {
    let text_tokens = match prompt {
        Prompt::Text(s) => text_tokens(s),
        Prompt::Texts(v) => v.iter().map(|s| text_tokens(s)).sum(),
        Prompt::Ids(ids) => ids.len() as u64,
        Prompt::IdLists(lists) => lists.iter().map(|l| l.len() as u64).sum(),
    };
    PromptStats {
        text_tokens,
        ..PromptStats::default()
    }
}

impl GenerationParams {
    pub fn stream(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    /// `max_completion_tokens` wins over `max_tokens`, as in vLLM.
    pub fn max_output(&self) -> Option<u64> {
        self.max_completion_tokens.or(self.max_tokens)
    }

    /// The output length. With a maximum the mock returns exactly that many tokens (it has no
    /// EOS, so `ignore_eos` changes nothing) and finishes with `length`. Without one it returns
    /// `clamp(prompt text tokens, 16, 256)`, raised to `min_tokens`, and finishes with `stop`.
    /// Errors are 400 messages worded like vLLM's.
    pub fn output_plan(
        &self,
        prompt: &PromptStats,
        max_model_len: u64,
    ) -> Result<OutputPlan, String> {
        self.output_plan_with_eos(prompt, max_model_len, 1.0)
    }

    /// [`output_plan`](Self::output_plan) for a model that reaches its end-of-sequence token
    /// after `eos_ratio` of `max_tokens` (rounded, at least 1 and `min_tokens`), unless the
    /// request sets `ignore_eos`.
    pub fn output_plan_with_eos(
        &self,
        prompt: &PromptStats,
        max_model_len: u64,
        eos_ratio: f64,
    ) -> Result<OutputPlan, String> {
        let mut plan = self.full_output_plan(prompt, max_model_len)?;
        let stops_early = eos_ratio < 1.0 && !self.ignore_eos.unwrap_or(false);
        if stops_early && plan.finish_reason == FinishReason::Length {
            let at = ((plan.tokens as f64 * eos_ratio).round() as u64)
                .max(1)
                .max(self.min_tokens.unwrap_or(0));
            if at < plan.tokens {
                plan = OutputPlan {
                    tokens: at,
                    finish_reason: FinishReason::Stop,
                };
            }
        }
        Ok(plan)
    }

    fn full_output_plan(
        &self,
        prompt: &PromptStats,
        max_model_len: u64,
    ) -> Result<OutputPlan, String> {
        let min = self.min_tokens.unwrap_or(0);
        let plan = match self.max_output() {
            Some(0) => return Err("max_tokens must be at least 1, got 0.".into()),
            Some(max) if min > max => {
                return Err(format!(
                    "min_tokens must be less than or equal to max_tokens={max}, got {min}."
                ));
            }
            Some(max) => OutputPlan {
                tokens: max,
                finish_reason: FinishReason::Length,
            },
            None => OutputPlan {
                tokens: prompt
                    .text_tokens
                    .clamp(DEFAULT_OUTPUT_MIN, DEFAULT_OUTPUT_MAX)
                    .max(min),
                finish_reason: FinishReason::Stop,
            },
        };
        let total = prompt.prompt_tokens().saturating_add(plan.tokens);
        if total > max_model_len {
            return Err(format!(
                "This model's maximum context length is {max_model_len} tokens. However, you \
                 requested {total} tokens ({} in the messages, {} in the completion). Please \
                 reduce the length of the messages or completion.",
                prompt.prompt_tokens(),
                plan.tokens
            ));
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn chat(json: &str) -> ChatRequest<'_> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn string_and_part_contents_are_counted() {
        let req = chat(
            r#"{"model":"m","messages":[
                {"role":"system","content":"the of"},
                {"role":"user","content":[{"type":"text","text":"the and"},
                                          {"type":"image_url","image_url":{"url":"https://x/y.png"}},
                                          {"type":"input_file","input_file":{}}]},
                {"role":"assistant","content":null}]}"#,
        );
        let costs = ChatCosts {
            remote_image_tokens: 7,
            template_tokens_per_message: 5,
        };
        let stats = chat_prompt_stats(req.messages.as_deref().unwrap(), costs).unwrap();
        assert_eq!(stats.text_tokens, 2 + 2);
        assert_eq!(stats.image_tokens, 7);
        assert_eq!(stats.image_sizes, vec![(0, 0)]);
        // Three messages, the empty assistant one included.
        assert_eq!(stats.template_tokens, 15);
        assert_eq!(stats.prompt_tokens(), 26);
    }

    #[test]
    fn text_is_counted_with_o200k() {
        assert_eq!(text_tokens(""), 0);
        assert_eq!(text_tokens("the of and to"), 4);
        assert_eq!(text_tokens("Hello world"), 2);
    }

    #[test]
    fn data_url_images_use_qwen2_vl_cost() {
        let mut png = std::io::Cursor::new(Vec::new());
        image::RgbImage::new(512, 512)
            .write_to(&mut png, image::ImageFormat::Png)
            .unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(png.into_inner());
        let body = format!(
            r#"{{"messages":[{{"role":"user","content":[{{"type":"image_url","image_url":{{"url":"data:image/png;base64,{b64}"}}}}]}}]}}"#
        );
        let req = chat(&body);
        let stats =
            chat_prompt_stats(req.messages.as_deref().unwrap(), ChatCosts::default()).unwrap();
        assert_eq!(stats.image_tokens, 326);
        assert_eq!(stats.image_sizes, vec![(512, 512)]);
    }

    #[test]
    fn audio_and_video_parts_are_counted() {
        let wav = {
            let mut v = b"RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0".to_vec();
            v.extend_from_slice(&16_000u32.to_le_bytes());
            v.extend_from_slice(&32_000u32.to_le_bytes());
            v.extend_from_slice(b"\x02\0\x10\0data");
            v.extend_from_slice(&16_000u32.to_le_bytes());
            v.resize(44 + 16_000, 0);
            v
        };
        let b64 = base64::engine::general_purpose::STANDARD.encode(&wav);
        let json = format!(
            r#"{{"messages":[{{"role":"user","content":[
                {{"type":"input_audio","input_audio":{{"data":"{b64}","format":"wav"}}}},
                {{"type":"video_url","video_url":{{"url":"https://x/clip.mp4"}}}}]}}]}}"#
        );
        let req = chat(&json);
        let stats =
            chat_prompt_stats(req.messages.as_deref().unwrap(), ChatCosts::default()).unwrap();
        // Half a second: 13 tokens + 2; a remote video is not fetched.
        assert_eq!(stats.media_tokens, 15);
        assert_eq!(stats.prompt_tokens(), 15);
        let missing =
            chat(r#"{"messages":[{"content":[{"type":"input_audio","input_audio":{}}]}]}"#);
        let err = chat_prompt_stats(missing.messages.as_deref().unwrap(), ChatCosts::default())
            .unwrap_err();
        assert!(err.contains("input_audio.data"), "{err}");
    }

    #[test]
    fn bad_images_and_parts_are_errors() {
        let req = chat(
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,!!"}}]}]}"#,
        );
        let err =
            chat_prompt_stats(req.messages.as_deref().unwrap(), ChatCosts::default()).unwrap_err();
        assert!(
            err.starts_with("messages[0].content[0]: invalid base64"),
            "{err}"
        );
        let req = chat(r#"{"messages":[{"role":"user","content":[{"type":"text"}]}]}"#);
        assert!(chat_prompt_stats(req.messages.as_deref().unwrap(), ChatCosts::default()).is_err());
        let req = chat(
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"file:///etc/passwd"}]}]}"#,
        );
        assert!(chat_prompt_stats(req.messages.as_deref().unwrap(), ChatCosts::default()).is_err());
    }

    #[test]
    fn completion_prompts() {
        fn parse(s: &str) -> CompletionRequest<'_> {
            serde_json::from_str(s).unwrap()
        }
        let stats = |s: &str| completion_prompt_stats(parse(s).prompt.as_ref().unwrap());
        assert_eq!(stats(r#"{"prompt":"the of"}"#).text_tokens, 2);
        assert_eq!(stats(r#"{"prompt":["the","the of"]}"#).text_tokens, 3);
        assert_eq!(stats(r#"{"prompt":[1,2,3]}"#).text_tokens, 3);
        assert_eq!(stats(r#"{"prompt":[[1,2],[3]]}"#).text_tokens, 3);
        assert!(parse(r#"{"model":"x"}"#).prompt.is_none());
    }

    #[test]
    fn output_length_rules() {
        let params = |s: &str| -> GenerationParams { serde_json::from_str(s).unwrap() };
        let prompt = |text_tokens| PromptStats {
            text_tokens,
            ..PromptStats::default()
        };
        let plan = |s: &str, p: u64| params(s).output_plan(&prompt(p), 100_000);
        let length = |tokens| {
            Ok(OutputPlan {
                tokens,
                finish_reason: FinishReason::Length,
            })
        };
        let stop = |tokens| {
            Ok(OutputPlan {
                tokens,
                finish_reason: FinishReason::Stop,
            })
        };
        assert_eq!(plan(r#"{"max_tokens":7}"#, 50), length(7));
        assert_eq!(
            plan(r#"{"max_tokens":7,"max_completion_tokens":9}"#, 50),
            length(9)
        );
        assert_eq!(plan(r#"{"max_tokens":7,"ignore_eos":true}"#, 50), length(7));
        assert_eq!(plan(r#"{"max_tokens":7,"min_tokens":7}"#, 50), length(7));
        assert!(plan(r#"{"max_tokens":7,"min_tokens":8}"#, 50).is_err());
        assert!(plan(r#"{"max_tokens":0}"#, 50).is_err());
        // A model that stops at its EOS after 60% of max_tokens, unless told to ignore it.
        let eos = |s: &str| params(s).output_plan_with_eos(&prompt(50), 100_000, 0.6);
        assert_eq!(eos(r#"{"max_tokens":10}"#), stop(6));
        assert_eq!(eos(r#"{"max_tokens":10,"ignore_eos":true}"#), length(10));
        assert_eq!(eos(r#"{"max_tokens":10,"min_tokens":8}"#), stop(8));
        assert_eq!(eos(r#"{"max_tokens":10,"min_tokens":10}"#), length(10));
        assert_eq!(plan("{}", 3), stop(16));
        assert_eq!(plan("{}", 50), stop(50));
        assert_eq!(plan("{}", 5000), stop(256));
        assert_eq!(plan(r#"{"min_tokens":40}"#, 3), stop(40));
        assert!(
            params(r#"{"max_tokens":10}"#)
                .output_plan(&prompt(95), 100)
                .is_err()
        );
        assert!(
            params(r#"{"max_tokens":5}"#)
                .output_plan(&prompt(95), 100)
                .is_ok()
        );
    }

    #[test]
    fn stream_flags() {
        let p: GenerationParams =
            serde_json::from_str(r#"{"stream":true,"stream_options":{"include_usage":true}}"#)
                .unwrap();
        assert!(p.stream() && p.include_usage());
        let p: GenerationParams = serde_json::from_str(r#"{"stream":true}"#).unwrap();
        assert!(p.stream() && !p.include_usage());
    }
}
