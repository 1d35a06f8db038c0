//! The certification suite's self-test: the in-memory sink keeps every clause, run as one
//! test per clause so a failure names its clause.

use sinks_certify::{self as certify, MemoryHarness, Outcome};

sinks_certify::certify_tests!(MemoryHarness);

/// A harness whose destination is missing: allow-listed, or not.
struct Missing(&'static str);

#[async_trait::async_trait]
impl certify::Harness for Missing {
    fn name(&self) -> &'static str {
        "missing"
    }
    fn unavailable(&self) -> Option<certify::Unavailable> {
        Some(certify::Unavailable { allowed: self.0, detail: "nothing to connect to".into() })
    }
    async fn fresh(&self) -> Result<certify::Fixture, String> {
        Err("nothing to connect to".into())
    }
}

/// The memory sink, offered with its own keys only (no destination keyed by origin).
struct WithoutOriginKeys;

#[async_trait::async_trait]
impl certify::Harness for WithoutOriginKeys {
    fn name(&self) -> &'static str {
        "without-origin-keys"
    }
    async fn fresh(&self) -> Result<certify::Fixture, String> {
        certify::Harness::fresh(&MemoryHarness).await
    }
}

#[tokio::test]
async fn run_all_reports_every_clause_in_order() {
    // An unavailable harness: run_all reports every clause without running any.
    let report = certify::run_all(&Missing(certify::skips::ORACLE_DATABASE)).await;
    let ids: Vec<&str> = report.cases.iter().map(|c| c.id.as_str()).collect();
    let clauses: Vec<&str> = certify::CLAUSES.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(ids, clauses);
    assert!(report.passed(), "allow-listed skips are not failures");
}

#[tokio::test]
async fn only_an_allow_listed_reason_skips_a_clause() {
    let allowed = certify::run_case(&Missing(certify::skips::ORACLE_DATABASE), "C1").await;
    assert!(
        matches!(&allowed.outcome, Outcome::Skip { allowed, .. } if allowed == certify::skips::ORACLE_DATABASE),
        "{:?}",
        allowed.outcome
    );
    let refused = certify::run_case(&Missing("no-mariadb-here"), "C1").await;
    assert!(matches!(refused.outcome, Outcome::Fail(_)), "an id off the allow-list fails: {:?}", refused.outcome);
    // assert_case fails the test for that, and records nothing.
    let failed = std::panic::catch_unwind(|| certify::assert_case("missing", &refused));
    assert!(failed.is_err());
}

/// A sink that breaks the contract in configurable ways, to prove the cases can fail.
mod broken {
    use std::sync::Arc;

    use async_trait::async_trait;
    use sinks_certify::MemorySink;
    use sinks_certify::{Fixture, Harness, Record, Records};
    use sinks_contract::{BatchResult, Envelope, MessageOutcome, Sink, SinkError};

    #[derive(Debug, Clone, Copy)]
    pub(crate) enum Flaw {
        /// Reports every third envelope committed without storing it.
        DropsWrites,
        /// Reports a permanent failure when its destination is unreachable.
        PermanentWhenDown,
        /// Logs payloads.
        LogsPayloads,
        /// Returns one outcome too few.
        Misaligned,
        /// Acknowledges a different event under a reused stream sequence as a conflict that
        /// kept the stored record (what every sink did before `sequence_reused`).
        KeepsReusedSequence,
        /// Ignores the stream's epoch: keys by stream name and sequence only.
        IgnoresEpoch,
        /// Stores the delivery count with the payload (a document with this delivery's facts):
        /// a redelivery sends other content under the same key.
        StoresDeliveryFacts,
        /// Overwrites the stored record on every delivery with this delivery's facts.
        OverwritesWithDeliveryFacts,
        /// Offered keyed by origin, keys by the delivering stream's sequence all the same.
        KeysByDeliveredStream,
        /// Keyed by origin, stores the delivering stream's name with the payload: the event
        /// through a mirror sends other content under its one key.
        StoresThePath,
        /// Keyed by origin, overwrites the record with the delivering stream's name.
        OverwritesWithThePath,
        /// Keyed by origin, writes a message whose origin cannot be told under its delivered
        /// stream's key.
        GuessesUnresolvedOrigins,
    }

    #[derive(Debug)]
    pub(crate) struct Broken {
        inner: Arc<MemorySink>,
        flaw: Flaw,
        down: bool,
    }

    #[async_trait]
    impl Sink for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        async fn write(&self, batch: &[Envelope], _budget: std::time::Duration) -> BatchResult {
            if self.down {
                return match self.flaw {
                    Flaw::PermanentWhenDown => Err(SinkError::permanent("down")),
                    _ => Err(SinkError::temporary("down")),
                };
            }
            if let Flaw::LogsPayloads = self.flaw {
                for e in batch {
                    tracing::debug!(payload = %String::from_utf8_lossy(e.payload()), "writing");
                }
            }
            let mut outcomes = Vec::new();
            for (i, e) in batch.iter().enumerate() {
                if matches!(self.flaw, Flaw::DropsWrites) && i % 3 == 2 {
                    outcomes.push(MessageOutcome::Committed);
                } else if matches!(self.flaw, Flaw::StoresDeliveryFacts) {
                    let mut payload = e.payload().to_vec();
                    payload.extend_from_slice(format!(" delivered={}", e.jetstream().delivered).as_bytes());
                    let stamped = e.clone().with_payload(payload.into());
                    outcomes.extend(
                        self.inner.write(std::slice::from_ref(&stamped), sinks_contract::DEFAULT_BUDGET).await?,
                    );
                } else if matches!(self.flaw, Flaw::OverwritesWithDeliveryFacts) {
                    let key = e.idempotency_key().map(|k| k.to_string()).unwrap_or_default();
                    let mut payload = e.payload().to_vec();
                    payload.extend_from_slice(format!(" received={}", e.received_at()).as_bytes());
                    self.inner.set(&key, Some(payload.into()));
                    outcomes.push(MessageOutcome::Committed);
                } else if matches!(self.flaw, Flaw::StoresThePath) {
                    let mut payload = e.payload().to_vec();
                    payload.extend_from_slice(format!(" via={}", e.jetstream().stream).as_bytes());
                    let stamped = e.clone().with_payload(payload.into());
                    outcomes.extend(
                        self.inner.write(std::slice::from_ref(&stamped), sinks_contract::DEFAULT_BUDGET).await?,
                    );
                } else if matches!(self.flaw, Flaw::OverwritesWithThePath) {
                    let key = sinks_contract::IdempotencyKey::origin_sequence(e).map(|k| k.to_string());
                    let mut payload = e.payload().to_vec();
                    if e.origin().is_some() {
                        payload.extend_from_slice(format!(" via={}", e.jetstream().stream).as_bytes());
                    }
                    match key {
                        Ok(key) => {
                            self.inner.set(&key, Some(payload.into()));
                            outcomes.push(MessageOutcome::Committed);
                        }
                        Err(err) => outcomes.push(MessageOutcome::Failed(SinkError::permanent(err.to_string()))),
                    }
                } else if matches!(self.flaw, Flaw::GuessesUnresolvedOrigins) {
                    let guessed = match e.origin() {
                        Some(sinks_contract::envelope::Origin::Unresolved(_)) => e.clone().with_origin(None),
                        _ => e.clone(),
                    };
                    outcomes.extend(
                        self.inner.write(std::slice::from_ref(&guessed), sinks_contract::DEFAULT_BUDGET).await?,
                    );
                } else if matches!(self.flaw, Flaw::IgnoresEpoch) {
                    let plain = e.clone().with_stream_epoch(None);
                    outcomes
                        .extend(self.inner.write(std::slice::from_ref(&plain), sinks_contract::DEFAULT_BUDGET).await?);
                } else {
                    let mut got = self.inner.write(std::slice::from_ref(e), sinks_contract::DEFAULT_BUDGET).await?;
                    if matches!(self.flaw, Flaw::KeepsReusedSequence)
                        && matches!(&got[..], [MessageOutcome::Failed(e)] if e.is_permanent())
                    {
                        got = vec![MessageOutcome::Conflict(sinks_contract::ConflictResolution::KeptExisting)];
                    }
                    outcomes.extend(got);
                }
            }
            if matches!(self.flaw, Flaw::Misaligned) && !outcomes.is_empty() {
                outcomes.pop();
            }
            Ok(outcomes)
        }
        async fn health_check(&self) -> Result<(), SinkError> {
            if self.down { Err(SinkError::temporary("down")) } else { Ok(()) }
        }
    }

    struct Reader(Arc<MemorySink>);

    #[async_trait]
    impl Records for Reader {
        async fn read_all(&self) -> Result<Vec<Record>, String> {
            Ok(self.0.records())
        }
        async fn read_stored(&self) -> Result<Option<Vec<Record>>, String> {
            Ok(Some(self.0.records()))
        }
    }

    pub(crate) struct BrokenHarness(pub(crate) Flaw);

    #[async_trait]
    impl Harness for BrokenHarness {
        fn name(&self) -> &'static str {
            "broken"
        }
        async fn fresh(&self) -> Result<Fixture, String> {
            let inner = Arc::new(MemorySink::new());
            let sink = Arc::new(Broken { inner: Arc::clone(&inner), flaw: self.0, down: false });
            Ok(Fixture { sink, records: Box::new(Reader(inner)) })
        }
        async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
            let inner = Arc::new(match self.0 {
                Flaw::KeysByDeliveredStream => MemorySink::new(),
                _ => MemorySink::keyed_by(sinks_contract::idempotency::KeySource::OriginSequence),
            });
            let sink = Arc::new(Broken { inner: Arc::clone(&inner), flaw: self.0, down: false });
            Some(Ok(Fixture { sink, records: Box::new(Reader(inner)) }))
        }
        async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
            Some(Arc::new(Broken { inner: Arc::new(MemorySink::new()), flaw: self.0, down: true }))
        }
    }
}

#[tokio::test]
async fn the_cases_catch_broken_sinks() {
    use broken::{BrokenHarness, Flaw};
    for (flaw, clause) in [
        (Flaw::DropsWrites, "C1"),
        (Flaw::Misaligned, "C2"),
        (Flaw::PermanentWhenDown, "C7"),
        (Flaw::LogsPayloads, "C11"),
        (Flaw::KeepsReusedSequence, "C12"),
        (Flaw::IgnoresEpoch, "C12"),
        (Flaw::StoresDeliveryFacts, "C13"),
        (Flaw::OverwritesWithDeliveryFacts, "C13"),
        (Flaw::KeysByDeliveredStream, "C14"),
        (Flaw::StoresThePath, "C14"),
        (Flaw::OverwritesWithThePath, "C14"),
        (Flaw::GuessesUnresolvedOrigins, "C14"),
    ] {
        let result = certify::run_case(&BrokenHarness(flaw), clause).await;
        assert!(matches!(result.outcome, Outcome::Fail(_)), "{flaw:?} must fail {clause}, got {:?}", result.outcome);
    }
    // A harness that cannot make a poison message cannot show C6: that fails, never skips.
    let cannot = certify::run_case(&BrokenHarness(Flaw::DropsWrites), "C6").await;
    assert!(matches!(&cannot.outcome, Outcome::Fail(r) if r.starts_with("cannot run")), "{:?}", cannot.outcome);
    // Nor can one without a destination keyed by origin show C14.
    let cannot = certify::run_case(&WithoutOriginKeys, "C14").await;
    assert!(matches!(&cannot.outcome, Outcome::Fail(r) if r.starts_with("cannot run")), "{:?}", cannot.outcome);
}
