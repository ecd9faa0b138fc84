//! A future raced against a stop signal (the run's cancel, a deadline) without waking
//! the task more than the two need.

use super::*;

/// Wakes the task of a `race` and notes that its `stop` future asked for it.
pub(super) struct StopWake {
    pub(super) woken: std::sync::atomic::AtomicBool,
    pub(super) task: futures_util::task::AtomicWaker,
}

impl std::task::Wake for StopWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// `main`'s output, or `stop`'s if that comes first. `main` is polled on every wake-up and
/// first; `stop` on the first poll and then only after it woke the task itself (it gets
/// its own waker), so a stop future that re-registers its wakers or takes a lock when
/// polled costs nothing while `main` makes progress.
pub(super) async fn race<M: Future, S: Future>(main: M, stop: S) -> Result<M::Output, S::Output> {
    use std::task::{Context, Poll};
    let flag = Arc::new(StopWake {
        woken: std::sync::atomic::AtomicBool::new(true),
        task: futures_util::task::AtomicWaker::new(),
    });
    let stop_waker = std::task::Waker::from(flag.clone());
    let mut main = std::pin::pin!(main);
    let mut stop = std::pin::pin!(stop);
    // The task waker `flag.task` holds, as long as no stop wake can have taken it.
    let mut registered: Option<std::task::Waker> = None;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = main.as_mut().poll(cx) {
            return Poll::Ready(Ok(out));
        }
        // A stop wake sets the flag before it takes the waker: with the flag clear, the
        // same task's waker is still held and registering again would only cost two
        // atomic exchanges a poll. A wake racing this read has taken the waker and woken
        // the task, which is then polled again and sees the flag.
        if !flag.woken.load(Ordering::Acquire)
            && registered.as_ref().is_some_and(|w| w.will_wake(cx.waker()))
        {
            return Poll::Pending;
        }
        // Registered before the flag is read: a wake from now on reaches this task.
        flag.task.register(cx.waker());
        registered = Some(cx.waker().clone());
        if flag.woken.swap(false, Ordering::AcqRel) {
            // The wake seen may have taken the waker just registered.
            registered = None;
            if let Poll::Ready(out) = stop.as_mut().poll(&mut Context::from_waker(&stop_waker)) {
                return Poll::Ready(Err(out));
            }
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task waker that counts its wakes.
    struct Counted(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_stop_after_many_idle_polls_still_wakes_the_race() {
        use std::future::Future as _;
        use std::task::{Context, Poll};
        let counted = Arc::new(Counted(std::sync::atomic::AtomicUsize::new(0)));
        let waker = std::task::Waker::from(counted.clone());
        let mut cx = Context::from_waker(&waker);
        for rounds in [0, 1, 2, 5] {
            let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
            let mut raced = std::pin::pin!(race(std::future::pending::<()>(), rx));
            for _ in 0..rounds {
                assert!(raced.as_mut().poll(&mut cx).is_pending());
            }
            let before = counted.0.load(Ordering::SeqCst);
            tx.send(7).unwrap();
            if rounds > 0 {
                // The stop's wake reaches the task through the waker it registered.
                assert_eq!(counted.0.load(Ordering::SeqCst), before + 1, "{rounds}");
            }
            assert!(matches!(
                raced.as_mut().poll(&mut cx),
                Poll::Ready(Err(Ok(7)))
            ));
        }
        // A waker that changes between polls is the one woken.
        let other = Arc::new(Counted(std::sync::atomic::AtomicUsize::new(0)));
        let other_waker = std::task::Waker::from(other.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
        let mut raced = std::pin::pin!(race(std::future::pending::<()>(), rx));
        for _ in 0..3 {
            assert!(raced.as_mut().poll(&mut cx).is_pending());
        }
        assert!(
            raced
                .as_mut()
                .poll(&mut Context::from_waker(&other_waker))
                .is_pending()
        );
        tx.send(1).unwrap();
        assert_eq!(other.0.load(Ordering::SeqCst), 1);
    }
}
