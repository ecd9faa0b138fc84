//! API shapes: request bodies out (built before the run), parsed response events in.
//!
//! One file per request shape; the OpenAI response shapes (chat chunks, chat completions,
//! text completions) share one parser since they differ only in where the text sits.

pub mod audio_transcription;
pub mod chat;
pub mod completions;
pub mod messages;
mod models;
pub mod responses;
mod splice;
// Non-chat endpoint types.
pub mod embeddings;
pub mod image_generation;
pub mod rankings;
pub mod shape;
pub mod template;
// Embeddings with chat messages or images, TGI, image retrieval and SOLIDO RAG.
pub mod chat_embeddings;
pub mod huggingface_generate;
pub mod image_edit;
pub mod image_retrieval;
pub mod nim_embeddings;
pub mod solido_rag;

mod kind;

pub use kind::EndpointType;
pub use models::{ModelPicker, ModelSelection};

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::dataset::{Dataset, Entry, OwnRequest};
use crate::record::Usage;

/// A request ready to send: the exact body bytes plus what the record needs to know.
#[derive(Debug, Clone)]
pub struct PreparedRequest {
    pub body: Bytes,
    pub input_tokens: u64,
    pub num_images: u32,
    /// The output limit the body asks for (`max_tokens`), if any.
    pub max_output_tokens: Option<u64>,
    /// Seconds of the first audio clip, when known (AIPerf's `audio_duration`).
    pub audio_seconds: Option<f64>,
}

/// Body settings shared by every request of a run.
#[derive(Debug, Clone)]
pub struct BodyOptions {
    pub model: String,
    pub streaming: bool,
    pub use_legacy_max_tokens: bool,
    /// Merged at top level last, so they override anything above.
    pub extra_inputs: Map<String, Value>,
}

fn prepare_one(
    endpoint: EndpointType,
    mut entry: Entry,
    system: Option<&str>,
    context: Option<&str>,
    opts: &BodyOptions,
    model: Option<&str>,
    template: Option<&template::PayloadTemplate>,
) -> Result<PreparedRequest, EndpointMismatch> {
    let input_tokens = entry.input_tokens;
    let num_images = entry.images.len() as u32;
    let max_output_tokens = entry.max_output_tokens;
    let audio_seconds = first_audio_seconds(&entry);
    if let Some(OwnRequest::Payload(payload)) = entry.own.take() {
        return Ok(PreparedRequest {
            body: payload_body(payload, entry.extra),
            input_tokens,
            num_images,
            max_output_tokens,
            audio_seconds,
        });
    }
    if endpoint == EndpointType::AudioTranscription {
        return Ok(audio_transcription::prepare(entry, opts, model));
    }
    if endpoint == EndpointType::ImageEdit {
        return image_edit::prepare(entry, opts, model);
    }
    if !endpoint.is_conversational()
        && !matches!(
            endpoint,
            EndpointType::Completions | EndpointType::ChatEmbeddings
        )
    {
        let body = non_chat_body(endpoint, entry, opts, model, template)?;
        return Ok(PreparedRequest {
            body: Bytes::from(serde_json::to_vec(&body).expect("a JSON map always serializes")),
            input_tokens,
            num_images,
            // Vectors and scores have no output length to ask for, nor has SOLIDO RAG.
            max_output_tokens: max_output_tokens
                .filter(|_| endpoint.produces_tokens() && endpoint != EndpointType::SolidoRag),
            audio_seconds,
        });
    }
    let size_hint = body_size_hint(&entry, system) + context.map_or(0, str::len);
    let extra = std::mem::take(&mut entry.extra);
    // Completions have no messages: the user context follows the system text in `prompt`.
    let lead = match (system, context) {
        (Some(s), Some(c)) if endpoint == EndpointType::Completions => Some(format!("{s} {c}")),
        (None, Some(c)) if endpoint == EndpointType::Completions => Some(c.to_string()),
        _ => system.map(str::to_string),
    };
    let system = lead.as_deref();
    let images = match endpoint {
        EndpointType::Chat => splice::take_urls(&mut entry.images, &mut entry.videos),
        _ => None,
    };
    let mut body = match endpoint {
        EndpointType::Chat => chat::body(entry, system, opts),
        EndpointType::Completions => completions::body(entry, system, opts),
        EndpointType::Responses => responses::body(entry, system, opts),
        EndpointType::Messages => messages::body(entry, system, opts),
        EndpointType::ChatEmbeddings => chat_embeddings::body(entry, system, opts),
        _ => unreachable!("multipart and non-chat bodies are built above"),
    };
    if endpoint == EndpointType::Chat
        && let Some(c) = context
        && let Some(Value::Array(messages)) = body.get_mut("messages")
    {
        messages.insert(usize::from(system.is_some()), context_message(c));
    }
    set_model(&mut body, model);
    merge_extras(&mut body, opts, extra);
    let bytes = match images {
        None => to_vec_sized(&body, size_hint),
        Some(images) => {
            let skeleton = serde_json::to_vec(&body).expect("a JSON map always serializes");
            match splice::assemble(&skeleton, images) {
                Ok(bytes) => bytes,
                Err(mut images) => {
                    let mut body = Value::Object(body);
                    splice::restore_urls(&mut body, &mut images);
                    to_vec_sized(&body, size_hint)
                }
            }
        }
    };
    Ok(PreparedRequest {
        body: Bytes::from(bytes),
        input_tokens,
        num_images,
        max_output_tokens: max_output_tokens.filter(|_| endpoint.produces_tokens()),
        audio_seconds,
    })
}

/// The body of a non-chat endpoint type: the type's own fields, then `--extra-inputs`,
/// then the entry's `extra`.
fn non_chat_body(
    endpoint: EndpointType,
    mut entry: Entry,
    opts: &BodyOptions,
    model: Option<&str>,
    template: Option<&template::PayloadTemplate>,
) -> Result<Map<String, Value>, EndpointMismatch> {
    let model = model.unwrap_or(&opts.model);
    let extra = std::mem::take(&mut entry.extra);
    let mut body = match endpoint {
        EndpointType::Embeddings => embeddings::body(entry, model),
        EndpointType::ImageGeneration => image_generation::body(entry, model),
        EndpointType::NimEmbeddings => nim_embeddings::body(entry, model)?,
        EndpointType::ImageRetrieval => image_retrieval::body(entry)?,
        EndpointType::SolidoRag => solido_rag::body(entry, model),
        // --extra-inputs go into `parameters`, the entry's own extras at top level.
        EndpointType::HuggingfaceGenerate => {
            entry.extra = extra;
            return Ok(huggingface_generate::body(entry, opts));
        }
        EndpointType::Template => {
            let template = template.expect("the template is compiled before the bodies");
            entry.extra = extra;
            return template::body(template, entry, model, opts.streaming, &opts.extra_inputs)
                .map_err(EndpointMismatch::Template);
        }
        other => match other.rankings_api() {
            Some(api) => rankings::body(api, entry, model),
            // Raw entries all have a payload (checked with the dataset).
            None => return Err(EndpointMismatch::RawNeedsPayload),
        },
    };
    merge_extras(&mut body, opts, extra);
    Ok(body)
}

/// A one-text request of a non-chat endpoint type, for the readiness probe: "Hello" as the
/// input (the query and one passage for rankings; a small image too for the types that
/// need one). None when it cannot be built.
pub fn probe_body(
    endpoint: EndpointType,
    model: &str,
    extra_inputs: &Map<String, Value>,
) -> Option<Bytes> {
    let opts = BodyOptions {
        model: model.to_string(),
        streaming: false,
        use_legacy_max_tokens: false,
        extra_inputs: extra_inputs.clone(),
    };
    let template = match extra_inputs.get(template::PAYLOAD_TEMPLATE) {
        Some(spec) => template::PayloadTemplate::new(&template::spec_of(spec)).ok(),
        None => None,
    };
    let images = match endpoint {
        EndpointType::ImageRetrieval | EndpointType::ImageEdit => {
            crate::dataset::image::noise_image(16, 16, crate::dataset::image::ImageEncoding::Png, 0)
                .ok()
                .into_iter()
                .collect()
        }
        _ => Vec::new(),
    };
    let entry = Entry {
        text: "Hello".into(),
        input_tokens: 1,
        images,
        audios: Vec::new(),
        videos: Vec::new(),
        max_output_tokens: Some(1),
        extra_texts: if endpoint.rankings_api().is_some() {
            vec!["Hello".into()]
        } else {
            Vec::new()
        },
        role: None,
        extra: Map::new(),
        timestamp_ms: None,
        delay: None,
        own: None,
    };
    prepare_one(endpoint, entry, None, None, &opts, None, template.as_ref())
        .ok()
        .map(|r| r.body)
}

/// The user-context message (`--user-context-prompt-length`) of a chat conversation.
fn context_message(text: &str) -> Value {
    serde_json::json!({"role": "user", "content": text})
}

/// The length of an entry's first audio clip, when known.
fn first_audio_seconds(entry: &Entry) -> Option<f64> {
    entry.audios.first().and_then(|a| a.duration_s)
}

/// Serializes into a buffer of about the right size: bodies are kept for the whole run, and
/// growing one by doubling copies it and can leave up to half of it unused.
fn to_vec_sized(value: &impl serde::Serialize, size_hint: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(size_hint);
    serde_json::to_writer(&mut bytes, value).expect("JSON values always serialize");
    if bytes.capacity() - bytes.len() > bytes.len() / 64 + 256 {
        bytes.shrink_to_fit();
    }
    bytes
}

/// About the serialized size of an entry's body: its text and image URLs (which JSON
/// escaping rarely lengthens: base64 needs none) plus room for the other fields.
fn body_size_hint(entry: &Entry, system: Option<&str>) -> usize {
    let texts: usize = entry.extra_texts.iter().map(|t| t.len() + 32).sum();
    let images: usize = entry
        .images
        .iter()
        .map(|i| i.data_url.len() + 48)
        .sum::<usize>()
        + entry
            .audios
            .iter()
            .map(|a| a.base64.len() + 64)
            .sum::<usize>()
        + entry.videos.iter().map(|v| v.url.len() + 48).sum::<usize>();
    let text = entry.text.len() + system.map_or(0, str::len);
    // Newlines and quotes in prompts take two bytes each; allow some.
    text + text / 16 + texts + images + 512
}

/// A trace row's whole body: sent as written (its model, stream and token limit are the
/// row's, not the flags'), with only the row's own `extra` merged on top.
fn payload_body(mut payload: Map<String, Value>, extra: Map<String, Value>) -> Bytes {
    payload.extend(extra);
    Bytes::from(serde_json::to_vec(&payload).expect("a JSON map always serializes"))
}

/// Names the turn's own model (several `--model`), in place of the first one.
fn set_model(body: &mut Map<String, Value>, model: Option<&str>) {
    if let Some(m) = model {
        body.insert("model".into(), Value::String(m.to_string()));
    }
}

/// `--extra-inputs`, then the entry's own `extra` (which wins), at top level.
fn merge_extras(body: &mut Map<String, Value>, opts: &BodyOptions, extra: Map<String, Value>) {
    for (k, v) in &opts.extra_inputs {
        body.insert(k.clone(), v.clone());
    }
    for (k, v) in extra {
        body.insert(k, v);
    }
}

/// One turn of a multi-turn conversation, serialized before the run. Its body is spliced at
/// send time: `head`, the history (earlier messages and the actual replies), `message`, `tail`.
#[derive(Debug, Clone)]
pub struct PreparedTurn {
    /// This turn's message object.
    pub message: Bytes,
    /// `],` + every other body field + `}`: closes the messages array and the body.
    pub tail: Bytes,
    /// Client-side tokens of this turn's own text.
    pub input_tokens: u64,
    /// This turn's text parts joined by spaces: later turns count their prompt from the
    /// texts of the whole history.
    pub text: String,
    pub num_images: u32,
    /// The output limit this turn asks for (`max_tokens`), if any.
    pub max_output_tokens: Option<u64>,
    /// Seconds of this turn's first audio clip, when known.
    pub audio_seconds: Option<f64>,
    /// Wait after the previous reply before this turn is sent.
    pub delay: Option<std::time::Duration>,
    /// Sent without the history: an input file's messages row replayed verbatim.
    pub standalone: bool,
    /// `message` is the whole body (an input file's payload row), sent as it is.
    pub whole_body: bool,
}

/// The turns of a multi-turn conversation and how to splice them.
#[derive(Debug, Clone, Default)]
pub struct TurnScript {
    /// `{"messages":[` plus the system message and a comma, if there is one.
    pub head: Bytes,
    /// Every turn, the first included; empty for a single request.
    pub turns: Vec<PreparedTurn>,
    /// The system message and user context joined by a space, which every turn sends
    /// first: counted before the history.
    pub lead: String,
}

impl TurnScript {
    /// Number of requests in the conversation.
    pub fn num_turns(&self) -> usize {
        self.turns.len().max(1)
    }

    /// The body of turn `k >= 1` given the assistant's replies to turns `0..k`. Only the
    /// replies are encoded here; everything else was serialized before the run.
    pub fn turn_body(&self, k: usize, replies: &[String]) -> Bytes {
        let turn = &self.turns[k];
        if turn.whole_body {
            return turn.message.clone();
        }
        let earlier = self.history(k);
        let mut len = self.head.len() + turn.message.len() + turn.tail.len();
        for (t, r) in earlier.iter().zip(replies) {
            len += t.message.len() + r.len() + 40;
        }
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&self.head);
        for (t, reply) in earlier.iter().zip(replies) {
            out.extend_from_slice(&t.message);
            out.extend_from_slice(b",{\"role\":\"assistant\",\"content\":");
            serde_json::to_writer(&mut out, reply).expect("a string always serializes");
            out.extend_from_slice(b"},");
        }
        out.extend_from_slice(&turn.message);
        out.extend_from_slice(&turn.tail);
        Bytes::from(out)
    }

    /// The turns whose messages and replies precede turn `k`'s own: none for a standalone
    /// turn.
    fn history(&self, k: usize) -> &[PreparedTurn] {
        if self.turns[k].standalone {
            &[]
        } else {
            &self.turns[..k]
        }
    }

    /// Every text turn `k` sends (earlier turns, their replies, its own), joined by
    /// spaces: what its input sequence length counts, as AIPerf counts a payload's texts.
    pub fn history_text(&self, k: usize, replies: &[String]) -> String {
        let mut parts: Vec<&str> = Vec::with_capacity(2 * k + 2);
        parts.push(&self.lead);
        for (t, reply) in self.history(k).iter().zip(replies) {
            parts.extend([t.text.as_str(), reply.as_str()]);
        }
        parts.push(&self.turns[k].text);
        parts.retain(|p| !p.is_empty());
        parts.join(" ")
    }
}

/// A conversation ready to send.
#[derive(Debug, Clone)]
pub struct PreparedConversation {
    /// The complete body of the first turn (no history yet).
    pub first: PreparedRequest,
    pub script: TurnScript,
    /// The first turn's trace timestamp, kept for schedules.
    pub timestamp_ms: Option<u64>,
    /// The input file's session id, kept as the conversation's id.
    pub session_id: Option<String>,
}

/// Data the endpoint cannot carry: nothing is sent.
#[derive(Debug, thiserror::Error)]
pub enum EndpointMismatch {
    #[error("multi-turn conversations need --endpoint-type chat, responses or messages, not {}", .0.as_str())]
    MultiTurn(EndpointType),
    #[error("the input has images, which need --endpoint-type chat, responses, messages, chat_embeddings, nim_embeddings, image_edit or image_retrieval, not {}", .0.as_str())]
    Images(EndpointType),
    #[error("the input has chat messages, which need --endpoint-type chat, not {}", .0.as_str())]
    Messages(EndpointType),
    #[error("the input has videos, which need --endpoint-type chat, not {}", .0.as_str())]
    Videos(EndpointType),
    /// Audio on an endpoint without it, or a transcription request without audio.
    #[error("{}", audio_mismatch(*.0))]
    Audio(EndpointType),
    #[error(
        "--endpoint-type raw sends each input line's \"payload\" as the whole body: give an --input-file with --custom-dataset-type raw_payload (one body per line), or mooncake_trace lines that all have a \"payload\" object"
    )]
    RawNeedsPayload,
    #[error("--extra-inputs payload_template: {0}")]
    Template(String),
    #[error(
        "a system prompt needs --endpoint-type chat, completions, responses or messages; {} has no place for it",
        .0.as_str()
    )]
    System(EndpointType),
    #[error(
        "--user-context-prompt-length needs --endpoint-type chat or completions; {} has no place for a user context message",
        .0.as_str()
    )]
    Context(EndpointType),
    #[error(
        "--endpoint-type {} needs an image (and, for image_edit, a prompt) in every request: give --image-width-mean and --image-height-mean, or \"image\"/\"images\" in each line of the input file",
        .0.as_str()
    )]
    NeedsImages(EndpointType),
    #[error(
        "--endpoint-type nim_embeddings pairs each text with one image: a request has {0} texts and {1} images; give as many of each, or only one kind"
    )]
    NimEmbeddingsPairs(usize, usize),
}

fn audio_mismatch(endpoint: EndpointType) -> String {
    match endpoint {
        EndpointType::AudioTranscription => "--endpoint-type audio_transcription needs an audio clip in every request: give --audio-length-mean > 0, or \"audio\" in each line of the input file".into(),
        other => format!("the input has audio, which needs --endpoint-type chat, responses or audio_transcription, not {}", other.as_str()),
    }
}

/// Serializes every conversation. Errors when the data does not fit the endpoint: images or
/// several turns need `chat`.
#[cfg(test)]
pub fn prepare_dataset(
    endpoint: EndpointType,
    dataset: Dataset,
    opts: &BodyOptions,
) -> Result<Vec<PreparedConversation>, EndpointMismatch> {
    let single = ModelPicker::new(Vec::new(), ModelSelection::RoundRobin, 0);
    prepare_dataset_with_models(endpoint, dataset, opts, single)
}

/// `prepare_dataset`, each turn naming the model `models` picks for it.
pub fn prepare_dataset_with_models(
    endpoint: EndpointType,
    dataset: Dataset,
    opts: &BodyOptions,
    mut models: ModelPicker,
) -> Result<Vec<PreparedConversation>, EndpointMismatch> {
    let template = match (endpoint, opts.extra_inputs.get(template::PAYLOAD_TEMPLATE)) {
        (EndpointType::Template, Some(spec)) => Some(
            template::PayloadTemplate::new(&template::spec_of(spec))
                .map_err(EndpointMismatch::Template)?,
        ),
        (EndpointType::Template, _) => {
            return Err(EndpointMismatch::Template(
                "--endpoint-type template needs one: give --extra-inputs payload_template:nv-embedqa, a template file, or an inline template".into(),
            ));
        }
        _ => None,
    };
    let mut out = Vec::with_capacity(dataset.conversations.len());
    for conv in dataset.conversations {
        let own_payloads = conv
            .turns
            .iter()
            .all(|t| matches!(t.own, Some(OwnRequest::Payload(_))));
        if conv.context.is_some()
            && !matches!(endpoint, EndpointType::Chat | EndpointType::Completions)
        {
            return Err(EndpointMismatch::Context(endpoint));
        }
        if endpoint == EndpointType::Raw && !own_payloads {
            return Err(EndpointMismatch::RawNeedsPayload);
        }
        if !endpoint.is_conversational()
            && !matches!(
                endpoint,
                EndpointType::Completions | EndpointType::ChatEmbeddings
            )
            && conv.system.is_some()
        {
            return Err(EndpointMismatch::System(endpoint));
        }
        // Payload rows are whole bodies: a raw conversation replays them as they are.
        if endpoint != EndpointType::Chat && endpoint != EndpointType::Raw {
            if conv.turns.len() > 1 && !endpoint.is_conversational() {
                return Err(EndpointMismatch::MultiTurn(endpoint));
            }
            if conv.turns.iter().any(|t| !t.images.is_empty()) && !endpoint.takes_images() {
                return Err(EndpointMismatch::Images(endpoint));
            }
            if matches!(
                endpoint,
                EndpointType::ImageRetrieval | EndpointType::ImageEdit
            ) && conv.turns.iter().any(|t| t.images.is_empty())
            {
                return Err(EndpointMismatch::NeedsImages(endpoint));
            }
            if conv
                .turns
                .iter()
                .any(|t| matches!(t.own, Some(OwnRequest::Messages(_))))
            {
                return Err(EndpointMismatch::Messages(endpoint));
            }
            if conv.turns.iter().any(|t| !t.videos.is_empty()) {
                return Err(EndpointMismatch::Videos(endpoint));
            }
            let audio = endpoint == EndpointType::AudioTranscription;
            // The Responses API takes audio parts but needs none.
            if endpoint != EndpointType::Responses
                && conv.turns.iter().any(|t| t.audios.is_empty() == audio)
            {
                return Err(EndpointMismatch::Audio(endpoint));
            }
        }
        let session_id = conv.session_id;
        let system = conv.system.as_deref();
        let context = conv.context.as_deref();
        let timestamp_ms = conv.turns.first().and_then(|t| t.timestamp_ms);
        let head = script_head(endpoint, system, context);
        let lead = [system, context]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
        let multi_turn = conv.turns.len() > 1;
        let mut entries = conv.turns.into_iter();
        let first_entry = entries.next().expect("conversations have a turn");
        let (first, script) = if multi_turn {
            let turns = std::iter::once(first_entry)
                .chain(entries)
                .map(|entry| prepare_turn(endpoint, entry, system, opts, models.next_model()))
                .collect();
            let mut script = TurnScript {
                head: Bytes::from(head),
                turns,
                lead,
            };
            // The first body is the first turn spliced like any other; its message then
            // points into that body, so the first turn's images are held once.
            let body = script.turn_body(0, &[]);
            let t = &mut script.turns[0];
            let at = if t.whole_body { 0 } else { script.head.len() };
            t.message = body.slice(at..at + t.message.len());
            let first = PreparedRequest {
                body,
                input_tokens: t.input_tokens,
                num_images: t.num_images,
                max_output_tokens: t.max_output_tokens,
                audio_seconds: t.audio_seconds,
            };
            (first, script)
        } else {
            let script = TurnScript {
                head: Bytes::from(head),
                turns: Vec::new(),
                lead,
            };
            let model = models.next_model();
            (
                prepare_one(
                    endpoint,
                    first_entry,
                    system,
                    context,
                    opts,
                    model,
                    template.as_ref(),
                )?,
                script,
            )
        };
        out.push(PreparedConversation {
            first,
            script,
            timestamp_ms,
            session_id,
        });
    }
    Ok(out)
}

/// The start of every body of a conversation, up to its first message: `{"messages":[`
/// plus chat's system message, or the Responses API's `{"input":[` (its system text, like
/// Anthropic's, is a field of the tail).
fn script_head(endpoint: EndpointType, system: Option<&str>, context: Option<&str>) -> Vec<u8> {
    if endpoint == EndpointType::Responses {
        return b"{\"input\":[".to_vec();
    }
    let mut head = b"{\"messages\":[".to_vec();
    if endpoint != EndpointType::Chat {
        return head;
    }
    if let Some(s) = system {
        serde_json::to_writer(&mut head, &chat::system_message(s)).expect("serializes");
        head.push(b',');
    }
    // The user context (`--user-context-prompt-length`) follows the system message.
    if let Some(c) = context {
        serde_json::to_writer(&mut head, &context_message(c)).expect("serializes");
        head.push(b',');
    }
    head
}

/// One turn's message and body tail, for splicing at send time.
fn prepare_turn(
    endpoint: EndpointType,
    mut entry: Entry,
    system: Option<&str>,
    opts: &BodyOptions,
    model: Option<&str>,
) -> PreparedTurn {
    if let Some(OwnRequest::Payload(payload)) = entry
        .own
        .take_if(|own| matches!(own, OwnRequest::Payload(_)))
    {
        return PreparedTurn {
            message: payload_body(payload, entry.extra),
            tail: Bytes::new(),
            input_tokens: entry.input_tokens,
            text: entry.text,
            num_images: 0,
            max_output_tokens: entry.max_output_tokens,
            audio_seconds: None,
            delay: entry.delay,
            standalone: true,
            whole_body: true,
        };
    }
    let mut fields = match endpoint {
        EndpointType::Responses => responses::body_fields(&entry, system, opts),
        EndpointType::Messages => messages::body_fields(&entry, system, opts),
        _ => chat::body_fields(&entry, opts),
    };
    set_model(&mut fields, model);
    merge_extras(&mut fields, opts, std::mem::take(&mut entry.extra));
    let tail = serde_json::to_vec(&fields).expect("serializes");
    let tail = if tail.len() > 2 {
        [b"],".as_slice(), &tail[1..]].concat()
    } else {
        b"]}".to_vec()
    };
    let (input_tokens, num_images) = (entry.input_tokens, entry.images.len() as u32);
    let audio_seconds = first_audio_seconds(&entry);
    let delay = entry.delay;
    let max_output_tokens = entry.max_output_tokens;
    let text = std::iter::once(&entry.text)
        .chain(&entry.extra_texts)
        .filter(|t| !t.is_empty())
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    // Assembled around the image data, as a whole body is (see `splice`).
    let images = match endpoint {
        EndpointType::Chat => splice::take_urls(&mut entry.images, &mut entry.videos),
        _ => None,
    };
    let standalone = matches!(&entry.own, Some(OwnRequest::Messages(m)) if !m.delta);
    let message = if entry.own.is_some() {
        // The row's own messages, sent as written.
        chat::turn_messages(&mut entry)
    } else if endpoint == EndpointType::Responses {
        serde_json::to_vec(&responses::message(&mut entry)).expect("serializes")
    } else if endpoint == EndpointType::Messages {
        serde_json::to_vec(&messages::message(&mut entry)).expect("serializes")
    } else {
        let mut message = chat::message(&mut entry);
        let skeleton = serde_json::to_vec(&message).expect("serializes");
        match images {
            None => skeleton,
            Some(images) => splice::assemble(&skeleton, images).unwrap_or_else(|mut images| {
                splice::restore_urls(&mut message, &mut images);
                serde_json::to_vec(&message).expect("serializes")
            }),
        }
    };
    PreparedTurn {
        message: Bytes::from(message),
        tail: Bytes::from(tail),
        input_tokens,
        text,
        num_images,
        max_output_tokens,
        audio_seconds,
        delay,
        standalone,
        whole_body: false,
    }
}

/// `stream`, `stream_options` and the token limit, common to both shapes.
fn common_fields(
    body: &mut Map<String, Value>,
    opts: &BodyOptions,
    max_tokens_key: &str,
    max: Option<u64>,
) {
    body.insert("model".into(), Value::String(opts.model.clone()));
    body.insert("stream".into(), Value::Bool(opts.streaming));
    if opts.streaming {
        let mut so = Map::new();
        so.insert("include_usage".into(), Value::Bool(true));
        body.insert("stream_options".into(), Value::Object(so));
    }
    if let Some(n) = max {
        body.insert(max_tokens_key.into(), Value::from(n));
    }
}

/// What one response event (an SSE `data:` payload, or a whole non-streamed body) carried.
#[derive(Debug, Default, PartialEq)]
pub struct ParsedEvent<'a> {
    pub text: Option<Cow<'a, str>>,
    pub reasoning: Option<Cow<'a, str>>,
    /// Boxed: a stream carries it once (every chunk only with vLLM's continuous usage
    /// stats, where the small allocation is little next to that chunk's scan), and inline
    /// it made every event 184 bytes, past what the compiler moves without `memcpy` calls.
    pub usage: Option<Box<Usage>>,
    /// An error object sent inside the stream (`{"error": {...}}`).
    pub error: Option<String>,
    /// Why some of the payload was skipped: a field of an unexpected type (e.g. `content: 5`
    /// or `choices: null`); what had the expected shape was still taken.
    pub unexpected: Option<String>,
    /// The stream's closing event (`response.completed`, `message_stop`): like `[DONE]`.
    pub end: bool,
    /// Results that are not text: embedding vectors, ranked passages, images.
    pub items: u64,
    /// Generated images among `items`.
    pub images: u64,
}

// Events are returned by value through several calls a chunk; up to 128 bytes the
// compiler moves them with a few register stores instead of a `memcpy` call.
const _: () = assert!(std::mem::size_of::<ParsedEvent>() <= 128);

impl ParsedEvent<'_> {
    /// True when the event carries text or reasoning (a token-bearing event), or results
    /// that are not text.
    pub fn has_content(&self) -> bool {
        self.text.as_deref().is_some_and(|t| !t.is_empty())
            || self.reasoning.as_deref().is_some_and(|t| !t.is_empty())
            || self.items > 0
    }
}

#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(default, borrow)]
    choices: FirstChoice<'a>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
    /// A transcription's whole answer (`{"text": ...}`, no choices).
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

/// `choices`, keeping only the first (all are type-checked, as a `Vec` would be, so a
/// malformed later choice still sends the payload to `lenient`): no allocation per chunk.
#[derive(Default)]
struct FirstChoice<'a>(Option<WireChoice<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Choices<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Choices<'a> {
            type Value = FirstChoice<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<FirstChoice<'a>, A::Error> {
                let first = seq.next_element::<WireChoice<'a>>()?;
                while seq.next_element::<WireChoice<'a>>()?.is_some() {}
                Ok(FirstChoice(first))
            }
        }
        d.deserialize_seq(Choices(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(default, borrow)]
    delta: Option<WireMessage<'a>>,
    #[serde(default, borrow)]
    message: Option<WireMessage<'a>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireMessage<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
    completion_tokens_details: Option<WireCompletionDetails>,
}

#[derive(Deserialize)]
struct WireCompletionDetails {
    reasoning_tokens: Option<u64>,
}

/// Parses one OpenAI response payload. Only the fields the metrics need are read. Valid
/// JSON of an unexpected shape is not an error: what has the expected shape is taken (see
/// `lenient`). Only invalid JSON is.
pub fn parse_event(data: &[u8]) -> Result<ParsedEvent<'_>, serde_json::Error> {
    if let Some(event) = plain::scan(data) {
        return Ok(event);
    }
    typed_or_lenient(data)
}

/// `parse_event` for the next payload of a stream whose earlier ones left `lead`.
pub fn parse_event_after<'a>(
    data: &'a [u8],
    lead: &mut StreamLead,
) -> Result<ParsedEvent<'a>, serde_json::Error> {
    if let Some(event) = plain::scan_after(data, lead) {
        return Ok(event);
    }
    typed_or_lenient(data)
}

pub use plain::StreamLead;

/// serde's typed read of a payload, or, for valid JSON of another shape, `lenient`'s.
fn typed_or_lenient(data: &[u8]) -> Result<ParsedEvent<'_>, serde_json::Error> {
    match serde_json::from_slice::<WireEvent<'_>>(data) {
        Ok(wire) => Ok(from_wire(wire)),
        Err(e) if e.is_data() => {
            let value: Value = serde_json::from_slice(data)?;
            let mut out = lenient(&value);
            out.unexpected = Some(e.to_string());
            Ok(out)
        }
        Err(e) => Err(e),
    }
}

/// A hand-written read of the plain payloads nearly every chunk is: the `ParsedEvent` that
/// serde's typed read and `from_wire` would give, with the texts borrowed (serde cannot
/// borrow an `Option<Cow<str>>`, so it allocated each one) and without serde's moves of the
/// large intermediate structs.
/// Anything it does not take in plainly (an escape or a control character in a string, a
/// non-null `error`, a field of another type, a repeated field, a number that is not a
/// plain `u64` where one is read, invalid JSON, deep nesting) makes it return `None` and
/// serde reads the payload as before: it only ever answers where serde's typed read
/// would succeed with the same values. Why not serde alone: by callgrind, serde's typed read
/// took 6.1k instructions per chunk and a first version of this scan (memchr for strings,
/// the serde structs as its result) 4.25k; in a loop over a 213-byte chat chunk that version
/// took 250 ns and this one 135 ns. Borrowing the texts through a serde visitor instead
/// gave no measurable gain in the whole-process A/B.
mod plain {
    use std::borrow::Cow;

    use super::ParsedEvent;
    use crate::record::Usage;

    /// Nesting this deep inside a skipped value is left to serde.
    const MAX_DEPTH: u32 = 64;

    /// Bytes that end a plain run inside a string: the quote, the backslash (an escape,
    /// left to serde) and the control characters JSON forbids there.
    const STRING_STOP: [bool; 256] = {
        let mut t = [false; 256];
        let mut b = 0;
        while b < 0x20 {
            t[b] = true;
            b += 1;
        }
        t[b'"' as usize] = true;
        t[b'\\' as usize] = true;
        t
    };

    /// Where the run of plain string bytes starting at `at` ends: the index of the first
    /// `STRING_STOP` byte, or `b.len()`. Eight bytes per step with word arithmetic; memchr2
    /// was slower on these strings (keys and ids of 2-40 bytes, shorter than its setup) and
    /// needed a second pass for control characters.
    pub(super) fn plain_run_end(b: &[u8], mut at: usize) -> usize {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        // Per byte, `x - 1` borrows into the high bit only where x is 0 (and `x - 0x20`
        // only where x < 0x20) unless a lower byte borrowed first: the lowest flag is exact.
        let zero = |x: u64| x.wrapping_sub(ONES) & !x;
        while let Some(word) = b.get(at..at + 8) {
            let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
            let control = w.wrapping_sub(ONES * 0x20) & !w;
            let quote = zero(w ^ (ONES * u64::from(b'"')));
            let backslash = zero(w ^ (ONES * u64::from(b'\\')));
            let found = (control | quote | backslash) & HIGH;
            if found != 0 {
                return at + (found.trailing_zeros() / 8) as usize;
            }
            at += 8;
        }
        while at < b.len() && !STRING_STOP[usize::from(b[at])] {
            at += 1;
        }
        at
    }

    struct Scan<'a> {
        text: &'a str,
        at: usize,
    }

    /// A message (`delta` or `message`) as `from_wire` reads it: its content, and its
    /// `reasoning_content` or else its `reasoning`. Borrowed texts only, so the values
    /// moved around while scanning stay a few words (the serde structs made the moves
    /// memcpy calls: a fifth of the scan's time).
    #[derive(Clone, Copy)]
    struct Message<'a> {
        content: Option<&'a str>,
        reasoning: Option<&'a str>,
    }

    /// A choice as `from_wire` reads it: `delta` when there is one, else `message`; its
    /// own `text`.
    #[derive(Clone, Copy)]
    struct Choice<'a> {
        message: Option<Message<'a>>,
        text: Option<&'a str>,
    }

    /// What a stream's payloads repeat. The lead: the start of a payload the scan took, up
    /// to the comma before the first top-level field it reads (`choices`, `usage`, `text`,
    /// `error`). A chat chunk's `id`, `object`, `created` and `model` come first and are the
    /// same in every chunk of a stream: about half of its bytes, only skipped. The scan is a
    /// function of the bytes it has passed (no look-ahead past that comma), so a payload
    /// that starts with these bytes is at the same point of the scan in the same state,
    /// nothing read yet, and the scan goes on from there. By callgrind over the mock's
    /// chunks (a new lead every 16): 2,496 -> 1,674 instructions a chunk.
    ///
    /// The hole: most chunks of a stream differ from the one before only in their one
    /// text (`"delta":{"content":"..."}`). A text is read as a value and never looked at,
    /// and a plain string ends at the first quote, backslash or control byte, so a payload
    /// made of the same bytes around another plain string reads as that payload did, with
    /// the other text: a prefix compare, a run scan and a suffix compare instead of the
    /// scan. By callgrind over a 3,000-request streamed profile of the mock: ~280
    /// instructions a chunk that matches, where the scan after the lead took ~2,000.
    #[derive(Debug, Default)]
    pub struct StreamLead {
        /// The payload the lead and the hole were taken from.
        bytes: Vec<u8>,
        /// Where the lead ends in `bytes` (0: no lead).
        lead_end: usize,
        hole: Option<Hole>,
    }

    /// Where the one text of `StreamLead::bytes` lies (between its quotes), which field it
    /// filled, and the payload's usage (the rest of what it read).
    #[derive(Debug, Clone, Copy)]
    struct Hole {
        start: usize,
        end: usize,
        reasoning: bool,
        usage: Option<Usage>,
    }

    impl Hole {
        /// The hole of `event`, read from `data`: its only text, borrowed from `data`.
        fn of(data: &[u8], event: &ParsedEvent<'_>) -> Option<Hole> {
            let (text, reasoning) = match (&event.text, &event.reasoning) {
                (Some(Cow::Borrowed(t)), None) => (*t, false),
                (None, Some(Cow::Borrowed(r))) => (*r, true),
                _ => return None,
            };
            // The scan's texts are slices of `data`.
            let start = (text.as_ptr() as usize).checked_sub(data.as_ptr() as usize)?;
            let end = start + text.len();
            if end > data.len() {
                return None;
            }
            debug_assert!(data.get(start.wrapping_sub(1)) == Some(&b'"'));
            debug_assert!(data.get(end) == Some(&b'"'));
            Some(Hole {
                start,
                end,
                reasoning,
                usage: event.usage.as_deref().copied(),
            })
        }

        /// `data` read through the hole of `bytes`, when it is `bytes` with another plain
        /// string in the hole.
        fn fill<'a>(&self, bytes: &[u8], data: &'a [u8]) -> Option<ParsedEvent<'a>> {
            let (before, after) = (&bytes[..self.start], &bytes[self.end..]);
            if !data.starts_with(before) {
                return None;
            }
            // `after` starts with the closing quote: the new text's run ends exactly there
            // or the payload is not the same around it.
            let end = plain_run_end(data, before.len());
            if &data[end..] != after {
                return None;
            }
            let text = Cow::Borrowed(std::str::from_utf8(&data[before.len()..end]).ok()?);
            let (text, reasoning) = if self.reasoning {
                (None, Some(text))
            } else {
                (Some(text), None)
            };
            Some(ParsedEvent {
                text,
                reasoning,
                usage: self.usage.map(Box::new),
                ..ParsedEvent::default()
            })
        }
    }

    #[cfg(test)]
    impl StreamLead {
        pub(super) fn lead_bytes(&self) -> &[u8] {
            &self.bytes[..self.lead_end]
        }

        pub(super) fn has_hole(&self) -> bool {
            self.hole.is_some()
        }
    }

    /// The payload as serde's typed read and `from_wire` would give it, or `None` (see the
    /// module).
    pub(super) fn scan(data: &[u8]) -> Option<ParsedEvent<'_>> {
        whole(data).map(|(event, _)| event)
    }

    /// `scan` of a stream's next payload: through the hole of the earlier payload `lead`
    /// keeps, else after its lead, else whole (leaving its own lead).
    pub(super) fn scan_after<'a>(data: &'a [u8], lead: &mut StreamLead) -> Option<ParsedEvent<'a>> {
        if let Some(hole) = &lead.hole
            && let Some(event) = hole.fill(&lead.bytes, data)
        {
            return Some(event);
        }
        if lead.lead_end > 0
            && let Some(rest) = data.strip_prefix(&lead.bytes[..lead.lead_end])
        {
            // The lead is valid UTF-8 ending in an ASCII comma: the rest is checked alone.
            let (event, _) = read_all(rest, Scan::event_fields)?;
            // The payload has the same lead: it keeps it, and gives the hole if it has one.
            if data.len() <= KEEP_MAX
                && let Some(hole) = Hole::of(data, &event)
            {
                lead.bytes.clear();
                lead.bytes.extend_from_slice(data);
                lead.hole = Some(hole);
            }
            return Some(event);
        }
        let (event, lead_end) = whole(data)?;
        lead.bytes.clear();
        if data.len() <= KEEP_MAX {
            lead.bytes.extend_from_slice(data);
            lead.hole = Hole::of(data, &event);
        } else {
            // A payload this large is kept for its lead only: a copy of it would be one
            // more of the event's size in memory, for a hole that no like payload fills.
            lead.bytes.extend_from_slice(&data[..lead_end]);
            lead.hole = None;
        }
        lead.lead_end = lead_end;
        Some(event)
    }

    /// The largest payload `StreamLead` keeps whole (for its hole).
    const KEEP_MAX: usize = 64 * 1024;

    /// The payload scanned from its first byte, and where its lead ends.
    fn whole(data: &[u8]) -> Option<(ParsedEvent<'_>, usize)> {
        read_all(data, Scan::event)
    }

    /// What `read` takes from `bytes` when they are UTF-8 and nothing but whitespace
    /// follows it.
    fn read_all<'a, T>(
        bytes: &'a [u8],
        read: impl FnOnce(&mut Scan<'a>) -> Option<T>,
    ) -> Option<T> {
        let mut s = Scan {
            text: std::str::from_utf8(bytes).ok()?,
            at: 0,
        };
        let taken = read(&mut s)?;
        s.ws();
        (s.at == bytes.len()).then_some(taken)
    }

    /// Reads a field into `slot`; a field seen twice is left to serde, which refuses it.
    fn once<T>(slot: &mut Option<T>, read: impl FnOnce() -> Option<T>) -> Option<()> {
        if slot.is_some() {
            return None;
        }
        *slot = Some(read()?);
        Some(())
    }

    impl<'a> Scan<'a> {
        fn bytes(&self) -> &'a [u8] {
            self.text.as_bytes()
        }

        fn peek(&self) -> Option<u8> {
            self.bytes().get(self.at).copied()
        }

        fn ws(&mut self) {
            while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
                self.at += 1;
            }
        }

        /// The next byte after whitespace is `c`: taken.
        fn eat(&mut self, c: u8) -> bool {
            // Compact JSON has no whitespace: look for `c` first.
            if self.peek() == Some(c) {
                self.at += 1;
                return true;
            }
            self.ws();
            if self.peek() == Some(c) {
                self.at += 1;
                true
            } else {
                false
            }
        }

        /// Where a string without escapes or control characters lies (between its quotes).
        fn string_span(&mut self) -> Option<(usize, usize)> {
            if !self.eat(b'"') {
                return None;
            }
            let start = self.at;
            let b = self.bytes();
            let end = plain_run_end(b, start);
            if b.get(end) != Some(&b'"') {
                return None;
            }
            self.at = end + 1;
            Some((start, end))
        }

        /// A string without escapes or control characters, as `&str`.
        fn string(&mut self) -> Option<&'a str> {
            let (start, end) = self.string_span()?;
            // Both ends are ASCII quotes of valid UTF-8: char boundaries.
            self.text.get(start..end)
        }

        /// `null` (taken) or not.
        fn null(&mut self) -> bool {
            self.ws();
            if self.bytes()[self.at..].starts_with(b"null") {
                self.at += 4;
                true
            } else {
                false
            }
        }

        /// `null` or a string.
        fn opt_text(&mut self) -> Option<Option<&'a str>> {
            self.nullable(Self::string)
        }

        /// `null` or a plain non-negative integer that fits a `u64`.
        fn opt_u64(&mut self) -> Option<Option<u64>> {
            if self.null() {
                return Some(None);
            }
            let start = self.at;
            let digits = self.bytes()[start..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            if digits == 0 || (digits > 1 && self.bytes()[start] == b'0') {
                return None;
            }
            if let Some(b'.' | b'e' | b'E') = self.bytes().get(start + digits) {
                return None;
            }
            let mut n = 0u64;
            for &b in &self.bytes()[start..start + digits] {
                n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            }
            self.at = start + digits;
            Some(Some(n))
        }

        /// An object's fields: `field` is called with each key, positioned at its value, and
        /// reads the value (or refuses the payload).
        fn object(
            &mut self,
            mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
        ) -> Option<()> {
            if !self.eat(b'{') {
                return None;
            }
            if self.eat(b'}') {
                return Some(());
            }
            loop {
                let key = self.string()?;
                if !self.eat(b':') {
                    return None;
                }
                field(self, key)?;
                if self.eat(b'}') {
                    return Some(());
                }
                if !self.eat(b',') {
                    return None;
                }
            }
        }

        /// Skips any JSON value (strings as `string` takes them).
        fn skip(&mut self, depth: u32) -> Option<()> {
            if depth > MAX_DEPTH {
                return None;
            }
            self.ws();
            match self.peek()? {
                // Skipped: no `&str` (its char-boundary checks) needed.
                b'"' => self.string_span().map(drop),
                b'{' => self.object(|s, _| s.skip(depth + 1)),
                b'[' => {
                    self.at += 1;
                    if self.eat(b']') {
                        return Some(());
                    }
                    loop {
                        self.skip(depth + 1)?;
                        if self.eat(b']') {
                            return Some(());
                        }
                        if !self.eat(b',') {
                            return None;
                        }
                    }
                }
                b't' => self.word(b"true"),
                b'f' => self.word(b"false"),
                b'n' => self.word(b"null"),
                _ => self.number(),
            }
        }

        fn word(&mut self, w: &[u8]) -> Option<()> {
            if self.bytes()[self.at..].starts_with(w) {
                self.at += w.len();
                Some(())
            } else {
                None
            }
        }

        /// A number by JSON's grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
        fn number(&mut self) -> Option<()> {
            let b = self.bytes();
            let mut i = self.at;
            let digits = |i: &mut usize| {
                let n = b[*i..].iter().take_while(|c| c.is_ascii_digit()).count();
                *i += n;
                n
            };
            if b.get(i) == Some(&b'-') {
                i += 1;
            }
            let int_start = i;
            let n = digits(&mut i);
            if n == 0 || (n > 1 && b[int_start] == b'0') {
                return None;
            }
            if b.get(i) == Some(&b'.') {
                i += 1;
                if digits(&mut i) == 0 {
                    return None;
                }
            }
            if let Some(b'e' | b'E') = b.get(i) {
                i += 1;
                if let Some(b'+' | b'-') = b.get(i) {
                    i += 1;
                }
                if digits(&mut i) == 0 {
                    return None;
                }
            }
            self.at = i;
            Some(())
        }

        /// `null` (taken, as `None`) or what `read` reads.
        fn nullable<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
            if self.null() {
                return Some(None);
            }
            read(self).map(Some)
        }

        /// The payload, and where its lead ends (`StreamLead`; 0: it has none).
        fn event(&mut self) -> Option<(ParsedEvent<'a>, usize)> {
            if !self.eat(b'{') {
                return None;
            }
            if self.eat(b'}') {
                return Some((ParsedEvent::default(), 0));
            }
            self.event_fields()
        }

        /// The top-level object's fields from a key on, none read before it (after the
        /// `{`, or after a lead's comma), and where the lead ends: after the last comma
        /// passed with nothing read yet.
        fn event_fields(&mut self) -> Option<(ParsedEvent<'a>, usize)> {
            let (mut choices, mut usage, mut text, mut error) = (None, None, None, None);
            let mut lead_end = 0;
            loop {
                let key = self.string()?;
                if !self.eat(b':') {
                    return None;
                }
                match key {
                    "choices" => once(&mut choices, || self.choices()),
                    "usage" => once(&mut usage, || self.nullable(Self::usage)),
                    "text" => once(&mut text, || self.opt_text()),
                    // A non-null error takes serde's read (its `Value`).
                    "error" => once(&mut error, || self.null().then_some(())),
                    _ => self.skip(1),
                }?;
                if self.eat(b'}') {
                    break;
                }
                if !self.eat(b',') {
                    return None;
                }
                if choices.is_none() && usage.is_none() && text.is_none() && error.is_none() {
                    lead_end = self.at;
                }
            }
            let choice = choices.flatten();
            let message = choice.and_then(|c| c.message);
            let text = message
                .and_then(|m| m.content)
                .or(choice.and_then(|c| c.text))
                .or(text.flatten());
            let event = ParsedEvent {
                text: text.map(Cow::Borrowed),
                reasoning: message.and_then(|m| m.reasoning).map(Cow::Borrowed),
                usage: usage.flatten().map(Box::new),
                ..ParsedEvent::default()
            };
            Some((event, lead_end))
        }

        /// `choices`: every element a choice object, the first kept.
        fn choices(&mut self) -> Option<Option<Choice<'a>>> {
            if !self.eat(b'[') {
                return None;
            }
            let mut first = None;
            if self.eat(b']') {
                return Some(None);
            }
            loop {
                let choice = self.choice()?;
                first.get_or_insert(choice);
                if self.eat(b']') {
                    return Some(first);
                }
                if !self.eat(b',') {
                    return None;
                }
            }
        }

        fn choice(&mut self) -> Option<Choice<'a>> {
            let (mut delta, mut message, mut text) = (None, None, None);
            self.object(|s, key| match key {
                "delta" => once(&mut delta, || s.nullable(Self::message)),
                "message" => once(&mut message, || s.nullable(Self::message)),
                "text" => once(&mut text, || s.opt_text()),
                _ => s.skip(2),
            })?;
            Some(Choice {
                message: delta.flatten().or(message.flatten()),
                text: text.flatten(),
            })
        }

        fn message(&mut self) -> Option<Message<'a>> {
            let (mut content, mut reasoning_content, mut reasoning) = (None, None, None);
            self.object(|s, key| match key {
                "content" => once(&mut content, || s.opt_text()),
                "reasoning_content" => once(&mut reasoning_content, || s.opt_text()),
                "reasoning" => once(&mut reasoning, || s.opt_text()),
                _ => s.skip(3),
            })?;
            Some(Message {
                content: content.flatten(),
                reasoning: reasoning_content.flatten().or(reasoning.flatten()),
            })
        }

        fn usage(&mut self) -> Option<Usage> {
            let (mut prompt, mut completion, mut total, mut details) = (None, None, None, None);
            self.object(|s, key| match key {
                "prompt_tokens" => once(&mut prompt, || s.opt_u64()),
                "completion_tokens" => once(&mut completion, || s.opt_u64()),
                "total_tokens" => once(&mut total, || s.opt_u64()),
                "completion_tokens_details" => once(&mut details, || s.nullable(Self::details)),
                _ => s.skip(2),
            })?;
            let [prompt, completion, total] = [prompt, completion, total].map(Option::flatten);
            Some(Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                total_tokens: total,
                reasoning_tokens: details.flatten().flatten(),
            })
        }

        /// `completion_tokens_details`: its `reasoning_tokens`.
        fn details(&mut self) -> Option<Option<u64>> {
            let mut reasoning = None;
            self.object(|s, key| match key {
                "reasoning_tokens" => once(&mut reasoning, || s.opt_u64()),
                _ => s.skip(3),
            })?;
            Some(reasoning.flatten())
        }
    }
}

/// The typed fast path's result.
fn from_wire(wire: WireEvent<'_>) -> ParsedEvent<'_> {
    let mut out = ParsedEvent::default();
    if let Some(choice) = wire.choices.0 {
        let msg = choice.delta.or(choice.message);
        if let Some(m) = msg {
            out.text = m.content;
            out.reasoning = m.reasoning_content.or(m.reasoning);
        }
        if out.text.is_none() {
            out.text = choice.text;
        }
    }
    if out.text.is_none() {
        out.text = wire.text;
    }
    out.usage = wire.usage.map(|u| {
        Box::new(Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total_tokens,
            reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
        })
    });
    out.error = wire.error.as_ref().and_then(error_message);
    out
}

/// The message of an `error` field (its `message`, or the whole value), unless null.
fn error_message(e: &Value) -> Option<String> {
    match e {
        Value::Null => None,
        Value::Object(o) => Some(
            o.get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string()),
        ),
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The slow path for payloads the typed parse rejected: each field is read on its own and
/// skipped when its type is wrong; token counts sent as strings (`"12"`) are read as
/// numbers.
fn lenient(v: &Value) -> ParsedEvent<'static> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(|s| Cow::Owned(s.to_string()));
    let mut out = ParsedEvent::default();
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first());
    if let Some(choice) = choice {
        let msg = [choice.get("delta"), choice.get("message")]
            .into_iter()
            .flatten()
            .find(|m| m.is_object());
        if let Some(m) = msg {
            out.text = text(m.get("content"));
            out.reasoning = text(m.get("reasoning_content")).or_else(|| text(m.get("reasoning")));
        }
        if out.text.is_none() {
            out.text = text(choice.get("text"));
        }
    }
    if out.text.is_none() {
        out.text = text(v.get("text"));
    }
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        let count = |v: Option<&Value>| match v? {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        let details = u.get("completion_tokens_details");
        out.usage = Some(Box::new(Usage {
            prompt_tokens: count(u.get("prompt_tokens")),
            completion_tokens: count(u.get("completion_tokens")),
            total_tokens: count(u.get("total_tokens")),
            reasoning_tokens: count(details.and_then(|d| d.get("reasoning_tokens"))),
        }));
    }
    out.error = v.get("error").and_then(error_message);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(text: &str, max: u64) -> Entry {
        let mut e = Entry {
            text: text.into(),
            input_tokens: 1,
            images: Vec::new(),
            audios: Vec::new(),
            videos: Vec::new(),
            max_output_tokens: Some(max),
            extra_texts: Vec::new(),
            role: None,
            extra: Map::new(),
            timestamp_ms: None,
            delay: None,
            own: None,
        };
        e.extra.insert("temperature".into(), Value::from(0));
        e
    }

    #[test]
    fn multi_turn_bodies_splice_history_and_replies() {
        let dataset = Dataset {
            conversations: vec![crate::dataset::Conversation {
                session_id: None,
                system: Some("sys".into()),
                context: None,
                turns: vec![turn("one", 5), turn("two \"q\"", 6), turn("three", 7)],
            }],
            sampling: crate::dataset::DatasetSampling::Sequential,
        };
        let opts = BodyOptions {
            model: "m".into(),
            streaming: true,
            use_legacy_max_tokens: false,
            extra_inputs: Map::new(),
        };
        let convs = prepare_dataset(EndpointType::Chat, dataset, &opts).unwrap();
        let c = &convs[0];
        let first: Value = serde_json::from_slice(&c.first.body).unwrap();
        assert_eq!(first["messages"][0]["role"], "system");
        assert_eq!(first["messages"][1]["content"], "one");
        assert_eq!(first["max_completion_tokens"], 5);
        assert_eq!(first["temperature"], 0);
        // The first turn's message is a view into the first body, not a second copy.
        let body = c.first.body.as_ptr_range();
        let message = c.script.turns[0].message.as_ptr_range();
        assert!(body.start <= message.start && message.end <= body.end);
        assert_eq!(c.first.body, c.script.turn_body(0, &[]));
        let replies = vec!["r1 \"x\"\n".to_string(), "r2".to_string()];
        let third: Value = serde_json::from_slice(&c.script.turn_body(2, &replies)).unwrap();
        let roles: Vec<&str> = third["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "user", "assistant", "user"]
        );
        assert_eq!(third["messages"][2]["content"], "r1 \"x\"\n");
        assert_eq!(third["messages"][3]["content"], "two \"q\"");
        assert_eq!(third["messages"][5]["content"], "three");
        assert_eq!(third["max_completion_tokens"], 7);
        assert_eq!(third["temperature"], 0);
        assert_eq!(third["stream"], true);
        assert!(
            prepare_dataset(
                EndpointType::Completions,
                Dataset {
                    conversations: vec![crate::dataset::Conversation {
                        session_id: None,
                        system: None,
                        context: None,
                        turns: vec![turn("a", 1), turn("b", 1)],
                    }],
                    sampling: crate::dataset::DatasetSampling::Sequential,
                },
                &opts
            )
            .is_err()
        );
    }

    #[test]
    fn probes_of_the_image_types_carry_an_image() {
        for endpoint in [EndpointType::ImageRetrieval, EndpointType::ImageEdit] {
            let body = probe_body(endpoint, "m", &Map::new()).unwrap();
            let text = String::from_utf8_lossy(&body);
            assert!(
                text.contains("data:image/png;base64,") || text.contains("filename=\"image.png\""),
                "{text}"
            );
        }
        let body = probe_body(EndpointType::SolidoRag, "m", &Map::new()).unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["query"][0], "Hello");
        let body = probe_body(EndpointType::HuggingfaceGenerate, "m", &Map::new()).unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["inputs"], "Hello");
        assert_eq!(v["parameters"]["max_new_tokens"], 1);
    }

    #[test]
    fn chat_chunk_with_content() {
        let e = parse_event(br#"{"id":"x","choices":[{"index":0,"delta":{"content":" the"},"finish_reason":null}]}"#).unwrap();
        assert_eq!(e.text.as_deref(), Some(" the"));
        assert!(e.has_content());
        assert_eq!(e.usage, None);
    }

    #[test]
    fn role_only_and_usage_only_chunks_have_no_content() {
        let role =
            parse_event(br#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#).unwrap();
        assert!(!role.has_content());
        let usage = parse_event(
            br#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"completion_tokens_details":{"reasoning_tokens":1}}}"#,
        )
        .unwrap();
        assert!(!usage.has_content());
        assert_eq!(
            usage.usage.as_deref(),
            Some(&Usage {
                prompt_tokens: Some(10),
                completion_tokens: Some(3),
                total_tokens: Some(13),
                reasoning_tokens: Some(1)
            })
        );
    }

    #[test]
    fn unexpected_shapes_keep_what_fits() {
        // Token counts as strings: read as numbers; the content still counts.
        let e = parse_event(
            br#"{"choices":[{"delta":{"content":"hi"}}],"usage":{"prompt_tokens":"7","completion_tokens":2,"total_tokens":null}}"#,
        )
        .unwrap();
        assert_eq!(e.text.as_deref(), Some("hi"));
        let u = e.usage.as_deref().unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.total_tokens),
            (Some(7), Some(2), None)
        );
        assert!(
            e.unexpected.as_deref().unwrap().contains("invalid type"),
            "{e:?}"
        );
        // `choices: null` and `content: 5`: nothing usable, but not an error.
        for data in [
            br#"{"choices":null}"#.as_slice(),
            br#"{"choices":[{"delta":{"content":5}}]}"#,
            br#"{"choices":[{"message":"x"}]}"#,
            br#"[1,2]"#,
        ] {
            let e = parse_event(data).unwrap();
            assert!(
                !e.has_content() && e.usage.is_none() && e.error.is_none(),
                "{e:?}"
            );
            assert!(e.unexpected.is_some(), "{e:?}");
        }
        // Reasoning of the right type next to content of the wrong one is kept.
        let e = parse_event(br#"{"choices":[{"delta":{"content":[],"reasoning_content":"r"}}]}"#)
            .unwrap();
        assert_eq!((e.text, e.reasoning.as_deref()), (None, Some("r")));
        // The typed path notes nothing.
        assert_eq!(parse_event(br#"{"choices":[]}"#).unwrap().unexpected, None);
    }

    #[test]
    fn only_the_first_choice_is_read_but_every_choice_is_checked() {
        let e =
            parse_event(br#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#)
                .unwrap();
        assert_eq!((e.text.as_deref(), e.unexpected), (Some("a"), None));
        // A later choice of the wrong type sends the payload to the lenient read, which
        // still takes the first.
        let e = parse_event(br#"{"choices":[{"delta":{"content":"a"}},5]}"#).unwrap();
        assert_eq!(e.text.as_deref(), Some("a"));
        assert_eq!(
            e.unexpected.as_deref(),
            Some("invalid type: integer `5`, expected struct WireChoice at line 1 column 39")
        );
        let e = parse_event(br#"{"choices":null}"#).unwrap();
        assert_eq!(
            e.unexpected.as_deref(),
            Some("invalid type: null, expected a sequence at line 1 column 15")
        );
    }

    #[test]
    fn reasoning_escapes_completions_and_errors() {
        let r =
            parse_event(br#"{"choices":[{"delta":{"reasoning_content":"hm\n\"q\""}}]}"#).unwrap();
        assert_eq!(r.reasoning.as_deref(), Some("hm\n\"q\""));
        assert!(r.has_content());
        let c = parse_event(br#"{"choices":[{"text":"abc","index":0}]}"#).unwrap();
        assert_eq!(c.text.as_deref(), Some("abc"));
        let m = parse_event(br#"{"choices":[{"message":{"role":"assistant","content":"full"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#).unwrap();
        assert_eq!(m.text.as_deref(), Some("full"));
        let err = parse_event(br#"{"error":{"message":"boom","code":500}}"#).unwrap();
        assert_eq!(err.error.as_deref(), Some("boom"));
        assert!(parse_event(b"{not json").is_err());
    }

    /// serde's typed read of `data`, as `parse_event` took it before the plain scan.
    fn typed(data: &[u8]) -> Option<ParsedEvent<'_>> {
        serde_json::from_slice::<WireEvent<'_>>(data)
            .ok()
            .map(from_wire)
    }

    #[test]
    fn the_plain_scan_takes_common_chunks_as_serde_does() {
        for data in [
            br#"{"id":"chatcmpl-5","object":"chat.completion.chunk","created":1796452627,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#.as_slice(),
            br#"{"id":"c","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}"#,
            br#" {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"completion_tokens_details":{"reasoning_tokens":1}}} "#,
            br#"{"choices":[{"message":{"role":"assistant","content":"full","tool_calls":[]}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_tokens_details":null}}"#,
            br#"{"choices":[{"text":"abc","index":0,"logprobs":{"a":[1.5e3,-2,true,false]}}],"error":null}"#,
            br#"{"choices":[{"delta":{"reasoning":"r","content":null}},{"delta":{}}],"text":"t"}"#,
            "{\"choices\":[{\"delta\":{\"content\":\"é 日本\"}}]}".as_bytes(),
        ] {
            let fast = plain::scan(data);
            assert!(fast.is_some(), "{}", String::from_utf8_lossy(data));
            assert_eq!(fast, typed(data), "{}", String::from_utf8_lossy(data));
        }
        // Left to serde: escapes, other types, repeated fields, a non-null error, bad JSON.
        for data in [
            br#"{"choices":[{"delta":{"content":"a\nb"}}]}"#.as_slice(),
            br#"{"choices":[{"delta":{"content":5}}]}"#,
            br#"{"choices":null}"#,
            br#"{"choices":[],"choices":[]}"#,
            br#"{"error":{"message":"boom"}}"#,
            br#"{"usage":{"prompt_tokens":"7"}}"#,
            br#"{"usage":{"prompt_tokens":1.0}}"#,
            br#"{"usage":{"prompt_tokens":18446744073709551616}}"#,
            br#"{"choices":[],}"#,
            br#"{"id":01}"#,
            br#"[1,2]"#,
            b"{not json",
        ] {
            assert!(
                plain::scan(data).is_none(),
                "{}",
                String::from_utf8_lossy(data)
            );
        }
    }

    #[test]
    fn a_stream_scans_the_fields_its_chunks_repeat_once() {
        let lead = r#"{"id":"chatcmpl-5","object":"chat.completion.chunk","created":1796452627,"model":"m","#;
        let first = format!(
            r#"{lead}"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}}}}]}}"#
        );
        let mut stream = StreamLead::default();
        let scanned = plain::scan_after(first.as_bytes(), &mut stream);
        assert!(scanned.is_some());
        assert_eq!(scanned, plain::scan(first.as_bytes()));
        assert_eq!(stream.lead_bytes(), lead.as_bytes());
        // Later chunks go on after the lead and read as they do alone; what the scan
        // leaves to serde still goes there.
        for rest in [
            r#""choices":[{"index":0,"delta":{"content":" the"}}]}"#,
            r#""choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}"#,
            r#""choices":[{"delta":{"content":"a\nb"}}]}"#,
            r#""choices":[{"delta":{"content":5}}]}"#,
            r#""choices":[],}"#,
            r#""choices":[]} x"#,
            r#""choices":[],"id":"other"}"#,
        ] {
            let data = format!("{lead}{rest}");
            let alone = plain::scan(data.as_bytes());
            assert_eq!(
                plain::scan_after(data.as_bytes(), &mut stream),
                alone,
                "{data}"
            );
            assert_eq!(
                parse_event_after(data.as_bytes(), &mut stream).ok(),
                parse_event(data.as_bytes()).ok(),
                "{data}"
            );
            assert_eq!(stream.lead_bytes(), lead.as_bytes());
        }
        // A chunk that starts otherwise is scanned whole and leaves its own lead; one whose
        // first field is read leaves none.
        let other = br#"{"id":"chatcmpl-6","choices":[{"delta":{"content":"x"}}]}"#;
        assert_eq!(plain::scan_after(other, &mut stream), plain::scan(other));
        assert_eq!(stream.lead_bytes(), br#"{"id":"chatcmpl-6","#);
        let bare = br#"{"choices":[{"delta":{"content":"x"}}],"id":"chatcmpl-6"}"#;
        assert_eq!(plain::scan_after(bare, &mut stream), plain::scan(bare));
        assert!(stream.lead_bytes().is_empty());
    }

    #[test]
    fn a_chunk_that_differs_only_in_its_text_reads_through_the_hole() {
        let lead = br#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","#;
        let chunk = |middle: &[u8]| {
            let mut data = lead.to_vec();
            data.extend_from_slice(br#""choices":[{"index":0,"delta":{"content":""#);
            data.extend_from_slice(middle);
            data.extend_from_slice(br#""},"finish_reason":null}]}"#);
            data
        };
        let read_as_alone = |data: &[u8], stream: &mut StreamLead| {
            assert_eq!(
                plain::scan_after(data, stream),
                plain::scan(data),
                "{}",
                String::from_utf8_lossy(data)
            );
        };
        let mut stream = StreamLead::default();
        // A chunk with its text leaves the hole; one without (role only) none.
        let role = [
            lead.as_slice(),
            br#""choices":[{"delta":{"role":"assistant"}}]}"#,
        ]
        .concat();
        read_as_alone(&role, &mut stream);
        assert!(!stream.has_hole());
        read_as_alone(&chunk(b" the"), &mut stream);
        assert!(stream.has_hole());
        // Other texts, plain or not, and strings that end early or carry the suffix: each
        // reads as it does alone.
        for middle in [
            b"".as_slice(),
            b" quick",
            "\u{e9}\u{4e2d}\u{1f600}".as_bytes(),
            b"\xff",
            b"\xe4\xb8",
            br#"a\"b"#,
            b"a\\nb",
            b"a\nb",
            br#"x"},"finish_reason":null}]}"#,
            br#"x"},"finish_reason":null}]}""#,
            br#"x","role":"assistant"#,
            br#"""#,
        ] {
            read_as_alone(&chunk(middle), &mut stream);
            assert_eq!(stream.lead_bytes(), lead);
        }
        // Reasoning fills a hole as content does, and usage read beside a text comes back.
        for rest in [
            br#""choices":[{"delta":{"reasoning_content":"hm"}}]}"#.as_slice(),
            br#""choices":[{"delta":{"reasoning_content":"so"}}]}"#,
            br#""choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":3}}"#,
            br#""choices":[{"delta":{"content":"bc"}}],"usage":{"prompt_tokens":3}}"#,
            br#""choices":[{"delta":{"content":"bc"}}],"usage":{"prompt_tokens":4}}"#,
        ] {
            read_as_alone(&[lead.as_slice(), rest].concat(), &mut stream);
            assert!(stream.has_hole());
        }
        // Two texts leave no hole.
        let both = br#""choices":[{"delta":{"content":"a","reasoning":"b"}}]}"#;
        read_as_alone(&[lead.as_slice(), both].concat(), &mut stream);
        assert!(stream.has_hole(), "the hole before stays");
        let whole = br#"{"choices":[{"delta":{"content":"a","reasoning":"b"}}]}"#;
        read_as_alone(whole, &mut stream);
        assert!(!stream.has_hole());
    }

    /// Up to `max` bytes as a string's may be: mostly printable ASCII, some bytes of
    /// non-ASCII characters (or not UTF-8 at all), and the bytes that end a plain run.
    fn string_bytes(max: usize) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            proptest::prop_oneof![
                12 => 0x20u8..0x7f,
                4 => 0x80u8..=0xff,
                1 => proptest::prelude::Just(b'"'),
                1 => proptest::prelude::Just(b'\\'),
                1 => 0u8..0x20,
            ],
            0..max,
        )
    }

    /// A JSON-like text from pieces of chat chunks: often well-formed, sometimes not.
    fn chunkish() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let key = prop_oneof![
            Just("choices"),
            Just("delta"),
            Just("message"),
            Just("content"),
            Just("reasoning"),
            Just("reasoning_content"),
            Just("text"),
            Just("usage"),
            Just("prompt_tokens"),
            Just("completion_tokens"),
            Just("total_tokens"),
            Just("completion_tokens_details"),
            Just("reasoning_tokens"),
            Just("error"),
            Just("id"),
            Just("index"),
        ];
        let leaf = prop_oneof![
            Just("null"),
            Just("true"),
            Just("false"),
            Just("0"),
            Just("7"),
            Just("-3"),
            Just("1.5"),
            Just("2e3"),
            Just("01"),
            Just("18446744073709551615"),
            Just("18446744073709551616"),
            Just("\"\""),
            Just("\" the\""),
            Just("\"a\\nb\""),
            Just("\"\\u00e9\""),
            Just("\"é\""),
            Just("\"\\q\""),
        ]
        .prop_map(str::to_string);
        let value = leaf.prop_recursive(5, 48, 4, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                proptest::collection::vec((key.clone(), inner, any::<bool>()), 0..4).prop_map(
                    |v| {
                        let fields: Vec<String> = v
                            .into_iter()
                            .map(|(k, v, sp)| {
                                if sp {
                                    format!(" \"{k}\" :\n{v} ")
                                } else {
                                    format!("\"{k}\":{v}")
                                }
                            })
                            .collect();
                        format!("{{{}}}", fields.join(","))
                    }
                ),
            ]
        });
        (value, any::<u16>(), 0u8..4).prop_map(|(text, at, cut)| {
            let mut bytes = text.into_bytes();
            let at = at as usize % (bytes.len() + 1);
            match cut {
                0 if at < bytes.len() => {
                    bytes.remove(at);
                }
                1 => bytes.insert(at, b','),
                _ => {}
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

        /// The word-at-a-time run end is the first stop byte, as a byte loop finds it.
        #[test]
        fn plain_runs_end_at_the_first_stop_byte(
            bytes in string_bytes(40),
            at in 0usize..8,
        ) {
            let at = at.min(bytes.len());
            let expected = bytes[at..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .map_or(bytes.len(), |i| at + i);
            proptest::prop_assert_eq!(plain::plain_run_end(&bytes, at), expected);
        }

        /// Whatever the plain scan takes, serde's typed read takes too, with the same result.
        #[test]
        fn the_plain_scan_agrees_with_serde(text in chunkish()) {
            let data = text.as_bytes();
            if let Some(fast) = plain::scan(data) {
                proptest::prop_assert_eq!(Some(fast), typed(data), "{}", text);
            }
        }

        /// A stream's payloads, after the same skipped fields or not, read the same after
        /// the earlier ones' lead as alone.
        #[test]
        fn payloads_after_a_lead_read_as_alone(
            fields in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["id", "object", "created", "usage", "text", "error"]),
                    proptest::sample::select(vec!["\"x\"", "7", "17", "null", "1.5", "\"a\\nb\"", "{}"]),
                ),
                0..4,
            ),
            tails in proptest::collection::vec(chunkish(), 1..5),
        ) {
            let lead: String = fields.iter().map(|(k, v)| format!("\"{k}\":{v},")).collect();
            let mut stream = StreamLead::default();
            for tail in &tails {
                let data = format!("{{{lead}{}", tail.strip_prefix('{').unwrap_or(tail));
                let alone = plain::scan(data.as_bytes());
                proptest::prop_assert_eq!(plain::scan_after(data.as_bytes(), &mut stream), alone, "{}", data);
            }
        }

        /// Payloads that differ from the one before only in one string read through its
        /// hole as they do alone, whatever bytes fill it.
        #[test]
        fn payloads_read_through_a_hole_as_alone(
            tail in chunkish(),
            fills in proptest::collection::vec(string_bytes(12), 1..8),
        ) {
            // The hole: where the tail's one text lies, when the scan reads one, or a text
            // put in front of the tail.
            let tail = tail.into_bytes();
            let text = plain::scan(&tail).and_then(|e| match (e.text, e.reasoning) {
                (Some(t), None) | (None, Some(t)) => Some((t.as_ptr() as usize, t.len())),
                _ => None,
            });
            let (before, after) = match text {
                Some((at, len)) => {
                    let start = at - tail.as_ptr() as usize;
                    (tail[..start].to_vec(), tail[start + len..].to_vec())
                }
                None => (
                    br#"{"text":""#.to_vec(),
                    [br#"","x":"#.as_slice(), &tail, b"}"].concat(),
                ),
            };
            let mut stream = StreamLead::default();
            for fill in &fills {
                let data = [before.as_slice(), fill, &after].concat();
                let alone = plain::scan(&data);
                proptest::prop_assert_eq!(
                    plain::scan_after(&data, &mut stream),
                    alone,
                    "{}",
                    String::from_utf8_lossy(&data)
                );
            }
        }

        /// Well-formed chunks with plain values are taken by the scan itself.
        #[test]
        fn plain_chunks_are_scanned(
            content in proptest::option::of("[ a-z]{0,8}"),
            reasoning in proptest::option::of("[a-z]{0,3}"),
            usage in proptest::option::of((0u64..1000, proptest::prelude::any::<u64>())),
            message in proptest::prelude::any::<bool>(),
        ) {
            let q = |t: &Option<String>| t.as_ref().map_or("null".to_string(), |t| format!("\"{t}\""));
            let usage = usage.map_or("null".to_string(), |(p, c)| {
                format!("{{\"prompt_tokens\":{p},\"completion_tokens\":{c},\"total_tokens\":null}}")
            });
            let text = format!(
                "{{\"id\":\"x\",\"choices\":[{{\"index\":0,\"{}\":{{\"content\":{},\"reasoning_content\":{}}},\"finish_reason\":null}}],\"usage\":{usage}}}",
                if message { "message" } else { "delta" },
                q(&content),
                q(&reasoning),
            );
            let fast = plain::scan(text.as_bytes());
            proptest::prop_assert!(fast.is_some(), "{}", text);
            proptest::prop_assert_eq!(fast, typed(text.as_bytes()), "{}", text);
        }
    }
}
