//! The sink's own blocking thread pool: every driver call runs here, never on the async
//! workers and never on tokio's shared blocking pool (which the file and spool sinks fill
//! with fsyncs). One thread per connection of the session pool (`pool_max`), so a thread
//! never waits for a connection held by another; started on first use, so `nats-sink
//! validate` starts none.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};

use sinks_contract::SinkError;

type Job = Box<dyn FnOnce() + Send>;

/// A fixed number of named threads taking jobs from one queue.
#[derive(Debug)]
pub(crate) struct IoPool {
    name: &'static str,
    threads: usize,
    queue: OnceLock<Mutex<Sender<Job>>>,
}

impl IoPool {
    /// A pool of `threads` threads named `name-N`, started on first use.
    pub(crate) fn new(name: &'static str, threads: usize) -> Self {
        Self { name, threads: threads.max(1), queue: OnceLock::new() }
    }

    /// The number of threads.
    pub(crate) fn size(&self) -> usize {
        self.threads
    }

    fn sender(&self) -> Result<Sender<Job>, SinkError> {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = channel::<Job>();
            let rx = Arc::new(Mutex::new(rx));
            for i in 0..self.threads {
                let rx: Arc<Mutex<Receiver<Job>>> = Arc::clone(&rx);
                let spawned = std::thread::Builder::new().name(format!("{}-{i}", self.name)).spawn(move || {
                    loop {
                        let job = match rx.lock() {
                            Ok(guard) => guard.recv(),
                            Err(_) => return,
                        };
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                });
                if let Err(e) = spawned {
                    tracing::error!(error = %e, "cannot start a driver thread");
                }
            }
            Mutex::new(tx)
        });
        queue.lock().map(|tx| tx.clone()).map_err(|_| SinkError::temporary("driver thread pool is poisoned"))
    }

    /// Runs `work` on one of the pool's threads and waits for it without blocking the async
    /// worker. A panic in `work` becomes a temporary error. If the caller stops waiting, the
    /// work still runs to its end (its connection rolls back what it did not commit).
    pub(crate) async fn run<T, F>(&self, work: F) -> Result<T, SinkError>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, SinkError> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let result = std::panic::catch_unwind(AssertUnwindSafe(work));
            let _ = tx.send(result);
        });
        self.sender()?.send(job).map_err(|_| SinkError::temporary("driver thread pool is stopped"))?;
        match rx.await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(SinkError::temporary("a driver call panicked")),
            Err(_) => Err(SinkError::temporary("a driver thread stopped")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_on_named_threads_and_turns_panics_into_temporary_errors() {
        let pool = IoPool::new("oracle-test", 2);
        let name = pool.run(|| Ok(std::thread::current().name().map(str::to_owned))).await.unwrap();
        assert!(name.is_some_and(|n| n.starts_with("oracle-test-")));
        let panicked: Result<(), SinkError> = pool.run(|| panic!("boom")).await;
        assert!(!panicked.unwrap_err().is_permanent());
        // Two jobs that wait for each other finish only if they run on two threads at once.
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let (a, b) = (Arc::clone(&barrier), Arc::clone(&barrier));
        let (x, y) = tokio::join!(
            pool.run(move || {
                a.wait();
                Ok(1)
            }),
            pool.run(move || {
                b.wait();
                Ok(2)
            })
        );
        assert_eq!((x.unwrap(), y.unwrap()), (1, 2));
        assert_eq!(pool.size(), 2);
    }
}
