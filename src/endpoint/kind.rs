//! The endpoint types: one table gives each its variant, its name (AIPerf's spelling, as
//! `--endpoint-type` takes it and the exports write it) and its help; everything else about
//! a type is a method with an exhaustive match, so a new type must be decided on everywhere.

use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderName, HeaderValue};
use serde_json::{Map, Value};

use super::{audio_transcription, messages, rankings, shape, template};

/// Declares `EndpointType` from its table, with `ALL`, `as_str` and `help`.
macro_rules! endpoint_types {
    ($( $(#[doc = $doc:literal])+ $variant:ident = $name:literal, )+) => {
        /// Which API the requests are for.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EndpointType {
            $( $(#[doc = $doc])+ $variant, )+
        }

        impl EndpointType {
            /// Every endpoint type, in `--help` order.
            pub const ALL: &'static [EndpointType] = &[$(EndpointType::$variant,)+];

            /// AIPerf's name of the type.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(EndpointType::$variant => $name,)+
                }
            }

            /// What `--help` says of the type: its doc comment.
            pub fn help(self) -> &'static str {
                match self {
                    $(EndpointType::$variant => concat!($($doc, "\n"),+),)+
                }
            }
        }
    };
}

endpoint_types! {
    /// OpenAI chat completions (`/v1/chat/completions`); text and images.
    Chat = "chat",
    /// OpenAI text completions (`/v1/completions`); text only.
    Completions = "completions",
    /// OpenAI speech to text (`/v1/audio/transcriptions`): one audio clip per request, sent
    /// as multipart/form-data.
    AudioTranscription = "audio_transcription",
    /// OpenAI Responses API (`/v1/responses`); text, images and audio, streamed as named
    /// events.
    Responses = "responses",
    /// Anthropic Messages API (`/v1/messages`); text and images, `x-api-key` auth.
    Messages = "messages",
    /// OpenAI embeddings (`/v1/embeddings`): `input` is the entry's texts; no output
    /// tokens, so "Embeddings Metrics" has latency, throughput and input lengths only.
    Embeddings = "embeddings",
    /// NVIDIA NIM reranking (`/v1/ranking`): a query and passages (see --rankings-*).
    NimRankings = "nim_rankings",
    /// Cohere reranking (`/v2/rerank`): a query and documents (see --rankings-*).
    CohereRankings = "cohere_rankings",
    /// Hugging Face TEI reranking (`/rerank`): a query and texts (see --rankings-*).
    HfTeiRankings = "hf_tei_rankings",
    /// A body rendered from a Jinja2 template: --extra-inputs payload_template:<nv-embedqa,
    /// a file, or the template>; optional response_field:<path to the answer text>. Nothing
    /// is appended to --url.
    Template = "template",
    /// Each input line's `payload` sent verbatim (mooncake_trace lines with "payload");
    /// the answer's shape is detected (optional response_field). Nothing is appended to
    /// --url.
    Raw = "raw",
    /// OpenAI image generation (`/v1/images/generations`): the prompt, `n: 1` and
    /// `response_format: b64_json`; the images are counted (num_images, image_throughput,
    /// image_latency).
    ImageGeneration = "image_generation",
    /// Embeddings of chat messages (`/v1/embeddings`, vLLM's multimodal embeddings): the
    /// chat body with text and image parts; "Embeddings Metrics".
    ChatEmbeddings = "chat_embeddings",
    /// NVIDIA NIM embeddings (`/v1/embeddings`): texts, images as `<img src='URL'/>`, or
    /// each text paired with an image; "NIM Embeddings Metrics".
    NimEmbeddings = "nim_embeddings",
    /// Hugging Face TGI (`/generate`; `/generate_stream` with --streaming): `inputs` and
    /// `parameters.max_new_tokens` (--extra-inputs go into `parameters`).
    HuggingfaceGenerate = "huggingface_generate",
    /// NVIDIA NIM image retrieval (`/v1/infer`): each request's images as `input` items
    /// (needs --image-width-mean/--image-height-mean or images in the input file); the
    /// answer's `data[]` is counted; "Image Retrieval Metrics".
    ImageRetrieval = "image_retrieval",
    /// SOLIDO RAG (`/rag/api/prompt`): `query`, `filters` and `inference_model`; the
    /// answer's `content` (streamed too); "SOLIDO RAG Metrics".
    SolidoRag = "solido_rag",
    /// OpenAI image edits (`/v1/images/edits`): a multipart form with the prompt and the
    /// request's first image as the `image` file (an http(s) image as `url`), `n: 1`,
    /// `response_format: b64_json`; the images answered are counted; "Image Edit Metrics".
    ImageEdit = "image_edit",
    /// OpenAI/SGLang video generation (`/v1/videos`): a multipart form with the prompt,
    /// `model` and --extra-inputs (size, seconds, ...) starts a job, polled
    /// (`GET /v1/videos/{id}`) until it completes; request latency is the job's time
    /// (with --download-video-content, the download's too); "Video Generation Metrics".
    VideoGeneration = "video_generation",
}

impl EndpointType {
    /// The type named `name` (its `as_str`), for reading a run's saved configuration.
    pub fn from_name(name: &str) -> Option<EndpointType> {
        Self::ALL.iter().copied().find(|t| t.as_str() == name)
    }

    /// AIPerf's types this build refuses: what they would need.
    pub fn unsupported(self) -> Option<&'static str> {
        match self {
            EndpointType::VideoGeneration
            | EndpointType::Chat
            | EndpointType::Completions
            | EndpointType::AudioTranscription
            | EndpointType::Responses
            | EndpointType::Messages
            | EndpointType::Embeddings
            | EndpointType::NimRankings
            | EndpointType::CohereRankings
            | EndpointType::HfTeiRankings
            | EndpointType::Template
            | EndpointType::Raw
            | EndpointType::ImageGeneration
            | EndpointType::ChatEmbeddings
            | EndpointType::NimEmbeddings
            | EndpointType::HuggingfaceGenerate
            | EndpointType::ImageRetrieval
            | EndpointType::SolidoRag
            | EndpointType::ImageEdit => None,
        }
    }

    /// The `Content-Type` of the request bodies.
    pub fn content_type(self) -> String {
        match self {
            EndpointType::AudioTranscription
            | EndpointType::ImageEdit
            | EndpointType::VideoGeneration => audio_transcription::content_type(),
            EndpointType::Chat
            | EndpointType::Completions
            | EndpointType::Responses
            | EndpointType::Messages
            | EndpointType::Embeddings
            | EndpointType::NimRankings
            | EndpointType::CohereRankings
            | EndpointType::HfTeiRankings
            | EndpointType::Template
            | EndpointType::Raw
            | EndpointType::ImageGeneration
            | EndpointType::ChatEmbeddings
            | EndpointType::NimEmbeddings
            | EndpointType::HuggingfaceGenerate
            | EndpointType::ImageRetrieval
            | EndpointType::SolidoRag => "application/json".into(),
        }
    }

    pub fn default_path(self) -> &'static str {
        match self {
            EndpointType::Chat => "/v1/chat/completions",
            EndpointType::Completions => "/v1/completions",
            EndpointType::AudioTranscription => "/v1/audio/transcriptions",
            EndpointType::Responses => "/v1/responses",
            EndpointType::Messages => "/v1/messages",
            EndpointType::Embeddings => "/v1/embeddings",
            EndpointType::NimRankings => "/v1/ranking",
            EndpointType::CohereRankings => "/v2/rerank",
            EndpointType::HfTeiRankings => "/rerank",
            // Nothing is appended to --url.
            EndpointType::Template | EndpointType::Raw => "",
            EndpointType::ImageGeneration => "/v1/images/generations",
            EndpointType::ChatEmbeddings | EndpointType::NimEmbeddings => "/v1/embeddings",
            EndpointType::HuggingfaceGenerate => "/generate",
            EndpointType::ImageRetrieval => "/v1/infer",
            EndpointType::SolidoRag => "/rag/api/prompt",
            EndpointType::ImageEdit => "/v1/images/edits",
            EndpointType::VideoGeneration => "/v1/videos",
        }
    }

    /// The path of streamed requests, where the API has one of its own (TGI).
    pub fn streaming_path(self) -> Option<&'static str> {
        match self {
            EndpointType::HuggingfaceGenerate => Some("/generate_stream"),
            _ => None,
        }
    }

    /// Whether requests may carry images: the conversational APIs and the multimodal
    /// embeddings, retrieval and edit types.
    pub fn takes_images(self) -> bool {
        match self {
            EndpointType::Chat
            | EndpointType::Responses
            | EndpointType::Messages
            | EndpointType::ChatEmbeddings
            | EndpointType::NimEmbeddings
            | EndpointType::ImageRetrieval
            | EndpointType::ImageEdit => true,
            EndpointType::Completions
            | EndpointType::AudioTranscription
            | EndpointType::Embeddings
            | EndpointType::NimRankings
            | EndpointType::CohereRankings
            | EndpointType::HfTeiRankings
            | EndpointType::Template
            | EndpointType::Raw
            | EndpointType::ImageGeneration
            | EndpointType::HuggingfaceGenerate
            | EndpointType::SolidoRag
            | EndpointType::VideoGeneration => false,
        }
    }

    /// The reranking API, for the rankings types.
    pub fn rankings_api(self) -> Option<rankings::RankingsApi> {
        match self {
            EndpointType::NimRankings => Some(rankings::RankingsApi::Nim),
            EndpointType::CohereRankings => Some(rankings::RankingsApi::Cohere),
            EndpointType::HfTeiRankings => Some(rankings::RankingsApi::HfTei),
            _ => None,
        }
    }

    /// Conversation-shaped APIs: several turns (history sent back) and images.
    pub fn is_conversational(self) -> bool {
        matches!(
            self,
            EndpointType::Chat | EndpointType::Responses | EndpointType::Messages
        )
    }

    /// False when the answers are vectors, scores, images or transcripts: no output
    /// tokens, TTFT or ITL.
    pub fn produces_tokens(self) -> bool {
        match self {
            EndpointType::Chat
            | EndpointType::Completions
            | EndpointType::Responses
            | EndpointType::Messages
            | EndpointType::Template
            | EndpointType::Raw
            | EndpointType::HuggingfaceGenerate
            | EndpointType::SolidoRag => true,
            EndpointType::Embeddings
            | EndpointType::NimRankings
            | EndpointType::CohereRankings
            | EndpointType::HfTeiRankings
            | EndpointType::ImageGeneration
            | EndpointType::AudioTranscription
            | EndpointType::ChatEmbeddings
            | EndpointType::NimEmbeddings
            | EndpointType::ImageRetrieval
            | EndpointType::ImageEdit
            | EndpointType::VideoGeneration => false,
        }
    }

    /// False when the request carries no text to count: no input sequence length (AIPerf's
    /// `tokenizes_input`), rather than zeros.
    pub fn tokenizes_input(self) -> bool {
        !matches!(
            self,
            EndpointType::AudioTranscription | EndpointType::ImageRetrieval
        )
    }

    /// The console tables' title (AIPerf's `metrics_title`).
    pub fn metrics_title(self) -> &'static str {
        match self {
            EndpointType::Chat
            | EndpointType::Completions
            | EndpointType::Responses
            | EndpointType::Messages
            | EndpointType::Template
            | EndpointType::Raw
            | EndpointType::HuggingfaceGenerate => "LLM Metrics",
            EndpointType::Embeddings | EndpointType::ChatEmbeddings => "Embeddings Metrics",
            EndpointType::NimRankings => "Rankings Metrics",
            EndpointType::CohereRankings | EndpointType::HfTeiRankings => "Ranking Metrics",
            EndpointType::ImageGeneration => "Image Generation Metrics",
            EndpointType::AudioTranscription => "Audio Transcription Metrics",
            EndpointType::NimEmbeddings => "NIM Embeddings Metrics",
            EndpointType::ImageRetrieval => "Image Retrieval Metrics",
            EndpointType::SolidoRag => "SOLIDO RAG Metrics",
            EndpointType::ImageEdit => "Image Edit Metrics",
            EndpointType::VideoGeneration => "Video Generation Metrics",
        }
    }

    /// The headers every request of this API carries: its `Content-Type`, `api_key` as
    /// the API takes it (a bearer token; the Messages API's `x-api-key` and
    /// `anthropic-version`), then `given` (--header), which win.
    pub fn request_headers(
        self,
        api_key: Option<&str>,
        given: &[(HeaderName, HeaderValue)],
    ) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        let mut out = Vec::with_capacity(given.len() + 3);
        let content_type = HeaderValue::from_str(&self.content_type())
            .map_err(|_| format!("invalid Content-Type '{}'", self.content_type()))?;
        out.push((CONTENT_TYPE, content_type));
        let has = |name: &str| given.iter().any(|(k, _)| k.as_str() == name);
        let secret = |v: &str| {
            HeaderValue::from_str(v)
                .map(|mut v| {
                    v.set_sensitive(true);
                    v
                })
                .map_err(|_| "--api-key contains characters not allowed in a header".to_string())
        };
        match (self, api_key) {
            (EndpointType::Messages, key) => {
                if let Some(key) = key.filter(|_| !has("x-api-key")) {
                    out.push((HeaderName::from_static("x-api-key"), secret(key)?));
                }
                if !has("anthropic-version") {
                    out.push((
                        HeaderName::from_static("anthropic-version"),
                        HeaderValue::from_static(messages::ANTHROPIC_VERSION),
                    ));
                }
            }
            (_, Some(key)) => out.push((AUTHORIZATION, secret(&format!("Bearer {key}"))?)),
            (_, None) => {}
        }
        out.extend(given.iter().cloned());
        Ok(out)
    }

    /// How responses are read; `extra_inputs` may hold a `response_field` (raw, template).
    pub fn response_shape(
        self,
        extra_inputs: &Map<String, Value>,
    ) -> Result<shape::ResponseShape, String> {
        let reads_field = matches!(self, EndpointType::Template | EndpointType::Raw);
        let field = match extra_inputs.get(template::RESPONSE_FIELD) {
            None => None,
            Some(Value::String(f)) if reads_field => Some(
                template::FieldPath::parse(f)
                    .map_err(|e| format!("--extra-inputs response_field: {e}"))?,
            ),
            Some(_) if reads_field => {
                return Err("--extra-inputs response_field: give a path such as response_field:choices[0].text".into());
            }
            Some(_) => {
                return Err(format!(
                    "--extra-inputs response_field: only --endpoint-type template or raw read a response field, not {}; drop it",
                    self.as_str()
                ));
            }
        };
        if extra_inputs.contains_key(template::PAYLOAD_TEMPLATE) && self != EndpointType::Template {
            return Err(format!(
                "--extra-inputs payload_template: only --endpoint-type template renders a payload template, not {}; drop it or use --endpoint-type template",
                self.as_str()
            ));
        }
        Ok(match self {
            EndpointType::Chat | EndpointType::Completions => shape::ResponseShape::OpenAi,
            EndpointType::Embeddings
            | EndpointType::ChatEmbeddings
            | EndpointType::NimEmbeddings => shape::ResponseShape::Embeddings,
            EndpointType::HuggingfaceGenerate => shape::ResponseShape::HuggingfaceGenerate,
            EndpointType::ImageRetrieval => shape::ResponseShape::ImageRetrieval,
            EndpointType::SolidoRag => shape::ResponseShape::SolidoRag,
            EndpointType::ImageGeneration | EndpointType::ImageEdit => shape::ResponseShape::Images,
            EndpointType::Responses => shape::ResponseShape::Responses,
            EndpointType::Messages => shape::ResponseShape::Messages,
            EndpointType::Template | EndpointType::Raw => shape::ResponseShape::Auto(field),
            EndpointType::NimRankings => shape::ResponseShape::Rankings(rankings::RankingsApi::Nim),
            EndpointType::CohereRankings => {
                shape::ResponseShape::Rankings(rankings::RankingsApi::Cohere)
            }
            EndpointType::HfTeiRankings => {
                shape::ResponseShape::Rankings(rankings::RankingsApi::HfTei)
            }
            EndpointType::AudioTranscription => shape::ResponseShape::OpenAi,
            // The job's answers are read by the transport's polling (`transport::video`);
            // an error body has the OpenAI shape.
            EndpointType::VideoGeneration => shape::ResponseShape::OpenAi,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_is_listed_once_and_found_by_its_name() {
        let mut names: Vec<&str> = EndpointType::ALL.iter().map(|t| t.as_str()).collect();
        for t in EndpointType::ALL {
            assert_eq!(EndpointType::from_name(t.as_str()), Some(*t));
            assert!(!t.help().trim().is_empty(), "{t:?}");
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EndpointType::ALL.len());
        assert_eq!(EndpointType::from_name("nope"), None);
    }

    #[test]
    fn the_messages_api_takes_the_key_as_x_api_key_with_its_version() {
        let h = EndpointType::Messages
            .request_headers(Some("k1"), &[])
            .unwrap();
        let get = |h: &[(HeaderName, HeaderValue)], n: &str| {
            h.iter()
                .find(|(k, _)| k.as_str() == n)
                .map(|(_, v)| v.to_str().unwrap().to_string())
        };
        assert_eq!(get(&h, "x-api-key").as_deref(), Some("k1"));
        assert_eq!(get(&h, "anthropic-version").as_deref(), Some("2023-06-01"));
        assert_eq!(get(&h, "authorization"), None);
        // Headers given with --header stay as given, and win.
        let given = [
            (AUTHORIZATION, HeaderValue::from_static("Bearer gateway")),
            (
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static("2024-01-01"),
            ),
        ];
        let h = EndpointType::Messages
            .request_headers(Some("k1"), &given)
            .unwrap();
        assert_eq!(get(&h, "authorization").as_deref(), Some("Bearer gateway"));
        assert_eq!(get(&h, "anthropic-version").as_deref(), Some("2024-01-01"));
        assert_eq!(get(&h, "x-api-key").as_deref(), Some("k1"));
        // Every other API: a bearer token.
        let h = EndpointType::Chat.request_headers(Some("k2"), &[]).unwrap();
        assert_eq!(get(&h, "authorization").as_deref(), Some("Bearer k2"));
        assert_eq!(get(&h, "content-type").as_deref(), Some("application/json"));
        assert_eq!(get(&h, "x-api-key"), None);
    }
}
