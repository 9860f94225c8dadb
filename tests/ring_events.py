"""The spans and instants of a flight recorder's trace, JSON or Perfetto, as
(name, ts_ns, end_ns, args) tuples with its otherData: what ring_check.py
and flush_check.py compare."""
import json

from perfetto_decode import decode_text, protoc_decode, resolve


def events_json(data):
    """(name, ts_ns, end_ns, args) of each span and instant, and otherData."""
    doc = json.loads(data)
    evs = []
    for e in doc["traceEvents"]:
        ts = int(round(e.get("ts", 0) * 1000))
        if e["ph"] == "X":
            evs.append((e["name"], ts, ts + int(round(e["dur"] * 1000)), e.get("args", {})))
        elif e["ph"] in ("i", "I"):
            evs.append((e["name"], ts, ts, e.get("args", {})))
    return evs, doc.get("otherData", {})


def events_pftrace(protoc, proto, data):
    text, err = protoc_decode(protoc, proto, data)
    if text is None:
        raise AssertionError(f"protoc cannot decode it: {err}")
    res = resolve(decode_text(text))
    evs, other = [], {}
    for e in res.events:
        if e["type"] == "other_data":
            other = e["args"]
        elif e["type"] == "span":
            args = dict(e.get("args", {}))
            if e.get("unfinished"):
                args["unfinished"] = True
            evs.append((e["name"], e["ts"], e["end"], args))
        elif e["type"] == "instant":
            evs.append((e["name"], e["ts"], e["ts"], e.get("args", {})))
    return evs, other
