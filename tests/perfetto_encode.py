#!/usr/bin/env python3
"""Perfetto's protobuf trace, encoded by hand for the analyzer's tests: varints
and length-delimited fields written from Perfetto's documented field numbers,
in the shape mlprof's perfetto sink writes (docs: the encoding agreed between
the writer and the reader). encode() turns an mlprof Chrome JSON trace into
the same run as TracePackets: sequence 1 the streamed events (cleared first,
CLOCK_MONOTONIC by default, names, categories and annotation names interned),
sequence 2 the tail (descriptors with their final names, the otherData
footer). Low-level helpers build odd packets for the reader's edge cases.

usage: perfetto_encode.py IN.json OUT.pftrace [--time-order] [--no-intern]
"""
import decimal
import hashlib
import json
import struct
import sys

# TracePacket
P_CLOCK_SNAPSHOT, P_TIMESTAMP, P_SEQ_ID, P_TRACK_EVENT, P_INTERNED = 6, 8, 10, 11, 12
P_SEQ_FLAGS, P_DEFAULTS, P_TRACK_DESCRIPTOR, P_CLOCK_ID, P_DROPPED = 13, 59, 60, 58, 42
SEQ_CLEARED, SEQ_NEEDS_STATE = 1, 2
# TrackEvent
E_CATEGORY_IIDS, E_ANNOTATIONS, E_TYPE, E_NAME_IID, E_TRACK_UUID = 3, 4, 9, 10, 11
E_CATEGORIES, E_NAME, E_COUNTER, E_DOUBLE_COUNTER, E_FLOW_IDS, E_TERMINATING = 22, 23, 30, 44, 47, 48
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME = 1, 3, 6


def varint(v):
    v &= (1 << 64) - 1  # negative int64: two's complement, 10 bytes
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_varint(num, v):
    return varint(num << 3) + varint(v)


def f_bytes(num, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(num << 3 | 2) + varint(len(b)) + b


def f_fixed64(num, v):
    return varint(num << 3 | 1) + struct.pack("<Q", v & ((1 << 64) - 1))


def f_double(num, d):
    return varint(num << 3 | 1) + struct.pack("<d", d)


def packet(body):
    """One Trace.packet (field 1) around a TracePacket's bytes."""
    return f_bytes(1, body)


def to_json(v):
    """Compact JSON text, Decimal numbers as written."""
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + to_json(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(to_json(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


def annotation_value(v):
    """A DebugAnnotation's value fields, typed as the sink types a JSON member."""
    if isinstance(v, bool):
        return f_varint(2, int(v))
    if isinstance(v, int):
        return f_varint(3, v) if v >= 1 << 63 else f_varint(4, v)
    if isinstance(v, decimal.Decimal):
        return f_double(5, float(v))
    if isinstance(v, str):
        return f_bytes(6, v)
    return f_bytes(9, to_json(v))  # null, objects, arrays: legacy_json_value


def ns(us):
    return int(decimal.Decimal(us) * 1000)


def track_uuid(*key):
    return int.from_bytes(hashlib.sha1(repr(key).encode()).digest()[:8], "little") >> 1


class Sequence:
    """Interning and flags of one packet sequence."""

    def __init__(self, seq_id, intern=True):
        self.id, self.intern = seq_id, intern
        self.tables = {1: {}, 2: {}, 3: {}}  # categories, names, annotation names
        self.first = True

    def iid(self, table, s, new):
        t = self.tables[table]
        if s not in t:
            t[s] = len(t) + 1
            new.setdefault(table, []).append((t[s], s))
        return t[s]

    def packet(self, body, ts=None, new=None, needs_state=True):
        out = f_varint(P_SEQ_ID, self.id)
        if self.first:
            out += f_varint(P_SEQ_FLAGS, SEQ_CLEARED)
            out += f_bytes(P_DEFAULTS, f_varint(58, CLOCK_MONOTONIC))
            self.first = False
        elif needs_state:
            out += f_varint(P_SEQ_FLAGS, SEQ_NEEDS_STATE)
        if ts is not None:
            out += f_varint(P_TIMESTAMP, ts)
        if new:
            idata = b""
            for table, entries in sorted(new.items()):
                for i, s in entries:
                    idata += f_bytes(table, f_varint(1, i) + f_bytes(2, s))
            out += f_bytes(P_INTERNED, idata)
        return packet(out + body)

    def event(self, ts, kind, track, name=None, cat=None, args=None, counter=None, flows=(), terminating=()):
        new = {}
        body = f_varint(E_TYPE, kind) + f_varint(E_TRACK_UUID, track)
        if name is not None:
            body += f_varint(E_NAME_IID, self.iid(2, name, new)) if self.intern else f_bytes(E_NAME, name)
        if cat:
            body += f_varint(E_CATEGORY_IIDS, self.iid(1, cat, new)) if self.intern else f_bytes(E_CATEGORIES, cat)
        for k, v in (args or {}).items():
            key = f_varint(1, self.iid(3, k, new)) if self.intern else f_bytes(10, k)
            body += f_bytes(E_ANNOTATIONS, key + annotation_value(v))
        if counter is not None:
            body += f_double(E_DOUBLE_COUNTER, float(counter)) if isinstance(counter, decimal.Decimal) \
                else f_varint(E_COUNTER, counter)
        for i in flows:
            body += f_fixed64(E_FLOW_IDS, i)
        for i in terminating:
            body += f_fixed64(E_TERMINATING, i)
        return self.packet(f_bytes(P_TRACK_EVENT, body), ts, new)


def descriptor(uuid, name=None, parent=None, process=None, thread=None, counter=None):
    body = f_varint(1, uuid)
    if name is not None:
        body += f_bytes(2, name)
    if parent is not None:
        body += f_varint(5, parent)
    if process is not None:  # (pid, name)
        body += f_bytes(3, f_varint(1, process[0]) + (f_bytes(6, process[1]) if process[1] else b""))
    if thread is not None:  # (pid, tid, name)
        body += f_bytes(4, f_varint(1, thread[0]) + f_varint(2, thread[1]) + (f_bytes(5, thread[2]) if thread[2] else b""))
    if counter is not None:  # the categories of its samples (CounterDescriptor.categories)
        body += f_bytes(8, f_bytes(2, counter) if counter else b"")
    return f_bytes(P_TRACK_DESCRIPTOR, body)


class Encoder:
    def __init__(self, trace, ext_tids=(), intern=True, counter_threads=False):
        self.trace, self.ext, self.intern = trace, set(ext_tids), intern
        self.counter_threads = counter_threads
        self.names = {}  # (pid, tid) -> thread name; (pid, None) -> process name
        for e in trace.get("traceEvents", []):
            if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
                key = (e["pid"], None if e["name"] == "process_name" else e["tid"])
                self.names[key] = e["args"]["name"]
        self.described = set()
        self.counter_cats = {}

    def process_track(self, pid, seq, out):
        uuid = track_uuid("process", pid)
        if uuid not in self.described:
            self.described.add(uuid)
            out.append(seq.packet(descriptor(uuid, process=(pid, None)), needs_state=False))
        return uuid

    def thread_track(self, pid, tid, seq, out):
        parent = self.process_track(pid, seq, out)
        ext = tid in self.ext
        uuid = track_uuid("ext" if ext else "thread", pid, tid)
        if uuid not in self.described:
            self.described.add(uuid)
            name = self.names.get((pid, tid)) if ext else None
            out.append(seq.packet(descriptor(uuid, name=name, parent=parent, thread=(pid, tid, name)),
                                  needs_state=False))
        return uuid

    def child_track(self, kind, pid, tid, name, seq, out, cat=None):
        """A frame's track (child of its thread's), or a counter's: one per
        process, or with counter_threads one per thread (child of its thread's)."""
        below_thread = kind == "frame" or tid is not None
        parent = self.thread_track(pid, tid, seq, out) if below_thread else self.process_track(pid, seq, out)
        uuid = track_uuid(kind, pid, tid if below_thread else None, name)
        if uuid not in self.described:
            self.described.add(uuid)
            counter = (cat or "") if kind == "counter" else None
            out.append(seq.packet(descriptor(uuid, name=name, parent=parent, counter=counter), needs_state=False))
        return uuid

    def events(self, seq, time_order):
        """The packets of sequence 1, one list per event of the JSON (a span: its
        BEGIN and END one after the other), in the JSON's order; with
        time_order, every BEGIN, END and instant sorted by time instead."""
        out, timed = [], []
        for e in self.trace.get("traceEvents", []):
            ph = e.get("ph")
            if ph == "M":
                continue
            pid, tid, ts = e["pid"], e["tid"], ns(e["ts"])
            name, cat, args = e.get("name", ""), e.get("cat"), e.get("args") or {}
            if ph == "X":
                track = self.thread_track(pid, tid, seq, out)
                end = ts + ns(e.get("dur", 0))
                timed.append((ts, 1, -end, len(timed), lambda s=seq, t=track, a=(ts, name, cat, args):
                              s.event(a[0], SLICE_BEGIN, t, a[1], a[2], a[3])))
                timed.append((end, 0 if end > ts else 2, -ts, len(timed),
                              lambda s=seq, t=track, x=end: s.event(x, SLICE_END, t)))
            elif ph in "be":
                track = self.child_track("frame", pid, tid, name, seq, out)
                if ph == "b":
                    timed.append((ts, 1, 0, len(timed), lambda s=seq, t=track, a=(ts, name, cat, args):
                                  s.event(a[0], SLICE_BEGIN, t, a[1], a[2], a[3])))
                else:
                    timed.append((ts, 0, 0, len(timed), lambda s=seq, t=track, x=ts: s.event(x, SLICE_END, t)))
            elif ph == "i":
                track = self.thread_track(pid, tid, seq, out) if e.get("s", "t") == "t" \
                    else self.process_track(pid, seq, out)
                timed.append((ts, 1, 0, len(timed), lambda s=seq, t=track, a=(ts, name, cat, args):
                              s.event(a[0], INSTANT, t, a[1], a[2], a[3])))
            elif ph == "C":
                # the category on the track, as the sink writes it; a sample of another names its own
                by_thread = self.counter_threads and tid != pid
                track = self.child_track("counter", pid, tid if by_thread else None, name, seq, out, cat)
                own = cat if cat != self.counter_cats.setdefault(track, cat) else None
                timed.append((ts, 1, 0, len(timed), lambda s=seq, t=track, a=(ts, own, args["value"]):
                              s.event(a[0], COUNTER, t, None, a[1], counter=a[2])))
            elif ph in "sf":
                track = self.thread_track(pid, tid, seq, out)
                ids = {"flows" if ph == "s" else "terminating": [int(e["id"])]}
                timed.append((ts, 1, 0, len(timed), lambda s=seq, t=track, a=(ts, name, cat), k=ids:
                              s.event(a[0], INSTANT, t, a[1], a[2], **k)))
            else:
                raise ValueError(f"no encoding for ph {ph!r}")
            if not time_order:
                out.extend(f() for *_, f in timed)
                timed = []
        if time_order:
            out.extend(f() for *_, f in sorted(timed, key=lambda x: x[:4]))
        return out

    def tail(self, seq):
        out = []
        pids = sorted({k[0] for k in self.names})
        for pid in pids:
            uuid = track_uuid("process", pid)
            self.described.add(uuid)
            out.append(seq.packet(descriptor(uuid, process=(pid, self.names.get((pid, None)))), needs_state=False))
            for (p, tid), name in sorted(self.names.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
                if p != pid or tid is None:
                    continue
                ext = tid in self.ext
                t_uuid = track_uuid("ext" if ext else "thread", pid, tid)
                out.append(seq.packet(descriptor(t_uuid, name=name if ext else None, parent=uuid,
                                                 thread=(pid, tid, name)), needs_state=False))
        other = self.trace.get("otherData")
        if other is not None:
            pid = other.get("pid", pids[0] if pids else 0)
            dump = int(other.get("dump_ns", 0))
            out.append(seq.event(dump, INSTANT, self.process_track(pid, seq, out), "otherData", "mlprof", other))
        return out

    def encode(self, time_order=False):
        s1 = Sequence(1, self.intern)
        head = [s1.packet(b""), s1.packet(f_bytes(P_CLOCK_SNAPSHOT, b"".join(
            f_bytes(1, f_varint(1, c) + f_varint(2, 1000 + c)) for c in (CLOCK_BOOTTIME, CLOCK_MONOTONIC,
                                                                          CLOCK_REALTIME))), needs_state=False)]
        body = self.events(s1, time_order)
        s2 = Sequence(2, self.intern)
        self.described = set()  # the tail describes its tracks again, on its own sequence
        return b"".join(head + body + [s2.packet(b"")] + self.tail(s2))


def load(path):
    with open(path) as f:
        return json.load(f, parse_float=decimal.Decimal)


def encode(trace, ext_tids=(), time_order=False, intern=True, counter_threads=False):
    """counter_threads: a counter sampled on a thread other than the main one
    gets a track per thread, child of the thread's (the sink keeps one per
    process, which loses the sample's thread)."""
    return Encoder(trace, ext_tids, intern, counter_threads).encode(time_order)


def packet_bounds(data):
    """(start, end) of each packet of a Trace."""
    out, pos = [], 0
    while pos < len(data):
        assert data[pos] == 0x0A, f"not a packet at {pos}"
        n, shift, k = 0, 0, pos + 1
        while True:
            b = data[k]
            n |= (b & 0x7F) << shift
            shift += 7
            k += 1
            if not b & 0x80:
                break
        out.append((pos, k + n))
        pos = k + n
    return out


if __name__ == "__main__":
    src, dst = sys.argv[1:3]
    data = encode(load(src), time_order="--time-order" in sys.argv, intern="--no-intern" not in sys.argv)
    with open(dst, "wb") as f:
        f.write(data)
