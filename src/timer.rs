//! A precise timer for async code: sleeps that end within tens of microseconds of their
//! deadline, on any tokio runtime (or none).
//!
//! tokio's timer works in 1 ms ticks and rounds deadlines up to the next tick, so a 20 ms
//! sleep typically ends about 1 ms late. Here one process-wide OS thread owns every pending
//! deadline in an ordered map. It sleeps on a condition variable until shortly before the
//! earliest deadline ([`SPIN_WINDOW`]), then spins on the clock for the final stretch, and
//! wakes every due timer in one pass. When deadlines are dense (thousands per second) it
//! sleeps straight to the next one instead of spinning, so it never turns into a busy
//! thread; with nothing pending it blocks without a timeout and spends no CPU at all.
//!
//! On Linux the thread sets its timer slack to 1 ns (the default 50 us slack would make every
//! condvar timeout that much later), which lets the spin window stay short.
//!
//! A future never completes before its deadline: readiness is decided by comparing
//! `Instant::now()` with the deadline, never by the wake-up alone.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, Once, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How long before a deadline the timer thread stops sleeping and starts spinning. It covers
/// the usual OS wake-up latency of a condvar timeout (p50 ~40 us on a 2-core VM with 1 ns
/// timer slack), so a lone deadline is usually met by the spin rather than by the sleep.
pub const SPIN_WINDOW: Duration = Duration::from_micros(100);

/// A pending timer: its deadline and a unique id (so equal deadlines are distinct keys).
type Key = (Instant, u64);

struct State {
    timers: BTreeMap<Key, Waker>,
    next_id: u64,
}

/// The shared state of the timer thread.
struct Timer {
    state: Mutex<State>,
    /// Signalled when a new earliest deadline is registered while the thread sleeps.
    cond: Condvar,
    /// Set with `cond`, for the thread while it spins without holding the lock.
    rearm: AtomicBool,
}

static TIMER: Timer = Timer {
    state: Mutex::new(State {
        timers: BTreeMap::new(),
        next_id: 0,
    }),
    cond: Condvar::new(),
    rearm: AtomicBool::new(false),
};

static START: Once = Once::new();

impl Timer {
    /// Locks the state. A panic elsewhere cannot leave the map half-updated (it only sees
    /// whole inserts and removals), so a poisoned lock is still usable.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a timer; wakes the thread if it is now the earliest one.
    fn insert(&self, state: &mut State, key: Key, waker: Waker) {
        let earliest = state.timers.first_key_value().is_none_or(|(k, _)| key < *k);
        state.timers.insert(key, waker);
        if earliest {
            self.rearm.store(true, Ordering::Release);
            self.cond.notify_one();
        }
    }
}

/// Starts the timer thread on first use.
fn timer() -> &'static Timer {
    START.call_once(|| {
        std::thread::Builder::new()
            .name("precise-timer".into())
            .spawn(|| run(&TIMER))
            .expect("spawning the precise-timer thread");
    });
    &TIMER
}

/// The timer thread: sleep until close to the earliest deadline, spin the rest, wake all due.
fn run(timer: &'static Timer) -> ! {
    reduce_timer_slack();
    let mut due: Vec<Waker> = Vec::new();
    // Whether the thread has blocked since it last woke timers. It only spins right after a
    // sleep: when deadlines are dense the next one is always near, and spinning every time
    // would make this a busy thread that the scheduler then preempts for milliseconds.
    let mut slept = false;
    let mut state = timer.lock();
    loop {
        let now = Instant::now();
        while let Some(entry) = state.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            due.push(entry.remove());
        }
        if !due.is_empty() {
            // Wake outside the lock so woken tasks can register their next timer at once.
            drop(state);
            due.drain(..).for_each(Waker::wake);
            slept = false;
            state = timer.lock();
            continue;
        }
        timer.rearm.store(false, Ordering::Relaxed);
        let Some(&(next, _)) = state.timers.first_key_value().map(|(k, _)| k) else {
            state = timer
                .cond
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            slept = true;
            continue;
        };
        let left = next - now;
        if slept && left <= SPIN_WINDOW {
            // Bounded spin: at most SPIN_WINDOW, cut short when an earlier deadline arrives.
            drop(state);
            while Instant::now() < next && !timer.rearm.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            state = timer.lock();
        } else {
            let wait = left.checked_sub(SPIN_WINDOW).unwrap_or(left);
            state = timer
                .cond
                .wait_timeout(state, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            slept = true;
        }
    }
}

/// Asks Linux for 1 ns timer slack on this thread (default 50 us) so condvar timeouts end
/// when asked. Failure only costs precision.
#[cfg(target_os = "linux")]
fn reduce_timer_slack() {
    const PR_SET_TIMERSLACK: std::ffi::c_int = 29;
    unsafe extern "C" {
        fn prctl(option: std::ffi::c_int, ...) -> std::ffi::c_int;
    }
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long and only affects the calling thread.
    unsafe {
        prctl(PR_SET_TIMERSLACK, 1 as std::ffi::c_ulong);
    }
}

#[cfg(not(target_os = "linux"))]
fn reduce_timer_slack() {}

/// A future that completes at `deadline`, typically within ~50 us after it and never before.
pub fn sleep_until(deadline: Instant) -> PreciseSleep {
    PreciseSleep {
        deadline,
        registered: None,
    }
}

#[cfg(test)]
/// A future that completes `duration` from now. See [`sleep_until`].
pub fn sleep(duration: Duration) -> PreciseSleep {
    sleep_until(Instant::now() + duration)
}

/// The future returned by [`sleep_until`]. It registers with the timer thread only when
/// polled before its deadline; dropping it removes the registration.
#[derive(Debug)]
pub struct PreciseSleep {
    deadline: Instant,
    /// Id in the timer map (under `deadline`) and a copy of the waker stored there, so a
    /// re-poll with the same waker needs no lock.
    registered: Option<(u64, Waker)>,
}

impl PreciseSleep {
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// True once the deadline has passed.
    pub fn is_elapsed(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Moves the deadline (earlier or later). A registered waker moves with it, so the task
    /// is woken at the new deadline even if it does not poll in between.
    pub fn reset(&mut self, deadline: Instant) {
        let old = std::mem::replace(&mut self.deadline, deadline);
        let Some((id, _)) = &self.registered else {
            return;
        };
        let id = *id;
        let timer = timer();
        let mut state = timer.lock();
        let Some(waker) = state.timers.remove(&(old, id)) else {
            // Already fired: the task has been woken and will poll (and register) again.
            self.registered = None;
            return;
        };
        if Instant::now() >= deadline {
            drop(state);
            self.registered = None;
            waker.wake();
        } else {
            timer.insert(&mut state, (deadline, id), waker);
        }
    }
}

impl Future for PreciseSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if Instant::now() >= this.deadline {
            // If the thread has not fired the entry yet it will within microseconds (its
            // deadline has passed); one spurious wake is cheaper than a lock here.
            this.registered = None;
            return Poll::Ready(());
        }
        match &mut this.registered {
            Some((_, waker)) if waker.will_wake(cx.waker()) => {}
            Some((id, waker)) => {
                let mut state = timer().lock();
                match state.timers.get_mut(&(this.deadline, *id)) {
                    Some(stored) => stored.clone_from(cx.waker()),
                    // Only the timer thread removes a live entry, and only once it is due.
                    None => {
                        this.registered = None;
                        return Poll::Ready(());
                    }
                }
                waker.clone_from(cx.waker());
            }
            None => {
                let timer = timer();
                let mut state = timer.lock();
                let id = state.next_id;
                state.next_id += 1;
                timer.insert(&mut state, (this.deadline, id), cx.waker().clone());
                this.registered = Some((id, cx.waker().clone()));
            }
        }
        Poll::Pending
    }
}

impl Drop for PreciseSleep {
    fn drop(&mut self) {
        if let Some((id, _)) = self.registered.take() {
            timer().lock().timers.remove(&(self.deadline, id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::Wake;

    /// Upper bound on lateness that holds on a loaded 2-core machine in a debug build.
    const LATE: Duration = Duration::from_millis(20);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    type Log = Arc<Mutex<Vec<(usize, Instant)>>>;

    /// A waker that logs its index and the time it was woken.
    struct LogWaker {
        index: usize,
        log: Log,
    }

    impl Wake for LogWaker {
        fn wake(self: Arc<Self>) {
            self.log.lock().unwrap().push((self.index, Instant::now()));
        }
    }

    fn log_waker(index: usize, log: &Log) -> Waker {
        Waker::from(Arc::new(LogWaker {
            index,
            log: log.clone(),
        }))
    }

    fn poll_with(sleep: &mut PreciseSleep, waker: &Waker) -> Poll<()> {
        Pin::new(sleep).poll(&mut Context::from_waker(waker))
    }

    /// Waits (blocking) until `log` holds `n` entries or `limit` passes.
    fn wait_for(log: &Log, n: usize, limit: Duration) -> Vec<(usize, Instant)> {
        let start = Instant::now();
        while log.lock().unwrap().len() < n && start.elapsed() < limit {
            std::thread::sleep(ms(1));
        }
        log.lock().unwrap().clone()
    }

    fn is_registered(sleep: &PreciseSleep) -> bool {
        let Some((id, _)) = &sleep.registered else {
            return false;
        };
        TIMER.lock().timers.contains_key(&(sleep.deadline, *id))
    }

    #[test]
    fn past_deadline_completes_at_once_without_registering() {
        let log = Log::default();
        let mut past = sleep_until(Instant::now() - ms(1));
        assert!(past.is_elapsed());
        assert_eq!(poll_with(&mut past, &log_waker(0, &log)), Poll::Ready(()));
        assert!(past.registered.is_none());
        let mut now = sleep(Duration::ZERO);
        assert_eq!(poll_with(&mut now, &log_waker(1, &log)), Poll::Ready(()));
        assert!(log.lock().unwrap().is_empty());
    }

    #[test]
    fn many_timers_wake_in_deadline_order_and_never_early() {
        // Far enough ahead that registering 300 timers on a loaded machine ends before the
        // first deadline (5 ms was not always).
        let t0 = Instant::now() + ms(200);
        let n = 300;
        // A scrambled order of deadlines, some shared, 0.1 ms apart.
        let deadlines: Vec<Instant> = (0..n)
            .map(|i| t0 + Duration::from_micros(100 * ((i * 7919) % 200) as u64))
            .collect();
        let log = Log::default();
        let mut sleeps: Vec<PreciseSleep> = deadlines.iter().map(|&d| sleep_until(d)).collect();
        for (i, s) in sleeps.iter_mut().enumerate() {
            assert_eq!(poll_with(s, &log_waker(i, &log)), Poll::Pending);
        }
        let woken = wait_for(&log, n, ms(2000));
        assert_eq!(woken.len(), n);

        let mut expected: Vec<usize> = (0..n).collect();
        // Equal deadlines fire in registration order, which is index order here.
        expected.sort_by_key(|&i| deadlines[i]);
        let order: Vec<usize> = woken.iter().map(|&(i, _)| i).collect();
        assert_eq!(order, expected);
        for &(i, at) in &woken {
            assert!(at >= deadlines[i], "timer {i} woke early");
            assert!(
                at - deadlines[i] < LATE,
                "timer {i} late by {:?}",
                at - deadlines[i]
            );
        }
        for s in &mut sleeps {
            assert_eq!(poll_with(s, Waker::noop()), Poll::Ready(()));
        }
    }

    #[test]
    fn reset_earlier_moves_the_waker() {
        let log = Log::default();
        let t0 = Instant::now();
        let mut s = sleep_until(t0 + ms(500));
        assert_eq!(poll_with(&mut s, &log_waker(0, &log)), Poll::Pending);
        s.reset(t0 + ms(30));
        assert_eq!(s.deadline(), t0 + ms(30));
        assert!(is_registered(&s));
        let woken = wait_for(&log, 1, ms(1000));
        assert_eq!(woken.len(), 1);
        let at = woken[0].1 - t0;
        assert!(at >= ms(30) && at < ms(30) + LATE, "woken after {at:?}");
        assert_eq!(poll_with(&mut s, Waker::noop()), Poll::Ready(()));
    }

    #[test]
    fn reset_later_does_not_wake_at_the_old_deadline() {
        let log = Log::default();
        let t0 = Instant::now();
        let mut s = sleep_until(t0 + ms(10));
        assert_eq!(poll_with(&mut s, &log_waker(0, &log)), Poll::Pending);
        s.reset(t0 + ms(80));
        let woken = wait_for(&log, 1, ms(1000));
        assert_eq!(woken.len(), 1);
        let at = woken[0].1 - t0;
        assert!(at >= ms(80) && at < ms(80) + LATE, "woken after {at:?}");
    }

    #[test]
    fn reset_to_the_past_wakes_now_and_unregistered_reset_only_moves() {
        let log = Log::default();
        let mut s = sleep(ms(500));
        assert_eq!(poll_with(&mut s, &log_waker(0, &log)), Poll::Pending);
        s.reset(Instant::now() - ms(1));
        assert_eq!(log.lock().unwrap().len(), 1);
        assert!(s.registered.is_none());
        assert_eq!(poll_with(&mut s, Waker::noop()), Poll::Ready(()));

        let mut s = sleep(ms(500));
        let d = Instant::now() + ms(1);
        s.reset(d);
        assert_eq!(s.deadline(), d);
        assert!(s.registered.is_none());
    }

    #[test]
    fn dropped_sleep_is_removed_and_never_wakes() {
        let log = Log::default();
        let mut s = sleep(ms(15));
        assert_eq!(poll_with(&mut s, &log_waker(0, &log)), Poll::Pending);
        assert!(is_registered(&s));
        let (key, id) = (s.deadline, s.registered.as_ref().unwrap().0);
        drop(s);
        assert!(!TIMER.lock().timers.contains_key(&(key, id)));
        std::thread::sleep(ms(40));
        assert!(log.lock().unwrap().is_empty());
    }

    #[test]
    fn only_the_latest_waker_is_woken() {
        let log = Log::default();
        let mut s = sleep(ms(10));
        assert_eq!(poll_with(&mut s, &log_waker(0, &log)), Poll::Pending);
        assert_eq!(poll_with(&mut s, &log_waker(1, &log)), Poll::Pending);
        let woken = wait_for(&log, 1, ms(1000));
        std::thread::sleep(ms(20));
        let woken_later = log.lock().unwrap().clone();
        assert_eq!(woken.len(), 1);
        assert_eq!(woken[0].0, 1);
        assert_eq!(woken_later.len(), 1);
    }

    #[test]
    fn many_concurrent_sleeps_on_a_multi_thread_runtime() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let tasks = 1000;
        let rounds = 5;
        let lateness: Vec<Duration> = rt.block_on(async {
            let handles: Vec<_> = (0..tasks)
                .map(|t| {
                    tokio::spawn(async move {
                        let mut late = Vec::new();
                        for r in 0..rounds {
                            let wait = Duration::from_micros(1000 + ((t * 31 + r * 17) % 90) * 100);
                            let deadline = Instant::now() + wait;
                            // Also race a longer sleep that loses and is dropped while pending.
                            tokio::select! {
                                _ = sleep_until(deadline) => {}
                                _ = sleep_until(deadline + ms(5_000)) => panic!("wrong sleep won"),
                            }
                            late.push(Instant::now().checked_duration_since(deadline));
                        }
                        late
                    })
                })
                .collect();
            let mut all = Vec::new();
            for h in handles {
                for late in h.await.unwrap() {
                    all.push(late.expect("a sleep completed before its deadline"));
                }
            }
            all
        });
        assert_eq!(lateness.len(), (tasks * rounds) as usize);
        // 5,000 wake-ups in a burst on a possibly busy 2-core machine: only a gross bound on
        // the worst case here; the accuracy figures come from benches/timer_accuracy.rs.
        let max = lateness.iter().max().unwrap();
        assert!(*max < LATE * 10, "max lateness {max:?}");
    }
}
