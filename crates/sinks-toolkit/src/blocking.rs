//! Blocking work for sinks that write to local files: spread over tokio's blocking pool
//! in contiguous chunks, results in input order, a panicked task's items turned into
//! temporary failures. Shared by the file and spool sinks.

use std::sync::Arc;

use sinks_contract::error::SinkError;

/// Something that can stand for a lost result when a blocking task panics.
pub trait TaskFailed {
    /// The stand-in (a temporary failure, so the message is retried).
    fn task_failed() -> Self;
}

impl<T> TaskFailed for Result<T, SinkError> {
    fn task_failed() -> Self {
        Err(SinkError::temporary("blocking task failed"))
    }
}

/// Runs `work` over `items` on at most `max_tasks` blocking tasks, each handling a contiguous
/// chunk in order. Results come back in input order; a panicked task's items become
/// [`TaskFailed::task_failed`].
pub async fn run_parallel<T, R, F>(items: Vec<T>, max_tasks: usize, work: F) -> Vec<R>
where
    T: Send + 'static,
    R: TaskFailed + Send + 'static,
    F: Fn(T) -> R + Send + Sync + 'static,
{
    let count = items.len();
    if count == 0 {
        return Vec::new();
    }
    let work = Arc::new(work);
    let per_task = count.div_ceil(count.min(max_tasks.max(1)));
    let mut items = items.into_iter();
    let mut handles = Vec::new();
    loop {
        let chunk: Vec<T> = items.by_ref().take(per_task).collect();
        if chunk.is_empty() {
            break;
        }
        let work = Arc::clone(&work);
        let len = chunk.len();
        handles
            .push((len, tokio::task::spawn_blocking(move || chunk.into_iter().map(|t| work(t)).collect::<Vec<R>>())));
    }
    let mut out = Vec::with_capacity(count);
    for (len, handle) in handles {
        match handle.await {
            Ok(results) => out.extend(results),
            Err(e) => {
                tracing::error!(error = %e, "blocking task failed");
                out.extend((0..len).map(|_| R::task_failed()));
            }
        }
    }
    out
}

/// Runs one blocking closure, mapping a panicked task to a temporary error.
pub async fn blocking<T, F>(f: F) -> Result<T, SinkError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, SinkError> + Send + 'static,
{
    tokio::task::spawn_blocking(f).await.map_err(|e| SinkError::temporary("blocking task failed").with_source(e))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn run_parallel_keeps_order() {
        for count in [0, 1, 7, 8, 9, 100] {
            for tasks in [1, 8, 64] {
                let items: Vec<usize> = (0..count).collect();
                let out: Vec<Result<usize, SinkError>> = run_parallel(items, tasks, |i| Ok(i * 2)).await;
                let got: Vec<usize> = out.into_iter().map(|r| r.unwrap()).collect();
                let expected: Vec<usize> = (0..count).map(|i| i * 2).collect();
                assert_eq!(got, expected, "{count} items on {tasks} tasks");
            }
        }
    }
}
