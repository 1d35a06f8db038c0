//! `cargo xtask jepsen` (under way, issue 63): the fault harness of docs/reliability.md. A
//! three-node nats-server cluster, each node in a network namespace of its own
//! (`sinks_testkit::NetCluster`), an R3 stream, producers publishing unique events and the
//! sink with two workers on one consumer, under seeded partitions, one-way cuts, bridges,
//! pauses, kills and leader step-downs; then [`check`] sorts every event into NATS's losses
//! and the sink's violations, a row per fault kind.
//!
//! So far the checker is here; the command that runs the faults and feeds it is the next step.

// The checker is used by its tests until the command that feeds it lands.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod check;
