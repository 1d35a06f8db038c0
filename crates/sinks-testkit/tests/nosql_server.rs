//! The NoSQL fault-injection server checked against the real Oracle NoSQL Database in every
//! run, so that it cannot drift from it:
//! - the official Python SDK `borneo` 5.5.0 (PyPI, installed by `cargo xtask setup` into the
//!   tools venv) runs the NoSQL sink's operations (table DDL, put / put if absent / put if
//!   present with return-row, get, the error cases) against KVLite 25.3.21 + proxy and against
//!   the fault server: the two transcripts must be equal, and equal to the one recorded when
//!   the fault server was written (`fixtures/nosql_borneo_live.json`);
//! - the same requests sent raw (NSON) to both: every field the fault server answers, at every
//!   depth, must be in the real proxy's answer with the same NSON type, and the error codes
//!   must be the same, errors answered inside HTTP 200 included (the fault server's injected
//!   errors are answered the same way as its TABLE_NOT_FOUND);
//! - the fault server's `stop` closes the port and `restart` keeps the rows.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use sinks_testkit::{NoSqlTestServer, Nson, nosql_request};

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

async fn kvlite(test: &str) -> String {
    sinks_testkit::shared_kvlite().await.unwrap_or_else(|reason| sinks_testkit::cannot_run(test, reason))
}

#[tokio::test]
async fn borneo_sees_the_same_on_kvlite_and_on_the_fault_server() {
    const TEST: &str = "borneo_sees_the_same_on_kvlite_and_on_the_fault_server";
    let python = borneo_python().unwrap_or_else(|reason| sinks_testkit::cannot_run(TEST, reason));
    let endpoint = kvlite(TEST).await;
    let server = NoSqlTestServer::start().unwrap();
    let table = format!("borneo_check_{}", std::process::id());
    let real = transcript(&python, &endpoint, &table);
    let emulated = transcript(&python, &server.endpoint(), &table);
    let recorded: serde_json::Value = serde_json::from_str(include_str!("fixtures/nosql_borneo_live.json")).unwrap();
    let (real, emulated) = (real.as_array().unwrap(), emulated.as_array().unwrap());
    assert_eq!(real.len(), emulated.len());
    for (want, got) in real.iter().zip(emulated) {
        assert_eq!(
            want,
            got,
            "step {}: KVLite (left) and the fault server (right) differ{}",
            want[0],
            sinks_testkit::kvlite_disk_note()
        );
    }
    assert_eq!(serde_json::Value::Array(real.clone()), recorded, "KVLite no longer answers as recorded");
}

/// Every field of `value` with its NSON type, by path (`p.ri.el`); array items as `[]`.
fn shape(value: &Nson, path: &str, out: &mut BTreeMap<String, &'static str>) {
    let kind = match value {
        Nson::Array(items) => {
            items.iter().for_each(|v| shape(v, &format!("{path}[]"), out));
            "array"
        }
        Nson::Map(entries) => {
            entries.iter().for_each(|(k, v)| shape(v, &format!("{path}.{k}"), out));
            "map"
        }
        Nson::Binary(_) => "binary",
        Nson::Boolean(_) => "boolean",
        Nson::Double(_) => "double",
        Nson::Integer(_) => "integer",
        Nson::Long(_) => "long",
        Nson::String(_) => "string",
        Nson::Timestamp(_) => "timestamp",
        Nson::Number(_) => "number",
        Nson::JsonNull => "json null",
        Nson::Null => "null",
        Nson::Empty => "empty",
    };
    out.insert(path.to_owned(), kind);
}

fn field(answer: &Nson, key: &str) -> Option<Nson> {
    match answer {
        Nson::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()),
        _ => None,
    }
}

fn code(answer: &Nson) -> i64 {
    match field(answer, "e") {
        Some(Nson::Integer(i)) => i64::from(i),
        Some(Nson::Long(l)) => l,
        _ => 0,
    }
}

fn text(s: &str) -> Nson {
    Nson::String(Some(s.to_owned()))
}

fn row(key: &str, v: i64) -> Nson {
    Nson::Map(vec![
        ("sink_key".into(), text(key)),
        ("event_json".into(), Nson::Map(vec![("v".into(), Nson::Long(v)), ("s".into(), text("ünï"))])),
        ("stored_at_epoch_ns".into(), Nson::Long(1)),
    ])
}

fn put(key: &str, v: i64, return_row: bool) -> Vec<(String, Nson)> {
    let mut payload = vec![("l".to_owned(), row(key, v))];
    if return_row {
        payload.push(("rr".into(), Nson::Boolean(true)));
    }
    payload
}

fn get(key: &str) -> Vec<(String, Nson)> {
    vec![
        ("co".to_owned(), Nson::Map(vec![("y".into(), Nson::Integer(0))])),
        ("k".into(), Nson::Map(vec![("sink_key".into(), text(key))])),
    ]
}

/// The answers of one service to the sink's operations, raw, in order and named.
async fn answers(endpoint: &str, table: &str) -> Vec<(&'static str, Nson)> {
    const GET: i32 = 2;
    const PUT: i32 = 3;
    const PUT_IF_ABSENT: i32 = 4;
    const PUT_IF_PRESENT: i32 = 5;
    const GET_TABLE: i32 = 11;
    const TABLE_REQUEST: i32 = 15;
    let call = |op: i32, name: &str, payload: Vec<(String, Nson)>| {
        let (endpoint, name) = (endpoint.to_owned(), name.to_owned());
        async move { nosql_request(&endpoint, op, &name, payload).await.unwrap() }
    };
    let ddl = |statement: String| vec![("st".to_owned(), text(&statement))];
    let columns = "(sink_key STRING, event_json JSON, stored_at_epoch_ns LONG, PRIMARY KEY(sink_key))";
    let mut out = Vec::new();
    let created = call(TABLE_REQUEST, "", ddl(format!("CREATE TABLE {table} {columns}"))).await;
    // Polled as the SDKs poll a DDL: with its operation id.
    let operation: Vec<(String, Nson)> = field(&created, "od").map(|id| ("od".to_owned(), id)).into_iter().collect();
    out.push(("create", created));
    let deadline = Instant::now() + Duration::from_secs(60);
    let active = loop {
        let answer = call(GET_TABLE, table, operation.clone()).await;
        if matches!(field(&answer, "as"), Some(Nson::Integer(0))) || Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    out.push(("get table with the operation id (active)", active));
    out.push(("get table", call(GET_TABLE, table, Vec::new()).await));
    out.push(("create again", call(TABLE_REQUEST, "", ddl(format!("CREATE TABLE {table} {columns}"))).await));
    out.push(("put", call(PUT, table, put("k1", 1, false)).await));
    out.push(("put if absent, taken, return row", call(PUT_IF_ABSENT, table, put("k1", 2, true)).await));
    out.push(("put if absent, new", call(PUT_IF_ABSENT, table, put("k2", 1, true)).await));
    out.push(("put if present, missing", call(PUT_IF_PRESENT, table, put("k3", 1, false)).await));
    out.push(("put, replacing, return row", call(PUT, table, put("k1", 3, true)).await));
    out.push(("get", call(GET, table, get("k1")).await));
    out.push(("get, missing row", call(GET, table, get("nope")).await));
    let no_key = vec![("l".to_owned(), Nson::Map(vec![("stored_at_epoch_ns".into(), Nson::Long(1))]))];
    out.push(("put without the primary key", call(PUT, table, no_key).await));
    out.push(("get, missing table", call(GET, &format!("{table}_missing"), get("k1")).await));
    out.push(("put, missing table", call(PUT, &format!("{table}_missing"), put("k1", 1, false)).await));
    out.push(("drop", call(TABLE_REQUEST, "", ddl(format!("DROP TABLE {table}"))).await));
    out
}

#[tokio::test]
async fn the_fault_server_answers_only_fields_kvlite_answers_with_the_same_types_and_codes() {
    let endpoint = kvlite("the_fault_server_answers_only_fields_kvlite_answers_with_the_same_types_and_codes").await;
    let server = NoSqlTestServer::start().unwrap();
    let table = format!("raw_check_{}", std::process::id());
    let real = answers(&endpoint, &table).await;
    let emulated = answers(&server.endpoint(), &table).await;
    let mut problems = Vec::new();
    for ((step, real), (_, emulated)) in real.iter().zip(&emulated) {
        if code(real) != code(emulated) {
            problems.push(format!(
                "{step}: error code {} on KVLite, {} on the fault server",
                code(real),
                code(emulated)
            ));
        }
        let (mut want, mut got) = (BTreeMap::new(), BTreeMap::new());
        shape(real, "", &mut want);
        shape(emulated, "", &mut got);
        for (path, kind) in &got {
            match want.get(path) {
                None => problems.push(format!("{step}: `{path}` ({kind}) is not in KVLite's answer {want:?}")),
                Some(real_kind) if real_kind != kind => {
                    problems.push(format!("{step}: `{path}` is {kind} on the fault server, {real_kind} on KVLite"));
                }
                Some(_) => {}
            }
        }
    }
    // The test catches a drift: a field KVLite never answers is found.
    let invented = Nson::Map(vec![("e".into(), Nson::Integer(0)), ("invented".into(), Nson::Boolean(true))]);
    let (mut want, mut got) = (BTreeMap::new(), BTreeMap::new());
    shape(&real[4].1, "", &mut want);
    shape(&invented, "", &mut got);
    assert!(got.keys().any(|k| !want.contains_key(k)), "the shape check sees nothing");
    assert!(problems.is_empty(), "the fault server drifted from KVLite:\n{}", problems.join("\n"));
    let code_of = |step: &str| real.iter().find(|(s, _)| *s == step).map(|(_, a)| code(a));
    assert_eq!(code_of("create again"), Some(9), "TABLE_EXISTS");
    assert_eq!(code_of("put without the primary key"), Some(4), "ILLEGAL_ARGUMENT");
    assert_eq!(code_of("get, missing table"), Some(2), "TABLE_NOT_FOUND");
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
