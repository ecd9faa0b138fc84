//! How requests are timed and when a phase stops, as `config` checked them.

use std::time::Duration;

use super::schedule::ArrivalPattern;
use super::{Cancellation, ScheduleWindow};

/// How requests are timed and when a phase stops.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadOptions {
    /// `--request-rate` and its gaps; `None` is the closed loop.
    pub rate: Option<(f64, ArrivalPattern)>,
    /// `--concurrency` was given (with a rate or a schedule it is a cap; else unlimited).
    pub concurrency_given: bool,
    /// `--fixed-schedule` was given (a timestamped input file implies it too).
    pub fixed_schedule: bool,
    pub schedule_window: ScheduleWindow,
    /// `--request-count` as given.
    pub request_count_given: Option<u64>,
    /// Profiling stops issuing after this long.
    pub duration: Option<Duration>,
    /// In-flight requests after the duration; `None` waits for all.
    pub grace: Option<Duration>,
    pub warmup_duration: Option<Duration>,
    pub cancellation: Option<Cancellation>,
    /// `--conversation-num`: profiling stops after this many conversations.
    pub sessions: Option<u64>,
    /// Warmup settings that differ from profiling.
    pub warmup: WarmupOptions,
    /// `--ignore-trace-delays`: the input's timestamps and turn delays are dropped.
    pub ignore_trace_delays: bool,
    /// `--concurrency-ramp-duration`, `--prefill-concurrency-ramp-duration`,
    /// `--request-rate-ramp-duration` and `--request-rate-series` (profiling).
    pub ramps: super::Ramps,
    /// `--inter-turn-delay-cap-seconds`: the input file's turn delays are cut to this.
    pub turn_delay_cap: Option<Duration>,
    /// `--prefill-concurrency`: most requests waiting for their first token.
    pub prefill_concurrency: Option<u64>,
    /// `--user-centric-rate` and `--num-users`.
    pub user_centric: Option<UserCentric>,
}

/// `--user-centric-rate QPS --num-users U`: U users, each sending a turn every U/QPS s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UserCentric {
    pub qps: f64,
    pub users: u64,
}

impl UserCentric {
    /// The least time between two turns of one user.
    pub fn turn_gap(&self) -> Duration {
        Duration::from_secs_f64(self.users as f64 / self.qps)
    }
}

/// `--num-warmup-sessions`, `--warmup-grace-period` and the warmup's own load settings
/// (each falls back to the profiling value).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WarmupOptions {
    pub sessions: Option<u64>,
    /// After `--warmup-duration`: how long warmup requests in flight may finish; `None`
    /// waits for all.
    pub grace: Option<Duration>,
    pub concurrency: Option<u64>,
    /// The warmup's request rate and arrival pattern.
    pub rate: Option<(f64, ArrivalPattern)>,
    /// `--warmup-prefill-concurrency`.
    pub prefill_concurrency: Option<u64>,
    /// The warmup's ramps: each `--warmup-*-ramp-duration`, else the profiling one (no
    /// rate series).
    pub ramps: super::Ramps,
    /// A `--warmup-*-ramp-duration` was given.
    pub ramps_given: bool,
}

impl LoadOptions {
    /// The profiling phase's request limit: none when only the duration limits it.
    pub fn count_limit(&self, request_count: u64) -> Option<u64> {
        match (self.request_count_given, self.duration, self.sessions) {
            (Some(n), _, _) => Some(n),
            (None, None, None) => Some(request_count),
            (None, _, _) => None,
        }
    }
}
