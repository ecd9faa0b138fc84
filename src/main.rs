use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = aiperf::cli::Cli::parse();
    let result = match cli.command {
        aiperf::cli::Command::MockServer(args) => aiperf::mock::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
