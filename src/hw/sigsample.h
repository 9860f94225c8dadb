/*
 * sigsample.h - the timer-signal sampler (sigsample.c): call stacks of every
 * thread of the process where perf_event is refused (the sampling key with
 * sampling_source=signal, or auto after a refusal). Each thread gets a POSIX
 * timer on its own CPU-time clock that sends a real-time signal to it; the
 * handler copies the interrupted registers and the top of the stack into a
 * preallocated ring, and stacks.c's reader thread drains it, unwinds the
 * copies (unwind.h) and keeps the addresses with perf_event's samples.
 */
#ifndef MLPROF_HW_SIGSAMPLE_H
#define MLPROF_HW_SIGSAMPLE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/common.h"

/* The most bytes of stack copied from the stack pointer up at each sample
 * (the sampling_stack key, up to this). */
#define MLPROF__SIGSAMPLE_STACK 16384
/* Words the extra hook may append to a sample. */
#define MLPROF__SIGSAMPLE_EXTRA 256

/* Hooks for another sampler of the same threads (Python's frames), NULL by
 * default; set them before the run starts and leave them while it runs.
 * - extra: called in the signal handler of the sampled thread, so it must
 *   be async-signal-safe (no lock, no allocation, no errno left changed);
 *   it writes up to max words to out and returns how many.
 * - extra_read: called on mlprof's reader thread for each sample, with the
 *   words extra wrote (n may be 0) and the native addresses unwound from the
 *   same sample (leaf first), before they are kept; not called while the
 *   samples are not recorded (paused). It runs with stacks.c's lock on the
 *   samples held: it must not wait for a dump. */
extern size_t (*mlprof__sigsample_extra)(uint64_t *out, size_t max);
extern void (*mlprof__sigsample_extra_read)(uint64_t ts, uint32_t tid, const uint64_t *ips, size_t nips,
                                            const uint64_t *extra, size_t n);

/* Where the reader keeps a sample (stacks.c's storage): addresses leaf
 * first; weight: how many sampling periods of CPU time it stands for (the
 * kernel checks CPU-time timers at its tick: above the tick's rate, one
 * signal comes for several periods, its overrun said by the signal). */
typedef void (*mlprof__sigsample_keep_fn)(uint64_t ts, uint32_t tid, uint32_t weight, const uint64_t *ips,
                                          size_t n);

/* Starts sampling every thread of the process but self_tid and the threads
 * named "mlprof ..." at hz per second of each one's CPU time, copying
 * stack_bytes of stack (at most MLPROF__SIGSAMPLE_STACK); on mlprof's
 * reader thread. 0, or -1 with why (nothing sampled). */
int mlprof__sigsample_start(unsigned hz, pid_t self_tid, size_t stack_bytes, char *why, size_t len);
/* On the reader, every few milliseconds: gives timers to new threads,
 * deletes those of ended ones, disarms them while !recording (and arms them
 * again after), and hands what the ring holds to keep (dropped when
 * !recording). Called without lk, which it takes only around the counts
 * other_data reads and each call of keep (keep runs with lk held): the
 * unwinds, the extra reader hook and the /proc scan run outside it (NULL:
 * no lock). */
void mlprof__sigsample_poll(int recording, mlprof__sigsample_keep_fn keep, pthread_mutex_t *lk);
/* On the reader, at the end: deletes the timers, waits for handlers still
 * running and drains the ring a last time (kept when recording); lk as
 * poll's. */
void mlprof__sigsample_stop(int recording, mlprof__sigsample_keep_fn keep, pthread_mutex_t *lk);
/* In a forked child: the parent's timers are not the child's (timers are
 * not inherited); forgets them and empties the ring. */
void mlprof__sigsample_after_fork(void);
/* Forgets the counts (a new run, a reset). */
void mlprof__sigsample_reset(void);
/* Appends the signal sampler's part of otherData.sampling: ,"signal":... */
void mlprof__sigsample_other_data(mlprof__sb *out);
/* Says on stderr what was lost, if anything (at the end of a run). */
void mlprof__sigsample_report(void);

#endif /* MLPROF_HW_SIGSAMPLE_H */
