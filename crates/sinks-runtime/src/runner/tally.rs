//! Policy tallies: the pass and reject counts per policy step that the reference reports.

use crate::metrics::{CounterId, Metrics};

/// The policy steps the reference counts, with their counters: (section, messages passed,
/// messages rejected, batches passed, batches rejected).
pub(super) const COUNTED_STEPS: [(&str, [CounterId; 4]); 3] = [
    (
        "message_authenticity",
        [
            CounterId::MessageAuthenticityMessagesPassed,
            CounterId::MessageAuthenticityMessagesRejected,
            CounterId::MessageAuthenticityBatchesPassed,
            CounterId::MessageAuthenticityBatchesRejected,
        ],
    ),
    (
        "size_policy",
        [
            CounterId::SizePolicyMessagesPassed,
            CounterId::SizePolicyMessagesRejected,
            CounterId::SizePolicyBatchesPassed,
            CounterId::SizePolicyBatchesRejected,
        ],
    ),
    (
        "pre_sink_policy",
        [
            CounterId::PolicyMessagesPassed,
            CounterId::PolicyMessagesRejected,
            CounterId::PolicyBatchesPassed,
            CounterId::PolicyBatchesRejected,
        ],
    ),
];

/// Pass and reject counts of one batch for [`COUNTED_STEPS`].
#[derive(Debug, Default)]
pub(super) struct PolicyTally {
    passed: [u64; 3],
    rejected: [u64; 3],
}

impl PolicyTally {
    /// Counts one message: every enabled step before `rejected_by` (all of them when `None`)
    /// passed it; `rejected_by` refused it.
    pub(super) fn passed(&mut self, steps: &[&'static str], rejected_by: Option<&str>) {
        for step in steps {
            if Some(*step) == rejected_by {
                if let Some(i) = COUNTED_STEPS.iter().position(|(s, _)| s == step) {
                    self.rejected[i] += 1;
                }
                return;
            }
            if let Some(i) = COUNTED_STEPS.iter().position(|(s, _)| s == step) {
                self.passed[i] += 1;
            }
        }
    }

    pub(super) fn record(&self, metrics: &Metrics) {
        for (i, (_, [msg_ok, msg_no, batch_ok, batch_no])) in COUNTED_STEPS.iter().enumerate() {
            metrics.inc(*msg_ok, self.passed[i]);
            metrics.inc(*msg_no, self.rejected[i]);
            metrics.inc(*batch_ok, u64::from(self.passed[i] > 0));
            metrics.inc(*batch_no, u64::from(self.rejected[i] > 0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MetricsConfig;

    /// Every step of the pipeline, in its order.
    const STEPS: [&str; 8] = [
        "mission_metadata",
        "security_labels",
        "message_authenticity",
        "encryption",
        "size_policy",
        "pre_sink_policy",
        "custody",
        "priority_lanes",
    ];

    #[test]
    fn each_counted_step_counts_what_reached_it() {
        // (enabled steps, the step that refused each message (None: passed), passed, rejected)
        type Row = (&'static [&'static str], &'static [Option<&'static str>], [u64; 3], [u64; 3]);
        #[rustfmt::skip]
        let table: &[Row] = &[
            (&STEPS, &[None, None], [2, 2, 2], [0, 0, 0]),
            (&STEPS, &[Some("size_policy")], [1, 0, 0], [0, 1, 0]),
            (&STEPS, &[Some("message_authenticity"), None], [1, 1, 1], [1, 0, 0]),
            (&STEPS, &[Some("pre_sink_policy")], [1, 1, 0], [0, 0, 1]),
            // A step that is not counted still stops the count of the steps after it.
            (&STEPS, &[Some("security_labels")], [0, 0, 0], [0, 0, 0]),
            (&STEPS, &[Some("custody")], [1, 1, 1], [0, 0, 0]),
            // Steps that are off count nothing.
            (&["size_policy"], &[None, Some("size_policy")], [0, 1, 0], [0, 1, 0]),
            (&[], &[None], [0, 0, 0], [0, 0, 0]),
        ];
        for (steps, messages, passed, rejected) in table {
            let mut tally = PolicyTally::default();
            for rejected_by in *messages {
                tally.passed(steps, *rejected_by);
            }
            assert_eq!((tally.passed, tally.rejected), (*passed, *rejected), "{steps:?} {messages:?}");
        }
    }

    #[test]
    fn a_batch_counts_once_per_step_it_passed_or_was_rejected_by() {
        let metrics = Metrics::new(&MetricsConfig { enabled: true, ..MetricsConfig::default() });
        let mut tally = PolicyTally::default();
        for rejected_by in [None, None, Some("size_policy")] {
            tally.passed(&STEPS, rejected_by);
        }
        tally.record(&metrics);
        let counts: Vec<u64> = COUNTED_STEPS.iter().flat_map(|(_, ids)| ids.map(|id| metrics.counter(id))).collect();
        #[rustfmt::skip]
        assert_eq!(counts, [
            3, 0, 1, 0, // authenticity: 3 messages passed, the batch passed
            2, 1, 1, 1, // size: 2 passed, 1 rejected; the batch counts as both
            2, 0, 1, 0, // pre-sink: the 2 that reached it
        ]);
    }
}
