"""The official Python SDK (borneo) runs the NoSQL sink's operations against a NoSQL proxy
and prints what it saw as one JSON document on stdout.

Run against a real KVLite + proxy, its output is the golden transcript
(fixtures/nosql_borneo_live.json); the testkit's test server must produce the same one
(tests/nosql_server.rs). Usage: python nosql_borneo_check.py http://127.0.0.1:PORT TABLE
"""
import json
import sys

from borneo import (GetRequest, GetTableRequest, NoSQLHandle, NoSQLHandleConfig, PutOption,
                    PutRequest, TableRequest)
from borneo.kv import StoreAccessTokenProvider

endpoint, table = sys.argv[1], sys.argv[2]
# No logger: borneo's default one writes logs/driver.log into the working directory.
config = NoSQLHandleConfig(endpoint).set_authorization_provider(StoreAccessTokenProvider()).set_logger(None)
handle = NoSQLHandle(config)
steps = []


def step(name, action):
    try:
        steps.append([name, action()])
    except Exception as e:  # the exception class is the result
        steps.append([name, {"error": type(e).__name__}])


def plain(value):
    return json.loads(json.dumps(value)) if value is not None else None


def ddl(statement):
    result = handle.table_request(TableRequest().set_statement(statement))
    result.wait_for_completion(handle, 40000, 200)
    return {"state": result.get_state()}


def get_table():
    result = handle.get_table(GetTableRequest().set_table_name(table))
    schema = json.loads(result.get_schema())
    return {"state": result.get_state(), "primaryKey": schema["primaryKey"],
            "fields": [[f["name"], f["type"]] for f in schema["fields"]]}


def put(row, option=None, return_row=False, name=None):
    request = PutRequest().set_table_name(name or table).set_value(row).set_return_row(return_row)
    if option is not None:
        request.set_option(option)
    result = handle.put(request)
    return {"written": result.get_version() is not None,
            "existing_value": plain(result.get_existing_value()),
            "existing_version": result.get_existing_version() is not None}


def get(key, name=None):
    result = handle.get(GetRequest().set_table_name(name or table).set_key({"sink_key": key}))
    return {"value": plain(result.get_value()), "version": result.get_version() is not None}


def row(key, doc, at=1):
    return {"sink_key": key, "event_json": doc, "stored_at_epoch_ns": at}


columns = "(sink_key STRING, event_json JSON, stored_at_epoch_ns LONG, PRIMARY KEY(sink_key))"
step("create", lambda: ddl("CREATE TABLE %s %s" % (table, columns)))
step("get_table", get_table)
step("create_again", lambda: ddl("CREATE TABLE %s %s" % (table, columns)))
step("create_if_not_exists", lambda: ddl("CREATE TABLE IF NOT EXISTS %s %s" % (table, columns)))
doc = {"z": 1, "a": [1, 2.5, "x", None, True], "n": None, "m": {"k": "ünï"}, "big": 9007199254740993}
step("put_if_absent_new", lambda: put(row("k1", doc), PutOption.IF_ABSENT))
step("put_if_absent_taken", lambda: put(row("k1", {"v": 2}, 2), PutOption.IF_ABSENT))
step("put_if_absent_taken_return_row", lambda: put(row("k1", {"v": 2}, 2), PutOption.IF_ABSENT, True))
step("put_if_present_missing", lambda: put(row("k2", {"v": 1}), PutOption.IF_PRESENT))
step("put_if_present_taken", lambda: put(row("k1", {"v": 3}, 3), PutOption.IF_PRESENT))
step("put_return_row", lambda: put(row("k1", {"v": 4}, 4), None, True))
step("put_new_return_row", lambda: put(row("k3", {"v": 1}), None, True))
step("get", lambda: get("k1"))
step("get_missing_row", lambda: get("nope"))
step("put_missing_key", lambda: put({"event_json": {}, "stored_at_epoch_ns": 1}))
step("put_key_of_wrong_type", lambda: put({"sink_key": 5, "event_json": {}, "stored_at_epoch_ns": 1}))
step("put_extra_field", lambda: put({"sink_key": "k4", "event_json": {}, "stored_at_epoch_ns": 1, "other": 1}))
step("get_extra_field", lambda: get("k4"))
step("get_missing_table", lambda: get("k1", table + "_missing"))
step("put_missing_table", lambda: put(row("k1", {}), None, False, table + "_missing"))
step("drop", lambda: ddl("DROP TABLE %s" % table))
step("get_table_dropped", get_table)
step("drop_if_exists_missing", lambda: ddl("DROP TABLE IF EXISTS %s" % table))
handle.close()
print(json.dumps(steps, indent=1, sort_keys=True))
