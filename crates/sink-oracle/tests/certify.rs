//! The Oracle sink against the sink contract (docs/sink-contract.md), one test per clause:
//! `scripted` over the scripted driver seam (always runs; these are scripted results, not
//! passes against a database), `live` over the database named by
//! `NATS_SINKS_TEST_ORACLE_DSN` / `_USER` / `_PASSWORD` through Oracle Instant Client (without
//! them every clause is an allow-listed skip, `oracle-database`; named but unusable, every
//! clause fails).

mod scripted {
    sinks_certify::certify_tests!(sink_oracle::certify::ScriptedHarness);
}

mod live {
    sinks_certify::certify_tests!(sink_oracle::certify::LiveHarness::from_env().await);
}
