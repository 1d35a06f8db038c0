//! [`MemoryHarness`]: certifies [`MemorySink`], the reference implementation of the contract.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use super::{Fixture, Harness, Record, Records};
use crate::MemorySink;
use sinks_contract::Envelope;
use sinks_contract::sink::Sink;
use sinks_contract::testing::envelope;

/// Harness over fresh in-memory sinks.
#[derive(Debug, Default)]
pub struct MemoryHarness;

struct MemoryReadBack(Arc<MemorySink>);

#[async_trait]
impl Records for MemoryReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        Ok(self.0.records())
    }

    /// The memory sink stores the payload and nothing else: the record is the payload.
    async fn read_stored(&self) -> Result<Option<Vec<Record>>, String> {
        Ok(Some(self.0.records()))
    }
}

fn fixture(sink: Arc<MemorySink>) -> Fixture {
    Fixture { sink: Arc::clone(&sink) as Arc<dyn Sink>, records: Box::new(MemoryReadBack(sink)) }
}

#[async_trait]
impl Harness for MemoryHarness {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        Ok(fixture(Arc::new(MemorySink::new())))
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        let sink = Arc::new(MemorySink::new());
        let poison = Bytes::from_static(b"rejected by the memory sink");
        *sink.faults.poison_payload.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(poison.clone());
        Some((fixture(sink), envelope(super::CERT_STREAM, 7, "cert.poison", poison)))
    }

    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        Some(Ok(fixture(Arc::new(MemorySink::keyed_by(sinks_contract::idempotency::KeySource::OriginSequence)))))
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        let sink = MemorySink::new();
        sink.faults.unreachable.store(true, std::sync::atomic::Ordering::Relaxed);
        Some(Arc::new(sink))
    }
}
