//! The `aiperf` binary: parse the command line, run the subcommand, map the result to an
//! exit code (0 ok, 1 run failed, 2 bad command line or input, 130 interrupted).

use std::process::ExitCode;

use aiperf::cli::{Cli, Command};
use aiperf::profile::{Outcome, ProfileError};
use clap::error::{ContextKind, ContextValue, ErrorKind};

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let cli = match Cli::parse_with_sources(&argv) {
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
        Command::Profile(args) => match aiperf::profile::run(&args, &argv) {
            Ok(Outcome::Success) => ExitCode::SUCCESS,
            Ok(Outcome::AllFailed) => {
                eprintln!("error: every request failed; see the Error Summary above");
                ExitCode::from(1)
            }
            Ok(Outcome::ThresholdExceeded) => {
                eprintln!(
                    "error: stopped early: failed requests exceeded --failed-request-threshold; see the Error Summary above"
                );
                ExitCode::from(1)
            }
            Ok(Outcome::ServerUnreachable) => {
                eprintln!(
                    "error: stopped early: the server refused every connection; check --url and that the server is running"
                );
                ExitCode::from(1)
            }
            Ok(Outcome::Interrupted) => {
                eprintln!("Interrupted: the results written are partial");
                ExitCode::from(130)
            }
            Err(ProfileError::Config(e)) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            Err(ProfileError::Other(e)) => {
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        },
        Command::MockServer(args) => {
            if let Err(e) = args.fault_rates() {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
            match aiperf::mock::run(args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
    }
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
