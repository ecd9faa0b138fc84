//! The response body that releases output tokens on the latency schedule.
//!
//! Token `i` (0-based) is due at `admitted + ttft + i * itl`, `admitted` being when the
//! request got its serving slot (when it was read, without `--max-concurrency`). Deadlines are
//! computed from `admitted`, never from the previous wake-up, so timer lateness does not
//! accumulate. A chunk
//! whose deadline has passed is released at once; with `--fast` there is no schedule and no
//! timer at all. Timestamps for `--record-requests` are taken just before a chunk is handed to
//! hyper, which writes it to the socket right away.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};

use super::metrics::{MockMetrics, Served};
use super::recorder::{Recorder, RequestTrace};
use super::response::ChunkWriter;
use crate::timer::{self, PreciseSleep};

/// Multiplicative lognormal noise with mean 1 and a given coefficient of variation.
#[derive(Debug, Clone, Copy)]
pub struct Jitter {
    dist: LogNormal<f64>,
}

impl Jitter {
    /// `None` when `cv` is 0 (no jitter).
    pub fn new(cv: f64) -> Option<Self> {
        if cv <= 0.0 {
            return None;
        }
        let sigma2 = (1.0 + cv * cv).ln();
        let dist = LogNormal::new(-sigma2 / 2.0, sigma2.sqrt()).ok()?;
        Some(Jitter { dist })
    }

    fn apply(&self, d: Duration, rng: &mut ChaCha8Rng) -> Duration {
        d.mul_f64(self.dist.sample(rng))
    }
}

/// When each output token of one response is due.
#[derive(Debug)]
pub struct Schedule {
    first: Instant,
    itl: Duration,
    /// Boxed: the generator is large and only present with jitter on.
    itl_jitter: Option<Box<(Jitter, ChaCha8Rng)>>,
    /// Due time of the next token.
    next_due: Instant,
    /// Index of the next token.
    next: u64,
}

impl Schedule {
    /// `None` when both delays are zero: nothing ever waits.
    pub fn new(
        received: Instant,
        ttft: Duration,
        itl: Duration,
        ttft_jitter: Option<Jitter>,
        itl_jitter: Option<Jitter>,
        seed: u64,
    ) -> Option<Self> {
        if ttft.is_zero() && itl.is_zero() {
            return None;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let ttft = match ttft_jitter {
            Some(j) => j.apply(ttft, &mut rng),
            None => ttft,
        };
        let first = received + ttft;
        Some(Schedule {
            first,
            itl,
            itl_jitter: itl_jitter.map(|j| Box::new((j, rng))),
            next_due: first,
            next: 0,
        })
    }

    fn next_due(&self) -> Instant {
        self.next_due
    }

    /// Moves on to the next token. Without jitter the deadline is recomputed from the first
    /// token's (multiplication, no accumulated rounding); with jitter each gap is drawn anew.
    fn advance(&mut self) {
        self.next += 1;
        self.next_due = match &mut self.itl_jitter {
            None => self.first + self.itl * self.next.min(u32::MAX as u64) as u32,
            Some(jr) => {
                let (j, rng) = &mut **jr;
                self.next_due + j.apply(self.itl, rng)
            }
        };
    }

    /// Due time of token `n - 1`, where a non-streamed response of `n` tokens is sent.
    fn due_of_last(mut self, n: u64) -> Instant {
        for _ in 1..n {
            self.advance();
        }
        self.next_due
    }
}

// The body is boxed by axum as a whole, so the variants' size difference costs nothing.
#[allow(clippy::large_enum_variant)]
enum Kind {
    /// Streamed: the role chunk (if any) at once, then token chunks on the schedule, then the
    /// tail (usage chunk and `[DONE]`) right after the last token.
    Stream {
        lead: Option<Bytes>,
        writer: ChunkWriter,
        tokens: u64,
        next: u64,
        schedule: Option<Schedule>,
        tail: Option<Bytes>,
    },
    /// Not streamed: the whole body, due with the last token.
    Whole {
        body: Option<Bytes>,
        tokens: u64,
        due: Option<Instant>,
    },
}

/// One response body. See the module doc for the timing rules.
pub struct ScheduledBody {
    kind: Kind,
    sleep: Option<PreciseSleep>,
    /// Present when requests are recorded; handed to the recorder when the body is dropped,
    /// so a response the client abandoned is recorded too.
    trace: Trace,
    /// Counted into `/metrics` at the first token and at completion.
    served: Option<(Arc<MockMetrics>, Served)>,
}

impl ScheduledBody {
    pub fn stream(
        writer: ChunkWriter,
        tokens: u64,
        tail: Bytes,
        schedule: Option<Schedule>,
        trace: Trace,
    ) -> Self {
        ScheduledBody {
            kind: Kind::Stream {
                lead: writer.role_chunk(),
                writer,
                tokens,
                next: 0,
                schedule,
                tail: Some(tail),
            },
            sleep: None,
            trace,
            served: None,
        }
    }

    pub fn whole(body: Bytes, tokens: u64, schedule: Option<Schedule>, trace: Trace) -> Self {
        ScheduledBody {
            kind: Kind::Whole {
                body: Some(body),
                tokens,
                due: schedule.map(|s| s.due_of_last(tokens)),
            },
            sleep: None,
            trace,
            served: None,
        }
    }
}

impl ScheduledBody {
    /// Counts this response into the mock's `/metrics`.
    pub fn with_metrics(mut self, metrics: Arc<MockMetrics>, served: Served) -> Self {
        self.served = Some((metrics, served));
        self
    }

    fn count_first_token(&mut self) {
        if let Some((m, s)) = &mut self.served {
            m.first_token(s);
        }
    }

    fn count_completed(&mut self) {
        if let Some((m, s)) = &mut self.served {
            m.completed(s);
        }
    }
}

type Trace = Option<(Box<RequestTrace>, Recorder)>;

/// Records that `count` tokens are being handed to the connection now.
fn stamp_tokens(trace: &mut Trace, count: u64) {
    if let Some((t, _)) = trace {
        let now = Instant::now();
        t.first_token.get_or_insert(now);
        t.last_token = Some(now);
        t.output_tokens += count;
    }
}

fn mark_completed(trace: &mut Trace) {
    if let Some((t, _)) = trace {
        t.completed = true;
    }
}

/// True once `due` has passed; otherwise arms the precise timer and returns false.
fn reached(sleep: &mut Option<PreciseSleep>, due: Instant, cx: &mut Context<'_>) -> bool {
    if Instant::now() >= due {
        return true;
    }
    let sleep = sleep.get_or_insert_with(|| timer::sleep_until(due));
    if sleep.deadline() != due {
        sleep.reset(due);
    }
    Pin::new(sleep).poll(cx).is_ready()
}

impl Body for ScheduledBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let ready = |b: Bytes| Poll::Ready(Some(Ok(Frame::data(b))));
        match &mut this.kind {
            Kind::Stream {
                lead,
                writer,
                tokens,
                next,
                schedule,
                tail,
            } => {
                if let Some(role) = lead.take() {
                    return ready(role);
                }
                if *next < *tokens {
                    if let Some(s) = schedule {
                        if !reached(&mut this.sleep, s.next_due(), cx) {
                            return Poll::Pending;
                        }
                        s.advance();
                    }
                    let i = *next;
                    *next += 1;
                    let chunk = writer.token_chunk(i, *next == *tokens);
                    stamp_tokens(&mut this.trace, 1);
                    if i == 0 {
                        this.count_first_token();
                    }
                    return ready(chunk);
                }
                match tail.take() {
                    Some(t) => {
                        mark_completed(&mut this.trace);
                        this.count_completed();
                        ready(t)
                    }
                    None => Poll::Ready(None),
                }
            }
            Kind::Whole { body, tokens, due } => {
                if body.is_none() {
                    return Poll::Ready(None);
                }
                if let Some(due) = *due
                    && !reached(&mut this.sleep, due, cx)
                {
                    return Poll::Pending;
                }
                let (b, n) = (body.take().expect("checked above"), *tokens);
                stamp_tokens(&mut this.trace, n);
                mark_completed(&mut this.trace);
                this.count_completed();
                ready(b)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Stream {
                lead,
                next,
                tokens,
                tail,
                ..
            } => lead.is_none() && next == tokens && tail.is_none(),
            Kind::Whole { body, .. } => body.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Whole { body: Some(b), .. } => SizeHint::with_exact(b.len() as u64),
            Kind::Whole { body: None, .. } => SizeHint::with_exact(0),
            Kind::Stream { .. } => SizeHint::default(),
        }
    }
}

impl Drop for ScheduledBody {
    fn drop(&mut self) {
        if let Some((trace, recorder)) = self.trace.take() {
            recorder.record(trace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::recorder;
    use crate::mock::request::FinishReason;
    use crate::mock::response::{Api, ResponseHeader};
    use http_body_util::BodyExt;

    fn writer() -> ChunkWriter {
        let header = ResponseHeader {
            api: Api::Chat,
            id: "chatcmpl-x".into(),
            created: 0,
            model: "m".into(),
        };
        ChunkWriter::new(&header, FinishReason::Length)
    }

    fn trace(received: Instant) -> Box<RequestTrace> {
        Box::new(RequestTrace {
            endpoint: "chat",
            status: 200,
            stream: true,
            model: "m".into(),
            x_request_id: None,
            peer_port: None,
            received,
            admitted: Some(received),
            first_token: None,
            last_token: None,
            text_tokens: 1,
            image_tokens: 0,
            template_tokens: 0,
            image_sizes: Vec::new(),
            roles: Vec::new(),
            output_tokens: 0,
            completed: false,
            error: None,
            cached_tokens: None,
        })
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn schedule_is_absolute() {
        let t0 = Instant::now();
        assert!(Schedule::new(t0, Duration::ZERO, Duration::ZERO, None, None, 0).is_none());
        let mut s = Schedule::new(t0, ms(20), ms(5), None, None, 0).unwrap();
        for i in 0..100u32 {
            assert_eq!(s.next_due(), t0 + ms(20) + ms(5) * i);
            s.advance();
        }
        let s = Schedule::new(t0, ms(20), ms(5), None, None, 0).unwrap();
        assert_eq!(s.due_of_last(11), t0 + ms(70));
        let s = Schedule::new(t0, ms(20), ms(5), None, None, 0).unwrap();
        assert_eq!(s.due_of_last(1), t0 + ms(20));
    }

    #[test]
    fn jitter_has_mean_one_and_is_seeded() {
        assert!(Jitter::new(0.0).is_none());
        let j = Jitter::new(0.5).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let n = 20_000;
        let samples: Vec<f64> = (0..n)
            .map(|_| j.apply(Duration::from_secs(1), &mut rng).as_secs_f64())
            .collect();
        let mean = samples.iter().sum::<f64>() / n as f64;
        let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        assert!((mean - 1.0).abs() < 0.03, "mean {mean}");
        assert!((var.sqrt() - 0.5).abs() < 0.05, "sd {}", var.sqrt());

        let t0 = Instant::now();
        let due = |seed| {
            Schedule::new(t0, ms(20), ms(5), Some(j), Some(j), seed)
                .unwrap()
                .due_of_last(10)
        };
        assert_eq!(due(3), due(3));
        assert_ne!(due(3), due(4));
    }

    #[test]
    fn fast_stream_yields_role_tokens_tail_and_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let (rec, handle) = recorder::spawn(&path, crate::clock::Clock::new()).unwrap();
        let w = writer();
        let tail = w.tail(None);
        let mut body = ScheduledBody::stream(
            w.clone(),
            3,
            tail.clone(),
            None,
            Some((trace(Instant::now()), rec.clone())),
        );
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut frames = Vec::new();
        while let Poll::Ready(Some(Ok(f))) = Pin::new(&mut body).poll_frame(&mut cx) {
            frames.push(f.into_data().unwrap());
        }
        assert!(body.is_end_stream());
        assert_eq!(
            frames,
            vec![
                w.role_chunk().unwrap(),
                w.token_chunk(0, false),
                w.token_chunk(1, false),
                w.token_chunk(2, true),
                tail
            ]
        );
        drop(body);

        // A client that leaves after one token: recorded as incomplete.
        let mut body = ScheduledBody::stream(
            w.clone(),
            5,
            w.tail(None),
            None,
            Some((trace(Instant::now()), rec)),
        );
        for _ in 0..2 {
            assert!(Pin::new(&mut body).poll_frame(&mut cx).is_ready());
        }
        drop(body);
        handle.finish().unwrap();

        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["output_tokens"], 3);
        assert_eq!(lines[0]["completed"], true);
        assert!(lines[0]["first_token_ns"].as_u64() <= lines[0]["last_token_ns"].as_u64());
        assert_eq!(lines[1]["output_tokens"], 1);
        assert_eq!(lines[1]["completed"], false);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn timed_stream_never_runs_ahead_of_its_deadlines() {
        let t0 = Instant::now();
        let schedule = Schedule::new(t0, ms(30), ms(10), None, None, 0);
        let w = writer();
        let mut body = ScheduledBody::stream(w.clone(), 4, w.tail(None), schedule, None);
        let mut arrivals = Vec::new();
        while let Some(f) = body.frame().await {
            f.unwrap();
            arrivals.push(t0.elapsed());
        }
        assert_eq!(arrivals.len(), 1 + 4 + 1);
        assert!(arrivals[0] < ms(30), "role chunk waited {:?}", arrivals[0]);
        for (i, at) in arrivals[1..5].iter().enumerate() {
            let due = ms(30) + ms(10) * i as u32;
            assert!(*at >= due && *at < due + ms(200), "token {i} at {at:?}");
        }

        let schedule = Schedule::new(Instant::now(), ms(30), ms(10), None, None, 0);
        let started = Instant::now();
        let mut whole = ScheduledBody::whole(Bytes::from_static(b"{}"), 3, schedule, None);
        assert_eq!(whole.size_hint().exact(), Some(2));
        assert_eq!(
            whole.frame().await.unwrap().unwrap().into_data().unwrap(),
            "{}"
        );
        assert!(
            started.elapsed() >= ms(49),
            "whole body after {:?}",
            started.elapsed()
        );
        assert!(whole.frame().await.is_none());
    }
}
