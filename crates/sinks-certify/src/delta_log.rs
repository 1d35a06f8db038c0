//! An independent replay of a Delta Lake table's log, for the read-backs of table-mode
//! harnesses (the file system's and S3's): which of the log's entries are commits, in
//! version order with no gap, and which data files they leave live. Pure: the caller lists
//! `_delta_log/` and reads the entries (from a directory or a bucket), then reads the live
//! files' rows. It never uses the sink's own log reader, so a sink that commits wrongly cannot
//! also read its mistake away.

use std::collections::{BTreeSet, HashSet};

/// The name of a table's log directory.
pub const LOG_DIR: &str = "_delta_log";

/// The commit entries among `names` (file names in `_delta_log/`: `<20 digits>.json`;
/// checkpoints and other files left out), sorted by version. An error when they do not run
/// from version 0 without a gap (the sink never removes entries, so a gap is a lost commit).
pub fn commit_entries(names: impl IntoIterator<Item = String>) -> Result<Vec<String>, String> {
    let mut entries: Vec<String> = names
        .into_iter()
        .filter(|n| n.len() == 25 && n.ends_with(".json") && n[..20].bytes().all(|b| b.is_ascii_digit()))
        .collect();
    entries.sort();
    for (version, name) in entries.iter().enumerate() {
        if *name != format!("{version:020}.json") {
            return Err(format!("the log has no entry {version} (found {name})"));
        }
    }
    Ok(entries)
}

/// The data files live after replaying `entries` (`(entry name, entry text)`, in version
/// order, as [`commit_entries`] gives them): every `add` action's path, less every `remove`
/// action's. An object added twice with `dataChange` (a slot committed twice) is an error;
/// an `add` with `dataChange: false` (a compaction's rewrite) is not.
pub fn live_files(entries: &[(String, String)]) -> Result<BTreeSet<String>, String> {
    let mut live = BTreeSet::new();
    let mut added = HashSet::new();
    for (name, text) in entries {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let action: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("{name}: {e}"))?;
            if let Some(path) = action["add"]["path"].as_str() {
                if action["add"]["dataChange"] != false && !added.insert(path.to_owned()) {
                    return Err(format!("object {path} added to the table twice (again in {name})"));
                }
                live.insert(path.to_owned());
            }
            if let Some(path) = action["remove"]["path"].as_str() {
                live.remove(path);
            }
        }
    }
    Ok(live)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(version: u64, actions: &[serde_json::Value]) -> (String, String) {
        let text: Vec<String> = actions.iter().map(serde_json::Value::to_string).collect();
        (format!("{version:020}.json"), text.join("\n"))
    }

    fn add(path: &str, data_change: bool) -> serde_json::Value {
        serde_json::json!({"add": {"path": path, "dataChange": data_change}})
    }

    #[test]
    fn commits_are_sorted_and_other_files_left_out() {
        let names = ["00000000000000000001.json", "00000000000000000000.json", "_last_checkpoint"]
            .into_iter()
            .chain(["00000000000000000001.checkpoint.parquet", "00000000000000000002.json.tmp"])
            .map(str::to_owned);
        let entries = commit_entries(names).unwrap();
        assert_eq!(entries, ["00000000000000000000.json", "00000000000000000001.json"]);
        assert!(commit_entries(Vec::new()).unwrap().is_empty(), "no log: no commits");
    }

    #[test]
    fn a_gap_or_a_missing_first_version_is_an_error() {
        let gap = ["00000000000000000000.json", "00000000000000000002.json"].map(str::to_owned);
        assert!(commit_entries(gap).unwrap_err().contains("no entry 1"));
        let late = ["00000000000000000001.json".to_owned()];
        assert!(commit_entries(late).unwrap_err().contains("no entry 0"));
    }

    #[test]
    fn removes_take_files_out_and_a_compaction_may_re_add() {
        let log = [
            entry(0, &[serde_json::json!({"protocol": {}}), add("a.parquet", true)]),
            entry(1, &[add("b.parquet", true)]),
            entry(2, &[serde_json::json!({"remove": {"path": "a.parquet"}}), add("a.parquet", false)]),
            entry(3, &[serde_json::json!({"remove": {"path": "b.parquet"}})]),
        ];
        assert_eq!(live_files(&log).unwrap().into_iter().collect::<Vec<_>>(), ["a.parquet"]);
    }

    /// The checker catches a sink that commits one object twice (a slot committed again).
    #[test]
    fn an_object_added_twice_with_data_change_is_an_error() {
        let log = [entry(0, &[add("a.parquet", true)]), entry(1, &[add("a.parquet", true)])];
        let err = live_files(&log).unwrap_err();
        assert!(err.contains("a.parquet added to the table twice"), "{err}");
    }

    #[test]
    fn a_broken_line_is_an_error() {
        let log = [("00000000000000000000.json".to_owned(), "{not json".to_owned())];
        assert!(live_files(&log).is_err());
    }
}
