"""Runs the Rust unit-test tables of policy::mission and policy::labels (JSON lines on stdin)
through nats-sinks 0.4.3 and prints every mismatch, then `N cases, M mismatches`."""
import json, re, sys
from pydantic import ValidationError as PydErr
from nats_sinks.core.config import MissionMetadataConfig, SecurityLabelProfileConfig
from nats_sinks.core.mission_metadata import resolve_mission_metadata, thaw_mission_metadata
from nats_sinks.core.security_labels import resolve_security_label_profile, thaw_security_label_profile

GENERIC = {
 "header_too_large": r"header exceeds the configured \d+ byte limit",
 "invalid_json": r"is not valid JSON",
 "ambiguous_json": r"is ambiguous",
 "not_object": r"must be a JSON object",
 "depth_exceeded": r"exceeds nesting depth 8$",
 "too_many_fields": r"object exceeds 128 fields",
 "too_many_items": r"array exceeds 256 items",
 "invalid_key": r"key .* must start with|contains a key with leading|contains an empty key|key .* exceeds 128|key .* contains control",
 "secret_key": r"looks secret-like",
 "string_too_long": r"string value exceeds",
 "control_characters": r"contains control characters",
 "integer_out_of_range": r"integer value exceeds",
 "non_finite_number": r"must be finite",
 "profile_not_allowed": r"profile must be one of the configured values",
 "profile_invalid": r"must be a non-empty string|must not exceed|must use one of|must include a location|must be a 64|size_bytes|must be an ISO|must be a numeric score|must be between|must be one of:|must be a list|must be an object|must be numeric|must not be negative|must be a boolean|is required by profile|is not allowed by profile|must match configured profile version|must be (an array|a boolean|an integer|null|a number|an object|a string)$|configured enum values|exceeds nesting depth|object exceeds \d+ fields|array exceeds \d+ items",
 "too_large": r"exceeds the configured \d+ byte limit",
 "unknown_field": r"unsupported security label fields",
 "wrong_profile": r"profile must be 'nats-sinks.security-label.v1'",
 "invalid_field": r"must be a string'?$|field '\w+' must be a string$|must contain only strings|must be a string or list of strings",
 "value_too_long": r"exceeds 512 characters|longer than 512",
 "too_many_values": r"exceeds 128 items",
 "separator_in_item": r"semicolon separator",
 "value_not_allowed": r"must be one of the configured values|outside the configured allow list",
}
VALUE_ERROR_OK = {"profile_invalid", "invalid_json"}  # urlsplit ValueError / lone surrogate

def canon(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)

bad = 0; n = 0
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"): continue
    c = json.loads(line); n += 1
    sec = c["section"]
    if sec in ("mission_config", "labels_config"):
        cls = MissionMetadataConfig if sec == "mission_config" else SecurityLabelProfileConfig
        try:
            cls.model_validate(c["config"]); got = []
        except (PydErr, Exception) as e:
            got = [str(e).replace("\n", " | ")[:300]]
        if bool(got) != bool(c["paths"]):
            bad += 1; print("CONFIG MISMATCH", sec, json.dumps(c["config"])[:200], "want", c["paths"], "got", got)
        elif got:
            print("  ok-config", c["paths"], "::", got[0][:220])
        continue
    try:
        if sec == "mission":
            cfg = MissionMetadataConfig.model_validate(c["config"])
            r = thaw_mission_metadata(resolve_mission_metadata(c["headers"], subject=c["subject"], config=cfg))
        else:
            cfg = SecurityLabelProfileConfig.model_validate(c["config"])
            a = c["app"]
            r = thaw_security_label_profile(resolve_security_label_profile(c["headers"], subject=c["subject"],
                priority=a["priority"], classification=a["classification"], labels=tuple(a["labels"]), config=cfg))
        got = ("ok", None if r is None else canon(r))
    except Exception as e:
        got = ("err", type(e).__name__, str(e))
    exp = c["expect"]
    hdr = json.dumps(c["headers"])[:140]
    if "ok" in exp:
        if got != ("ok", exp["ok"]):
            bad += 1; print("MISMATCH want ok", (exp["ok"] or "None")[:200], "got", str(got)[:300], hdr)
    else:
        code = exp["code"].split("_", 2)[-1] if exp["code"].startswith("mission_metadata_") else exp["code"][len("security_labels_"):]
        if got[0] != "err":
            bad += 1; print("MISMATCH want", exp["code"], "got", str(got)[:200], hdr); continue
        typ, msg = got[1], got[2]
        if typ != "ValidationError":
            if code in VALUE_ERROR_OK:
                print("  note: reference raised", typ, msg[:120], "(we:", exp["code"] + ")")
                continue
            bad += 1; print("MISMATCH type", typ, msg[:200], "want", exp["code"], hdr); continue
        if code in ("header_too_large", "too_large"):
            hv = list(c["headers"].values())[0].encode()
            mb = c["config"].get("max_bytes", 8192)
            if (len(hv) > mb) != (code == "header_too_large"):
                bad += 1; print("MISMATCH size kind", code, len(hv), mb)
        if not re.search(GENERIC[code], msg):
            bad += 1; print("MISMATCH msg want", exp["code"], "got:", msg[:250], hdr)
print(f"{n} cases, {bad} mismatches")
