/*
 * gz.c - gzip output while streaming (and reading it back, for the tests and
 * the readers), over zlib loaded with dlopen the first time it is needed.
 *
 * zlib's z_stream is declared in gz.h from its documented layout
 * (mlprof__zstream): the build needs no zlib headers.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <limits.h>
#include <pthread.h>

#include "gz.h"

typedef mlprof__zstream zs;

enum { Z_NO_FLUSH = 0, Z_SYNC_FLUSH = 2, Z_FINISH = 4 };
enum { Z_OK = 0, Z_STREAM_END = 1, Z_BUF_ERROR = -5, Z_MEM_ERROR = -4 };
enum { Z_DEFLATED = 8, Z_GZIP_WINDOW = 16 + 15, Z_MEM_LEVEL = 8, Z_DEFAULT_STRATEGY = 0 };

/* the zlib functions used, looked up once per process */
static struct {
    void *lib;
    const char *(*version)(void);
    int (*deflate_init)(zs *, int, int, int, int, int, const char *, int);
    int (*deflate)(zs *, int);
    int (*deflate_end)(zs *);
    int (*inflate_init)(zs *, int, const char *, int);
    int (*inflate)(zs *, int);
    int (*inflate_reset)(zs *);
    int (*inflate_end)(zs *);
    char name[256];
    char why[512];
} Z;
static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;

/* The library the first load opens: the zlib_library key's value, told by the
 * collector before it opens a stream; MLPROF_ZLIB_LIBRARY or libz.so.1 when
 * nobody told (the command's callers). */
static char g_library[256];

void mlprof__gz_library(const char *name)
{
    if (name && *name)
        snprintf(g_library, sizeof g_library, "%s", name);
}

static void zlib_load_once(void)
{
    const char *env = getenv("MLPROF_ZLIB_LIBRARY");
    snprintf(Z.name, sizeof Z.name, "%s", g_library[0] ? g_library : env && *env ? env : "libz.so.1");
    void *lib = dlopen(Z.name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(Z.why, sizeof Z.why, "%s", e ? e : "dlopen failed");
        return;
    }
    struct {
        void **fn;
        const char *sym;
    } const want[] = {
        {(void **)&Z.version, "zlibVersion"},      {(void **)&Z.deflate_init, "deflateInit2_"},
        {(void **)&Z.deflate, "deflate"},          {(void **)&Z.deflate_end, "deflateEnd"},
        {(void **)&Z.inflate_init, "inflateInit2_"}, {(void **)&Z.inflate, "inflate"},
        {(void **)&Z.inflate_reset, "inflateReset"}, {(void **)&Z.inflate_end, "inflateEnd"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        *want[i].fn = dlsym(lib, want[i].sym);
        if (!*want[i].fn) {
            snprintf(Z.why, sizeof Z.why, "it lacks %s", want[i].sym);
            dlclose(lib);
            return;
        }
    }
    Z.lib = lib;
}

static int zlib_load(const char *what)
{
    pthread_once(&g_load_once, zlib_load_once);
    if (Z.lib)
        return MLPROF_OK;
    return mlprof__fail(MLPROF_EUNSUPPORTED, "%s needs zlib, and zlib (%s) cannot be loaded: %s", what,
                        Z.name, Z.why);
}

/* zlib's allocations go through mlprof's allocator hook */
static void *z_alloc(void *opaque, unsigned items, unsigned size)
{
    (void)opaque;
    if (size && items > SIZE_MAX / size)
        return NULL;
    return mlprof__malloc((size_t)items * size);
}

static void z_free(void *opaque, void *p)
{
    (void)opaque;
    mlprof__free(p);
}

static void zs_prepare(zs *s)
{
    memset(s, 0, sizeof *s);
    s->zalloc = z_alloc;
    s->zfree = z_free;
}

static int deflate_start(zs *s, int level)
{
    zs_prepare(s);
    int rc = Z.deflate_init(s, level, Z_DEFLATED, Z_GZIP_WINDOW, Z_MEM_LEVEL, Z_DEFAULT_STRATEGY, Z.version(),
                            (int)sizeof *s);
    if (rc == Z_OK)
        return MLPROF_OK;
    if (rc == Z_MEM_ERROR)
        return mlprof__fail(MLPROF_ENOMEM, "gzip: out of memory starting zlib's deflate");
    return mlprof__fail(MLPROF_EIO, "gzip: zlib %s refused deflateInit2_ (error %d)", Z.version(), rc);
}

/* Room in out for at least want more bytes: points s's output at it. */
static int out_room(zs *s, mlprof__sb *out, size_t want)
{
    if (!mlprof__sb_reserve(out, want))
        return mlprof__fail(MLPROF_ENOMEM, "gzip: out of memory for the compressed bytes");
    size_t room = out->cap - out->len - 1;
    s->next_out = (unsigned char *)out->data + out->len;
    s->avail_out = room > UINT_MAX ? UINT_MAX : (unsigned)room;
    return MLPROF_OK;
}

/* Feeds n bytes to deflate with flush (Z_SYNC_FLUSH or Z_FINISH) and appends
 * all the output to out. */
static int deflate_into(zs *s, const void *p, size_t n, int flush, mlprof__sb *out)
{
    const unsigned char *in = p;
    for (;;) {
        size_t chunk = n > UINT_MAX ? UINT_MAX : n;
        s->next_in = in;
        s->avail_in = (unsigned)chunk;
        int last = chunk == n;
        int mode = last ? flush : Z_NO_FLUSH;
        for (;;) {
            int rc = out_room(s, out, chunk / 2 + 4096);
            if (rc != MLPROF_OK)
                return rc;
            unsigned char *start = s->next_out;
            int zr = Z.deflate(s, mode);
            out->len += (size_t)(s->next_out - start);
            out->data[out->len] = '\0';
            if (zr == Z_MEM_ERROR)
                return mlprof__fail(MLPROF_ENOMEM, "gzip: zlib ran out of memory");
            if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
                return mlprof__fail(MLPROF_EIO, "gzip: zlib's deflate failed (error %d%s%s)", zr,
                                    s->msg ? ": " : "", s->msg ? s->msg : "");
            if (zr == Z_STREAM_END || (s->avail_out != 0 && s->avail_in == 0 && mode != Z_FINISH))
                break;
            if (zr == Z_BUF_ERROR && s->avail_out != 0) /* nothing left to do */
                break;
        }
        in += chunk;
        n -= chunk;
        if (last)
            return MLPROF_OK;
    }
}

struct mlprof__gz {
    zs s;
    int started;      /* the header has been written */
    int failed;       /* the error code that made the stream unusable, or 0 */
    uint64_t written; /* uncompressed bytes so far */
};

mlprof__gz *mlprof__gz_open(int level)
{
    if (level < -1 || level > 9) {
        mlprof__fail(MLPROF_EINVAL, "gzip: level %d is out of range (-1 for the default, or 0 to 9)", level);
        return NULL;
    }
    if (zlib_load("gzip output") != MLPROF_OK)
        return NULL;
    mlprof__gz *z = mlprof__calloc(1, sizeof *z);
    if (!z) {
        mlprof__fail(MLPROF_ENOMEM, "gzip: out of memory");
        return NULL;
    }
    if (deflate_start(&z->s, level) != MLPROF_OK) {
        mlprof__free(z);
        return NULL;
    }
    return z;
}

int mlprof__gz_write(mlprof__gz *z, const void *p, size_t n, mlprof__sb *out)
{
    if (z->failed)
        return mlprof__fail(z->failed, "gzip: the stream failed before");
    int rc = deflate_into(&z->s, p, n, Z_SYNC_FLUSH, out);
    if (rc != MLPROF_OK) {
        z->failed = rc; /* deflate may have taken input whose output was lost */
        return rc;
    }
    z->started = 1;
    z->written += n;
    return MLPROF_OK;
}

static void put_le32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

int mlprof__gz_end_copy(const mlprof__gz *z, mlprof__sb *out)
{
    if (z->failed)
        return mlprof__fail(z->failed, "gzip: the stream failed before");
    /* a gzip header (deflate, no name, no time, Unix), for a stream that has
     * written nothing yet */
    static const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    unsigned char end[10];
    /* After a sync flush the deflate stream ends on a byte boundary; a final
     * block with fixed codes that holds only its end code is the bits 1, 01,
     * then seven zeros: 0x03 0x00. */
    end[0] = 0x03;
    end[1] = 0x00;
    put_le32(end + 2, z->started ? (uint32_t)z->s.adler : 0);
    put_le32(end + 6, (uint32_t)z->written);
    if (!z->started)
        mlprof__sb_put(out, (const char *)header, sizeof header);
    mlprof__sb_put(out, (const char *)end, sizeof end);
    return out->failed ? mlprof__fail(MLPROF_ENOMEM, "gzip: out of memory") : MLPROF_OK;
}

int mlprof__gz_member(const void *p, size_t n, mlprof__sb *out)
{
    int rc = zlib_load("gzip output");
    if (rc != MLPROF_OK)
        return rc;
    zs s;
    rc = deflate_start(&s, -1);
    if (rc != MLPROF_OK)
        return rc;
    rc = deflate_into(&s, p, n, Z_FINISH, out);
    Z.deflate_end(&s);
    return rc;
}

/* Inflates the members at in (n bytes) with s, started, into out. */
static int inflate_members(zs *s, const unsigned char *in, size_t n, mlprof__sb *out)
{
    size_t pos = 0;
    for (;;) {
        size_t chunk = n - pos > UINT_MAX ? UINT_MAX : n - pos;
        s->next_in = in + pos;
        s->avail_in = (unsigned)chunk;
        int rc = out_room(s, out, chunk * 2 + 4096);
        if (rc != MLPROF_OK)
            return rc;
        unsigned char *start = s->next_out;
        int zr = Z.inflate(s, Z_NO_FLUSH);
        out->len += (size_t)(s->next_out - start);
        out->data[out->len] = '\0';
        pos += chunk - s->avail_in;
        if (zr == Z_STREAM_END) {
            if (pos == n)
                return MLPROF_OK;
            if (n - pos < 2 || in[pos] != 0x1f || in[pos + 1] != 0x8b)
                return mlprof__fail(MLPROF_EPARSE, "gzip: the bytes at offset %zu, after a member, are not gzip",
                                    pos);
            Z.inflate_reset(s);
        } else if (zr == Z_MEM_ERROR) {
            return mlprof__fail(MLPROF_ENOMEM, "gzip: zlib ran out of memory at offset %zu", pos);
        } else if (zr == Z_BUF_ERROR && pos == n && s->avail_out != 0) {
            return mlprof__fail(MLPROF_EPARSE, "gzip: the data ends inside a member (truncated at %zu bytes)", n);
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
            return mlprof__fail(MLPROF_EPARSE, "gzip: corrupt data near offset %zu%s%s", pos, s->msg ? ": " : "",
                                s->msg ? s->msg : "");
        }
    }
}

int mlprof__gz_inflate(const void *p, size_t n, mlprof__sb *out)
{
    int rc = zlib_load("reading gzip");
    if (rc != MLPROF_OK)
        return rc;
    const unsigned char *in = p;
    if (n < 2 || in[0] != 0x1f || in[1] != 0x8b)
        return mlprof__fail(MLPROF_EPARSE, "gzip: the data does not start with gzip's magic bytes");
    zs s;
    zs_prepare(&s);
    if (Z.inflate_init(&s, Z_GZIP_WINDOW, Z.version(), (int)sizeof s) != Z_OK)
        return mlprof__fail(MLPROF_ENOMEM, "gzip: zlib's inflateInit2_ failed");
    rc = inflate_members(&s, in, n, out);
    Z.inflate_end(&s);
    return rc;
}

void mlprof__gz_free(mlprof__gz *z)
{
    if (!z)
        return;
    Z.deflate_end(&z->s);
    mlprof__free(z);
}

/* ---- output files, plain or gzip */

int mlprof__gz_name(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return n > 3 && strcmp(path + n - 3, ".gz") == 0;
}

int mlprof__wfile_open(mlprof__wfile *w, const char *path, int gzip)
{
    memset(w, 0, sizeof *w);
    mlprof__sb_init(&w->zb);
    w->fd = 1;
    w->o.fd = -1;
    if (!path || strcmp(path, "-") == 0) {
        w->is_stdout = 1;
        fflush(stdout); /* what was printed before comes first */
        return MLPROF_OK;
    }
    if (gzip < 0)
        gzip = mlprof__gz_name(path);
    if (gzip) {
        w->z = mlprof__gz_open(1); /* the library's level: 8.6x smaller than JSON, twice level 6's speed */
        if (!w->z) {
            char why[600];
            snprintf(why, sizeof why, "%s", mlprof_last_error());
            return mlprof__fail(MLPROF_EUNSUPPORTED, "cannot write %s as gzip: %s", path, why);
        }
    }
    int rc = mlprof__out_open(&w->o, path);
    if (rc != MLPROF_OK) {
        mlprof__gz_free(w->z);
        w->z = NULL;
        return rc;
    }
    w->fd = w->o.fd;
    return MLPROF_OK;
}

int mlprof__wfile_write(mlprof__wfile *w, const void *p, size_t n)
{
    if (w->error)
        return -1;
    if (!n)
        return 0;
    const void *data = p;
    size_t len = n;
    if (w->z) {
        mlprof__sb_reset(&w->zb);
        int rc = mlprof__gz_write(w->z, p, n, &w->zb);
        if (rc != MLPROF_OK) {
            w->error = rc == MLPROF_ENOMEM ? ENOMEM : EIO;
            return -1;
        }
        data = w->zb.data;
        len = w->zb.len;
    }
    if (len && mlprof__write_all(w->fd, data, len) != 0) {
        w->error = errno ? errno : EIO;
        return -1;
    }
    w->written += n;
    return 0;
}

int mlprof__wfile_close(mlprof__wfile *w, int ok)
{
    int rc = MLPROF_OK;
    if (ok && !w->error && w->z) {
        mlprof__sb_reset(&w->zb);
        if (mlprof__gz_end_copy(w->z, &w->zb) != MLPROF_OK ||
            (w->zb.len && mlprof__write_all(w->fd, w->zb.data, w->zb.len) != 0))
            w->error = errno ? errno : EIO;
    }
    if (ok && w->error) {
        rc = mlprof__fail(MLPROF_EIO, "cannot write %s: %s", w->is_stdout ? "standard output" : w->o.path,
                          strerror(w->error));
        ok = 0;
    }
    if (!w->is_stdout) {
        int crc = mlprof__out_commit(&w->o, ok);
        if (rc == MLPROF_OK)
            rc = crc;
    }
    mlprof__gz_free(w->z);
    w->z = NULL;
    mlprof__sb_free(&w->zb);
    return rc;
}
