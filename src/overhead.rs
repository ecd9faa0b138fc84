//! The client's own cost during a run, so a user can tell whether the numbers describe the
//! server or the client: process CPU time per request, how busy the process and the machine
//! were, and how long a record took from its last chunk's arrival to being complete
//! (metrics computed and its JSONL line written).
//!
//! CPU time comes from `getrusage(RUSAGE_SELF)` (user + system, exited threads included, so it
//! never goes backwards when a short-lived thread ends) with `/proc/self/stat` (clock ticks)
//! as fallback. A background thread samples every `SAMPLE_INTERVAL` to find
//! windows where the process used every core or the machine had no idle CPU left.
//!
//! With `--mock-server` the mock runs in this process, on its own runtime whose threads are
//! named [`MOCK_THREAD_NAME`]. Their CPU time (per thread, from `/proc/self/task`) is taken out
//! of the client's figures and reported on its own, so the client line is about the client.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::stats::Stats;

/// How often the CPU counters are sampled while the run goes on.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// A window counts as saturated when the process used at least this share of all cores.
pub const PROCESS_SATURATED: f64 = 0.90;
/// ... or when the machine as a whole had less than this share of its CPU idle.
pub const MACHINE_IDLE_MIN: f64 = 0.05;
/// The run is flagged when at least this share of its windows was saturated.
pub const SATURATED_SHARE_WARN: f64 = 0.25;
/// Records completed later than this after their last chunk mean the collector fell behind.
pub const RECORD_LAG_WARN_NS: f64 = 50e6;

/// The name of the in-process mock server's threads (at most 15 bytes: the kernel's limit).
pub const MOCK_THREAD_NAME: &str = "mock-server";

/// CPU time of this process's live threads named `name`, in nanoseconds: from each thread's
/// `schedstat` (ns) or, without it, its `stat` (clock ticks).
pub fn threads_cpu_ns(name: &str) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        // A thread may end between the listing and the reads: it is then skipped.
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if comm.trim_end() != name {
            continue;
        }
        let ns = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse().ok())
            .or_else(|| {
                let stat = std::fs::read_to_string(path.join("stat")).ok()?;
                parse_stat_cpu_ticks(&stat).map(|ticks| ticks * 10_000_000)
            });
        total += ns.unwrap_or(0);
    }
    Some(total)
}

/// CPU time (user + system) of this process so far, in nanoseconds.
pub fn process_cpu_ns() -> Option<u64> {
    rusage_cpu_ns().or_else(stat_cpu_ns)
}

/// The CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`); zero where the
/// clock is missing. Live views log their own thread's share with it.
pub fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    match ok {
        true => std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
        false => std::time::Duration::ZERO,
    }
}

/// User + system CPU time of the whole process, from `getrusage(RUSAGE_SELF)`.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn rusage_cpu_ns() -> Option<u64> {
    // `struct rusage` on 64-bit Linux: ru_utime and ru_stime (each seconds + microseconds as
    // 64-bit longs) followed by 14 longs we do not read.
    #[repr(C)]
    struct RUsage([i64; 18]);
    unsafe extern "C" {
        fn getrusage(who: std::ffi::c_int, usage: *mut RUsage) -> std::ffi::c_int;
    }
    const RUSAGE_SELF: std::ffi::c_int = 0;
    let mut usage = RUsage([0; 18]);
    // SAFETY: `usage` is a writable buffer of the size and layout the kernel fills.
    if unsafe { getrusage(RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let [user_s, user_us, sys_s, sys_us, ..] = usage.0;
    let micros = (user_s + sys_s) * 1_000_000 + user_us + sys_us;
    u64::try_from(micros).ok().map(|us| us * 1_000)
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn rusage_cpu_ns() -> Option<u64> {
    None
}

/// utime + stime from `/proc/self/stat`, assuming the usual 100 ticks per second.
fn stat_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat_cpu_ticks(&text).map(|ticks| ticks * 10_000_000)
}

/// Fields 14 and 15 (utime, stime) of a `/proc/<pid>/stat` line. The command name (field 2)
/// may hold spaces and parentheses, so fields are counted after its last `)`.
fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    let after_name = &text[text.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // After the name: state is field 3, so utime (14) is the 12th here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Machine-wide CPU counters from the `cpu` line of `/proc/stat`: (idle incl. iowait, total).
fn machine_cpu_ticks() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_proc_stat(&text)
}

fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    if values.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let total: u64 = values.iter().take(8).sum();
    let idle = values[3] + values.get(4).copied().unwrap_or(0);
    Some((idle, total))
}

/// One sample of the counters.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    process_ns: u64,
    /// The in-process mock server's threads, when there is one.
    mock_ns: Option<u64>,
    machine: Option<(u64, u64)>,
}

impl Sample {
    fn take(with_mock: bool) -> Option<Sample> {
        Some(Sample {
            at: Instant::now(),
            process_ns: process_cpu_ns()?,
            mock_ns: with_mock
                .then(|| threads_cpu_ns(MOCK_THREAD_NAME))
                .flatten(),
            machine: machine_cpu_ticks(),
        })
    }

    /// CPU time of the client: the process less the in-process mock.
    fn client_ns(&self) -> u64 {
        self.process_ns.saturating_sub(self.mock_ns.unwrap_or(0))
    }
}

/// What the sampling thread found over the windows between samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct WindowTally {
    windows: u64,
    saturated: u64,
    /// Highest CPU use of the whole process in one window, as a share of all cores.
    peak_process: f64,
    /// Highest CPU use of the client alone (the process less an in-process mock).
    peak_client: f64,
    /// Lowest machine idle share in one window.
    min_machine_idle: Option<f64>,
}

impl WindowTally {
    fn add(&mut self, from: &Sample, to: &Sample, cores: f64) {
        let wall = to.at.saturating_duration_since(from.at).as_nanos() as f64;
        if wall <= 0.0 {
            return;
        }
        let process = to.process_ns.saturating_sub(from.process_ns) as f64 / wall / cores;
        let client = to.client_ns().saturating_sub(from.client_ns()) as f64 / wall / cores;
        let idle = match (from.machine, to.machine) {
            (Some((i0, t0)), Some((i1, t1))) if t1 > t0 => {
                Some(i1.saturating_sub(i0) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        self.record(process, client, idle);
    }

    /// A window where the whole process (an in-process mock included: it competes with the
    /// client for the cores) used `process_share` of the cores, the client `client_share`.
    fn record(&mut self, process_share: f64, client_share: f64, machine_idle: Option<f64>) {
        self.windows += 1;
        self.peak_process = self.peak_process.max(process_share);
        self.peak_client = self.peak_client.max(client_share);
        if let Some(idle) = machine_idle {
            self.min_machine_idle = Some(self.min_machine_idle.map_or(idle, |m| m.min(idle)));
        }
        if process_share >= PROCESS_SATURATED || machine_idle.is_some_and(|i| i < MACHINE_IDLE_MIN)
        {
            self.saturated += 1;
        }
    }
}

/// Samples the CPU counters in the background from `start` to `finish`.
pub struct OverheadMonitor {
    first: Option<Sample>,
    cores: f64,
    stop: Arc<AtomicBool>,
    sampler: Option<JoinHandle<WindowTally>>,
}

impl OverheadMonitor {
    /// Takes the first sample and starts the sampling thread. `in_process_mock`: the mock
    /// server runs in this process (threads named [`MOCK_THREAD_NAME`]) and its CPU time is
    /// kept apart. Without `/proc` the report only has what the collector measured.
    pub fn start(in_process_mock: bool) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let first = Sample::take(in_process_mock);
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = first.and_then(|first| {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("overhead".into())
                .spawn(move || {
                    let mut tally = WindowTally::default();
                    let mut last = first;
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::park_timeout(SAMPLE_INTERVAL);
                        if let Some(now) = Sample::take(in_process_mock) {
                            tally.add(&last, &now, cores);
                            last = now;
                        }
                    }
                    tally
                })
                .ok()
        });
        OverheadMonitor {
            first,
            cores,
            stop,
            sampler,
        }
    }

    /// Stops sampling and sums up the run. `requests` is how many requests were sent;
    /// `record_lag` are the collector's last-chunk-to-record-complete times (ns).
    pub fn finish(mut self, requests: u64, record_lag: Option<Stats>) -> OverheadReport {
        let last = Sample::take(self.first.is_some_and(|f| f.mock_ns.is_some()));
        self.stop.store(true, Ordering::Relaxed);
        let tally = match self.sampler.take() {
            Some(handle) => {
                handle.thread().unpark();
                handle.join().unwrap_or_default()
            }
            None => WindowTally::default(),
        };
        let cpu = match (self.first, last) {
            (Some(a), Some(b)) => CpuSpan {
                wall_ns: b.at.saturating_duration_since(a.at).as_nanos() as u64,
                process_ns: Some(b.process_ns.saturating_sub(a.process_ns)),
                mock_ns: a.mock_ns.zip(b.mock_ns).map(|(a, b)| b.saturating_sub(a)),
            },
            _ => CpuSpan::default(),
        };
        OverheadReport::new(self.cores, requests, cpu, tally, record_lag)
    }
}

/// CPU time over the measured span.
#[derive(Debug, Clone, Copy, Default)]
struct CpuSpan {
    wall_ns: u64,
    /// The whole process, every thread.
    process_ns: Option<u64>,
    /// The in-process mock server's threads, when there is one.
    mock_ns: Option<u64>,
}

/// What the in-process mock server (`--mock-server`) used over the same span: not the
/// client's cost, so reported apart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct InProcessMockCpu {
    pub cpu_time_s: f64,
    pub cpu_per_request_us: Option<f64>,
    /// Average CPU use of the mock's threads as a share of all cores.
    pub cpu_utilization: Option<f64>,
    /// The whole process: client and mock together.
    pub process_cpu_time_s: f64,
    /// Highest CPU use of the whole process in one sampling window.
    pub process_peak_cpu_utilization: Option<f64>,
}

/// Percentiles of the last-chunk-to-record-complete time, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LagSummary {
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The client's overhead over one run, as written to the JSON export (`client_overhead`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverheadReport {
    pub cores: u32,
    pub requests: u64,
    /// Wall time between the first and last sample (sending start to collection end).
    pub wall_time_s: f64,
    /// The client's CPU time over the same span (user + system, every thread of the process
    /// but those of an in-process mock server).
    pub cpu_time_s: Option<f64>,
    pub cpu_per_request_us: Option<f64>,
    /// The client's average CPU use as a share of all cores (1.0 = every core busy).
    pub cpu_utilization: Option<f64>,
    /// The client's highest CPU use in one sampling window, as a share of all cores.
    pub peak_cpu_utilization: Option<f64>,
    /// Lowest idle share of the whole machine in one window.
    pub min_machine_idle: Option<f64>,
    /// Share of sampling windows where the process or the machine had no CPU to spare.
    pub saturated_share: Option<f64>,
    /// From a record's last chunk arriving to its record being complete (metrics and
    /// JSONL line written): the collector keeps up when this stays small.
    pub record_complete_lag: Option<LagSummary>,
    /// Why the numbers may be about the client rather than the server; empty when none.
    pub warnings: Vec<String>,
    /// `--mock-server` only: what the mock running in this process used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_process_mock: Option<InProcessMockCpu>,
}

impl OverheadReport {
    fn new(
        cores: f64,
        requests: u64,
        cpu: CpuSpan,
        tally: WindowTally,
        record_lag: Option<Stats>,
    ) -> Self {
        let wall_s = cpu.wall_ns as f64 / 1e9;
        let per_request = |s: f64| (requests > 0).then(|| s * 1e6 / requests as f64);
        let utilization = |s: f64| (wall_s > 0.0).then(|| s / wall_s / cores);
        let cpu_s = cpu
            .process_ns
            .map(|p| p.saturating_sub(cpu.mock_ns.unwrap_or(0)) as f64 / 1e9);
        let has_windows = tally.windows > 0;
        let in_process_mock = cpu.process_ns.zip(cpu.mock_ns).map(|(p, m)| {
            let mock_s = m as f64 / 1e9;
            InProcessMockCpu {
                cpu_time_s: mock_s,
                cpu_per_request_us: per_request(mock_s),
                cpu_utilization: utilization(mock_s),
                process_cpu_time_s: p as f64 / 1e9,
                process_peak_cpu_utilization: has_windows.then_some(tally.peak_process),
            }
        });
        let mut report = OverheadReport {
            cores: cores as u32,
            requests,
            wall_time_s: wall_s,
            cpu_time_s: cpu_s,
            cpu_per_request_us: cpu_s.and_then(per_request),
            cpu_utilization: cpu_s.and_then(utilization),
            peak_cpu_utilization: has_windows.then_some(tally.peak_client),
            min_machine_idle: tally.min_machine_idle,
            saturated_share: has_windows.then(|| tally.saturated as f64 / tally.windows as f64),
            record_complete_lag: record_lag.map(|s| LagSummary {
                avg_ms: s.avg / 1e6,
                p50_ms: s.p50() / 1e6,
                p99_ms: s.p99() / 1e6,
                max_ms: s.max / 1e6,
            }),
            warnings: Vec::new(),
            in_process_mock,
        };
        report.warnings = report.judge();
        report
    }

    /// Warnings for a run whose client may have been the bottleneck.
    fn judge(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(share) = self.saturated_share.filter(|&s| s >= SATURATED_SHARE_WARN) {
            let peak = match self.in_process_mock {
                Some(mock) => mock.process_peak_cpu_utilization.unwrap_or(0.0),
                None => self.peak_cpu_utilization.unwrap_or(0.0),
            };
            let who = if peak >= PROCESS_SATURATED {
                format!(
                    "this process{} used {:.0}% of {} cores",
                    if self.in_process_mock.is_some() {
                        " (client and in-process mock server)"
                    } else {
                        ""
                    },
                    peak * 100.0,
                    self.cores
                )
            } else {
                format!(
                    "the machine had {:.0}% idle CPU left while this process used up to {:.0}% of {} cores; other processes (a server on the same machine?) competed with it",
                    self.min_machine_idle.unwrap_or(0.0) * 100.0,
                    peak * 100.0,
                    self.cores
                )
            };
            out.push(format!(
                "The CPU was saturated during {:.0}% of the run ({who}): the client may have been the bottleneck and its timestamps late",
                share * 100.0
            ));
        }
        if let Some(lag) = self
            .record_complete_lag
            .filter(|l| l.p99_ms * 1e6 >= RECORD_LAG_WARN_NS)
        {
            out.push(format!(
                "Records were completed up to {:.1} ms (p99) after their last chunk: the collector fell behind",
                lag.p99_ms
            ));
        }
        out
    }

    /// One line for the log and console.
    pub fn summary_line(&self) -> String {
        let mut parts = Vec::new();
        if let Some(us) = self.cpu_per_request_us {
            parts.push(format!("{us:.0} us CPU per request"));
        }
        if let Some(u) = self.cpu_utilization {
            parts.push(format!(
                "{:.0}% of {} cores on average (peak {:.0}%)",
                u * 100.0,
                self.cores,
                self.peak_cpu_utilization.unwrap_or(u) * 100.0
            ));
        }
        if let Some(l) = self.record_complete_lag {
            parts.push(format!(
                "last chunk to record complete p50 {:.3} ms, p99 {:.3} ms",
                l.p50_ms, l.p99_ms
            ));
        }
        format!("Client overhead: {}", parts.join("; "))
    }

    /// With `--mock-server`: what the in-process mock used, beside the client's line.
    pub fn mock_line(&self) -> Option<String> {
        let mock = self.in_process_mock?;
        let mut parts = Vec::new();
        if let Some(us) = mock.cpu_per_request_us {
            parts.push(format!("{us:.0} us CPU per request"));
        }
        if let Some(u) = mock.cpu_utilization {
            parts.push(format!(
                "{:.0}% of {} cores on average",
                u * 100.0,
                self.cores
            ));
        }
        parts.push(format!(
            "not counted as client overhead (whole process: {:.3} s CPU)",
            mock.process_cpu_time_s
        ));
        Some(format!("In-process mock server: {}", parts.join("; ")))
    }
}

/// Logs the summary line (and the in-process mock's), and each warning on the console.
pub fn log_report(report: &OverheadReport) {
    tracing::info!("{}", report.summary_line());
    if let Some(line) = report.mock_line() {
        tracing::info!("{line}");
    }
    for w in &report.warnings {
        tracing::warn!("{w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_with_spaces_in_the_name() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime ...
        let line = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0";
        assert_eq!(parse_stat_cpu_ticks(line), Some(325));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn proc_stat_idle_and_total() {
        let text = "cpu  100 5 50 800 20 1 2 3 0 0\ncpu0 50 2 25 400 10 0 1 1 0 0\n";
        // Idle = idle + iowait; total = first eight fields.
        assert_eq!(parse_proc_stat(text), Some((820, 981)));
        assert_eq!(parse_proc_stat("intr 1 2 3"), None);
    }

    #[test]
    fn this_process_cpu_time_grows_with_work() {
        // A loaded machine may give this thread only a sliver of a core, so spin until the
        // process clock moves by 20 ms (a broken clock never does) rather than for wall time.
        let before = process_cpu_ns().expect("Linux has /proc");
        let t = Instant::now();
        let mut x = 0u64;
        let mut after = before;
        while after - before < 20_000_000 && t.elapsed() < Duration::from_secs(30) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            after = process_cpu_ns().unwrap();
        }
        assert!(
            after - before >= 20_000_000,
            "{before} -> {after} in {:?}",
            t.elapsed()
        );
    }

    #[test]
    fn saturated_windows_are_counted() {
        let mut t = WindowTally::default();
        t.record(0.5, 0.5, Some(0.4));
        t.record(0.95, 0.6, Some(0.02)); // process saturated (an in-process mock took 0.35)
        t.record(0.3, 0.3, Some(0.01)); // machine saturated (another process)
        t.record(0.2, 0.2, None);
        assert_eq!(t.windows, 4);
        assert_eq!(t.saturated, 2);
        assert_eq!(t.peak_process, 0.95);
        assert_eq!(t.peak_client, 0.6);
        assert_eq!(t.min_machine_idle, Some(0.01));
    }

    fn lag(p99_ms: f64) -> Stats {
        let mut values: Vec<f64> = (0..100).map(|i| i as f64 * 0.01 * p99_ms * 1e6).collect();
        values[99] = p99_ms * 1e6 * 1.2;
        Stats::compute(&mut values).unwrap()
    }

    #[test]
    fn report_figures_and_no_warning_when_idle() {
        let mut tally = WindowTally::default();
        tally.record(0.2, 0.2, Some(0.6));
        tally.record(0.3, 0.3, Some(0.5));
        let cpu = CpuSpan {
            wall_ns: 2_000_000_000,
            process_ns: Some(500_000_000),
            mock_ns: None,
        };
        let r = OverheadReport::new(2.0, 1000, cpu, tally, Some(lag(0.1)));
        assert_eq!(r.cpu_time_s, Some(0.5));
        assert_eq!(r.cpu_per_request_us, Some(500.0));
        assert_eq!(r.cpu_utilization, Some(0.125));
        assert_eq!(r.peak_cpu_utilization, Some(0.3));
        assert_eq!(r.saturated_share, Some(0.0));
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let line = r.summary_line();
        assert!(line.contains("500 us CPU per request"), "{line}");
        assert!(line.contains("12% of 2 cores"), "{line}"); // 12.5 rounds to even
    }

    #[test]
    fn an_in_process_mock_is_taken_out_of_the_client_figures() {
        let mut tally = WindowTally::default();
        tally.record(0.8, 0.3, Some(0.1));
        let cpu = CpuSpan {
            wall_ns: 1_000_000_000,
            process_ns: Some(800_000_000),
            mock_ns: Some(500_000_000),
        };
        let r = OverheadReport::new(2.0, 100, cpu, tally, None);
        assert_eq!(r.cpu_time_s, Some(0.3));
        assert_eq!(r.cpu_per_request_us, Some(3000.0));
        assert_eq!(r.cpu_utilization, Some(0.15));
        assert_eq!(r.peak_cpu_utilization, Some(0.3));
        let mock = r.in_process_mock.unwrap();
        assert_eq!(mock.cpu_time_s, 0.5);
        assert_eq!(mock.cpu_per_request_us, Some(5000.0));
        assert_eq!(mock.process_cpu_time_s, 0.8);
        assert_eq!(mock.process_peak_cpu_utilization, Some(0.8));
        assert!(
            r.summary_line()
                .starts_with("Client overhead: 3000 us CPU per request; 15% of 2 cores")
        );
        let line = r.mock_line().unwrap();
        assert!(
            line.starts_with("In-process mock server: 5000 us CPU per request; 25% of 2 cores"),
            "{line}"
        );
    }

    #[test]
    fn named_threads_cpu_time() {
        // The spinner runs until told to stop: on a loaded machine it may get only a small
        // share of a core, so the test waits for its CPU time rather than for wall time.
        let stop = Arc::new(AtomicBool::new(false));
        let name = "ovh-test-spin";
        let worker = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    let t = Instant::now();
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) && t.elapsed() < Duration::from_secs(20) {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                })
                .unwrap()
        };
        let t = Instant::now();
        let mut seen = 0;
        while t.elapsed() < Duration::from_secs(20) && seen < 40_000_000 {
            std::thread::sleep(Duration::from_millis(20));
            seen = threads_cpu_ns(name).unwrap();
        }
        let process = process_cpu_ns().unwrap();
        stop.store(true, Ordering::Relaxed);
        worker.join().unwrap();
        assert!(seen >= 40_000_000, "{seen}");
        assert!(seen <= process + 10_000_000, "{seen} > {process}");
        assert_eq!(threads_cpu_ns("no-such-thread"), Some(0));
    }

    #[test]
    fn saturation_and_collector_lag_warn() {
        let mut tally = WindowTally::default();
        for _ in 0..3 {
            tally.record(0.97, 0.97, Some(0.01));
        }
        tally.record(0.4, 0.4, Some(0.5));
        let cpu = CpuSpan {
            wall_ns: 1,
            process_ns: Some(1),
            mock_ns: None,
        };
        let r = OverheadReport::new(2.0, 10, cpu, tally, Some(lag(80.0)));
        assert_eq!(r.saturated_share, Some(0.75));
        assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
        assert!(r.warnings[0].contains("saturated during 75%"));
        assert!(r.warnings[1].contains("collector fell behind"));
    }

    #[test]
    fn monitor_measures_a_busy_span() {
        let m = OverheadMonitor::start(false);
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(250) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let r = m.finish(5, None);
        assert!(r.wall_time_s >= 0.25, "{r:?}");
        let cpu = r.cpu_time_s.unwrap();
        assert!(
            cpu > 0.05 && cpu < r.wall_time_s * r.cores as f64 + 0.05,
            "{r:?}"
        );
        assert!(r.peak_cpu_utilization.unwrap() > 0.0, "{r:?}");
        assert!(r.record_complete_lag.is_none());
    }
}
