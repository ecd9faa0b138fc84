//! `aiperf chat` flags (AIPerf's names: `--model`, `--url`, `--system-prompt`, `--quick`,
//! `--no-history`, `--api-key`, `--tokenizer`), plus `--header`, `--custom-endpoint` and
//! `--image`.

use clap::Args;
use std::path::PathBuf;

/// The message `--quick` sends when none is given.
pub const QUICK_MESSAGE: &str = "Hello! In one sentence, who are you?";

/// Chats with a server one message at a time: each line read from stdin is a user turn
/// (a pipe works as well as a terminal), sent as a streamed chat completion; the reply is
/// printed as it streams, then its TTFT, tokens/s, output tokens and latency. The history
/// is resent each turn unless --no-history. A line `/image PATH [TEXT]` attaches an image
/// (a base64 data URL of the file's own type, as `profile` sends images): with TEXT it is
/// sent at once, alone it goes with the next message. Ctrl-D (end of input) ends the session;
/// the exit code is 1 when any turn failed.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
aiperf chat -m Qwen/Qwen2-VL-2B-Instruct -u localhost:8000\n  \
aiperf chat -m Qwen/Qwen2-VL-2B-Instruct --quick \"hello, who are you?\"\n  \
aiperf chat -m Qwen/Qwen2-VL-2B-Instruct --image cat.jpg --quick \"What is in this picture?\"\n  \
printf 'Hi\\n/image cat.jpg Describe it\\n' | aiperf chat -m Qwen/Qwen2-VL-2B-Instruct")]
pub struct ChatArgs {
    /// Model name served by the endpoint.
    #[arg(short = 'm', long)]
    pub model: String,

    /// Base URL of the OpenAI-compatible server, as `aiperf profile --url`; a URL ending in
    /// /chat/completions is used as it is.
    #[arg(short = 'u', long, default_value = "http://localhost:8000")]
    pub url: String,

    /// Path of the chat completions API, when not /v1/chat/completions.
    #[arg(long)]
    pub custom_endpoint: Option<String>,

    /// A system prompt, sent first in every request.
    #[arg(long)]
    pub system_prompt: Option<String>,

    /// Send one MESSAGE (default: a short greeting), print the reply and its stats, and
    /// exit: 0 when it succeeded, 1 when it failed. Stdin is not read.
    #[arg(short = 'q', long, value_name = "MESSAGE", num_args = 0..=1,
          default_missing_value = QUICK_MESSAGE)]
    pub quick: Option<String>,

    /// Send each message alone, without the conversation so far (stateless turns).
    #[arg(long)]
    pub no_history: bool,

    /// API key, sent as a Bearer token. Default: the OPENAI_API_KEY environment variable.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// A header sent with every request, `Name:Value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME:VALUE")]
    pub headers: Vec<String>,

    /// Tokenizer counting the reply's tokens (a Hugging Face name or a local path). Default:
    /// the model name; `builtin` needs no network.
    #[arg(long)]
    pub tokenizer: Option<String>,

    /// An image file (PNG, JPEG, WebP, GIF, BMP) attached to the first message (repeatable).
    #[arg(long, value_name = "PATH")]
    pub image: Vec<PathBuf>,
}
