//! The `aiperf` command: parse the command line, run the subcommand, map the result to an
//! exit code (0 ok, 1 run failed, 2 bad command line or input, 3 the run succeeded but its
//! upload to MLflow or W&B failed, 130 interrupted, 143 terminated).

use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::dataset::BuildError;
use crate::profile::{Outcome, ProfileError};
use clap::error::{ContextKind, ContextValue, ErrorKind};

/// AIPerf's subcommands that run its services as separate processes, which this
/// single-process build does not have.
const PROCESS_PLUMBING: [(&str, &str); 3] = [
    (
        "proxy",
        "runs AIPerf's ZMQ event-bus proxy between its processes (a Kubernetes sidecar)",
    ),
    (
        "service",
        "runs one of AIPerf's services (a worker, a record processor, ...) as its own process",
    ),
    (
        "plugins",
        "lists and validates AIPerf's plugin registry (endpoint, transport and dataset types)",
    ),
];

/// The run's results are written but `--mlflow-*` / `--wandb-*` could not log them.
const PUBLISH_FAILED: u8 = 3;

/// Runs `aiperf` with `argv` (the program name first) and gives its exit code.
pub fn run(argv: Vec<String>) -> ExitCode {
    if let Some((name, what)) = argv
        .get(1)
        .and_then(|sub| PROCESS_PLUMBING.iter().find(|(n, _)| n == sub))
    {
        eprintln!(
            "error: `aiperf {name}` {what}; this build runs in one process and has none (`aiperf --help` lists its subcommands)"
        );
        return ExitCode::from(2);
    }
    let argv = match crate::cli::shard::expand_args_file(argv) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // List-valued flags (`--concurrency 1,4,16`) are taken out before clap parses: each
    // point of the sweep is parsed on its own.
    let lists = match crate::sweep::find_lists(&argv) {
        Ok(lists) => lists,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // A config file's sweeps join the command line's lists (as `--concurrency=1,4,16`).
    let (argv, sweep_warnings) = crate::cli::with_config_sweeps(argv, &lists.first);
    for w in &sweep_warnings {
        eprintln!("warning: {w}");
    }
    let lists = match argv.len() == lists.first.len() {
        true => lists,
        false => match crate::sweep::find_lists(&argv) {
            Ok(lists) => lists,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let cli = match Cli::parse_with_sources(&lists.first) {
        Ok(cli) => cli,
        Err(e) => {
            if let Some(line) = negative_number_error(&e, &argv) {
                eprintln!("{line}");
                return ExitCode::from(2);
            }
            e.exit() // help and version exit 0, usage errors 2
        }
    };
    match cli.command {
        Command::Merge(args) => match crate::merge::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(crate::merge::MergeError::Input(e)) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            Err(crate::merge::MergeError::Other(e)) => {
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        },
        Command::Kube(args) => match crate::kube::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::Profile(mut args) => {
            // A pipe (`--input-file <(zcat trace.gz)`) is read once, before anything reads it.
            let copy = match args
                .input_file
                .as_deref()
                .map(crate::profile::read_input_once)
            {
                Some(Err(e)) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
                Some(Ok(copy)) => copy,
                None => None,
            };
            if let Some(c) = &copy {
                args.input_file = Some(c.path.clone());
            }
            let mut ran = crate::sweep::Ran::default();
            let result = crate::sweep::run(&argv, lists, &args, &mut ran);
            let result = crate::profile::auto_plot::after_run(&args, result);
            // After the plots, so that they are uploaded too.
            let published = crate::publish::after_run(&args, &ran, &result);
            // Every other end writes its results, and the ready marker last.
            let no_results = matches!(result, Err(_) | Ok(Outcome::WriteFailed));
            let (mut code, line) = profile_exit(result);
            if let Some(line) = &line {
                eprintln!("{line}");
                if no_results {
                    mark_failed_shard(&args, code, line);
                }
            }
            if let Err(e) = published {
                eprintln!("error: {e}");
                if code == 0 {
                    code = PUBLISH_FAILED;
                }
            }
            ExitCode::from(code)
        }
        Command::Plot(args) => plot_exit(&args),
        Command::Synthesize(args) => match crate::synthesize::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e @ crate::synthesize::SynthError::Input(_)) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
        Command::Analyze(args) => match crate::analyze::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e @ crate::analyze::AnalyzeError::Usage(_)) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
        Command::SpeedBenchReport(args) => match crate::speed_bench::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e @ crate::speed_bench::ReportError::Input(_)) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
        Command::Config(args) => match crate::scaffold::run(&args) {
            Ok(crate::scaffold::Outcome::Done) => ExitCode::SUCCESS,
            Ok(crate::scaffold::Outcome::Invalid) => ExitCode::from(1),
            Err(crate::scaffold::ScaffoldError::Input(e)) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::Chat(args) => match crate::chat::run(&args) {
            Ok(crate::chat::Outcome::Done) => ExitCode::SUCCESS,
            Ok(crate::chat::Outcome::TurnsFailed) => ExitCode::from(1),
            Err(crate::chat::ChatError::Input(e)) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            Err(crate::chat::ChatError::Other(e)) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
        Command::Compare(args) => match crate::compare::run(&args) {
            Ok(crate::compare::Outcome::Done) => ExitCode::SUCCESS,
            Ok(crate::compare::Outcome::Regression) => {
                eprintln!(
                    "error: a compared metric got worse beyond the threshold (--fail-on-regression)"
                );
                ExitCode::from(1)
            }
            Err(crate::compare::CompareError::Input(e)) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            Err(crate::compare::CompareError::Other(e)) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
        Command::AnalyzeTrace(args) => match crate::trace_tools::analyze_trace(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        // As AIPerf: 1 when the file fails validation, 2 for a bad command line.
        Command::Validate(args) => match crate::trace_tools::validate(&args) {
            Ok(crate::trace_tools::Validated::Passed) => ExitCode::SUCCESS,
            Ok(crate::trace_tools::Validated::Failed) => ExitCode::from(1),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::MockServer(args) => match crate::mock::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                let code = match e {
                    crate::mock::MockError::Input(_) => 2,
                    crate::mock::MockError::Other(_) => 1,
                };
                ExitCode::from(code)
            }
        },
    }
}

/// `aiperf plot`: the charts written, warnings on stderr; bad input exits 2.
fn plot_exit(args: &crate::cli::plot::PlotArgs) -> ExitCode {
    let result = crate::plot::Options::from_args(args)
        .and_then(|opts| crate::plot::run(&opts, crate::report::write_runs_page));
    match result {
        Ok(w) => {
            for line in &w.warnings {
                eprintln!("warning: {line}");
            }
            if args.verbose {
                for f in &w.files {
                    println!("{}", f.display());
                }
            }
            println!(
                "Wrote {} charts (PNG and SVG) from {} run(s) to {}",
                w.files.len() / 2,
                w.runs,
                w.output.display()
            );
            if let Some(page) = &w.page {
                println!("Runs compared in {}", page.display());
            }
            if args.dashboard
                && let Err(e) = crate::plot::dashboard::serve(&w, &args.host, args.port)
            {
                eprintln!("error: {e:#}");
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// A shard (of a Kubernetes Job) that ended without results says why in its artifact
/// directory, where the merge waiting for it looks (`aiperf merge --wait-for-shards`).
fn mark_failed_shard(args: &crate::cli::ProfileArgs, code: u8, line: &str) {
    let (Some(_), Some(dir)) = (args.shard.shard_count, &args.artifact_dir) else {
        return;
    };
    let reason = line.strip_prefix("error: ").unwrap_or(line);
    if let Err(e) = crate::export::write_shard_failed(dir, code, reason) {
        eprintln!(
            "warning: cannot mark this shard failed in {}: {e}",
            dir.display()
        );
    }
}

/// Every way a profile run ends: its exit code and the line for stderr (none on success).
fn profile_exit(result: Result<Outcome, ProfileError>) -> (u8, Option<String>) {
    let (code, line) = match &result {
        Ok(Outcome::Success) => return (0, None),
        Ok(Outcome::AllFailed) => (
            1,
            "error: every request failed; see the Error Summary above".to_string(),
        ),
        Ok(Outcome::ThresholdExceeded) => (
            1,
            "error: stopped early: failed requests exceeded --failed-request-threshold; see the Error Summary above".to_string(),
        ),
        Ok(Outcome::ServerUnreachable) => (
            1,
            "error: stopped early: the server refused every connection; check --url and that the server is running".to_string(),
        ),
        Ok(Outcome::ServerLost) => (
            1,
            "error: stopped early: the server stopped answering (connections refused); the results written are partial".to_string(),
        ),
        Ok(Outcome::WriteFailed) => (
            1,
            "error: stopped early: profile_export.jsonl could not be written (see above); the console table counts every request".to_string(),
        ),
        Ok(Outcome::TooFewRuns) => (
            1,
            "error: only one run succeeded; the failed runs are listed above and no aggregate was written".to_string(),
        ),
        Ok(Outcome::Interrupted) => (
            130,
            "Interrupted: the results written are partial".to_string(),
        ),
        Ok(Outcome::Terminated) => (
            143,
            "Terminated: the results written are partial".to_string(),
        ),
        // Bad command line or input: nothing was sent.
        Err(ProfileError::Config(e)) => (2, format!("error: {e}")),
        Err(ProfileError::Dataset(BuildError::Input(e))) => (2, format!("error: {e}")),
        Err(ProfileError::Endpoint(e)) => (2, format!("error: {e}")),
        Err(ProfileError::Dataset(BuildError::Other(e))) => (1, format!("error: {e:#}")),
        Err(ProfileError::Other(e)) => (1, format!("error: {e:#}")),
    };
    (code, Some(line))
}

/// clap reads `--concurrency -1` as an unknown flag `-1` and `--concurrency=-1` as an
/// unparsable number; both get one line naming the flag, the value and what is accepted.
fn negative_number_error(e: &clap::Error, argv: &[String]) -> Option<String> {
    let value = match e.kind() {
        ErrorKind::UnknownArgument => e.get(ContextKind::InvalidArg),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => e.get(ContextKind::InvalidValue),
        _ => None,
    };
    let Some(ContextValue::String(value)) = value else {
        return None;
    };
    if !value.starts_with('-') || value.parse::<f64>().is_err() {
        return None;
    }
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) if arg != value => {
            arg.split_whitespace().next().unwrap_or(arg).to_string()
        }
        _ => {
            let i = argv.iter().position(|a| a == value)?;
            argv.get(i.checked_sub(1)?)?.clone()
        }
    };
    Some(format!(
        "error: {flag}: {value} is not allowed; negative values are not accepted, give a number >= 0"
    ))
}
