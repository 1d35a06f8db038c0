"""Reads a Delta Lake table twice, for the table-mode tests of nats-sinks, and prints what
each reader saw as one JSON document:

- "deltalake": the Python `deltalake` package (delta-rs) reads the table at its URI (a
  directory, or s3://bucket/prefix with the storage options given as JSON in argv[2]): the
  table version, partition columns, column names (declared, and read with every row), the
  type the standard timestamp column was read as, the transaction version of each
  application id named in argv[3] (JSON list), and (stream, stream_sequence) of every row;
- "duckdb": the log is replayed here and DuckDB reads the Parquet files it names, with Hive
  partitioning: the live files of the checkpoint `_last_checkpoint` names (read by DuckDB;
  without a pointer, the newest `*.checkpoint.parquet` when version 0 is gone), then the
  add and remove actions of every later `_delta_log` entry, in version order; on S3 the log
  and those files are first copied into a temporary directory (DuckDB's httpfs extension is
  not installed). Its rows, in the same form, the file count, the checkpoint version it
  started from and the names in `_delta_log`.
"""

import json
import os
import sys
import tempfile

import duckdb
from deltalake import DeltaTable

uri = sys.argv[1]
options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
apps = json.loads(sys.argv[3]) if len(sys.argv) > 3 else []

table = DeltaTable(uri, storage_options=options or None)
# Every column is read (the timestamps, the partition columns), then the two compared.
whole = table.to_pyarrow_table()
rows = whole.select(["stream", "stream_sequence"]).to_pydict()
out = {
    "deltalake": {
        "version": table.version(),
        "partition_columns": table.metadata().partition_columns,
        "columns": [f.name for f in table.schema().fields],
        "read_columns": whole.column_names,
        "timestamp_type": str(whole.schema.field("timestamp").type),
        "txn": {app: table.transaction_version(app) for app in apps},
        "rows": sorted(zip(rows["stream"], rows["stream_sequence"])),
    }
}


def local_root():
    """The table as a local directory: itself, or a copy of its log and data files."""
    if not uri.startswith("s3://"):
        return uri, None
    import pyarrow.fs as pafs

    endpoint = options["endpoint_url"]
    s3 = pafs.S3FileSystem(
        access_key=options["aws_access_key_id"],
        secret_key=options["aws_secret_access_key"],
        endpoint_override=endpoint.split("://", 1)[1],
        scheme=endpoint.split("://", 1)[0],
        region=options.get("aws_region", "us-east-1"),
    )
    base = uri[len("s3://"):].rstrip("/")
    temp = tempfile.TemporaryDirectory()
    for info in s3.get_file_info(pafs.FileSelector(base, recursive=True)):
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(base) + 1:]
        if not (rel.startswith("_delta_log/") or rel.endswith(".parquet")):
            continue
        dest = os.path.join(temp.name, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with s3.open_input_stream(info.path) as src, open(dest, "wb") as dst:
            dst.write(src.read())
    return temp.name, temp


root, keep = local_root()
log = os.path.join(root, "_delta_log")
names = sorted(os.listdir(log))
db = duckdb.connect()
files = {}
start = None
pointer = os.path.join(log, "_last_checkpoint")
if os.path.exists(pointer):
    with open(pointer) as f:
        start = json.load(f)["version"]
elif "00000000000000000000.json" not in names:
    listed = [int(n.split(".")[0]) for n in names if n.endswith(".checkpoint.parquet")]
    start = max(listed) if listed else None
if start is not None:
    checkpoint = os.path.join(log, "%020d.checkpoint.parquet" % start)
    for (path,) in db.execute(
        "select add.path from read_parquet(?) where add is not null", [checkpoint]
    ).fetchall():
        files[path] = True
for name in names:
    if not name.endswith(".json") or (start is not None and int(name.split(".")[0]) <= start):
        continue
    with open(os.path.join(log, name)) as entry:
        for line in entry:
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                files[action["add"]["path"]] = True
            if "remove" in action:
                files.pop(action["remove"]["path"], None)
paths = [os.path.join(root, p) for p in sorted(files)]
if paths:
    got = db.execute(
        "select stream, stream_sequence from read_parquet(?, hive_partitioning = true)", [paths]
    ).fetchall()
else:
    got = []
out["duckdb"] = {
    "files": len(paths),
    "rows": sorted([s, q] for s, q in got),
    "checkpoint": start,
    "log": names,
}
print(json.dumps(out))
