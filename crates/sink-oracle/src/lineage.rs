//! Read-only lineage queries over the rows the sink wrote (`nats-sink query-lineage`).
//!
//! As in the reference: a field from a fixed allow-list (identifiers in the mission
//! metadata document, read with `JSON_VALUE`, plus the message id and subject columns), a
//! value that is always a bind variable (at most 512 characters, no control characters), a
//! limit of 1 to 1000 (default 50), a table that must be the configured table or a route
//! table, and the payload left out unless asked for. Records show the keys of the mission
//! metadata, never its values. Column filters use `LIKE … ESCAPE` with the value's wildcards
//! escaped, which also works on the `CLOB` subject column of the recommended table (where
//! `=` raises ORA-00932).

use serde::Serialize;

use crate::config::OracleSinkConfig;
use crate::driver::{LineageFilter, Op, Statement, Value};
use crate::sql::{normalize, quote};

/// Default number of records.
pub const DEFAULT_LIMIT: usize = 50;
/// Most records one query returns.
pub const MAX_LIMIT: usize = 1000;
/// Longest value looked up.
pub const MAX_VALUE_CHARS: usize = 512;

/// Fields read from the mission metadata document.
pub const MISSION_FIELDS: [&str; 25] = [
    "artifact_id",
    "artifact_sha256",
    "causation_id",
    "collection_id",
    "correlation_id",
    "event_id",
    "event_time",
    "friendly_track_id",
    "mission_id",
    "object_id",
    "object_type",
    "object_version",
    "payload_sha256",
    "presentation_timestamp",
    "receive_time",
    "relationship_id",
    "schema_profile",
    "schema_version",
    "segment_id",
    "sensor_id",
    "source_gateway",
    "source_system",
    "tasking_id",
    "track_id",
    "unit_reference",
];

/// Fields read from their own columns.
pub const COLUMN_FIELDS: [&str; 2] = ["message_id", "subject"];

/// What an operator asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineageRequest {
    /// Field name (case-insensitive, `-` accepted for `_`).
    pub field: String,
    /// Value to look up.
    pub value: String,
    /// Table (default: `sink.table`).
    pub table: Option<String>,
    /// Most records.
    pub limit: usize,
    /// Include the payload column.
    pub include_payload: bool,
}

/// A validated query: SQL, its one bind, and what it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineageQuery {
    /// Normalized field name.
    pub field: String,
    /// Normalized table name.
    pub table: String,
    /// Limit.
    pub limit: usize,
    /// Whether the payload is read.
    pub include_payload: bool,
    /// The statement.
    pub statement: Statement,
    /// Its bind (the looked-up value, escaped for `LIKE` on column fields).
    pub bind: Value,
    /// Names of the selected values, in order.
    pub aliases: Vec<&'static str>,
}

/// Why a request cannot run (a usage error: exit 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineageError(pub String);

impl std::fmt::Display for LineageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LineageError {}

fn normalize_field(field: &str) -> Result<String, LineageError> {
    let f = field.trim().to_ascii_lowercase().replace('-', "_");
    if MISSION_FIELDS.contains(&f.as_str()) || COLUMN_FIELDS.contains(&f.as_str()) {
        Ok(f)
    } else {
        let mut all: Vec<&str> = MISSION_FIELDS.iter().chain(&COLUMN_FIELDS).copied().collect();
        all.sort_unstable();
        Err(LineageError(format!("--field must be one of: {}", all.join(", "))))
    }
}

fn escape_like(value: &str) -> String {
    value.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

/// Builds the query for `request` against `config` (no IO).
pub fn build(config: &OracleSinkConfig, request: &LineageRequest) -> Result<LineageQuery, LineageError> {
    let field = normalize_field(&request.field)?;
    let value = request.value.trim();
    if value.is_empty() {
        return Err(LineageError("--value must not be empty".into()));
    }
    if value.chars().count() > MAX_VALUE_CHARS {
        return Err(LineageError(format!("--value must be {MAX_VALUE_CHARS} characters or fewer")));
    }
    if value.chars().any(char::is_control) {
        return Err(LineageError("--value must not contain control characters".into()));
    }
    if !(1..=MAX_LIMIT).contains(&request.limit) {
        return Err(LineageError(format!("--limit must be between 1 and {MAX_LIMIT}")));
    }
    let allowed: Vec<String> = config.tables().iter().filter_map(|t| normalize(t, true)).collect();
    let table = match &request.table {
        None => allowed.first().cloned().ok_or_else(|| LineageError("no table is configured".into()))?,
        Some(t) => match normalize(t, true) {
            Some(n) if allowed.contains(&n) => n,
            _ => {
                return Err(LineageError(
                    "--table must be the configured sink.table or one of sink.table_routes[].table".into(),
                ));
            }
        },
    };
    let col = |name: &str| normalize(name, false).ok_or_else(|| LineageError(format!("column `{name}` is not valid")));
    let c = &config.columns;
    let mut selected: Vec<(&'static str, String, bool)> = vec![
        ("stream_name", col(&c.stream_name)?, false),
        ("stream_sequence", col(&c.stream_sequence)?, false),
        ("subject", col(&c.subject)?, false),
        ("message_id", col(&c.message_id)?, false),
        ("priority", col(&c.priority)?, false),
        ("classification", col(&c.classification)?, false),
        ("labels", col(&c.labels)?, false),
        ("message_created_at_epoch_ns", col(&c.message_created_at_epoch_ns)?, false),
        ("received_at_epoch_ns", col(&c.received_at_epoch_ns)?, false),
        ("stored_at_epoch_ns", col(&c.stored_at_epoch_ns)?, false),
        ("mission_metadata_json", col(&c.mission_metadata)?, true),
    ];
    if request.include_payload {
        selected.push(("payload_json", col(&c.payload)?, true));
    }
    let mission = col(&c.mission_metadata)?;
    let (filter, expression, bind) = if let Some(column) = match field.as_str() {
        "message_id" => Some(col(&c.message_id)?),
        "subject" => Some(col(&c.subject)?),
        _ => None,
    } {
        let expression = format!("{} LIKE :1 ESCAPE '\\'", quote(&column));
        (LineageFilter::Column(column), expression, Value::Text(Some(escape_like(value))))
    } else {
        let expression = format!("JSON_VALUE({}, '$.{field}') = :1", quote(&mission));
        (
            LineageFilter::JsonField { column: mission.clone(), field: field.clone() },
            expression,
            Value::Text(Some(value.to_owned())),
        )
    };
    let items: Vec<String> = selected
        .iter()
        .map(|(alias, column, json)| {
            if *json {
                format!("JSON_SERIALIZE({} RETURNING CLOB) AS {alias}", quote(column))
            } else {
                format!("{} AS {alias}", quote(column))
            }
        })
        .collect();
    let received = col(&c.received_at_epoch_ns)?;
    let sequence = col(&c.stream_sequence)?;
    let sql = format!(
        "SELECT {} FROM {} WHERE {expression} ORDER BY {} NULLS LAST, {} NULLS LAST FETCH FIRST {} ROWS ONLY",
        items.join(", "),
        quote(&table),
        quote(&received),
        quote(&sequence),
        request.limit
    );
    let op = Op::Lineage {
        table: table.clone(),
        select: selected.iter().map(|(_, c, _)| c.clone()).collect(),
        filter,
        limit: request.limit,
        order: vec![received, sequence],
    };
    Ok(LineageQuery {
        field,
        table,
        limit: request.limit,
        include_payload: request.include_payload,
        statement: Statement::new(sql, op),
        bind,
        aliases: selected.iter().map(|(a, _, _)| *a).collect(),
    })
}

/// One record, redacted: mission metadata as its keys only, payload only when asked for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineageRecord {
    /// Stream name.
    pub stream_name: Option<String>,
    /// Stream sequence.
    pub stream_sequence: Option<u64>,
    /// Subject.
    pub subject: Option<String>,
    /// Message id.
    pub message_id: Option<String>,
    /// Priority.
    pub priority: Option<String>,
    /// Classification.
    pub classification: Option<String>,
    /// Labels (`;`-separated).
    pub labels: Option<String>,
    /// Creation time, epoch ns.
    pub message_created_at_epoch_ns: Option<i64>,
    /// Receive time, epoch ns.
    pub received_at_epoch_ns: Option<i64>,
    /// Store time, epoch ns.
    pub stored_at_epoch_ns: Option<i64>,
    /// Keys of the mission metadata document, sorted.
    pub mission_metadata_keys: Vec<String>,
    /// Whether the payload is included.
    pub payload_included: bool,
    /// The payload JSON, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_json: Option<serde_json::Value>,
}

/// The result of one query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineageResult {
    /// Field.
    pub field: String,
    /// Table.
    pub table: String,
    /// Limit.
    pub limit: usize,
    /// Number of records.
    pub record_count: usize,
    /// Whether payloads are included.
    pub payload_included: bool,
    /// Records, oldest received first.
    pub records: Vec<LineageRecord>,
}

/// Turns query rows (columns in `query.aliases` order) into redacted records.
pub fn records(query: &LineageQuery, rows: Vec<Vec<Option<String>>>) -> LineageResult {
    let records: Vec<LineageRecord> = rows
        .into_iter()
        .map(|row| {
            let get = |alias: &str| {
                query.aliases.iter().position(|a| *a == alias).and_then(|i| row.get(i).cloned().flatten())
            };
            let int = |alias: &str| get(alias).and_then(|v| v.trim().parse::<i64>().ok());
            let keys = get("mission_metadata_json")
                .and_then(|doc| serde_json::from_str::<serde_json::Value>(&doc).ok())
                .and_then(|v| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()))
                .map(|mut k| {
                    k.sort();
                    k
                })
                .unwrap_or_default();
            let payload = query.include_payload.then(|| {
                get("payload_json").map(|p| {
                    serde_json::from_str(&p)
                        .unwrap_or_else(|_| serde_json::json!({"_nats_sinks_unparsed_payload": true}))
                })
            });
            LineageRecord {
                stream_name: get("stream_name"),
                stream_sequence: get("stream_sequence").and_then(|v| v.trim().parse().ok()),
                subject: get("subject"),
                message_id: get("message_id"),
                priority: get("priority"),
                classification: get("classification"),
                labels: get("labels"),
                message_created_at_epoch_ns: int("message_created_at_epoch_ns"),
                received_at_epoch_ns: int("received_at_epoch_ns"),
                stored_at_epoch_ns: int("stored_at_epoch_ns"),
                mission_metadata_keys: keys,
                payload_included: query.include_payload,
                payload_json: payload.flatten(),
            }
        })
        .collect();
    LineageResult {
        field: query.field.clone(),
        table: query.table.clone(),
        limit: query.limit,
        record_count: records.len(),
        payload_included: query.include_payload,
        records,
    }
}

/// The result as text for people and shell logs.
pub fn render_text(result: &LineageResult) -> String {
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let num = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let mut lines = vec![
        "Lineage query result".to_owned(),
        format!("field={}", result.field),
        format!("table={}", result.table),
        format!("limit={}", result.limit),
        format!("records={}", result.record_count),
    ];
    for (i, r) in result.records.iter().enumerate() {
        let keys = if r.mission_metadata_keys.is_empty() { "-".to_owned() } else { r.mission_metadata_keys.join(",") };
        lines.push(format!(
            "{}. stream={} sequence={} subject={} message_id={} priority={} classification={} labels={} received_at_epoch_ns={} mission_metadata_keys={keys} payload={}",
            i + 1,
            dash(&r.stream_name),
            r.stream_sequence.map_or_else(|| "-".to_owned(), |s| s.to_string()),
            dash(&r.subject),
            dash(&r.message_id),
            dash(&r.priority),
            dash(&r.classification),
            dash(&r.labels),
            num(r.received_at_epoch_ns),
            if result.payload_included { "included" } else { "omitted" },
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: serde_json::Value) -> OracleSinkConfig {
        let mut v = serde_json::json!({"type": "oracle", "dsn": "h:1521/s", "user": "u", "password_env": "P",
            "table_routes": [{"subject": "secret.>", "table": "NATS_EVENTS_SECRET"}]});
        if let (Some(b), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
            b.extend(e);
        }
        let serde_json::Value::Object(m) = v else { unreachable!() };
        OracleSinkConfig::from_section(&sinks_contract::config::SinkSection(m)).unwrap()
    }

    fn request(field: &str, value: &str) -> LineageRequest {
        LineageRequest {
            field: field.into(),
            value: value.into(),
            table: None,
            limit: DEFAULT_LIMIT,
            include_payload: false,
        }
    }

    #[test]
    fn values_are_bound_and_requests_are_allow_listed() {
        let c = config(serde_json::json!({}));
        let q = build(&c, &request("Mission-ID", "M' OR 1=1 --")).unwrap();
        assert_eq!(q.field, "mission_id");
        assert!(
            q.statement.sql.contains("JSON_VALUE(\"MISSION_METADATA_JSON\", '$.mission_id') = :1"),
            "{}",
            q.statement.sql
        );
        assert!(!q.statement.sql.contains("OR 1=1"), "the value is never in the SQL");
        assert_eq!(q.bind, Value::Text(Some("M' OR 1=1 --".into())));
        assert!(!q.statement.sql.contains("PAYLOAD_JSON"), "payload excluded by default");
        let by_id = build(&c, &request("message_id", "a_b%c")).unwrap();
        assert_eq!(by_id.bind, Value::Text(Some("a\\_b\\%c".into())));
        for (field, value, table, limit) in [
            ("password", "x", None, 50),
            ("mission_id", "", None, 50),
            ("mission_id", "x\ny", None, 50),
            ("mission_id", &"x".repeat(513), None, 50),
            ("mission_id", "x", Some("OTHER_TABLE"), 50),
            ("mission_id", "x", None, 0),
            ("mission_id", "x", None, 1001),
        ] {
            let r = LineageRequest {
                field: field.into(),
                value: value.into(),
                table: table.map(Into::into),
                limit,
                include_payload: false,
            };
            assert!(build(&c, &r).is_err(), "{field} {value:?} {table:?} {limit}");
        }
        let routed = LineageRequest { table: Some("nats_events_secret".into()), ..request("track_id", "T-1") };
        assert_eq!(build(&c, &routed).unwrap().table, "NATS_EVENTS_SECRET");
    }

    #[test]
    fn records_show_metadata_keys_not_values() {
        let c = config(serde_json::json!({}));
        let q = build(&c, &request("mission_id", "M-1")).unwrap();
        let mut row: Vec<Option<String>> = vec![None; q.aliases.len()];
        row[0] = Some("S".into());
        row[1] = Some("42".into());
        row[10] = Some(r#"{"mission_id":"M-1","secret_note":"do not print"}"#.into());
        let result = records(&q, vec![row]);
        assert_eq!(result.records[0].stream_sequence, Some(42));
        assert_eq!(result.records[0].mission_metadata_keys, ["mission_id", "secret_note"]);
        let text = render_text(&result);
        assert!(
            text.contains("mission_metadata_keys=mission_id,secret_note") && !text.contains("do not print"),
            "{text}"
        );
        assert!(!serde_json::to_string(&result).unwrap().contains("do not print"));
    }
}
