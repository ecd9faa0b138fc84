//! `--concurrency-ramp-duration` and `--request-rate-ramp-duration`: load that starts low
//! and reaches its target at the end of the ramp, then stays there.
//!
//! Concurrency grows in whole steps: 1 at the start, one more at each of N-1 evenly spaced
//! times, N exactly at the end. The rate grows linearly from target x 0.1 s / ramp (so the
//! first arrivals are spread as at one tenth of a second's worth of load) to the target.

use std::time::Duration;

/// The ramps of a phase.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ramps {
    pub concurrency: Option<Duration>,
    pub rate: Option<Duration>,
}

/// When concurrency slot `k` (0-based) of `n` opens, from the phase start.
pub fn slot_opens_at(k: u64, n: u64, ramp: Option<Duration>) -> Duration {
    match ramp {
        Some(d) if n > 1 => d.mul_f64(k as f64 / (n - 1) as f64),
        _ => Duration::ZERO,
    }
}

/// Maps an arrival offset drawn at the target rate onto the ramped rate: the arrival that
/// would come after `s` seconds of full-rate load comes when the ramped load has brought
/// as many arrivals. Offsets and the result are in ns.
pub fn ramped_offset_ns(offset_ns: u64, ramp: Duration) -> u64 {
    let d = ramp.as_secs_f64();
    let s = offset_ns as f64 / 1e9;
    // The starting rate as a share of the target.
    let q = (0.1 / d).min(1.0);
    if d <= 0.0 || q >= 1.0 {
        return offset_ns;
    }
    // Arrivals by time t (in seconds of full-rate load): q t + (1 - q) t^2 / (2d) for t < d.
    let during = (1.0 + q) * d / 2.0;
    let t = if s <= during {
        let a = (1.0 - q) / (2.0 * d);
        (-q + (q * q + 4.0 * a * s).sqrt()) / (2.0 * a)
    } else {
        d + (s - during)
    };
    (t * 1e9).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_steps_are_even_and_end_at_the_ramp() {
        let d = Some(Duration::from_secs(3));
        let at: Vec<f64> = (0..4)
            .map(|k| slot_opens_at(k, 4, d).as_secs_f64())
            .collect();
        assert_eq!(at, [0.0, 1.0, 2.0, 3.0]);
        assert_eq!(slot_opens_at(0, 1, d), Duration::ZERO);
        assert_eq!(slot_opens_at(3, 4, None), Duration::ZERO);
    }

    #[test]
    fn the_rate_grows_to_the_target_and_stays() {
        let ramp = Duration::from_secs(10);
        // Full rate after the ramp: one second of full-rate arrivals takes one second.
        let a = ramped_offset_ns(20_000_000_000, ramp);
        let b = ramped_offset_ns(21_000_000_000, ramp);
        assert!((b - a) as f64 / 1e9 - 1.0 < 1e-6);
        // Early arrivals are stretched: the first full-rate second takes far longer.
        let first = ramped_offset_ns(1_000_000_000, ramp) as f64 / 1e9;
        assert!(first > 3.0, "{first}");
        // Monotonic, and the ramp ends where its arrivals end.
        let mut last = 0;
        for i in 0..200 {
            let t = ramped_offset_ns(i * 100_000_000, ramp);
            assert!(t >= last);
            last = t;
        }
        let end = ramped_offset_ns((1.01 * 5.0 * 1e9) as u64, ramp) as f64 / 1e9;
        assert!((end - 10.0).abs() < 1e-6, "{end}");
        // A ramp shorter than the update step is no ramp.
        assert_eq!(ramped_offset_ns(5, Duration::from_millis(50)), 5);
    }
}
