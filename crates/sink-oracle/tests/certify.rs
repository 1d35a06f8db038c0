//! The Oracle sink against the sink contract (docs/sink-contract.md), one test per clause:
//! `scripted` over the scripted driver seam (always runs; these are scripted results, not
//! passes against a database), `live` over the database named by
//! `NATS_SINKS_TEST_ORACLE_DSN` / `_USER` / `_PASSWORD` through Oracle Instant Client (without
//! them every clause is an allow-listed skip, `oracle-database`; named but unusable, every
//! clause fails). The crash clauses K1 and K2 of both are the allow-listed skip
//! (`oracle-database`) without a database.

mod scripted {
    sinks_certify::certify_tests!(sink_oracle::certify::ScriptedHarness);
    sinks_testkit::crash_tests!(sink_oracle::certify::ScriptedHarness);
}

mod live {
    sinks_certify::certify_tests!(sink_oracle::certify::LiveHarness::from_env().await);
    sinks_testkit::crash_tests!(sink_oracle::certify::LiveHarness::from_env().await);
}
