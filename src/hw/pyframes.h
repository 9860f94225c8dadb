/*
 * pyframes.h - the Python frames of a sampled thread, as py-spy shows them:
 * taken on the sampled thread itself (from the timer-signal sampler's
 * handler: async-signal-safe, no lock, no allocation, no Python API that
 * takes the GIL or touches a reference count), named after the run on
 * mlprof's reader thread, and put in place of the native frames of the
 * interpreter's eval loop that ran them.
 *
 * Words written by mlprof__pyframes_capture, leaf first:
 *   [0]        MLPROF__PYFRAMES_MAGIC | truncated << 31 | n
 *   [1 + 2i]   frame i's code object (its address)
 *   [2 + 2i]   its instruction's byte offset in the code (int32, low half)
 *              | entry << 32: the outermost frame one call of the eval
 *              loop runs (3.11 is_entry; in 3.12 and 3.13 the frame
 *              under a FRAME_OWNED_BY_CSTACK one; every frame in 3.10)
 * Self-contained (libc and dlsym), so a test can build it alone.
 */
#ifndef MLPROF_HW_PYFRAMES_H
#define MLPROF_HW_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

#define MLPROF__PYFRAMES_MAGIC 0x5059460000000000ull /* "PYF" in the top bytes */
#define MLPROF__PYFRAMES_MAX 256                     /* frames one capture walks at most */

/* 1: this process runs a supported Python whose layouts passed the
 * self-test, and captures may start; 0: no Python here (why says so); -1:
 * refused (an unknown version, a layout that failed its self-test: why
 * says which). Takes the GIL itself (PyGILState_Ensure) and runs a few
 * lines of Python: on the calling thread where it holds the GIL, else on a
 * thread of its own ("mlprof pyinit"), waited for at most 10 s (an
 * interpreter finalizing ends a thread that asks for the GIL); never from a
 * signal handler. Before the interpreter is initialized: 0, tried again at
 * the next call; after an answer, the same answer. */
int mlprof__pyframes_init(char *why, size_t len);
/* The same without waiting, for mlprof's reader: where the self-test must
 * wait for the GIL on a thread of its own, 0 ("the self-test is running")
 * until a later call finds its answer. */
int mlprof__pyframes_init_nowait(char *why, size_t len);

/* "3.11" once init succeeded, else "". */
const char *mlprof__pyframes_version(void);

/* From the sampled thread (a signal handler is fine): writes the words
 * above and returns how many (0: no Python frames on this thread, or not
 * initialized). max counts words. */
size_t mlprof__pyframes_capture(uint64_t *out, size_t max);

typedef struct mlprof__pyframe {
    uint64_t code;  /* the code object's address */
    int32_t offset; /* byte offset of the instruction (negative: not started) */
    int entry;      /* 1: the outermost frame of one eval-loop call */
} mlprof__pyframe;

/* Reads words written by capture: returns the frames (leaf first) and sets
 * *used to the words they took (0 and 0 when words[0] is not a capture). */
size_t mlprof__pyframes_decode(const uint64_t *words, size_t nwords, mlprof__pyframe *out, size_t max,
                               size_t *used, int *truncated);

/* Off the sampled threads: a frame's function (co_qualname, co_name before
 * 3.11), file and line, read with process_vm_readv (never a fault on a
 * code object freed since the sample; ob_type checked against PyCode_Type)
 * and cached by the code's address. 0, or -1 when the address holds no
 * code object any more (name says "?"). Thread-safe (a mutex). */
int mlprof__pyframes_resolve(uint64_t code, int32_t offset, char *name, size_t name_len, char *file,
                             size_t file_len, int *line);

/* "train (main.py:12)": the name a frame gets in stackFrames and flame
 * graphs (the file's base name; the category says "python"). */
void mlprof__pyframes_label(const mlprof__pyframe *f, char *out, size_t len);

/* Whether a native symbol is the interpreter's eval loop, the frame that
 * Python frames replace. */
int mlprof__pyframes_is_eval(const char *symbol);

/* Interleaves, py-spy's way: native frames (leaf first; is_eval[i] from
 * mlprof__pyframes_is_eval of their names) and Python frames (leaf first)
 * become one stack, leaf first, in out: a value >= 0 is native frame i, a
 * value < 0 is Python frame -1 - value. Each eval frame, from the leaf,
 * is replaced by the next run of Python frames up to an entry frame; an
 * eval frame with none left stays; Python frames left over (a native
 * stack cut short) go at the root. Returns how many were written. */
size_t mlprof__pyframes_interleave(const unsigned char *is_eval, size_t nnative, const mlprof__pyframe *py,
                                   size_t npy, int32_t *out, size_t max);

/* The address a Python frame takes in a sampled stack once the reader has
 * interleaved it (mlprof__pyframes_tag): an interned "train (main.py:12)",
 * in a range no user address reaches and below perf_event's context
 * markers. Its low 4 bits do not matter (a caller's return address minus
 * one names the same frame). */
#define MLPROF__PYFRAMES_TAG 0xff50000000000000ull
#define MLPROF__PYFRAMES_TAG_MASK 0xfff0000000000000ull

/* On the reader thread, soon after the sample (its code objects still
 * alive): the native addresses (leaf first, ips[0] the sampled one) with
 * each call of the interpreter's eval loop replaced by the Python frames it
 * ran, as tags; extra: the words capture wrote for the same sample (none:
 * the addresses as they are). The eval loop is known by its address
 * (_PyEval_EvalFrameDefault's extent, found at init). Returns how many
 * were written to out. */
size_t mlprof__pyframes_tag(const uint64_t *ips, size_t nips, const uint64_t *extra, size_t nextra, uint64_t *out,
                            size_t max);
/* Whether ip is a tag, and its name ("?" for one this process never made). */
int mlprof__pyframes_is_tag(uint64_t ip);
void mlprof__pyframes_tag_name(uint64_t ip, char *out, size_t len);

/* Copies len bytes at addr of this process into buf without faulting on
 * memory that is gone: 0, or -1 (process_vm_readv; where a seccomp filter
 * refuses it, write() through a pipe, which says EFAULT). */
int mlprof__pyframes_read(uint64_t addr, void *buf, size_t len);

/* In a forked child (its only thread): the locks as new; what was cached
 * stays true (the same memory). */
void mlprof__pyframes_after_fork(void);

/* What resolving has cached (code objects), how many reads failed, and how
 * many entries were read again because another code object had taken
 * their address. */
void mlprof__pyframes_stats(size_t *cached, size_t *failed, size_t *reread);

/* The bounds of what the reader keeps, for programs that keep making
 * code (torch.fx's "<eval_with_key>.N", exec'd strings). Code objects: two
 * generations of at most GEN_ENTRIES entries and about GEN_BYTES of names
 * and line tables each (one entry may overrun by its own size, at most
 * 1 MiB of line table; a longer one is not kept, its frames get no line);
 * when the young one is full the old one is evicted. Names of tags: at
 * most NAMES_MAX and NAMES_BYTES until mlprof__pyframes_reset; a frame
 * past them is named "? (mlprof's table of Python frame names was full)"
 * and counted. */
#define MLPROF__PYFRAMES_GEN_ENTRIES 2048
#define MLPROF__PYFRAMES_GEN_BYTES (2u << 20)
#define MLPROF__PYFRAMES_NAMES_MAX 65536
#define MLPROF__PYFRAMES_NAMES_BYTES (8u << 20)

typedef struct mlprof__pyframes_bounds_t {
    size_t code_objects, code_bytes; /* cached now, both generations */
    size_t evicted;                  /* code objects evicted since the last reset */
    size_t names, names_bytes;       /* tag names held */
    size_t names_dropped;            /* frames named "...was full" since the last reset */
} mlprof__pyframes_bounds_t;
void mlprof__pyframes_bounds(mlprof__pyframes_bounds_t *b);

/* With the samples (mlprof's reset, stacks.c's reset_samples): frees the
 * cache and the tag names, and zeroes the counters. Tags made before name
 * "?" after it (the samples holding them are gone). */
void mlprof__pyframes_reset(void);

/* Tests only: resolve as if this process ran Python 3.minor, with code
 * objects whose ob_type is code_type (made by the test in its own memory). */
void mlprof__pyframes_fake_python(int minor, const void *code_type);

#endif /* MLPROF_HW_PYFRAMES_H */
