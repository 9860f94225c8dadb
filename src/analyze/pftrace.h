/*
 * pftrace.h - the reader of Perfetto's protobuf trace (a stream of
 * TracePackets, as mlprof's perfetto sink writes it: .pftrace,
 * .perfetto-trace) into the model of trace.h. an_trace_read calls it when a
 * file is one; the analyses see the same events as from the JSON of the same
 * run.
 */
#ifndef MLPROF_ANALYZE_PFTRACE_H
#define MLPROF_ANALYZE_PFTRACE_H

#include "json.h"
#include "trace.h"

/* 1 when the input just opened (nothing consumed) holds a protobuf trace: it
 * starts with a packet (field 1, length-delimited: byte 0x0a) and is not JSON
 * (a JSON text that starts with a line feed and then '{' or '[' is a trace
 * only when its first packet decodes and is followed by another or the end);
 * or its name ends in .pftrace or .perfetto-trace (optionally .gz) and it does
 * not start as JSON, so that the protobuf reader says what is wrong with it.
 * 0: read it as JSON. */
int an_pftrace_detect(an_input *in, const char *path);

/* Reads the packets of in into t, which an_trace_read has initialised (path,
 * strings, t_min and t_max). Returns 0; or -1 with t->error naming the file
 * and the byte offset: a file cut inside a packet keeps the packets before the
 * cut (t->partial), as does damage after some packets; a file that holds no
 * track event is "not a trace". What is left out while reading (packets that
 * need the incremental state of a sequence that never cleared it, interned
 * ids their sequence never gave, events on tracks never described, event
 * types mlprof does not model) is counted in t->note. */
int an_pftrace_read(an_trace *t, an_input *in);

#endif /* MLPROF_ANALYZE_PFTRACE_H */
