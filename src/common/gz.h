/*
 * gz.h - gzip output while streaming, over zlib loaded with dlopen (the
 * library does not link zlib: a machine without it writes plain output and
 * gets a clear message when it asks for compressed output).
 *
 * Concatenated gzip members are one valid .gz file. A stream written piece by
 * piece with mlprof__gz_write (each piece sync-flushed, so its bytes can be
 * written at once) can therefore be closed into a valid file at any moment by
 * appending the bytes of mlprof__gz_end_copy, without ending the stream: the
 * stream keeps its dictionary and goes on, and each dump of a continuous
 * trace writes [the stream's bytes so far] + [end_copy] + [a member of what
 * follows, mlprof__gz_member].
 *
 * A stream is used by one thread at a time; distinct streams, and the
 * functions that take no stream, may be used by any threads at once.
 */
#ifndef MLPROF_GZ_H
#define MLPROF_GZ_H

#include "common.h"

typedef struct mlprof__gz mlprof__gz;

/* zlib's z_stream, from its documented layout (zlib.h, unchanged since 1.0):
 * the build needs no zlib headers, and deflateInit2_/inflateInit2_ check the
 * size passed against their own, so a mismatch is an error, never a
 * corrupted stream. The writer here and the trace reader (src/analyze/input.c)
 * both drive zlib through it. */
typedef struct mlprof__zstream {
    const unsigned char *next_in;
    unsigned avail_in;
    unsigned long total_in;
    unsigned char *next_out;
    unsigned avail_out;
    unsigned long total_out;
    const char *msg;
    void *state;
    void *(*zalloc)(void *, unsigned, unsigned);
    void (*zfree)(void *, void *);
    void *opaque;
    int data_type;
    unsigned long adler; /* for a gzip stream: the CRC-32 of the data so far */
    unsigned long reserved;
} mlprof__zstream;

/* A new stream compressing at level (-1 for zlib's default, 6; 0 to 9). A
 * Chrome JSON trace on the 2-core VM of the README: level 1 at about 220 MB/s
 * of CPU time, 8.6x smaller; 6 at about 100 MB/s, 12x smaller. NULL
 * with the calling thread's last error set when zlib cannot be loaded
 * (MLPROF_EUNSUPPORTED; the message names the library and why), when level
 * is out of range (MLPROF_EINVAL) or memory runs out (MLPROF_ENOMEM).
 * zlib is libz.so.1, or the file named by the environment variable
 * MLPROF_ZLIB_LIBRARY, looked up once per process. */
mlprof__gz *mlprof__gz_open(int level);
/* Which library the first load of zlib opens (the zlib_library key); no
 * effect once it was loaded. */
void mlprof__gz_library(const char *name);

/* Compresses n bytes and flushes them (Z_SYNC_FLUSH): appends to out every
 * byte of the stream that can be written now, the gzip header included on
 * the first call. The stream goes on. Returns MLPROF_OK, MLPROF_ENOMEM (out
 * could not grow, or zlib ran out of memory) or MLPROF_EIO (zlib failed; the
 * stream is then unusable and every later call fails). */
int mlprof__gz_write(mlprof__gz *z, const void *p, size_t n, mlprof__sb *out);

/* Appends to out the bytes that end the gzip member here, after the bytes of
 * every mlprof__gz_write so far: an empty final deflate block, then the
 * CRC-32 and size of everything written. The stream itself is unchanged and
 * goes on. Before the first write, a whole empty member. Returns MLPROF_OK,
 * MLPROF_ENOMEM or MLPROF_EIO (the stream failed before). */
int mlprof__gz_end_copy(const mlprof__gz *z, mlprof__sb *out);

/* Appends to out one whole gzip member holding the n bytes at p, at zlib's
 * default level. Returns MLPROF_OK, MLPROF_EUNSUPPORTED (no zlib),
 * MLPROF_ENOMEM or MLPROF_EIO. */
int mlprof__gz_member(const void *p, size_t n, mlprof__sb *out);

/* Appends to out the decompressed bytes of a gzip file of one or more
 * members. Returns MLPROF_OK, MLPROF_EUNSUPPORTED (no zlib), MLPROF_ENOMEM,
 * or MLPROF_EPARSE when the bytes are not gzip, are corrupt or truncated, or
 * are followed by bytes that are not a gzip member (the message says where). */
int mlprof__gz_inflate(const void *p, size_t n, mlprof__sb *out);

/* Frees a stream (NULL is ignored). */
void mlprof__gz_free(mlprof__gz *z);

/* An output file written piece by piece, gzip-compressed when asked: the
 * commands' traces (merge, augment, run's merged trace), so that OUT.json.gz
 * is gzip as its name says. A path is written as mlprof__out_open does
 * (complete or absent); "-" or NULL is standard output, never compressed. */
typedef struct mlprof__wfile {
    mlprof__out o;
    int fd;
    int is_stdout;
    mlprof__gz *z;    /* NULL: plain */
    mlprof__sb zb;    /* compressed bytes on their way */
    int error;        /* errno of the write that failed (ENOMEM, EIO for zlib) */
    uint64_t written; /* bytes given, before compression */
} mlprof__wfile;
/* Opens path; gzip: -1 for "when the name ends in .gz", 0 never, 1 always.
 * MLPROF_OK, or an error (message set: the path, or zlib that cannot be
 * loaded). */
int mlprof__wfile_open(mlprof__wfile *w, const char *path, int gzip);
/* Writes n bytes (compressed and flushed when the file is gzip): 0, or -1
 * with w->error set (and every later write fails). */
int mlprof__wfile_write(mlprof__wfile *w, const void *p, size_t n);
/* Finishes: the gzip trailer, then the rename into place when ok and no
 * write failed, else the temporary file removed. MLPROF_OK or MLPROF_EIO
 * (message set, naming the file). */
int mlprof__wfile_close(mlprof__wfile *w, int ok);
/* Whether a name ends in .gz. */
int mlprof__gz_name(const char *path);

#endif /* MLPROF_GZ_H */
