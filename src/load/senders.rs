//! Sender threads: one single-threaded tokio runtime per core, over which a phase spreads
//! its request tasks (a closed loop's workers, an open loop's conversations, the users).
//!
//! Each request task, its connection's task and that connection's socket then live on one
//! thread, which wakes no other thread while the stream flows. On tokio's multi-threaded
//! runtime the same load paid for work stealing and for waking idle workers (an eventfd
//! write about once per request): spread over two single-threaded runtimes, 20,000
//! streamed requests at concurrency 64 took about 10% less client CPU on a 2-core VM
//! (`benches/client_cpu.rs`). The rest of a run (its control, the observers, the collector's
//! timers, the probes) stays on the multi-threaded runtime.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::transport::pool::{set_thread_lane, thread_lane};

/// The sender threads of a run; dropping it stops them (their tasks are dropped with their
/// runtimes) and waits for them to end.
pub struct SenderThreads {
    spawner: Spawner,
    stops: Vec<oneshot::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

/// Where a phase's request tasks go: to a sender thread (see `spawn` and `spawn_least_busy`),
/// or to the current runtime when there are none (the engine's tests).
#[derive(Clone, Default)]
pub struct Spawner {
    handles: Vec<Handle>,
    /// Tasks running on each sender thread that `spawn_least_busy` placed.
    busy: Arc<[AtomicUsize]>,
}

impl SenderThreads {
    /// `n` sender threads (at least one), named `client-worker`.
    pub fn start(n: usize) -> std::io::Result<SenderThreads> {
        let mut handles = Vec::new();
        let mut stops = Vec::new();
        let mut threads = Vec::new();
        for k in 0..n.max(1) {
            let (handle_tx, handle_rx) = std::sync::mpsc::channel();
            let (stop_tx, stop_rx) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name("client-worker".into())
                .spawn(move || {
                    // Lane 0 is every other thread's (see `set_thread_lane`).
                    set_thread_lane(k + 1);
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build();
                    let runtime = match runtime {
                        Ok(r) => r,
                        Err(e) => {
                            let _ = handle_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = handle_tx.send(Ok(runtime.handle().clone()));
                    // Spawned tasks run while this thread is inside `block_on`.
                    let _ = runtime.block_on(stop_rx);
                })?;
            let handle = handle_rx
                .recv()
                .map_err(|_| std::io::Error::other("a sender thread ended before it started"))??;
            handles.push(handle);
            stops.push(stop_tx);
            threads.push(thread);
        }
        Ok(SenderThreads {
            spawner: Spawner {
                busy: handles.iter().map(|_| AtomicUsize::new(0)).collect(),
                handles,
            },
            stops,
            threads,
        })
    }

    /// One per core, or `TOKIO_WORKER_THREADS` (as tokio's own runtime reads it).
    pub fn default_count() -> usize {
        std::env::var("TOKIO_WORKER_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n > 0)
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
            .unwrap_or(1)
    }

    pub fn spawner(&self) -> Spawner {
        self.spawner.clone()
    }
}

impl Drop for SenderThreads {
    fn drop(&mut self) {
        self.stops.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Spawner {
    /// The runtime task `k` goes to.
    fn handle(&self, k: usize) -> Option<&Handle> {
        (!self.handles.is_empty()).then(|| &self.handles[k % self.handles.len()])
    }

    /// Runs task number `k` on sender thread `k mod n` (a closed loop's worker `k`, busy
    /// all the phase long).
    pub fn spawn<F>(&self, k: usize, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.handle(k) {
            Some(h) => h.spawn(task),
            None => tokio::spawn(task),
        }
    }

    /// Runs `task` in `set`, on the sender thread with the fewest such tasks running (the
    /// calling thread if it is one of the least busy, else the first of them): a phase whose
    /// requests seldom overlap keeps to one thread, and so to the connections it kept alive
    /// there.
    pub fn spawn_least_busy<F>(&self, set: &mut JoinSet<F::Output>, task: F)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if self.handles.is_empty() {
            set.spawn(task);
            return;
        }
        // Among the least busy, this thread first: spawned here, the task wakes no other.
        let here = thread_lane().checked_sub(1);
        let k = (0..self.busy.len())
            .min_by_key(|&k| (self.busy[k].load(Ordering::Relaxed), Some(k) != here))
            .unwrap_or(0);
        self.busy[k].fetch_add(1, Ordering::Relaxed);
        let done = Done(self.busy.clone(), k);
        set.spawn_on(
            async move {
                let _done = done;
                task.await
            },
            &self.handles[k],
        );
    }
}

/// Counts a task of `spawn_least_busy` off its thread when it ends or is dropped.
struct Done(Arc<[AtomicUsize]>, usize);

impl Drop for Done {
    fn drop(&mut self) {
        self.0[self.1].fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_go_to_their_threads_and_the_threads_end_when_dropped() {
        let senders = SenderThreads::start(2).unwrap();
        let spawner = senders.spawner();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let names: Vec<_> = runtime.block_on(async {
            let mut out = Vec::new();
            for k in 0..4 {
                let id = spawner
                    .spawn(k, async { std::thread::current().id() })
                    .await
                    .unwrap();
                out.push(id);
            }
            out
        });
        assert_eq!(names[0], names[2]);
        assert_eq!(names[1], names[3]);
        assert_ne!(names[0], names[1]);
        assert_ne!(names[0], std::thread::current().id());
        let threads: Vec<_> = senders.threads.iter().map(|t| t.thread().id()).collect();
        assert!(threads.contains(&names[0]) && threads.contains(&names[1]));
        // Least busy: the first thread while nothing overlaps, the other beside a task
        // still running, the first again once that ended.
        let (hold_tx, hold_rx) = oneshot::channel::<()>();
        let placed = runtime.block_on(async {
            let mut set = JoinSet::new();
            let here = || async { std::thread::current().id() };
            spawner.spawn_least_busy(&mut set, here());
            let alone = set.join_next().await.unwrap().unwrap();
            spawner.spawn_least_busy(&mut set, async move {
                let _ = hold_rx.await;
                std::thread::current().id()
            });
            spawner.spawn_least_busy(&mut set, here());
            let beside = set.join_next().await.unwrap().unwrap();
            hold_tx.send(()).unwrap();
            let held = set.join_next().await.unwrap().unwrap();
            spawner.spawn_least_busy(&mut set, here());
            let after = set.join_next().await.unwrap().unwrap();
            [alone, held, beside, after]
        });
        assert_eq!(placed[0], names[0]);
        assert_eq!(placed[1], names[0]);
        assert_eq!(placed[2], names[1]);
        assert_eq!(placed[3], names[0]);
        // Called from the second thread with both idle: the task stays there.
        let inner = spawner.clone();
        let task = async move {
            let mut set = JoinSet::new();
            inner.spawn_least_busy(&mut set, async { std::thread::current().id() });
            set.join_next().await.unwrap().unwrap()
        };
        let from_second = runtime.block_on(spawner.spawn(1, task)).unwrap();
        assert_eq!(from_second, names[1]);
        drop(senders);
        // The runtimes are gone with their threads: a spawn now finds no runtime to run on.
        let late = runtime.block_on(async { spawner.spawn(0, async { 1 }).await });
        assert!(late.is_err());
    }
}
