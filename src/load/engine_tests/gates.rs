//! What holds a send back: concurrency ramps (`--concurrency-ramp-duration`) and prefill
//! gating (`--prefill-concurrency`: a slot held from the send to the first token).

use super::fake::{Answer, Fake, reply_after};
use super::*;
use crate::load::Cancellation;
use crate::load::schedule::ArrivalPattern;

fn ramp(d: Duration) -> Ramps {
    Ramps {
        concurrency: Some(d),
        ..Ramps::default()
    }
}

/// First token after `first_token` ms, the end after `end` ms.
fn streams(first_token: u64, end: u64) -> Fake {
    Fake::new(move |_| Answer::Reply {
        first_token: ms(first_token),
        end: ms(end),
    })
}

fn closed(count: u64, concurrency: u64) -> PhaseSpec {
    PhaseSpec {
        count: Some(count),
        concurrency: Some(concurrency),
        ..spec(Pacing::ClosedLoop)
    }
}

fn slot_waits_ms(out: &Outcome) -> Vec<u64> {
    out.seen
        .calls
        .iter()
        .map(|c| ns_ms(c.timing.slot_wait_ns))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_concurrency_ramp_starts_closed_loop_workers_in_steps() {
    let spec = PhaseSpec {
        ramps: ramp(ms(3000)),
        ..closed(4, 4)
    };
    let out = run(Fake::new(reply_after(ms(10_000))), single_plan(4, 4), spec).await;
    assert_eq!(out.send_ms(), [0, 1000, 2000, 3000]);
    assert_eq!(out.seen.max_in_flight, 4);
}

#[tokio::test(start_paused = true)]
async fn a_concurrency_ramp_opens_open_loop_slots_in_steps() {
    // Due at 1, 11 and 21 ms; the cap is 1, then 2 at 1 s, then 3 at 2 s.
    let spec = PhaseSpec {
        count: Some(3),
        concurrency: Some(3),
        ramps: ramp(ms(2000)),
        ..spec(Pacing::Rate {
            rate: 100.0,
            pattern: ArrivalPattern::Constant,
        })
    };
    let out = run(Fake::new(reply_after(ms(10_000))), single_plan(4, 3), spec).await;
    assert_eq!(out.send_ms(), [1, 1000, 2000]);
    assert_eq!(slot_waits_ms(&out), [0, 989, 1979]);
}

#[tokio::test(start_paused = true)]
async fn a_phase_ending_during_the_ramp_is_not_held_up_by_it() {
    // Worker 1 of 4 would start at 3.3 s; the phase ends at 1 s.
    let spec = PhaseSpec {
        duration: Some(ms(1000)),
        concurrency: Some(4),
        ramps: ramp(ms(10_000)),
        ..spec(Pacing::ClosedLoop)
    };
    let out = run(Fake::new(reply_after(ms(100))), single_plan(4, 20), spec).await;
    assert_eq!(out.send_ms(), (0..10).map(|k| 100 * k).collect::<Vec<_>>());
    assert_eq!(out.seen.max_in_flight, 1);
    assert_eq!(whole_ms(out.ended), 1000);
}

#[tokio::test(start_paused = true)]
async fn a_prefill_slot_is_held_until_the_first_token() {
    let spec = PhaseSpec {
        prefill_concurrency: Some(1),
        ..closed(4, 4)
    };
    let out = run(streams(100, 1000), single_plan(4, 4), spec).await;
    assert_eq!(out.send_ms(), [0, 100, 200, 300]);
    assert_eq!(out.seen.max_before_first_token, 1);
    // Decoding does not hold the slot: all four stream at once.
    assert_eq!(out.seen.max_in_flight, 4);
    assert_eq!(slot_waits_ms(&out), [0, 100, 200, 300]);
    assert_eq!(whole_ms(out.ended), 1300);
}

#[tokio::test(start_paused = true)]
async fn without_prefill_gating_every_slot_sends_at_once() {
    let out = run(streams(100, 1000), single_plan(4, 4), closed(4, 4)).await;
    assert_eq!(out.send_ms(), [0, 0, 0, 0]);
    assert_eq!(out.seen.max_before_first_token, 4);
    assert_eq!(slot_waits_ms(&out), [0, 0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_request_failing_before_its_first_token_frees_its_prefill_slot() {
    let spec = PhaseSpec {
        prefill_concurrency: Some(1),
        ..closed(3, 2)
    };
    let out = run(Fake::new(|_| Answer::Fail(ms(50))), single_plan(4, 3), spec).await;
    assert_eq!(out.send_ms(), [0, 50, 100]);
    assert_eq!(out.seen.max_before_first_token, 1);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_request_frees_its_prefill_slot() {
    let spec = PhaseSpec {
        prefill_concurrency: Some(1),
        cancellation: Some(Cancellation {
            share: 1.0,
            delay: ms(40),
        }),
        ..closed(3, 2)
    };
    let out = run(Fake::new(|_| Answer::Never), single_plan(4, 3), spec).await;
    // The cancellation delay counts from the send, after the wait for the slot.
    assert_eq!(out.send_ms(), [0, 40, 80]);
    assert_eq!(out.cancelled(), [0, 1, 2]);
    assert_eq!(whole_ms(out.ended), 120);
}

#[tokio::test(start_paused = true)]
async fn prefill_gating_delays_a_rate_but_keeps_its_schedule() {
    // Due at 1, 101 and 201; each first token comes 150 ms after its send.
    let spec = PhaseSpec {
        count: Some(3),
        prefill_concurrency: Some(1),
        ..spec(Pacing::Rate {
            rate: 10.0,
            pattern: ArrivalPattern::Constant,
        })
    };
    let out = run(streams(150, 200), single_plan(4, 3), spec).await;
    assert_eq!(out.send_ms(), [1, 151, 301]);
    assert_eq!(slot_waits_ms(&out), [0, 50, 100]);
    let scheduled: Vec<u64> = out
        .seen
        .calls
        .iter()
        .map(|c| ns_ms(c.timing.scheduled_perf_ns.unwrap()))
        .collect();
    assert_eq!(scheduled, [1, 101, 201]);
}

#[tokio::test(start_paused = true)]
async fn a_prefill_ramp_opens_one_more_prefill_slot_at_each_step() {
    // First tokens never come before the ramp ends: slot k opens at k x 100 ms.
    let spec = PhaseSpec {
        prefill_concurrency: Some(4),
        ramps: Ramps {
            prefill: Some(ms(300)),
            ..Ramps::default()
        },
        ..closed(4, 4)
    };
    let out = run(streams(1000, 1500), single_plan(4, 4), spec).await;
    assert_eq!(out.send_ms(), [0, 100, 200, 300]);
    assert_eq!(out.seen.max_before_first_token, 4);
}
