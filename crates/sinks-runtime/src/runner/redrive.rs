//! The runner's side of `nats-sink redrive`: dead-lettered messages, brought back by the
//! caller (from their stream, or from their record's payload), go down the one forward path
//! of every message (`forward::process`): the policy steps ([`Origin::Redriven`]; a record
//! payload already sealed by encryption skips them, as a parked chunk does), the write, a
//! holding sink's objects, the planner and the ACK gate, the settlement with its receipt and,
//! when the message fails again, its new dead letter (with the redrive count). Each message
//! is settled through its record's ticket (`handle::Handle::Redrive`): the caller's marker
//! hears how the redrive ended only once that end is durable.
//!
//! Messages go in chunks of `delivery.batch_size`, `delivery.max_in_flight_batches` of them
//! at once, none with an ordering key; a holding sink's open objects are committed at the end (`pending::finish`), so no
//! record is marked done before its object is. A stop request ends the run between chunks.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;

use sinks_contract::envelope::Envelope;
use tokio::sync::watch;

use super::batch::Batch;
use super::context::Ctx;
use super::forward::{self, Origin, Turn};
use super::handle::{Handle, RedriveMarker, RedriveTicket};

/// One dead-lettered message to bring back.
#[derive(Debug)]
pub struct RedriveItem {
    /// The original message as the source delivered it (its stream, sequence, subject,
    /// headers and epoch; the payload from the stream or from the record).
    pub envelope: Envelope,
    /// The caller's number for its dead-letter record (told to the marker).
    pub ticket: u64,
    /// How many times it was redriven before (the record's redrive count).
    pub redrives: u32,
    /// The fan-out target its record names (kept on a new dead letter).
    pub target: Option<String>,
    /// Run the policy steps (false for a payload that is already an encryption envelope).
    pub policies: bool,
}

/// Writes `items` in chunks (up to `delivery.max_in_flight_batches` at once: none has an
/// ordering key, so none waits for another) and settles each through its ticket; returns how
/// many were handed to the forward path (fewer after a stop request).
pub(super) async fn drive(ctx: &Ctx, items: Vec<RedriveItem>, marker: &Arc<dyn RedriveMarker>) -> usize {
    let size = ctx.config.delivery.batch_size.max(1);
    let mut chunks: Vec<Vec<RedriveItem>> = Vec::with_capacity(items.len().div_ceil(size));
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        chunks.push(items.by_ref().take(size).collect());
    }
    let handed = AtomicUsize::new(0);
    let in_flight = ctx.config.delivery.max_in_flight_batches.max(1);
    futures::stream::iter(chunks)
        .for_each_concurrent(in_flight, |chunk| {
            let handed = &handed;
            async move {
                if *ctx.stop.borrow() {
                    return;
                }
                handed.fetch_add(chunk.len(), Ordering::Relaxed);
                write_chunk(ctx, chunk, marker).await;
            }
        })
        .await;
    let handed = handed.into_inner();
    if *ctx.stop.borrow() {
        tracing::info!(handed, "stop requested: the rest of the redrive is left for the next run");
    }
    // A holding sink's objects are committed before anything is marked done.
    super::pending::finish(ctx).await;
    handed
}

/// One chunk down the forward path: the messages whose policy steps run, then those sealed
/// already.
async fn write_chunk(ctx: &Ctx, chunk: Vec<RedriveItem>, marker: &Arc<dyn RedriveMarker>) {
    let mut checked = Batch::with_capacity(chunk.len());
    let mut sealed = Batch::default();
    for item in chunk {
        let ticket = RedriveTicket::new(item.ticket, item.redrives, item.target, Arc::clone(marker));
        let handle = Handle::Redrive(Arc::new(ticket));
        let envelope = match &ctx.origins {
            Some(origins) => origins.resolve(item.envelope).await,
            None => item.envelope,
        };
        let envelope = envelope.with_order_key(None);
        if item.policies {
            checked.push(envelope, handle);
        } else {
            sealed.push(envelope, handle);
        }
    }
    for (batch, origin) in [(checked, Origin::Redriven), (sealed, Origin::Parked)] {
        if batch.is_empty() {
            continue;
        }
        // Nothing waits for it and it waits for nothing: no ordering key, no gate.
        let (done, _) = watch::channel(false);
        forward::process(ctx, batch, origin, Turn::alone(done), None).await;
    }
}
