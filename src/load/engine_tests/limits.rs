//! How a phase ends: its duration and grace period, per-request cancellation
//! (`--request-cancellation-rate` / `-delay`) and a stop (Ctrl-C).

use std::sync::atomic::Ordering;

use super::fake::{Answer, Fake, How, reply_after};
use super::*;
use crate::load::Cancellation;
use crate::load::phase::is_cancelled;
use crate::load::schedule::ArrivalPattern;
use crate::transport::CANCELLED_CODE;

fn closed_for(duration_ms: u64, grace_ms: Option<u64>, concurrency: u64) -> PhaseSpec {
    PhaseSpec {
        duration: Some(ms(duration_ms)),
        grace: grace_ms.map(ms),
        concurrency: Some(concurrency),
        ..spec(Pacing::ClosedLoop)
    }
}

fn cancelling(share: f64, delay_ms: u64) -> Option<Cancellation> {
    Some(Cancellation {
        share,
        delay: ms(delay_ms),
    })
}

#[tokio::test(start_paused = true)]
async fn a_duration_stops_the_closed_loop_issuing_at_its_end() {
    let out = run(
        Fake::new(reply_after(ms(300))),
        single_plan(4, 16),
        closed_for(1000, None, 2),
    )
    .await;
    // Each worker sends at 0, 300, 600 and 900; at 1200 the phase is over.
    assert_eq!(out.send_ms(), [0, 0, 300, 300, 600, 600, 900, 900]);
    assert_eq!(out.result.sent, 8);
    assert_eq!(whole_ms(out.ended), 1200);
    assert!(out.seen.cancels.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_grace_period_cancels_what_is_still_in_flight_at_its_end() {
    let out = run(
        Fake::new(reply_after(ms(700))),
        single_plan(4, 8),
        closed_for(1000, Some(200), 1),
    )
    .await;
    assert_eq!(out.send_ms(), [0, 700]);
    assert_eq!(
        out.seen
            .cancels
            .iter()
            .map(|&c| whole_ms(c))
            .collect::<Vec<_>>(),
        [1200]
    );
    assert_eq!(out.cancelled(), [1]);
    let cut = out.record_of(1);
    assert_eq!(cut.error.as_ref().unwrap().code, Some(CANCELLED_CODE));
    assert_eq!(ns_ms(cut.end_perf_ns), 1200);
    assert_eq!(out.end_of(1).how, How::Cancelled);
    assert_eq!(whole_ms(out.ended), 1200);
}

#[tokio::test(start_paused = true)]
async fn requests_ending_within_the_grace_period_are_not_cancelled() {
    let out = run(
        Fake::new(reply_after(ms(700))),
        single_plan(4, 8),
        closed_for(1000, Some(500), 1),
    )
    .await;
    assert_eq!(out.send_ms(), [0, 700]);
    assert!(out.cancelled().is_empty());
    assert!(out.seen.cancels.is_empty());
    assert_eq!(whole_ms(out.ended), 1400);
}

#[tokio::test(start_paused = true)]
async fn without_a_grace_period_every_request_is_awaited() {
    let out = run(
        Fake::new(reply_after(ms(5000))),
        single_plan(4, 8),
        closed_for(1000, None, 1),
    )
    .await;
    assert_eq!(out.send_ms(), [0]);
    assert_eq!(whole_ms(out.ended), 5000);
    assert!(out.cancelled().is_empty());
}

#[tokio::test(start_paused = true)]
async fn requests_that_never_answer_are_cut_when_a_zero_grace_ends() {
    let spec = PhaseSpec {
        duration: Some(ms(500)),
        grace: Some(Duration::ZERO),
        ..spec(Pacing::Rate {
            rate: 10.0,
            pattern: ArrivalPattern::Constant,
        })
    };
    let out = run(Fake::new(|_| Answer::Never), single_plan(4, 8), spec).await;
    assert_eq!(out.send_ms(), [1, 101, 201, 301, 401]);
    assert_eq!(out.cancelled(), [0, 1, 2, 3, 4]);
    assert!(out.seen.ends.iter().all(|e| whole_ms(e.at) == 500));
    assert_eq!(whole_ms(out.ended), 500);
}

#[tokio::test(start_paused = true)]
async fn sends_still_waiting_when_the_grace_period_ends_are_dropped() {
    // Two workers, one prefill slot: the second waits for a first token that never comes.
    let spec = PhaseSpec {
        prefill_concurrency: Some(1),
        ..closed_for(1000, Some(100), 2)
    };
    let out = run(Fake::new(|_| Answer::Never), single_plan(4, 8), spec).await;
    // The cut at 1100 frees the slot; the waiting send is dropped, not sent late.
    assert_eq!(out.send_ms(), [0]);
    assert_eq!(out.result.sent, 1);
    assert_eq!(out.records.len(), 1);
    assert_eq!(out.cancelled(), [0]);
}

#[tokio::test(start_paused = true)]
async fn cancellation_cuts_the_drawn_share_after_its_delay() {
    let spec = PhaseSpec {
        count: Some(20),
        concurrency: Some(1),
        cancellation: cancelling(0.3, 40),
        ..spec(Pacing::ClosedLoop)
    };
    let out = run(Fake::new(reply_after(ms(100))), single_plan(4, 20), spec).await;
    let drawn: Vec<usize> = (0..20)
        .filter(|&s| is_cancelled(SEED, 0.3, s as u64))
        .collect();
    assert!(!drawn.is_empty() && drawn.len() < 20, "{drawn:?}");
    assert_eq!(out.cancelled(), drawn);
    // One after the other: a cut request takes 40 ms, any other 100 ms.
    let mut t = 0;
    for (n, call) in out.seen.calls.iter().enumerate() {
        assert_eq!(whole_ms(call.at), t, "send {n}");
        let r = out.record_of(n);
        let took = if drawn.contains(&n) { 40 } else { 100 };
        assert_eq!(ns_ms(r.end_perf_ns - r.start_perf_ns), took);
        t += took;
    }
    for n in &drawn {
        let r = out.record_of(*n);
        assert_eq!(r.error.as_ref().unwrap().code, Some(CANCELLED_CODE));
        assert_eq!(r.cancellation_perf_ns, Some(r.end_perf_ns));
        // The engine abandoned the exchange (its connection closes).
        assert_eq!(out.end_of(*n).how, How::Dropped);
    }
}

#[tokio::test(start_paused = true)]
async fn cancellation_is_drawn_by_send_number() {
    // The profiling sends after 50 warmup ones: their draws are those of sends 50..70.
    let spec = PhaseSpec {
        first_send: 50,
        count: Some(20),
        concurrency: Some(20),
        cancellation: cancelling(0.5, 10),
        ..spec(Pacing::ClosedLoop)
    };
    let out = run(Fake::new(reply_after(ms(100))), single_plan(4, 70), spec).await;
    let mut want: Vec<u64> = (50..70).filter(|&s| is_cancelled(SEED, 0.5, s)).collect();
    let mut got: Vec<u64> = (0..20)
        .filter(|&n| out.record_of(n).was_cancelled)
        .map(|n| out.seen.calls[n].session_num)
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert_ne!(
        want,
        (0..20)
            .filter(|&s| is_cancelled(SEED, 0.5, s))
            .map(|s| s + 50)
            .collect::<Vec<_>>()
    );
}

#[tokio::test(start_paused = true)]
async fn cancellation_never_cuts_a_request_that_ended_first() {
    let spec = PhaseSpec {
        count: Some(5),
        concurrency: Some(1),
        cancellation: cancelling(1.0, 500),
        ..spec(Pacing::ClosedLoop)
    };
    let out = run(Fake::new(reply_after(ms(100))), single_plan(4, 5), spec).await;
    assert_eq!(out.send_ms(), [0, 100, 200, 300, 400]);
    assert!(out.cancelled().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_request_frees_its_slot_at_once() {
    let spec = PhaseSpec {
        count: Some(4),
        concurrency: Some(1),
        cancellation: cancelling(1.0, 30),
        ..spec(Pacing::ClosedLoop)
    };
    let out = run(Fake::new(|_| Answer::Never), single_plan(4, 4), spec).await;
    assert_eq!(out.send_ms(), [0, 30, 60, 90]);
    assert_eq!(out.seen.max_in_flight, 1);
    assert_eq!(out.cancelled(), [0, 1, 2, 3]);
    assert_eq!(whole_ms(out.ended), 120);
}

#[tokio::test(start_paused = true)]
async fn stopping_sends_nothing_new_and_lets_requests_in_flight_finish() {
    let ctx = context(Fake::new(reply_after(ms(100))), single_plan(4, 100));
    let stopper = ctx.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ms(250)).await;
        stopper.stop.store(true, Ordering::SeqCst);
    });
    let spec = PhaseSpec {
        count: Some(100),
        concurrency: Some(2),
        ..spec(Pacing::ClosedLoop)
    };
    let out = run_on(&ctx, spec).await;
    assert_eq!(out.send_ms(), [0, 0, 100, 100, 200, 200]);
    assert_eq!(out.result.sent, 6);
    assert!(out.cancelled().is_empty());
    assert_eq!(whole_ms(out.ended), 300);
}
