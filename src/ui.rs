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
    /// A live dashboard (not built yet: shows the progress bar).
    Dashboard,
    /// A progress bar.
    Simple,
    /// Log lines only.
    None,
}

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
        .with_writer(std::io::stderr)
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
