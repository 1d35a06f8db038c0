//! A deliberate break of the rule "commit first, ACK last", built only with the
//! `fault-injection` feature (which no shipped build turns on): the fault harness
//! (`cargo xtask jepsen --break-ack-before-write N`) runs the real `nats-sink` binary with
//! it to show that its checker catches a sink that acknowledges before it writes.
//!
//! When [`ACK_BEFORE_WRITE_ENV`] holds a number `N` (at least 1), every message of a batch is
//! acknowledged before the batch is written, and the messages whose stream sequence is a
//! multiple of `N` are then left out of the write and reported committed: the crash between
//! an early ack and its write, made certain instead of left to a kill's timing.

use async_nats::jetstream::AckKind;
use sinks_contract::sink::MessageOutcome;

use super::batch::Batch;
use super::context::Ctx;
use super::handle::Handle;

/// Environment variable: acknowledge before writing and drop one message in `N` from the
/// write (see the module documentation). Read only by a build with `fault-injection`.
pub const ACK_BEFORE_WRITE_ENV: &str = "NATS_SINKS_FAULT_ACK_BEFORE_WRITE";

/// `N` when the break is asked for, once per process (with an error line saying so).
fn every() -> Option<u64> {
    static EVERY: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| {
        let n = std::env::var(ACK_BEFORE_WRITE_ENV).ok()?.trim().parse::<u64>().ok().filter(|n| *n > 0)?;
        tracing::error!(
            every = n,
            "deliberately broken build: acknowledging before writing and dropping one message in every from the write ({ACK_BEFORE_WRITE_ENV})"
        );
        Some(n)
    })
}

/// Writes `batch` the broken way when the break is asked for: acks every message first,
/// writes the others, and reports the dropped ones committed. `None` when it is not asked
/// for (the batch is written the ordinary way).
pub(super) async fn write(ctx: &Ctx, batch: &Batch<Handle>) -> Option<Vec<MessageOutcome>> {
    let n = every()?;
    for handle in &batch.handles {
        let _ = handle.send(AckKind::Ack).await;
    }
    let kept: Vec<usize> =
        (0..batch.len()).filter(|i| !batch.envelopes[*i].jetstream().stream_sequence.is_multiple_of(n)).collect();
    let envelopes: Vec<_> = kept.iter().map(|i| batch.envelopes[*i].clone()).collect();
    let written = sinks_contract::sink::write_isolating(ctx.sink.as_ref(), &envelopes, ctx.write_budget).await;
    let mut written: std::collections::BTreeMap<usize, MessageOutcome> = kept.into_iter().zip(written).collect();
    Some((0..batch.len()).map(|i| written.remove(&i).unwrap_or(MessageOutcome::Committed)).collect())
}
