//! The keeper: the background task that heartbeats held-back messages and releases the lots
//! whose failed message did not come back in time.

use std::sync::Arc;

use futures::future::join_all;
use sinks_contract::envelope::Envelope;
use sinks_contract::sink::MessageOutcome;
use tokio::sync::watch;

use super::context::Ctx;
use super::heartbeat::progress;
use super::parking::HELD_BACK_MARGIN;
use super::settle::{record_settled, settle_one};
use crate::ack;
use crate::source::AckHandle;

/// Keeps parked messages alive (in-progress heartbeats well inside AckWait) and releases
/// the lots whose failed message is overdue by two AckWaits (one for a copy that another
/// process took and dropped, one to spare), until a stop is requested.
pub(super) async fn keep_parking(ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    let every = ctx.heartbeat_every();
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let handles = ctx.lock_parking().handles();
        tracing::trace!(messages = handles.len(), "heartbeat for held-back messages");
        progress(&handles).await;
        let overdue = {
            let mut parking = ctx.lock_parking();
            let overdue = parking.release(false, ctx.ack_wait.saturating_mul(2));
            ctx.note_parking(&parking);
            overdue
        };
        if !overdue.is_empty() {
            tracing::warn!(
                messages = overdue.len(),
                "the message these were held back for did not come back; releasing them for redelivery"
            );
            release_parked(&ctx, overdue).await;
        }
    }
}

/// Settles released held-back messages: NAKed to come back promptly (dead-lettered with
/// the reason on the consumer's last allowed delivery, when a DLQ is configured).
pub(super) async fn release_parked(ctx: &Ctx, parked: Vec<(Envelope, AckHandle)>) {
    let sends = parked.iter().map(|(envelope, ack)| {
        let settlement = ack::settle_held_back(envelope.jetstream().delivered, &ctx.policy, HELD_BACK_MARGIN);
        settle_one(ctx, envelope, ack, &MessageOutcome::HeldBack, settlement, None)
    });
    let settled = join_all(sends).await;
    let envelopes: Vec<&Envelope> = parked.iter().map(|(e, _)| e).collect();
    record_settled(ctx, &envelopes, &settled, None);
}
