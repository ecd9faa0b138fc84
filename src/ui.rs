//! Progress display and log set-up.

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, fmt};

use crate::cli::UiType;

/// A progress bar for one phase, or a hidden one when the UI is off.
pub fn phase_bar(ui: UiType, label: &str, total: u64) -> ProgressBar {
    if ui == UiType::None {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(&format!(
        "{label}: {{pos}}/{{len}} |{{bar:40}}| {{percent}}% [{{elapsed_precise}}<{{eta_precise}}]"
    ))
    .expect("static template is valid")
    .progress_chars("█▉▊▋▌▍▎▏ ");
    bar.set_style(style);
    bar
}

/// Log lines as AIPerf prints them: `HH:MM:SS.micros LEVEL message`.
struct WallTime;

impl FormatTime for WallTime {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let sod = now.as_secs() % 86_400;
        write!(
            w,
            "{:02}:{:02}:{:02}.{:06}",
            sod / 3600,
            (sod / 60) % 60,
            sod % 60,
            now.subsec_micros()
        )
    }
}

/// Logs go to stderr and to `log_file`. `RUST_LOG` overrides the level.
pub fn init_logging(verbose: bool, log_file: Option<&Path>) -> std::io::Result<()> {
    let level = if verbose { "debug" } else { "info" };
    let filter = || {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(format!("aiperf={level},warn")))
    };
    let stderr_layer = fmt::layer()
        .with_writer(std::io::stderr)
        .with_timer(WallTime)
        .with_target(false)
        .with_filter(filter());
    let file_layer = match log_file {
        Some(path) => {
            let file = Arc::new(Mutex::new(File::create(path)?));
            Some(
                fmt::layer()
                    .with_writer(move || SharedFile(file.clone()))
                    .with_ansi(false)
                    .with_timer(WallTime)
                    .with_target(false)
                    .with_filter(filter()),
            )
        }
        None => None,
    };
    // A second init (tests running in one process) keeps the first subscriber.
    let _ = tracing_subscriber::registry()
        .with(stderr_layer)
        .with(file_layer)
        .try_init();
    Ok(())
}

struct SharedFile(Arc<Mutex<File>>);

impl std::io::Write for SharedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("log lock"))?
            .write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("log lock"))?
            .flush()
    }
}
