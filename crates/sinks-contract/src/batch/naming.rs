//! Names of batch objects and of their manifests, derived from what an object holds.
//!
//! An object of partition `P` is `P/<stream>-<first>-<last>.<ext>`: the stream and the
//! first and last stream sequence it holds, zero-padded to 20 digits so names sort by
//! sequence. Never a random or wall-clock name: two committed objects of a partition never
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

/// `stream` reduced to `[A-Za-z0-9_-]` (JetStream stream names already are, almost always).
pub fn stream_part(stream: &str) -> String {
    let out: String =
        stream.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
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

/// The stream part and sequence range of an object name, if it is one of ours.
pub fn parse_object_name(name: &str) -> Option<(String, u64, u64)> {
    let (stem, _ext) = name.split_once('.')?;
    let mut parts = stem.rsplitn(3, '-');
    let last = parts.next()?;
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
        assert_eq!(stream_part("a.b c"), "a_b_c");
        assert_eq!(manifest_name(3), "0000000003.manifest");
        assert_eq!(slot_of("0000000003.manifest"), Some(3));
        for bad in ["3.manifest", "000000000x.manifest", "0000000003.json"] {
            assert_eq!(slot_of(bad), None, "{bad}");
        }
        assert_eq!(manifest_dir("ORDERS/2026", "ORDERS"), "ORDERS/2026/_nats-sinks/ORDERS");
    }
}
