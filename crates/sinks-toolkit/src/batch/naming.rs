//! Names of batch objects and of their manifests, derived from what an object holds.
//!
//! An object of partition `P` is `P/<stream>-<first>-<last>.<ext>`: the stream and the
//! first and last stream sequence it holds, zero-padded to 20 digits so names sort by
//! sequence. In a later epoch of the stream `<stream>` is `<stream>.<epoch>`
//! (`Envelope::keyed_stream`): its objects and manifest log are apart from the earlier
//! epoch's, whose sequences they reuse. Never a random or wall-clock name: two committed objects of a partition never
//! share a name, because they never share a sequence (the manifest log below sees to it),
//! and an object's first sequence is in it.
//!
//! The manifests of partition `P` form a log per stream, `P/_nats-sinks/<stream>/<slot>.manifest`
//! (`<slot>` zero-padded to 10 digits). Creating slot `n` (a conditional create) is the
//! commit point of an object; see [`super::manifest`]. The `_` prefix keeps the directory
//! out of Spark, Hive, Athena and DuckDB hive-partition listings; the `.manifest`
//! extension keeps manifests out of `*.ndjson`, `*.json` and `*.parquet` globs.

/// Directory (under each partition) of the manifest logs.
pub const MANIFEST_DIR: &str = "_nats-sinks";
/// Extension of manifest names.
pub const MANIFEST_EXTENSION: &str = ".manifest";

/// `stream` reduced to `[A-Za-z0-9._-]` (JetStream stream names already are, almost
/// always). A stream name cannot contain `.`, so a `.` is the one of an epoch-scoped stream
/// (`ORDERS.e17`): kept, so that it never names the same log as a stream called `ORDERS_e17`.
pub fn stream_part(stream: &str) -> String {
    let out: String = stream
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' })
        .collect();
    if out.is_empty() { "_".into() } else { out }
}

/// The object name (without its partition) for `stream`'s sequences `first..=last`.
pub fn object_name(stream: &str, first: u64, last: u64, extension: &str) -> String {
    format!("{}-{first:020}-{last:020}.{extension}", stream_part(stream))
}

/// `partition/name`.
pub fn join(partition: &str, name: &str) -> String {
    format!("{partition}/{name}")
}

/// The manifest directory of `stream` in `partition`.
pub fn manifest_dir(partition: &str, stream: &str) -> String {
    format!("{partition}/{MANIFEST_DIR}/{}", stream_part(stream))
}

/// The manifest name of `slot`.
pub fn manifest_name(slot: u64) -> String {
    format!("{slot:010}{MANIFEST_EXTENSION}")
}

/// The slot of a manifest name, if it is one.
pub fn slot_of(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(MANIFEST_EXTENSION)?;
    (digits.len() == 10 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

/// The stream part and sequence range of an object name, if it is one of ours (the stream
/// part may hold an epoch's `.`; the extension starts at the first `.` after the last
/// sequence).
pub fn parse_object_name(name: &str) -> Option<(String, u64, u64)> {
    let mut parts = name.rsplitn(3, '-');
    let (last, _ext) = parts.next()?.split_once('.')?;
    let first = parts.next()?;
    let stream = parts.next()?;
    let number = |s: &str| (s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten();
    Some((stream.to_owned(), number(first)?, number(last)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sort_by_sequence() {
        let a = object_name("ORDERS", 9, 10, "ndjson");
        let b = object_name("ORDERS", 11, 2000, "ndjson.zst");
        assert_eq!(a, "ORDERS-00000000000000000009-00000000000000000010.ndjson");
        assert!(a < b);
        assert_eq!(parse_object_name(&b), Some(("ORDERS".into(), 11, 2000)));
        assert_eq!(parse_object_name(&object_name("A-B", 1, u64::MAX, "parquet")), Some(("A-B".into(), 1, u64::MAX)));
        assert_eq!(parse_object_name("notes.txt"), None);
        assert_eq!(stream_part("a/b c"), "a_b_c");
        // A later epoch of a stream: its own names, never another stream's.
        let epoch = object_name("ORDERS.e17", 3, 9, "ndjson.gz");
        assert_eq!(epoch, "ORDERS.e17-00000000000000000003-00000000000000000009.ndjson.gz");
        assert_eq!(parse_object_name(&epoch), Some(("ORDERS.e17".into(), 3, 9)));
        assert_ne!(stream_part("ORDERS.e17"), stream_part("ORDERS_e17"));
        assert_eq!(manifest_dir("P", "ORDERS.e17"), "P/_nats-sinks/ORDERS.e17");
        assert_eq!(parse_object_name("ORDERS-00000000000000000003-00000000000000000009"), None, "no extension");
        assert_eq!(manifest_name(3), "0000000003.manifest");
        assert_eq!(slot_of("0000000003.manifest"), Some(3));
        for bad in ["3.manifest", "000000000x.manifest", "0000000003.json"] {
            assert_eq!(slot_of(bad), None, "{bad}");
        }
        assert_eq!(manifest_dir("ORDERS/2026", "ORDERS"), "ORDERS/2026/_nats-sinks/ORDERS");
    }
}
