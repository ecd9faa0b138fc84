//! AIPerf's service-mesh knobs. AIPerf runs as many Python processes talking over ZMQ; this
//! build is one native process, so these flags have nothing to configure. They are accepted
//! so that AIPerf command lines run unchanged, and each one given is named in one info line.

use clap::Args;

const HEADING: &str = "Service (accepted, no effect in one process)";

#[derive(Debug, Clone, Default, Args)]
pub struct ServiceArgs {
    /// AIPerf's ZMQ TCP host between its services. No effect: one process, no service bus.
    #[arg(long, value_name = "HOST", help_heading = HEADING)]
    pub zmq_host: Option<String>,

    /// AIPerf's directory for ZMQ IPC sockets. No effect: one process, no service bus.
    #[arg(long, value_name = "DIR", help_heading = HEADING)]
    pub zmq_ipc_path: Option<String>,

    /// AIPerf's ZMQ IPC + TCP backend. No effect: one process, no service bus.
    #[arg(long, help_heading = HEADING)]
    pub zmq_dual_bind: bool,

    /// Threads that send the requests (AIPerf: its worker processes). Each runs its share
    /// of the requests on its own single-threaded runtime with its own connections. Default:
    /// one per core (`TOKIO_WORKER_THREADS` if set). Fewer leave cores to a server on the
    /// same machine.
    #[arg(long = "workers-max", visible_aliases = ["max-workers"], value_name = "N",
          value_parser = threads, help_heading = "Workers")]
    pub workers_max: Option<u64>,

    /// AIPerf's number of metric-computing services. No effect: one collector thread
    /// computes every record's metrics.
    #[arg(long = "record-processor-service-count", visible_aliases = ["record-processors"], value_name = "N", help_heading = HEADING)]
    pub record_processor_service_count: Option<u64>,

    /// AIPerf's HTTP/WebSocket API port. No effect: this build serves no API.
    #[arg(long, value_name = "PORT", help_heading = HEADING)]
    pub api_port: Option<u16>,

    /// AIPerf's HTTP/WebSocket API host. No effect: this build serves no API.
    #[arg(long, value_name = "HOST", help_heading = HEADING)]
    pub api_host: Option<String>,

    /// AIPerf's interval of realtime stats messages for its dashboard. No effect: this
    /// build publishes no realtime stats.
    #[arg(long, value_name = "SECONDS", help_heading = HEADING)]
    pub stats_interval: Option<f64>,
}

/// A thread count: a whole number, at least 1.
fn threads(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{s:?} is not a thread count: give a whole number of at least 1"
        )),
    }
}

impl ServiceArgs {
    /// One line for each of these flags that was given: its name and why it does nothing.
    pub fn ignored(&self) -> Vec<String> {
        let one_process = "this build runs as one process without a service bus";
        let given = [
            ("--zmq-host", self.zmq_host.is_some(), one_process),
            ("--zmq-ipc-path", self.zmq_ipc_path.is_some(), one_process),
            ("--zmq-dual-bind", self.zmq_dual_bind, one_process),
            (
                "--record-processor-service-count",
                self.record_processor_service_count.is_some(),
                "one collector thread computes every record's metrics",
            ),
            (
                "--api-port",
                self.api_port.is_some(),
                "this build serves no API",
            ),
            (
                "--api-host",
                self.api_host.is_some(),
                "this build serves no API",
            ),
            (
                "--stats-interval",
                self.stats_interval.is_some(),
                "this build publishes no realtime stats",
            ),
        ];
        given
            .into_iter()
            .filter(|(_, on, _)| *on)
            .map(|(flag, _, why)| format!("Ignoring {flag}: {why}"))
            .collect()
    }
}
