//! Multi-turn conversations: turn order, think times, the history each turn carries, limits
//! counted in conversations, sticky sessions, user-centric rate and replayed schedules.

use super::fake::{Answer, Call, Fake, reply_after};
use super::*;
use crate::load::UserCentric;

/// `(ms, conversation number, turn)` of every send, in order.
fn turns(out: &Outcome) -> Vec<(u64, u64, u32)> {
    out.seen.calls[..]
        .iter()
        .map(|c| (whole_ms(c.at), c.session_num, c.turn))
        .collect()
}

fn closed(sessions: u64, concurrency: u64) -> PhaseSpec {
    PhaseSpec {
        sessions: Some(sessions),
        concurrency: Some(concurrency),
        ..spec(Pacing::ClosedLoop)
    }
}

/// The calls of each conversation (by correlation id), in order.
fn by_conversation(calls: &[Call]) -> Vec<Vec<&Call>> {
    let mut ids: Vec<&String> = calls.iter().map(|c| &c.correlation_id).collect();
    ids.sort();
    ids.dedup();
    ids.iter()
        .map(|id| calls.iter().filter(|c| &c.correlation_id == *id).collect())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn turns_follow_their_reply_after_their_think_time() {
    let plan = conversation_plan(&[&[0, 200, 500]], 3);
    let out = run(Fake::new(reply_after(ms(100))), plan, closed(1, 1)).await;
    assert_eq!(turns(&out), [(0, 0, 0), (300, 0, 1), (900, 0, 2)]);
    let calls = &out.seen.calls;
    assert!(calls.iter().all(|c| c.conversation_id == "conv0"));
    assert!(
        calls
            .iter()
            .all(|c| c.correlation_id == calls[0].correlation_id)
    );
    // A later turn is scheduled at the end of its think time, and was sent then.
    let scheduled: Vec<Option<u64>> = calls
        .iter()
        .map(|c| c.timing.scheduled_perf_ns.map(ns_ms))
        .collect();
    assert_eq!(scheduled, [None, Some(300), Some(900)]);
    let pacing = out.result.pacing.expect("think times are a schedule");
    assert_eq!(pacing.sends, 2);
    assert_eq!(pacing.send_lag_max_ns, 0.0);
    assert_eq!(out.result.sent, 3);
    assert_eq!(whole_ms(out.ended), 1000);
}

#[tokio::test(start_paused = true)]
async fn later_turns_carry_every_earlier_reply() {
    let plan = conversation_plan(&[&[0, 0, 0]], 3);
    let out = run(Fake::new(reply_after(ms(10))), plan, closed(1, 1)).await;
    let body = String::from_utf8(out.seen.calls[2].body.to_vec()).unwrap();
    assert_eq!(
        body,
        concat!(
            r#"{"messages":[{"role":"user","content":"c0t0"},"#,
            r#"{"role":"assistant","content":"r0"},{"role":"user","content":"c0t1"},"#,
            r#"{"role":"assistant","content":"r1"},{"role":"user","content":"c0t2"}]}"#
        )
    );
    assert_eq!(out.record_of(0).input.history_text, None);
    assert_eq!(
        out.record_of(2).input.history_text.as_deref(),
        Some("c0t0 r0 c0t1 r1 c0t2")
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_turn_ends_its_conversation() {
    let plan = conversation_plan(&[&[0, 0, 0], &[0, 0, 0]], 6);
    let fake = Fake::new(|c| match c.n {
        1 => Answer::Fail(ms(10)),
        _ => Answer::Reply {
            first_token: ms(10),
            end: ms(10),
        },
    });
    let out = run(fake, plan, closed(2, 1)).await;
    // Conversation 0 stops after its failed turn 1; the worker goes on with conversation 1.
    assert_eq!(
        turns(&out),
        [(0, 0, 0), (10, 0, 1), (20, 1, 0), (30, 1, 1), (40, 1, 2)]
    );
    assert_eq!(out.result.sent, 5);
}

#[tokio::test(start_paused = true)]
async fn a_request_count_can_end_a_conversation_midway() {
    let plan = conversation_plan(&[&[0, 0, 0], &[0, 0, 0]], 6);
    let spec = PhaseSpec {
        count: Some(4),
        concurrency: Some(1),
        ..spec(Pacing::ClosedLoop)
    };
    let out = run(Fake::new(reply_after(ms(10))), plan, spec).await;
    assert_eq!(turns(&out), [(0, 0, 0), (10, 0, 1), (20, 0, 2), (30, 1, 0)]);
    assert_eq!(out.result.sent, 4);
}

#[tokio::test(start_paused = true)]
async fn a_session_limit_counts_conversations_and_sends_all_their_turns() {
    let plan = conversation_plan(&[&[0, 0], &[0, 0], &[0, 0]], 6);
    let out = run(Fake::new(reply_after(ms(100))), plan, closed(3, 2)).await;
    let mut seen = turns(&out);
    seen.sort();
    assert_eq!(
        seen,
        [
            (0, 0, 0),
            (0, 1, 0),
            (100, 0, 1),
            (100, 1, 1),
            (200, 2, 0),
            (300, 2, 1)
        ]
    );
    assert_eq!(out.result.sent, 6);
    assert_eq!(out.seen.max_in_flight, 2);
}

#[tokio::test(start_paused = true)]
async fn sticky_sessions_keep_each_conversation_on_its_own_session() {
    let plan = conversation_plan(&[&[0, 50, 50], &[0, 50, 50], &[0, 50, 50]], 9);
    let fake = Fake::new(reply_after(ms(100))).sticky();
    let out = run(fake, plan, closed(3, 2)).await;
    assert_eq!(out.seen.calls.len(), 9);
    let conversations = by_conversation(&out.seen.calls);
    assert_eq!(conversations.len(), 3);
    let mut sessions = Vec::new();
    for calls in &conversations {
        let session = calls[0].session.expect("a session of its own");
        assert!(calls.iter().all(|c| c.session == Some(session)));
        assert_eq!(calls.iter().map(|c| c.turn).collect::<Vec<_>>(), [0, 1, 2]);
        // Ended once, when its last reply came.
        let last_reply = calls[2].at + ms(100);
        let ended: Vec<Duration> = out
            .seen
            .sessions_ended
            .iter()
            .filter(|(s, _)| *s == session)
            .map(|(_, at)| *at)
            .collect();
        assert_eq!(ended, [last_reply]);
        sessions.push(session);
    }
    sessions.sort();
    assert_eq!(sessions, [0, 1, 2]);
    assert_eq!(out.seen.sessions_opened, 3);
}

#[tokio::test(start_paused = true)]
async fn without_sticky_sessions_the_shared_client_serves_every_turn() {
    let plan = conversation_plan(&[&[0, 50], &[0, 50]], 4);
    let out = run(Fake::new(reply_after(ms(100))), plan, closed(2, 2)).await;
    assert_eq!(out.seen.calls.len(), 4);
    assert!(out.seen.calls.iter().all(|c| c.session.is_none()));
    assert_eq!(out.seen.sessions_opened, 0);
    assert!(out.seen.sessions_ended.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_sticky_session_ends_when_its_conversation_fails() {
    let plan = conversation_plan(&[&[0, 0, 0]], 3);
    let fake = Fake::new(|c| match c.n {
        1 => Answer::Fail(ms(30)),
        _ => Answer::Reply {
            first_token: ms(100),
            end: ms(100),
        },
    })
    .sticky();
    let out = run(fake, plan, closed(1, 1)).await;
    assert_eq!(turns(&out), [(0, 0, 0), (100, 0, 1)]);
    assert_eq!(out.seen.sessions_ended, [(0, ms(130))]);
}

#[tokio::test(start_paused = true)]
async fn warmup_and_profiling_number_their_conversations_on() {
    let ctx = context(
        Fake::new(reply_after(ms(10))),
        conversation_plan(&[&[0, 0], &[0, 0], &[0, 0], &[0, 0]], 8),
    );
    let warmup = PhaseSpec {
        phase: Phase::Warmup,
        ..closed(2, 1)
    };
    let out = run_on(&ctx, warmup).await;
    assert!(out.records.iter().all(|r| r.phase == Phase::Warmup));
    let profiling = PhaseSpec {
        first_send: 4,
        ..closed(2, 1)
    };
    let out = run_on(&ctx, profiling).await;
    let calls = &out.seen.calls[4..];
    let plan = &ctx.plan;
    assert_eq!(
        calls.iter().map(|c| c.session_num).collect::<Vec<_>>(),
        [2, 2, 3, 3]
    );
    let conversations: Vec<&str> = calls.iter().map(|c| c.conversation_id.as_str()).collect();
    assert_eq!(conversations, ["conv2", "conv2", "conv3", "conv3"]);
    let ids: Vec<String> = (4..8).map(|s| plan.request_id(s)).collect();
    assert_eq!(
        calls
            .iter()
            .map(|c| c.request_id.clone())
            .collect::<Vec<_>>(),
        ids
    );
    assert_eq!(calls[0].correlation_id, plan.correlation_id(2));
    assert_eq!(calls[2].correlation_id, plan.correlation_id(3));
    assert!(out.records.iter().all(|r| r.phase == Phase::Profiling));
}

fn users(qps: f64, users: u64) -> PhaseSpec {
    spec(Pacing::Users(UserCentric { qps, users }))
}

#[tokio::test(start_paused = true)]
async fn users_start_evenly_and_keep_their_turn_gap() {
    // Two users at 10 requests/s: each sends a turn every 200 ms, user 1 100 ms after user 0.
    let plan = conversation_plan(&[&[0, 0, 0], &[0, 0, 0], &[0, 0, 0], &[0, 0, 0]], 12);
    let spec = PhaseSpec {
        sessions: Some(4),
        ..users(10.0, 2)
    };
    let out = run(Fake::new(reply_after(ms(10))), plan, spec).await;
    assert_eq!(
        turns(&out),
        [
            (1, 0, 0),
            (101, 1, 0),
            (201, 0, 1),
            (301, 1, 1),
            (401, 0, 2),
            (501, 1, 2),
            // A new user takes each place one gap after the last turn.
            (601, 2, 0),
            (701, 3, 0),
            (801, 2, 1),
            (901, 3, 1),
            (1001, 2, 2),
            (1101, 3, 2),
        ]
    );
    assert_eq!(out.result.pacing.unwrap().target_rate, Some(10.0));
}

#[tokio::test(start_paused = true)]
async fn a_late_reply_restarts_a_users_schedule_without_a_burst() {
    let plan = conversation_plan(&[&[0, 0, 0]], 3);
    let fake = Fake::new(|c| {
        let d = if c.n == 0 { ms(300) } else { ms(10) };
        Answer::Reply {
            first_token: d,
            end: d,
        }
    });
    let spec = PhaseSpec {
        sessions: Some(1),
        ..users(5.0, 1)
    };
    let out = run(fake, plan, spec).await;
    // Turn 1 waits for its late reply; turn 2 keeps the gap from there (not 401).
    assert_eq!(out.send_ms(), [1, 301, 501]);
}

#[tokio::test(start_paused = true)]
async fn users_send_no_turn_due_after_the_duration() {
    let plan = conversation_plan(&[&[0, 0, 0, 0], &[0, 0, 0, 0]], 8);
    let spec = PhaseSpec {
        duration: Some(ms(500)),
        ..users(5.0, 1)
    };
    let out = run(Fake::new(reply_after(ms(10))), plan, spec).await;
    assert_eq!(turns(&out), [(1, 0, 0), (201, 0, 1), (401, 0, 2)]);
    assert_eq!(whole_ms(out.ended), 411);
}

#[tokio::test(start_paused = true)]
async fn a_fixed_schedule_starts_each_conversation_at_its_offset() {
    let plan = conversation_plan(&[&[0, 50], &[0, 50]], 4);
    let spec = PhaseSpec {
        count: Some(4),
        ..spec(Pacing::Fixed {
            offsets_ns: vec![0, 100_000_000].into(),
        })
    };
    let out = run(Fake::new(reply_after(ms(10))), plan, spec).await;
    assert_eq!(
        turns(&out),
        [(1, 0, 0), (61, 0, 1), (101, 1, 0), (161, 1, 1)]
    );
    let conversations: Vec<&str> = out
        .seen
        .calls
        .iter()
        .map(|c| c.conversation_id.as_str())
        .collect();
    assert_eq!(conversations, ["conv0", "conv0", "conv1", "conv1"]);
}
