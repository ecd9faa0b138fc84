//! How a phase's load moves over time: `--concurrency-ramp-duration`,
//! `--prefill-concurrency-ramp-duration`, `--request-rate-ramp-duration` and
//! `--request-rate-series` (and their warmup twins).
//!
//! Concurrency (of requests or of prefills) grows in whole steps: 1 at the start, one more
//! at each of N-1 evenly spaced times, N exactly at the end. The rate grows linearly from
//! target x 0.1 s / ramp (so the first arrivals are spread as at one tenth of a second's
//! worth of load) to the target; a rate series then takes over at the end of the ramp.
//! Both reshape the rate by moving the arrivals drawn at the target rate: the arrival due
//! after `s` seconds of full-rate load comes when the shaped rate has brought as many.

use std::sync::Arc;
use std::time::Duration;

/// The ramps of a phase, and the rate series that follows its rate ramp.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ramps {
    pub concurrency: Option<Duration>,
    /// `--prefill-concurrency-ramp-duration`.
    pub prefill: Option<Duration>,
    pub rate: Option<Duration>,
    /// `--request-rate-series` (profiling only); the phase's rate is its first point's.
    pub series: Option<Arc<RateSeries>>,
}

impl Ramps {
    /// Where an arrival drawn at `rate` (offset in ns from the phase start) goes once the
    /// rate ramp and the rate series have shaped the rate.
    pub fn arrival_offset_ns(&self, offset_ns: u64, rate: f64) -> u64 {
        let t = match self.rate {
            Some(d) => ramped_offset_ns(offset_ns, d),
            None => offset_ns,
        };
        let Some(series) = &self.series else {
            return t;
        };
        let start = self.rate.map_or(0, |d| d.as_nanos() as u64);
        match t.checked_sub(start) {
            Some(after) if after > 0 => start.saturating_add(series.offset_ns(after, rate)),
            _ => t,
        }
    }
}

/// `--request-rate-series`: request rates at times from the series' start, joined by
/// straight lines; the first rate holds before the first point, the last after the last.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSeries {
    /// (seconds, requests per second): times strictly increasing, rates > 0, two or more.
    pub points: Vec<(f64, f64)>,
}

impl RateSeries {
    /// When the series has brought as many arrivals as `offset_ns` of load at `rate` would
    /// (both in ns from the series' start).
    pub fn offset_ns(&self, offset_ns: u64, rate: f64) -> u64 {
        let p = &self.points;
        let secs = |t: f64| (t * 1e9).round() as u64;
        let mut need = rate * offset_ns as f64 / 1e9;
        let (t0, q0) = p[0];
        if need <= q0 * t0 {
            return secs(need / q0);
        }
        need -= q0 * t0;
        for w in p.windows(2) {
            let ((ta, qa), (tb, qb)) = (w[0], w[1]);
            let len = tb - ta;
            let area = (qa + qb) / 2.0 * len;
            if need <= area {
                // qa x + a x^2 = need, in the form that holds for a = 0 and a < 0 alike.
                let a = (qb - qa) / (2.0 * len);
                let x = 2.0 * need / (qa + (qa * qa + 4.0 * a * need).max(0.0).sqrt());
                return secs(ta + x);
            }
            need -= area;
        }
        let (tl, ql) = p[p.len() - 1];
        secs(tl + need / ql)
    }
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

    fn series(points: &[(f64, f64)]) -> RateSeries {
        RateSeries {
            points: points.to_vec(),
        }
    }

    #[test]
    fn a_series_holds_then_follows_its_lines() {
        let s = series(&[(1.0, 10.0), (3.0, 30.0)]);
        // Drawn at 10/s: the first second holds 10 arrivals at 10/s.
        assert_eq!(s.offset_ns(500_000_000, 10.0), 500_000_000);
        // 1 s to 3 s brings (10 + 30) / 2 * 2 = 40 arrivals; 10 + 40 = 50 by 3 s.
        assert_eq!(s.offset_ns(5_000_000_000, 10.0), 3_000_000_000);
        // After the last point, 30/s: 30 more arrivals take 1 s.
        assert_eq!(s.offset_ns(8_000_000_000, 10.0), 4_000_000_000);
        // A falling line inverts too: 30/s down to 10/s over 2 s brings 40.
        let down = series(&[(0.0, 30.0), (2.0, 10.0)]);
        assert_eq!(down.offset_ns(4_000_000_000, 10.0), 2_000_000_000);
        let mut last = 0;
        for k in 0..500 {
            let t = down.offset_ns(k * 10_000_000, 10.0);
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn a_series_starts_where_the_rate_ramp_ends() {
        let ramps = Ramps {
            rate: Some(Duration::from_secs(10)),
            series: Some(Arc::new(series(&[(0.0, 10.0), (1.0, 20.0)]))),
            ..Ramps::default()
        };
        // During the ramp, the ramp alone.
        let early = 1_000_000_000;
        assert_eq!(
            ramps.arrival_offset_ns(early, 10.0),
            ramped_offset_ns(early, Duration::from_secs(10))
        );
        // The ramp brings 5.05 s of full-rate arrivals; then the series' 10 to 20/s.
        let at_end = (5.05e9) as u64;
        let end = ramps.arrival_offset_ns(at_end, 10.0);
        assert!((end as f64 / 1e9 - 10.0).abs() < 1e-6, "{end}");
        let later = ramps.arrival_offset_ns(at_end + 1_500_000_000, 10.0);
        // 15 arrivals after the ramp: the first second's line brings 15.
        assert!((later as f64 / 1e9 - 11.0).abs() < 1e-6, "{later}");
    }

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
