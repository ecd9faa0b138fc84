//! How well a phase kept its schedule: achieved rate against the target, and how late the
//! sends were. A client that falls behind its schedule measures itself, not the server, so
//! the run says so.

use serde_json::{Value, json};

use crate::metrics::column::Column;
use crate::spill::Spill;

/// A send counts as late when the client itself (not a full concurrency cap) delayed it by
/// more than this.
pub const LATE_NS: i64 = 1_000_000;
/// Above this share of late sends the run warns that the client could not keep up.
pub const LATE_SHARE_WARNING: f64 = 0.01;

/// One scheduled send, in monotonic ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendSample {
    pub scheduled_ns: u64,
    pub actual_ns: u64,
    pub slot_wait_ns: u64,
}

impl SendSample {
    pub fn lag_ns(&self) -> i64 {
        self.actual_ns as i64 - self.scheduled_ns as i64
    }

    /// Lag not explained by waiting for a concurrency slot.
    pub fn client_lag_ns(&self) -> i64 {
        self.lag_ns() - self.slot_wait_ns as i64
    }
}

/// Run-level pacing figures of one phase.
#[derive(Debug, Clone, PartialEq)]
pub struct PacingReport {
    /// Scheduled sends that were made.
    pub sends: u64,
    /// `--request-rate`, when the phase was paced by a rate.
    pub target_rate: Option<f64>,
    /// The rate the drawn schedule itself implies: (n - 1) / (last - first scheduled).
    /// Differs from the target by the randomness of Poisson or gamma gaps.
    pub scheduled_rate: Option<f64>,
    /// (n - 1) / (last - first actual send).
    pub achieved_rate: Option<f64>,
    /// Actual minus scheduled send time, ns, including any wait for a concurrency slot.
    pub send_lag_p50_ns: f64,
    pub send_lag_p99_ns: f64,
    pub send_lag_max_ns: f64,
    /// Sends that had to wait for a concurrency slot, and the longest wait (ns).
    pub slot_waits: u64,
    pub slot_wait_max_ns: u64,
    /// Share of sends the client itself made more than 1 ms late.
    pub late_share: f64,
}

/// A phase's scheduled sends, taken one at a time: the extremes and counts as they come,
/// the lags in a column that spills to a temporary file, so a long paced run holds none
/// of its sends.
#[derive(Debug)]
pub struct SendSamples {
    sends: u64,
    /// Least and largest scheduled and actual send times.
    scheduled: (u64, u64),
    actual: (u64, u64),
    /// Actual minus scheduled, ns.
    lags: Column,
    slot_waits: u64,
    slot_wait_max_ns: u64,
    late: u64,
}

impl Default for SendSamples {
    fn default() -> Self {
        SendSamples {
            sends: 0,
            scheduled: (u64::MAX, 0),
            actual: (u64::MAX, 0),
            lags: Column::new(&Spill::new()),
            slot_waits: 0,
            slot_wait_max_ns: 0,
            late: 0,
        }
    }
}

impl SendSamples {
    pub fn add(&mut self, s: &SendSample) {
        self.sends += 1;
        let widen = |(lo, hi): &mut (u64, u64), t: u64| (*lo, *hi) = ((*lo).min(t), (*hi).max(t));
        widen(&mut self.scheduled, s.scheduled_ns);
        widen(&mut self.actual, s.actual_ns);
        self.lags.push(s.lag_ns() as f64);
        self.slot_waits += u64::from(s.slot_wait_ns > 0);
        self.slot_wait_max_ns = self.slot_wait_max_ns.max(s.slot_wait_ns);
        self.late += u64::from(s.client_lag_ns() > LATE_NS);
    }

    /// The phase's figures; `None` when no send had a schedule (closed loop).
    pub fn report(&self, target_rate: Option<f64>) -> Option<PacingReport> {
        // Percentiles as `stats::percentile_sorted` takes them of the sorted lags.
        let lags = self.lags.stats()?;
        let n = self.sends;
        let rate = |(first, last): (u64, u64)| {
            (n > 1 && last > first).then(|| (n - 1) as f64 / ((last - first) as f64 / 1e9))
        };
        Some(PacingReport {
            sends: n,
            target_rate,
            scheduled_rate: rate(self.scheduled),
            achieved_rate: rate(self.actual),
            send_lag_p50_ns: lags.p50(),
            send_lag_p99_ns: lags.p99(),
            send_lag_max_ns: lags.max,
            slot_waits: self.slot_waits,
            slot_wait_max_ns: self.slot_wait_max_ns,
            late_share: self.late as f64 / n as f64,
        })
    }
}

impl PacingReport {
    /// `None` when no send had a schedule (closed loop).
    pub fn from_samples(samples: &[SendSample], target_rate: Option<f64>) -> Option<Self> {
        let mut all = SendSamples::default();
        for s in samples {
            all.add(s);
        }
        all.report(target_rate)
    }

    /// True when more than 1% of sends were over 1 ms late through the client's own fault.
    pub fn client_fell_behind(&self) -> bool {
        self.late_share > LATE_SHARE_WARNING
    }

    /// The warning shown when the client fell behind its schedule.
    pub fn warning(&self) -> Option<String> {
        self.client_fell_behind().then(|| {
            format!(
                "The client could not keep up with the schedule: {:.1}% of sends were more than 1 ms late \
                 (send lag p99 {:.3} ms, max {:.3} ms). The results describe the client as much as the server.",
                self.late_share * 100.0,
                self.send_lag_p99_ns / 1e6,
                self.send_lag_max_ns / 1e6
            )
        })
    }

    /// The `load_pacing` object of the JSON export (times in ms, rates in requests/sec).
    pub fn to_json(&self) -> Value {
        json!({
            "scheduled_sends": self.sends,
            "target_request_rate": self.target_rate,
            "scheduled_request_rate": self.scheduled_rate,
            "achieved_request_rate": self.achieved_rate,
            "send_lag": {
                "unit": "ms",
                "p50": self.send_lag_p50_ns / 1e6,
                "p99": self.send_lag_p99_ns / 1e6,
                "max": self.send_lag_max_ns / 1e6,
            },
            "slot_wait": {
                "unit": "ms",
                "count": self.slot_waits,
                "max": self.slot_wait_max_ns as f64 / 1e6,
            },
            "late_send_share": self.late_share,
            "client_fell_behind": self.client_fell_behind(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn even(n: u64, gap_ns: u64, lag_ns: u64) -> Vec<SendSample> {
        (0..n)
            .map(|i| SendSample {
                scheduled_ns: 1_000 + i * gap_ns,
                actual_ns: 1_000 + i * gap_ns + lag_ns,
                slot_wait_ns: 0,
            })
            .collect()
    }

    #[test]
    fn rates_and_lags_of_an_even_schedule() {
        let r = PacingReport::from_samples(&even(101, 1_000_000, 30_000), Some(1000.0)).unwrap();
        assert_eq!(r.sends, 101);
        assert!((r.scheduled_rate.unwrap() - 1000.0).abs() < 1e-6);
        assert!((r.achieved_rate.unwrap() - 1000.0).abs() < 1e-6);
        assert_eq!(r.send_lag_p50_ns, 30_000.0);
        assert_eq!(r.send_lag_max_ns, 30_000.0);
        assert_eq!(r.late_share, 0.0);
        assert!(r.warning().is_none());
        let j = r.to_json();
        assert_eq!(j["send_lag"]["p99"], json!(0.03));
        assert_eq!(j["target_request_rate"], json!(1000.0));
    }

    #[test]
    fn late_sends_warn_but_slot_waits_do_not() {
        let mut s = even(100, 1_000_000, 10_000);
        for x in &mut s[..2] {
            x.actual_ns += 5_000_000;
        }
        // 2% late by 5 ms: the client fell behind.
        let r = PacingReport::from_samples(&s, None).unwrap();
        assert!((r.late_share - 0.02).abs() < 1e-12);
        assert!(r.warning().unwrap().contains("2.0% of sends"));
        // The same lateness spent waiting for a slot is the cap working, not the client.
        for x in &mut s[..2] {
            x.slot_wait_ns = 5_000_000;
        }
        let r = PacingReport::from_samples(&s, None).unwrap();
        assert_eq!(r.late_share, 0.0);
        assert_eq!(r.slot_waits, 2);
        assert_eq!(r.slot_wait_max_ns, 5_000_000);
        assert!(r.warning().is_none());
        // One late send in a hundred is within the allowance.
        let mut s = even(100, 1_000_000, 10_000);
        s[5].actual_ns += 2_000_000;
        assert!(
            !PacingReport::from_samples(&s, None)
                .unwrap()
                .client_fell_behind()
        );
    }

    proptest::proptest! {
        /// The figures taken one send at a time are those of every send held, sorted.
        #[test]
        fn streamed_figures_are_the_held_ones(
            raw in proptest::collection::vec((0u64..1 << 40, 0u64..1 << 40, 0u64..3_000_000), 1..400),
        ) {
            let s: Vec<SendSample> = raw
                .iter()
                .map(|&(scheduled_ns, actual_ns, slot_wait_ns)| SendSample { scheduled_ns, actual_ns, slot_wait_ns })
                .collect();
            let got = PacingReport::from_samples(&s, Some(3.0)).unwrap();
            let n = s.len();
            let mut lags: Vec<f64> = s.iter().map(|x| x.lag_ns() as f64).collect();
            lags.sort_by(f64::total_cmp);
            let p = |q| crate::stats::percentile_sorted(&lags, q).to_bits();
            proptest::prop_assert_eq!(got.send_lag_p50_ns.to_bits(), p(50.0));
            proptest::prop_assert_eq!(got.send_lag_p99_ns.to_bits(), p(99.0));
            proptest::prop_assert_eq!(got.send_lag_max_ns.to_bits(), lags[n - 1].to_bits());
            let first = s.iter().map(|x| x.actual_ns).min().unwrap();
            let last = s.iter().map(|x| x.actual_ns).max().unwrap();
            let rate = (n > 1 && last > first).then(|| (n - 1) as f64 / ((last - first) as f64 / 1e9));
            proptest::prop_assert_eq!(got.achieved_rate.map(f64::to_bits), rate.map(f64::to_bits));
            let late = s.iter().filter(|x| x.client_lag_ns() > LATE_NS).count();
            proptest::prop_assert_eq!(got.late_share.to_bits(), (late as f64 / n as f64).to_bits());
            proptest::prop_assert_eq!(got.slot_waits, s.iter().filter(|x| x.slot_wait_ns > 0).count() as u64);
        }
    }

    #[test]
    fn nothing_scheduled_nothing_reported() {
        assert!(PacingReport::from_samples(&[], Some(5.0)).is_none());
        let one = PacingReport::from_samples(&even(1, 0, 7), None).unwrap();
        assert_eq!(one.achieved_rate, None);
        assert_eq!(one.send_lag_p99_ns, 7.0);
    }
}
