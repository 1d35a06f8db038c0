//! The chaos soak as a test of the run (`cargo xtask test` runs it in nextest's slots beside
//! the other tests): a short seeded soak of the file and HTTP sinks, with the `nats-sink`
//! this test build made, for `NATS_SINKS_SOAK_MINUTES` (2 by default; `cargo xtask test
//! --full` asks for 10). The soak fails on any violation (a message lost, stored twice, or
//! dead-lettered although stored for a permanent reason); its table is in
//! `target/soak/report.md`. `cargo xtask soak` runs the long one (docs/reliability.md).

use std::process::Command;

#[test]
fn a_seeded_chaos_soak_of_the_file_and_http_sinks_loses_and_doubles_nothing() {
    let minutes = match std::env::var(sinks_testkit::SOAK_MINUTES_ENV) {
        Ok(text) => text
            .trim()
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{}={text:?} is not a number of minutes", sinks_testkit::SOAK_MINUTES_ENV)),
        Err(_) => sinks_testkit::SOAK_CI_MINUTES,
    };
    let bin = sinks_testkit::debug_nats_sink();
    assert!(bin.is_file(), "no nats-sink binary at {} (build it: cargo build -p sinks-bin)", bin.display());
    let status = Command::new(env!("CARGO_BIN_EXE_sinks-bench"))
        .args(["soak", &format!("--minutes={minutes}"), "--seed=1", "--sinks=file,http", "--rate=200"])
        .arg("--bin")
        .arg(&bin)
        .status()
        .unwrap_or_else(|e| panic!("cannot run sinks-bench: {e}"));
    assert!(status.success(), "the soak failed ({status}): its output above names each violation");
}
