"""Generates random mission-metadata and security-label headers and records the verdict of
nats-sinks 0.4.3 on each (JSON lines on stdout): `ok` with the canonical result, or the reason
code our implementation must give. Usage: gen_headers.py SEED COUNT. Cases where the reference
raises an unexpected exception (lone surrogates, deep recursion) are skipped: those differ by
design (see docs/policies.md)."""
import json, random, re
from nats_sinks.core.mission_metadata import parse_mission_metadata_header
from nats_sinks.core.security_labels import parse_security_label_header
from nats_sinks.core.errors import ValidationError
import sys; random.seed(int(sys.argv[1])); COUNT = int(sys.argv[2])
KEYS = ["a","b","mission_id","phase","A.b:c-d","x_1","profile","n","tags"," a","a ","1a","a b","","é","token","MyPassword","pwd_x","a\\u0001","a\\u001f","k"*128,"k"*129,"a\\u00e9","api_key","z-9"]
def rstr():
    r = random.random()
    if r < 0.5: return json.dumps(random.choice(["x","track","", "  ", "é", "😀", "NATO"]), ensure_ascii=random.random()<0.5)
    if r < 0.6: return '"' + random.choice(["\\u0001","\\u007f","\\n","\\t","\\u001f","ok\\/"]) + '"'
    if r < 0.7: return '"' + "s"*random.choice([4095,4096,4097]) + '"'
    if r < 0.75: return '"\\ud83d\\ude00"'
    return json.dumps("v%d" % random.randint(0,9))
def rnum():
    return random.choice(["0","-0","1","-1","1.0","1e5","1E-3","9007199254740991","9007199254740992","-9007199254740992","1e400","-1e400","2.5","123456789012345678901234567890"])
def rval(d):
    r = random.random()
    if d > 10: return rnum()
    if r < 0.2: return rstr()
    if r < 0.35: return rnum()
    if r < 0.45: return random.choice(["true","false","null"])
    if r < 0.72: return robj(d+1)
    return rarr(d+1)
def robj(d):
    n = random.choice([0,1,2,3,3,4,5] + ([129] if random.random()<0.03 else []) + ([128] if random.random()<0.03 else []))
    keys = []
    for i in range(n):
        if n > 100: keys.append("k%d" % i); continue
        k = random.choice(KEYS) if random.random() < 0.3 else random.choice(["a","b","c","d","e","f"]) + str(random.randint(0,99))
        keys.append(k)
    if keys and random.random() < 0.1: keys.append(keys[0])
    return "{" + ",".join('"%s":%s' % (k, rval(d)) for k in keys) + "}"
def rarr(d):
    n = random.choice([0,1,2,3] + ([257] if random.random()<0.03 else []) + ([256] if random.random()<0.03 else []))
    return "[" + ",".join(rval(d) if n < 100 else "0" for _ in range(n)) + "]"
def corrupt(t):
    if random.random() < 0.08 and t:
        i = random.randrange(len(t)); return t[:i] + t[i+1:]
    if random.random() < 0.03: return t.replace("1e5", "NaN", 1)
    return t
def mcode(msg, text, mb):
    table = [("is not valid JSON","invalid_json"),("is ambiguous","ambiguous_json"),("must be a JSON object","not_object"),
      ("exceeds nesting depth 8","depth_exceeded"),("object exceeds 128 fields","too_many_fields"),("array exceeds 256 items","too_many_items"),
      ("looks secret-like","secret_key"),("string value exceeds","string_too_long"),("string value contains control","control_characters"),
      ("integer value exceeds","integer_out_of_range"),("must be finite","non_finite_number"),("profile must be one of the configured","profile_not_allowed")]
    if "byte limit" in msg:
        return "header_too_large" if len(text.encode()) > mb else "too_large"
    if re.search(r"key .* must start with|contains a key with leading|contains an empty key|key .* exceeds 128|key .* contains control", msg): return "invalid_key"
    for m, c in table:
        if m in msg: return c
    return "profile_invalid"
out = []
for i in range(COUNT):
    mb = random.choice([64, 512, 8192, 262144])
    allowed = random.choice([[], [], ["p1"], ["p1", " p2 "]])
    text = corrupt(robj(0) if random.random() < 0.9 else rval(0))
    if not text.strip(): continue
    if random.random() < 0.2: text = text.replace('"a1"', '"profile"', 1).replace('"profile":', '"profile":"p1",' if False else '"profile":', 1)
    try:
        r = parse_mission_metadata_header(text, max_bytes=mb, allowed_profiles=tuple(allowed))
        res = {"ok": json.dumps(r, sort_keys=True, separators=(",",":"), ensure_ascii=False)}
    except ValidationError as e:
        res = {"code": "mission_metadata_" + mcode(str(e), text, mb)}
    except Exception as e:
        continue  # divergent by design (lone surrogates, recursion)
    out.append({"kind": "mission", "text": text, "max_bytes": mb, "allowed": allowed, **res})
# security labels
LKEYS = ["profile","priority","classification","labels","releasability","handling_caveats","owner","originator","policy_id","retention_category","extensions","colour","token"]
LVALS = ['"nats-sinks.security-label.v1"','" nats-sinks.security-label.v1 "','"v2"','null','""','"  "','"routine"','"flash"','"NATO"','"NATO;FVEY"','["NATO","FVEY"]','["a;b"]','["a","a"," b "]','[1]','{}','{"x":1}','5','true','"a\\u0001"','"'+"o"*513+'"','"'+"o"*512+'"','["MISSION"]','"MISSION"','"log-30d"','{"api_key":1}','{"profile":"nats-sinks.data-quality.v1","accuracy":2}','[]']
def lcode(msg, text, mb):
    t = [("unsupported security label fields","unknown_field"),("profile must be 'nats-sinks","wrong_profile"),("semicolon separator","separator_in_item"),
         ("must be one of the configured values","value_not_allowed"),("outside the configured allow list","value_not_allowed"),
         ("exceeds 512 characters","value_too_long"),("longer than 512","value_too_long"),("exceeds 128 items","too_many_values"),
         ("must contain only strings","invalid_field"),("must be a string or list of strings","invalid_field"),("' must be a string","invalid_field"),
         ("extensions must be a JSON object","not_object")]
    for m, c in t:
        if m in msg: return c
    c = mcode(msg, text, mb)
    return {"ambiguous_json": "invalid_json", "profile_not_allowed": "profile_invalid"}.get(c, c)
for i in range(COUNT):
    mb = random.choice([150, 512, 8192])
    keys = random.sample(LKEYS, random.randint(0, 5))
    if random.random() < 0.05 and keys: keys.append(keys[0])
    text = "{" + ",".join('"%s":%s' % (k, random.choice(LVALS)) for k in keys) + "}"
    text = corrupt(text)
    cfg = {"allowed_priorities": random.choice([[], ["routine"]]), "allowed_classifications": random.choice([[], ["NATO SECRET"]]),
           "allowed_releasability": random.choice([[], ["NATO", "FVEY"]]), "allowed_handling_caveats": random.choice([[], ["MISSION"]]),
           "allowed_retention_categories": random.choice([[], ["log-30d"]])}
    app = {"priority": random.choice([None, "routine", "flash"]), "classification": random.choice([None, "NATO SECRET", "X"]),
           "labels": random.choice([[], ["sensor"], ["l%d" % j for j in range(129)]])}
    try:
        r = parse_security_label_header(text, max_bytes=mb, fallback_priority=app["priority"], fallback_classification=app["classification"],
                                        fallback_labels=tuple(app["labels"]), **cfg)
        res = {"ok": json.dumps(r, sort_keys=True, separators=(",",":"), ensure_ascii=False)}
    except ValidationError as e:
        res = {"code": "security_labels_" + lcode(str(e), text, mb), "msg": str(e)[:200]}
    except Exception as e:
        continue
    out.append({"kind": "labels", "text": text, "max_bytes": mb, "config": cfg, "app": app, **res})
for o in out:
    print(json.dumps(o, ensure_ascii=False))
