//! Log detail from AIPerf's `--log-level`, `-v` and `-vv`, and the info lines for flags that
//! are accepted without effect in this build.

use crate::cli::{LogLevel, ProfileArgs};
use crate::ui::LogDetail;

/// The most detailed of `--log-level`, `-v` (debug) and `-vv` (trace).
pub(super) fn log_detail(a: &ProfileArgs) -> LogDetail {
    let from_level = match a.logging.log_level {
        LogLevel::Trace => LogDetail::Trace,
        LogLevel::Debug => LogDetail::Debug,
        LogLevel::Info | LogLevel::Notice | LogLevel::Success => LogDetail::Info,
        LogLevel::Warning => LogDetail::Warn,
        LogLevel::Error | LogLevel::Critical => LogDetail::Error,
    };
    let from_verbose = if a.logging.extra_verbose {
        LogDetail::Trace
    } else if a.verbose {
        LogDetail::Debug
    } else {
        LogDetail::Error
    };
    from_level.min(from_verbose)
}

/// One info line per flag given that has no effect in this build, naming it and why.
pub(super) fn accepted_without_effect(a: &ProfileArgs) -> Vec<String> {
    let mut lines = a.service.ignored();
    if a.tokenizer_trust_remote_code {
        lines.push(
            "--tokenizer-trust-remote-code: no Python code is run; only the tokenizer's \
tokenizer.json is loaded"
                .into(),
        );
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};

    fn args(extra: &[&str]) -> ProfileArgs {
        let mut argv = vec!["aiperf", "profile", "-m", "m"];
        argv.extend_from_slice(extra);
        match Cli::parse_with_sources(argv).unwrap().command {
            Command::Profile(a) => *a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_most_detailed_of_level_and_verbosity_wins() {
        assert_eq!(log_detail(&args(&[])), LogDetail::Info);
        assert_eq!(log_detail(&args(&["-v"])), LogDetail::Debug);
        assert_eq!(log_detail(&args(&["-vv"])), LogDetail::Trace);
        assert_eq!(log_detail(&args(&["--extra-verbose"])), LogDetail::Trace);
        assert_eq!(
            log_detail(&args(&["--log-level", "WARNING"])),
            LogDetail::Warn
        );
        assert_eq!(
            log_detail(&args(&["--log-level", "critical"])),
            LogDetail::Error
        );
        assert_eq!(
            log_detail(&args(&["--log-level", "Notice"])),
            LogDetail::Info
        );
        assert_eq!(
            log_detail(&args(&["--log-level", "error", "-v"])),
            LogDetail::Debug
        );
        assert_eq!(
            log_detail(&args(&["--log-level", "trace", "-v"])),
            LogDetail::Trace
        );
    }

    #[test]
    fn each_flag_without_effect_gets_one_line() {
        assert!(accepted_without_effect(&args(&[])).is_empty());
        let lines = accepted_without_effect(&args(&[
            "--zmq-host",
            "10.0.0.1",
            "--max-workers",
            "8",
            "--record-processors",
            "2",
        ]));
        // `--max-workers` sets the sender threads: not a flag without effect.
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("Ignoring --zmq-host:"), "{lines:?}");
        assert!(
            lines[1].starts_with("Ignoring --record-processor-service-count:"),
            "{lines:?}"
        );
    }
}
