//! What `nats-sink validate` says about a sink in batch mode (the file and S3 sinks' factories
//! return it): its objects, and where a sample message would go.

use super::BatchConfig;
use super::partition;

/// Two lines: the objects `batch` makes, and the partition a sample message of `stream` on
/// `subject` (stream sequence 1, now) lands in.
pub fn describe(batch: &BatchConfig, stream: &str, subject: &str) -> Vec<String> {
    let example = partition::example(&batch.template(), &batch.partition_fallback, stream, subject, batch.extension());
    vec![
        format!(
            "batch mode: {} objects ({}) of at most {} messages, {} bytes, or {} ms of waiting",
            batch.format.as_str(),
            batch.effective_compression().as_str(),
            batch.max_messages,
            batch.max_bytes,
            batch.max_age_ms
        ),
        format!("partition template `{}`: {example}", batch.partition_template),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_described_with_a_sample_object() {
        let lines = describe(&BatchConfig::default(), "ORDERS", "orders.x");
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("batch mode: ndjson objects (none) of at most "), "{lines:?}");
        assert!(lines[1].starts_with("partition template `{stream}/{yyyy}/{mm}/{dd}/{hh}`: ORDERS/"), "{lines:?}");
        assert!(lines[1].ends_with("(a sample message on `orders.x`, stream sequence 1, now)"), "{lines:?}");
    }
}
