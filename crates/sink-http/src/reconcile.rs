//! Reading the endpoint back for `nats-sink reconcile`, through `inquiry_url` only: one `GET`
//! per message's idempotency key, up to `max_concurrent_requests` at once; 404 is missing, a
//! 2xx is compared by payload fingerprint, from `inquiry_fingerprint_header` when the answer
//! has it, else by hashing the payload of the returned document (`request::stored_presence`).

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use reqwest::Url;
use sinks_contract::{Envelope, Presence, ReadBack, SinkError};

use crate::deliver::Inner;
use crate::error::{classify, error_of_class, kind_of};
use crate::request;
use crate::sink::HttpSink;

#[async_trait]
impl ReadBack for HttpSink {
    fn checks(&self) -> String {
        let c = &self.inner.config;
        format!(
            "GET sink.inquiry_url per idempotency key ({} in parallel): 404 is missing, a 2xx is compared by \
             payload fingerprint ({})",
            c.max_concurrent_requests,
            match &c.inquiry_fingerprint_header {
                Some(h) => format!("the `{h}` header, else the returned document's payload"),
                None => "the returned document's payload".to_owned(),
            }
        )
    }

    /// One inquiry per envelope, up to `max_concurrent_requests` in flight, in input order.
    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let inner = &self.inner;
        let Some(template) = inner.config.inquiry_url.as_deref() else {
            return Err(SinkError::config("the http sink needs sink.inquiry_url to read its endpoint back"));
        };
        let mut checks = Vec::with_capacity(batch.len());
        for envelope in batch {
            let check: std::pin::Pin<Box<dyn Future<Output = Result<Presence, SinkError>> + Send + '_>> =
                Box::pin(presence(inner, template, envelope));
            checks.push(check);
        }
        futures::stream::iter(checks).buffered(inner.config.max_concurrent_requests.max(1)).try_collect().await
    }
}

/// Whether `envelope` is stored at the endpoint with the same payload, per
/// `inquiry_url` (reconcile; reads only). A message without a key cannot be asked about
/// and is reported missing (only possible with `idempotency.required = false`).
async fn presence(inner: &Inner, template: &str, envelope: &Envelope) -> Result<Presence, SinkError> {
    let Ok(Some(key)) = request::idempotency_key(envelope, &inner.config.idempotency) else {
        return Ok(Presence::Missing);
    };
    let url = Url::parse(&request::inquiry_url(template, key.as_str()))
        .map_err(|e| SinkError::config(format!("sink.inquiry_url does not form a URL ({e})")))?;
    let headers = inner.endpoint.plain_headers()?;
    let mut response = inner.endpoint.client.get(url).headers(headers).send().await.map_err(|e| {
        let kind = kind_of(&e);
        error_of_class(kind.class, format!("inquiry failed: {}", kind.what)).with_source(e)
    })?;
    let status = response.status().as_u16();
    if status == 404 {
        return Ok(Presence::Missing);
    }
    if !(200..300).contains(&status) {
        tracing::warn!(
            status,
            stream_sequence = envelope.jetstream().stream_sequence,
            "inquiry answered an unexpected status"
        );
        return Err(SinkError::temporary(format!("inquiry answered {status}")));
    }
    let expected = request::sha256_hex(envelope.payload());
    if let Some(stored) = inner
        .endpoint
        .fingerprint_header
        .as_ref()
        .and_then(|name| response.headers().get(name))
        .and_then(|v| v.to_str().ok())
    {
        let same = stored.trim().eq_ignore_ascii_case(&expected);
        return Ok(if same { Presence::Equal } else { Presence::Different });
    }
    // The body decides: read it whole (up to max_response_bytes; a cut body differs).
    let limit = usize::try_from(inner.config.max_response_bytes).unwrap_or(usize::MAX);
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(classify)? {
        if body.len() + chunk.len() > limit {
            tracing::warn!(
                stream_sequence = envelope.jetstream().stream_sequence,
                max_response_bytes = inner.config.max_response_bytes,
                "inquiry answer too large to compare"
            );
            return Ok(Presence::Different);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(request::stored_presence(&body, &expected))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HttpSinkConfig;
    use sinks_contract::testing::envelope;

    #[tokio::test]
    async fn without_an_inquiry_url_reconcile_refuses_and_a_keyless_message_is_missing() {
        let sink = HttpSink::new(HttpSinkConfig::new("https://h.example/x")).unwrap();
        let e = sink.read(&[envelope("ORDERS", 1, "a", "{}")]).await.unwrap_err();
        assert!(e.to_string().contains("needs sink.inquiry_url"), "{e}");
        assert!(sink.checks().contains("the returned document's payload"));

        let mut c = HttpSinkConfig::new("https://h.example/x");
        c.inquiry_url = Some("https://h.example/x/{key}".into());
        c.inquiry_fingerprint_header = Some("x-sha256".into());
        c.idempotency.strategy = crate::config::KeyStrategy::MessageId;
        c.idempotency.required = false;
        let sink = HttpSink::new(c).unwrap();
        assert!(sink.checks().contains("the `x-sha256` header"), "{}", sink.checks());
        // No message id, so no key: nothing to ask, and no request is made.
        let found = sink.read(&[envelope("ORDERS", 1, "a", "{}")]).await.unwrap();
        assert_eq!(found, vec![Presence::Missing]);
    }
}
