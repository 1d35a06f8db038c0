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

/// A copy's size as the report gives it: its messages, its last sequence, and the sequences
/// up to the leader's `last` it lacks (a copy that lags, or holes in it).
pub(crate) fn copy_size(copy: &Copy, last: u64) -> String {
    let top = copy.last().map_or(0, |(seq, _)| *seq);
    let first = copy.first().map_or(1, |(seq, _)| *seq);
    let missing = (last.max(top) + 1).saturating_sub(first).saturating_sub(copy.len() as u64);
    format!("{} (sequences {first}..={top} of the leader's {last}, {missing} missing)", copy.len())
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
) -> Result<(History, BTreeMap<String, String>)> {
    let mut history = History::default();
    let mut sizes = BTreeMap::new();
    let mut served: Copy = Vec::new();
    // A replica just healed may still be catching up: a copy is read again (up to a minute)
    // until it reaches the leader's last sequence, so a replica's lag is not taken for a loss.
    let state = js.get_stream(STREAM).await?.info().await?.state.clone();
    let last = state.last_sequence;
    // The leader's own count: holes it knows of are in `num_deleted`, so a copy's missing
    // sequences are the stream's (not the reading's) when the two agree.
    sizes.insert(
        "the leader's stream info".to_owned(),
        format!(
            "{} messages in {}..={last}, {} deleted",
            state.messages,
            state.first_sequence,
            state.deleted_count.unwrap_or(0)
        ),
    );
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
        sizes.insert(format!("n{i}"), copy_size(&copy, last));
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

#[cfg(test)]
mod tests {
    use async_nats::jetstream::stream;

    use super::*;

    /// A copy read through direct gets holds every message the stream holds, across a
    /// deleted one and past the first batch.
    #[tokio::test]
    async fn a_copy_reads_past_holes_and_batches() {
        let server = sinks_testkit::NatsServer::start();
        let js = server.js().await;
        let name = sinks_testkit::unique("COPY");
        let subject = format!("{}.events", name.to_lowercase());
        let stream = js
            .create_stream(stream::Config {
                name: name.clone(),
                subjects: vec![subject.clone()],
                allow_direct: true,
                ..Default::default()
            })
            .await
            .unwrap();
        for i in 1..=1500 {
            js.publish(subject.clone(), format!("{{\"id\":\"e{i}\"}}").into()).await.unwrap().await.unwrap();
        }
        for seq in [1, 500, 1000, 1001] {
            stream.delete_message(seq).await.unwrap();
        }
        let copy = direct_copy(&server.client().await, &name, "id").await.unwrap();
        assert_eq!(copy.len(), 1496);
        assert_eq!(copy.first().map(|(s, _)| *s), Some(2));
        assert_eq!(copy.last().cloned(), Some((1500, "e1500".to_owned())));
        assert!(!copy.iter().any(|(s, _)| [500, 1000, 1001].contains(s)));
        assert_eq!(copy_size(&copy, 1500), "1496 (sequences 2..=1500 of the leader's 1500, 3 missing)");
        assert_eq!(copy_size(&copy, 1510), "1496 (sequences 2..=1500 of the leader's 1510, 13 missing)");
    }
}
