/*
 * capture.h - captures taken while a program runs (capture.c): on demand,
 * asked by `mlprof capture PID` (on_demand=on), and between the program's own
 * markers (capture_range=...). Internal to the library.
 */
#ifndef MLPROF_CAPTURE_H
#define MLPROF_CAPTURE_H

#include "record.h"

/* mlprof_active_flag's bits: recording, and a span trigger armed (the
 * handles named mlprof__trigger_name have bit 1 of their `on` byte set, and
 * their begin and end call the functions below even while stopped). The
 * public macros test the flag for nonzero; the recorder tests bit 0. */
#define MLPROF__ACTIVE_RECORDING 1
#define MLPROF__ACTIVE_TRIGGER 2
#define MLPROF__HANDLE_TRIGGER 2

/* (ctl) a span trigger is armed, and the name of the spans that fire it */
extern int mlprof__trigger_on;
extern char mlprof__trigger_name[256];

/* The capture_range key's check: 0 when value is "", "cudaProfilerStart",
 * "nvtx:NAME" or "span:NAME"; else -1 with the reason in why. */
int mlprof__capture_range_check(const char *value, char *why, size_t len);
/* The dump_signal key's check: 0 for off ("" or "off"), the signal's number
 * for a name (USR2, SIGUSR2) or a number; -1 with the reason in why (why may
 * be NULL) for anything else, or a signal that cannot be caught or is a
 * crash's (KILL, STOP, SEGV, BUS, FPE, ILL, ABRT, TRAP, SYS). */
int mlprof__dump_signal_parse(const char *value, char *why, size_t len);
/* The configuration changed (or was read at the start): starts the listener
 * when on_demand is on, or in ring mode while recording, arms capture_range's
 * trigger, installs dump_signal's handler. Caller holds ctl_lock and calls
 * mlprof__update_flags after. */
void mlprof__capture_configure(void);
/* Recording started (ctl held): a flight recorder (mode=ring) and
 * dump_signal are served from now on, in a process that records (not in the
 * mlprof command's own, which reads the same keys). */
void mlprof__capture_recording(void);
/* In a forked child (ctl_lock reinitialized, not held): the parent's
 * listener and capture are not the child's; it listens for its own pid. */
void mlprof__capture_after_fork(void);
/* A fatal signal: the socket goes (async-signal-safe: only unlink), so that
 * no later process with this pid finds a stale one. */
void mlprof__capture_on_crash(void);

/* A span handle with MLPROF__HANDLE_TRIGGER began or ended on this thread
 * (begin: before it is recorded; end: after). */
void mlprof__capture_span_begin(const void *handle);
void mlprof__capture_span_end(const void *handle);
/* mlprof_step() ended a step (after its own work): a capture of steps
 * starts at the next boundary and ends at the Nth after it. */
void mlprof__capture_step(void);

/* The program's own markers for capture_range (the hooks' calls):
 * cudaProfilerStart/Stop, and NVTX push/pop ranges (name is the pushed
 * range's message; NULL for a pop). Cheap when capture_range is not theirs. */
enum { MLPROF__RANGE_NONE = 0, MLPROF__RANGE_CUDA = 1, MLPROF__RANGE_NVTX = 2, MLPROF__RANGE_SPAN = 3 };
extern int mlprof__range_kind; /* atomic: capture_range's kind */
void mlprof__capture_cuda_profiler(int start);
void mlprof__capture_nvtx(const char *pushed);
/* At exit: a process whose capture_range never began says so (nothing was
 * captured, and no file tells why); not a process of mlprof run, whose
 * summary says it for the whole run. */
void mlprof__capture_exit_report(void);

#endif /* MLPROF_CAPTURE_H */
