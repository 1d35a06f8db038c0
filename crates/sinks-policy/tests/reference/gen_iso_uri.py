"""Generates timestamps and URIs and records what Python 3.11 (the reference's interpreter)
makes of them: `datetime.fromisoformat` accepts or not; `urlparse` scheme and netloc, or a
ValueError (JSON lines on stdout). Usage: gen_iso_uri.py SEED COUNT."""
import random, json
from datetime import datetime
from urllib.parse import urlparse
import sys
random.seed(int(sys.argv[1])); COUNT = int(sys.argv[2])
bases = ["2026-01-01","20260101","2026-W01","2026W01","2026-W01-3","2026W013","2026-01-01T12","2026-01-01T12:30","2026-01-01T12:30:45",
 "2026-01-01T12:30:45.123","2026-01-01T12:30:45.123456","2026-01-01T12:30:45,5","2026-01-01T123045","2026-01-01T1230","2026-01-01 12:30:45+05:30",
 "2026-01-01T12:30:45-0800","2026-01-01T12:30:45+05","2026-01-01T12:30:45.5+05:30:15.25","2026-01-01T12:30:45Z","2026-W01-3T10:00","2026W013T1000",
 "2024-02-29T23:59:59.999999+23:59","2026-12-31T00:00:00-00:00","0001-01-01","9999-12-31T23:59:59","2026-01-01é12:00","2026-01-01\u6f2212:00",
 "2026-01-01\U0001F60012:00","2020-W53-7","2026-W53","2026-W01-1T12","2026-W0112","2026W0112","2026W01123"]
alpha = list("0123456789-:T.,+Z W") + ["é","\u6f22","x","\U0001F600"]
def mutate(s):
    s = list(s)
    for _ in range(random.randint(1,3)):
        op = random.random()
        i = random.randint(0, len(s))
        if op < 0.35 and s: s.pop(min(i, len(s)-1))
        elif op < 0.7: s.insert(i, random.choice(alpha))
        elif s: s[min(i,len(s)-1)] = random.choice(alpha)
    return "".join(s)
seen=set(); out=[]
cands = bases[:]
for _ in range(COUNT):
    cands.append(mutate(random.choice(bases)))
# random digit-heavy strings
for _ in range(COUNT // 3):
    n=random.randint(6,30); cands.append("".join(random.choice("0123456789-:TW+Z.") for _ in range(n)))
for s in cands:
    if s in seen: continue
    seen.add(s)
    t = s.replace("Z", "+00:00")
    try: datetime.fromisoformat(t); ok=True
    except ValueError: ok=False
    out.append({"s": s, "ok": ok})
for o in out:
    print(json.dumps({"kind": "iso", **o}, ensure_ascii=False))
# URLs
ub = ["s3://bucket/key","https://host/p","https://[::1]:8443/x","https://[fe80::1%25eth0]/x","https://[v1.x]/","artifact://a/b","file:/tmp/x","urn:x:y",
 "HTTPS://h","https:///x","https:x","oci://reg/img","s3:bucket","https://[1.2.3.4]/","https://[::1/x","https://::1]/x","https://ex\uff0fample/x",
 "https://h?q#f","//host/p","https://[1:2:3:4:5:6:7:8]/","https://[::ffff:1.2.3.4]/","https://[1::2::3]/","https://[12345::]/","https://[1:2:3:4:5:6:7::]/",
 "https://[::1:2:3:4:5:6:7]/","https://[1:2:3:4:5:6:7:8:9]/","https://[::01.2.3.4]/","https://[vz.x]/","https://[v1.]/","a+b.c-d://x","1s3://x","https://h\u2100/"]
ualpha = list(":/[]%.?#@v1fF") + ["\uff0f","\u2100","é"," "]
def umut(s):
    s=list(s)
    for _ in range(random.randint(1,3)):
        i=random.randint(0,len(s)); op=random.random()
        if op<0.35 and s: s.pop(min(i,len(s)-1))
        elif op<0.7: s.insert(i, random.choice(ualpha))
        elif s: s[min(i,len(s)-1)] = random.choice(ualpha)
    return "".join(s)
uc = ub[:] + [umut(random.choice(ub)) for _ in range(COUNT)]
res=[]; useen=set()
for s in uc:
    if s in useen: continue
    useen.add(s)
    try:
        p = urlparse(s); r = [p.scheme, bool(p.netloc)]
    except ValueError: r = None
    res.append({"s": s, "r": r})
for o in res:
    print(json.dumps({"kind": "uri", **o}, ensure_ascii=False))
