//! `aiperf chat`: a sanity check of a server, one message at a time. Each turn goes through
//! the profile's HTTP client and request building (`transport`, `endpoint::chat`); its reply
//! is printed as it streams, then the turn's stats, computed by the profile's per-request
//! metrics (`metrics::record_metrics`), as AIPerf's chat prints them.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::cli::chat::ChatArgs;
use crate::clock::Clock;
use crate::config::chat::ChatConfig;
use crate::dataset::{EncodedImage, Entry};
use crate::endpoint::BodyOptions;
use crate::metrics::MetricId;
use crate::metrics::record_metrics::{RecordMetrics, RecordOptions};
use crate::record::{ErrorDetails, Phase, RequestInput, RequestRecord};
use crate::tokenizer::Tokenizer;
use crate::transport::{CONNECTION_ERROR, HttpClient};

/// A whole exchange may take this long (a long reply from a slow server included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// The in-line command attaching an image: `/image PATH [TEXT]`.
const IMAGE_COMMAND: &str = "/image";

#[derive(Debug)]
pub enum ChatError {
    /// Bad command line or input file: exit 2.
    Input(String),
    /// Anything else: exit 1.
    Other(String),
}

/// How a session ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every turn got a reply.
    Done,
    /// At least one turn failed (its line was printed).
    TurnsFailed,
}

/// Runs `aiperf chat`.
pub fn run(args: &ChatArgs) -> Result<Outcome, ChatError> {
    let cfg = ChatConfig::from_args(args).map_err(|e| ChatError::Input(e.0))?;
    for w in &cfg.warnings {
        eprintln!("warning: {w}");
    }
    let resolved = crate::tokenizer::resolve(&cfg.tokenizer, "main")
        .map_err(|e| ChatError::Input(format!("--tokenizer {}: {e:#}", cfg.tokenizer)))?;
    if let Some(w) = &resolved.warning {
        eprintln!("warning: {w}");
    }
    let mut first_images = Vec::with_capacity(cfg.images.len());
    for path in &cfg.images {
        first_images.push(read_image(path).map_err(|e| ChatError::Input(format!("--image: {e}")))?);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ChatError::Other(format!("cannot start the HTTP client's runtime: {e}")))?;
    // The client (its connection pool) lives inside the runtime.
    let _guard = runtime.enter();
    let live = Arc::new(|text: &str, reasoning: &str| {
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "{reasoning}{text}");
        let _ = out.flush();
    });
    let client = HttpClient::new(cfg.uri.clone(), &cfg.headers, REQUEST_TIMEOUT)
        .map_err(|e| ChatError::Other(format!("cannot build the HTTP client: {e:#}")))?
        .with_live_text(live);
    let mut session = Session {
        cfg: &cfg,
        client,
        clock: Clock::new(),
        tokenizer: resolved.tokenizer,
        runtime: &runtime,
        history: Vec::new(),
        sent: 0,
    };

    if let Some(message) = &cfg.quick {
        return match session.turn(message, first_images) {
            Ok(()) => Ok(Outcome::Done),
            Err(line) => {
                eprintln!("error: {line}");
                Ok(Outcome::TurnsFailed)
            }
        };
    }

    let stdin = std::io::stdin();
    let tty = stdin.is_terminal();
    if tty {
        println!(
            "Please enter a message for the chat model (Ctrl-D to exit; {IMAGE_COMMAND} PATH [TEXT] attaches an image):"
        );
    }
    let mut pending = first_images;
    let mut failed = false;
    let mut lines = stdin.lock().lines();
    loop {
        if tty {
            print!("> ");
            let _ = std::io::stdout().flush();
        }
        let line = match lines.next() {
            None => {
                if tty {
                    println!();
                }
                break;
            }
            Some(Err(e)) => return Err(ChatError::Other(format!("cannot read stdin: {e}"))),
            Some(Ok(line)) => line,
        };
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        if !tty {
            // A piped session's transcript shows what was sent, as a terminal would.
            println!("> {line}");
        }
        let text = match image_command(line) {
            Some(Err(usage)) => {
                eprintln!("error: {usage}");
                failed = true;
                continue;
            }
            Some(Ok((path, rest))) => match read_image(Path::new(path)) {
                Ok(image) => {
                    pending.push(image);
                    if rest.is_empty() {
                        println!("(image {path} goes with the next message)");
                        continue;
                    }
                    rest
                }
                Err(e) => {
                    eprintln!("error: {IMAGE_COMMAND}: {e}");
                    failed = true;
                    continue;
                }
            },
            None => line,
        };
        if let Err(e) = session.turn(text, std::mem::take(&mut pending)) {
            eprintln!("request failed: {e}");
            failed = true;
        }
    }
    Ok(if failed {
        Outcome::TurnsFailed
    } else {
        Outcome::Done
    })
}

/// `/image PATH [TEXT]`: the path and the text after it (empty when none); `None` when the
/// line is not the command.
fn image_command(line: &str) -> Option<Result<(&str, &str), String>> {
    let rest = line.trim_start().strip_prefix(IMAGE_COMMAND)?;
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim_start();
    if rest.is_empty() {
        return Some(Err(format!(
            "{IMAGE_COMMAND} needs a file: {IMAGE_COMMAND} PATH [TEXT], e.g. {IMAGE_COMMAND} cat.jpg What is in this picture?"
        )));
    }
    let (path, text) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    Some(Ok((path, text.trim())))
}

fn read_image(path: &Path) -> Result<EncodedImage, String> {
    let shown = path.display().to_string();
    if !path.is_file() {
        return Err(format!(
            "image file '{shown}' does not exist; give the path of a PNG, JPEG, WebP, GIF or BMP image"
        ));
    }
    crate::dataset::image::file_image(path, &shown)
}

struct Session<'a> {
    cfg: &'a ChatConfig,
    client: HttpClient,
    clock: Clock,
    tokenizer: Tokenizer,
    runtime: &'a tokio::runtime::Runtime,
    /// The user and assistant messages so far (stays empty with --no-history).
    history: Vec<Value>,
    /// Requests sent, for their ids.
    sent: u64,
}

impl Session<'_> {
    /// Sends one user message with `images`, prints the reply as it streams and then its
    /// stats; keeps both messages in the history. The error is the line saying why it failed.
    fn turn(&mut self, text: &str, images: Vec<EncodedImage>) -> Result<(), String> {
        let num_images = images.len() as u32;
        let mut entry = Entry::synthetic(text.to_string(), 0, images, None);
        let opts = BodyOptions {
            model: self.cfg.model.clone(),
            streaming: true,
            use_legacy_max_tokens: false,
            extra_inputs: Map::new(),
        };
        let mut body = crate::endpoint::chat::body_fields(&entry, &opts);
        let user = crate::endpoint::chat::message(&mut entry);
        let system = self
            .cfg
            .system_prompt
            .as_deref()
            .map(crate::endpoint::chat::system_message);
        let messages: Vec<Value> = system
            .into_iter()
            .chain(self.history.iter().cloned())
            .chain([user.clone()])
            .collect();
        body.insert("messages".into(), Value::Array(messages));
        let bytes = serde_json::to_vec(&body).expect("JSON values always serialize");
        self.sent += 1;
        let input = RequestInput {
            num_images,
            ..RequestInput::default()
        };
        let record = self.runtime.block_on(self.client.exchange(
            &self.clock,
            Phase::Profiling,
            input,
            format!("aiperf-chat-{}", self.sent),
            bytes.into(),
        ));
        if let Some(e) = &record.error {
            if !record.output_text.is_empty() || !record.reasoning_text.is_empty() {
                println!();
            }
            return Err(self.failure(e));
        }
        if !record.streamed {
            // A whole (non-streamed) reply is printed when it has arrived.
            print!("{}{}", record.reasoning_text, record.output_text);
        }
        println!();
        println!("{}", stats(&record, &self.tokenizer));
        if self.cfg.history {
            // Content only, as chat APIs replay assistant turns; the reasoning when there is
            // no content, so that the turn is not empty.
            let reply = if record.output_text.is_empty() {
                &record.reasoning_text
            } else {
                &record.output_text
            };
            self.history.push(user);
            self.history
                .push(serde_json::json!({"role": "assistant", "content": reply}));
        }
        Ok(())
    }

    fn failure(&self, e: &ErrorDetails) -> String {
        let uri = &self.cfg.uri;
        if e.kind == CONNECTION_ERROR {
            return format!(
                "cannot connect to {uri} ({}); check --url and that the server is running",
                e.message
            );
        }
        match e.code {
            Some(code) if code != crate::transport::TIMEOUT_CODE => {
                format!("{uri} answered HTTP {code}: {}", e.message)
            }
            _ => format!("{uri}: {}: {}", e.kind, e.message),
        }
    }
}

/// The turn's stats as AIPerf's chat prints them: TTFT, then tokens/s over the whole
/// request with the output tokens and the latency, then the inter-token latency when there
/// were two tokens or more.
fn stats(record: &RequestRecord, tokenizer: &Tokenizer) -> String {
    let m = RecordMetrics::compute(
        record,
        tokenizer,
        RecordOptions {
            streaming: true,
            ..RecordOptions::default()
        },
    );
    let (Some(latency_ns), Some(osl)) = (
        m.get(MetricId::RequestLatency),
        m.get(MetricId::OutputSequenceLength).filter(|&n| n > 0.0),
    ) else {
        return "(no tokens received)".into();
    };
    let latency_s = latency_ns / 1e9;
    let tps = if latency_s > 0.0 {
        osl / latency_s
    } else {
        0.0
    };
    let mut tokens = format!("{osl:.0} tokens");
    if let Some(r) = m.get(MetricId::ReasoningTokenCount).filter(|&r| r > 0.0) {
        tokens.push_str(&format!(", {r:.0} reasoning"));
    }
    let ttft = match m.get(MetricId::TimeToFirstToken) {
        Some(ns) => format!("{:.2} ms", ns / 1e6),
        None => "n/a (the reply was not streamed)".into(),
    };
    let mut lines = vec![
        format!("TTFT: {ttft}"),
        format!("TPS:  {tps:.2} tokens/s ({tokens} in {latency_s:.2}s)"),
    ];
    if let Some(itl) = m.get(MetricId::InterTokenLatency).filter(|&v| v > 0.0) {
        lines.push(format!(
            "ITL:  {:.2} ms/token (decode {:.2} tokens/s)",
            itl / 1e6,
            1e9 / itl
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_command() {
        assert_eq!(image_command("hello"), None);
        assert_eq!(image_command("/images x"), None);
        assert_eq!(image_command("/image a.png"), Some(Ok(("a.png", ""))));
        assert_eq!(
            image_command("  /image a.png  What is it? "),
            Some(Ok(("a.png", "What is it?")))
        );
        assert!(matches!(image_command("/image   "), Some(Err(e)) if e.contains("needs a file")));
    }
}
