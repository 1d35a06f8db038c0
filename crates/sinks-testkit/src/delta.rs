//! Reading a Delta Lake table written by the batch mode's table mode, with the Python
//! `deltalake` package (delta-rs) and with DuckDB (the script `delta_read.py`, run by the
//! tools venv's Python, which `cargo xtask setup` fills): what each reader saw.

use std::collections::BTreeMap;

/// What the two readers saw of a table.
#[derive(Debug, Clone)]
pub struct DeltaRead {
    /// The whole report (see `delta_read.py`).
    pub report: serde_json::Value,
}

impl DeltaRead {
    /// `(stream, stream_sequence)` of every row `reader` (`deltalake` or `duckdb`) saw, with
    /// how many times.
    pub fn rows(&self, reader: &str) -> BTreeMap<(String, u64), usize> {
        let mut out = BTreeMap::new();
        for row in self.report[reader]["rows"].as_array().into_iter().flatten() {
            let stream = row[0].as_str().unwrap_or_default().to_owned();
            let seq = row[1].as_u64().unwrap_or_default();
            *out.entry((stream, seq)).or_default() += 1;
        }
        out
    }

    /// The transaction version delta-rs reads for application `app`.
    pub fn txn(&self, app: &str) -> Option<u64> {
        self.report["deltalake"]["txn"][app].as_u64()
    }
}

/// Reads the table at `uri` (a directory, or `s3://bucket/prefix` with `storage` holding
/// `endpoint_url`, `aws_access_key_id`, `aws_secret_access_key`, `aws_region`,
/// `allow_http`), asking delta-rs for the transaction versions of `apps`.
pub fn read_delta(uri: &str, storage: &serde_json::Value, apps: &[String]) -> Result<DeltaRead, String> {
    let python = crate::tools_dir().join("venv/bin/python");
    let out = std::process::Command::new(&python)
        .args(["-c", include_str!("delta_read.py"), uri, &storage.to_string(), &serde_json::json!(apps).to_string()])
        .output()
        .map_err(|e| format!("cannot run {}: {e} (run `cargo xtask setup`)", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "reading the delta table failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let report = serde_json::from_slice(&out.stdout).map_err(|e| format!("the readers' report is not JSON: {e}"))?;
    Ok(DeltaRead { report })
}

/// Runs delta-rs's `OPTIMIZE` (compaction) on the table at `uri`: what a reader's
/// maintenance does between two runs of the sink.
pub fn optimize_delta(uri: &str, storage: &serde_json::Value) -> Result<(), String> {
    maintain_delta(uri, storage, &[Maintenance::Optimize])
}

/// One step of a reader's maintenance of a table, run by delta-rs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maintenance {
    /// `OPTIMIZE` (compaction: removes and adds files, `dataChange: false`).
    Optimize,
    /// `create_checkpoint()`: delta-rs's own checkpoint of the latest version.
    Checkpoint,
    /// Sets `delta.logRetentionDuration` to zero (a `metaData` commit), so that
    /// [`Maintenance::Cleanup`] removes every log entry before the latest checkpoint.
    NoLogRetention,
    /// `cleanup_metadata()`: removes the expired log entries and checkpoints.
    Cleanup,
}

/// Runs `steps` on the table at `uri` with delta-rs, in order.
pub fn maintain_delta(uri: &str, storage: &serde_json::Value, steps: &[Maintenance]) -> Result<(), String> {
    let python = crate::tools_dir().join("venv/bin/python");
    let mut script = String::from(
        "import json, sys, time\nfrom deltalake import DeltaTable\nopts = json.loads(sys.argv[2]) or None\n\
         t = lambda: DeltaTable(sys.argv[1], storage_options=opts)\n",
    );
    for step in steps {
        script.push_str(match step {
            Maintenance::Optimize => "print(t().optimize.compact())\n",
            Maintenance::Checkpoint => "t().create_checkpoint()\n",
            Maintenance::NoLogRetention => {
                "t().alter.set_table_properties({'delta.logRetentionDuration': 'interval 0 seconds'})\n"
            }
            // Expiry compares modification times in milliseconds: let one pass.
            Maintenance::Cleanup => "time.sleep(0.05)\nt().cleanup_metadata()\n",
        });
    }
    let out = std::process::Command::new(&python)
        .args(["-c", &script, uri, &storage.to_string()])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("delta-rs maintenance {steps:?} failed: {}", String::from_utf8_lossy(&out.stderr)))
    }
}
