//! Lanes by ordering key, for sinks that place a batch's messages with blocking calls (the
//! file, review package and spool sinks): the messages of one ordering key form one lane in
//! batch order, a message without a key is a lane of its own, lanes are placed in parallel on
//! blocking tasks and a lane's messages one after another, and within a lane everything
//! behind a temporary failure is held back.
//!
//! The rule is the contract's (`sinks_contract::ordering`); [`crate::in_order`] is its
//! executor for async writes, this module for blocking ones.

use std::collections::HashMap;

use sinks_contract::{MessageOutcome, OrderKey};

use crate::blocking::{TaskFailed, run_parallel};

/// The items of one ordering key (or one item without a key), in input order, each with its
/// input position.
#[derive(Debug, PartialEq, Eq)]
pub struct Lane<T>(pub Vec<(usize, T)>);

impl<T> Lane<T> {
    /// Places the lane's items one after another: `place(item, blocked)`, where `blocked` is
    /// true once an earlier item's result (its `outcome`) failed temporarily or was held
    /// back. Results keep their input positions.
    pub fn place_in_order<R>(
        self,
        mut place: impl FnMut(T, bool) -> R,
        outcome: impl Fn(&R) -> &MessageOutcome,
    ) -> Vec<(usize, R)> {
        let mut blocked = false;
        self.0
            .into_iter()
            .map(|(index, item)| {
                let placed = place(item, blocked);
                let o = outcome(&placed);
                blocked |= o.failed_temporarily() || matches!(o, MessageOutcome::HeldBack);
                (index, placed)
            })
            .collect()
    }
}

/// Groups `items` into lanes: the items sharing an ordering key in one lane, in input order;
/// each item without a key in a lane of its own. Lanes come in the order of their first item.
pub fn lanes<T>(items: impl IntoIterator<Item = (Option<OrderKey>, T)>) -> Vec<Lane<T>> {
    let mut lanes: Vec<Lane<T>> = Vec::new();
    let mut lane_of: HashMap<OrderKey, usize> = HashMap::new();
    for (index, (key, item)) in items.into_iter().enumerate() {
        let lane = match key {
            Some(key) => *lane_of.entry(key).or_insert_with(|| {
                lanes.push(Lane(Vec::new()));
                lanes.len() - 1
            }),
            None => {
                lanes.push(Lane(Vec::new()));
                lanes.len() - 1
            }
        };
        lanes[lane].0.push((index, item));
    }
    lanes
}

/// The results of one lane, with their input positions.
struct Placed<R>(Vec<(usize, R)>);

impl<R> TaskFailed for Placed<R> {
    fn task_failed() -> Self {
        // The lane's positions are lost with the task; `place_lanes` leaves them `None`.
        Self(Vec::new())
    }
}

/// Places `items` (each with its ordering key) lane by lane ([`lanes`]) on at most
/// `max_tasks` blocking tasks: `place` gets a whole lane (see [`Lane::place_in_order`]) and
/// returns its results with their input positions. Returns one result per item in input
/// order; `None` where a task panicked or `place` returned nothing for an item.
pub async fn place_lanes<T, R, F>(items: Vec<(Option<OrderKey>, T)>, max_tasks: usize, place: F) -> Vec<Option<R>>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(Lane<T>) -> Vec<(usize, R)> + Send + Sync + 'static,
{
    let count = items.len();
    let mut out: Vec<Option<R>> = (0..count).map(|_| None).collect();
    for lane in run_parallel(lanes(items), max_tasks, move |lane| Placed(place(lane))).await {
        for (index, placed) in lane.0 {
            if let Some(slot) = out.get_mut(index) {
                *slot = Some(placed);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> Option<OrderKey> {
        Some(OrderKey::of(&[&n.to_le_bytes()]))
    }

    #[test]
    fn items_of_one_key_share_a_lane_and_keyless_items_are_alone() {
        let items = vec![(key(1), 'a'), (None, 'b'), (key(2), 'c'), (key(1), 'd'), (None, 'e'), (key(2), 'f')];
        assert_eq!(
            lanes(items),
            vec![
                Lane(vec![(0, 'a'), (3, 'd')]),
                Lane(vec![(1, 'b')]),
                Lane(vec![(2, 'c'), (5, 'f')]),
                Lane(vec![(4, 'e')]),
            ]
        );
        assert_eq!(lanes(Vec::<(Option<OrderKey>, ())>::new()), vec![]);
    }

    #[test]
    fn everything_behind_a_temporary_failure_or_a_held_back_item_is_blocked() {
        let lane = Lane(vec![(0, "ok"), (2, "temporary"), (5, "ok"), (7, "ok")]);
        let mut seen = Vec::new();
        let placed = lane.place_in_order(
            |item, blocked| {
                seen.push((item, blocked));
                match item {
                    _ if blocked => MessageOutcome::HeldBack,
                    "temporary" => MessageOutcome::temporary("down"),
                    _ => MessageOutcome::Committed,
                }
            },
            |o| o,
        );
        assert_eq!(seen, vec![("ok", false), ("temporary", false), ("ok", true), ("ok", true)]);
        let positions: Vec<usize> = placed.iter().map(|(i, _)| *i).collect();
        assert_eq!(positions, vec![0, 2, 5, 7]);
        assert!(matches!(placed[3].1, MessageOutcome::HeldBack));

        // A permanent failure blocks nothing; an item held back (already known) does.
        let lane = Lane(vec![(0, 'p'), (1, 'x'), (2, 'h'), (3, 'x')]);
        let blocked: Vec<bool> = lane
            .place_in_order(
                |item, blocked| {
                    let outcome = match item {
                        'p' => MessageOutcome::permanent("bad"),
                        'h' => MessageOutcome::HeldBack,
                        _ => MessageOutcome::Committed,
                    };
                    (blocked, outcome)
                },
                |(_, o)| o,
            )
            .into_iter()
            .map(|(_, (blocked, _))| blocked)
            .collect();
        assert_eq!(blocked, vec![false, false, false, true]);
    }

    #[tokio::test]
    async fn results_come_back_in_input_order_and_a_lost_lane_is_none() {
        let items: Vec<(Option<OrderKey>, u64)> =
            (0..40).map(|n| (if n % 3 == 0 { None } else { key(n % 5) }, n)).collect();
        let placed =
            place_lanes(items, 4, |lane: Lane<u64>| lane.0.into_iter().map(|(i, n)| (i, n * 10)).collect()).await;
        assert_eq!(placed, (0..40).map(|n| Some(n * 10)).collect::<Vec<_>>());

        // A lane whose placement panics loses its items; the others come back.
        let items = vec![(key(1), 1u64), (key(2), 2), (key(1), 3)];
        let placed = place_lanes(items, 4, |lane: Lane<u64>| {
            assert!(lane.0.iter().all(|(_, n)| *n != 2), "the lane of key 2 fails");
            lane.0
        })
        .await;
        assert_eq!(placed, vec![Some(1), None, Some(3)]);
    }
}
