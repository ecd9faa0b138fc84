//! The open loop: arrivals at a rate or on a fixed schedule, whatever the replies do; a cap
//! on requests in flight; the rate ramp; a shared start time.

use std::sync::atomic::Ordering;

use super::fake::{Fake, reply_after};
use super::*;
use crate::load::ramp::{RateSeries, ramped_offset_ns};
use crate::load::schedule::{ArrivalPattern, Arrivals};

fn rate(per_s: f64, pattern: ArrivalPattern) -> PhaseSpec {
    spec(Pacing::Rate {
        rate: per_s,
        pattern,
    })
}

/// Scheduled send times of the records, ns on the run clock, in send order.
fn scheduled_ns(out: &Outcome) -> Vec<u64> {
    (0..out.seen.calls.len())
        .map(|n| {
            out.record_of(n)
                .input
                .timing
                .scheduled_perf_ns
                .expect("scheduled")
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_constant_rate_sends_on_its_absolute_schedule() {
    let spec = PhaseSpec {
        count: Some(5),
        ..rate(10.0, ArrivalPattern::Constant)
    };
    let out = run(Fake::new(reply_after(ms(1))), single_plan(4, 5), spec).await;
    assert_eq!(out.send_ms(), [1, 101, 201, 301, 401]);
    let scheduled: Vec<u64> = scheduled_ns(&out).into_iter().map(ns_ms).collect();
    assert_eq!(scheduled, [1, 101, 201, 301, 401]);
    let pacing = out.result.pacing.expect("a rate reports its pacing");
    assert_eq!(pacing.sends, 5);
    assert_eq!(pacing.target_rate, Some(10.0));
    assert_eq!(pacing.send_lag_max_ns, 0.0);
    assert_eq!(pacing.slot_waits, 0);
    assert!((pacing.achieved_rate.unwrap() - 10.0).abs() < 1e-9);
}

#[tokio::test(start_paused = true)]
async fn slow_replies_do_not_hold_back_the_arrivals() {
    let spec = PhaseSpec {
        count: Some(5),
        ..rate(10.0, ArrivalPattern::Constant)
    };
    let out = run(Fake::new(reply_after(ms(1000))), single_plan(4, 5), spec).await;
    assert_eq!(out.send_ms(), [1, 101, 201, 301, 401]);
    assert_eq!(out.seen.max_in_flight, 5);
    assert_eq!(whole_ms(out.ended), 1401);
}

#[tokio::test(start_paused = true)]
async fn a_cap_delays_sends_to_a_free_slot_and_records_the_wait() {
    // Due at 1, 11, 21, 31; one slot; each reply takes 25 ms.
    let spec = PhaseSpec {
        count: Some(4),
        concurrency: Some(1),
        ..rate(100.0, ArrivalPattern::Constant)
    };
    let out = run(Fake::new(reply_after(ms(25))), single_plan(4, 4), spec).await;
    assert_eq!(out.send_ms(), [1, 26, 51, 76]);
    assert_eq!(out.seen.max_in_flight, 1);
    let waits: Vec<u64> = out
        .seen
        .calls
        .iter()
        .map(|c| ns_ms(c.timing.slot_wait_ns))
        .collect();
    assert_eq!(waits, [0, 15, 30, 45]);
    let scheduled: Vec<u64> = scheduled_ns(&out).into_iter().map(ns_ms).collect();
    assert_eq!(scheduled, [1, 11, 21, 31]);
    let pacing = out.result.pacing.unwrap();
    assert_eq!(pacing.slot_waits, 3);
    assert_eq!(pacing.slot_wait_max_ns, 45_000_000);
    // The lag was the cap's, not the client's.
    assert_eq!(pacing.late_share, 0.0);
}

#[tokio::test(start_paused = true)]
async fn a_duration_ends_the_schedule_at_its_end() {
    let spec = PhaseSpec {
        duration: Some(ms(1000)),
        ..rate(10.0, ArrivalPattern::Constant)
    };
    let out = run(Fake::new(reply_after(ms(1))), single_plan(4, 10), spec).await;
    // Due at 1, 101, ..., 901; the arrival due at 1001 is past the end.
    assert_eq!(
        out.send_ms(),
        (0..10).map(|k| 1 + 100 * k).collect::<Vec<_>>()
    );
    assert_eq!(out.result.sent, 10);
    assert_eq!(whole_ms(out.ended), 902);
}

#[tokio::test(start_paused = true)]
async fn poisson_sends_follow_the_drawn_offsets() {
    let spec = PhaseSpec {
        count: Some(30),
        ..rate(50.0, ArrivalPattern::Poisson)
    };
    let out = run(Fake::new(reply_after(ms(5))), single_plan(4, 30), spec).await;
    let lead = 1_000_000;
    let want: Vec<u64> = Arrivals::new(ArrivalPattern::Poisson, 50.0, SEED)
        .take(30)
        .map(|o| lead + o)
        .collect();
    assert_eq!(scheduled_ns(&out), want);
    // Each send at its arrival, within the paused clock's 1 ms tick, in schedule order.
    for (call, due) in out.seen.calls.iter().zip(&want) {
        let at = call.at.as_nanos() as u64;
        assert!(at >= *due && at < due + 1_000_000, "due {due}, sent {at}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_rate_ramp_stretches_the_first_arrivals() {
    let ramp = ms(2000);
    let spec = PhaseSpec {
        count: Some(15),
        ramps: Ramps {
            rate: Some(ramp),
            ..Ramps::default()
        },
        ..rate(10.0, ArrivalPattern::Constant)
    };
    let out = run(Fake::new(reply_after(ms(1))), single_plan(4, 15), spec).await;
    let want: Vec<u64> = (0..15)
        .map(|k| 1_000_000 + ramped_offset_ns(k * 100_000_000, ramp))
        .collect();
    assert_eq!(scheduled_ns(&out), want);
    let gaps: Vec<u64> = want.windows(2).map(|w| w[1] - w[0]).collect();
    // The first gap is over five times the target's; once the ramp is over, the target's.
    assert!(gaps[0] > 500_000_000, "{gaps:?}");
    assert!(gaps.windows(2).all(|g| g[1] <= g[0] + 1), "{gaps:?}");
    assert!(
        gaps[11..].iter().all(|&g| g.abs_diff(100_000_000) <= 1),
        "{gaps:?}"
    );
    for (call, due) in out.seen.calls.iter().zip(&want) {
        let at = call.at.as_nanos() as u64;
        assert!(at >= *due && at < due + 1_000_000, "due {due}, sent {at}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_fixed_schedule_sends_each_entry_at_its_offset() {
    let offsets: Vec<u64> = [0, 50, 50, 400].iter().map(|m| m * 1_000_000).collect();
    let spec = PhaseSpec {
        count: Some(4),
        ..spec(Pacing::Fixed {
            offsets_ns: offsets.into(),
        })
    };
    let out = run(Fake::new(reply_after(ms(500))), single_plan(4, 4), spec).await;
    assert_eq!(out.send_ms(), [1, 51, 51, 401]);
    assert_eq!(out.result.sent, 4);
    assert_eq!(out.seen.max_in_flight, 4);
}

#[tokio::test(start_paused = true)]
async fn a_start_time_delays_the_phase_and_the_offsets_count_from_it() {
    let fake = Fake::new(reply_after(ms(10)));
    let start = fake.t0() + ms(500);
    let spec = PhaseSpec {
        count: Some(2),
        start: Some(start),
        ..spec(Pacing::Fixed {
            offsets_ns: vec![0, 100_000_000].into(),
        })
    };
    let out = run(fake, single_plan(2, 2), spec).await;
    // No lead: the shared start is the schedule's zero.
    assert_eq!(out.send_ms(), [500, 600]);
}

#[tokio::test(start_paused = true)]
async fn stopping_ends_the_schedule_and_lets_requests_in_flight_finish() {
    let ctx = context(Fake::new(reply_after(ms(80))), single_plan(4, 100));
    let stopper = ctx.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ms(250)).await;
        stopper.stop.store(true, Ordering::SeqCst);
    });
    let spec = PhaseSpec {
        count: Some(100),
        ..rate(10.0, ArrivalPattern::Constant)
    };
    let out = run_on(&ctx, spec).await;
    assert_eq!(out.send_ms(), [1, 101, 201]);
    assert_eq!(out.result.sent, 3);
    assert!(out.records.iter().all(|r| r.error.is_none()));
    assert!(out.seen.cancels.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_rate_series_moves_the_arrivals_to_its_rates() {
    // 10/s for the first second, then 40/s: gaps of 100 ms, then of 25 ms.
    let series = RateSeries {
        points: vec![(1.0, 10.0), (1.000_001, 40.0)],
    };
    let spec = PhaseSpec {
        count: Some(15),
        ramps: Ramps {
            series: Some(std::sync::Arc::new(series)),
            ..Ramps::default()
        },
        ..rate(10.0, ArrivalPattern::Constant)
    };
    let out = run(Fake::new(reply_after(ms(1))), single_plan(4, 15), spec).await;
    let sends = out.send_ms();
    let gaps: Vec<u64> = sends.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps[..10].iter().all(|&g| g == 100), "{gaps:?}");
    assert!(gaps[10..].iter().all(|&g| g.abs_diff(25) <= 1), "{gaps:?}");
    // No one target rate to report against.
    assert_eq!(out.result.pacing.unwrap().target_rate, None);
}
