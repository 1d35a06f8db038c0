//! The Oracle NoSQL fault-injection server: the HTTP proxy's protocol (`POST /V2/nosql/data`,
//! NSON version 4) for exactly the operations the NoSQL sink uses, over an in-memory store,
//! for what a real store cannot be made to do on demand.
//!
//! Every NoSQL test that needs no fault runs against the real Oracle NoSQL Database (KVLite +
//! the HTTP proxy, [`crate::KvLite`]). This server stays for the faults: throttling and other
//! error codes answered inside HTTP 200 for chosen requests ([`NoSqlTestServer::fail_next`]),
//! and a reply lost after the put committed ([`NoSqlTestServer::drop_replies_after_commit`]).
//! Each behaviour it emulates is checked against the real server in every run, so it cannot
//! drift: the official Python SDK `borneo` runs the same operations (table DDL, put / put if
//! absent / put if present with return-row, get, the error cases) against it and against
//! KVLite and must see the same transcript (`tests/nosql_server.rs`), and a raw check there
//! compares the field names and types of the answers, error answers included. Written from the
//! protocol facts (NSON type codes, packed integers, request/response fields, error codes),
//! not from Oracle's code.
//!
//! What it implements:
//! - table DDL (`TABLE_REQUEST`): `CREATE TABLE [IF NOT EXISTS] name (col TYPE, …,
//!   PRIMARY KEY([SHARD(]col[)]))` (answered CREATING with an operation id, then ACTIVE on
//!   the next `GET_TABLE`, like the proxy) and `DROP TABLE [IF EXISTS] name`; `GET_TABLE`
//!   with the schema document;
//! - `GET` (absolute or eventual: the same here), `PUT`, `PUT_IF_ABSENT`, `PUT_IF_PRESENT`
//!   with return-row (`ri.el`, `ri.ev`, `ri.em`), versions, and the errors TABLE_NOT_FOUND
//!   (2), ILLEGAL_ARGUMENT (4: missing or mistyped primary key, wrong column types),
//!   TABLE_EXISTS (9); other operations answer OPERATION_NOT_SUPPORTED (21);
//! - HTTP 200 with the error inside the body, the echoed `x-nosql-request-id`;
//! - the durability each put asked for (the NSON field `du`), recorded for tests
//!   ([`NoSqlTestServer::put_durabilities`]);
//! - faults for tests: error codes injected into the next data requests, replies dropped
//!   after a put committed (the connection closes before the body), `stop()` (every socket
//!   closed: the port refuses connections) and `restart()` on the same port with the same
//!   rows;
//! - a side channel for read-backs that bypass the sink: `GET /_test/rows/<table>` returns
//!   the rows as a JSON array; `DELETE /_test/rows/<table>/<key>` removes the row of that
//!   primary key.
//!
//! Each server runs on its own thread and runtime, so it outlives the test runtime that
//! started it and `stop()` really closes every connection. It starts in about a millisecond;
//! a fault test starts its own, so that its faults hit only it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

// ---------------------------------------------------------------------------------------
// NSON values

/// One NSON value. Maps keep their insertion order.
#[derive(Debug, Clone, PartialEq)]
pub enum Nson {
    /// Type 0.
    Array(Vec<Self>),
    /// Type 1.
    Binary(Vec<u8>),
    /// Type 2.
    Boolean(bool),
    /// Type 3.
    Double(f64),
    /// Type 4.
    Integer(i32),
    /// Type 5.
    Long(i64),
    /// Type 6.
    Map(Vec<(String, Self)>),
    /// Type 7 (a null string is `None`).
    String(Option<String>),
    /// Type 8, as its ISO text.
    Timestamp(String),
    /// Type 9, as its decimal text.
    Number(String),
    /// Type 10.
    JsonNull,
    /// Type 11.
    Null,
    /// Type 12.
    Empty,
}

impl Nson {
    /// The value of `key` in a map.
    pub(crate) fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Self::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// An integer or long as `i64`.
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self {
            Self::Integer(i) => Some(i64::from(*i)),
            Self::Long(l) => Some(*l),
            _ => None,
        }
    }

    /// A non-null string's text.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(Some(s)) => Some(s),
            _ => None,
        }
    }

    /// A non-null string.
    pub(crate) fn str(s: impl Into<String>) -> Self {
        Self::String(Some(s.into()))
    }

    /// The value as JSON (binary as an array of bytes, numbers exact where JSON allows).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Self::Array(items) => Value::Array(items.iter().map(Self::to_json).collect()),
            Self::Binary(b) => Value::Array(b.iter().map(|x| Value::from(*x)).collect()),
            Self::Boolean(b) => Value::Bool(*b),
            Self::Double(d) => serde_json::Number::from_f64(*d).map_or(Value::Null, Value::Number),
            Self::Integer(i) => Value::from(*i),
            Self::Long(l) => Value::from(*l),
            Self::Map(entries) => Value::Object(entries.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
            Self::String(Some(s)) | Self::Timestamp(s) => Value::String(s.clone()),
            Self::Number(n) => serde_json::from_str(n).unwrap_or_else(|_| Value::String(n.clone())),
            Self::String(None) | Self::JsonNull | Self::Null | Self::Empty => Value::Null,
        }
    }
}

/// Writes `v` as a "sorted packed" long (PackedInteger's sortable variable-length form).
pub(crate) fn write_packed_long(out: &mut Vec<u8>, v: i64) {
    if (-119..=120).contains(&v) {
        out.push((v + 127) as u8);
    } else if v > 120 {
        let x = (v - 121) as u64;
        let n = (8 - (x.leading_zeros() / 8) as usize).max(1);
        out.push(0xF7 + n as u8);
        out.extend_from_slice(&x.to_be_bytes()[8 - n..]);
    } else {
        let x = v + 119; // negative
        let mut n = 1;
        while n < 8 && (x >> (8 * n)) != -1 {
            n += 1;
        }
        out.push(0x08 - n as u8);
        out.extend_from_slice(&x.to_be_bytes()[8 - n..]);
    }
}

/// Reads a "sorted packed" long.
fn read_packed_long(input: &mut &[u8]) -> Result<i64, String> {
    let first = take(input, 1)?[0];
    match first {
        0x08..=0xF7 => Ok(i64::from(first) - 127),
        0xF8..=0xFF => {
            let n = usize::from(first - 0xF7);
            let bytes = take(input, n)?;
            let x = bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
            Ok((x as i64).wrapping_add(121))
        }
        _ => {
            let n = usize::from(0x08 - first);
            let bytes = take(input, n)?;
            let x = bytes.iter().fold(-1i64, |acc, b| (acc << 8) | i64::from(*b));
            Ok(x - 119)
        }
    }
}

fn take<'a>(input: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
    if input.len() < n {
        return Err("truncated nson".into());
    }
    let (head, tail) = input.split_at(n);
    *input = tail;
    Ok(head)
}

fn read_i32(input: &mut &[u8]) -> Result<i32, String> {
    let b = take(input, 4)?;
    Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn read_string(input: &mut &[u8]) -> Result<Option<String>, String> {
    let len = read_packed_long(input)?;
    if len < 0 {
        return Ok(None);
    }
    let bytes = take(input, usize::try_from(len).map_err(|_| "bad length")?)?;
    String::from_utf8(bytes.to_vec()).map(Some).map_err(|_| "string is not utf-8".into())
}

/// Decodes one NSON value.
pub(crate) fn read_value(input: &mut &[u8]) -> Result<Nson, String> {
    let kind = take(input, 1)?[0];
    Ok(match kind {
        0 | 6 => {
            let len = usize::try_from(read_i32(input)?).map_err(|_| "bad length")?;
            let mut body = take(input, len)?;
            let count = read_i32(&mut body)?;
            if kind == 0 {
                let mut items = Vec::new();
                for _ in 0..count {
                    items.push(read_value(&mut body)?);
                }
                Nson::Array(items)
            } else {
                let mut entries = Vec::new();
                for _ in 0..count {
                    let key = read_string(&mut body)?.unwrap_or_default();
                    entries.push((key, read_value(&mut body)?));
                }
                Nson::Map(entries)
            }
        }
        1 => {
            let len = read_packed_long(input)?;
            Nson::Binary(if len < 0 { Vec::new() } else { take(input, len as usize)?.to_vec() })
        }
        2 => Nson::Boolean(take(input, 1)?[0] != 0),
        3 => {
            let b = take(input, 8)?;
            Nson::Double(f64::from_be_bytes(b.try_into().map_err(|_| "bad double")?))
        }
        4 => Nson::Integer(i32::try_from(read_packed_long(input)?).map_err(|_| "integer out of range")?),
        5 => Nson::Long(read_packed_long(input)?),
        7 => Nson::String(read_string(input)?),
        8 => Nson::Timestamp(read_string(input)?.unwrap_or_default()),
        9 => Nson::Number(read_string(input)?.unwrap_or_default()),
        10 => Nson::JsonNull,
        11 => Nson::Null,
        12 => Nson::Empty,
        other => return Err(format!("unknown nson type {other}")),
    })
}

fn write_string(out: &mut Vec<u8>, s: &str) {
    write_packed_long(out, s.len() as i64);
    out.extend_from_slice(s.as_bytes());
}

/// Encodes one NSON value.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Nson) {
    let container = |out: &mut Vec<u8>, kind: u8, count: usize, body: &dyn Fn(&mut Vec<u8>)| {
        out.push(kind);
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&(count as i32).to_be_bytes());
        body(out);
        let len = (out.len() - at - 4) as i32;
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    };
    match value {
        Nson::Array(items) => container(out, 0, items.len(), &|out| items.iter().for_each(|v| write_value(out, v))),
        Nson::Map(entries) => container(out, 6, entries.len(), &|out| {
            for (k, v) in entries {
                write_string(out, k);
                write_value(out, v);
            }
        }),
        Nson::Binary(b) => {
            out.push(1);
            write_packed_long(out, b.len() as i64);
            out.extend_from_slice(b);
        }
        Nson::Boolean(b) => out.extend_from_slice(&[2, u8::from(*b)]),
        Nson::Double(d) => {
            out.push(3);
            out.extend_from_slice(&d.to_be_bytes());
        }
        Nson::Integer(i) => {
            out.push(4);
            write_packed_long(out, i64::from(*i));
        }
        Nson::Long(l) => {
            out.push(5);
            write_packed_long(out, *l);
        }
        Nson::String(s) => {
            out.push(7);
            match s {
                Some(s) => write_string(out, s),
                None => write_packed_long(out, -1),
            }
        }
        Nson::Timestamp(s) => {
            out.push(8);
            write_string(out, s);
        }
        Nson::Number(s) => {
            out.push(9);
            write_string(out, s);
        }
        Nson::JsonNull => out.push(10),
        Nson::Null => out.push(11),
        Nson::Empty => out.push(12),
    }
}

// ---------------------------------------------------------------------------------------
// The store

const OP_GET: i64 = 2;
const OP_PUT: i64 = 3;
const OP_PUT_IF_ABSENT: i64 = 4;
const OP_PUT_IF_PRESENT: i64 = 5;
const OP_GET_TABLE: i64 = 11;
const OP_TABLE_REQUEST: i64 = 15;

const TABLE_NOT_FOUND: i64 = 2;
const ILLEGAL_ARGUMENT: i64 = 4;
const TABLE_EXISTS: i64 = 9;
const OPERATION_NOT_SUPPORTED: i64 = 21;

#[derive(Debug, Clone)]
struct Column {
    name: String,
    kind: String,
}

#[derive(Debug)]
struct Table {
    name: String,
    columns: Vec<Column>,
    primary_key: String,
    ddl: String,
    /// Operation id of the DDL that created it, until a `GET_TABLE` saw it active.
    creating: Option<String>,
    rows: BTreeMap<String, StoredRow>,
}

#[derive(Debug, Clone)]
struct StoredRow {
    value: Nson,
    version: u64,
    modified_ms: i64,
}

impl Table {
    fn schema(&self) -> String {
        let fields: Vec<serde_json::Value> = self
            .columns
            .iter()
            .map(|c| serde_json::json!({"name": c.name, "type": c.kind, "nullable": c.name != self.primary_key}))
            .collect();
        serde_json::json!({
            "json_version": 2, "type": "table", "name": self.name, "fields": fields,
            "primaryKey": [self.primary_key], "shardKey": [self.primary_key],
        })
        .to_string()
    }
}

#[derive(Debug, Default)]
struct Store {
    tables: BTreeMap<String, Table>,
    /// Error codes answered to the next data requests (GET and PUT), in order.
    faults: Vec<i64>,
    /// Puts whose reply is dropped after they committed, still to come.
    drop_replies: usize,
    /// The durability (`du`) each put asked for, in arrival order.
    durabilities: Vec<Option<i64>>,
}

#[derive(Debug, Default)]
struct Shared {
    store: Mutex<Store>,
    versions: AtomicU64,
    operations: AtomicU64,
    requests: AtomicU64,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or_default()
}

fn error(code: i64, message: &str) -> Nson {
    Nson::Map(vec![("e".into(), Nson::Integer(code as i32)), ("x".into(), Nson::str(message))])
}

fn table_key(name: &str) -> String {
    name.to_ascii_lowercase()
}

impl Shared {
    /// The answer to `request`, and whether to drop it (a put that committed while replies
    /// are to be dropped).
    fn answer(&self, request: &Nson) -> (Nson, bool) {
        let answer = self.handle(request);
        let op = request.get("h").and_then(|h| h.get("o")).and_then(Nson::as_i64).unwrap_or(-1);
        let committed = answer.get("rv").is_some();
        let mut store = self.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(op, OP_PUT | OP_PUT_IF_ABSENT | OP_PUT_IF_PRESENT) {
            let durability = request.get("p").and_then(|p| p.get("du")).and_then(Nson::as_i64);
            store.durabilities.push(durability);
        }
        let drop = committed && store.drop_replies > 0;
        if drop {
            store.drop_replies -= 1;
        }
        (answer, drop)
    }

    fn handle(&self, request: &Nson) -> Nson {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let Some(header) = request.get("h") else { return error(17, "missing header") };
        let payload = request.get("p").cloned().unwrap_or(Nson::Map(Vec::new()));
        let op = header.get("o").and_then(Nson::as_i64).unwrap_or(-1);
        let table = header.get("n").and_then(Nson::as_str).unwrap_or_default().to_owned();
        let mut store = self.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(op, OP_GET | OP_PUT | OP_PUT_IF_ABSENT | OP_PUT_IF_PRESENT) && !store.faults.is_empty() {
            let code = store.faults.remove(0);
            return error(code, "injected by the test server");
        }
        match op {
            OP_TABLE_REQUEST => self.table_request(&mut store, &payload),
            OP_GET_TABLE => match store.tables.get_mut(&table_key(&table)) {
                Some(t) => {
                    // The operation id comes back only to a poll that names one (as the
                    // proxy answers; a plain GetTable gets none).
                    let asked = payload.get("od").is_some();
                    let op_id = t.creating.take().filter(|_| asked);
                    table_result(t, 0, op_id)
                }
                None => error(TABLE_NOT_FOUND, &format!("Table not found: {table}")),
            },
            OP_GET => match store.tables.get(&table_key(&table)) {
                None => error(TABLE_NOT_FOUND, &format!("Table not found: {table}")),
                Some(t) => match key_of(t, payload.get("k")) {
                    Err(m) => error(ILLEGAL_ARGUMENT, &format!("GET: Illegal Argument: {m}")),
                    Ok(key) => {
                        let mut out = vec![("e".to_owned(), Nson::Integer(0))];
                        if let Some(row) = t.rows.get(&key) {
                            out.push((
                                "r".into(),
                                Nson::Map(vec![
                                    ("ct".into(), Nson::Long(0)),
                                    ("md".into(), Nson::Long(row.modified_ms)),
                                    ("xp".into(), Nson::Long(0)),
                                    ("rv".into(), Nson::Binary(row.version.to_be_bytes().to_vec())),
                                    ("l".into(), row.value.clone()),
                                ]),
                            ));
                        }
                        Nson::Map(out)
                    }
                },
            },
            OP_PUT | OP_PUT_IF_ABSENT | OP_PUT_IF_PRESENT => {
                let versions = &self.versions;
                match store.tables.get_mut(&table_key(&table)) {
                    None => error(TABLE_NOT_FOUND, &format!("Table not found: {table}")),
                    Some(t) => put(t, op, &payload, || versions.fetch_add(1, Ordering::Relaxed) + 1),
                }
            }
            other => {
                error(OPERATION_NOT_SUPPORTED, &format!("operation {other} is not implemented by the test server"))
            }
        }
    }

    fn table_request(&self, store: &mut Store, payload: &Nson) -> Nson {
        let statement = payload.get("st").and_then(Nson::as_str).unwrap_or_default();
        match parse_ddl(statement) {
            Err(m) => error(ILLEGAL_ARGUMENT, &format!("Error: User error in query: {m}")),
            Ok(Ddl::Drop { name, if_exists }) => match store.tables.remove(&table_key(&name)) {
                Some(t) => table_result(&t, 2, Some(self.operation_id())),
                None if if_exists => Nson::Map(vec![("n".into(), Nson::str(name)), ("as".into(), Nson::Integer(2))]),
                None => error(TABLE_NOT_FOUND, &format!("Table not found: {name}")),
            },
            Ok(Ddl::Create { table, if_not_exists }) => match store.tables.get(&table_key(&table.name)) {
                Some(existing) if if_not_exists => table_result(existing, 0, None),
                Some(_) => error(
                    TABLE_EXISTS,
                    &format!(
                        "Error: User error in query: CREATE TABLE failed for table {0}: Table {0} already exists",
                        table.name
                    ),
                ),
                None => {
                    let op_id = self.operation_id();
                    let mut table = table;
                    table.creating = Some(op_id.clone());
                    let result = table_result(&table, 1, Some(op_id));
                    store.tables.insert(table_key(&table.name), table);
                    result
                }
            },
        }
    }

    fn operation_id(&self) -> String {
        (self.operations.fetch_add(1, Ordering::Relaxed) + 1).to_string()
    }
}

/// A table result: name, state, schema and DDL (once active), operation id while working.
fn table_result(t: &Table, state: i32, op_id: Option<String>) -> Nson {
    let mut out = vec![("n".to_owned(), Nson::str(t.name.clone())), ("as".into(), Nson::Integer(state))];
    if state == 0 {
        out.push(("ac".into(), Nson::str(t.schema())));
        out.push(("td".into(), Nson::str(t.ddl.clone())));
    }
    if let Some(id) = op_id {
        out.push(("od".into(), Nson::str(id)));
    }
    Nson::Map(out)
}

/// The primary-key value of a key or row map.
fn key_of(t: &Table, map: Option<&Nson>) -> Result<String, String> {
    let Some(Nson::Map(entries)) = map else { return Err("missing key".into()) };
    match entries.iter().find(|(k, _)| k.eq_ignore_ascii_case(&t.primary_key)) {
        None => Err(format!("Missing primary key field: {}", t.primary_key)),
        Some((_, Nson::String(Some(s)))) => Ok(s.clone()),
        Some(_) => Err(format!("Invalid type for primary key field {}", t.primary_key)),
    }
}

/// Checks a row against the columns: known columns only of their type (unknown fields are
/// ignored, as the proxy does without an exact match).
fn check_row(t: &Table, row: &Nson) -> Result<Nson, String> {
    let Nson::Map(entries) = row else { return Err("row is not a map".into()) };
    let mut kept = Vec::new();
    for column in &t.columns {
        let Some((_, value)) = entries.iter().find(|(k, _)| k.eq_ignore_ascii_case(&column.name)) else { continue };
        let ok = match column.kind.as_str() {
            "STRING" => matches!(value, Nson::String(_)),
            "LONG" => matches!(value, Nson::Long(_) | Nson::Integer(_)),
            "INTEGER" => matches!(value, Nson::Integer(_)),
            "JSON" => !matches!(value, Nson::Binary(_) | Nson::Empty),
            _ => true,
        };
        if !ok {
            return Err(format!("Invalid value for field {}", column.name));
        }
        let value = match (column.kind.as_str(), value) {
            ("LONG", Nson::Integer(i)) => Nson::Long(i64::from(*i)),
            (_, v) => v.clone(),
        };
        kept.push((column.name.clone(), value));
    }
    Ok(Nson::Map(kept))
}

fn put(t: &mut Table, op: i64, payload: &Nson, next_version: impl FnOnce() -> u64) -> Nson {
    let row = payload.get("l").cloned().unwrap_or(Nson::Null);
    let return_row = matches!(payload.get("rr"), Some(Nson::Boolean(true)));
    let key = match key_of(t, Some(&row)) {
        Ok(k) => k,
        Err(m) => return error(ILLEGAL_ARGUMENT, &format!("PUT: Illegal Argument: {m}")),
    };
    let value = match check_row(t, &row) {
        Ok(v) => v,
        Err(m) => return error(ILLEGAL_ARGUMENT, &format!("PUT: Illegal Argument: {m}")),
    };
    let existing = t.rows.get(&key).cloned();
    let write = match op {
        OP_PUT_IF_ABSENT => existing.is_none(),
        OP_PUT_IF_PRESENT => existing.is_some(),
        _ => true,
    };
    let mut out = vec![("e".to_owned(), Nson::Integer(0))];
    if write {
        let version = next_version();
        t.rows.insert(key, StoredRow { value, version, modified_ms: now_ms() });
        out.push(("rv".into(), Nson::Binary(version.to_be_bytes().to_vec())));
    }
    if return_row && let Some(previous) = existing {
        out.push((
            "ri".into(),
            Nson::Map(vec![
                ("el".into(), previous.value),
                ("ct".into(), Nson::Long(0)),
                ("em".into(), Nson::Long(previous.modified_ms)),
                ("ev".into(), Nson::Binary(previous.version.to_be_bytes().to_vec())),
            ]),
        ));
    }
    Nson::Map(out)
}

enum Ddl {
    Create { table: Table, if_not_exists: bool },
    Drop { name: String, if_exists: bool },
}

/// Splits DDL into words and the punctuation `(`, `)`, `,`.
fn tokens(statement: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in statement.chars() {
        if c.is_whitespace() || "(),".contains(c) {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

fn parse_ddl(statement: &str) -> Result<Ddl, String> {
    let t = tokens(statement);
    let upper: Vec<String> = t.iter().map(|s| s.to_ascii_uppercase()).collect();
    let word = |i: usize| upper.get(i).map(String::as_str).unwrap_or_default();
    match (word(0), word(1)) {
        ("DROP", "TABLE") => {
            let if_exists = word(2) == "IF" && word(3) == "EXISTS";
            let name = t.get(if if_exists { 4 } else { 2 }).ok_or("DROP TABLE needs a name")?.clone();
            Ok(Ddl::Drop { name, if_exists })
        }
        ("CREATE", "TABLE") => {
            let if_not_exists = word(2) == "IF" && word(3) == "NOT" && word(4) == "EXISTS";
            let mut i = if if_not_exists { 5 } else { 2 };
            let name = t.get(i).ok_or("CREATE TABLE needs a name")?.clone();
            i += 1;
            if word(i) != "(" {
                return Err("expected `(` after the table name".into());
            }
            i += 1;
            let mut columns = Vec::new();
            let mut primary_key = None;
            while i < t.len() && word(i) != ")" {
                if word(i) == "PRIMARY" && word(i + 1) == "KEY" {
                    // PRIMARY KEY ( [SHARD (] col [)] )
                    let keys: Vec<&String> = t[i + 2..]
                        .iter()
                        .take_while(|s| s.as_str() != ",")
                        .filter(|s| !matches!(s.to_ascii_uppercase().as_str(), "(" | ")" | "SHARD"))
                        .collect();
                    if keys.len() != 1 {
                        return Err("the test server supports a single-column primary key".into());
                    }
                    primary_key = Some(keys[0].clone());
                    let mut depth = 0;
                    i += 2;
                    while i < t.len() {
                        match word(i) {
                            "(" => depth += 1,
                            ")" => {
                                depth -= 1;
                                if depth == 0 {
                                    i += 1;
                                    break;
                                }
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                } else {
                    let column = t.get(i).ok_or("column name expected")?.clone();
                    let kind = upper.get(i + 1).ok_or("column type expected")?.clone();
                    if !["STRING", "JSON", "LONG", "INTEGER", "DOUBLE", "NUMBER", "BOOLEAN", "BINARY"]
                        .contains(&kind.as_str())
                    {
                        return Err(format!("unsupported column type {kind}"));
                    }
                    columns.push(Column { name: column, kind });
                    i += 2;
                }
                if word(i) == "," {
                    i += 1;
                }
            }
            let primary_key = primary_key.ok_or("a primary key is required")?;
            let key_column = columns
                .iter()
                .find(|c| c.name.eq_ignore_ascii_case(&primary_key))
                .ok_or("the primary key names no column")?;
            if key_column.kind != "STRING" {
                return Err("the test server supports STRING primary keys only".into());
            }
            let ddl = format!(
                "CREATE TABLE IF NOT EXISTS {name} ({}, PRIMARY KEY(SHARD({primary_key})))",
                columns.iter().map(|c| format!("{} {}", c.name, c.kind)).collect::<Vec<_>>().join(", ")
            );
            Ok(Ddl::Create {
                table: Table { name, columns, primary_key, ddl, creating: None, rows: BTreeMap::new() },
                if_not_exists,
            })
        }
        _ => Err("the test server supports CREATE TABLE and DROP TABLE only".into()),
    }
}

// ---------------------------------------------------------------------------------------
// HTTP

async fn data(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let mut input: &[u8] = &body;
    let decoded = take(&mut input, 2).and_then(|serial| {
        let version = i16::from_be_bytes([serial[0], serial[1]]);
        if version < 4 { Err(format!("serial version {version}")) } else { read_value(&mut input) }
    });
    let mut out = Vec::new();
    match decoded {
        Ok(request) => {
            let (answer, drop) = shared.answer(&request);
            if drop {
                return dropped_reply(&headers);
            }
            write_value(&mut out, &answer);
        }
        Err(_) => {
            // What the proxy answers a body it cannot read: UNSUPPORTED_PROTOCOL, V3 style.
            out.push(24);
            out.extend_from_slice(b"unsupported protocol");
        }
    }
    let mut response = (StatusCode::OK, out).into_response();
    let h = response.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/octet-stream"));
    h.insert("x-nosql-serial-version", HeaderValue::from_static("4"));
    h.insert("x-nosql-version", HeaderValue::from_static("nats-sinks-testkit"));
    if let Some(id) = headers.get("x-nosql-request-id") {
        h.insert("x-nosql-request-id", id.clone());
    }
    response
}

/// A reply that is lost: the status line and headers go out, then the body fails, so the
/// server closes the connection and the client never reads an answer (as when the proxy or the
/// network dies between the commit and the reply).
fn dropped_reply(headers: &HeaderMap) -> Response {
    let body = futures::stream::once(async { Err::<Bytes, _>(std::io::Error::other("reply dropped after commit")) });
    let mut response = (StatusCode::OK, axum::body::Body::from_stream(body)).into_response();
    if let Some(id) = headers.get("x-nosql-request-id") {
        response.headers_mut().insert("x-nosql-request-id", id.clone());
    }
    response
}

async fn delete_row(State(shared): State<Arc<Shared>>, Path((table, key)): Path<(String, String)>) -> Response {
    let mut store = shared.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match store.tables.get_mut(&table_key(&table)) {
        None => (StatusCode::NOT_FOUND, "no such table").into_response(),
        Some(t) => match t.rows.remove(&key) {
            Some(_) => (StatusCode::OK, "deleted").into_response(),
            None => (StatusCode::NOT_FOUND, "no such row").into_response(),
        },
    }
}

async fn rows(State(shared): State<Arc<Shared>>, Path(table): Path<String>) -> Response {
    let store = shared.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match store.tables.get(&table_key(&table)) {
        None => (StatusCode::NOT_FOUND, "no such table").into_response(),
        Some(t) => {
            let rows: Vec<serde_json::Value> = t.rows.values().map(|r| r.value.to_json()).collect();
            (StatusCode::OK, serde_json::Value::Array(rows).to_string()).into_response()
        }
    }
}

/// A running (or stopped) test server.
#[derive(Debug)]
pub struct NoSqlTestServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    running: Mutex<Option<Running>>,
}

#[derive(Debug)]
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl NoSqlTestServer {
    /// Starts a server on a free loopback port.
    pub fn start() -> Result<Self, String> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let server = Self { addr, shared: Arc::new(Shared::default()), running: Mutex::new(None) };
        server.serve(listener)?;
        Ok(server)
    }

    fn serve(&self, listener: std::net::TcpListener) -> Result<(), String> {
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let shared = Arc::clone(&self.shared);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("nosql-test-server".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() else {
                    return;
                };
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                    let app = axum::Router::new()
                        .route("/V2/nosql/data", post(data))
                        .route("/_test/rows/{table}", get(rows))
                        .route("/_test/rows/{table}/{key}", axum::routing::delete(delete_row))
                        .with_state(shared);
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = stopped => {}
                    }
                });
                // Dropping the runtime here closes every connection it still had open.
                rt.shutdown_background();
            })
            .map_err(|e| e.to_string())?;
        *self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Running { stop, thread });
        Ok(())
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Stops serving: the port refuses connections and open connections are closed. Rows
    /// are kept.
    pub fn stop(&self) {
        let running = self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(Running { stop, thread }) = running {
            let _ = stop.send(());
            let _ = thread.join();
        }
    }

    /// Serves again on the same port with the same rows.
    pub fn restart(&self) -> Result<(), String> {
        self.stop();
        let mut last = String::new();
        for _ in 0..100 {
            match std::net::TcpListener::bind(self.addr) {
                Ok(listener) => return self.serve(listener),
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Err(format!("cannot bind {} again: {last}", self.addr))
    }

    /// Answers the next `count` data requests (GET, PUT) with error `code`.
    pub fn fail_next(&self, code: i64, count: usize) {
        let mut store = self.shared.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        store.faults.extend(std::iter::repeat_n(code, count));
    }

    /// Applies the next `count` puts that commit (a row written) and then drops their
    /// replies: the connection closes before the client reads an answer.
    pub fn drop_replies_after_commit(&self, count: usize) {
        self.shared.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner).drop_replies += count;
    }

    /// The durability each put so far asked for (the NSON field `du`, `None` when absent).
    pub fn put_durabilities(&self) -> Vec<Option<i64>> {
        self.shared.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner).durabilities.clone()
    }

    /// Requests served so far.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// The rows of `table` as JSON (`None` when it does not exist).
    pub fn rows(&self, table: &str) -> Option<Vec<serde_json::Value>> {
        let store = self.shared.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        store.tables.get(&table_key(table)).map(|t| t.rows.values().map(|r| r.value.to_json()).collect())
    }
}

impl Drop for NoSqlTestServer {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(v: i64) -> i64 {
        let mut out = Vec::new();
        write_packed_long(&mut out, v);
        let mut input: &[u8] = &out;
        let back = read_packed_long(&mut input).unwrap();
        assert!(input.is_empty());
        back
    }

    #[test]
    fn packed_longs_round_trip_and_match_the_known_bytes() {
        for v in [
            0,
            1,
            -1,
            120,
            121,
            -119,
            -120,
            255,
            256,
            376,
            377,
            -375,
            -376,
            65_536,
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ] {
            assert_eq!(round(v), v, "{v}");
        }
        let bytes = |v: i64| {
            let mut out = Vec::new();
            write_packed_long(&mut out, v);
            out
        };
        assert_eq!(bytes(4), [131]);
        assert_eq!(bytes(11), [138]);
        assert_eq!(bytes(1000), [0xF8 + 1, 0x03, 0x6F]);
        assert_eq!(bytes(-120), [0x07, 0xFF]);
    }

    #[test]
    fn values_round_trip() {
        let v = Nson::Map(vec![
            ("a".into(), Nson::Array(vec![Nson::Integer(1), Nson::Long(1 << 40), Nson::Double(2.5)])),
            ("s".into(), Nson::str("ünï")),
            ("n".into(), Nson::String(None)),
            ("b".into(), Nson::Binary(vec![1, 2, 3])),
            ("x".into(), Nson::Number("1.50".into())),
            ("j".into(), Nson::JsonNull),
            ("t".into(), Nson::Boolean(true)),
        ]);
        let mut out = Vec::new();
        write_value(&mut out, &v);
        let mut input: &[u8] = &out;
        assert_eq!(read_value(&mut input).unwrap(), v);
    }

    #[test]
    fn ddl_parses_the_sink_table() {
        let Ddl::Create { table, if_not_exists } = parse_ddl(
            "CREATE TABLE IF NOT EXISTS ns:t (sink_key STRING, event_json JSON, stored_at_epoch_ns LONG, PRIMARY KEY(SHARD(sink_key)))",
        )
        .unwrap() else {
            panic!("create")
        };
        assert!(if_not_exists);
        assert_eq!(table.name, "ns:t");
        assert_eq!(table.primary_key, "sink_key");
        assert_eq!(table.columns.len(), 3);
        assert!(matches!(parse_ddl("DROP TABLE IF EXISTS t"), Ok(Ddl::Drop { if_exists: true, .. })));
        assert!(parse_ddl("SELECT 1").is_err());
    }
}
