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
pub mod video_generation;

mod kind;
mod request;
mod response;

pub use kind::EndpointType;
pub use models::{ModelPicker, ModelSelection};

use request::common_fields;
pub use request::*;
pub use response::*;
use response::{error_message, lenient};
