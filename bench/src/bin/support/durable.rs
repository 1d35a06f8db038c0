//! The durable explicit-ack pull consumer the raw benchmark loops bind: `raw_consume`,
//! `raw_mysql`, `raw_ceiling` and `raw_lake` each include this file (`#[path]`), so the four
//! ceilings consume through the same consumer settings.

use async_nats::jetstream::Context;
use async_nats::jetstream::consumer::{AckPolicy, PullConsumer, pull};

/// Binds (or creates) the durable consumer `name` on `stream`, with explicit acks and, when
/// given, `max_ack_pending` (else the server's default).
pub(crate) async fn bind(
    js: &Context,
    stream: &str,
    name: &str,
    max_ack_pending: Option<i64>,
) -> Result<PullConsumer, async_nats::Error> {
    let mut config =
        pull::Config { durable_name: Some(name.to_owned()), ack_policy: AckPolicy::Explicit, ..Default::default() };
    if let Some(limit) = max_ack_pending {
        config.max_ack_pending = limit;
    }
    Ok(js.get_stream(stream).await?.get_or_create_consumer(name, config).await?)
}
