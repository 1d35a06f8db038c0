//! Reading a fault run back after the heal, without the sink: each node's copy of the stream
//! (JetStream direct gets through a client connected to that node alone, which the node's own
//! replica answers), the dead-letter stream, the ledger's receipts, the consumer's ack floor
//! and the destination's records; together with the producers' log they are the checker's
//! [`History`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use async_nats::jetstream::Context as Js;
use futures::StreamExt as _;

use super::check::{History, Record};
use super::faults::STREAM;

/// A stream's messages as `(sequence, event id)`.
pub(crate) type Copy = Vec<(u64, String)>;

/// Direct gets of every message of `stream`, a batch at a time, through `client` (connected
/// to one node alone, whose replica answers: a direct get is served by the replicas, the
/// local one first). Each message's id is its payload's `field` ([`event_id`]).
pub(crate) async fn direct_copy(client: &async_nats::Client, stream: &str, field: &str) -> Result<Copy> {
    let mut out = Vec::new();
    let mut next = 1u64;
    loop {
        let inbox = client.new_inbox();
        let mut replies = client.subscribe(inbox.clone()).await?;
        let request = serde_json::json!({"seq": next, "batch": 1000});
        client.publish_with_reply(format!("$JS.API.DIRECT.GET.{stream}"), inbox, request.to_string().into()).await?;
        let mut got = 0usize;
        loop {
            let message = tokio::time::timeout(Duration::from_secs(5), replies.next())
                .await
                .with_context(|| format!("no answer to a direct get of {stream} from {next}"))?
                .context("the direct get's subscription ended")?;
            if let Some(status) = message.status {
                let code = status.as_u16();
                if code == 204 || code == 404 {
                    break;
                }
                bail!("a direct get of {stream} from {next} answered {code}: {:?}", message.description);
            }
            let headers = message.headers.clone().unwrap_or_default();
            let seq: u64 = headers
                .get("Nats-Sequence")
                .and_then(|v| v.as_str().parse().ok())
                .context("a direct get's answer without Nats-Sequence")?;
            out.push((seq, event_id(&message.payload, field)));
            next = next.max(seq + 1);
            got += 1;
        }
        if got == 0 {
            return Ok(out);
        }
    }
}

/// The event id a message carries in its JSON payload's `field`: `id` in an event,
/// `message_id` in a dead-letter record or a receipt (the event's `Nats-Msg-Id`).
pub(crate) fn event_id(payload: &[u8], field: &str) -> String {
    let value: serde_json::Value = serde_json::from_slice(payload).unwrap_or_default();
    value[field].as_str().map_or_else(|| format!("<unreadable: {}>", String::from_utf8_lossy(payload)), str::to_owned)
}

/// A client connected to `url` alone (servers it hears of are not added).
pub(crate) async fn client_of(url: &str) -> Result<async_nats::Client> {
    async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .ignore_discovered_servers()
        .connect(url)
        .await
        .with_context(|| format!("connecting to {url}"))
}

/// The events the ledger's receipts name (every outcome: the sink settled each one).
pub(crate) fn receipts(copy: &Copy) -> BTreeSet<String> {
    copy.iter().map(|(_, id)| id.clone()).collect()
}

/// What the destination holds, as the checker's records (key, event id, payload digest).
pub(crate) fn records(stored: Vec<(String, bytes::Bytes)>) -> Vec<Record> {
    stored
        .into_iter()
        .map(|(key, payload)| Record { event: event_id(&payload, "id"), digest: digest(&payload), key })
        .collect()
}

/// A digest of `payload` (equal payloads, equal digests).
fn digest(payload: &[u8]) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    payload.hash(&mut hasher);
    format!("{:016x}-{}", hasher.finish(), payload.len())
}

/// Everything but the producers' log, read after the heal: each node's copy through its own
/// client, the dead letters and receipts (through `js`), the events at or below the
/// consumer's ack floor (acknowledged by the sink), and `stored`, the destination's records.
pub(crate) async fn history(
    js: &Js,
    node_urls: &[String],
    dlq: &str,
    ledger: &str,
    stored: Vec<(String, bytes::Bytes)>,
) -> Result<(History, BTreeMap<String, usize>)> {
    let mut history = History::default();
    let mut sizes = BTreeMap::new();
    let mut served: Copy = Vec::new();
    // A replica just healed may still be catching up: a copy is read again (up to a minute)
    // until it reaches the leader's last sequence, so a replica's lag is not taken for a loss.
    let last = js.get_stream(STREAM).await?.info().await?.state.last_sequence;
    for (i, url) in node_urls.iter().enumerate() {
        let client = client_of(url).await?;
        let began = std::time::Instant::now();
        let copy = loop {
            let copy = direct_copy(&client, STREAM, "id").await.with_context(|| format!("reading n{i}'s copy"))?;
            let reached = copy.last().is_some_and(|(seq, _)| *seq >= last);
            if reached || began.elapsed() > Duration::from_secs(60) {
                break copy;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        sizes.insert(format!("n{i}"), copy.len());
        if copy.len() > served.len() {
            served.clone_from(&copy);
        }
        history.copies.insert(format!("n{i}"), copy.into_iter().map(|(_, id)| id).collect());
    }
    let client = js.client();
    history.dead_lettered =
        receipts(&direct_copy(&client, dlq, "message_id").await.context("reading the dead letters")?);
    let mut acked = receipts(&direct_copy(&client, ledger, "message_id").await.context("reading the receipts")?);
    let floor = super::faults::consumer_info(js)
        .await
        .map(|i| i.ack_floor.stream_sequence)
        .context("reading the consumer's ack floor")?;
    acked.extend(served.iter().filter(|(seq, _)| *seq <= floor).map(|(_, id)| id.clone()));
    history.sink_acked = acked;
    history.records = records(stored);
    Ok((history, sizes))
}
