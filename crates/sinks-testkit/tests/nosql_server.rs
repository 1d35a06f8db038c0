//! The NoSQL test server validated by an official client: the Python SDK `borneo` 5.5.0
//! (PyPI, installed by `cargo xtask setup` into the tools venv) runs the NoSQL sink's
//! operations against it (table DDL, put / put if absent / put if present with return-row,
//! get, the error cases) and must see exactly what it saw against a real KVLite 25.3.21 +
//! HTTP proxy (`fixtures/nosql_borneo_live.json`, recorded by the same script). Also: stop
//! and restart keep rows and close the port in between.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use std::process::Command;

use sinks_testkit::NoSqlTestServer;

fn borneo_python() -> Result<std::path::PathBuf, String> {
    let python = sinks_testkit::tools_dir().join("venv/bin/python");
    let ok = Command::new(&python).args(["-c", "import borneo"]).output().map(|o| o.status.success()).unwrap_or(false);
    if ok {
        Ok(python)
    } else {
        Err(format!("borneo is not installed in {} (run `cargo xtask setup`)", python.display()))
    }
}

fn transcript(python: &std::path::Path, endpoint: &str, table: &str) -> serde_json::Value {
    let script = sinks_testkit::workspace_root().join("crates/sinks-testkit/tests/nosql_borneo_check.py");
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(python).arg(script).arg(endpoint).arg(table).current_dir(scratch.path()).output().unwrap();
    assert!(out.status.success(), "borneo check failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn borneo_sees_what_it_saw_against_a_real_proxy() {
    let python = borneo_python()
        .unwrap_or_else(|reason| sinks_testkit::cannot_run("borneo_sees_what_it_saw_against_a_real_proxy", reason));
    let golden: serde_json::Value = serde_json::from_str(include_str!("fixtures/nosql_borneo_live.json")).unwrap();
    let server = NoSqlTestServer::start().unwrap();
    let seen = transcript(&python, &server.endpoint(), "borneo_check_t");
    let (golden, seen) = (golden.as_array().unwrap(), seen.as_array().unwrap());
    assert_eq!(golden.len(), seen.len());
    for (want, got) in golden.iter().zip(seen) {
        assert_eq!(want, got, "step {}", want[0]);
    }
}

#[test]
fn borneo_against_a_live_proxy_matches_the_recording() {
    const TEST: &str = "borneo_against_a_live_proxy_matches_the_recording";
    let Some(endpoint) =
        sinks_testkit::env_or_allowed_skip(sinks_testkit::NOSQL_LIVE_ENV, sinks_testkit::ORACLE_NOSQL_PROXY, TEST)
    else {
        return;
    };
    let python = borneo_python().unwrap_or_else(|reason| sinks_testkit::cannot_run(TEST, reason));
    let golden: serde_json::Value = serde_json::from_str(include_str!("fixtures/nosql_borneo_live.json")).unwrap();
    let table = format!("borneo_live_{}", std::process::id());
    assert_eq!(transcript(&python, &endpoint, &table), golden);
}

#[test]
fn stop_closes_the_port_and_restart_keeps_the_rows() {
    let server = NoSqlTestServer::start().unwrap();
    let addr = format!("127.0.0.1:{}", server.port());
    assert!(std::net::TcpStream::connect(&addr).is_ok());
    server.stop();
    assert!(std::net::TcpStream::connect(&addr).is_err(), "stopped server still accepts");
    server.restart().unwrap();
    assert!(std::net::TcpStream::connect(&addr).is_ok());
    assert_eq!(server.rows("nothing"), None);
}
