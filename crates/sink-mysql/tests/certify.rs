//! The MySQL sink against the sink contract (docs/sink-contract.md) on a private MariaDB
//! (the run's shared server, or one started for this test process), one test per clause. A
//! clause that cannot run fails. Then the crash clauses K1 and K2 with the real `nats-sink`
//! (`sinks_testkit::crash`).

use sink_mysql::certify::{MySqlHarness, TestServer};

fn harness() -> MySqlHarness {
    match sinks_testkit::shared_mysql() {
        Ok(addr) => MySqlHarness::new(TestServer::new(addr.host, addr.port)),
        Err(reason) => MySqlHarness::unavailable(reason),
    }
}

sinks_certify::certify_tests!(harness());
sinks_testkit::crash_tests!(harness());
