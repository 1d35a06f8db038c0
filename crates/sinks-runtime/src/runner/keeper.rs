//! The keeper: the background task that heartbeats held-back messages and releases the lots
//! whose failed message did not come back in time; and [`release`], which the keeper and the
//! shutdown share to settle released lots.

use std::sync::Arc;
use std::time::Duration;

use sinks_contract::sink::MessageOutcome;
use tokio::sync::watch;

use super::context::Ctx;
use super::handle::Handle;
use super::heartbeat::progress;
use super::settle::{self, Cause, Planned};

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
        let overdue = release(&ctx, false, ctx.ack_wait.saturating_mul(2));
        if !overdue.is_empty() {
            tracing::warn!(
                messages = overdue.len(),
                "the message these were held back for did not come back; releasing them for redelivery"
            );
            settle::apply(&ctx, overdue).await;
        }
    }
}

/// Takes the lots overdue by `grace` (every lot when `all`) out of the parking and plans
/// their messages' settlements: NAKed to come back promptly (dead-lettered with the reason on
/// the consumer's last allowed delivery, when a DLQ is configured).
pub(super) fn release(ctx: &Ctx, all: bool, grace: Duration) -> Planned<Handle> {
    let mut parking = ctx.lock_parking();
    let released = parking.release(all, grace);
    let outcomes = std::iter::repeat_with(|| MessageOutcome::HeldBack).take(released.len()).collect();
    let planned = settle::planner(ctx).plan(&mut parking, released, outcomes, Cause::Released);
    ctx.note_parking(&parking);
    planned
}
