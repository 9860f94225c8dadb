"""Reading mlprof's Perfetto traces back in the tests: protoc's text output
parsed into packets, and the packets resolved into events the way a reader
must (interning per sequence, tracks through their descriptors), checking the
rules of the format on the way (tests/perfetto_check.py,
tests/sink_formats_check.py).
"""
import json
import os
import subprocess

# ---- protoc's text format


def protoc_decode(protoc, proto, data):
    """protoc's text for data, or None (and its message) when it does not parse."""
    r = subprocess.run([protoc, "--decode=perfetto.protos.Trace", "-I", os.path.dirname(proto), proto],
                       input=data, capture_output=True)
    if r.returncode != 0:
        return None, r.stderr.decode(errors="replace")
    return r.stdout.decode("utf-8"), ""


def _unescape(s):
    """The bytes of a string as protoc's text format writes it (C escapes, octal)."""
    out = bytearray()
    i = 0
    simple = {"n": 10, "r": 13, "t": 9, '"': 34, "'": 39, "\\": 92, "a": 7, "b": 8, "f": 12, "v": 11, "?": 63}
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        n = s[i + 1]
        if n in "01234567":
            j = i + 1
            while j < len(s) and j < i + 4 and s[j] in "01234567":
                j += 1
            out.append(int(s[i + 1:j], 8))
            i = j
        elif n == "x":
            j = i + 2
            while j < len(s) and j < i + 4 and s[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(s[i + 2:j], 16))
            i = j
        else:
            out.append(simple[n])
            i += 2
    return bytes(out)


def _scalar(v):
    if v.startswith('"'):
        assert v.endswith('"'), f"string value not closed: {v}"
        return _unescape(v[1:-1]).decode("utf-8")  # strict: names must be valid UTF-8
    if v in ("true", "false"):
        return v == "true"
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v  # an enum's name


def decode_text(text):
    """protoc --decode's text of a Trace: its packets as dicts of lists."""
    root = {}
    stack = [root]
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
            continue
        if line.endswith("{"):
            name = line[:-1].strip()
            d = {}
            stack[-1].setdefault(name, []).append(d)
            stack.append(d)
            continue
        name, _, value = line.partition(":")
        stack[-1].setdefault(name.strip(), []).append(_scalar(value.strip()))
    assert len(stack) == 1, "protoc's output is not closed"
    return root.get("packet", [])


def one(d, key, default=None):
    v = d.get(key)
    return v[0] if v else default


def packet_offsets(data):
    """Where each packet of a Trace ends (the bytes): field 1, length-delimited."""
    ends, i = [], 0
    while i < len(data):
        assert data[i] == 0x0A, f"byte {i}: 0x{data[i]:02x} is not the tag of Trace.packet"
        i += 1
        n = shift = 0
        while True:
            b = data[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        i += n
        assert i <= len(data), "the last packet is cut"
        ends.append(i)
    return ends


# ---- the events


def annotation_value(a):
    for key in ("int_value", "uint_value", "double_value", "string_value", "bool_value"):
        if key in a:
            return a[key][0]
    if "legacy_json_value" in a:
        text = a["legacy_json_value"][0]
        try:
            return json.loads(text)
        except ValueError as e:
            raise AssertionError(f"a debug annotation's JSON does not parse ({e}): {text[:200]}") from None
    raise AssertionError(f"a debug annotation without a value: {a}")


class Resolved:
    def __init__(self):
        self.events = []
        self.tracks = {}       # uuid -> what its descriptors said, merged
        self.named_in_seq = {}  # seq -> {(kind, pid, tid, name)} of the descriptors it wrote
        self.clock_snapshot = None

    def track_by_ids(self, kind, pid, tid):
        for t in self.tracks.values():
            if kind == 0 and t["kind"] == "process" and t["pid"] == pid:
                return t
            if kind in (1, 2) and t["kind"] == "thread" and t["pid"] == pid and t["tid"] == tid:
                return t
        return None


def _track_identity(res, d):
    """What a TrackDescriptor says a track is: kind, pid, tid, name."""
    uuid = one(d, "uuid")
    assert uuid, f"a track descriptor without a uuid: {d}"
    parent = one(d, "parent_uuid")
    if parent is not None:
        assert parent in res.tracks, f"track {uuid}: its parent {parent} is not described before it"
    t = {"uuid": uuid, "parent": parent, "name": one(d, "name"), "rank": one(d, "sibling_order_rank")}
    if "process" in d:
        p = d["process"][0]
        t.update(kind="process", pid=one(p, "pid"), tid=None, process_name=one(p, "process_name"))
    elif "thread" in d:
        th = d["thread"][0]
        t.update(kind="thread", pid=one(th, "pid"), tid=one(th, "tid"), thread_name=one(th, "thread_name"))
        assert parent and res.tracks[parent]["kind"] == "process" and res.tracks[parent]["pid"] == t["pid"], \
            f"thread track {uuid} is not under its process's track"
    elif "counter" in d:
        c = d["counter"][0]
        cats = c.get("categories", [])
        assert parent and res.tracks[parent]["kind"] == "process", f"counter track {uuid} is not under a process"
        t.update(kind="counter", pid=res.tracks[parent]["pid"], tid=None, cat=cats[0] if cats else None)
    else:
        assert parent and res.tracks[parent]["kind"] == "thread", f"track {uuid} ({d}) is not under a thread"
        p = res.tracks[parent]
        t.update(kind="frame", pid=p["pid"], tid=p["tid"])
    return t


def _add_descriptor(res, seq, described, d):
    t = _track_identity(res, d)
    old = res.tracks.get(t["uuid"])
    if old is not None:
        for key in ("kind", "pid", "tid", "parent"):
            assert old[key] == t[key], f"track {t['uuid']} described as {old} then as {t}"
        if t["kind"] in ("frame", "counter"):
            assert old["name"] == t["name"], f"track {t['uuid']} renamed from {old['name']} to {t['name']}"
        for key, v in t.items():
            if v is not None:
                old[key] = v
    else:
        res.tracks[t["uuid"]] = t
    described.setdefault(seq, set()).add(t["uuid"])
    kind = {"process": 0, "thread": 1}.get(t["kind"])
    if kind is not None:
        name = t.get("process_name") if kind == 0 else t.get("thread_name")
        if kind == 1 and t["name"] is not None:
            kind = 2
        res.named_in_seq.setdefault(seq, set()).add((kind, t["pid"], t["tid"] if kind else t["pid"], name))


def _clock_snapshot(res, st, idx, seq, cs):
    """A ClockSnapshot: the trace's clocks, or (with ids 64..127) clocks of
    its sequence, each tied to CLOCK_MONOTONIC read beside it."""
    clocks = {one(c, "clock_id"): c for c in cs.get("clocks", [])}
    scoped = [i for i in clocks if 64 <= i <= 127]
    if not scoped:
        res.clock_snapshot = {i: one(c, "timestamp") for i, c in clocks.items()}
        res.primary_clock = one(cs, "primary_trace_clock")
        return
    assert 3 in clocks, f"packet {idx}: sequence {seq}'s clock snapshot does not read CLOCK_MONOTONIC"
    mono = one(clocks[3], "timestamp")
    for i in scoped:
        at = one(clocks[i], "timestamp")
        assert at == mono, f"packet {idx}: clock {i} set to {at}, not CLOCK_MONOTONIC's {mono}"
        st["clocks"][i] = {"inc": one(clocks[i], "is_incremental", False), "last": at, "at": at, "mono": mono}


def _packet_time(st, idx, seq, p):
    """A packet's timestamp as CLOCK_MONOTONIC: absolute, or a delta on its
    sequence's incremental clock (which it moves on)."""
    ts = one(p, "timestamp")
    clock = one(p, "timestamp_clock_id", st["clock"])
    if clock == 3:
        return ts
    assert 64 <= clock <= 127, f"packet {idx}: timestamps on clock {clock}"
    c = st["clocks"].get(clock)
    assert c is not None, f"packet {idx}: clock {clock} of sequence {seq} used before a snapshot set it"
    v = c["last"] + ts if c["inc"] else ts
    c["last"] = v
    return c["mono"] + (v - c["at"])


def _profile_interned(st, idx, interned):
    """InternedData's profile tables (the sampled call stacks): function
    names, mapping paths, mappings, frames and callstacks, each defined once
    per sequence, every id they name defined before (in the same packet or
    an earlier one)."""
    prof = st.setdefault("profile", {"fn": {}, "paths": {}, "maps": {}, "frames": {}, "stacks": {}})
    for field, table in (("function_names", "fn"), ("mapping_paths", "paths")):
        for e in interned.get(field, []):
            iid, text = one(e, "iid"), one(e, "str")
            assert iid and text is not None and iid not in prof[table], f"packet {idx}: bad {field} entry {e}"
            prof[table][iid] = text
    for e in interned.get("mappings", []):
        iid = one(e, "iid")
        paths = e.get("path_string_ids", [])
        assert iid and iid not in prof["maps"] and all(x in prof["paths"] for x in paths), \
            f"packet {idx}: bad mapping {e}"
        assert one(e, "start", 0) < one(e, "end", 0), f"packet {idx}: mapping {iid} is empty"
        prof["maps"][iid] = "".join("/" + prof["paths"][x] for x in paths)
    for e in interned.get("frames", []):
        iid, fn, m = one(e, "iid"), one(e, "function_name_id"), one(e, "mapping_id")
        assert iid and iid not in prof["frames"], f"packet {idx}: frame {iid} defined twice"
        assert fn in prof["fn"] and m in prof["maps"] and one(e, "rel_pc") is not None, \
            f"packet {idx}: frame {e} names what is not interned"
        prof["frames"][iid] = (prof["fn"][fn], prof["maps"][m])
    for e in interned.get("callstacks", []):
        iid, ids = one(e, "iid"), e.get("frame_ids", [])
        assert iid and iid not in prof["stacks"] and ids, f"packet {idx}: bad callstack {e}"
        assert all(x in prof["frames"] for x in ids), f"packet {idx}: callstack {iid} names a frame not interned"
        prof["stacks"][iid] = [prof["frames"][x][0] for x in ids]


def _perf_sample(st, idx, seq, flags, p):
    """A PerfSample: an event of type "sample", its stack's function names
    outermost first."""
    s = p["perf_sample"][0]
    assert flags & 2, f"packet {idx}: a sample without SEQ_NEEDS_INCREMENTAL_STATE"
    assert seq == 2, f"packet {idx}: a sample outside the tail's sequence"
    assert one(p, "timestamp") is not None, f"packet {idx}: a sample without a timestamp"
    stacks = st.get("profile", {}).get("stacks", {})
    cs = one(s, "callstack_iid")
    assert cs in stacks, f"packet {idx}: callstack {cs} not interned"
    return {"type": "sample", "seq": seq, "ts": _packet_time(st, idx, seq, p), "pid": one(s, "pid"),
            "tid": one(s, "tid"), "stack": stacks[cs], "last_packet": idx}


def resolve(packets, prefix=False):
    """The events of a trace's packets, in their order, and its tracks.

    Checks as it goes (AssertionError): the stream (sequence 1) starts the
    file, cleared, with timestamps on CLOCK_MONOTONIC; the tail is sequence
    2; each thread's task slices are a sequence of their own (3 and up),
    cleared, with timestamps on its incremental clock (64, set by a clock
    snapshot beside CLOCK_MONOTONIC) and the thread's track as its default;
    every packet of the stream or the tail that uses interned data or the
    defaults says it needs the incremental state (a thread's sequence need
    not: its start is checked to come before its events); an iid is defined before it is
    used and never redefined; an event's track is described before it, in
    the stream (in its own sequence for the tail); slices nest per track, a
    begin of the stream or the tail followed at once by its end; an end's
    annotations join its slice's. With prefix, slices still open at the very
    end are left out (the trace was cut there). A slice is an event once it
    ends, with the sequence of its begin.
    """
    res = Resolved()
    seqs = {}  # seq id -> {"names", "cats", "args", "strs": {iid: text}, "clock", "track", "clocks"}
    described = {}
    open_slices = {}  # track uuid -> [(packet index, event)]
    pending = None  # a begin of sequence 1 or 2 waiting for its end: packet index
    for idx, p in enumerate(packets):
        seq = one(p, "trusted_packet_sequence_id")
        assert seq is not None and seq >= 1, f"packet {idx}: sequence {seq}"
        flags = one(p, "sequence_flags", 0)
        if idx == 0:
            assert seq == 1 and flags & 1, "the first packet does not start sequence 1 cleared"
        if flags & 1:
            assert seq not in seqs, f"packet {idx}: sequence {seq} cleared a second time in one file"
            defaults = one(p, "trace_packet_defaults")
            want = 3 if seq <= 2 else 64
            assert defaults and one(defaults, "timestamp_clock_id") == want, \
                f"packet {idx}: sequence {seq} starts without clock {want} as its timestamps' clock"
            track = None
            if seq > 2:
                ted = one(defaults, "track_event_defaults")
                track = one(ted, "track_uuid") if ted else None
                assert track in described.get(1, ()) and res.tracks[track]["kind"] == "thread", \
                    f"packet {idx}: sequence {seq}'s default track {track} is not a thread's described before"
            seqs[seq] = {"names": {}, "cats": {}, "args": {}, "strs": {}, "clock": want, "track": track,
                         "clocks": {}}
        assert seq in seqs, f"packet {idx}: sequence {seq} used before its first (cleared) packet"
        st = seqs[seq]
        if "clock_snapshot" in p:
            _clock_snapshot(res, st, idx, seq, p["clock_snapshot"][0])
        interned = one(p, "interned_data")
        if interned:
            assert flags & 2 or seq > 2, \
                f"packet {idx}: interned data in a packet without SEQ_NEEDS_INCREMENTAL_STATE"
            for field, table, text in (("event_names", "names", "name"), ("event_categories", "cats", "name"),
                                       ("debug_annotation_names", "args", "name"),
                                       ("debug_annotation_string_values", "strs", "str")):
                for e in interned.get(field, []):
                    iid, name = one(e, "iid"), one(e, text)
                    assert iid and name is not None, f"packet {idx}: bad {field} entry {e}"
                    old = st[table].get(iid)
                    assert old is None or old == name, \
                        f"packet {idx}: {field} iid {iid} redefined from {old!r} to {name!r}"
                    st[table][iid] = name
        if interned:
            _profile_interned(st, idx, interned)
        if "perf_sample" in p:
            res.events.append(_perf_sample(st, idx, seq, flags, p))
            continue
        if "track_descriptor" in p:
            assert seq <= 2, f"packet {idx}: a track descriptor in thread sequence {seq}"
            _add_descriptor(res, seq, described, p["track_descriptor"][0])
        te = one(p, "track_event")
        if te is None:
            assert pending is None, f"packet {idx}: a slice's begin is not followed by its end"
            continue
        assert flags & 2 or seq > 2, f"packet {idx}: a track event without SEQ_NEEDS_INCREMENTAL_STATE"
        assert one(p, "timestamp") is not None, f"packet {idx}: a track event without a timestamp"
        ts = _packet_time(st, idx, seq, p)
        uuid = one(te, "track_uuid", st["track"])
        if seq > 2:
            assert "track_uuid" not in te, f"packet {idx}: a thread sequence's event names its track"
        ok = [1, 2] if seq == 2 else [1]
        assert any(uuid in described.get(s, ()) for s in ok), \
            f"packet {idx}: track {uuid} used before sequence {seq} described it"
        track = res.tracks[uuid]
        typ = one(te, "type")

        def interned_name(table, iid, what):
            assert iid in st[table], f"packet {idx}: {what} iid {iid} not interned in sequence {seq}"
            return st[table][iid]

        args = {}
        for a in te.get("debug_annotations", []):
            key = one(a, "name")
            if "name_iid" in a:
                key = interned_name("args", one(a, "name_iid"), "annotation name")
            if "string_value_iid" in a:
                args[key] = interned_name("strs", one(a, "string_value_iid"), "string value")
            else:
                args[key] = annotation_value(a)
        if typ == "TYPE_SLICE_END":
            stack = open_slices.get(uuid)
            assert stack, f"packet {idx}: a slice's end on track {uuid} with no slice open"
            begin_idx, ev = stack.pop()
            if pending is not None:
                assert pending == begin_idx, f"packet {idx}: a slice's begin is not followed by its end"
                pending = None
            assert ts >= ev["ts"], f"packet {idx}: a slice ends at {ts}, before its begin at {ev['ts']}"
            ev["end"] = ts
            ev["unfinished"] = bool(ev["unfinished"] or args.pop("unfinished", False))
            ev["args"].update(args)
            ev["last_packet"] = idx
            res.events.append(ev)
            continue
        assert pending is None, f"packet {idx}: a slice's begin is not followed by its end"
        name = one(te, "name")
        if "name_iid" in te:
            name = interned_name("names", one(te, "name_iid"), "event name")
        cats = [interned_name("cats", c, "category") for c in te.get("category_iids", [])]
        cats += te.get("categories", [])
        cat = cats[0] if cats else None
        ev = {"seq": seq, "ts": ts}
        if typ == "TYPE_SLICE_BEGIN":
            assert track["kind"] in ("thread", "frame"), f"packet {idx}: a slice on a {track['kind']} track"
            unfinished = args.pop("unfinished", False)
            if track["kind"] == "frame":
                assert track["name"] == name, f"packet {idx}: frame {name!r} on the track of {track['name']!r}"
            ev.update(type="span" if track["kind"] == "thread" else "frame", name=name, cat=cat,
                      end=None, pid=track["pid"], tid=track["tid"], unfinished=unfinished, args=args)
            open_slices.setdefault(uuid, []).append((idx, ev))
            if seq <= 2:
                pending = idx
            continue
        if typ == "TYPE_COUNTER":
            assert track["kind"] == "counter", f"packet {idx}: a counter sample on a {track['kind']} track"
            is_int = "counter_value" in te
            value = one(te, "counter_value") if is_int else one(te, "double_counter_value")
            ev.update(type="counter", name=track["name"], cat=track.get("cat"), pid=track["pid"], int=is_int,
                      value=value)
        elif typ == "TYPE_INSTANT":
            starts, ends = te.get("flow_ids", []), te.get("terminating_flow_ids", [])
            if starts or ends:
                assert track["kind"] == "thread" and len(starts) + len(ends) == 1, \
                    f"packet {idx}: a flow's end that is not one id on a thread's track"
                ev.update(type="flow_start" if starts else "flow_end", name=name, cat=cat, pid=track["pid"],
                          tid=track["tid"], id=(starts or ends)[0])
            elif name == "otherData" and cat == "mlprof" and track["kind"] == "process":
                assert seq == 2, f"packet {idx}: the footer is not in the tail's sequence"
                ev.update(type="other_data", name=name, cat=cat, pid=track["pid"],
                          process_name=track.get("process_name"), args=args)
            else:
                assert track["kind"] in ("thread", "process"), f"packet {idx}: an instant on a {track['kind']} track"
                thread = track["kind"] == "thread"
                ev.update(type="instant", name=name, cat=cat, pid=track["pid"], tid=track["tid"] if thread else None,
                          scope="thread" if thread else "process", args=args)
        else:
            raise AssertionError(f"packet {idx}: a track event of type {typ}")
        ev["last_packet"] = idx
        res.events.append(ev)
    if not prefix:
        assert pending is None and not any(open_slices.values()), \
            f"slices without an end: {[e for v in open_slices.values() for _, e in v][:3]}"
        assert res.clock_snapshot and {1, 3, 6} <= set(res.clock_snapshot), \
            f"no clock snapshot with REALTIME, MONOTONIC and BOOTTIME: {res.clock_snapshot}"
        assert res.primary_clock == "BUILTIN_CLOCK_MONOTONIC", f"primary clock {res.primary_clock}"
    return res
