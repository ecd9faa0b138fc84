//! One monotonic clock per run, anchored once to the wall clock.
//!
//! Intervals are measured with `Instant` (monotonic); the single wall-clock anchor taken at
//! start converts them to nanoseconds since the Unix epoch for the exports.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Wall-clock reads tried when anchoring; the tightest bracket wins.
const ANCHOR_TRIES: usize = 8;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    anchor: Instant,
    anchor_wall_ns: u64,
}

impl Clock {
    /// Anchors to the wall clock. The wall reading is bracketed by two monotonic reads and the
    /// tightest of a few tries is kept, so a preemption between the two reads (several ms on a
    /// loaded machine) cannot skew every exported timestamp; the mock server anchors the same
    /// way, so stamps from the two processes compare to well under a millisecond.
    pub fn new() -> Self {
        let mut best: Option<(Duration, Instant, u64)> = None;
        for _ in 0..ANCHOR_TRIES {
            let before = Instant::now();
            let wall_ns = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            let after = Instant::now();
            let width = after - before;
            if best.is_none_or(|(w, _, _)| width < w) {
                // The wall reading happened somewhere in [before, after]: take the middle.
                best = Some((width, before + width / 2, wall_ns));
            }
        }
        let (_, anchor, anchor_wall_ns) = best.expect("at least one try");
        Clock {
            anchor,
            anchor_wall_ns,
        }
    }

    /// Monotonic nanoseconds since the anchor.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.anchor.elapsed().as_nanos() as u64
    }

    /// Monotonic nanoseconds since the anchor for an `Instant` taken earlier.
    #[inline]
    pub fn ns_of(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.anchor).as_nanos() as u64
    }

    /// Converts a monotonic offset into nanoseconds since the Unix epoch.
    #[inline]
    pub fn wall_ns(&self, perf_ns: u64) -> u64 {
        self.anchor_wall_ns + perf_ns
    }

    /// A clock whose run-clock 0 is the wall-clock `anchor_wall_ns` (golden tests).
    #[cfg(test)]
    pub fn fixed(anchor_wall_ns: u64) -> Self {
        Clock {
            anchor: Instant::now(),
            anchor_wall_ns,
        }
    }

    /// A clock whose run-clock 0 is `anchor` (tests on tokio's paused clock) and the epoch.
    #[cfg(test)]
    pub fn anchored_at(anchor: Instant) -> Self {
        Clock {
            anchor,
            anchor_wall_ns: 0,
        }
    }

    #[cfg(test)]
    pub fn anchor(&self) -> Instant {
        self.anchor
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Formats nanoseconds since the epoch as ISO-8601 UTC with microseconds
/// (`2026-12-02T11:52:36.123456+00:00`), as AIPerf's `start_time`/`end_time`.
pub fn iso8601_utc(wall_ns: u64) -> String {
    let secs = (wall_ns / 1_000_000_000) as i64;
    let micros = (wall_ns % 1_000_000_000) / 1_000;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}+00:00",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_known_instants() {
        assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00.000000+00:00");
        // 2024-02-29T12:34:56.789012Z
        assert_eq!(
            iso8601_utc(1_709_210_096_789_012_000),
            "2024-02-29T12:34:56.789012+00:00"
        );
    }

    #[test]
    fn monotonic_offsets_grow() {
        let c = Clock::new();
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(b >= a);
        assert!(c.wall_ns(b) > 1_600_000_000_000_000_000);
    }
}
