//! The `aiperf` binary: parse the command line, run the subcommand, map the result to an
//! exit code (0 ok, 1 run failed, 2 bad command line or input, 130 interrupted).

use std::process::ExitCode;

use aiperf::cli::{Cli, Command};
use aiperf::profile::{Outcome, ProfileError};
use clap::Parser;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let cli = Cli::parse();
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
        Command::MockServer(args) => match aiperf::mock::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        },
    }
}
