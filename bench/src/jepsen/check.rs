//! The fault harness's checker: pure, over one run's history, after every fault is healed
//! and the grace period has passed.
//!
//! A history is what was observed from outside the sink:
//! - the producers' log: every event they tried to publish (unique ids), whether JetStream
//!   acknowledged it to them, and the fault kind in force when they published it;
//! - each node's copy of the stream (read from every node after the heal), as event ids;
//! - the destination's records (read back without the sink: key, event, payload digest);
//! - the dead-letter stream's records, as event ids;
//! - the ledger's receipts: the events the sink acknowledged.
//!
//! From it the checker sorts every event into the categories of docs/reliability.md ("The
//! fault harness"): **NATS lost** (acknowledged to the producer, in no node's copy: NATS's own
//! loss, reported apart from the sink's) and the four **sink violations**, each of which must
//! be 0: acknowledged by the sink but neither stored nor dead-lettered (*acked-unstored*);
//! *stored twice* (two records for one event, or one key with two payloads); *unexpected*
//! (stored or dead-lettered, never published); *stuck* (still in the stream, neither stored nor
//! dead-lettered). The rows of the result table are the fault kinds the events were published
//! under; an event no producer published is counted under [`UNPUBLISHED`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The row of events no producer published (they have no fault kind of their own).
pub(crate) const UNPUBLISHED: &str = "(never published)";

/// One event a producer tried to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Published {
    /// The event's unique id (its `Nats-Msg-Id` and the id inside its payload).
    pub(crate) id: String,
    /// True when JetStream acknowledged it to the producer (a `PubAck` came back).
    pub(crate) acked: bool,
    /// The fault kind in force when it was published (the row it is counted in).
    pub(crate) fault: String,
}

/// One record read back from the destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// The record's key in the destination (a file name, a primary key, an object key).
    pub(crate) key: String,
    /// The event id its payload carries.
    pub(crate) event: String,
    /// A digest of its payload.
    pub(crate) digest: String,
}

/// What one run observed; see the module documentation.
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    /// The producers' log.
    pub(crate) published: Vec<Published>,
    /// Each node's copy of the stream, as the event ids it holds (node name → ids).
    pub(crate) copies: BTreeMap<String, BTreeSet<String>>,
    /// The destination's records.
    pub(crate) records: Vec<Record>,
    /// The events in the dead-letter stream.
    pub(crate) dead_lettered: BTreeSet<String>,
    /// The events the sink acknowledged (the ledger's receipts).
    pub(crate) sink_acked: BTreeSet<String>,
}

/// The events of one row in each category (sorted ids, for the report's examples).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Row {
    /// Events counted in this row.
    pub(crate) events: usize,
    /// Acknowledged to the producer, in no node's copy of the stream (NATS's loss).
    pub(crate) nats_lost: Vec<String>,
    /// Of `nats_lost`, the events the sink had stored or dead-lettered before NATS lost
    /// them: proof that they were in the stream once.
    pub(crate) nats_lost_kept: usize,
    /// Acknowledged by the sink, neither stored nor dead-lettered.
    pub(crate) acked_unstored: Vec<String>,
    /// Two records for the event, or a key of its records holding two payloads.
    pub(crate) twice: Vec<String>,
    /// Stored or dead-lettered, never published.
    pub(crate) unexpected: Vec<String>,
    /// In a node's copy of the stream, neither stored nor dead-lettered, not acknowledged.
    pub(crate) stuck: Vec<String>,
}

impl Row {
    /// The sink's violations in this row (NATS's losses are not the sink's).
    pub(crate) fn sink_violations(&self) -> usize {
        self.acked_unstored.len() + self.twice.len() + self.unexpected.len() + self.stuck.len()
    }
}

/// What the harness saw of one fault kind beside the events: how often it was injected,
/// the stream guard's detections during it, and the time to recover after its heal.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FaultStats {
    /// Times injected.
    pub(crate) injected: u32,
    /// The stream guard's detections (a rewound or re-created stream) while it was in force.
    pub(crate) detections: u64,
    /// The longest time, in seconds, from a heal until the sink had settled everything the
    /// stream held then.
    pub(crate) recovery: Option<f64>,
    /// Heals after which the sink did not recover within the harness's limit.
    pub(crate) unrecovered: u32,
}

/// The checker's verdict: a row per fault kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Fault kind → its row.
    pub(crate) rows: BTreeMap<String, Row>,
}

impl Verdict {
    /// Every row's sink violations added up: the run passes only at 0.
    pub(crate) fn sink_violations(&self) -> usize {
        self.rows.values().map(Row::sink_violations).sum()
    }

    /// Every row's NATS losses added up (reported, not the sink's).
    pub(crate) fn nats_lost(&self) -> usize {
        self.rows.values().map(|r| r.nats_lost.len()).sum()
    }

    /// The result table (markdown), a row per fault kind (with its `stats`: injections,
    /// detections, the longest recovery) and the total, then up to five example ids per
    /// non-empty category.
    pub(crate) fn table(&self, stats: &BTreeMap<String, FaultStats>) -> String {
        let mut out = String::from(
            "| fault kind | injected | events | NATS lost | acked-unstored | stored twice | unexpected | stuck | detections | recovery s |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let mut total = Row::default();
        let none = FaultStats::default();
        let mut kinds: BTreeSet<&String> = self.rows.keys().collect();
        kinds.extend(stats.keys());
        let empty = Row::default();
        for fault in kinds {
            let row = self.rows.get(fault).unwrap_or(&empty);
            let s = stats.get(fault).unwrap_or(&none);
            let recovery = match (s.recovery, s.unrecovered) {
                (_, 0) if s.injected == 0 => "-".to_owned(),
                (Some(r), 0) => format!("{r:.1}"),
                (r, n) => format!("{} ({n} not recovered)", r.map_or("-".to_owned(), |r| format!("{r:.1}"))),
            };
            let _ = writeln!(out, "| {fault} | {} | {} | {} | {recovery} |", s.injected, counts(row), s.detections);
            total.events += row.events;
            total.nats_lost_kept += row.nats_lost_kept;
            for (all, some) in [
                (&mut total.nats_lost, &row.nats_lost),
                (&mut total.acked_unstored, &row.acked_unstored),
                (&mut total.twice, &row.twice),
                (&mut total.unexpected, &row.unexpected),
                (&mut total.stuck, &row.stuck),
            ] {
                all.extend(some.iter().cloned());
            }
        }
        let injected: u32 = stats.values().map(|s| s.injected).sum();
        let detections: u64 = stats.values().map(|s| s.detections).sum();
        let _ = writeln!(out, "| all | {injected} | {} | {detections} | |", counts(&total));
        for (name, ids) in [
            ("NATS lost", &total.nats_lost),
            ("acked-unstored", &total.acked_unstored),
            ("stored twice", &total.twice),
            ("unexpected", &total.unexpected),
            ("stuck", &total.stuck),
        ] {
            if !ids.is_empty() {
                let shown: Vec<&str> = ids.iter().take(5).map(String::as_str).collect();
                let _ = writeln!(out, "\n{name}: {} (e.g. {})", ids.len(), shown.join(", "));
                if name == "NATS lost" {
                    let _ = writeln!(
                        out,
                        "\nOf those, the sink had stored or dead-lettered {} before NATS lost them (they were in \
                         the stream once); the rest it never received.",
                        total.nats_lost_kept
                    );
                }
            }
        }
        out
    }
}

fn counts(row: &Row) -> String {
    format!(
        "{} | {} | {} | {} | {} | {}",
        row.events,
        row.nats_lost.len(),
        row.acked_unstored.len(),
        row.twice.len(),
        row.unexpected.len(),
        row.stuck.len()
    )
}

/// Sorts every event of `history` into its row and categories.
pub(crate) fn check(history: &History) -> Verdict {
    let mut fault_of: BTreeMap<&str, &str> = BTreeMap::new();
    let mut acked: BTreeSet<&str> = BTreeSet::new();
    for p in &history.published {
        fault_of.entry(&p.id).or_insert(&p.fault);
        if p.acked {
            acked.insert(&p.id);
        }
    }
    let in_nats: BTreeSet<&str> = history.copies.values().flatten().map(String::as_str).collect();
    let mut records_of: BTreeMap<&str, usize> = BTreeMap::new();
    let mut digests_of_key: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in &history.records {
        *records_of.entry(&r.event).or_default() += 1;
        digests_of_key.entry(&r.key).or_default().insert(&r.digest);
    }
    // An event is stored twice when one of its keys holds two payloads, too.
    let mut forked: BTreeSet<&str> = BTreeSet::new();
    for r in &history.records {
        if digests_of_key.get(r.key.as_str()).is_some_and(|d| d.len() > 1) {
            forked.insert(&r.event);
        }
    }

    let everyone: BTreeSet<&str> = fault_of
        .keys()
        .copied()
        .chain(in_nats.iter().copied())
        .chain(records_of.keys().copied())
        .chain(history.dead_lettered.iter().map(String::as_str))
        .chain(history.sink_acked.iter().map(String::as_str))
        .collect();

    let mut verdict = Verdict::default();
    for id in everyone {
        let published = fault_of.get(id).copied();
        let row = verdict.rows.entry(published.unwrap_or(UNPUBLISHED).to_owned()).or_default();
        row.events += 1;
        let stored = records_of.get(id).copied().unwrap_or(0);
        let dead = history.dead_lettered.contains(id);
        let owned = || id.to_owned();
        if acked.contains(id) && !in_nats.contains(id) {
            row.nats_lost.push(owned());
            if stored > 0 || dead {
                row.nats_lost_kept += 1;
            }
        }
        if published.is_none() && (stored > 0 || dead) {
            row.unexpected.push(owned());
        }
        if stored > 1 || forked.contains(id) {
            row.twice.push(owned());
        }
        if stored == 0 && !dead {
            if history.sink_acked.contains(id) {
                row.acked_unstored.push(owned());
            } else if in_nats.contains(id) {
                row.stuck.push(owned());
            }
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn published(id: &str, acked: bool, fault: &str) -> Published {
        Published { id: id.into(), acked, fault: fault.into() }
    }

    fn record(key: &str, event: &str) -> Record {
        Record { key: key.into(), event: event.into(), digest: format!("d-{event}") }
    }

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Three nodes that all hold `ids`.
    fn copies(ids: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
        (0..3).map(|i| (format!("n{i}"), set(ids))).collect()
    }

    /// A clean run: `e1` stored, `e2` dead-lettered, `e3` published but never acknowledged to
    /// its producer and absent everywhere (a publish that failed is no one's loss).
    fn clean() -> History {
        History {
            published: vec![
                published("e1", true, "partition"),
                published("e2", true, "partition"),
                published("e3", false, "pause"),
            ],
            copies: copies(&["e1", "e2"]),
            records: vec![record("k1", "e1")],
            dead_lettered: set(&["e2"]),
            sink_acked: set(&["e1", "e2"]),
        }
    }

    fn only(verdict: &Verdict, fault: &str) -> Row {
        verdict.rows.get(fault).cloned().unwrap_or_else(|| panic!("no row {fault}: {verdict:?}"))
    }

    #[test]
    fn a_clean_history_has_no_violation_and_a_row_per_fault_kind() {
        let verdict = check(&clean());
        assert_eq!(verdict.sink_violations(), 0, "{}", verdict.table(&BTreeMap::new()));
        assert_eq!(verdict.nats_lost(), 0);
        assert_eq!(only(&verdict, "partition").events, 2);
        assert_eq!(only(&verdict, "pause").events, 1);
        assert!(
            verdict.table(&BTreeMap::new()).contains("| all | 0 | 3 | 0 | 0 | 0 | 0 | 0 | 0 | |"),
            "{}",
            verdict.table(&BTreeMap::new())
        );
    }

    #[test]
    fn an_acknowledged_event_in_no_nodes_copy_is_lost_by_nats_not_by_the_sink() {
        let mut history = clean();
        history.published.push(published("e4", true, "kill all"));
        // Lost after the sink stored it: NATS's loss still, and said so.
        history.published.push(published("e6", true, "kill all"));
        history.records.push(record("k6", "e6"));
        history.sink_acked.insert("e6".into());
        // One node kept it: not lost.
        history.published.push(published("e5", true, "kill all"));
        history.copies.get_mut("n2").unwrap().insert("e5".into());
        history.records.push(record("k5", "e5"));
        history.sink_acked.insert("e5".into());
        let verdict = check(&history);
        assert_eq!(only(&verdict, "kill all").nats_lost, ["e4", "e6"]);
        assert_eq!(only(&verdict, "kill all").nats_lost_kept, 1);
        assert_eq!(verdict.nats_lost(), 2);
        assert!(verdict.table(&BTreeMap::new()).contains("had stored or dead-lettered 1 before"));
        assert_eq!(
            verdict.sink_violations(),
            0,
            "NATS's loss was counted against the sink: {}",
            verdict.table(&BTreeMap::new())
        );
    }

    #[test]
    fn an_event_the_sink_acknowledged_but_neither_stored_nor_dead_lettered_is_acked_unstored() {
        let mut history = clean();
        history.published.push(published("e4", true, "sink paused"));
        history.copies.values_mut().for_each(|c| {
            c.insert("e4".into());
        });
        history.sink_acked.insert("e4".into());
        let verdict = check(&history);
        let row = only(&verdict, "sink paused");
        assert_eq!(row.acked_unstored, ["e4"]);
        assert!(row.stuck.is_empty(), "an acknowledged event counted as stuck too");
        assert_eq!(verdict.sink_violations(), 1);
    }

    #[test]
    fn two_records_for_one_event_or_one_key_with_two_payloads_are_stored_twice() {
        let mut history = clean();
        // Two records of e1 under two keys.
        history.records.push(record("k1-again", "e1"));
        // A forked stream: e4 and e5 stored under one key (a reused sequence).
        for id in ["e4", "e5"] {
            history.published.push(published(id, true, "step-down"));
            history.copies.get_mut("n0").unwrap().insert(id.into());
            history.sink_acked.insert(id.into());
            history.records.push(record("k-reused", id));
        }
        let verdict = check(&history);
        assert_eq!(only(&verdict, "partition").twice, ["e1"]);
        assert_eq!(only(&verdict, "step-down").twice, ["e4", "e5"]);
        assert_eq!(verdict.sink_violations(), 3, "{}", verdict.table(&BTreeMap::new()));
    }

    #[test]
    fn a_record_or_dead_letter_of_an_event_never_published_is_unexpected() {
        let mut history = clean();
        history.records.push(record("k9", "e9"));
        history.dead_lettered.insert("e10".into());
        let verdict = check(&history);
        assert_eq!(only(&verdict, UNPUBLISHED).unexpected, ["e10", "e9"]);
        assert_eq!(verdict.sink_violations(), 2);
    }

    #[test]
    fn an_event_left_in_the_stream_neither_stored_nor_dead_lettered_is_stuck() {
        let mut history = clean();
        // In a minority node's copy only, never acknowledged to its producer: still stuck, the
        // sink must finish what the stream holds.
        history.published.push(published("e4", false, "bridge"));
        history.copies.get_mut("n1").unwrap().insert("e4".into());
        let verdict = check(&history);
        assert_eq!(only(&verdict, "bridge").stuck, ["e4"]);
        assert!(only(&verdict, "bridge").nats_lost.is_empty());
        assert_eq!(verdict.sink_violations(), 1);
    }

    #[test]
    fn the_table_names_examples_of_every_category_it_counts() {
        let mut history = clean();
        history.records.push(record("k9", "e9"));
        history.published.push(published("e4", true, "partition"));
        let table = check(&history).table(&BTreeMap::new());
        assert!(table.contains("| partition | 0 | 3 | 1 | 0 | 0 | 0 | 0 | 0 | - |"), "{table}");
        assert!(table.contains("NATS lost: 1 (e.g. e4)") && table.contains("unexpected: 1 (e.g. e9)"), "{table}");
    }
}
