//! The `aiperf` binary; everything it does is `aiperf::run`.

fn main() -> std::process::ExitCode {
    aiperf::run(std::env::args().collect())
}
