//! The closed loop: `concurrency` workers, each sending its next request when its last one
//! ended, until the count; and shards of one plan.

use super::fake::{Answer, Fake, How, reply_after};
use super::*;
use crate::load::Shard;

fn closed(count: u64, concurrency: u64) -> PhaseSpec {
    PhaseSpec {
        count: Some(count),
        concurrency: Some(concurrency),
        ..spec(Pacing::ClosedLoop)
    }
}

#[tokio::test(start_paused = true)]
async fn keeps_concurrency_requests_in_flight_until_the_count() {
    let out = run(
        Fake::new(reply_after(ms(100))),
        single_plan(4, 10),
        closed(10, 3),
    )
    .await;
    assert_eq!(out.send_ms(), [0, 0, 0, 100, 100, 100, 200, 200, 200, 300]);
    assert_eq!(out.seen.max_in_flight, 3);
    assert_eq!(out.result.sent, 10);
    assert_eq!(out.records.len(), 10);
    assert_eq!(whole_ms(out.ended), 400);
    // Nothing had a schedule: no send times to keep, no pacing report.
    assert!(out.result.pacing.is_none());
    assert!(
        out.records
            .iter()
            .all(|r| r.input.timing.scheduled_perf_ns.is_none())
    );
}

#[tokio::test(start_paused = true)]
async fn refills_a_slot_the_moment_its_request_ends() {
    let lasts = [100, 30, 50, 200, 10, 10];
    let fake = Fake::new(move |c| Answer::Reply {
        first_token: ms(lasts[c.n]),
        end: ms(lasts[c.n]),
    });
    let out = run(fake, single_plan(4, 6), closed(6, 2)).await;
    // 0 and 1 at once; 1 ends at 30 (2 goes), 2 at 80 (3 goes), 0 at 100 (4 goes), 4 at 110.
    assert_eq!(out.send_ms(), [0, 0, 30, 80, 100, 110]);
    assert_eq!(out.seen.max_in_flight, 2);
    assert_eq!(whole_ms(out.ended), 280);
}

#[tokio::test(start_paused = true)]
async fn starts_no_more_workers_than_the_count() {
    let out = run(
        Fake::new(reply_after(ms(100))),
        single_plan(4, 3),
        closed(3, 8),
    )
    .await;
    assert_eq!(out.send_ms(), [0, 0, 0]);
    assert_eq!(out.result.sent, 3);
    assert_eq!(out.seen.max_in_flight, 3);
    // Seen through a concurrency ramp: its steps are spread over 3 workers, not 8.
    let spec = PhaseSpec {
        ramps: Ramps {
            concurrency: Some(ms(7000)),
            ..Ramps::default()
        },
        ..closed(3, 8)
    };
    let out = run(Fake::new(reply_after(ms(10_000))), single_plan(4, 3), spec).await;
    assert_eq!(out.send_ms(), [0, 3500, 7000]);
}

#[tokio::test(start_paused = true)]
async fn each_send_carries_its_own_number_id_and_entry() {
    // Profiling after five warmup sends: its send numbers start at 5.
    let plan = single_plan(3, 9);
    let bodies: Vec<Bytes> = (5..9)
        .map(|s| plan.requests[plan.entry_of_send(s)].body.clone())
        .collect();
    let ids: Vec<String> = (5..9).map(|s| plan.request_id(s)).collect();
    let spec = PhaseSpec {
        first_send: 5,
        ..closed(4, 1)
    };
    let out = run(Fake::new(reply_after(ms(10))), plan, spec).await;
    let calls = &out.seen.calls;
    assert_eq!(
        calls.iter().map(|c| c.session_num).collect::<Vec<_>>(),
        [5, 6, 7, 8]
    );
    assert_eq!(
        calls.iter().map(|c| &c.request_id).collect::<Vec<_>>(),
        ids.iter().collect::<Vec<_>>()
    );
    assert_eq!(
        calls.iter().map(|c| c.body.clone()).collect::<Vec<_>>(),
        bodies
    );
    assert!(out.records.iter().all(|r| r.phase == Phase::Profiling));
    // Each record goes to the collector as its request ends, stamped on the run clock.
    for (n, call) in calls.iter().enumerate() {
        assert_eq!(out.record_of(n).start_perf_ns, call.at.as_nanos() as u64);
        assert_eq!(ns_ms(out.record_of(n).end_perf_ns), whole_ms(call.at) + 10);
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_request_is_recorded_and_frees_its_slot() {
    let fake = Fake::new(|c| match c.n % 2 {
        0 => Answer::Fail(ms(20)),
        _ => Answer::Reply {
            first_token: ms(50),
            end: ms(50),
        },
    });
    let out = run(fake, single_plan(2, 4), closed(4, 1)).await;
    assert_eq!(out.send_ms(), [0, 20, 70, 90]);
    let failed: Vec<bool> = (0..4).map(|n| out.record_of(n).error.is_some()).collect();
    assert_eq!(failed, [true, false, true, false]);
    assert_eq!(out.result.sent, 4);
    let hows: Vec<How> = out.seen.ends.iter().map(|e| e.how).collect();
    assert_eq!(hows, [How::Failed, How::Replied, How::Failed, How::Replied]);
}

#[tokio::test(start_paused = true)]
async fn two_shards_split_the_sends_between_them() {
    let mut ids = Vec::new();
    for index in 0..2 {
        let spec = PhaseSpec {
            shard: Some(Shard { index, count: 2 }),
            ..closed(10, 1)
        };
        let out = run(Fake::new(reply_after(ms(10))), single_plan(4, 10), spec).await;
        assert_eq!(out.result.sent, 5);
        // Every other send of the single run: this shard's index, then each second one.
        let nums: Vec<u64> = out.seen.calls.iter().map(|c| c.session_num).collect();
        assert_eq!(nums, (0..5).map(|i| index + 2 * i).collect::<Vec<_>>());
        ids.extend(out.seen.calls.into_iter().map(|c| c.request_id));
    }
    let plan = single_plan(4, 10);
    let mut want: Vec<String> = (0..10).map(|s| plan.request_id(s)).collect();
    ids.sort();
    want.sort();
    assert_eq!(ids, want);
}
