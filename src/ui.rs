//! Progress display and log set-up.

use std::fs::File;
use std::path::Path;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, fmt};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UiType {
    /// A full-screen live dashboard (the default in a terminal).
    Dashboard,
    /// A progress bar.
    Simple,
    /// Log lines only.
    None,
}

/// A progress bar for one phase, or a hidden one when the UI is off or the dashboard is up.
pub fn phase_bar(ui: UiType, label: &str, total: u64) -> ProgressBar {
    // The dashboard shows progress itself.
    if ui != UiType::Simple {
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

/// How long the dataset build runs before its progress bar appears: most builds finish
/// well before, and a bar that flashes up and away is noise.
const DATASET_BAR_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// The dataset build's progress bar: hidden at first, shown once the build has run for
/// `DATASET_BAR_AFTER` (never when the UI is off).
pub struct DatasetBar {
    bar: ProgressBar,
    enabled: bool,
    started: std::time::Instant,
    shown: std::sync::atomic::AtomicBool,
}

impl DatasetBar {
    pub fn new(ui: UiType) -> DatasetBar {
        let bar = ProgressBar::hidden();
        bar.set_style(
            ProgressStyle::with_template(
                "Building dataset: {pos}/{len} |{bar:40}| {percent}% [{elapsed_precise}<{eta_precise}]",
            )
            .expect("static template is valid")
            .progress_chars("█▉▊▋▌▍▎▏ "),
        );
        DatasetBar {
            bar,
            enabled: ui != UiType::None,
            started: std::time::Instant::now(),
            shown: std::sync::atomic::AtomicBool::new(false),
        }
    }

    #[cfg(test)]
    /// True once the bar is on screen.
    pub fn is_shown(&self) -> bool {
        self.shown.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl crate::dataset::BuildProgress for DatasetBar {
    fn begin(&self, jobs: u64) {
        self.bar.set_length(jobs);
    }

    fn advance(&self) {
        self.bar.inc(1);
        if self.enabled
            && self.started.elapsed() >= DATASET_BAR_AFTER
            && !self.shown.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }
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

/// How much the log shows (AIPerf's --log-level, -v, -vv); `Trace` is the most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogDetail {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl LogDetail {
    fn as_str(self) -> &'static str {
        match self {
            LogDetail::Trace => "trace",
            LogDetail::Debug => "debug",
            LogDetail::Info => "info",
            LogDetail::Warn => "warn",
            LogDetail::Error => "error",
        }
    }
}

/// The file the log currently goes to. A sweep runs several profiles in one process, each
/// with its own `logs/aiperf.log`: the subscriber is installed once and each run re-points it.
static LOG_FILE: Mutex<Option<File>> = Mutex::new(None);

/// Logs go to stderr and to `log_file` (replacing the previous log file, if any). `RUST_LOG`
/// overrides the level; the level of the first call stays for the process.
pub fn init_logging(detail: LogDetail, log_file: Option<&Path>) -> std::io::Result<()> {
    let file = log_file.map(File::create).transpose()?;
    *LOG_FILE
        .lock()
        .map_err(|_| std::io::Error::other("log lock"))? = file;
    let level = detail.as_str();
    let filter = || {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(format!("aiperf={level},warn")))
    };
    // Colour codes only on a terminal: redirected logs and CI captures stay plain text.
    let stderr_layer = fmt::layer()
        .with_writer(|| ConsoleLog)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_timer(WallTime)
        .with_target(false)
        .with_filter(filter());
    let file_layer = fmt::layer()
        .with_writer(|| CurrentLogFile)
        .with_ansi(false)
        .with_timer(WallTime)
        .with_target(false)
        .with_filter(filter());
    // A second init (a sweep's next run, tests in one process) keeps the first subscriber.
    let _ = tracing_subscriber::registry()
        .with(stderr_layer)
        .with(file_layer)
        .try_init();
    Ok(())
}

/// Console log lines kept for the dashboard's log panel while it owns the terminal (a line
/// written to stderr then would tear its screen), newest last.
static CAPTURED_LOG: Mutex<Option<std::collections::VecDeque<String>>> = Mutex::new(None);
/// Lines the log panel keeps.
const CAPTURED_LINES: usize = 500;

/// From now on console log lines go to the dashboard's log panel instead of stderr.
pub fn capture_console_log() {
    let mut captured = CAPTURED_LOG.lock().unwrap_or_else(|e| e.into_inner());
    captured.get_or_insert_with(Default::default);
}

/// Console log lines go to stderr again.
pub fn release_console_log() {
    *CAPTURED_LOG.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// The last `n` captured log lines, oldest first, without colour codes.
pub fn captured_log(n: usize) -> Vec<String> {
    let captured = CAPTURED_LOG.lock().unwrap_or_else(|e| e.into_inner());
    captured.as_ref().map_or_else(Vec::new, |lines| {
        lines
            .iter()
            .skip(lines.len().saturating_sub(n))
            .cloned()
            .collect()
    })
}

/// The console's log writer: stderr, or the dashboard's log panel while it is up.
struct ConsoleLog;

impl std::io::Write for ConsoleLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut captured = CAPTURED_LOG.lock().unwrap_or_else(|e| e.into_inner());
        match captured.as_mut() {
            Some(lines) => {
                let text = strip_ansi(&String::from_utf8_lossy(buf));
                for line in text.lines().filter(|l| !l.is_empty()) {
                    if lines.len() == CAPTURED_LINES {
                        lines.pop_front();
                    }
                    lines.push_back(line.to_string());
                }
                Ok(buf.len())
            }
            None => std::io::stderr().write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Text without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // Skip to the sequence's final byte (a letter).
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Writes to [`LOG_FILE`]; nothing when no file is set.
struct CurrentLogFile;

impl std::io::Write for CurrentLogFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match LOG_FILE
            .lock()
            .map_err(|_| std::io::Error::other("log lock"))?
            .as_mut()
        {
            Some(f) => f.write(buf),
            None => Ok(buf.len()),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match LOG_FILE
            .lock()
            .map_err(|_| std::io::Error::other("log lock"))?
            .as_mut()
        {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::BuildProgress;

    #[test]
    fn colour_codes_are_taken_out_of_captured_lines() {
        assert_eq!(
            strip_ansi("\x1b[2m12:00:00.000001\x1b[0m \x1b[33m WARN\x1b[0m slow"),
            "12:00:00.000001  WARN slow"
        );
    }

    #[test]
    fn the_dataset_bar_appears_only_for_long_builds_and_never_without_a_ui() {
        let bar = DatasetBar::new(UiType::Simple);
        bar.begin(3);
        bar.advance();
        assert!(!bar.is_shown(), "a short build shows nothing");
        std::thread::sleep(DATASET_BAR_AFTER + std::time::Duration::from_millis(50));
        bar.advance();
        assert!(bar.is_shown());
        bar.finish();

        let off = DatasetBar::new(UiType::None);
        off.begin(3);
        std::thread::sleep(DATASET_BAR_AFTER + std::time::Duration::from_millis(50));
        off.advance();
        assert!(!off.is_shown());
    }
}
