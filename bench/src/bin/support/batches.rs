//! The batch loop of the raw ceilings that write a batch and then ack it (`raw_ceiling`,
//! `raw_nosql`, each including this file with `#[path]`): one pull stream of the durable
//! consumer cut into batches of up to `batch` messages, `in_flight` batches written at a
//! time, every message of a batch acked after its write, until `count` messages are done.

use async_nats::jetstream::Message;
use async_nats::jetstream::consumer::PullConsumer;
use futures::StreamExt;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Consumes `count` messages from `consumer` in batches of up to `batch`, writing each with
/// `write` and acking its messages after, `in_flight` batches at a time.
pub(crate) async fn write_then_ack(
    consumer: &PullConsumer,
    count: usize,
    batch: usize,
    in_flight: usize,
    write: impl AsyncFn(&[Message]) -> Result<(), Error>,
) -> Result<(), Error> {
    let messages = consumer.stream().max_messages_per_batch(batch).messages().await?;
    let write = &write;
    let mut written = messages
        .ready_chunks(batch)
        .map(|chunk| async move {
            let batch: Vec<Message> = chunk.into_iter().collect::<Result<_, _>>()?;
            write(&batch).await?;
            for message in &batch {
                message.ack().await?;
            }
            Ok::<usize, Error>(batch.len())
        })
        .buffer_unordered(in_flight);
    let mut done = 0;
    while done < count {
        match written.next().await {
            Some(n) => done += n?,
            None => return Err("the message stream ended".into()),
        }
    }
    Ok(())
}
