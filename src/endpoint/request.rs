//! The request half: every body built before the run, from the dataset's entries and the
//! run's body options, with multi-turn scripts that splice each reply into the next turn.

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::dataset::{Dataset, Entry, OwnRequest};

use super::*;

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
    // `take_if`: a row's own messages stay on the entry for the chat body below.
    if let Some(OwnRequest::Payload(payload)) = entry
        .own
        .take_if(|own| matches!(own, OwnRequest::Payload(_)))
    {
        return Ok(PreparedRequest {
            body: payload_body(payload, entry.extra),
            input_tokens,
            num_images,
            max_output_tokens,
            audio_seconds,
        });
    }
    // A self-contained prompt is an ordinary request once on its own.
    entry.own.take_if(|own| matches!(own, OwnRequest::Prompt));
    if endpoint == EndpointType::AudioTranscription {
        return Ok(audio_transcription::prepare(entry, opts, model));
    }
    if endpoint == EndpointType::ImageEdit {
        return image_edit::prepare(entry, opts, model);
    }
    if endpoint == EndpointType::VideoGeneration {
        return video_generation::prepare(entry, opts, model);
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
pub(super) fn merge_extras(
    body: &mut Map<String, Value>,
    opts: &BodyOptions,
    extra: Map<String, Value>,
) {
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
    /// On a fixed schedule: due this long after the conversation's first turn, and never
    /// before the previous reply (a trace turn replayed at its own time).
    pub after_first: Option<std::time::Duration>,
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
        "--endpoint-type {} needs a text prompt in every request: give synthetic prompts (--isl > 0) or \"text\" in each line of the input file",
        .0.as_str()
    )]
    NeedsPrompt(EndpointType),
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
        // Every turn carries its whole prompt (a Baseten trace): sent one by one, on any
        // endpoint that sends prompts.
        let self_contained = conv
            .turns
            .iter()
            .all(|t| matches!(t.own, Some(OwnRequest::Prompt)));
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
            if conv.turns.len() > 1 && !endpoint.is_conversational() && !self_contained {
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
        let (first, script) = if multi_turn && self_contained {
            let all = std::iter::once(first_entry).chain(entries).collect();
            let turns = self_contained_turns(
                endpoint,
                all,
                system,
                context,
                opts,
                &mut models,
                template.as_ref(),
            )?;
            let t = &turns[0];
            let first = PreparedRequest {
                body: t.message.clone(),
                input_tokens: t.input_tokens,
                num_images: t.num_images,
                max_output_tokens: t.max_output_tokens,
                audio_seconds: t.audio_seconds,
            };
            let script = TurnScript {
                head: Bytes::new(),
                turns,
                lead,
            };
            (first, script)
        } else if multi_turn {
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

/// The turns of a conversation whose every turn carries its whole prompt: each a complete
/// body, sent without history; a timestamped turn is due at its offset from the first.
fn self_contained_turns(
    endpoint: EndpointType,
    turns: Vec<Entry>,
    system: Option<&str>,
    context: Option<&str>,
    opts: &BodyOptions,
    models: &mut ModelPicker,
    template: Option<&template::PayloadTemplate>,
) -> Result<Vec<PreparedTurn>, EndpointMismatch> {
    let first_ms = turns.first().and_then(|t| t.timestamp_ms);
    let mut out = Vec::with_capacity(turns.len());
    for entry in turns {
        let after_first = match (first_ms, entry.timestamp_ms) {
            (Some(f), Some(t)) => Some(std::time::Duration::from_millis(t.saturating_sub(f))),
            _ => None,
        };
        let delay = entry.delay;
        let text = entry.text.clone();
        let req = prepare_one(
            endpoint,
            entry,
            system,
            context,
            opts,
            models.next_model(),
            template,
        )?;
        out.push(PreparedTurn {
            message: req.body,
            tail: Bytes::new(),
            input_tokens: req.input_tokens,
            text,
            num_images: req.num_images,
            max_output_tokens: req.max_output_tokens,
            audio_seconds: req.audio_seconds,
            delay,
            standalone: true,
            whole_body: true,
            after_first,
        });
    }
    Ok(out)
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
            after_first: None,
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
        after_first: None,
    }
}

/// `stream`, `stream_options` and the token limit, common to both shapes.
pub(super) fn common_fields(
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
}
