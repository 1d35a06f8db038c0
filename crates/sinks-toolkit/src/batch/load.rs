//! Reading a partition's manifest log ([`super::manifest`]) into the writer's index: every
//! manifest once, checked against the objects that are visible, an object whose manifest is
//! there but whose object is not completed from its staging (its writer stopped after
//! committing), and a manifest without its object or staging void; later, only the slots
//! committed since (before a claim).

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;

use super::engine::{Inner, PARALLEL};
use super::groups::lock;
use super::index::{Committed, PartIndex, PartKey, Slot};
use super::manifest::Manifest;
use super::naming;
use super::object_log::ObjectLog;
use sinks_contract::error::SinkError;

impl<L: ObjectLog> Inner<L> {
    /// Reads the manifest log of `key` unless it is loaded.
    pub(super) async fn ensure_loaded(&self, key: &PartKey) -> Result<(), SinkError> {
        if lock(&self.state).index.contains(key) {
            return Ok(());
        }
        let guard = self.lock_for(key);
        let _held = guard.lock().await;
        if lock(&self.state).index.contains(key) {
            return Ok(());
        }
        let part = self.read_part(key).await?;
        let mut state = lock(&self.state);
        let open: Vec<PartKey> = state.open.keys().cloned().collect();
        let keep: Vec<&PartKey> = open.iter().collect();
        state.index.put(key.clone(), part, &keep);
        Ok(())
    }

    /// Reads every manifest of `key` whose slot is not in `known`, completing objects that
    /// are not visible yet.
    async fn read_new_slots(&self, key: &PartKey, known: &HashSet<u64>) -> Result<Vec<(u64, Slot)>, SinkError> {
        let dir = naming::manifest_dir(&key.0, &key.1);
        let mut slots: Vec<u64> = self
            .log
            .list(&dir)
            .await?
            .iter()
            .filter_map(|n| naming::slot_of(n))
            .filter(|s| !known.contains(s))
            .collect();
        if slots.is_empty() {
            return Ok(Vec::new());
        }
        slots.sort_unstable();
        let objects: HashSet<String> = self.log.list(&key.0).await?.into_iter().collect();
        let objects = &objects;
        let dir = &dir;
        let read = futures::stream::iter(slots.into_iter().map(|slot| async move {
            let name = format!("{dir}/{}", naming::manifest_name(slot));
            (slot, self.read_slot(&name, objects).await)
        }))
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await;
        let mut out = Vec::with_capacity(read.len());
        for (slot, entry) in read {
            if let Some(entry) = entry? {
                out.push((slot, entry));
            }
        }
        Ok(out)
    }

    /// One manifest, verified: its object visible (completed now if needed), or void.
    async fn read_slot(&self, name: &str, objects: &HashSet<String>) -> Result<Option<Slot>, SinkError> {
        let Some(bytes) = self.log.read(name).await? else { return Ok(None) };
        let manifest = Manifest::from_bytes(&bytes).map_err(|e| {
            tracing::error!(sink = self.settings.sink, error = %e, "a batch manifest cannot be read; its partition stays blocked until it is repaired");
            SinkError::temporary(format!("unreadable batch manifest: {e}"))
        })?;
        let object_name = manifest.object.rsplit('/').next().unwrap_or_default().to_owned();
        let visible = objects.contains(&object_name) || {
            let completed = self.log.complete(&manifest.object, &manifest.staging).await?;
            if completed {
                tracing::warn!(
                    sink = self.settings.sink,
                    slot = manifest.slot,
                    first = manifest.first,
                    last = manifest.last,
                    "batch object completed from its staging (its writer stopped after committing its manifest)"
                );
            } else {
                tracing::warn!(
                    sink = self.settings.sink,
                    slot = manifest.slot,
                    first = manifest.first,
                    last = manifest.last,
                    "batch manifest without its object or staging: void, its messages are written again"
                );
            }
            completed
        };
        if !visible {
            return Ok(Some(Slot::Void));
        }
        let set = manifest.sequence_set().map_err(SinkError::temporary)?;
        Ok(Some(Slot::Committed(Arc::new(Committed {
            object: manifest.object,
            format: manifest.format,
            compression: manifest.compression,
            set,
            bytes: manifest.bytes,
            rows: manifest.rows,
        }))))
    }

    /// [`Self::ensure_loaded`] for a caller that holds the partition's lock.
    pub(super) async fn ensure_loaded_locked(&self, key: &PartKey) -> Result<(), SinkError> {
        if lock(&self.state).index.contains(key) {
            return Ok(());
        }
        let part = self.read_part(key).await?;
        lock(&self.state).index.put(key.clone(), part, &[]);
        Ok(())
    }

    /// Every manifest of `key`, read into a partition index (both loads above).
    async fn read_part(&self, key: &PartKey) -> Result<PartIndex, SinkError> {
        let mut part = PartIndex::default();
        for (slot, entry) in self.read_new_slots(key, &HashSet::new()).await? {
            part.insert(slot, entry);
        }
        Ok(part)
    }

    /// Reads the manifests of `key` committed since it was loaded (the caller holds the
    /// partition's lock).
    pub(super) async fn refresh(&self, key: &PartKey) -> Result<(), SinkError> {
        let known: HashSet<u64> = {
            let mut state = lock(&self.state);
            state.index.get_mut(key).map(|p| p.slots().collect()).unwrap_or_default()
        };
        let slots = self.read_new_slots(key, &known).await?;
        let mut state = lock(&self.state);
        match state.index.get_mut(key) {
            Some(part) => {
                for (slot, entry) in slots {
                    part.insert(slot, entry);
                }
            }
            None => {
                drop(state);
                return Err(SinkError::temporary("manifest log evicted while it was read"));
            }
        }
        Ok(())
    }
}
