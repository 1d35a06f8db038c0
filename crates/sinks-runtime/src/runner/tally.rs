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
